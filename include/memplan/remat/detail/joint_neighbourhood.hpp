// Where the `joint` planner (remat/joint.hpp) looks for its next move: the
// moves that can lower the bytes live at the peak step of a choice, each
// with an estimate of what it frees per unit of cost it adds, best first.
//
//  - drop a kept tensor live across the peak (with the input its producer
//    wrote it over in place; per use on a graph without a backward part);
//  - recompute per use a dropped tensor that lives on to a later reader;
//  - let go a checkpoint across the peak;
//  - switch the only backward reader of such a tensor to a variant that does
//    not read it, or the peak op to a variant with less scratch;
//  - with a backward part, remake a tensor from a frontier of checkpoints
//    (frontier_moves); without one, end a tensor's first life before the
//    peak and make it again from a cone of ancestors (cone_moves).
//
// The estimates use remake_cost(): what running a producer again costs with
// the producers of its gone inputs, recursively.
#pragma once

#include <memplan/remat/detail/joint_evaluation.hpp>
#include <memplan/remat/detail/joint_moves.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/schedule/liveness.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memplan::detail {

template <class Graph>
class joint_neighbourhood {
public:
    using id_type = typename Graph::id_type;
    using choice_type = remat_choice<Graph>;
    using evaluation = joint_evaluation<Graph>;
    using move = joint_move::any<id_type>;
    using scored = joint_move::scored<id_type>;

    explicit joint_neighbourhood(const remat_context<Graph>& ctx) : ctx_(ctx), g_(ctx.graph()) {}

    /// Scratch of remake_cost: ops counted in the current estimate.
    struct remake_visit {
        explicit remake_visit(std::size_t ops) : mark(ops, 0) {}
        std::vector<std::uint32_t> mark;
        std::uint32_t round = 0;
        std::vector<id_type> stack;
    };

    /// A tensor that is gone after the forward part under `c`: dropped, or
    /// read only by the forward part and not kept as a checkpoint.
    bool gone(const choice_type& c, id_type t) const {
        if (ctx_.droppable(t)) return !c.keep[t];
        return ctx_.checkpointable(t) && !c.is_checkpoint(t);
    }

    /// Estimated cost of running `op` again in the backward part: it, and
    /// every producer of a gone input, recursively, each once (at most
    /// `max_ops` of them; a tensor that is kept, or a checkpoint, stops the
    /// search). A one-level estimate misses that what only the forward part
    /// reads is always gone: on GPT-2 the attention probabilities looked as
    /// cheap to remake as their softmax, but need the scores' matmul again.
    double remake_cost(const choice_type& c, id_type op, remake_visit& v) const {
        constexpr std::size_t max_ops = 64;
        if (++v.round == 0) { // wrapped: clear the marks
            std::fill(v.mark.begin(), v.mark.end(), 0);
            v.round = 1;
        }
        v.stack.assign(1, op);
        v.mark[op] = v.round;
        double cost = 0;
        for (std::size_t counted = 0; !v.stack.empty() && counted < max_ops; ++counted) {
            const auto o = v.stack.back();
            v.stack.pop_back();
            cost += g_.cost_of(o, c.variant[o]);
            for (auto u : g_.reads_of(o, c.variant[o])) {
                if (!gone(c, u)) continue;
                const auto p = ctx_.index().producer[u];
                if (p == Graph::npos || v.mark[p] == v.round) continue;
                v.mark[p] = v.round;
                v.stack.push_back(p);
            }
        }
        return cost;
    }

    /// Moves that can lower the bytes live at the peak step, best estimate
    /// first: drop a kept tensor live across it; switch an op that reads such
    /// a tensor to a variant that does not; switch the peak op to a variant
    /// with less workspace.
    std::vector<scored> candidate_moves(const choice_type& c, const evaluation& cur) const {
        const std::size_t p = cur.peak_step;
        const auto& live = cur.liveness;
        const auto& s = cur.schedule;
        const auto& pop = g_.op(s[p].op);
        const auto& reads_p = g_.reads_of(s[p].op, s[p].variant);
        std::vector<scored> moves;
        std::vector<char> seen_op(g_.num_ops(), 0);
        remake_visit visit(g_.num_ops());
        for (const auto& b : live.buffers) {
            if (b.is_workspace() || b.first > p || b.last < p) continue;
            const auto t = b.tensor;
            if (c.is_checkpoint(t)) { // a checkpoint across the peak: let it go, its readers make it again
                if (std::find(reads_p.begin(), reads_p.end(), t) != reads_p.end()) continue;
                const auto prod = ctx_.index().producer[t];
                moves.push_back({joint_move::set_checkpoint<id_type>{t, false},
                                 cur.worth(double(b.bytes)) / std::max(g_.cost_of(prod, c.variant[prod]), 1e-12)});
                continue;
            }
            if (!ctx_.droppable(t) || c.is_per_use(t)) continue;
            if (std::find(reads_p.begin(), reads_p.end(), t) != reads_p.end()) continue;
            if (std::find(pop.outputs.begin(), pop.outputs.end(), t) != pop.outputs.end()) continue;
            const auto prod = ctx_.index().producer[t];
            if (!c.keep[t]) {
                // Recomputed and living on to a later reader: recompute it per use instead.
                if (b.first >= ctx_.boundary() || ctx_.general())
                    moves.push_back({joint_move::set_per_use<id_type>{t, true},
                                     cur.worth(double(b.bytes)) / std::max(g_.cost_of(prod, c.variant[prod]), 1e-12)});
                continue;
            }
            // Recomputing t runs its producer again, and the producers of its
            // inputs that are gone too, theirs, and so on.
            const double est = remake_cost(c, prod, visit);
            moves.push_back({joint_move::drop_tensor<id_type>{t}, cur.worth(double(b.bytes)) / std::max(est, 1e-12)});
            // Without a backward part a dropped tensor is read again in the
            // middle of the graph, where its one recomputed life would span
            // the peak it was dropped for: drop it per use in one move.
            if (ctx_.general())
                moves.push_back(
                    {joint_move::drop_tensor<id_type>{t, true}, cur.worth(double(b.bytes)) / std::max(2 * est, 1e-12)});
            // When t was written over its producer's input in place, that
            // input must go too, or it stays alive to recompute t from.
            for (auto [x, y] : g_.op(prod).inplace)
                if (y == t && ctx_.droppable(x) && c.keep[x]) {
                    const auto px = ctx_.index().producer[x];
                    const double est2 = est + g_.cost_of(px, c.variant[px]);
                    moves.push_back({joint_move::drop_tensor<id_type>{t, false, x},
                                     cur.worth(double(b.bytes)) / std::max(est2, 1e-12)});
                }
            // A reader of t switching to a variant that does not read it
            // frees t only when no other later reader remains.
            std::size_t later_readers = 0;
            id_type only = Graph::npos;
            for (auto r : ctx_.index().consumers[t]) {
                if (g_.op(r).phase == phase::forward) continue;
                const auto& rr = g_.reads_of(r, c.variant[r]);
                if (std::find(rr.begin(), rr.end(), t) != rr.end() && r != only) {
                    ++later_readers;
                    only = r;
                }
            }
            if (later_readers != 1) continue;
            for (auto r : ctx_.index().consumers[t]) {
                if (r != only || seen_op[r]) continue;
                const auto& op = g_.op(r);
                for (std::size_t v = 0; v < op.variants.size(); ++v) {
                    if (v == c.variant[r]) continue;
                    const auto& rv = g_.reads_of(r, static_cast<id_type>(v));
                    if (std::find(rv.begin(), rv.end(), t) != rv.end()) continue;
                    const double extra = std::max(0.0, g_.cost_of(r, static_cast<id_type>(v)) - g_.cost_of(r, c.variant[r]));
                    moves.push_back({joint_move::set_variant<id_type>{r, static_cast<id_type>(v), c.variant[r]},
                                     cur.worth(double(b.bytes)) / std::max(extra, 1e-12)});
                    seen_op[r] = 1;
                }
            }
        }
        if (ctx_.general()) cone_moves(c, cur, live, moves);
        else frontier_moves(c, cur, live, moves);
        // Less scratch at the peak op.
        if (s[p].has_variant()) {
            const auto o = s[p].op;
            const auto ws = g_.workspace_of(o, s[p].variant);
            for (std::size_t v = 0; v < pop.variants.size(); ++v) {
                if (pop.variants[v].workspace >= ws) continue;
                const double extra = std::max(0.0, pop.variants[v].cost - g_.cost_of(o, s[p].variant));
                moves.push_back({joint_move::set_variant<id_type>{o, static_cast<id_type>(v), c.variant[o]},
                                 cur.worth(double(ws - pop.variants[v].workspace)) / std::max(extra, 1e-12)});
            }
        }
        std::stable_sort(moves.begin(), moves.end(), [](const scored& a, const scored& b) { return a.score > b.score; });
        return moves;
    }

    /// The frontier tensor (`can_expand`) whose replacement by its producer's
    /// inputs leaves the fewest extra bytes at the peak, counting the inputs
    /// that `joins` says would join the frontier; frontier.size() for none.
    /// Tensors that no backward op reads and that the schedule of `cur`
    /// makes again (their producer runs more than once): keeping one as a
    /// checkpoint saves that run and what it needed (remat_choice::checkpoint).
    std::vector<id_type> checkpoint_candidates(const choice_type& c, const evaluation& cur) const {
        std::vector<id_type> out;
        if (ctx_.general()) return out;
        std::vector<char> runs(g_.num_ops(), 0), seen(g_.num_tensors(), 0);
        for (const auto& st : cur.schedule) {
            if (runs[st.op] < 2) ++runs[st.op];
            if (runs[st.op] < 2 || g_.op(st.op).phase != phase::forward) continue;
            for (auto t : g_.op(st.op).outputs)
                if (!seen[t] && ctx_.checkpointable(t) && !c.is_checkpoint(t)) {
                    seen[t] = 1;
                    out.push_back(t);
                }
        }
        return out;
    }


private:
    template <class CanExpand, class Joins, class ExtraOf>
    std::size_t cheapest_expansion(const choice_type& c, const std::vector<id_type>& frontier, double extra,
                                   CanExpand&& can_expand, Joins&& joins, ExtraOf&& extra_of) const {
        std::size_t pick = frontier.size();
        double pick_extra = 0;
        for (std::size_t i = 0; i < frontier.size(); ++i) {
            const auto u = frontier[i];
            if (!can_expand(u)) continue;
            const auto pu = ctx_.index().producer[u];
            double e = extra - extra_of(u);
            for (auto w : g_.reads_of(pu, c.variant[pu]))
                if (joins(w)) e += extra_of(w);
            if (pick == frontier.size() || e < pick_extra) {
                pick = i;
                pick_extra = e;
            }
        }
        return pick;
    }

    /// With a backward part, a kept tensor live across the peak may be made
    /// again from a frontier of checkpoints (tensors only the forward reads)
    /// rather than from what is kept: its producer's inputs that are gone
    /// become checkpoints, and the frontier grows towards ancestors whose
    /// own inputs add fewer bytes at the peak (a min-cut's trade, as
    /// PyTorch's partitioner makes it, one tensor at a time). Other kept
    /// outputs of the ops made again go with it. On GPT-2 this is how a
    /// residual sum and its dropout's mask give way to the projection they
    /// are made from.
    template <class Liveness>
    void frontier_moves(const choice_type& c, const evaluation& cur, const Liveness& live,
                        std::vector<scored>& moves) const {
        const std::size_t p = cur.peak_step;
        const auto& s = cur.schedule;
        std::vector<char> at_peak(g_.num_tensors(), 0);
        for (const auto& b : live.buffers)
            if (!b.is_workspace() && b.first <= p && b.last >= p) at_peak[b.tensor] = 1;
        const auto& reads_p = g_.reads_of(s[p].op, s[p].variant);
        auto read_at_peak = [&](id_type t) { return std::find(reads_p.begin(), reads_p.end(), t) != reads_p.end(); };
        // state: 1 = made again (in the cone), 2 = on the frontier.
        std::vector<char> state(g_.num_tensors(), 0);
        std::vector<char> op_in(g_.num_ops(), 0);
        std::vector<id_type> touched, touched_ops;
        constexpr std::size_t max_growth = 16, max_offers = 2;
        for (std::size_t xi = 0; xi < g_.num_tensors(); ++xi) {
            const auto x = static_cast<id_type>(xi);
            if (!at_peak[x] || !ctx_.droppable(x) || !c.keep[x] || c.is_per_use(x) || read_at_peak(x)) continue;
            const auto prod = ctx_.index().producer[x];
            if (prod == s[p].op) continue;
            for (auto u : touched) state[u] = 0;
            for (auto o : touched_ops) op_in[o] = 0;
            touched.clear();
            touched_ops.clear();
            auto set_state = [&](id_type u, char v) {
                if (!state[u]) touched.push_back(u);
                state[u] = v;
            };
            // What a frontier tensor adds at the peak: nothing when it is there already.
            auto extra_of = [&](id_type u) -> double { return at_peak[u] ? 0.0 : double(g_.tensor(u).bytes); };
            std::vector<id_type> frontier, riders;
            double extra = 0, cost = 0, gain = double(g_.tensor(x).bytes);
            set_state(x, 1);
            // Runs `op` again: its gone inputs join the frontier (or are made
            // again too, when dropped), its other kept outputs at the peak go.
            std::vector<id_type> pending{prod};
            auto run_again = [&] {
                while (!pending.empty()) {
                    const auto op = pending.back();
                    pending.pop_back();
                    if (op_in[op]) continue;
                    op_in[op] = 1;
                    touched_ops.push_back(op);
                    cost += g_.cost_of(op, c.variant[op]);
                    for (auto y : g_.op(op).outputs)
                        if (!state[y] && at_peak[y] && ctx_.droppable(y) && c.keep[y] && !read_at_peak(y)) {
                            set_state(y, 1);
                            riders.push_back(y);
                            gain += double(g_.tensor(y).bytes);
                        } else if (!state[y]) {
                            set_state(y, 1);
                        }
                    for (auto u : g_.reads_of(op, c.variant[op])) {
                        if (state[u] || g_.tensor(u).persistent) continue;
                        const auto pu = ctx_.index().producer[u];
                        if (pu == Graph::npos) continue; // a graph input: always there
                        if (ctx_.droppable(u)) {
                            if (c.keep[u]) continue; // kept: there
                            set_state(u, 1);         // dropped: made again anyway
                            pending.push_back(pu);
                            continue;
                        }
                        if (!ctx_.checkpointable(u)) continue;
                        set_state(u, 2);
                        frontier.push_back(u);
                        extra += extra_of(u);
                    }
                }
            };
            run_again();
            double best_net = 0;
            std::size_t offers = 0;
            auto offer = [&] {
                const double net = gain - extra;
                if (net <= best_net) return;
                best_net = net;
                joint_move::remake_from<id_type> m{x, riders, {}, {}};
                for (auto u : frontier)
                    if (state[u] == 2 && !c.is_checkpoint(u)) m.marks.push_back(u);
                for (auto u : touched)
                    if (state[u] == 1 && c.is_checkpoint(u)) m.unmarks.push_back(u);
                moves.push_back({std::move(m), cur.worth(net) / std::max(cost, 1e-12)});
                ++offers;
            };
            offer();
            for (std::size_t step = 0; step < max_growth && offers < max_offers; ++step) {
                // The frontier tensor whose producer's gone inputs add the least.
                const std::size_t pick = cheapest_expansion(
                    c, frontier, extra, [&](id_type u) { return state[u] == 2; },
                    [&](id_type w) { return !state[w] && ctx_.checkpointable(w); }, extra_of);
                if (pick == frontier.size()) break;
                const auto u = frontier[pick];
                extra -= extra_of(u);
                set_state(u, 1);
                pending.push_back(ctx_.index().producer[u]);
                run_again();
                offer();
            }
        }
    }

    /// Without a backward part, a tensor live across the peak and read
    /// after it can end its first life with its last reader before the peak
    /// and be made again from a frontier of ancestors, themselves dropped
    /// the same way: the frontier's tensors are then the ones kept across the
    /// peak. Starting from the producer's inputs, the frontier grows by
    /// replacing the ancestor whose own inputs add the fewest bytes at the
    /// peak (those already live there add none); each new least frontier is
    /// offered as a move (Checkmate's space, searched one cone at a time).
    template <class Liveness>
    void cone_moves(const choice_type& c, const evaluation& cur, const Liveness& live, std::vector<scored>& moves) const {
        const std::size_t p = cur.peak_step;
        const auto& s = cur.schedule;
        const auto& order = ctx_.base_order();
        std::size_t pb = 0; // base ops run by step p
        for (std::size_t j = 0; j <= p && j < s.size(); ++j)
            if (pb < order.size() && s[j].op == order[pb]) ++pb;
        std::vector<char> at_peak(g_.num_tensors(), 0);
        for (const auto& b : live.buffers)
            if (!b.is_workspace() && b.first <= p && b.last >= p) at_peak[b.tensor] = 1;
        const auto& reads_p = g_.reads_of(s[p].op, s[p].variant);
        std::vector<char> in_set(g_.num_tensors(), 0);
        std::vector<id_type> touched;
        constexpr std::size_t max_growth = 24, max_offers = 3;
        for (std::size_t t = 0; t < g_.num_tensors(); ++t) {
            const auto x = static_cast<id_type>(t);
            if (!at_peak[x] || !ctx_.droppable(x) || !c.keep[x]) continue;
            if (std::find(reads_p.begin(), reads_p.end(), x) != reads_p.end()) continue;
            const auto prod = ctx_.index().producer[x];
            if (prod == s[p].op) continue;
            bool read_after = false;
            for (auto r : ctx_.index().consumers[x]) read_after = read_after || ctx_.position(r) >= pb;
            if (!read_after) continue;
            // in_set: 1 = in the cone (dropped), 2 = on the frontier.
            for (auto u : touched) in_set[u] = 0;
            touched.clear();
            auto mark = [&](id_type u, char v) {
                if (!in_set[u]) touched.push_back(u);
                in_set[u] = v;
            };
            mark(x, 1);
            // A frontier tensor adds its bytes at the peak unless it is live there already.
            auto extra_of = [&](id_type u) -> double { return at_peak[u] ? 0.0 : double(g_.tensor(u).bytes); };
            auto expandable = [&](id_type u) {
                return ctx_.droppable(u) && !at_peak[u] && ctx_.index().producer[u] != Graph::npos;
            };
            std::vector<id_type> frontier, cone;
            double extra = 0, cost = g_.cost_of(prod, c.variant[prod]);
            auto add_inputs = [&](id_type op) {
                for (auto u : g_.reads_of(op, c.variant[op])) {
                    if (in_set[u] || g_.tensor(u).persistent) continue;
                    // Already dropped and gone: its producer runs again anyway.
                    mark(u, 2);
                    frontier.push_back(u);
                    extra += extra_of(u);
                }
            };
            add_inputs(prod);
            double best_extra = extra;
            std::size_t offers = 0;
            auto offer = [&] {
                moves.push_back({joint_move::drop_cone<id_type>{x, cone, pb},
                                 cur.worth(double(g_.tensor(x).bytes) - extra) / std::max(cost, 1e-12)});
                ++offers;
            };
            offer();
            for (std::size_t step = 0; step < max_growth && offers < max_offers; ++step) {
                // The frontier tensor whose replacement by its producer's inputs adds the least.
                const std::size_t pick = cheapest_expansion(
                    c, frontier, extra, expandable,
                    [&](id_type w) { return !in_set[w] && !g_.tensor(w).persistent; }, extra_of);
                if (pick == frontier.size()) break;
                const auto u = frontier[pick];
                frontier.erase(frontier.begin() + static_cast<std::ptrdiff_t>(pick));
                extra -= extra_of(u);
                in_set[u] = 1;
                if (c.keep[u]) cone.push_back(u);
                const auto pu = ctx_.index().producer[u];
                cost += g_.cost_of(pu, c.variant[pu]);
                add_inputs(pu);
                if (extra < best_extra) {
                    best_extra = extra;
                    offer();
                }
            }
        }
    }

    const remat_context<Graph>& ctx_;
    const Graph& g_;
};

} // namespace memplan::detail
