// The options of the memplan command that choose a planner (--alloc,
// --order, --remat, --solver), checked against the library's registries
// before any work, and planning whose result goes through the validator (a
// plan the validator rejects is an internal error, exit 3, never written).
#pragma once

#include "common.hpp"
#include "progress.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/schedule/order/select.hpp>
#include <memplan/solver/select.hpp>

#include <iostream>
#include <span>
#include <string>
#include <string_view>

namespace memplan::cli {

/// The registry row `name` of `table`, for option `option`; an unknown
/// name is the library's one message, prefixed with the option.
template <class Run>
const registry_entry<Run>& choose(std::span<const registry_entry<Run>> table, std::string_view option,
                                  std::string_view kind, const std::string& name) {
    if (const auto* e = registry_find(table, name)) return *e;
    try {
        registry_lookup(table, "cli", kind, name);
    } catch (const error& e) {
        throw error("cli", "option " + std::string(option) + ": " + e.message());
    }
    throw error("cli", "option " + std::string(option) + ": unknown " + std::string(kind)); // not reached
}

/// --solver: the backend a planner that needs one runs on (empty: the
/// default). Checked when given, and when `needed`.
inline std::string solver_option_value(const parsed_args& a, bool needed) {
    const auto given = a.value_or("--solver", "");
    if (given.empty() && !needed) return given;
    try {
        return std::string(check_solver_name(given));
    } catch (const error& e) {
        throw error("cli", "option --solver: " + e.message());
    }
    return given; // not reached
}

/// An allocator chosen on the command line: its registry row and settings.
struct allocator_choice {
    const allocator_entry<>* entry = nullptr;
    allocator_settings settings;

    std::string name() const { return std::string(entry->name); }
};

/// Checks --alloc, --solver and --time-limit before any work, so a typo costs
/// nothing and writes nothing.
inline allocator_choice allocator_option(const parsed_args& a, std::string_view fallback = default_allocator) {
    allocator_choice c;
    c.entry = &choose(allocator_registry(), "--alloc", "allocator", a.value_or("--alloc", std::string(fallback)));
    c.settings.solver = solver_option_value(a, c.entry->needs_solver);
    c.settings.time_limit = command_deadline(a); // the command's deadline alone
    c.settings.gap = gap_option_value(a);
    c.settings.on_progress = alloc_progress_printer();
    return c;
}

/// An allocator by name with default settings (the report's baselines).
inline allocator_choice allocator_named(std::string_view name) {
    allocator_choice c;
    c.entry = &find_allocator(name);
    return c;
}

/// Checks --order (and --solver for ilp) before any work.
inline std::string order_option_value(const parsed_args& a) {
    const auto& e = choose(order_registry<graph>(), "--order", "ordering planner", a.value_or("--order", "default"));
    solver_option_value(a, e.needs_solver);
    return std::string(e.name);
}

/// Checks --remat (and --solver) before any work; the default is the first
/// row of the registry (`auto`).
inline std::string remat_option_value(const parsed_args& a) {
    const auto& e = choose(remat_registry<graph>(), "--remat", "planner",
                           a.value_or("--remat", std::string(remat_registry<graph>().front().name)));
    solver_option_value(a, e.needs_solver);
    return std::string(e.name);
}

/// Plans schedule `s` of `g` and checks the result; a plan the validator
/// rejects is an internal error.
inline memplan::planned plan_checked(const memplan::graph& g, const memplan::schedule& s,
                              const allocator_choice& allocator, std::uint64_t alignment) {
    memplan::plan_options opt;
    opt.alignment = alignment;
    // make_plan checks the plan with the validator (plan_options::validate): a plan it rejects has no solution.
    auto r = memplan::make_plan(g, s, named_allocator<>(allocator.name(), allocator.settings), opt);
    if (!memplan::has_solution(r.status))
        throw internal_error("allocator '" + std::string(allocator.name()) + "' found no plan for graph '" + g.name() + "' (" +
                             std::string(memplan::to_string(r.status)) + "): " + r.message);
    return r;
}

inline memplan::planned plan_checked(const memplan::graph& g, const allocator_choice& allocator,
                              std::uint64_t alignment) {
    return plan_checked(g, memplan::default_schedule(g), allocator, alignment);
}

/// The ordering planner `name` on `g`; "ilp" runs on --solver.
inline order_result<graph> order_with(const std::string& name, const graph& g, const parsed_args& a,
                                      memplan::deadline until) {
    order_options o;
    o.time_limit = until;
    if (const auto gap = gap_option_value(a)) o.gap = *gap;
    o.solver = a.value_or("--solver", "");
    return order_by_name(name, g, o);
}

/// The store-all plan of `g`: the arena that budgets in percent refer to.
inline memplan::remat_result store_all_checked(const memplan::remat_context<memplan::graph>& ctx,
                                               const memplan::remat_options& base) {
    memplan::remat_options o;
    o.alignment = base.alignment;
    o.time_limit = base.time_limit;
    auto r = memplan::store_all{}.checked(ctx, o);
    if (!memplan::has_solution(r.status))
        throw internal_error("store_all found no plan for graph '" + ctx.graph().name() + "': " + r.message);
    return r;
}

/// A rematerialization plan the validator rejects is an internal error.
/// A planner's result that the library rejected (the validator, or an arena
/// over the budget: `remat_planner::plan` checks both) is a bug: exit 3.
inline void reject_internal_error(const memplan::graph& g, const memplan::remat_result& r) {
    if (r.status == memplan::status::error && r.message.starts_with("internal error"))
        throw internal_error("rematerialization planner '" + r.planner + "' on graph '" + g.name() + "': " + r.message);
}

/// Lists what --alloc, --order, --remat and --solver accept in this build.
inline void print_planner_lists() {
    std::cout << "Allocators (--alloc): " << registry_names(allocator_registry()) << "\n"
              << "Orders (--order): " << registry_names(order_registry<graph>()) << "\n"
              << "Rematerialization planners (--remat): " << registry_names(remat_registry<graph>()) << "\n"
              << "Solvers (--solver): " << solver_backend_names() << "\n";
}

} // namespace memplan::cli
