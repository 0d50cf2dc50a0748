// The repeated-block start of `joint` (remat/joint.hpp) on a transformer's
// graph: its layers are one block repeated (ops named "<prefix><i>.<module>",
// remat/policy.hpp), so what to keep in one block is a small problem, solved
// once and replicated, and the budget is met by mixing two of its answers
// across the blocks.
//
// One block (the middle one) has a handful of forward ops. For every set R
// of them run again in the backward part, the cut model of
// remat/detail/cut_start.hpp gives what the block then keeps after the
// forward part (the tensors the backward or a rerun op reads whose producer
// is not rerun; an input from the previous block stands for the same tensor
// of this block, as the blocks are equal) and what R costs. Every R is
// enumerated (at most `max_ops` ops: 2^max_ops sets, a bit mask each; ops
// that cost nothing and read nothing the block makes, a sharded weight's
// gather, are always in R, which never costs and never keeps more); the
// sets on the front of (bytes kept, cost) are replicated into every block
// equal to the middle one and evaluated exactly, all of them. With L blocks,
// k of them on set B and the rest on set A move the plan along the segment
// between A's and B's exact points in L steps; the pairs whose segment is
// cheapest at the target (by the exact points) are bisected on k. On a
// Llama graph the exact uniform points lie on a line of bytes against cost
// to within the allocator's rounding, so the mix is the best choice that is
// the same in every block, up to one block: what the descent and the
// improvement then change is what differs (the ends of the step, the head).
//
// The idea of solving a repeated block once is Rockmate's (Zhao et al.,
// ICML 2023, also block_dp here); mixing two per-block answers over identical
// layers is the fractional knapsack's two-item optimum.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/remat/detail/joint_evaluation.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/remat/recompute.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan::detail {

template <class Graph>
class block_frontier {
public:
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    using choice_type = remat_choice<Graph>;

    /// Enumerated ops per block, at most (2^max_ops sets).
    static constexpr std::size_t max_ops = 20;
    /// Sets of the front evaluated exactly, at most (evenly spaced in bytes).
    static constexpr std::size_t max_front = 96;
    /// Pairs of front points bisected on the number of blocks.
    static constexpr std::size_t pairs = 4;

    /// The blocks of `ctx`'s graph named `prefix`<i>.*, on `base`'s variants
    /// (its keep flags outside the blocks are kept). Not usable() when the
    /// graph has fewer than two equal blocks, no backward part, or blocks of
    /// more than max_ops forward ops.
    block_frontier(const remat_context<Graph>& ctx, const choice_type& base,
                   std::string_view prefix = "model.layers.")
        : ctx_(ctx), g_(ctx.graph()), base_(base) {
        if (ctx.general()) return;
        constexpr auto outside = std::numeric_limits<std::size_t>::max();
        // Each op's block and its name within the block.
        std::vector<std::size_t> block(g_.num_ops(), outside);
        std::map<std::string, std::vector<id_type>, std::less<>> by_key;
        std::size_t blocks = 0;
        for (std::size_t o = 0; o < g_.num_ops(); ++o) {
            const auto& name = g_.op(static_cast<id_type>(o)).name;
            const auto at = position_of(name, prefix);
            if (at.block == outside) continue;
            block[o] = at.block;
            blocks = std::max(blocks, at.block + 1);
        }
        if (blocks < 2) return;
        key_of_.assign(g_.num_ops(), npos);
        std::vector<std::string> keys;
        for (std::size_t o = 0; o < g_.num_ops(); ++o) {
            if (block[o] == outside || g_.op(static_cast<id_type>(o)).phase != phase::forward) continue;
            const auto& name = g_.op(static_cast<id_type>(o)).name;
            const auto key = name.substr(name.find('.', prefix.size()) + 1);
            auto& ids = by_key[key];
            if (ids.empty()) keys.push_back(key);
            ids.resize(blocks, Graph::npos);
            ids[block[o]] = static_cast<id_type>(o);
        }
        const std::size_t ref = blocks / 2;
        // The reference block's forward ops, in the listed order.
        for (std::size_t o = 0; o < g_.num_ops(); ++o)
            if (block[o] == ref && g_.op(static_cast<id_type>(o)).phase == phase::forward) ref_ops_.push_back(o);
        if (ref_ops_.empty() || ref_ops_.size() > 32) return; // a bit mask of them
        std::map<std::string, std::size_t, std::less<>> local;
        for (std::size_t i = 0; i < ref_ops_.size(); ++i) {
            const auto& name = g_.op(static_cast<id_type>(ref_ops_[i])).name;
            local.emplace(name.substr(name.find('.', prefix.size()) + 1), i);
        }
        if (local.size() != keys.size()) return; // some block has ops the reference lacks
        // Blocks equal to the reference: the same ops with the same costs,
        // outputs of the same sizes and kinds.
        ops_of_.clear();
        for (std::size_t b = 0; b < blocks; ++b) {
            std::vector<std::size_t> ops(ref_ops_.size());
            bool same = true;
            for (std::size_t i = 0; i < ref_ops_.size() && same; ++i) {
                const auto& name = g_.op(static_cast<id_type>(ref_ops_[i])).name;
                const auto it = by_key.find(std::string_view(name).substr(name.find('.', prefix.size()) + 1));
                const auto o = it->second[b];
                same = o != Graph::npos && equal_ops(static_cast<id_type>(ref_ops_[i]), o);
                if (same) ops[i] = o;
            }
            if (same) ops_of_.push_back(std::move(ops));
        }
        if (ops_of_.size() < 2) return;
        for (const auto& ops : ops_of_)
            for (std::size_t i = 0; i < ops.size(); ++i) key_of_[ops[i]] = i;

        // Output slots of the reference block: one bit each.
        slot_of_.assign(ref_ops_.size(), 0);
        std::size_t slots = 0;
        for (std::size_t i = 0; i < ref_ops_.size(); ++i) {
            slot_of_[i] = slots;
            slots += g_.op(static_cast<id_type>(ref_ops_[i])).outputs.size();
        }
        if (slots > 64) return;
        slot_bytes_.assign(slots, 0);
        out_mask_.assign(ref_ops_.size(), 0);
        in_mask_.assign(ref_ops_.size(), 0);
        for (std::size_t i = 0; i < ref_ops_.size(); ++i) {
            const auto& outs = g_.op(static_cast<id_type>(ref_ops_[i])).outputs;
            for (std::size_t s = 0; s < outs.size(); ++s) {
                const auto t = outs[s];
                slot_bytes_[slot_of_[i] + s] = ctx.droppable(t) || ctx.checkpointable(t) ? g_.tensor(t).bytes : 0;
                out_mask_[i] |= bit(slot_of_[i] + s);
            }
        }
        // Reads: a forward op's inputs made by a forward op of an equal block
        // stand for the reference block's slot; the backward part's reads of
        // the reference block's own tensors are what it needs.
        const auto& producer = ctx.index().producer;
        auto slot = [&](id_type t) -> std::optional<std::size_t> {
            const auto p = producer[t];
            if (p >= g_.num_ops() || key_of_[p] == npos) return std::nullopt;
            const auto& outs = g_.op(p).outputs;
            const auto s = static_cast<std::size_t>(std::find(outs.begin(), outs.end(), t) - outs.begin());
            return slot_of_[key_of_[p]] + s;
        };
        for (std::size_t o = 0; o < g_.num_ops(); ++o) {
            const auto id = static_cast<id_type>(o);
            const bool forward = g_.op(id).phase == phase::forward;
            for (auto t : g_.reads_of(id, base.variant[o])) {
                const auto s = slot(t);
                if (!s || slot_bytes_[*s] == 0) continue;
                if (forward && block[o] == ref && key_of_[o] != npos) in_mask_[key_of_[o]] |= bit(*s);
                else if (!forward && std::find(ref_ops_.begin(), ref_ops_.end(), producer[t]) != ref_ops_.end())
                    backward_mask_ |= bit(*s);
            }
        }
        // Ops that cost nothing and read nothing the block makes (a sharded
        // weight's gather) are always run again: that never costs and never
        // keeps more. The others are enumerated.
        for (std::size_t i = 0; i < ref_ops_.size(); ++i) {
            const bool free = in_mask_[i] == 0 && g_.cost_of(static_cast<id_type>(ref_ops_[i]),
                                                             base.variant[ref_ops_[i]]) == 0;
            (free ? always_ : choose_).push_back(i);
        }
        if (choose_.size() > max_ops) return;
        enumerate();
    }

    bool usable() const noexcept { return !front_.empty(); }
    std::size_t blocks() const noexcept { return ops_of_.size(); }

    /// The choices that mix two replicated keep sets and come closest to
    /// `target` under `evaluate` (exact): the cheapest that fits, and the
    /// one a block over it (a descent from it may find a cheaper fitting
    /// plan); without a fitting mix, the uniform set of least peak. Stops at
    /// `until` with what it has.
    template <class Evaluate>
    std::vector<choice_type> starts(size_type target, Evaluate&& evaluate, const memplan::deadline& until) const {
        std::vector<choice_type> out;
        if (!usable()) return out;
        struct point {
            std::size_t set;
            size_type peak;
            double cost;
        };
        std::vector<point> exact;
        for (std::size_t j = 0; j < front_.size() && !until.expired(); ++j) {
            const auto e = evaluate(mixed(j, j, 0), target);
            exact.push_back({j, e.peak, e.cost});
        }
        if (exact.empty()) return out;
        // Pairs (a fits, b does not and is cheaper) by their segment's cost
        // at the target: a's cost less the share of b's saving that fits.
        struct pair {
            double at_target;
            std::size_t a, b;
        };
        std::vector<pair> candidates;
        const point* least = &exact.front();
        for (const auto& a : exact) {
            if (a.peak < least->peak) least = &a;
            if (a.peak > target) continue;
            candidates.push_back({a.cost, a.set, a.set});
            for (const auto& b : exact) {
                if (b.peak <= target || b.cost >= a.cost) continue;
                const double share = double(target - a.peak) / double(b.peak - a.peak);
                candidates.push_back({a.cost - share * (a.cost - b.cost), a.set, b.set});
            }
        }
        if (candidates.empty()) {
            out.push_back(mixed(least->set, least->set, 0));
            return out;
        }
        std::sort(candidates.begin(), candidates.end(),
                  [](const pair& x, const pair& y) { return x.at_target < y.at_target; });
        std::optional<choice_type> best, over;
        double best_cost = 0;
        long double over_excess = 0;
        std::size_t tried = 0;
        for (const auto& p : candidates) {
            if (tried == pairs || until.expired()) break;
            if (p.a == p.b) { // uniform: nothing to bisect
                if (!best || p.at_target < best_cost) {
                    best = mixed(p.a, p.a, 0);
                    best_cost = p.at_target;
                }
                continue;
            }
            ++tried;
            // The most blocks on b that still fit: k = 0 fits (all on a).
            std::size_t lo = 0, hi = blocks();
            std::optional<double> lo_cost;
            while (lo < hi && !until.expired()) {
                const std::size_t mid = (lo + hi + 1) / 2;
                const auto e = evaluate(mixed(p.a, p.b, mid), target);
                if (e.peak <= target) {
                    lo = mid;
                    lo_cost = e.cost;
                } else {
                    hi = mid - 1;
                    if (!over || e.excess < over_excess) {
                        over = mixed(p.a, p.b, mid);
                        over_excess = e.excess;
                    }
                }
            }
            const double cost = lo_cost ? *lo_cost : exact_cost(exact, p.a);
            if (!best || cost < best_cost) {
                best = mixed(p.a, p.b, lo);
                best_cost = cost;
            }
        }
        if (best) out.push_back(std::move(*best));
        if (over) out.push_back(std::move(*over));
        return out;
    }

    /// `base` with the first `k` equal blocks on front set `b` and the
    /// others on set `a`.
    choice_type mixed(std::size_t a, std::size_t b, std::size_t k) const {
        auto c = base_;
        for (std::size_t i = 0; i < ops_of_.size(); ++i) apply(c, i < k ? front_[b] : front_[a], ops_of_[i]);
        return c;
    }

    /// Sets on the front (for tests): the rerun ops as a bit mask over the
    /// reference block's forward ops, bytes kept and cost in the cut model.
    struct set {
        std::uint32_t rerun = 0;
        double bytes = 0, cost = 0;
    };
    const std::vector<set>& front() const noexcept { return front_; }

private:
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    static constexpr std::uint64_t bit(std::size_t s) { return std::uint64_t{1} << s; }

    static double exact_cost(const auto& exact, std::size_t set) {
        for (const auto& p : exact)
            if (p.set == set) return p.cost;
        return 0;
    }

    bool equal_ops(id_type a, id_type b) const {
        const auto& x = g_.op(a);
        const auto& y = g_.op(b);
        if (x.outputs.size() != y.outputs.size() || x.inputs.size() != y.inputs.size()) return false;
        if (g_.cost_of(a, base_.variant[a]) != g_.cost_of(b, base_.variant[b])) return false;
        for (std::size_t s = 0; s < x.outputs.size(); ++s) {
            const auto t = x.outputs[s], u = y.outputs[s];
            if (g_.tensor(t).bytes != g_.tensor(u).bytes || ctx_.droppable(t) != ctx_.droppable(u) ||
                ctx_.checkpointable(t) != ctx_.checkpointable(u))
                return false;
        }
        return true;
    }

    /// What set `rerun` needs kept: the backward's reads and the rerun ops'
    /// inputs, less what the rerun ops make.
    std::uint64_t kept_mask(std::uint32_t rerun) const {
        std::uint64_t need = backward_mask_, made = 0;
        for (std::size_t i = 0; i < ref_ops_.size(); ++i)
            if (rerun >> i & 1u) {
                need |= in_mask_[i];
                made |= out_mask_[i];
            }
        return need & ~made;
    }

    void enumerate() {
        const std::size_t n = choose_.size();
        std::vector<double> op_cost(n);
        for (std::size_t j = 0; j < n; ++j)
            op_cost[j] = g_.cost_of(static_cast<id_type>(ref_ops_[choose_[j]]), base_.variant[ref_ops_[choose_[j]]]);
        std::uint32_t always = 0;
        for (auto i : always_) always |= std::uint32_t{1} << i;
        std::vector<set> all;
        all.reserve(std::size_t{1} << n);
        for (std::uint32_t x = 0; x < (std::uint32_t{1} << n); ++x) {
            std::uint32_t r = always;
            set s{0, 0, 0};
            for (std::size_t j = 0; j < n; ++j)
                if (x >> j & 1u) {
                    r |= std::uint32_t{1} << choose_[j];
                    s.cost += op_cost[j];
                }
            s.rerun = r;
            for (auto m = kept_mask(r); m; m &= m - 1) s.bytes += double(slot_bytes_[std::countr_zero(m)]);
            all.push_back(s);
        }
        std::sort(all.begin(), all.end(), [](const set& x, const set& y) {
            return x.bytes < y.bytes || (x.bytes == y.bytes && x.cost < y.cost);
        });
        std::vector<set> front;
        for (const auto& s : all)
            if (front.empty() || s.cost < front.back().cost) front.push_back(s);
        // At most max_front of them, evenly spaced, both ends included.
        if (front.size() > max_front) {
            std::vector<set> thin;
            for (std::size_t i = 0; i < max_front; ++i) thin.push_back(front[i * (front.size() - 1) / (max_front - 1)]);
            front = std::move(thin);
        }
        front_ = std::move(front);
    }

    /// Sets block `ops`'s keep and checkpoint flags to what `s` keeps.
    void apply(choice_type& c, const set& s, const std::vector<std::size_t>& ops) const {
        const auto kept = kept_mask(s.rerun);
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const auto& outs = g_.op(static_cast<id_type>(ops[i])).outputs;
            for (std::size_t k = 0; k < outs.size(); ++k) {
                const auto t = outs[k];
                const bool keep = (kept >> (slot_of_[i] + k)) & 1u;
                if (ctx_.droppable(t)) {
                    c.keep[t] = keep;
                } else if (ctx_.checkpointable(t)) {
                    if (c.checkpoint.empty()) c.checkpoint.assign(g_.num_tensors(), 0);
                    c.checkpoint[t] = keep;
                }
            }
        }
    }

    const remat_context<Graph>& ctx_;
    const Graph& g_;
    choice_type base_;
    std::vector<std::size_t> ref_ops_;              ///< the reference block's forward ops
    std::vector<std::vector<std::size_t>> ops_of_;  ///< per equal block, its ops by reference position
    std::vector<std::size_t> key_of_;               ///< per op: its reference position, npos outside equal blocks
    std::vector<std::size_t> slot_of_;              ///< per reference op: its first output's slot
    std::vector<size_type> slot_bytes_;             ///< per slot: bytes (0: neither droppable nor checkpointable)
    std::vector<std::uint64_t> out_mask_, in_mask_; ///< per reference op: slots it writes, slots it reads
    std::uint64_t backward_mask_ = 0;               ///< slots the backward part reads
    std::vector<std::size_t> always_, choose_;      ///< reference ops always rerun (free), and enumerated
    std::vector<set> front_;
};

} // namespace memplan::detail
