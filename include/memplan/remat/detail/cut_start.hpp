// The cut start of `joint` on training graphs: which forward tensors to keep
// after the forward part, chosen by a minimum cut.
//
// With the variants fixed, the backward part needs a set of forward tensors
// (those its ops read). Each is either kept (its bytes stay live from the
// forward part to its last read) or made again by running its producer in
// the backward part, which needs the producer's own forward inputs in the
// same way, recursively (recompute.hpp). Minimising
//
//     cost of the forward ops run again  +  lambda * bytes kept
//
// over every such choice is a minimum s-t cut (a "project selection"
// problem, as in PyTorch's min-cut partitioner, which minimises the bytes
// alone and bans recomputing costly ops by hand; here the price lambda
// trades the two): per forward op a node r (on the sink side: runs again),
// per forward temporary a node n (on the sink side: needed after the
// forward part), and
//
//     source -> r_op   capacity cost(op)       running it again costs
//     r_p -> n_t       capacity lambda*bytes(t) needed but not remade: kept
//     n_u -> r_op      infinite                 remade: its inputs are needed
//     n_t -> sink      infinite                 a backward op reads t
//
// where p makes t and u is read by op. The cut for one lambda is exact for
// this model; the budget decides lambda (joint_search::cut_start). The model
// leaves out what the exact evaluation then counts: when each tensor is
// live, what recomputations overlap, workspaces and in-place sharing.
#pragma once

#include <memplan/remat/detail/min_cut.hpp>
#include <memplan/remat/recompute.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace memplan::detail {

template <class Graph>
class keep_cut {
public:
    using id_type = typename Graph::id_type;

    /// The cut model of `ctx`'s graph with the variants of `base` (keep
    /// flags ignored). The graph must have a backward part.
    keep_cut(const remat_context<Graph>& ctx, const remat_choice<Graph>& base)
        : ctx_(ctx), variant_(base.variant) {
        const auto& g = ctx.graph();
        op_node_.assign(g.num_ops(), none);
        tensor_node_.assign(g.num_tensors(), none);
        std::size_t nodes = 2;
        for (std::size_t o = 0; o < g.num_ops(); ++o)
            if (g.op(static_cast<id_type>(o)).phase == phase::forward) op_node_[o] = nodes++;
        needed_.assign(g.num_tensors(), 0);
        for (std::size_t t = 0; t < g.num_tensors(); ++t) {
            const auto id = static_cast<id_type>(t);
            if (!ctx.droppable(id) && !ctx.checkpointable(id)) continue;
            tensor_node_[t] = nodes++;
            bytes_ += double(g.tensor(id).bytes);
        }
        nodes_ = nodes;
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto id = static_cast<id_type>(o);
            const bool forward = op_node_[o] != none;
            if (forward) cost_ += g.cost_of(id, variant_[o]);
            for (auto t : g.reads_of(id, variant_[o])) {
                if (tensor_node_[t] == none) continue;
                if (forward) fixed_.push_back({tensor_node_[t], op_node_[o]});
                else needed_[t] = 1;
            }
        }
    }

    /// Breaks ties between equally priced choices: each op's cost is
    /// multiplied by 1 + 1e-6 * weight[op] (empty: no change). Under the
    /// roofline model every memory-bound op costs its bytes over the same
    /// bandwidth, so at one price a whole family of keep sets costs the
    /// same and the cut returns only the extremes of the family; weights
    /// order the family so that prices near that one reach the sets between.
    void set_tie_break(std::vector<double> weight) { tie_ = std::move(weight); }

    /// Cost per byte at which keeping all forward temporaries costs as much
    /// as running the forward part again: the middle of the useful prices.
    double scale() const { return bytes_ > 0 && cost_ > 0 ? cost_ / bytes_ : 1.0; }

    /// The choice (on `base`'s variants) that minimises the recomputation's
    /// cost plus `lambda` times the bytes kept after the forward part: the
    /// tensors the backward needs and does not remake are kept (droppable)
    /// or kept as checkpoints (read only by the forward part).
    remat_choice<Graph> at(double lambda) const {
        const auto& g = ctx_.graph();
        const auto& producer = ctx_.index().producer;
        min_cut_network net(nodes_);
        constexpr std::size_t source = 0, sink = 1;
        for (std::size_t o = 0; o < g.num_ops(); ++o)
            if (op_node_[o] != none)
                net.add_edge(source, op_node_[o],
                             g.cost_of(static_cast<id_type>(o), variant_[o]) * (tie_.empty() ? 1.0 : 1.0 + 1e-6 * tie_[o]));
        for (std::size_t t = 0; t < g.num_tensors(); ++t) {
            if (tensor_node_[t] == none) continue;
            net.add_edge(op_node_[producer[t]], tensor_node_[t], lambda * double(g.tensor(static_cast<id_type>(t)).bytes));
            if (needed_[t]) net.add_edge(tensor_node_[t], sink, min_cut_network::infinite);
        }
        for (auto [from, to] : fixed_) net.add_edge(from, to, min_cut_network::infinite);
        net.solve(source, sink);

        auto c = ctx_.keep_all();
        c.variant = variant_;
        c.checkpoint.assign(g.num_tensors(), 0);
        for (std::size_t t = 0; t < g.num_tensors(); ++t) {
            if (tensor_node_[t] == none) continue;
            const auto id = static_cast<id_type>(t);
            const bool need = !net.source_side(tensor_node_[t]);
            const bool remade = !net.source_side(op_node_[producer[t]]);
            const bool kept = need && !remade;
            if (ctx_.droppable(id)) c.keep[t] = kept;
            else c.checkpoint[t] = kept;
        }
        return c;
    }

private:
    static constexpr std::size_t none = static_cast<std::size_t>(-1);
    const remat_context<Graph>& ctx_;
    std::vector<id_type> variant_;
    std::vector<std::size_t> op_node_, tensor_node_;
    std::vector<char> needed_; ///< per tensor: a backward op reads it
    std::vector<double> tie_;  ///< per op, or empty
    std::vector<std::pair<std::size_t, std::size_t>> fixed_; ///< n_u -> r_op
    std::size_t nodes_ = 0;
    double bytes_ = 0, cost_ = 0;
};

} // namespace memplan::detail
