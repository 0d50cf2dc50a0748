// Choosing an ordering planner by name, for the command line and benches:
// one registry table (core/registry.hpp). "ilp" needs a `SolverLike`
// backend: by name it runs on a backend chosen through solver/select.hpp, by
// type through the `order_by_name` overload that takes one. On graphs above
// `ilp_max_ops` it runs the windowed improvement instead of one MILP over the
// whole order, which would not solve in time.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/core/error.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/schedule/order/default_order.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/schedule/order/ilp_order.hpp>
#include <memplan/schedule/order/order.hpp>
#include <memplan/schedule/order/windowed.hpp>
#include <memplan/solver/select.hpp>
#include <memplan/solver/solver.hpp>

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// Knobs the named planners take.
struct order_options {
    memplan::time_limit time_limit = 10.0; ///< ilp: seconds from the call's start, or a deadline
    double gap = 1e-4;              ///< ilp: stop once the peak is within this fraction of the bound
    std::size_t lookahead = 3;      ///< greedy: lookahead depth (<= 1: off)
    std::size_t ilp_max_ops = 300;  ///< ilp: larger graphs get the windowed improvement
    std::size_t window = 24;        ///< ilp on large graphs: steps per window
    bool verbose = false;           ///< ilp: let the backend print its log
    std::string solver;             ///< ilp by name: the backend (solver/select.hpp); empty: the default
};

/// `ilp` on backend `solver`: MODeL's MILP from a greedy warm start, or the
/// windowed improvement on large graphs.
template <class Graph, SolverLike S>
order_result<Graph> order_ilp(const Graph& g, const S& solver, const order_options& opt = {}) {
    greedy_order warm;
    warm.lookahead = opt.lookahead;
    if (g.num_ops() <= opt.ilp_max_ops) {
        ilp_order<S> p{solver};
        p.options.time_limit = opt.time_limit;
        p.gap = opt.gap;
        p.options.verbose = opt.verbose;
        p.warm = warm;
        return p.order(g);
    }
    windowed<S> p{solver};
    p.window = opt.window;
    p.time_limit = opt.time_limit;
    p.gap = opt.gap;
    p.start = warm;
    return p.order(g);
}

template <class Graph>
using order_entry = registry_entry<order_result<Graph> (*)(const Graph&, const order_options&)>;

/// Every ordering planner selectable by name; the first is the default.
template <class Graph>
std::span<const order_entry<Graph>> order_registry() {
    static constexpr std::array<order_entry<Graph>, 3> table{
        order_entry<Graph>{default_order::name, "the order the graph lists (default)", false,
                           [](const Graph& g, const order_options&) { return default_order{}.order(g); }},
        order_entry<Graph>{greedy_order::name, "memory-aware list scheduling with lookahead", false,
                           [](const Graph& g, const order_options& o) {
                               greedy_order p;
                               p.lookahead = o.lookahead;
                               return p.order(g);
                           }},
        order_entry<Graph>{"ilp", "MODeL's MILP (windowed on large graphs) on a solver backend", true,
                           [](const Graph& g, const order_options& o) {
                               return with_solver<order_result<Graph>>(
                                   o.solver, [&](const auto& backend) { return order_ilp(g, backend, o); });
                           }},
    };
    return table;
}

/// The ordering planners selectable by name.
inline std::vector<std::string_view> order_names() {
    std::vector<std::string_view> v;
    for (const auto& e : order_registry<graph>()) v.push_back(e.name);
    return v;
}

/// The registry row called `name`; throws `memplan::error("order")` naming
/// the unknown planner and listing the known ones.
template <class Graph = graph>
const order_entry<Graph>& find_order_planner(std::string_view name) {
    return registry_lookup<typename order_entry<Graph>::run_type>(order_registry<Graph>(), "order",
                                                                  "ordering planner", name);
}

/// Runs the planner called `name`; "ilp" runs on the backend `opt.solver`
/// names (throws when none is compiled in). Throws `memplan::error` for an
/// unknown name.
template <class Graph>
order_result<Graph> order_by_name(std::string_view name, const Graph& g, const order_options& opt = {}) {
    return find_order_planner<Graph>(name).run(g, opt);
}

/// Runs the planner called `name`, solving MILPs with `solver`.
template <class Graph, SolverLike S>
order_result<Graph> order_by_name(std::string_view name, const Graph& g, const S& solver,
                                  const order_options& opt = {}) {
    if (name == "ilp") return order_ilp(g, solver, opt);
    return order_by_name(name, g, opt);
}

} // namespace memplan
