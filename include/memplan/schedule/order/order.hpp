// Operator ordering: choose a topological order of the ops (each once, with
// its default variant) whose memory peak, as liveness.hpp and bounds.hpp
// define it, is as small as possible. This header holds what every ordering
// planner shares: the result, the `OrderPlannerLike` policy, an
// order-independent lower bound, and the check that an order is topological.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/core/status.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
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

/// An order-independent lower bound on the peak, the largest of: each op's
/// step (its distinct inputs and outputs, its default variant's workspace,
/// less what its in-place pairs may share, plus every persistent graph
/// input); step 0 (every graph input is live there, with the outputs and
/// workspace of whichever source op runs first); the last step (every
/// persistent tensor and graph output is live there). It equals or beats
/// `schedule_free_lower_bound` except on graphs where an op produces a
/// persistent tensor: liveness.hpp starts such a tensor at its producer's
/// step, while schedule_free_lower_bound counts it on every step.
template <class Graph>
typename Graph::size_type order_lower_bound(const Graph& g) {
    using size_type = typename Graph::size_type;
    using id_type = typename Graph::id_type;
    const graph_index<Graph> index(g);
    size_type best = 0;
    {
        size_type persistent_inputs = 0;
        for (std::size_t t = 0; t < g.num_tensors(); ++t)
            if (g.tensor(static_cast<id_type>(t)).persistent && index.is_graph_input(static_cast<id_type>(t)))
                persistent_inputs += g.tensor(static_cast<id_type>(t)).bytes;
        best = persistent_inputs;
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto id = static_cast<id_type>(o);
            const auto& op = g.op(id);
            std::unordered_set<id_type> seen;
            size_type bytes = persistent_inputs + g.workspace_of(id, default_variant(g, id));
            const auto& reads = g.reads_of(id, default_variant(g, id));
            for (const auto* list : {&reads, &op.outputs})
                for (auto t : *list)
                    if (seen.insert(t).second && !(g.tensor(t).persistent && index.is_graph_input(t)))
                        bytes += g.tensor(t).bytes;
            for (auto [x, y] : op.inplace)
                if (!g.tensor(x).persistent && x != y && std::find(reads.begin(), reads.end(), x) != reads.end())
                    bytes -= std::min({bytes, g.tensor(x).bytes, g.tensor(y).bytes});
            best = std::max(best, bytes);
        }
    }
    size_type inputs = 0, at_end = 0;
    std::vector<char> is_output(g.num_tensors(), 0);
    for (auto t : g.outputs()) is_output[t] = 1;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& x = g.tensor(static_cast<id_type>(t));
        if (index.is_graph_input(static_cast<id_type>(t))) inputs += x.bytes;
        if (x.persistent || is_output[t]) at_end += x.bytes;
    }
    // In-place pairs may share bytes on a step; subtracting every pair's share
    // keeps the step-0 figure a bound whether or not the pair is taken.
    std::optional<size_type> first_op;
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        bool source = true;
        for (auto t : op.inputs) source = source && index.is_graph_input(t);
        if (!source) continue;
        size_type extra = g.workspace_of(static_cast<id_type>(o), default_variant(g, static_cast<id_type>(o)));
        std::unordered_set<id_type> seen;
        for (auto t : op.outputs)
            if (seen.insert(t).second) extra += g.tensor(t).bytes;
        for (auto [x, y] : op.inplace) extra -= std::min({extra, g.tensor(x).bytes, g.tensor(y).bytes});
        first_op = first_op ? std::min(*first_op, extra) : extra;
    }
    if (g.num_ops() > 0) {
        best = std::max(best, at_end);
        best = std::max(best, static_cast<size_type>(inputs + first_op.value_or(0)));
    }
    return best;
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
