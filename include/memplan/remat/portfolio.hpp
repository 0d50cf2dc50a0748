// `auto`: an anytime portfolio. Each member answers the same question on the
// same context; the cheapest plan that fits the budget wins. The fast members
// (store_all, Chen's two, the chain program) run first and take well under a
// second on the zoo; `joint` then gets the time left, shared with an
// optional MILP member (`checkmate`, when a solver is given and the graph is
// small enough for it), so that on small graphs `auto` is never worse than
// the exact model. On a graph without a backward part the order is free:
// `joint` shares its time with store_all and `joint` again on the ops
// relisted in greedy_order's memory-aware order, so that ordering and
// recomputation meet a budget together (the order alone may meet it: then
// the plan recomputes nothing).
#pragma once

#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/chen.hpp>
#include <memplan/remat/detail/relist.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/schedule/order/greedy_order.hpp>

#include <chrono>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <vector>

namespace memplan {

/// The portfolio; `Extra` is an optional further member with
/// `plan(context, options)` (the Checkmate MILP with a solver, see
/// select.hpp), tried on graphs of at most `extra_max_ops` ops.
template <class Extra = std::nullptr_t>
struct basic_auto_remat : remat_planner<basic_auto_remat<Extra>> {
    static constexpr std::string_view name = "auto";
    Extra extra{};
    std::size_t extra_max_ops = 200;

    /// Each member's share of the time left when it starts; the last takes
    /// all that is left.
    static constexpr double store_all_share = 0.1;
    static constexpr double chain_share = 0.3;
    static constexpr double chen_greedy_share = 0.2;
    static constexpr double sqrt_n_share = 0.1;
    static constexpr double joint_share_with_extra = 0.5; ///< when the MILP member runs after it
    static constexpr double order_share = 0.1;  ///< without a backward part: greedy_order
    static constexpr double listed_share = 0.5; ///< then joint on the listed order; the relisted members the rest

    using remat_planner<basic_auto_remat<Extra>>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        using result_type = remat_result_of<Graph>;
        result_type best;
        bool found = false;
        std::string tried;
        auto offer = [&](result_type r) {
            tried += (tried.empty() ? "" : ", ") + r.planner + " " + std::string(to_string(r.status));
            if (!has_solution(r.status) || r.arena() > opt.budget) {
                if (!found && r.status == status::infeasible) best = std::move(r); // keeps the proof
                return;
            }
            if (!found || r.cost < best.cost) {
                best = std::move(r);
                found = true;
                if (opt.on_progress) {
                    remat_progress p;
                    p.planner = best.planner;
                    p.best_arena = best.arena();
                    p.best_overhead = best.overhead();
                    p.elapsed_seconds = watch.seconds();
                    opt.on_progress(p);
                }
            }
        };
        // Below what any schedule needs, no member can help.
        if (const auto need = ctx.min_memory(); opt.budget < need.first) {
            detail::no_plan_within_budget(ctx, opt, best, name);
            best.planner = std::string(name);
            best.seconds = watch.seconds();
            return best;
        }
        const memplan::deadline until = opt.time_limit.from_now();
        auto sub = [&](double share) {
            remat_options o = opt.until(until.share(share));
            o.on_progress = nullptr;
            return o;
        };
        // A plan as cheap as store-all with the fastest variants ends the
        // search: no member can beat it.
        auto optimal = [&] { return found && best.cost <= ctx.fastest_cost() * (1 + 1e-12); };
        offer(store_all{}.plan(ctx, sub(store_all_share)));
        if (!optimal()) offer(chain_dp{}.plan(ctx, sub(chain_share)));
        if (!optimal()) offer(chen_greedy{}.plan(ctx, sub(chen_greedy_share)));
        if (!optimal()) offer(sqrt_n{}.plan(ctx, sub(sqrt_n_share)));
        std::vector<typename Graph::id_type> order; // empty: the listed order only
        if (ctx.general()) {
            greedy_order go;
            go.deadline = until.share(order_share);
            for (const auto& st : go.order(ctx.graph()).schedule) order.push_back(st.op);
            if (order == ctx.base_order()) order.clear();
        }
        auto joint_members = [&](double share) {
            if (order.empty()) {
                offer(joint{}.plan(ctx, sub(share)));
                return;
            }
            offer(joint{}.plan(ctx, sub(share * listed_share)));
            const Graph h = detail::relisted(ctx.graph(), order);
            const remat_context<Graph> hc(h);
            auto back = [&](result_type r) {
                detail::relist_back(r.plan.steps, order);
                r.planner += " on greedy_order";
                return r;
            };
            offer(back(store_all{}.plan(hc, sub(store_all_share))));
            offer(back(joint{}.plan(hc, sub(share))));
        };
        if constexpr (std::is_same_v<Extra, std::nullptr_t>) {
            if (!optimal()) joint_members(1.0);
        } else if (!optimal()) {
            const bool small = ctx.graph().num_ops() <= extra_max_ops;
            joint_members(small ? joint_share_with_extra : 1.0);
            if (small && !optimal()) offer(extra.plan(ctx, sub(1.0)));
        }
        if (!found) {
            if (best.status != status::infeasible) {
                best = result_type{};
                detail::no_plan_within_budget(ctx, opt, best, name);
                best.message += " (tried: " + tried + ")";
            }
            best.planner = std::string(name);
        }
        best.seconds = watch.seconds();
        return best;
    }
};

using auto_remat = basic_auto_remat<>;

} // namespace memplan
