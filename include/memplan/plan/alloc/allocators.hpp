// Choosing an allocation policy by name at run time (the command line's
// --allocator). The registry is a table of (name, function) entries built from
// AllocatorLike types, so adding a policy is one line; other headers (exact or
// MILP allocators) can build a larger table and look names up in it with
// `allocate_with`. `make_plan` by allocator name is in plan/make_plan.hpp.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/plan/alloc/best_heuristic.hpp>
#include <memplan/plan/alloc/greedy.hpp>
#include <memplan/plan/alloc/no_reuse.hpp>
#include <memplan/plan/alloc/online_best_fit.hpp>
#include <memplan/plan/alloc/problem.hpp>

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <string_view>

namespace memplan {

/// One registered allocation policy.
template <class Size = std::uint64_t>
struct allocator_entry {
    std::string_view name;
    basic_alloc_result<Size> (*place)(const basic_alloc_problem<Size>&);
};

/// The registry entry of policy `A` (default-constructed for each call).
template <class A, class Size = std::uint64_t>
    requires AllocatorLike<A, Size>
constexpr allocator_entry<Size> entry_of() {
    return {A::name, [](const basic_alloc_problem<Size>& p) { return A{}.place(p); }};
}

/// The heuristic allocators, in the order the command line lists them.
template <class Size = std::uint64_t>
std::span<const allocator_entry<Size>> heuristic_allocators() {
    static constexpr std::array<allocator_entry<Size>, 5> table{
        entry_of<no_reuse, Size>(),       entry_of<greedy_by_size, Size>(),
        entry_of<greedy_by_lifetime, Size>(), entry_of<online_best_fit, Size>(),
        entry_of<best_heuristic, Size>(),
    };
    return table;
}

/// Names of the heuristic allocators: no_reuse, greedy_by_size,
/// greedy_by_lifetime, online_best_fit, best_heuristic.
inline std::span<const std::string_view> heuristic_allocator_names() {
    static constexpr std::array<std::string_view, 5> names{no_reuse::name, greedy_by_size::name,
                                                            greedy_by_lifetime::name, online_best_fit::name,
                                                            best_heuristic::name};
    return names;
}

/// Runs the entry of `table` called `name`. Throws `memplan::error` ("alloc")
/// naming the unknown allocator and the known ones.
template <class Size>
basic_alloc_result<Size> allocate_with(std::span<const allocator_entry<Size>> table, std::string_view name,
                                       const basic_alloc_problem<Size>& p) {
    for (const auto& e : table)
        if (e.name == name) return e.place(p);
    std::string known;
    for (const auto& e : table) {
        if (!known.empty()) known += ", ";
        known += e.name;
    }
    throw error("alloc", "unknown allocator '" + std::string(name) + "'; expected one of: " + known);
}

/// Places `p` with the heuristic allocator called `name` (see
/// `heuristic_allocator_names`). Throws `memplan::error` for an unknown name.
template <class Size>
basic_alloc_result<Size> allocate(std::string_view name, const basic_alloc_problem<Size>& p) {
    return allocate_with<Size>(heuristic_allocators<Size>(), name, p);
}

/// An AllocatorLike that forwards to a registry entry chosen at run time.
template <class Size = std::uint64_t>
struct named_allocator {
    static constexpr std::string_view name = "named";
    std::span<const allocator_entry<Size>> table = heuristic_allocators<Size>();
    std::string_view which;

    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const { return allocate_with<Size>(table, which, p); }
};

} // namespace memplan
