// The search of the `joint` planner (remat/joint.hpp) over choices of what
// to keep and which variant each op runs:
//
//  - starts: everything kept with the leanest or the fastest variants, and
//    minimum cuts on those variants (remat/detail/cut_start.hpp);
//  - descend(): from a start, apply the best of the moves at the peak
//    (remat/detail/joint_neighbourhood.hpp), judged by exact evaluation
//    (remat/detail/joint_evaluation.hpp), until the profile fits a target;
//  - polish(): undo what the fitting choice does not need;
//  - improve(): a large-neighbourhood search that keeps one dropped tensor
//    and descends again without dropping it, after a knapsack exchange of
//    what is live at the peak (exchange(), remat/detail/covering_knapsack.hpp).
//
// Moves are applied through a journal (remat/detail/joint_moves.hpp) that
// undoes them exactly. The planner (joint::plan) drives these steps,
// allocates the fitting choices and keeps the cheapest.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/remat/detail/covering_knapsack.hpp>
#include <memplan/remat/detail/cut_start.hpp>
#include <memplan/remat/detail/joint_evaluation.hpp>
#include <memplan/remat/detail/joint_moves.hpp>
#include <memplan/remat/detail/joint_neighbourhood.hpp>
#include <memplan/remat/recompute.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace memplan::detail {

template <class Graph>
class joint_search {
public:
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    using choice_type = remat_choice<Graph>;
    using evaluation = joint_evaluation<Graph>;
    using move = joint_move::any<id_type>;
    using scored = joint_move::scored<id_type>;

    /// Random tie-breaking orders tried by the cut start, after none.
    static constexpr int cut_tie_breaks = 4;

    joint_search(const remat_context<Graph>& ctx, memplan::deadline until, std::size_t trials, double exponent)
        : ctx_(ctx), g_(ctx.graph()), moves_(ctx), until_(until), trials_(trials), exponent_(exponent) {}

    /// Out of time at the deadline, or earlier once `stop()` says so (the
    /// planner's convergence test).
    bool out_of_time() const { return until_.expired() || (stop_ && stop_()); }
    void stop_when(std::function<bool()> stop) { stop_ = std::move(stop); }

    evaluation evaluate(const choice_type& c, size_type target) const { return evaluate_choice(ctx_, c, target); }

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
        for (int tie = 0; tie <= cut_tie_breaks && !out_of_time(); ++tie) {
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
        choice_journal<Graph> journal(c);
        while (cur.peak > target) {
            if (out_of_time()) return false;
            if (++iteration % 64 == 0) useless.clear();
            auto moves = moves_.candidate_moves(c, cur);
            for (const auto p : protect)
                std::erase_if(moves, [&](const scored& m) { return joint_move::touches(m.move, p); });
            const auto all = moves;
            std::erase_if(moves, [&](const scored& m) {
                return std::find(useless.begin(), useless.end(), joint_move::key(m.move)) != useless.end();
            });
            if (moves.empty() && !useless.empty()) { // what was useless may help now
                useless.clear();
                moves = all;
            }
            // Half the trials for the best drops, half for the best switches.
            auto is_drop = [](const scored& m) { return joint_move::is_drop(m.move); };
            std::stable_partition(moves.begin(), moves.end(), is_drop);
            {
                const auto drops = static_cast<std::size_t>(std::count_if(moves.begin(), moves.end(), is_drop));
                const std::size_t take_drops = std::min(drops, std::max(trials_ / 2, trials_ - (moves.size() - drops)));
                const std::size_t take_switches = std::min(moves.size() - drops, trials_ - take_drops);
                std::vector<scored> picked(moves.begin(), moves.begin() + static_cast<std::ptrdiff_t>(take_drops));
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
                joint_move::apply(journal, ctx_, moves[k].move);
                auto e = evaluate(c, target);
                journal.undo();
                const long double gain = cur.excess - e.excess;
                tried.push_back({gain, k});
                if (gain <= 0) {
                    useless.push_back(joint_move::key(moves[k].move));
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
                    joint_move::apply(journal, ctx_, moves[pair->first].move);
                    joint_move::apply(journal, ctx_, moves[pair->second].move);
                    journal.keep();
                    cur = evaluate(c, target);
                    failures = 0;
                    continue;
                }
                // The next round tries the moves not yet found useless.
                if (++failures > max_failures) return false;
                continue;
            }
            failures = 0;
            joint_move::apply(journal, ctx_, moves[best].move);
            journal.keep();
            cur = std::move(best_eval);
        }
        return true;
    }

    /// The pair of trials, among the `pair_width` that did best alone, whose
    /// two moves together lower the excess most per unit of added cost.
    std::optional<std::pair<std::size_t, std::size_t>>
    best_pair(choice_type& c, const evaluation& cur, const std::vector<scored>& moves,
              std::vector<std::pair<long double, std::size_t>> tried, size_type target) const {
        constexpr std::size_t pair_width = 8;
        std::stable_sort(tried.begin(), tried.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        if (tried.size() > pair_width) tried.resize(pair_width);
        std::optional<std::pair<std::size_t, std::size_t>> best;
        double best_score = -1;
        choice_journal<Graph> journal(c);
        for (std::size_t i = 0; i < tried.size(); ++i)
            for (std::size_t j = i + 1; j < tried.size(); ++j) {
                if (out_of_time()) return best;
                const auto& a = moves[tried[i].second].move;
                const auto& b = moves[tried[j].second].move;
                if (a.index() == b.index() && joint_move::subject(a) == joint_move::subject(b)) continue;
                joint_move::apply(journal, ctx_, a);
                joint_move::apply(journal, ctx_, b);
                const auto e = evaluate(c, target);
                journal.undo();
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
            const auto id = static_cast<id_type>(t);
            if (c.is_per_use(t)) undo_moves.push_back(joint_move::set_per_use<id_type>{id, false});
            if (!c.keep[t]) undo_moves.push_back(joint_move::keep_tensor<id_type>{id});
        }
        const auto fast = fastest();
        for (std::size_t o = 0; o < g_.num_ops(); ++o)
            if (c.variant[o] != fast.variant[o])
                undo_moves.push_back(
                    joint_move::set_variant<id_type>{static_cast<id_type>(o), fast.variant[o], c.variant[o]});
        for (auto t : moves_.checkpoint_candidates(c, cur))
            undo_moves.push_back(joint_move::set_checkpoint<id_type>{t, true});
        // Most expensive recomputation (or slowest variant) first.
        auto saving = [&](const move& m) {
            if (const auto* v = std::get_if<joint_move::set_variant<id_type>>(&m))
                return g_.cost_of(v->op, v->from) - g_.cost_of(v->op, v->to);
            const auto prod = ctx_.index().producer[joint_move::subject(m)];
            return g_.cost_of(prod, c.variant[prod]);
        };
        std::stable_sort(undo_moves.begin(), undo_moves.end(),
                         [&](const move& a, const move& b) { return saving(a) > saving(b); });
        choice_journal<Graph> journal(c);
        for (const auto& m : undo_moves) {
            if (out_of_time()) return;
            joint_move::apply(journal, ctx_, m);
            auto e = evaluate(c, target);
            if (e.peak <= target && e.cost <= cur.cost) {
                cur = std::move(e);
                journal.keep();
            } else {
                journal.undo();
            }
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
            {
                choice_journal<Graph> edit(trial);
                for (const auto t : ts) {
                    if (ctx_.checkpointable(t)) edit.set_checkpoint(t, true);
                    else edit.set_keep(t, true);
                }
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
            for (auto t : moves_.checkpoint_candidates(c, cur)) dropped.push_back({cost_of_making(t), t});
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

    /// A knapsack over what is live at the peak of a fitting choice (a
    /// training graph's): every droppable forward tensor that is, or when
    /// kept would be, live across the peak step is an item worth what
    /// keeping it saves (its producer's run, or the estimated cost of
    /// remaking it) and weighing what switching it alone changes at the
    /// peak, as evaluated (a dropped tensor may free nothing there when
    /// something else keeps its bytes alive). The items dropped are the
    /// cheapest set that frees what the items weigh beyond the room left
    /// under the target (what they weigh now plus the slack), a covering
    /// knapsack (remat/detail/covering_knapsack.hpp). The descent chooses
    /// one tensor at a time, which stops short where the right answer is a
    /// combination: on MobileNet-V2 under FLOPs its depthwise convolutions
    /// all free the same bytes per FLOP, and which of them to remake is a
    /// subset sum (PyTorch's partitioner solves the same kind of knapsack
    /// after its minimum cut). Items interact (a remade chain, other
    /// steps), so the choice is evaluated exactly; one over the target
    /// retries with a smaller capacity. Returns the cheaper fitting choice,
    /// or nothing.
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
        typename joint_neighbourhood<Graph>::remake_visit visit(g_.num_ops());
        for (std::size_t t = 0; t < g_.num_tensors(); ++t) {
            const auto id = static_cast<id_type>(t);
            if (!ctx_.droppable(id) || c.is_per_use(t)) continue;
            if (std::find(reads_p.begin(), reads_p.end(), id) != reads_p.end() ||
                std::find(outs_p.begin(), outs_p.end(), id) != outs_p.end())
                continue;
            const auto prod = ctx_.index().producer[t];
            if (first_run[prod] == none || first_run[prod] >= ctx_.boundary()) continue;
            if (first_run[prod] > p || last_read[t] == none || last_read[t] < p) continue;
            const double value = c.keep[t] ? moves_.remake_cost(c, prod, visit) : g_.cost_of(prod, c.variant[prod]);
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
        std::vector<cover_item> weights;
        for (const auto& it : items) weights.push_back({it.bytes, it.value});
        for (int round = 0; round < exchange_rounds && !out_of_time(); ++round) {
            // Which items to drop: the cheapest set that frees what the items
            // weigh beyond `capacity` (a covering knapsack).
            auto next = c;
            for (const auto& it : items) next.keep[it.tensor] = 1;
            if (total > capacity) {
                const auto drop = cheapest_cover(weights, total - capacity, exchange_core, exchange_cells);
                if (!drop) return std::nullopt; // nothing frees enough
                for (std::size_t i = 0; i < items.size(); ++i)
                    if ((*drop)[i]) next.keep[items[i].tensor] = 0;
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

private:
    /// exchange(): at most this many cells (bits) in its knapsack's table.
    static constexpr std::uint64_t exchange_cells = std::uint64_t{1} << 27;
    /// exchange(): items on each side of the break item solved exactly.
    static constexpr std::size_t exchange_core = 48;
    /// exchange(): choices tried (each one over the target lowers the capacity).
    static constexpr int exchange_rounds = 6;

    const remat_context<Graph>& ctx_;
    const Graph& g_;
    joint_neighbourhood<Graph> moves_;
    memplan::deadline until_;
    std::function<bool()> stop_;
    std::size_t trials_;
    double exponent_;
};

} // namespace memplan::detail
