// One pattern for choosing a policy by name at run time: a table of entries
// {name, what it is, how to run it, whether it takes a MILP solver}. Code
// selects planners by type; only the edges (the command line, benches,
// configuration files) go through a table, and every table answers an
// unknown name with the same message listing the choices (OR-tools keeps one
// `SolverType` enum with one parser in the same spirit).
#pragma once

#include <memplan/core/error.hpp>

#include <span>
#include <string>
#include <string_view>

namespace memplan {

/// One row of a registry. `Run` is a function pointer type; its signature is
/// the table's (allocators take a problem, planners take a graph).
template <class Run>
struct registry_entry {
    using run_type = Run;
    std::string_view name;        ///< what the command line calls it; equals the policy type's `name`
    std::string_view description; ///< one line for help texts
    bool needs_solver = false;    ///< true: runs only with a MILP backend (see solver/select.hpp)
    Run run = nullptr;
};

/// "a, b, c": the names of a table, in its order.
template <class Run>
std::string registry_names(std::span<const registry_entry<Run>> table) {
    std::string s;
    for (const auto& e : table) s += (s.empty() ? "" : ", ") + std::string(e.name);
    return s;
}

/// The entry called `name`, or nullptr.
template <class Run>
const registry_entry<Run>* registry_find(std::span<const registry_entry<Run>> table, std::string_view name) noexcept {
    for (const auto& e : table)
        if (e.name == name) return &e;
    return nullptr;
}

/// The entry called `name`. Throws `memplan::error(category)` "unknown
/// <kind> '<name>'; expected one of: ..." otherwise: the one message every
/// registry gives.
template <class Run>
const registry_entry<Run>& registry_lookup(std::span<const registry_entry<Run>> table, std::string_view category,
                                           std::string_view kind, std::string_view name) {
    if (const auto* e = registry_find(table, name)) return *e;
    throw error(category, "unknown " + std::string(kind) + " '" + std::string(name) +
                              "'; expected one of: " + registry_names(table));
}

} // namespace memplan
