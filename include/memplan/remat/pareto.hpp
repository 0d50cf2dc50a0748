// The memory / compute trade-off of a rematerialization planner as a curve:
// from the store-all arena down to the smallest budget at which the planner
// still finds a plan. Bisection finds that smallest budget, then the planner
// runs at budgets evenly spaced between it and store-all.
//
// Any plan found at one budget also fits every larger budget, so each point
// reports the cheapest plan found so far that fits its budget (its own run's
// or a tighter run's): the curve is a Pareto front, monotone by construction
// even when a heuristic planner is not (lower budget -> overhead not lower).
// The curve's CSV form is io/pareto_csv.hpp.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace memplan {

/// One point of the curve.
template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_pareto_point {
    Size budget = 0; ///< the budget the planner was given
    /// The cheapest plan found within `budget` by any run of the sweep (with
    /// a solution), else this budget's own unsuccessful outcome.
    basic_remat_result<Size, Id> result;
    double seconds = 0;   ///< how long the planner ran at this budget
    bool carried = false; ///< `result` comes from a run at a smaller budget that was cheaper than this one's
};

using pareto_point = basic_pareto_point<>;

/// What the sweep reports after each planner run (on the caller's thread).
struct pareto_progress {
    std::string_view stage; ///< "store_all", "bisect" or "sweep"
    std::uint64_t budget = 0;
    bool found = false; ///< the run found a plan within `budget`
    std::size_t runs = 0; ///< planner runs so far
};

struct pareto_options {
    std::size_t points = 8;          ///< budgets on the curve, smallest feasible and store-all included; >= 2
    double tolerance = 0.01;         ///< bisection stops within this fraction of the store-all arena
    std::size_t max_bisection_steps = 12;
    std::uint64_t alignment = 256;   ///< for the store-all run that sets the top of the curve
    double store_all_time_limit = 10;
    /// The whole sweep: no run starts after it (the store-all run stops by
    /// it too). Hand the same deadline to `plan_at`'s runs to bound the
    /// sweep with one clock; budgets left without a run report the cheapest
    /// plan found that fits them, or `no_solution`.
    memplan::deadline deadline{};
    std::function<void(const pareto_progress&)> on_progress; ///< optional
};

/// Where a bisection on the budget ended: `hi` fits; `lo` is the largest
/// budget seen not to (or the bracket's start when every try fit).
struct budget_bracket {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
};

/// Bisection for the smallest budget in [lo, hi] at which `fits(budget)`
/// holds, given that it holds at `hi` and (as far as the search assumes) at
/// every budget above one where it holds: `lo` itself is tried first (a
/// planner often fits the schedule-free bound), then the bracket is halved
/// until it is at most `tolerance` bytes, after `max_steps` halvings, or once
/// `until` has passed.
template <class Fits>
budget_bracket smallest_fitting(std::uint64_t lo, std::uint64_t hi, std::uint64_t tolerance, std::size_t max_steps,
                                const memplan::deadline& until, Fits&& fits) {
    if (lo < hi && !until.expired() && fits(lo)) return {lo, lo};
    for (std::size_t step = 0; step < max_steps && hi > lo && hi - lo > tolerance && !until.expired(); ++step) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        if (fits(mid)) hi = mid;
        else lo = mid;
    }
    return {lo, hi};
}

/// Sweeps budgets for `plan_at`, any callable taking a budget in bytes and
/// returning the planner's `basic_remat_result` for it. Returns the points
/// by increasing budget; the last one is at the store-all arena. When the
/// planner finds nothing even at the store-all arena, returns that one
/// point. Throws `memplan::error` for `points < 2` or a bad tolerance. On a
/// context the caller built (and may share with `plan_at`), or on a graph.
template <class Graph, class PlanAt>
    requires std::is_invocable_r_v<remat_result_of<Graph>, PlanAt&, std::uint64_t>
std::vector<basic_pareto_point<typename Graph::size_type, typename Graph::id_type>>
pareto_sweep(const remat_context<Graph>& ctx, PlanAt&& plan_at, const pareto_options& opt = {}) {
    const Graph& g = ctx.graph();
    using size_type = typename Graph::size_type;
    using result_type = remat_result_of<Graph>;
    using point_type = basic_pareto_point<size_type, typename Graph::id_type>;
    if (opt.points < 2) throw error("remat", "pareto sweep: points must be at least 2, got " + std::to_string(opt.points));
    if (!(opt.tolerance > 0 && opt.tolerance < 1))
        throw error("remat", "pareto sweep: tolerance must be in (0, 1)");

    std::size_t runs = 0;
    auto report = [&](std::string_view stage, std::uint64_t budget, bool found) {
        if (opt.on_progress) opt.on_progress(pareto_progress{stage, budget, found, runs});
    };

    remat_options top_opt;
    top_opt.alignment = opt.alignment;
    top_opt.time_limit = {opt.deadline, opt.store_all_time_limit};
    const auto top_run = store_all{}.plan(ctx, top_opt);
    if (!has_solution(top_run.status))
        throw error("remat", "pareto sweep: graph '" + g.name() + "' has no store-all plan: " + top_run.message);
    const std::uint64_t top = top_run.arena();
    ++runs;
    report("store_all", top, true);

    // Every run with a plan that fits its budget: candidates for every budget >= its arena.
    std::vector<result_type> found;
    auto fits = [](const result_type& r) { return has_solution(r.status) && r.arena() <= r.budget; };
    struct run_outcome {
        result_type result;
        double seconds;
        bool ok;
    };
    auto run = [&](std::string_view stage, std::uint64_t budget) {
        const stopwatch watch;
        result_type r = plan_at(budget);
        const double secs = watch.seconds();
        // A planner that ignores the budget field is still judged by it.
        r.budget = static_cast<size_type>(budget);
        const bool ok = fits(r);
        ++runs;
        report(stage, budget, ok);
        if (ok) found.push_back(r);
        return run_outcome{std::move(r), secs, ok};
    };

    auto top_outcome = run("sweep", top);
    // Bisection between a budget known to fail and one known to succeed;
    // nothing below the schedule-free bound can succeed.
    std::uint64_t hi = top;
    if (top_outcome.ok) {
        const std::uint64_t floor_bytes = std::min<std::uint64_t>(ctx.min_memory().first, top);
        const auto step_tolerance = std::max<std::uint64_t>(
            1, static_cast<std::uint64_t>(opt.tolerance * static_cast<double>(top)));
        // floor_bytes is not yet known to fail
        hi = smallest_fitting(floor_bytes, hi, step_tolerance, opt.max_bisection_steps, opt.deadline,
                              [&](std::uint64_t b) { return run("bisect", b).ok; }).hi;
    }

    std::vector<std::uint64_t> budgets;
    if (!top_outcome.ok) {
        budgets.push_back(top);
    } else {
        for (std::size_t i = 0; i < opt.points; ++i) {
            const double f = static_cast<double>(i) / static_cast<double>(opt.points - 1);
            auto b = hi + static_cast<std::uint64_t>(f * static_cast<double>(top - hi));
            if (i + 1 == opt.points) b = top;
            if (budgets.empty() || b > budgets.back()) budgets.push_back(b);
        }
    }

    std::vector<std::pair<std::uint64_t, run_outcome>> outcomes;
    for (auto b : budgets) {
        if (b == top) {
            outcomes.emplace_back(b, top_outcome);
        } else if (opt.deadline.expired()) {
            result_type none;
            none.status = status::no_solution;
            none.message = "time limit reached before a run at this budget";
            none.budget = static_cast<size_type>(b);
            outcomes.emplace_back(b, run_outcome{std::move(none), 0.0, false});
        } else {
            outcomes.emplace_back(b, run("sweep", b));
        }
    }

    // The cheapest fitting plan per budget, among all runs of the sweep.
    std::vector<point_type> out;
    out.reserve(outcomes.size());
    for (auto& [b, oc] : outcomes) {
        point_type p;
        p.budget = static_cast<size_type>(b);
        p.seconds = oc.seconds;
        const result_type* best = oc.ok ? &oc.result : nullptr;
        for (const auto& r : found)
            if (r.arena() <= b && (!best || r.cost < best->cost)) best = &r;
        p.carried = best && best != &oc.result;
        p.result = best ? *best : oc.result;
        out.push_back(std::move(p));
    }
    return out;
}

template <class Graph, class PlanAt>
    requires std::is_invocable_r_v<remat_result_of<Graph>, PlanAt&, std::uint64_t>
std::vector<basic_pareto_point<typename Graph::size_type, typename Graph::id_type>>
pareto_sweep(const Graph& g, PlanAt&& plan_at, const pareto_options& opt = {}) {
    return pareto_sweep(remat_context<Graph>(g), std::forward<PlanAt>(plan_at), opt);
}

/// The plans a budget search found within their budgets: each is a
/// candidate for every budget at or above its arena.
template <class Graph>
class fitting_plans {
public:
    using result_type = remat_result_of<Graph>;

    /// Keeps `r` when it has a plan within `budget`; returns whether it did.
    bool offer(const result_type& r, std::uint64_t budget) {
        if (!has_solution(r.status) || r.arena() > budget) return false;
        plans_.push_back(r);
        return true;
    }
    /// The cheapest kept plan within `budget` (ties: the smaller arena); nullptr when none fits.
    const result_type* cheapest_within(std::uint64_t budget) const {
        const result_type* best = nullptr;
        for (const auto& r : plans_)
            if (r.arena() <= budget &&
                (!best || r.cost < best->cost || (r.cost == best->cost && r.arena() < best->arena())))
                best = &r;
        return best;
    }
    /// The kept plan with the smallest arena (ties: the cheaper); nullptr when none.
    const result_type* smallest() const {
        const result_type* best = nullptr;
        for (const auto& r : plans_)
            if (!best || r.arena() < best->arena() || (r.arena() == best->arena() && r.cost < best->cost)) best = &r;
        return best;
    }
    bool empty() const noexcept { return plans_.empty(); }

private:
    std::vector<result_type> plans_;
};

/// Bisection for the smallest budget at which `plan_at` (a callable as for
/// `pareto_sweep`) finds a plan, from the context's schedule-free bound up
/// to `top`, a budget known to fit (the store-all arena): within
/// `tolerance` of top - bound (a fraction in (0, 1)), at most `max_steps`
/// halvings, no run started after `until`. Every plan within its budget is
/// offered to `found`. A miss is not a proof that nothing smaller fits (most
/// planners are heuristics): `hi` of the result is the smallest budget the
/// bisection saw fit (`top` when nothing smaller did), `lo` the largest
/// seen to miss (or the bound).
template <class Graph, class PlanAt>
    requires std::is_invocable_r_v<remat_result_of<Graph>, PlanAt&, std::uint64_t>
budget_bracket smallest_budget_search(const remat_context<Graph>& ctx, std::uint64_t top, PlanAt&& plan_at,
                                      fitting_plans<Graph>& found, double tolerance, std::size_t max_steps,
                                      const memplan::deadline& until) {
    if (!(tolerance > 0 && tolerance < 1)) throw error("remat", "smallest budget: tolerance must be in (0, 1)");
    const std::uint64_t floor_bytes = std::min<std::uint64_t>(ctx.min_memory().first, top);
    const auto step = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(tolerance * static_cast<double>(top - floor_bytes)));
    return smallest_fitting(floor_bytes, top, step, max_steps, until,
                            [&](std::uint64_t b) { return found.offer(plan_at(b), b); });
}

/// The plan `plan_at` (a callable as for `pareto_sweep`) makes at the
/// smallest budget it fits: `smallest_budget_search` from the schedule-free
/// bound up to `top` (the store-all arena), within `opt.tolerance` of `top`,
/// at most `opt.max_bisection_steps` halvings, no run started after
/// `opt.deadline`. Returns `top`'s run when nothing smaller fits, and it has
/// no solution when not even `top` fits.
template <class Graph, class PlanAt>
    requires std::is_invocable_r_v<remat_result_of<Graph>, PlanAt&, std::uint64_t>
remat_result_of<Graph>
smallest_budget_plan(const Graph& g, std::uint64_t top, PlanAt&& plan_at, const pareto_options& opt = {}) {
    if (!(opt.tolerance > 0 && opt.tolerance < 1))
        throw error("remat", "smallest budget: tolerance must be in (0, 1)");
    fitting_plans<Graph> found;
    auto first = plan_at(top);
    if (!found.offer(first, top)) return first;
    const remat_context<Graph> ctx(g);
    const std::uint64_t floor_bytes = std::min<std::uint64_t>(ctx.min_memory().first, top);
    // tolerance of top, as a share of top - floor
    const double span = top > floor_bytes ? static_cast<double>(top - floor_bytes) : 1.0;
    const double share = std::min(0.999, opt.tolerance * static_cast<double>(top) / span);
    smallest_budget_search(ctx, top, plan_at, found, share, opt.max_bisection_steps, opt.deadline);
    return *found.smallest();
}

/// The smallest arena among points whose overhead is at most `overhead`
/// (e.g. 0.10 for 10%); nullopt when none is that cheap.
template <class Size, class Id>
std::optional<Size> memory_at_overhead(const std::vector<basic_pareto_point<Size, Id>>& points, double overhead) {
    std::optional<Size> best;
    for (const auto& p : points)
        if (has_solution(p.result.status) && p.result.overhead() <= overhead + 1e-12 &&
            (!best || p.result.arena() < *best))
            best = p.result.arena();
    return best;
}

} // namespace memplan
