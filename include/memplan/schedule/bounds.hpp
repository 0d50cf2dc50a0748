// Lower bounds on the arena, in one place: no plan of the kind named fits in
// fewer bytes. docs/architecture.md ("Lower bounds") lists every bound of the
// library, including the order-free cut bound (schedule/cut_bound.hpp), the
// bound of an allocation problem and of a placed plan.
//
//  - The per-schedule bound (`schedule_lower_bound`, `lower_bound` of a
//    liveness result): the largest, over steps, of the bytes live at that
//    step. No placement of those buffers fits in less. An in-place output
//    and the input it takes over share bytes, so the pair counts once (as the
//    larger of the two) on the step where both are live.
//  - The schedule-free bound (`schedule_free_lower_bound`): the largest, over
//    ops, of the bytes one execution must hold at once (its distinct inputs
//    and outputs, the smallest workspace among its variants, every
//    persistent graph input), less what its in-place pairs could share. No
//    schedule of the graph fits in less, recomputation and variants included.
//  - The order bound (`order_lower_bound`): a bound on every order that runs
//    each op once with its default variant, as the ordering planners do.
#pragma once

#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/schedule/buffer.hpp>
#include <memplan/schedule/liveness.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace memplan {

/// Bytes live at each step. `alias_of[b]` is the buffer that b takes over in
/// place (or `none`); it may be empty when there are no aliases.
template <class Size, class Id>
std::vector<Size> live_bytes(const std::vector<basic_buffer<Size, Id>>& buffers,
                             const std::vector<std::size_t>& alias_of, std::size_t num_steps) {
    constexpr std::size_t none = basic_liveness<Size, Id>::none;
    // Difference arrays of additions and removals keep everything unsigned.
    std::vector<Size> add(num_steps + 1, 0), sub(num_steps + 1, 0);
    auto bump = [](std::vector<Size>& v, std::size_t i, Size x) {
        auto s = detail::checked_add<Size>(v[i], x);
        if (!s) throw error("plan", "live bytes overflow the size type at step " + std::to_string(i));
        v[i] = *s;
    };
    for (std::size_t b = 0; b < buffers.size(); ++b) {
        const auto& x = buffers[b];
        if (x.first > x.last || x.last >= num_steps) continue; // malformed buffers are the validator's business
        bump(add, x.first, x.bytes);
        bump(sub, x.last + 1, x.bytes);
        if (b < alias_of.size() && alias_of[b] != none) {
            const auto& src = buffers[alias_of[b]];
            const Size shared = std::min(src.bytes, x.bytes);
            bump(sub, x.first, shared);
            bump(add, x.first + 1, shared);
        }
    }
    std::vector<Size> live(num_steps, 0);
    Size cur_add = 0, cur_sub = 0;
    for (std::size_t i = 0; i < num_steps; ++i) {
        auto a = detail::checked_add<Size>(cur_add, add[i]);
        if (!a) throw error("plan", "live bytes overflow the size type at step " + std::to_string(i));
        cur_add = *a;
        cur_sub += sub[i];
        live[i] = cur_add - cur_sub;
    }
    return live;
}

/// The per-schedule lower bound of a liveness result.
template <class Size, class Id>
Size lower_bound(const basic_liveness<Size, Id>& live) {
    const auto v = live_bytes(live.buffers, live.alias_of, live.num_steps);
    return v.empty() ? Size{0} : *std::max_element(v.begin(), v.end());
}

/// The per-schedule lower bound of schedule `s` on graph `g`.
template <class Graph>
typename Graph::size_type schedule_lower_bound(const Graph& g, const basic_schedule<typename Graph::id_type>& s,
                                               liveness_options opt = {}) {
    return lower_bound(compute_liveness(g, s, opt));
}

/// Bytes of the persistent graph inputs (weights, optimizer state): live on
/// every step of every schedule.
template <class Graph>
typename Graph::size_type persistent_input_bytes(const Graph& g, const graph_index<Graph>& index) {
    using id_type = typename Graph::id_type;
    typename Graph::size_type bytes = 0;
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (g.tensor(static_cast<id_type>(t)).persistent && index.is_graph_input(static_cast<id_type>(t)))
            bytes += g.tensor(static_cast<id_type>(t)).bytes;
    return bytes;
}

/// The bytes one execution of op `o` must hold at once, run the cheapest way
/// over its variants: what it reads, its outputs and its workspace, less what
/// its in-place pairs may share, plus `persistent` (persistent_input_bytes).
template <class Graph>
typename Graph::size_type op_memory_need(const Graph& g, const graph_index<Graph>& index, typename Graph::id_type o,
                                         typename Graph::size_type persistent) {
    using size_type = typename Graph::size_type;
    using id_type = typename Graph::id_type;
    auto always_live = [&](id_type t) { return g.tensor(t).persistent && index.is_graph_input(t); };
    const auto& op = g.op(o);
    auto need = [&](const std::vector<id_type>& reads, size_type ws) {
        std::unordered_set<id_type> seen;
        size_type bytes = persistent + ws;
        for (const auto* list : {&reads, &op.outputs})
            for (auto t : *list)
                if (seen.insert(t).second && !always_live(t)) bytes += g.tensor(t).bytes;
        for (auto [x, y] : op.inplace)
            if (!g.tensor(x).persistent && !g.tensor(y).persistent && x != y &&
                std::find(reads.begin(), reads.end(), x) != reads.end())
                bytes -= std::min(g.tensor(x).bytes, g.tensor(y).bytes);
        return bytes;
    };
    size_type least = need(op.inputs, op.workspace);
    for (std::size_t v = 0; v < op.variants.size(); ++v)
        least = std::min(least, need(g.reads_of(o, static_cast<id_type>(v)), op.variants[v].workspace));
    return least;
}

/// The schedule-free lower bound of graph `g` (see the file comment) and the
/// op that sets it: the first op whose op_memory_need is the largest, or
/// Graph::npos when `g` has no ops (the bound is then the persistent inputs).
template <class Graph>
std::pair<typename Graph::size_type, typename Graph::id_type>
schedule_free_lower_bound_and_op(const Graph& g, const graph_index<Graph>& index) {
    using size_type = typename Graph::size_type;
    using id_type = typename Graph::id_type;
    const size_type persistent = persistent_input_bytes(g, index);
    size_type best = persistent;
    id_type who = Graph::npos;
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto need = op_memory_need(g, index, static_cast<id_type>(o), persistent);
        if (need > best || who == Graph::npos) {
            best = std::max(best, need);
            who = static_cast<id_type>(o);
        }
    }
    return {best, who};
}

/// The schedule-free lower bound of graph `g` (see the file comment).
template <class Graph>
typename Graph::size_type schedule_free_lower_bound(const Graph& g) {
    const graph_index<Graph> index(g);
    return schedule_free_lower_bound_and_op(g, index).first;
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
        const size_type persistent_inputs = persistent_input_bytes(g, index);
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

} // namespace memplan
