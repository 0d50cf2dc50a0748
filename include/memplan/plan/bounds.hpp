// Lower bounds on the arena (the load bound of dynamic storage allocation; MiniMalloc, Moffitt, ASPLOS 2023).
//
//  - The per-schedule bound: the largest, over steps, of the bytes live at
//    that step. No placement of those buffers fits in less. An in-place
//    output and the input it takes over share bytes, so the pair counts once
//    (as the larger of the two) on the step where both are live.
//  - The schedule-free bound: the largest, over ops, of the bytes one
//    execution must hold at once (its distinct inputs and outputs, the
//    smallest workspace among its variants, every persistent graph input), less
//    what its in-place pairs could share. No schedule of the graph fits in less.
#pragma once

#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/schedule/liveness.hpp>

#include <algorithm>
#include <unordered_set>
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

/// The lower bound of a plan's own buffers (aliases matched by tensor and step).
template <class Size, class Id>
Size lower_bound(const basic_plan<Size, Id>& p) {
    constexpr std::size_t none = basic_liveness<Size, Id>::none;
    std::vector<std::size_t> alias_of(p.buffers.size(), none);
    for (std::size_t b = 0; b < p.buffers.size(); ++b) {
        const auto& x = p.buffers[b];
        if (!x.has_alias()) continue;
        for (std::size_t c = 0; c < p.buffers.size(); ++c) {
            const auto& y = p.buffers[c];
            if (c != b && !y.is_workspace() && y.tensor == x.alias && y.last == x.first && y.offset == x.offset) {
                alias_of[b] = c;
                break;
            }
        }
    }
    const auto v = live_bytes(p.buffers, alias_of, p.steps.size());
    return v.empty() ? Size{0} : *std::max_element(v.begin(), v.end());
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

/// The schedule-free lower bound of graph `g` (see the file comment).
template <class Graph>
typename Graph::size_type schedule_free_lower_bound(const Graph& g) {
    using size_type = typename Graph::size_type;
    using id_type = typename Graph::id_type;
    const graph_index<Graph> index(g);
    const size_type persistent = persistent_input_bytes(g, index);
    size_type best = persistent;
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        best = std::max(best, op_memory_need(g, index, static_cast<id_type>(o), persistent));
    return best;
}

} // namespace memplan
