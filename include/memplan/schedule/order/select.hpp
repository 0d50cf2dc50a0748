// Choosing an ordering planner by name, for the command line. "ilp" needs a
// `SolverLike` backend, so it is only reachable through the overload that
// takes one; on graphs above `ilp_max_ops` it runs the windowed improvement
// instead of one MILP over the whole order, which would not solve in time.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/core/error.hpp>
#include <memplan/schedule/order/default_order.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/schedule/order/ilp_order.hpp>
#include <memplan/schedule/order/order.hpp>
#include <memplan/schedule/order/windowed.hpp>
#include <memplan/solver/solver.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// The ordering planners selectable by name.
inline std::vector<std::string_view> order_names() { return {"default", "greedy", "ilp"}; }

/// Knobs the command line passes to the named planners.
struct order_options {
    memplan::deadline deadline{};   ///< ilp: the whole call stops by then
    double time_limit_seconds = 10; ///< ilp: and at most this long from its start
    double gap = 1e-4;              ///< ilp: stop once the peak is within this fraction of the bound
    std::size_t lookahead = 3;      ///< greedy: lookahead depth (<= 1: off)
    std::size_t ilp_max_ops = 300;  ///< ilp: larger graphs get the windowed improvement
    std::size_t window = 24;        ///< ilp on large graphs: steps per window
    bool verbose = false;           ///< ilp: let the backend print its log
};

namespace detail {

inline std::string order_names_text() {
    std::string s;
    for (auto n : order_names()) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
}

template <class Graph>
bool run_plain_order(std::string_view name, const Graph& g, const order_options& opt, order_result<Graph>& r) {
    if (name == default_order::name) {
        r = default_order{}.order(g);
        return true;
    }
    if (name == greedy_order::name) {
        greedy_order p;
        p.lookahead = opt.lookahead;
        r = p.order(g);
        return true;
    }
    return false;
}

} // namespace detail

/// Runs the planner called `name` ("default" or "greedy"). Throws
/// `memplan::error` (category "order") for an unknown name or for "ilp",
/// which needs the overload with a solver.
template <class Graph>
order_result<Graph> order_by_name(std::string_view name, const Graph& g, const order_options& opt = {}) {
    order_result<Graph> r;
    if (detail::run_plain_order(name, g, opt, r)) return r;
    if (name == "ilp")
        throw error("order", "ordering planner 'ilp' needs a MILP solver backend (GLPK or CBC)");
    throw error("order", "unknown ordering planner '" + std::string(name) + "'; known: " + detail::order_names_text());
}

/// Runs the planner called `name`, solving MILPs with `solver`. Throws
/// `memplan::error` (category "order") for an unknown name.
template <class Graph, SolverLike S>
order_result<Graph> order_by_name(std::string_view name, const Graph& g, const S& solver,
                                  const order_options& opt = {}) {
    order_result<Graph> r;
    if (detail::run_plain_order(name, g, opt, r)) return r;
    if (name != "ilp")
        throw error("order", "unknown ordering planner '" + std::string(name) + "'; known: " +
                                 detail::order_names_text());
    greedy_order warm;
    warm.lookahead = opt.lookahead;
    if (g.num_ops() <= opt.ilp_max_ops) {
        ilp_order<S> p{solver};
        p.options.deadline = opt.deadline;
        p.options.time_limit_seconds = opt.time_limit_seconds;
        p.gap = opt.gap;
        p.options.verbose = opt.verbose;
        p.warm = warm;
        return p.order(g);
    }
    windowed<S> p{solver};
    p.window = opt.window;
    p.deadline = opt.deadline;
    p.time_limit_seconds = opt.time_limit_seconds;
    p.gap = opt.gap;
    p.start = warm;
    return p.order(g);
}

} // namespace memplan
