// The contract of a rematerialization planner on a `remat_context`
// (RematPlannerLike, remat/remat.hpp): the `remat_planner` base gives it
// `plan(graph, options)` and checks what it returns; the result helpers fill
// the fields every planner reports the same way.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/context.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/schedule/schedule.hpp>

#include <string>
#include <string_view>
#include <utility>

namespace memplan {

namespace detail {

/// Runs `f(context, options)` on a context built for `g`, with the options'
/// time limit resolved first: the deadline and the seconds reported count
/// the context's construction.
template <class Graph, class F>
auto with_context(const Graph& g, const remat_options& opt, F&& f) {
    const stopwatch watch;
    const remat_options o = opt.until(opt.time_limit.from_now());
    const remat_context<Graph> ctx(g);
    auto r = f(ctx, o);
    r.seconds = watch.seconds();
    return r;
}

} // namespace detail

/// Base of the planners that work on a `remat_context`: gives each of them
/// `plan(graph, options)`, which resolves the options' time limit, builds the
/// context and runs the planner's own `plan(context, options)` (so the
/// deadline and the reported seconds count the context's construction), and
/// `checked(context, options)`, which runs it on a context the caller built
/// (a portfolio, or the command line planning store-all and then the chosen
/// planner, shares one). Both check what the planner returns.
///
/// It also gives every planner the same opening: `start_result(ctx)`, the
/// result it fills (its name set), and `exact_deadline(opt)`, the deadline
/// of an exact placement when a heuristic's arena misses the budget
/// (`exact_share` of the time left; a planner may declare its own share).
template <class Planner>
struct remat_planner {
    /// Of the time left, what the exact placement may take when the
    /// heuristic's arena misses the budget.
    static constexpr double exact_share = 0.5;

    template <class Graph>
    remat_result_of<Graph> plan(const Graph& g, const remat_options& opt) const {
        return detail::with_context(g, opt, [&](const remat_context<Graph>& ctx, const remat_options& o) {
            return checked(ctx, o);
        });
    }

    template <class Graph>
    remat_result_of<Graph> checked(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        const remat_options o = opt.until(opt.time_limit.from_now());
        auto r = static_cast<const Planner&>(*this).plan(ctx, o);
        if (r.bound == 0 && ctx.graph().num_ops() > 0) {
            const auto& need = ctx.min_memory();
            r.bound = need.first;
            r.bound_op = need.second;
        }
        // What the library returns is checked by the independent validator.
        if (has_solution(r.status)) {
            if (r.size > opt.budget) {
                r.status = status::error;
                r.message = "internal error (please report it): planner '" + r.planner + "' returned an arena of " +
                            std::to_string(r.size) + " bytes over the budget of " + std::to_string(opt.budget);
            } else {
                detail::reject_invalid_plan(ctx.graph(), r.plan, r.status, r.message);
            }
        }
        r.seconds = watch.seconds();
        return r;
    }

    /// The result a planner's `plan(context, options)` fills: its name set.
    template <class Graph>
    static remat_result_of<Graph> start_result(const remat_context<Graph>&) {
        remat_result_of<Graph> out;
        out.planner = std::string(Planner::name);
        return out;
    }

    /// The deadline of the exact placement: `exact_share` of the time left.
    static memplan::deadline exact_deadline(const remat_options& opt) {
        return opt.time_limit.from_now().share(Planner::exact_share);
    }
};

namespace detail {

/// Fills the common fields of a result from a placed plan.
template <class Graph>
void finish_remat_result(const remat_context<Graph>& ctx, const remat_options& opt, planned_of<Graph> planned,
                         remat_result_of<Graph>& out) {
    out.cost = schedule_cost(ctx.graph(), planned.plan.steps);
    out.base_cost = ctx.base_cost();
    out.fastest_cost = ctx.fastest_cost();
    out.budget = static_cast<typename Graph::size_type>(opt.budget);
    out.size = planned.plan.arena_bytes;
    out.schedule_bound = planned.bound;
    out.plan = std::move(planned.plan);
}

/// The outcome when no plan within the budget was found: infeasible with
/// the reason when the budget is below what any schedule needs.
template <class Graph>
void no_plan_within_budget(const remat_context<Graph>& ctx, const remat_options& opt, remat_result_of<Graph>& out,
                           std::string_view planner) {
    const auto [need, op] = ctx.min_memory();
    out.bound = need;
    out.bound_op = op;
    out.budget = static_cast<typename Graph::size_type>(opt.budget);
    if (opt.budget < need) {
        out.status = status::infeasible;
        out.message = "budget " + std::to_string(opt.budget) + " bytes is below " + std::to_string(need) +
                      " bytes, which op '" + op + "' needs in any schedule";
    } else {
        out.status = status::no_solution;
        out.message = std::string(planner) + " found no plan within " + std::to_string(opt.budget) +
                      " bytes (any schedule needs at least " + std::to_string(need) + " bytes, for op '" + op + "')";
    }
}

/// The outcome of a planner that places one schedule: feasible, with `note`
/// as its message, when `planned` fits the budget; else no plan within it,
/// the message saying how many bytes `what` needs. The plan's figures are
/// kept either way.
template <class Graph>
void settle_placement(const remat_context<Graph>& ctx, const remat_options& opt, planned_of<Graph> planned,
                      remat_result_of<Graph>& out, std::string note, std::string_view what) {
    const bool fits = has_solution(planned.status) && planned.plan.arena_bytes <= opt.budget;
    const auto arena = planned.plan.arena_bytes;
    finish_remat_result(ctx, opt, std::move(planned), out);
    if (fits) {
        out.status = status::feasible;
        out.message = std::move(note);
        return;
    }
    no_plan_within_budget(ctx, opt, out, out.planner);
    out.message += "; " + std::string(what) + " needs " + std::to_string(arena) + " bytes";
}

} // namespace detail

} // namespace memplan
