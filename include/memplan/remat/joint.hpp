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
    basic_remat_result<typename Graph::size_type, typename Graph::id_type>
    plan(const remat_context<Graph>& ctx, const remat_options& opt) const;
};

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
    // Before those, the practitioners' policies: placed as they are (the one
    // that fits cheapest is the plan to beat), then polished or descended
    // like any start.
    if (policy_start && has_blocks(g)) {
        std::vector<remat_choice<Graph>> policies;
        for (const auto& p : standard_recompute_policies()) {
            auto c = policy_choice(ctx, p);
            auto planned = place_within(g, ctx.schedule_of(c), opt.budget, opt.alignment, memplan::deadline::passed());
            if (consider(planned)) best_choice = c;
            policies.push_back(std::move(c));
        }
        starts.insert(starts.begin(), policies.begin(), policies.end());
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
