// Operator ordering: choose a topological order of the ops (each once, with
// its default variant) whose memory peak, as schedule/liveness.hpp and
// schedule/bounds.hpp define it, is as small as possible. This header holds what every ordering
// planner shares: the result, the `OrderPlannerLike` policy and the check that
// an order is topological (the order-independent lower bounds are in
// schedule/bounds.hpp and schedule/cut_bound.hpp).
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/core/status.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// What an ordering planner returns. `peak` is always the real liveness peak
/// of `schedule` (`schedule_lower_bound`), whatever model the planner used;
/// `bound` is a proven lower bound on the peak of every order of the graph.
template <class Graph>
struct order_result {
    memplan::status status = memplan::status::error;
    std::string message;                 ///< notes: variant kept, solver outcome, ...
    typename Graph::size_type bound = 0; ///< no order peaks below it (>= schedule_free_lower_bound)
    typename Graph::size_type size = 0;  ///< the peak: schedule_lower_bound of `schedule`
    double seconds = 0;                  ///< wall time of the planner
    basic_schedule<typename Graph::id_type> schedule;
};

/// An ordering planner: a static `name` and a const `order(g)`. Planners
/// throw `memplan::error` on a malformed graph and return outcomes as values.
template <class P, class Graph>
concept OrderPlannerLike = requires(const P& p, const Graph& g) {
    { P::name } -> std::convertible_to<std::string_view>;
    { p.order(g) } -> std::same_as<order_result<Graph>>;
};

/// Why `order` is not a topological order of `g` using every op exactly once
/// (an unknown op, a repeat, a missing op, a read before the producer), or
/// nullopt when it is one.
template <class Graph>
std::optional<std::string> check_topological_order(const Graph& g, const std::vector<typename Graph::id_type>& order) {
    const graph_index<Graph> index(g);
    std::vector<char> done(g.num_ops(), 0);
    for (std::size_t i = 0; i < order.size(); ++i) {
        const auto o = order[i];
        if (o >= g.num_ops()) return "step " + std::to_string(i) + " names op id " + std::to_string(o) + " which does not exist";
        if (done[o]) return "op '" + g.op(o).name + "' appears twice (again at step " + std::to_string(i) + ")";
        for (auto t : g.op(o).inputs) {
            const auto p = index.producer[t];
            if (p != Graph::npos && !done[p])
                return "op '" + g.op(o).name + "' at step " + std::to_string(i) + " reads tensor '" + g.tensor(t).name +
                       "' before its producer '" + g.op(p).name + "'";
        }
        done[o] = 1;
    }
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        if (!done[o]) return "op '" + g.op(static_cast<typename Graph::id_type>(o)).name + "' is missing";
    return std::nullopt;
}

/// The op ids of a schedule, in step order.
template <class Id>
std::vector<Id> order_of(const basic_schedule<Id>& s) {
    std::vector<Id> v;
    v.reserve(s.size());
    for (const auto& st : s) v.push_back(st.op);
    return v;
}

namespace detail {

/// Fills schedule, peak and a status (optimal when the peak meets the bound)
/// from an order. Throws when the order is not topological: a planner bug.
template <class Graph>
void finish_order_result(const Graph& g, const std::vector<typename Graph::id_type>& order,
                         typename Graph::size_type bound, order_result<Graph>& r) {
    if (auto why = check_topological_order(g, order))
        throw error("order", "planner produced an invalid order for graph '" + g.name() + "': " + *why);
    r.schedule = schedule_from_order(g, order);
    r.size = schedule_lower_bound(g, r.schedule);
    r.bound = std::min(bound, r.size);
    r.status = r.size <= r.bound ? status::optimal : status::feasible;
}

/// Rejects graphs an order cannot be made for.
template <class Graph>
void check_orderable(const Graph& g) {
    validate(g);
    if (g.num_ops() == 0) throw error("order", "graph '" + g.name() + "' has no ops to order");
}

} // namespace detail
} // namespace memplan
