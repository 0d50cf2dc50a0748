// Rematerialization planners by name, for the command line and benches: one
// registry table (core/registry.hpp). `checkmate` needs a MILP solver: by
// name it runs on the backend `solver` names (solver/select.hpp), and `auto`
// then includes it as a member; by type, `plan_remat_with(name, g, options,
// solver)` passes a backend object. Each runs on a graph or on a
// remat_context the caller built and shares between runs.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/remat/block_dp.hpp>
#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/checkmate.hpp>
#include <memplan/remat/chen.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/portfolio.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/solver/select.hpp>
#include <memplan/solver/solver.hpp>

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// Runs `checkmate` on backend `solver`, and `auto` with it as a member; any
/// other name as `plan_remat` does. On a context the caller built, or on a
/// graph (a context built for the call).
template <class Graph, SolverLike S>
remat_result_of<Graph> plan_remat_with(std::string_view name, const remat_context<Graph>& ctx,
                                       const remat_options& opt, const S& solver);

/// A row runs its planner on a context (remat_planner::checked: what it
/// returns is checked); `solver` names the backend for the rows that need
/// one (empty: the default; ignored by the others).
template <class Graph>
using remat_entry = registry_entry<remat_result_of<Graph> (*)(const remat_context<Graph>&, const remat_options&,
                                                              std::string_view)>;

namespace detail {

template <class P, class Graph>
constexpr remat_entry<Graph> remat_row(std::string_view description) {
    return {P::name, description, false,
            [](const remat_context<Graph>& ctx, const remat_options& o, std::string_view) { return P{}.checked(ctx, o); }};
}

} // namespace detail

/// Every rematerialization planner selectable by name; the first is the
/// default. `auto` takes the Checkmate MILP as a member when a backend is
/// compiled in.
template <class Graph>
std::span<const remat_entry<Graph>> remat_registry() {
    static constexpr std::array<remat_entry<Graph>, 8> table{
        remat_entry<Graph>{auto_remat::name,
                           "portfolio of the planners below (with checkmate on small graphs when a solver is "
                           "compiled in); the cheapest plan that fits wins (default)",
                           false,
                           [](const remat_context<Graph>& ctx, const remat_options& o, std::string_view solver) {
                               if (solver_backends().empty()) return auto_remat{}.checked(ctx, o);
                               return with_solver<remat_result_of<Graph>>(solver, [&](const auto& s) {
                                   return plan_remat_with(auto_remat::name, ctx, o, s);
                               });
                           }},
        detail::remat_row<joint, Graph>("checkpointing jointly with each op's variant (descent on keep sets)"),
        remat_entry<Graph>{"checkmate", "Checkmate's MILP (exact on small graphs, LP relaxation and rounding above)",
                           true,
                           [](const remat_context<Graph>& ctx, const remat_options& o, std::string_view solver) {
                               return with_solver<remat_result_of<Graph>>(solver, [&](const auto& s) {
                                   return plan_remat_with("checkmate", ctx, o, s);
                               });
                           }},
        detail::remat_row<chain_dp, Graph>("Rotor's optimal dynamic program over the chain of segments"),
        detail::remat_row<block_dp, Graph>("blocks solved by joint at several memory levels, composed by the chain "
                                           "program (identical blocks solved once)"),
        detail::remat_row<chen_greedy, Graph>("Chen et al.'s greedy checkpoints for the budget"),
        detail::remat_row<sqrt_n, Graph>("Chen et al.'s sqrt(n) checkpoints"),
        detail::remat_row<store_all, Graph>("keep every forward tensor (no recomputation)"),
    };
    return table;
}

/// The planner names, the default first.
inline std::vector<std::string_view> remat_names() {
    std::vector<std::string_view> v;
    for (const auto& e : remat_registry<graph>()) v.push_back(e.name);
    return v;
}

/// The registry row called `name`; throws `memplan::error("remat")` naming
/// the unknown planner and listing the known ones.
template <class Graph = graph>
const remat_entry<Graph>& find_remat_planner(std::string_view name) {
    return registry_lookup<typename remat_entry<Graph>::run_type>(remat_registry<Graph>(), "remat", "planner", name);
}

/// Runs the planner called `name` on a context the caller built (to share
/// it between runs); those that need a MILP solver run on the backend
/// `solver` names (throws when none is compiled in).
template <class Graph>
remat_result_of<Graph> plan_remat(std::string_view name, const remat_context<Graph>& ctx, const remat_options& opt,
                                  std::string_view solver = {}) {
    return find_remat_planner<Graph>(name).run(ctx, opt, solver);
}

/// The same on a graph: the context is built for the call (after the name is
/// checked, and counted in the time limit).
template <class Graph>
remat_result_of<Graph> plan_remat(std::string_view name, const Graph& g, const remat_options& opt,
                                  std::string_view solver = {}) {
    const auto& e = find_remat_planner<Graph>(name);
    return detail::with_context(g, opt, [&](const remat_context<Graph>& ctx, const remat_options& o) {
        return e.run(ctx, o, solver);
    });
}

template <class Graph, SolverLike S>
remat_result_of<Graph> plan_remat_with(std::string_view name, const remat_context<Graph>& ctx,
                                       const remat_options& opt, const S& solver) {
    if (name == checkmate<S>::name) return checkmate<S>{{}, solver}.checked(ctx, opt);
    if (name == auto_remat::name)
        return basic_auto_remat<checkmate<S>>{{}, checkmate<S>{{}, solver}}.checked(ctx, opt);
    return find_remat_planner<Graph>(name).run(ctx, opt, {});
}

template <class Graph, SolverLike S>
remat_result_of<Graph> plan_remat_with(std::string_view name, const Graph& g, const remat_options& opt,
                                       const S& solver) {
    if (name != checkmate<S>::name && name != auto_remat::name) (void)find_remat_planner<Graph>(name);
    return detail::with_context(g, opt, [&](const remat_context<Graph>& ctx, const remat_options& o) {
        return plan_remat_with(name, ctx, o, solver);
    });
}

} // namespace memplan
