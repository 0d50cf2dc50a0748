// `joint`: checkpointing together with operator implementations, after
// MONeT (Shah et al., ICLR 2021): which forward tensors to keep and, for
// every op, which variant runs (convolution algorithm and its workspace,
// batch-norm backward from its input or its output, ReLU backward from its
// output or a 1-bit mask), under a budget on the final arena.
//
// The formulation is ours, a peak-driven descent with exact evaluation
// instead of one large MILP: start from everything kept and the fastest
// variant of every op (which may cost less than the store-all schedule);
// while the live-bytes profile of the schedule exceeds the target, look at
// the peak step, list the moves that can lower it (drop a kept tensor live
// there; switch an op to a variant that reads less or needs less scratch),
// estimate bytes-per-cost for each, evaluate the most promising ones
// exactly (schedule with recomputation, liveness, profile) and apply the one
// that removes the most excess (bytes above the target, summed over steps)
// per unit of added cost. Then allocate; if fragmentation pushes the arena
// over the budget, lower the target by the difference and continue. Last, a
// polishing pass re-keeps dropped tensors, keeps as checkpoints the tensors
// the backward remakes but never reads (remat_choice::checkpoint), and
// restores fast variants where the plan still fits, most expensive
// recomputation first; the time left goes to a large-neighbourhood search
// that keeps one such tensor and descends again without dropping it.
//
// On a training graph the descents also start from minimum cuts
// (remat/detail/cut_start.hpp): with the variants of a start fixed, the keep
// set that minimises recomputation cost + lambda * bytes kept after the
// forward part is one s-t cut, exact for any price lambda, and a bisection
// on lambda finds the cheapest cut whose exact schedule fits the target.
// Where the budget binds what crosses from the forward to the backward (a
// saved-bytes budget, memplan_torch's `budget_on="saved"`) the cut is
// nearly the whole answer and the descent from the full keep set is not:
// it drops one tensor at a time by bytes per added cost, which can pass
// over a pair of tensors that are cheap to remake only together.
//
// On a graph without a backward part the moves include cones: a tensor live
// across the peak ends its first life with its last reader before it and is
// made again later from a frontier of ancestors dropped the same way
// (`cone_moves`), since dropping it alone would keep its producer's inputs
// alive across the same peak. A round in which no trial helps marks those
// moves useless and tries the next ones, a few rounds before giving up.
#pragma once

#include <memplan/remat/detail/cut_start.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/liveness.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

struct joint : remat_planner<joint> {
    static constexpr std::string_view name = "joint";
    std::size_t trials_per_step = 24; ///< moves evaluated exactly at each descent step
    double cost_exponent = 1.0;       ///< a move's worth: bytes removed / (cost added)^exponent
    bool lean_start = true;           ///< start from the variants that read least (else the fastest)
    bool cut_start = true;            ///< also start from minimum cuts (training graphs; remat/detail/cut_start.hpp)
    double improve_seconds = 1e9;     ///< at most this long improving a fitting plan (within the time limit)
    /// The exact placement of a descent's plan that misses the budget: this
    /// share of the time left, at most this many seconds.
    static constexpr double descent_exact_share = 0.25;
    static constexpr double descent_exact_seconds = 2.0;
    /// The same for each trial while improving a fitting plan.
    static constexpr double improve_exact_share = 0.125;
    static constexpr double improve_exact_seconds = 1.0;
    /// Random tie-breaking orders tried by the cut start, after none.
    static constexpr int cut_tie_breaks = 4;

    using remat_planner<joint>::plan; ///< plan(graph, options)

    template <class Graph>
    basic_remat_result<typename Graph::size_type, typename Graph::id_type>
    plan(const remat_context<Graph>& ctx, const remat_options& opt) const;
};

namespace detail {

template <class Graph>
class joint_search {
public:
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    using choice_type = remat_choice<Graph>;
    using planned_type = basic_planned<size_type, id_type>;

    struct evaluation {
        basic_schedule<id_type> schedule;
        std::vector<size_type> live; ///< bytes live per step
        size_type peak = 0;
        std::size_t peak_step = 0;
        double cost = 0;
        long double excess = 0; ///< bytes above the target, summed over steps
        size_type over = 0;     ///< bytes of the peak above the target
        /// What freeing `bytes` at the peak is worth: no more than the peak
        /// is over the target (a plan a few bytes over it needs the
        /// cheapest move that frees a few bytes, not the most bytes per
        /// cost).
        double worth(double bytes) const { return over > 0 ? std::min(bytes, double(over)) : bytes; }
    };

    joint_search(const remat_context<Graph>& ctx, memplan::deadline until, std::size_t trials, double exponent)
        : ctx_(ctx), g_(ctx.graph()), until_(until), trials_(trials), exponent_(exponent) {}

    bool out_of_time() const { return until_.expired(); }

    evaluation evaluate(const choice_type& c, size_type target) const {
        evaluation e;
        e.schedule = ctx_.schedule_of(c);
        const auto live = compute_liveness(g_, e.schedule);
        e.live = live_bytes(live.buffers, live.alias_of, e.schedule.size());
        for (std::size_t i = 0; i < e.live.size(); ++i) {
            if (e.live[i] > e.peak) {
                e.peak = e.live[i];
                e.peak_step = i;
            }
            if (e.live[i] > target) e.excess += static_cast<long double>(e.live[i] - target);
        }
        e.over = e.peak > target ? e.peak - target : 0;
        e.cost = schedule_cost(g_, e.schedule);
        return e;
    }

    /// The fastest variant of every op, everything kept.
    choice_type fastest() const {
        auto c = ctx_.keep_all();
        for (std::size_t o = 0; o < g_.num_ops(); ++o) {
            const auto& op = g_.op(static_cast<id_type>(o));
            for (std::size_t v = 0; v < op.variants.size(); ++v)
                if (op.variants[v].cost < op.variants[c.variant[o]].cost) c.variant[o] = static_cast<id_type>(v);
        }
        return c;
    }

    /// Everything kept; each op runs the fastest of its variants that read
    /// the fewest bytes of forward tensors its producer did not just write
    /// in place (so that a batch-norm reads its own output, which it may
    /// write over its input, rather than its input).
    choice_type lean() const {
        auto c = ctx_.keep_all();
        auto weight = [&](id_type o, id_type v) {
            double w = 0;
            for (auto t : g_.reads_of(o, v))
                if (ctx_.droppable(t)) {
                    const auto p = ctx_.index().producer[t];
                    bool overwrites_input = false;
                    for (auto [x, y] : g_.op(p).inplace) overwrites_input = overwrites_input || y == t;
                    w += overwrites_input ? 0.5 * double(g_.tensor(t).bytes) : double(g_.tensor(t).bytes);
                }
            return w;
        };
        for (std::size_t o = 0; o < g_.num_ops(); ++o) {
            const auto id = static_cast<id_type>(o);
            const auto& op = g_.op(id);
            for (std::size_t v = 0; v < op.variants.size(); ++v) {
                const auto cv = static_cast<id_type>(v);
                const double wv = weight(id, cv), wc = weight(id, c.variant[o]);
                if (wv < wc || (wv == wc && op.variants[v].cost < op.variants[c.variant[o]].cost)) c.variant[o] = cv;
            }
        }
        return c;
    }

    /// Starts from minimum cuts on `base`'s variants
    /// (remat/detail/cut_start.hpp): the price of a kept byte is searched
    /// by bisection (in logarithm) for the cheapest cut whose exact peak is
    /// at most `target`, without and then with a few random orders of ties.
    /// Returns that cut, and the cut with the least excess among those
    /// cheaper than it (a descent from it may find a cheaper fitting plan:
    /// a cut a few bytes over the target is often one free recomputation
    /// away from fitting); none on a graph without a backward part.
    std::vector<choice_type> cut_starts(const choice_type& base, size_type target) const {
        std::vector<choice_type> out;
        if (ctx_.general()) return out;
        detail::keep_cut<Graph> cut(ctx_, base);
        struct tried {
            choice_type choice;
            double cost;
            long double excess;
        };
        std::vector<tried> over; // cuts over the target
        std::optional<tried> fits;
        auto consider = [&](double log_lambda) {
            auto c = cut.at(std::exp(log_lambda));
            const auto e = evaluate(c, target);
            if (e.peak <= target) {
                if (!fits || e.cost < fits->cost) fits = tried{std::move(c), e.cost, 0};
                return true;
            }
            over.push_back({std::move(c), e.cost, e.excess});
            return false;
        };
        const double mid = std::log(cut.scale());
        // Without tie-breaking, then with a few random orders of the ties
        // (fixed seeds: plans are reproducible).
        std::mt19937_64 rng(0x6a6f696e74);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        for (int tie = 0; tie <= joint::cut_tie_breaks && !out_of_time(); ++tie) {
            if (tie > 0) {
                std::vector<double> w(g_.num_ops());
                for (auto& x : w) x = unit(rng);
                cut.set_tie_break(std::move(w));
            }
            double lo = mid - 30, hi = mid + 30; // prices from e^-30 to e^30 times the scale
            if (!consider(hi)) break;            // nothing fits, whatever the price
            for (int step = 0; step < 40 && !out_of_time(); ++step) {
                const double m = 0.5 * (lo + hi);
                (consider(m) ? hi : lo) = m;
            }
        }
        const tried* closest = nullptr;
        for (const auto& t : over)
            if ((!fits || t.cost < fits->cost) && (!closest || t.excess < closest->excess)) closest = &t;
        if (fits) out.push_back(std::move(fits->choice));
        if (closest) out.push_back(closest->choice);
        return out;
    }

    /// Descends from `c` until the live-bytes peak is at most `target` or no
    /// move helps, never dropping a tensor of `protect`. Returns false when
    /// it got stuck or ran out of time.
    bool descend(choice_type& c, size_type target, std::span<const id_type> protect = {}) const {
        auto cur = evaluate(c, target);
        // Moves found useless are not tried again for a while: variant
        // switches that free nothing would otherwise crowd out the rest.
        std::vector<std::uint64_t> useless;
        std::size_t iteration = 0;
        std::size_t failures = 0;
        constexpr std::size_t max_failures = 6;
        while (cur.peak > target) {
            if (out_of_time()) return false;
            if (++iteration % 64 == 0) useless.clear();
            auto moves = candidate_moves(c, cur);
            for (const auto p : protect)
                std::erase_if(moves, [&](const move& m) {
                    if (m.kind == move::drop_cone || m.kind == move::remake_from)
                        return m.id == p || std::find(m.cone.begin(), m.cone.end(), p) != m.cone.end() ||
                               std::find(m.unmarks.begin(), m.unmarks.end(), p) != m.unmarks.end();
                    return (m.kind == move::drop_tensor || m.kind == move::per_use || m.kind == move::checkpoint) &&
                           (m.id == p || m.id2 == p);
                });
            const auto all = moves;
            std::erase_if(moves, [&](const move& m) {
                return std::find(useless.begin(), useless.end(), key(m)) != useless.end();
            });
            if (moves.empty() && !useless.empty()) { // what was useless may help now
                useless.clear();
                moves = all;
            }
            // Half the trials for the best drops, half for the best switches.
            std::stable_partition(moves.begin(), moves.end(), [](const move& m) { return m.is_drop(); });
            {
                const auto drops = static_cast<std::size_t>(
                    std::count_if(moves.begin(), moves.end(), [](const move& m) { return m.is_drop(); }));
                const std::size_t take_drops = std::min(drops, std::max(trials_ / 2, trials_ - (moves.size() - drops)));
                const std::size_t take_switches = std::min(moves.size() - drops, trials_ - take_drops);
                std::vector<move> picked(moves.begin(), moves.begin() + static_cast<std::ptrdiff_t>(take_drops));
                picked.insert(picked.end(), moves.begin() + static_cast<std::ptrdiff_t>(drops),
                              moves.begin() + static_cast<std::ptrdiff_t>(drops + take_switches));
                moves = std::move(picked);
            }
            if (moves.empty()) return false;
            const std::size_t n = std::min(trials_, moves.size());
            std::size_t best = moves.size();
            double best_score = -1;
            evaluation best_eval;
            std::vector<std::pair<long double, std::size_t>> tried; // (gain, trial)
            for (std::size_t k = 0; k < n; ++k) {
                apply(c, moves[k]);
                auto e = evaluate(c, target);
                undo(c, moves[k]);
                const long double gain = cur.excess - e.excess;
                tried.push_back({gain, k});
                if (gain <= 0) {
                    useless.push_back(key(moves[k]));
                    continue;
                }
                const double added = std::max(e.cost - cur.cost, 1e-9 * std::max(1.0, cur.cost));
                const double score = static_cast<double>(gain) / std::pow(added, exponent_);
                if (score > best_score) {
                    best_score = score;
                    best = k;
                    best_eval = std::move(e);
                }
            }
            if (best == moves.size()) {
                // No single move helps: two together may (a shared input
                // kept for both recomputations, say).
                if (auto pair = best_pair(c, cur, moves, tried, target)) {
                    apply(c, moves[pair->first]);
                    apply(c, moves[pair->second]);
                    cur = evaluate(c, target);
                    failures = 0;
                    continue;
                }
                // The next round tries the moves not yet found useless.
                if (++failures > max_failures) return false;
                continue;
            }
            failures = 0;
            apply(c, moves[best]);
            cur = std::move(best_eval);
        }
        return true;
    }

    /// The pair of trials, among the `pair_width` that did best alone, whose
    /// two moves together lower the excess most per unit of added cost.
    template <class Move>
    std::optional<std::pair<std::size_t, std::size_t>>
    best_pair(choice_type& c, const evaluation& cur, const std::vector<Move>& moves,
              std::vector<std::pair<long double, std::size_t>> tried, size_type target) const {
        constexpr std::size_t pair_width = 8;
        std::stable_sort(tried.begin(), tried.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        if (tried.size() > pair_width) tried.resize(pair_width);
        std::optional<std::pair<std::size_t, std::size_t>> best;
        double best_score = -1;
        for (std::size_t i = 0; i < tried.size(); ++i)
            for (std::size_t j = i + 1; j < tried.size(); ++j) {
                if (out_of_time()) return best;
                const auto& a = moves[tried[i].second];
                const auto& b = moves[tried[j].second];
                if (a.kind == b.kind && a.id == b.id) continue;
                apply(c, a);
                apply(c, b);
                const auto e = evaluate(c, target);
                undo(c, b);
                undo(c, a);
                const long double gain = cur.excess - e.excess;
                if (gain <= 0) continue;
                const double added = std::max(e.cost - cur.cost, 1e-9 * std::max(1.0, cur.cost));
                const double score = static_cast<double>(gain) / std::pow(added, exponent_);
                if (score > best_score) {
                    best_score = score;
                    best = std::pair{tried[i].second, tried[j].second};
                }
            }
        return best;
    }

    /// Re-keeps dropped tensors and restores faster variants while the peak
    /// stays at most `target`, the biggest saving first.
    void polish(choice_type& c, size_type target) const {
        auto cur = evaluate(c, target);
        std::vector<move> undo_moves;
        for (std::size_t t = 0; t < g_.num_tensors(); ++t) {
            if (c.is_per_use(t)) undo_moves.push_back({move::per_use, static_cast<id_type>(t), 0, 1});
            if (!c.keep[t]) undo_moves.push_back({move::keep_tensor, static_cast<id_type>(t), 0, 0});
        }
        const auto fast = fastest();
        for (std::size_t o = 0; o < g_.num_ops(); ++o)
            if (c.variant[o] != fast.variant[o])
                undo_moves.push_back({move::set_variant, static_cast<id_type>(o), fast.variant[o], c.variant[o]});
        for (auto t : checkpoint_candidates(c, cur)) undo_moves.push_back({move::checkpoint, t, 1, 0});
        // Most expensive recomputation (or slowest variant) first.
        auto saving = [&](const move& m) {
            if (m.kind == move::keep_tensor || m.kind == move::per_use || m.kind == move::checkpoint)
                return g_.cost_of(ctx_.index().producer[m.id], c.variant[ctx_.index().producer[m.id]]);
            return g_.cost_of(m.id, m.old_variant) - g_.cost_of(m.id, m.variant);
        };
        std::stable_sort(undo_moves.begin(), undo_moves.end(),
                         [&](const move& a, const move& b) { return saving(a) > saving(b); });
        for (const auto& m : undo_moves) {
            if (out_of_time()) return;
            apply(c, m);
            auto e = evaluate(c, target);
            if (e.peak <= target && e.cost <= cur.cost) cur = std::move(e);
            else undo(c, m);
        }
    }

    /// Large-neighbourhood improvement of a fitting choice: keep one dropped
    /// tensor again (the most expensive recomputation first), descend back
    /// under the target without dropping it, and accept when the plan got
    /// cheaper. Each round first tries the knapsack exchange at the peak
    /// (exchange()). `accept(choice)` allocates and says whether it fits.
    template <class Accept>
    void improve(choice_type& c, size_type target, Accept&& accept) const {
        auto cur = evaluate(c, target);
        double cur_cost = cur.cost;
        // Keeps `ts` again (as checkpoints where only the forward reads them)
        // and descends without dropping them; true when that was accepted.
        auto try_keeping = [&](std::span<const id_type> ts) {
            auto trial = c;
            for (const auto t : ts) {
                if (ctx_.checkpointable(t)) apply(trial, {move::checkpoint, t, 1, 0});
                else trial.keep[t] = 1;
            }
            if (!descend(trial, target, ts)) return false;
            polish(trial, target);
            auto e = evaluate(trial, target);
            if (!(e.cost < cur_cost * (1 - 1e-9) && accept(trial))) return false;
            c = std::move(trial);
            cur_cost = e.cost;
            cur = std::move(e);
            return true;
        };
        for (bool improved = true; improved && !out_of_time();) {
            improved = false;
            if (auto x = exchange(c, target)) {
                polish(*x, target);
                auto e = evaluate(*x, target);
                if (e.peak <= target && e.cost < cur_cost * (1 - 1e-9) && accept(*x)) {
                    c = std::move(*x);
                    cur_cost = e.cost;
                    cur = std::move(e);
                    improved = true;
                    continue;
                }
            }
            // Dropped tensors to keep again, and tensors the backward remakes
            // but reads nothing of to keep as checkpoints: the most expensive
            // recomputation first.
            std::vector<std::pair<double, id_type>> dropped;
            auto cost_of_making = [&](id_type t) {
                const auto p = ctx_.index().producer[t];
                return g_.cost_of(p, c.variant[p]);
            };
            for (std::size_t t = 0; t < g_.num_tensors(); ++t)
                if (!c.keep[t]) dropped.push_back({cost_of_making(static_cast<id_type>(t)), static_cast<id_type>(t)});
            for (auto t : checkpoint_candidates(c, cur)) dropped.push_back({cost_of_making(t), t});
            std::stable_sort(dropped.begin(), dropped.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
            auto is_kept = [&](id_type t) { return ctx_.checkpointable(t) ? c.is_checkpoint(t) : c.keep[t] != 0; };
            for (const auto& [_, t] : dropped) {
                if (out_of_time()) return;
                if (is_kept(t)) continue;
                const id_type one[] = {t};
                if (try_keeping(one)) improved = true;
            }
        }
    }

    /// A knapsack over what is live at the peak of a fitting choice (a
    /// training graph's): every droppable forward tensor that is, or when
    /// kept would be, live across the peak step is an item worth what
    /// keeping it saves (its producer's run, or the estimated cost of
    /// remaking it) and weighing what switching it alone changes at the
    /// peak, as evaluated (a dropped tensor may free nothing there when
    /// something else keeps its bytes alive). The items dropped are the
    /// cheapest set that frees what the items weigh beyond the room left
    /// under the target (what they weigh now plus the slack): ordered by
    /// value per byte, those far below the break item are dropped, those
    /// far above kept, and the `exchange_core` on each side of it chosen
    /// exactly by dynamic programming over the bytes to free, in units of
    /// their common divisor (coarser, weights rounded down, where the
    /// table would be too large). The descent chooses one tensor at a time, which stops short
    /// where the right answer is a combination: on MobileNet-V2 under FLOPs
    /// its depthwise convolutions all free the same bytes per FLOP, and
    /// which of them to remake is a subset sum (PyTorch's partitioner
    /// solves the same kind of knapsack after its minimum cut). Items
    /// interact (a remade chain, other steps), so the choice is evaluated
    /// exactly; one over the target retries with a smaller capacity.
    /// Returns the cheaper fitting choice, or nothing.
    std::optional<choice_type> exchange(const choice_type& c, size_type target) const {
        if (ctx_.general()) return std::nullopt;
        const auto cur = evaluate(c, target);
        if (cur.peak > target) return std::nullopt;
        const std::size_t p = cur.peak_step;
        const auto& s = cur.schedule;
        // Where each op first runs and where each tensor is last read.
        constexpr std::size_t none = choice_type::none;
        std::vector<std::size_t> first_run(g_.num_ops(), none), last_read(g_.num_tensors(), none);
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (first_run[s[i].op] == none) first_run[s[i].op] = i;
            for (auto t : g_.reads_of(s[i].op, s[i].variant)) last_read[t] = i;
        }
        const auto& reads_p = g_.reads_of(s[p].op, s[p].variant);
        const auto& outs_p = g_.op(s[p].op).outputs;
        struct item {
            id_type tensor;
            std::uint64_t bytes;
            double value;
        };
        std::vector<item> items;
        std::uint64_t kept_bytes = 0;
        remake_visit visit(g_.num_ops());
        for (std::size_t t = 0; t < g_.num_tensors(); ++t) {
            const auto id = static_cast<id_type>(t);
            if (!ctx_.droppable(id) || c.is_per_use(t)) continue;
            if (std::find(reads_p.begin(), reads_p.end(), id) != reads_p.end() ||
                std::find(outs_p.begin(), outs_p.end(), id) != outs_p.end())
                continue;
            const auto prod = ctx_.index().producer[t];
            if (first_run[prod] == none || first_run[prod] >= ctx_.boundary()) continue;
            if (first_run[prod] > p || last_read[t] == none || last_read[t] < p) continue;
            const double value = c.keep[t] ? remake_cost(c, prod, visit) : g_.cost_of(prod, c.variant[prod]);
            items.push_back({id, 0, value});
        }
        // What switching each item alone changes at the peak.
        {
            auto one = c;
            for (auto& it : items) {
                if (out_of_time()) return std::nullopt;
                one.keep[it.tensor] = !c.keep[it.tensor];
                const auto e = evaluate(one, target);
                one.keep[it.tensor] = c.keep[it.tensor];
                const auto delta = c.keep[it.tensor] ? (cur.peak > e.peak ? cur.peak - e.peak : 0)
                                                     : (e.peak > cur.peak ? e.peak - cur.peak : 0);
                it.bytes = static_cast<std::uint64_t>(delta);
                if (c.keep[it.tensor]) kept_bytes += it.bytes;
            }
            // Weightless items stay as they are (polish keeps the free ones).
            std::erase_if(items, [](const item& it) { return it.bytes == 0; });
        }
        if (items.empty()) return std::nullopt;
        std::uint64_t total = 0;
        for (const auto& it : items) total += it.bytes;
        std::uint64_t capacity = kept_bytes + (target - cur.peak);
        std::uint64_t gcd = 0;
        for (const auto& it : items) gcd = std::gcd(gcd, it.bytes);
        std::vector<std::size_t> order(items.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
            return items[x].value * double(items[y].bytes) < items[y].value * double(items[x].bytes);
        });
        for (int round = 0; round < exchange_rounds && !out_of_time(); ++round) {
            // Which items to drop: the cheapest set that frees at least
            // `need` bytes (a covering knapsack), in units of the weights'
            // common divisor, or coarser to keep the table within
            // exchange_cells bits (weights rounded down and `need` up, so
            // that no set frees less than it seems to).
            auto next = c;
            for (const auto& it : items) next.keep[it.tensor] = 1;
            if (total > capacity) {
                // The items by value per byte, cheapest first: dropping them
                // in this order meets `need` at the break item. Far from it
                // the answer is clear (the cheap ones dropped, the dear ones
                // kept); the knapsack is solved exactly on a core of items
                // around it (as in Balas and Zemel's core for 0-1 knapsacks).
                std::uint64_t need = total - capacity;
                std::size_t k = 0;
                for (std::uint64_t freed = 0; k < order.size(); ++k) {
                    freed += items[order[k]].bytes;
                    if (freed >= need) break;
                }
                if (k == order.size()) return std::nullopt; // nothing frees enough
                const std::size_t lo = k > exchange_core ? k - exchange_core : 0;
                const std::size_t hi = std::min(order.size(), k + exchange_core + 1);
                for (std::size_t r = 0; r < lo; ++r) {
                    next.keep[items[order[r]].tensor] = 0;
                    need -= items[order[r]].bytes;
                }
                std::uint64_t unit = 0;
                for (std::size_t r = lo; r < hi; ++r) unit = std::gcd(unit, items[order[r]].bytes);
                const std::size_t n = hi - lo;
                if ((need / unit + 1) * n > exchange_cells) unit = need * n / exchange_cells + 1;
                const auto cells = static_cast<std::size_t>((need + unit - 1) / unit);
                constexpr double inf = std::numeric_limits<double>::infinity();
                std::vector<double> cheapest(cells + 1, inf); // to free at least b units
                cheapest[0] = 0;
                std::vector<std::vector<bool>> drop(n, std::vector<bool>(cells + 1, false));
                for (std::size_t i = 0; i < n; ++i) {
                    const auto& it = items[order[lo + i]];
                    const auto w = static_cast<std::size_t>(it.bytes / unit);
                    if (w == 0) continue;
                    for (std::size_t b = cells; b > 0; --b) {
                        const double with = cheapest[b > w ? b - w : 0] + it.value;
                        if (with < cheapest[b]) {
                            cheapest[b] = with;
                            drop[i][b] = true;
                        }
                    }
                }
                if (cheapest[cells] == inf) return std::nullopt;
                std::size_t b = cells;
                for (std::size_t i = n; i-- > 0 && b > 0;) {
                    if (!drop[i][b]) continue;
                    const auto& it = items[order[lo + i]];
                    next.keep[it.tensor] = 0;
                    const auto w = static_cast<std::size_t>(it.bytes / unit);
                    b = b > w ? b - w : 0;
                }
            }
            if (next.keep == c.keep) return std::nullopt;
            auto e = evaluate(next, target);
            if (e.peak <= target) {
                if (e.cost < cur.cost * (1 - 1e-9)) return next;
                return std::nullopt;
            }
            // Items interact: ask for the weight of this choice less the
            // excess, at least one unit of the weights less.
            std::uint64_t weight = 0;
            for (const auto& it : items)
                if (next.keep[it.tensor]) weight += it.bytes;
            const std::uint64_t lower = std::max<std::uint64_t>(e.over, gcd);
            if (lower >= weight) return std::nullopt;
            capacity = std::min(capacity, weight) - lower;
        }
        return std::nullopt;
    }

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
    /// exchange(): at most this many cells (bits) in its table.
    static constexpr std::uint64_t exchange_cells = std::uint64_t{1} << 27;
    /// exchange(): items on each side of the break item solved exactly.
    static constexpr std::size_t exchange_core = 48;
    /// exchange(): choices tried (each one over the target lowers the capacity).
    static constexpr int exchange_rounds = 6;

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

    struct move;
    static std::uint64_t key(const move& m) {
        return (std::uint64_t(m.kind) << 60) ^ (std::uint64_t(m.id) << 20) ^ std::uint64_t(m.variant) ^
               (std::uint64_t(m.id2) << 40);
    }

    struct move {
        enum kind_type : std::uint8_t {
            drop_tensor,
            keep_tensor,
            set_variant,
            per_use,
            drop_cone,
            checkpoint,
            remake_from ///< drop `id` and `cone`, set checkpoints `marks`, clear `unmarks`
        } kind = drop_tensor;
        id_type id = 0;          ///< tensor or op
        id_type variant = 0;     ///< set_variant: the new variant; drop_tensor: 1 when also per use; checkpoint: 1 to set
        id_type old_variant = 0; ///< set_variant: the variant before
        double score = 0;        ///< estimate: bytes saved per cost added
        id_type id2 = Graph::npos; ///< drop_tensor: a second tensor dropped with the first; drop_cone: the base position
        /// drop_cone: kept ancestors of `id` dropped with it; each (and `id`)
        /// ends its first life with its last reader before base position `id2`.
        std::vector<id_type> cone{};
        std::vector<id_type> marks{};   ///< remake_from: tensors that become checkpoints
        std::vector<id_type> unmarks{}; ///< remake_from: checkpoints made again instead

        bool is_drop() const noexcept {
            return kind == drop_tensor || kind == drop_cone || kind == remake_from || (kind == checkpoint && !variant);
        }
    };

    /// The last reader of `t` before base position `before`, or none.
    std::size_t last_reader_before(id_type t, std::size_t before) const {
        std::size_t last = choice_type::none;
        for (auto r : ctx_.index().consumers[t]) {
            const auto at = ctx_.position(r);
            if (at < before && (last == choice_type::none || at > last)) last = at;
        }
        return last;
    }

    void apply(choice_type& c, const move& m) const {
        switch (m.kind) {
        case move::remake_from:
            c.keep[m.id] = 0;
            for (auto t : m.cone) c.keep[t] = 0;
            if (c.checkpoint.empty()) c.checkpoint.assign(g_.num_tensors(), 0);
            for (auto t : m.marks) c.checkpoint[t] = 1;
            for (auto t : m.unmarks) c.checkpoint[t] = 0;
            break;
        case move::drop_cone: {
            if (c.drop_after.empty()) c.drop_after.assign(g_.num_tensors(), choice_type::none);
            auto drop = [&](id_type t) {
                c.keep[t] = 0;
                const auto last = last_reader_before(t, m.id2);
                // No reader before: its first life ends where it is made.
                c.drop_after[t] = last != choice_type::none ? last : ctx_.position(ctx_.index().producer[t]);
            };
            drop(m.id);
            for (auto t : m.cone) drop(t);
            break;
        }
        case move::drop_tensor:
            c.keep[m.id] = 0;
            if (!c.drop_after.empty()) c.drop_after[m.id] = choice_type::none;
            if (m.id2 != Graph::npos) {
                c.keep[m.id2] = 0;
                if (!c.drop_after.empty()) c.drop_after[m.id2] = choice_type::none;
            }
            if (m.variant != 0) { // and made again for each later reader
                if (c.per_use.empty()) c.per_use.assign(g_.num_tensors(), 0);
                c.per_use[m.id] = 1;
            }
            break;
        case move::keep_tensor: c.keep[m.id] = 1; break;
        case move::set_variant: c.variant[m.id] = m.variant; break;
        case move::per_use:
            if (c.per_use.empty()) c.per_use.assign(g_.num_tensors(), 0);
            c.per_use[m.id] = m.variant != 0;
            break;
        case move::checkpoint:
            if (c.checkpoint.empty()) c.checkpoint.assign(g_.num_tensors(), 0);
            c.checkpoint[m.id] = m.variant != 0;
            break;
        }
    }
    void undo(choice_type& c, const move& m) const {
        switch (m.kind) {
        case move::remake_from:
            c.keep[m.id] = 1;
            for (auto t : m.cone) c.keep[t] = 1;
            for (auto t : m.marks) c.checkpoint[t] = 0;
            for (auto t : m.unmarks) c.checkpoint[t] = 1;
            break;
        case move::drop_cone:
            c.keep[m.id] = 1;
            c.drop_after[m.id] = choice_type::none;
            for (auto t : m.cone) {
                c.keep[t] = 1;
                c.drop_after[t] = choice_type::none;
            }
            break;
        case move::drop_tensor:
            c.keep[m.id] = 1;
            if (m.id2 != Graph::npos) c.keep[m.id2] = 1;
            if (m.variant != 0) c.per_use[m.id] = 0;
            break;
        case move::keep_tensor: c.keep[m.id] = 0; break;
        case move::set_variant: c.variant[m.id] = m.old_variant; break;
        case move::per_use: c.per_use[m.id] = m.old_variant != 0; break;
        case move::checkpoint: c.checkpoint[m.id] = m.old_variant != 0; break;
        }
    }

    /// Moves that can lower the bytes live at the peak step, best estimate
    /// first: drop a kept tensor live across it; switch an op that reads such
    /// a tensor to a variant that does not; switch the peak op to a variant
    /// with less workspace.
    std::vector<move> candidate_moves(const choice_type& c, const evaluation& cur) const {
        const std::size_t p = cur.peak_step;
        const auto live = compute_liveness(g_, cur.schedule);
        const auto& s = cur.schedule;
        const auto& pop = g_.op(s[p].op);
        const auto& reads_p = g_.reads_of(s[p].op, s[p].variant);
        std::vector<move> moves;
        std::vector<char> seen_op(g_.num_ops(), 0);
        remake_visit visit(g_.num_ops());
        for (const auto& b : live.buffers) {
            if (b.is_workspace() || b.first > p || b.last < p) continue;
            const auto t = b.tensor;
            if (c.is_checkpoint(t)) { // a checkpoint across the peak: let it go, its readers make it again
                if (std::find(reads_p.begin(), reads_p.end(), t) != reads_p.end()) continue;
                const auto prod = ctx_.index().producer[t];
                moves.push_back({move::checkpoint, t, 0, 1,
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
                    moves.push_back({move::per_use, t, 1, 0,
                                     cur.worth(double(b.bytes)) / std::max(g_.cost_of(prod, c.variant[prod]), 1e-12)});
                continue;
            }
            // Recomputing t runs its producer again, and the producers of its
            // inputs that are gone too, theirs, and so on.
            const double est = remake_cost(c, prod, visit);
            moves.push_back({move::drop_tensor, t, 0, 0, cur.worth(double(b.bytes)) / std::max(est, 1e-12)});
            // Without a backward part a dropped tensor is read again in the
            // middle of the graph, where its one recomputed life would span
            // the peak it was dropped for: drop it per use in one move.
            if (ctx_.general())
                moves.push_back({move::drop_tensor, t, 1, 0, cur.worth(double(b.bytes)) / std::max(2 * est, 1e-12)});
            // When t was written over its producer's input in place, that
            // input must go too, or it stays alive to recompute t from.
            for (auto [x, y] : g_.op(prod).inplace)
                if (y == t && ctx_.droppable(x) && c.keep[x]) {
                    const auto px = ctx_.index().producer[x];
                    const double est2 = est + g_.cost_of(px, c.variant[px]);
                    moves.push_back({move::drop_tensor, t, 0, 0, cur.worth(double(b.bytes)) / std::max(est2, 1e-12), x});
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
                    moves.push_back({move::set_variant, r, static_cast<id_type>(v), c.variant[r],
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
                moves.push_back({move::set_variant, o, static_cast<id_type>(v), c.variant[o],
                                 cur.worth(double(ws - pop.variants[v].workspace)) / std::max(extra, 1e-12)});
            }
        }
        std::stable_sort(moves.begin(), moves.end(), [](const move& a, const move& b) { return a.score > b.score; });
        return moves;
    }

    /// The frontier tensor (`can_expand`) whose replacement by its producer's
    /// inputs leaves the fewest extra bytes at the peak, counting the inputs
    /// that `joins` says would join the frontier; frontier.size() for none.
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
                        std::vector<move>& moves) const {
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
                move m{move::remake_from, x, 0, 0, cur.worth(net) / std::max(cost, 1e-12)};
                m.cone = riders;
                for (auto u : frontier)
                    if (state[u] == 2 && !c.is_checkpoint(u)) m.marks.push_back(u);
                for (auto u : touched)
                    if (state[u] == 1 && c.is_checkpoint(u)) m.unmarks.push_back(u);
                moves.push_back(std::move(m));
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
    void cone_moves(const choice_type& c, const evaluation& cur, const Liveness& live, std::vector<move>& moves) const {
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
                move m{move::drop_cone, x, static_cast<id_type>(cone.size()), 0, 0, static_cast<id_type>(pb), cone};
                m.score = cur.worth(double(g_.tensor(x).bytes) - extra) / std::max(cost, 1e-12);
                moves.push_back(std::move(m));
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
    memplan::deadline until_;
    std::size_t trials_;
    double exponent_;
};

} // namespace detail

template <class Graph>
basic_remat_result<typename Graph::size_type, typename Graph::id_type>
joint::plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
    const stopwatch watch;
    using size_type = typename Graph::size_type;
    basic_remat_result<size_type, typename Graph::id_type> out;
    out.planner = std::string(name);
    const auto& g = ctx.graph();
    const auto need = ctx.min_memory();
    if (opt.budget < need.first) {
        detail::no_plan_within_budget(ctx, opt, out, name);
        out.seconds = watch.seconds();
        return out;
    }
    const memplan::deadline until = opt.time_limit.from_now();
    detail::joint_search<Graph> search(ctx, until, trials_per_step, cost_exponent);
    const size_type budget =
        static_cast<size_type>(std::min<std::uint64_t>(opt.budget, std::numeric_limits<size_type>::max()));
    bool found = false;
    basic_planned<size_type, typename Graph::id_type> best;
    double best_cost = 0;
    remat_choice<Graph> best_choice;
    size_type best_target = budget;
    auto report = [&] {
        if (!opt.on_progress) return;
        remat_progress pr;
        pr.planner = name;
        pr.best_arena = found ? best.plan.arena_bytes : 0;
        pr.best_overhead = found && ctx.fastest_cost() > 0 ? best_cost / ctx.fastest_cost() - 1.0 : 0.0;
        pr.elapsed_seconds = watch.seconds();
        opt.on_progress(pr);
    };
    auto consider = [&](basic_planned<size_type, typename Graph::id_type>& planned) {
        if (!has_solution(planned.status) || planned.plan.arena_bytes > opt.budget) return false;
        const double cost = schedule_cost(g, planned.plan.steps);
        if (found && cost >= best_cost) return false;
        best = std::move(planned);
        best_cost = cost;
        found = true;
        report();
        return true;
    };
    // From each start (the leanest variants, then the fastest): descend,
    // allocate, and tighten the target by what fragmentation added.
    std::vector<remat_choice<Graph>> starts;
    if (lean_start) starts.push_back(search.lean());
    starts.push_back(search.fastest());
    // First the minimum cuts on the same variants: on a training graph they
    // usually fit at once and leave the descents' starts to improve on.
    if (cut_start) {
        std::vector<remat_choice<Graph>> cuts;
        for (const auto& base : starts)
            for (auto& c : search.cut_starts(base, budget)) cuts.push_back(std::move(c));
        starts.insert(starts.begin(), cuts.begin(), cuts.end());
    }
    for (auto& c : starts) {
        size_type target = budget;
        for (int round = 0; round < 8 && !search.out_of_time(); ++round) {
            if (!search.descend(c, target)) break;
            auto polished = c;
            search.polish(polished, target);
            auto planned = place_within(g, ctx.schedule_of(polished), opt.budget, opt.alignment,
                                        until.share(descent_exact_share).within(descent_exact_seconds));
            if (!has_solution(planned.status)) break;
            const auto arena = planned.plan.arena_bytes;
            if (arena <= opt.budget) {
                if (consider(planned)) {
                    best_choice = std::move(polished);
                    best_target = target;
                }
                break;
            }
            const size_type over = arena - budget;
            if (over >= target) break;
            target -= std::max<size_type>(over, static_cast<size_type>(opt.alignment));
        }
    }
    // Then spend the time left on cheaper plans under the same target.
    if (found && improve_seconds > 0 && !search.out_of_time()) {
        auto accept = [&](const remat_choice<Graph>& trial) {
            auto p = place_within(g, ctx.schedule_of(trial), opt.budget, opt.alignment,
                                  until.share(improve_exact_share).within(improve_exact_seconds));
            return consider(p);
        };
        detail::joint_search<Graph> improver(ctx, until.within(improve_seconds), trials_per_step, cost_exponent);
        improver.improve(best_choice, best_target, accept);
    }
    if (!found) {
        detail::no_plan_within_budget(ctx, opt, out, name);
        out.seconds = watch.seconds();
        return out;
    }
    detail::finish_remat_result(ctx, opt, std::move(best), out);
    out.status = status::feasible;
    out.seconds = watch.seconds();
    return out;
}

} // namespace memplan
