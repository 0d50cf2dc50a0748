// The forward part of a training step cut into segments at its articulation
// points: positions of the forward order where exactly one tensor made by a
// forward op crosses to a later forward op, so that everything after depends
// on everything before only through that tensor. Those tensors are the
// candidate checkpoints of Chen et al. (2016) and the links of the chain that
// Rotor's dynamic program (Beaumont et al. 2019) works on.
#pragma once

#include <memplan/graph/graph.hpp>
#include <memplan/remat/recompute.hpp>

#include <cstddef>
#include <vector>

namespace memplan::detail {

/// Segments of the forward part of `remat_context::base_order()`. Segment i
/// covers base-order positions [begin(i), end[i]); every segment but the last
/// ends with an articulation point whose crossing tensor is `cut[i]` (the
/// segment's output, the next segment's only input made by a forward op).
template <class Graph>
struct forward_segments {
    using id_type = typename Graph::id_type;
    std::vector<std::size_t> end; ///< per segment: one past its last position; the last is the boundary
    std::vector<id_type> cut;     ///< per segment but the last: the tensor crossing its end

    std::size_t size() const noexcept { return end.size(); }
    std::size_t begin(std::size_t i) const noexcept { return i == 0 ? 0 : end[i - 1]; }
};

/// Cuts the forward part of `ctx` at every articulation point. Persistent
/// tensors and graph inputs never count as crossing: they are present
/// whatever the schedule does, so they tie nothing to a recomputation.
template <class Graph>
forward_segments<Graph> segment_forward(const remat_context<Graph>& ctx) {
    using id_type = typename Graph::id_type;
    const Graph& g = ctx.graph();
    const auto& order = ctx.base_order();
    const std::size_t fwd = ctx.boundary();
    std::vector<std::size_t> pos(g.num_ops(), static_cast<std::size_t>(-1));
    for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;

    // A tensor made at position p and last read by a forward op at r > p
    // crosses the gaps after p, ..., r - 1. Counting with difference arrays,
    // and summing ids alongside, names the tensor where the count is one.
    std::vector<long long> count(fwd + 1, 0);
    std::vector<long long> id_sum(fwd + 1, 0);
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto tid = static_cast<id_type>(t);
        const auto p = ctx.index().producer[t];
        if (p == Graph::npos || g.tensor(tid).persistent || pos[p] >= fwd) continue;
        std::size_t last = pos[p];
        for (auto c : ctx.index().consumers[t])
            if (pos[c] < fwd && pos[c] > last) last = pos[c];
        if (last == pos[p]) continue;
        count[pos[p]] += 1;
        count[last] -= 1;
        id_sum[pos[p]] += static_cast<long long>(t);
        id_sum[last] -= static_cast<long long>(t);
    }
    forward_segments<Graph> seg;
    long long c = 0, s = 0;
    for (std::size_t i = 0; i + 1 < fwd; ++i) { // no cut after the last forward op
        c += count[i];
        s += id_sum[i];
        if (c == 1) {
            seg.end.push_back(i + 1);
            seg.cut.push_back(static_cast<id_type>(s));
        }
    }
    seg.end.push_back(fwd);
    return seg;
}

/// `seg` without the cuts whose tensor no op after the forward part reads:
/// such a checkpoint serves only the next segment's forward, so keeping it
/// for the chain program (which holds a segment's input until its backward
/// is done) stores bytes no backward needs (a ReLU after a batch norm: its
/// backward reads its own output). The merged segment's plan may still keep
/// the tensor.
template <class Graph>
forward_segments<Graph> merge_unread_cuts(const remat_context<Graph>& ctx, const forward_segments<Graph>& seg) {
    forward_segments<Graph> out;
    for (std::size_t i = 0; i + 1 < seg.size(); ++i) {
        bool read_later = false;
        for (auto c : ctx.index().consumers[seg.cut[i]]) read_later = read_later || ctx.position(c) >= ctx.boundary();
        if (!read_later) continue;
        out.end.push_back(seg.end[i]);
        out.cut.push_back(seg.cut[i]);
    }
    out.end.push_back(seg.end.back());
    return out;
}

/// `seg` with consecutive segments joined until each has at least
/// `min_ops` forward ops (the last may have fewer).
template <class Graph>
forward_segments<Graph> join_segments(const forward_segments<Graph>& seg, std::size_t min_ops) {
    forward_segments<Graph> out;
    std::size_t begin = 0;
    for (std::size_t i = 0; i + 1 < seg.size(); ++i) {
        if (seg.end[i] - begin < min_ops) continue;
        out.end.push_back(seg.end[i]);
        out.cut.push_back(seg.cut[i]);
        begin = seg.end[i];
    }
    out.end.push_back(seg.end.back());
    return out;
}

} // namespace memplan::detail
