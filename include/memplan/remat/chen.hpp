// Chen et al. 2016 ("Training deep nets with sublinear memory cost"):
// checkpoint some articulation points of the forward part, drop the other
// forward tensors before the last checkpoint, and recompute each segment
// between checkpoints once, just before its backward needs it.
// `sqrt_n` checkpoints every floor(sqrt(n))-th of the n candidates;
// `chen_greedy` walks the candidates summing the bytes made since the last
// checkpoint and checkpoints where the sum passes a threshold B, searching B
// for the cheapest plan whose arena (after allocation) fits the budget.
#pragma once

#include <memplan/remat/detail/segments.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

namespace detail {

/// The choice that keeps the cut tensors of `seg` marked in `checkpoint`
/// (one flag per cut) and drops every other droppable tensor made before the
/// end of the last checkpointed segment. The part after the last checkpoint
/// is kept whole: its backward comes first, right after the forward, so
/// recomputing it would cost time and save no peak.
template <class Graph>
remat_choice<Graph> checkpoint_choice(const remat_context<Graph>& ctx, const forward_segments<Graph>& seg,
                                      const std::vector<char>& checkpoint) {
    auto c = ctx.keep_all();
    std::size_t last = seg.cut.size();
    for (std::size_t i = seg.cut.size(); i-- > 0;)
        if (checkpoint[i]) {
            last = i;
            break;
        }
    if (last == seg.cut.size()) return c;
    const Graph& g = ctx.graph();
    const auto& order = ctx.base_order();
    for (std::size_t p = 0; p < seg.end[last]; ++p)
        for (auto t : g.op(order[p]).outputs)
            if (ctx.droppable(t)) c.keep[t] = 0;
    for (std::size_t i = 0; i <= last; ++i)
        if (checkpoint[i] && ctx.droppable(seg.cut[i])) c.keep[seg.cut[i]] = 1;
    return c;
}

/// Reports progress at most about once a second, with the seconds since the
/// planner started (`watch`).
class progress_throttle {
public:
    explicit progress_throttle(const stopwatch& watch) : watch_(watch), last_(watch.seconds()) {}
    void maybe(const remat_options& opt, std::string_view planner, std::uint64_t arena, double overhead) {
        if (!opt.on_progress) return;
        const double now = watch_.seconds();
        if (now - last_ < 1.0) return;
        last_ = now;
        opt.on_progress(remat_progress{planner, arena, overhead, now});
    }

private:
    const stopwatch& watch_;
    double last_;
};

/// Places the schedule of `choice`; when it fits the budget and is cheaper
/// than `best` (or as cheap and smaller), it becomes `best`.
template <class Graph>
bool try_choice(const remat_context<Graph>& ctx, const remat_options& opt, const remat_choice<Graph>& choice,
                memplan::deadline exact_until, planned_of<Graph>& best, double& best_cost, bool& have_best) {
    const auto s = ctx.schedule_of(choice);
    auto planned = place_within(ctx.graph(), s, opt.budget, opt.alignment, exact_until);
    if (!has_solution(planned.status) || planned.plan.arena_bytes > opt.budget) return false;
    const double cost = schedule_cost(ctx.graph(), s);
    if (!have_best || cost < best_cost - 1e-9 * std::max(1.0, best_cost) ||
        (cost <= best_cost + 1e-9 * std::max(1.0, best_cost) && planned.plan.arena_bytes < best.plan.arena_bytes)) {
        best = std::move(planned);
        best_cost = cost;
        have_best = true;
    }
    return true;
}

} // namespace detail

/// Chen et al.'s sqrt(n) checkpointing. It does not search: the budget only
/// decides the status (feasible when the arena fits, else infeasible or
/// no_solution, with the plan's figures kept).
struct sqrt_n : remat_planner<sqrt_n> {
    static constexpr std::string_view name = "sqrt_n";

    using remat_planner<sqrt_n>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        auto out = start_result(ctx);
        const auto seg = detail::segment_forward(ctx);
        const std::size_t n = seg.cut.size();
        std::vector<char> checkpoint(n, 0);
        const auto k = static_cast<std::size_t>(std::floor(std::sqrt(static_cast<double>(n))));
        if (k > 0)
            for (std::size_t i = k - 1; i < n; i += k) checkpoint[i] = 1;
        const auto s = ctx.schedule_of(detail::checkpoint_choice(ctx, seg, checkpoint));
        detail::settle_placement(ctx, opt, place_within(ctx.graph(), s, opt.budget, opt.alignment, exact_deadline(opt)),
                                 out, std::to_string(n) + " candidates, every " + std::to_string(k) + "-th checkpointed",
                                 "sqrt(n) checkpointing");
        out.seconds = watch.seconds();
        return out;
    }
};

/// Chen et al.'s greedy checkpointing with a byte threshold B, searched: the
/// cheapest plan over a sweep of thresholds whose arena fits the budget.
struct chen_greedy : remat_planner<chen_greedy> {
    static constexpr std::string_view name = "chen_greedy";
    std::size_t thresholds = 48; ///< how many thresholds the sweep tries (geometric grid)

    using remat_planner<chen_greedy>::plan; ///< plan(graph, options)

    /// The checkpoints Chen's greedy picks for threshold `b`: walking the
    /// forward part, the bytes of droppable tensors made since the last
    /// checkpoint add up; at a candidate where they exceed `b`, checkpoint.
    template <class Graph>
    static std::vector<char> checkpoints_for(const remat_context<Graph>& ctx,
                                             const detail::forward_segments<Graph>& seg, double b) {
        const Graph& g = ctx.graph();
        std::vector<char> checkpoint(seg.cut.size(), 0);
        double sum = 0;
        for (std::size_t i = 0; i < seg.cut.size(); ++i) {
            for (std::size_t p = seg.begin(i); p < seg.end[i]; ++p)
                for (auto t : g.op(ctx.base_order()[p]).outputs)
                    if (ctx.droppable(t)) sum += static_cast<double>(g.tensor(t).bytes);
            if (sum > b) {
                checkpoint[i] = 1;
                sum = 0;
            }
        }
        return checkpoint;
    }

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        auto out = start_result(ctx);
        const Graph& g = ctx.graph();
        const memplan::deadline until = opt.time_limit.from_now();
        const auto seg = detail::segment_forward(ctx);
        detail::progress_throttle progress(watch);

        planned_of<Graph> best;
        double best_cost = 0;
        bool have_best = false;
        // Keeping everything is the threshold "infinity": the cheapest plan
        // of all when it fits.
        detail::try_choice(ctx, opt, ctx.keep_all(), memplan::deadline::passed(), best, best_cost, have_best);

        double total = 0, smallest = 0;
        for (std::size_t t = 0; t < g.num_tensors(); ++t)
            if (ctx.droppable(static_cast<typename Graph::id_type>(t))) {
                const auto b = static_cast<double>(g.tensor(static_cast<typename Graph::id_type>(t)).bytes);
                total += b;
                if (b > 0 && (smallest == 0 || b < smallest)) smallest = b;
            }
        std::vector<std::vector<char>> seen;
        if (!have_best && total > 0 && !seg.cut.empty()) {
            const double lo = std::max(1.0, smallest / 2), hi = total;
            const std::size_t n = std::max<std::size_t>(thresholds, 2);
            for (std::size_t i = 0; i < n; ++i) {
                if (until.expired()) break;
                const double b = lo * std::pow(hi / lo, static_cast<double>(i) / static_cast<double>(n - 1));
                auto checkpoint = checkpoints_for(ctx, seg, b);
                if (std::find(seen.begin(), seen.end(), checkpoint) != seen.end()) continue;
                seen.push_back(checkpoint);
                detail::try_choice(ctx, opt, detail::checkpoint_choice(ctx, seg, checkpoint), memplan::deadline::passed(), best, best_cost,
                                   have_best);
                if (have_best)
                    progress.maybe(opt, name, best.plan.arena_bytes,
                                   ctx.fastest_cost() > 0 ? best_cost / ctx.fastest_cost() - 1 : 0);
            }
            // The exact placement may close a small gap the heuristics leave:
            // try it on the sweep's plans, smallest lower bound first, with
            // what is left of the time.
            if (!have_best) {
                std::vector<std::pair<typename Graph::size_type, std::size_t>> by_bound;
                for (std::size_t i = 0; i < seen.size(); ++i) {
                    const auto s = ctx.schedule_of(detail::checkpoint_choice(ctx, seg, seen[i]));
                    by_bound.push_back({schedule_lower_bound(g, s), i});
                }
                std::sort(by_bound.begin(), by_bound.end());
                for (auto [bound, i] : by_bound) {
                    if (bound > opt.budget || until.remaining() <= 0.5 || have_best) break;
                    detail::try_choice(ctx, opt, detail::checkpoint_choice(ctx, seg, seen[i]),
                                       until.share(exact_share), best, best_cost, have_best);
                }
            }
        }

        if (have_best) {
            detail::finish_remat_result(ctx, opt, std::move(best), out);
            out.status = status::feasible;
            out.message = "best of " + std::to_string(seen.size() + 1) + " checkpoint sets";
        } else {
            // Report the smallest plan the sweep saw, for its figures.
            std::vector<char> all(seg.cut.size(), 1);
            const auto s = ctx.schedule_of(detail::checkpoint_choice(ctx, seg, all));
            auto planned = place_within(g, s, opt.budget, opt.alignment, memplan::deadline::passed());
            const auto arena = planned.plan.arena_bytes;
            detail::finish_remat_result(ctx, opt, std::move(planned), out);
            detail::no_plan_within_budget(ctx, opt, out, name);
            out.message += "; checkpointing every candidate needs " + std::to_string(arena) + " bytes";
        }
        out.seconds = watch.seconds();
        return out;
    }
};

} // namespace memplan
