// The baseline: keep every forward tensor until its last use, run every op
// once with its default variant. Its arena is what "no rematerialization"
// costs; budgets given as a percentage are percentages of it.
#pragma once

#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>

#include <chrono>
#include <string_view>

namespace memplan {

struct store_all : remat_planner<store_all> {
    static constexpr std::string_view name = "store_all";
    /// Of the time left, what the exact placement may take when the
    /// heuristic's arena misses the budget.
    static constexpr double exact_share = 0.5;

    using remat_planner<store_all>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        remat_result_of<Graph> out;
        out.planner = std::string(name);
        auto planned = tighten_within(ctx.graph(), ctx.store_all_placement(opt.alignment), opt.budget, opt.alignment,
                                      opt.time_limit.from_now().share(exact_share));
        const bool fits = has_solution(planned.status) && planned.plan.arena_bytes <= opt.budget;
        const auto arena = planned.plan.arena_bytes;
        detail::finish_remat_result(ctx, opt, std::move(planned), out); // kept for the figures even when over
        if (fits) {
            out.status = status::feasible;
        } else {
            detail::no_plan_within_budget(ctx, opt, out, name);
            out.message += "; keeping everything needs " + std::to_string(arena) + " bytes";
        }
        out.seconds = watch.seconds();
        return out;
    }
};

} // namespace memplan
