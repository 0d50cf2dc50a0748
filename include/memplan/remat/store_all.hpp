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

    using remat_planner<store_all>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        auto out = start_result(ctx);
        auto planned = tighten_within(ctx.graph(), ctx.store_all_placement(opt.alignment), opt.budget, opt.alignment,
                                      exact_deadline(opt));
        detail::settle_placement(ctx, opt, std::move(planned), out, "", "keeping everything");
        out.seconds = watch.seconds();
        return out;
    }
};

} // namespace memplan
