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
// On a transformer's graph (ops named model.layers.<i>.*) the descents start
// first from the plans of the hand-written policies practitioners use
// (remat/policy.hpp: full, full:k, selective, op-sac, Megatron's modules):
// the cheapest that fits is the plan to beat, and polishing it re-keeps
// what the budget does not need dropped.
//
// On a graph without a backward part the moves include cones: a tensor live
// across the peak ends its first life with its last reader before it and is
// made again later from a frontier of ancestors dropped the same way
// (`cone_moves`), since dropping it alone would keep its producer's inputs
// alive across the same peak. A round in which no trial helps marks those
// moves useless and tries the next ones, a few rounds before giving up.
//
// The pieces, each in remat/detail/: joint_search.hpp (the starts, the
// descent, polish, the large-neighbourhood search and the knapsack
// exchange), joint_neighbourhood.hpp (the moves at the peak and their
// estimates), joint_moves.hpp (the moves as types, applied through an
// undoable journal), joint_evaluation.hpp (a choice's exact schedule and
// profile), covering_knapsack.hpp. This file is the planner: its options and
// the driver that runs the pieces and allocates what they find.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/remat/detail/block_frontier.hpp>
#include <memplan/remat/detail/joint_search.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
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
    /// On a transformer's graph (remat/policy.hpp), also start from the plans
    /// of the hand-written policies practitioners use, so that no such policy
    /// that fits the budget is cheaper than the result.
    bool policy_start = true;
    /// On a transformer's graph, also start from one block's keep sets
    /// replicated into every equal block and mixed two at a time to meet
    /// the budget (remat/detail/block_frontier.hpp).
    bool block_start = true;
    /// The search stops once it has found no cheaper plan for
    /// max(stall_seconds, stall_share * its running time): it has converged
    /// (0: search to the time limit). It stops at once with a plan as cheap
    /// as store-all with the fastest variants, which nothing beats.
    double stall_seconds = 2.0;
    double stall_share = 0.5;
    double improve_seconds = 1e9;     ///< at most this long improving a fitting plan (within the time limit)
    /// The exact placement of a descent's plan that misses the budget: this
    /// share of the time left, at most this many seconds.
    static constexpr double descent_exact_share = 0.25;
    static constexpr double descent_exact_seconds = 2.0;
    /// The same for each trial while improving a fitting plan.
    static constexpr double improve_exact_share = 0.125;
    static constexpr double improve_exact_seconds = 1.0;

    using remat_planner<joint>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const;
};

template <class Graph>
remat_result_of<Graph> joint::plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
    const stopwatch watch;
    using size_type = typename Graph::size_type;
    auto out = start_result(ctx);
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
    planned_of<Graph> best;
    double best_cost = 0;
    double found_at = 0; // when the best plan was found
    remat_choice<Graph> best_choice;
    size_type best_target = budget;
    const auto stalled = [&] {
        if (!found) return false;
        if (best_cost <= ctx.fastest_cost() * (1 + 1e-12)) return true; // nothing runs faster than store-all's fastest variants
        if (stall_seconds <= 0) return false;
        const double now = watch.seconds();
        return now - found_at > std::max(stall_seconds, stall_share * now);
    };
    search.stop_when(stalled);
    auto report = [&] {
        if (!opt.on_progress) return;
        remat_progress pr;
        pr.planner = name;
        pr.best_arena = found ? best.plan.arena_bytes : 0;
        pr.best_overhead = found && ctx.fastest_cost() > 0 ? best_cost / ctx.fastest_cost() - 1.0 : 0.0;
        pr.elapsed_seconds = watch.seconds();
        opt.on_progress(pr);
    };
    auto consider = [&](planned_of<Graph>& planned) {
        if (!has_solution(planned.status) || planned.plan.arena_bytes > opt.budget) return false;
        const double cost = schedule_cost(g, planned.plan.steps);
        if (found && cost >= best_cost) return false;
        best = std::move(planned);
        best_cost = cost;
        found = true;
        found_at = watch.seconds();
        report();
        return true;
    };
    std::vector<remat_choice<Graph>> starts;
    // Placed as they are, a first plan in a fraction of a second on a
    // transformer's graph: first one block's keep sets replicated and mixed
    // to the budget, then the practitioners' policies (the one that fits
    // cheapest is the plan to beat); each is then polished or descended like
    // any start.
    auto place_start = [&](remat_choice<Graph> c) {
        auto planned = place_within(g, ctx.schedule_of(c), opt.budget, opt.alignment, memplan::deadline::passed());
        if (consider(planned)) best_choice = c;
        starts.push_back(std::move(c));
    };
    if (block_start && has_blocks(g)) {
        const detail::block_frontier<Graph> frontier(ctx, search.fastest());
        const auto evaluate = [&](const remat_choice<Graph>& c, size_type t) { return search.evaluate(c, t); };
        for (auto& c : frontier.starts(budget, evaluate, until)) place_start(std::move(c));
    }
    if (policy_start && has_blocks(g))
        for (const auto& p : standard_recompute_policies()) place_start(policy_choice(ctx, p));
    // Then the minimum cuts on the leanest and the fastest variants, and
    // those variants with everything kept.
    std::vector<remat_choice<Graph>> bases;
    if (lean_start) bases.push_back(search.lean());
    bases.push_back(search.fastest());
    if (cut_start)
        for (const auto& base : bases)
            for (auto& c : search.cut_starts(base, budget)) starts.push_back(std::move(c));
    for (auto& c : bases) starts.push_back(std::move(c));
    // Descend first from the starts closest to the budget (those that fit,
    // cheapest first): a start far above it takes the longest to descend.
    {
        std::vector<std::pair<std::pair<long double, double>, std::size_t>> rank;
        for (std::size_t i = 0; i < starts.size(); ++i) {
            const auto e = search.evaluate(starts[i], budget);
            rank.push_back({{e.excess, e.cost}, i});
        }
        std::stable_sort(rank.begin(), rank.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        std::vector<remat_choice<Graph>> sorted;
        for (const auto& r : rank) sorted.push_back(std::move(starts[r.second]));
        starts = std::move(sorted);
    }
    // From each start: descend, allocate, and tighten the target by what
    // fragmentation added.
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
        improver.stop_when(stalled);
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
