// Structural checks of a graph (formats.md §1) and the producer/consumer
// index that schedules, liveness and planners are built on.
//
// `validate(g)` throws `memplan::error` naming the first offending op or
// tensor: a tensor produced twice, a cycle, an op that reads a tensor before
// its producer in the listed order, a bad in-place pair or variant, a cost
// that is not a finite non-negative number, or byte sums that overflow.
#pragma once

#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>
#include <vector>

namespace memplan {

/// Who produces and who reads each tensor. Built in O(ops + edges).
template <class Graph>
struct graph_index {
    using id_type = typename Graph::id_type;
    std::vector<id_type> producer;               ///< per tensor: op id, or Graph::npos for graph inputs
    std::vector<std::vector<id_type>> consumers; ///< per tensor: op ids in listed order (one per read)

    explicit graph_index(const Graph& g) : producer(g.num_tensors(), Graph::npos), consumers(g.num_tensors()) {
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto& op = g.op(static_cast<id_type>(o));
            for (auto t : op.outputs)
                if (producer[t] == Graph::npos) producer[t] = static_cast<id_type>(o);
            for (auto t : op.inputs) consumers[t].push_back(static_cast<id_type>(o));
        }
    }

    bool is_graph_input(id_type t) const { return producer[t] == Graph::npos; }
};

namespace detail {

template <class Graph>
std::string describe_cycle(const Graph& g, const std::vector<typename Graph::id_type>& producer,
                           typename Graph::id_type start) {
    // Walk producers backwards from an op left over by Kahn's algorithm; every
    // such op has an unfinished predecessor, so the walk must revisit an op.
    using id_type = typename Graph::id_type;
    std::vector<std::size_t> seen_at(g.num_ops(), static_cast<std::size_t>(-1));
    std::vector<id_type> path;
    id_type cur = start;
    while (seen_at[cur] == static_cast<std::size_t>(-1)) {
        seen_at[cur] = path.size();
        path.push_back(cur);
        id_type next = Graph::npos;
        for (auto t : g.op(cur).inputs) {
            const auto p = producer[t];
            if (p != Graph::npos) {
                next = p;
                if (seen_at[p] != static_cast<std::size_t>(-1)) break;
            }
        }
        if (next == Graph::npos) break; // cannot happen for a leftover op; be defensive
        cur = next;
    }
    std::string s;
    const std::size_t from = seen_at[cur] == static_cast<std::size_t>(-1) ? 0 : seen_at[cur];
    for (std::size_t i = path.size(); i-- > from;) s += "'" + g.op(path[i]).name + "' -> ";
    s += "'" + g.op(cur).name + "'";
    return s;
}

} // namespace detail

/// Throws `memplan::error` naming the first op or tensor that breaks a rule of
/// formats.md §1. A graph that passes can be scheduled in its listed order.
template <class Graph>
void validate(const Graph& g) {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    const std::size_t n_ops = g.num_ops();

    // Single producer.
    std::vector<id_type> producer(g.num_tensors(), Graph::npos);
    for (std::size_t o = 0; o < n_ops; ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        for (auto t : op.outputs) {
            if (producer[t] != Graph::npos) {
                if (producer[t] == o)
                    throw error("graph", "op '" + op.name + "' lists output '" + g.tensor(t).name + "' twice");
                throw error("graph", "tensor '" + g.tensor(t).name + "' is produced twice: by op '" +
                                         g.op(producer[t]).name + "' and by op '" + op.name + "'");
            }
            producer[t] = static_cast<id_type>(o);
        }
    }

    // Cycles (Kahn's algorithm over op -> op edges), then the listed order.
    {
        std::vector<std::size_t> indegree(n_ops, 0);
        std::vector<std::vector<id_type>> succ(n_ops);
        for (std::size_t o = 0; o < n_ops; ++o)
            for (auto t : g.op(static_cast<id_type>(o)).inputs)
                if (producer[t] != Graph::npos) {
                    ++indegree[o];
                    succ[producer[t]].push_back(static_cast<id_type>(o));
                }
        std::vector<id_type> ready;
        for (std::size_t o = 0; o < n_ops; ++o)
            if (indegree[o] == 0) ready.push_back(static_cast<id_type>(o));
        std::size_t done = 0;
        while (!ready.empty()) {
            const auto o = ready.back();
            ready.pop_back();
            ++done;
            for (auto s : succ[o])
                if (--indegree[s] == 0) ready.push_back(s);
        }
        if (done != n_ops) {
            for (std::size_t o = 0; o < n_ops; ++o)
                if (indegree[o] != 0)
                    throw error("graph", "the ops form a cycle: " +
                                             detail::describe_cycle(g, producer, static_cast<id_type>(o)));
        }
    }
    for (std::size_t o = 0; o < n_ops; ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        for (auto t : op.inputs)
            if (producer[t] != Graph::npos && producer[t] > o)
                throw error("graph", "op '" + op.name + "' reads tensor '" + g.tensor(t).name +
                                         "' before its producer '" + g.op(producer[t]).name +
                                         "' in the listed order");
    }

    // Per-op fields.
    for (std::size_t o = 0; o < n_ops; ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        auto bad_cost = [](double c) { return !std::isfinite(c) || c < 0.0; };
        if (bad_cost(op.cost)) throw error("graph", "op '" + op.name + "' has a cost that is not a finite number >= 0");
        std::unordered_set<std::string> variant_names;
        for (const auto& v : op.variants) {
            if (v.name.empty()) throw error("graph", "op '" + op.name + "' has a variant with an empty name");
            if (!variant_names.insert(v.name).second)
                throw error("graph", "op '" + op.name + "' lists variant '" + v.name + "' twice");
            if (bad_cost(v.cost))
                throw error("graph", "op '" + op.name + "' variant '" + v.name +
                                         "' has a cost that is not a finite number >= 0");
            for (auto t : v.inputs)
                if (std::find(op.inputs.begin(), op.inputs.end(), t) == op.inputs.end())
                    throw error("graph", "op '" + op.name + "' variant '" + v.name + "' reads '" + g.tensor(t).name +
                                             "' which is not one of the op's inputs");
        }
        std::unordered_set<id_type> inplace_in, inplace_out;
        for (auto [x, y] : op.inplace) {
            const bool x_is_input = std::find(op.inputs.begin(), op.inputs.end(), x) != op.inputs.end();
            const bool y_is_output = std::find(op.outputs.begin(), op.outputs.end(), y) != op.outputs.end();
            if (!x_is_input)
                throw error("graph", "op '" + op.name + "' in-place pair names '" + g.tensor(x).name +
                                         "' which is not one of its inputs");
            if (!y_is_output)
                throw error("graph", "op '" + op.name + "' in-place pair names '" + g.tensor(y).name +
                                         "' which is not one of its outputs");
            if (!inplace_out.insert(y).second)
                throw error("graph", "op '" + op.name + "' lists output '" + g.tensor(y).name +
                                         "' in more than one in-place pair");
            if (!inplace_in.insert(x).second)
                throw error("graph", "op '" + op.name + "' lists input '" + g.tensor(x).name +
                                         "' in more than one in-place pair");
        }
    }

    // Byte sums must fit the size type: everything at once must be expressible.
    size_type total = 0;
    for (const auto& t : g.tensors()) {
        auto s = detail::checked_add<size_type>(total, t.bytes);
        if (!s) throw error("graph", "the total of tensor sizes overflows at tensor '" + t.name + "'");
        total = *s;
    }
    for (const auto& op : g.ops()) {
        size_type ws = op.workspace;
        for (const auto& v : op.variants) ws = std::max(ws, v.workspace);
        auto s = detail::checked_add<size_type>(total, ws);
        if (!s) throw error("graph", "the total of tensor and workspace sizes overflows at op '" + op.name + "'");
        total = *s;
    }
}

} // namespace memplan
