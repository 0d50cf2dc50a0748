// `auto`: an anytime portfolio. Each member answers the same question on the
// same context; the cheapest plan that fits the budget wins. The fast members
// (store_all, Chen's two, the chain program) run first and take well under a
// second on the zoo; `joint` then gets the time left, shared with an
// optional MILP member (`checkmate`, when a solver is given and the graph is
// small enough for it), so that on small graphs `auto` is never worse than
// the exact model.
#pragma once

#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/chen.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>

#include <chrono>
#include <cstddef>
#include <type_traits>
#include <string_view>

namespace memplan {

/// The portfolio; `Extra` is an optional further member with
/// `plan(context, options, t0)` (the Checkmate MILP with a solver, see
/// select.hpp), tried on graphs of at most `extra_max_ops` ops.
template <class Extra = std::nullptr_t>
struct basic_auto_remat : remat_planner<basic_auto_remat<Extra>> {
    static constexpr std::string_view name = "auto";
    Extra extra{};
    std::size_t extra_max_ops = 200;

    using remat_planner<basic_auto_remat<Extra>>::plan; ///< plan(graph, options)

    template <class Graph>
    basic_remat_result<typename Graph::size_type, typename Graph::id_type>
    plan(const remat_context<Graph>& ctx, const remat_options& opt,
         std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now()) const {
        using result_type = basic_remat_result<typename Graph::size_type, typename Graph::id_type>;
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
                    p.elapsed_seconds = detail::seconds_since(t0);
                    opt.on_progress(p);
                }
            }
        };
        // Below what any schedule needs, no member can help.
        if (const auto need = ctx.min_memory(); opt.budget < need.first) {
            detail::no_plan_within_budget(ctx, opt, best, name);
            best.planner = std::string(name);
            best.seconds = detail::seconds_since(t0);
            return best;
        }
        auto sub = [&](double share) {
            remat_options o = opt;
            o.on_progress = nullptr;
            o.time_limit_seconds = std::max(0.0, (opt.time_limit_seconds - detail::seconds_since(t0)) * share);
            return o;
        };
        offer(store_all{}.plan(ctx, sub(0.1)));
        offer(chain_dp{}.plan(ctx, sub(0.3)));
        offer(chen_greedy{}.plan(ctx, sub(0.2)));
        offer(sqrt_n{}.plan(ctx, sub(0.1)));
        if constexpr (std::is_same_v<Extra, std::nullptr_t>) {
            offer(joint{}.plan(ctx, sub(1.0)));
        } else {
            const bool small = ctx.graph().num_ops() <= extra_max_ops;
            offer(joint{}.plan(ctx, sub(small ? 0.5 : 1.0)));
            if (small) {
                const auto o = sub(1.0);
                offer(extra.plan(ctx, o, std::chrono::steady_clock::now()));
            }
        }
        if (!found) {
            if (best.status != status::infeasible) {
                best = result_type{};
                detail::no_plan_within_budget(ctx, opt, best, name);
                best.message += " (tried: " + tried + ")";
            }
            best.planner = std::string(name);
        }
        best.seconds = detail::seconds_since(t0);
        return best;
    }
};

using auto_remat = basic_auto_remat<>;

} // namespace memplan
