// Rematerialization planners by name, for the command line and benches:
// `remat_names()` lists them; `plan_remat(name, g, options)` runs one.
// `checkmate` needs a MILP solver: `plan_remat_with(name, g, options, solver)`
// runs any planner, passing the solver to those that take one.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/checkmate.hpp>
#include <memplan/remat/chen.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/portfolio.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/solver/solver.hpp>

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace memplan {

namespace detail {
inline constexpr std::array<std::string_view, 7> remat_name_list{"auto", "joint", "checkmate", "chain",
                                                                 "chen_greedy", "sqrt_n", "store_all"};

[[noreturn]] inline void unknown_remat(std::string_view name) {
    std::string all;
    for (auto n : remat_name_list) all += (all.empty() ? "" : ", ") + std::string(n);
    throw error("remat", "unknown planner '" + std::string(name) + "' (choose one of: " + all + ")");
}
} // namespace detail

/// The planner names `plan_remat_with` accepts; the first is the default.
inline std::span<const std::string_view> remat_names() noexcept { return detail::remat_name_list; }

/// Runs the planner called `name` (any but `checkmate`, which needs a
/// solver). Throws `memplan::error` for an unknown name.
template <class Graph>
basic_remat_result<typename Graph::size_type, typename Graph::id_type> plan_remat(std::string_view name, const Graph& g,
                                                                                  const remat_options& opt) {
    if (name == auto_remat::name) return auto_remat{}.plan(g, opt);
    if (name == joint::name) return joint{}.plan(g, opt);
    if (name == chain_dp::name) return chain_dp{}.plan(g, opt);
    if (name == chen_greedy::name) return chen_greedy{}.plan(g, opt);
    if (name == sqrt_n::name) return sqrt_n{}.plan(g, opt);
    if (name == store_all::name) return store_all{}.plan(g, opt);
    if (name == "checkmate")
        throw error("remat", "planner 'checkmate' needs a MILP solver (build with GLPK or CBC and pass --solver)");
    detail::unknown_remat(name);
}

/// Runs the planner called `name`, with `solver` for those that take one.
template <class Graph, SolverLike S>
basic_remat_result<typename Graph::size_type, typename Graph::id_type>
plan_remat_with(std::string_view name, const Graph& g, const remat_options& opt, const S& solver) {
    if (name == checkmate<S>::name) return checkmate<S>{{}, solver}.plan(g, opt);
    if (name == auto_remat::name) return basic_auto_remat<checkmate<S>>{{}, checkmate<S>{{}, solver}}.plan(g, opt);
    return plan_remat(name, g, opt);
}

} // namespace memplan
