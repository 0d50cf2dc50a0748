// Checkmate (Jain et al., MLSys 2020) as a memplan planner: which forward
// tensors each backward stage keeps (S) and which forward ops it recomputes
// (R), by the MILP of remat/detail/checkmate_model.hpp, through any
// `SolverLike` backend. Small models are solved exactly; large ones (the
// zoo: O(stages x ops) binaries) by Checkmate's LP relaxation at 0.9 x the
// budget, with S rounded at a few thresholds and then randomly (S kept with
// probability S*), and R derived from S. The relaxation's size is set by
// merging backward groups into fewer stages (`lp_max_columns`); GLPK's
// simplex needs 8-80 s for 7k-16k columns of these LPs, its interior point
// 0.6-6 s, so the interior point is the default (`lp_method`). Every
// schedule is placed (`place_within`) and the budget is met by the ARENA;
// when fragmentation pushes it over, the MILP budget shrinks by the excess.
// Default variants only (the `joint` planner chooses variants). On a graph
// without a backward part the stages are Checkmate's own, one per op.
#pragma once

#include <memplan/remat/detail/checkmate_model.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

template <SolverLike S>
struct checkmate : remat_planner<checkmate<S>> {
    static constexpr std::string_view name = "checkmate";

    S solver{};
    /// Models with at most this many binaries are solved as MILPs; larger
    /// ones by the LP relaxation and rounding.
    std::size_t exact_max_binaries = 3000;
    /// The LP relaxation is built with at most about this many columns (by
    /// `checkmate_model_size`'s estimate, about 1.7x the real count):
    /// backward groups are merged into fewer stages until it fits. 20000
    /// gives 20-27 stages on the zoo CNNs and 2-6 s per interior-point LP.
    std::size_t lp_max_columns = 20000;
    /// How the relaxation is solved (backends without an interior point use simplex).
    lp_algorithm lp_method = lp_algorithm::interior;
    /// Checkmate's deterministic rounding: S is rounded at each of these thresholds.
    std::vector<double> thresholds{0.5, 0.3, 0.7, 0.2, 0.8, 0.1, 0.9, 0.4, 0.6, 0.05};
    /// Fractions of the budget the LP is solved at, in order, until a plan fits.
    std::vector<double> lp_budget_factors{0.9, 1.0, 0.8, 0.7, 0.6, 0.5};
    /// Checkmate's randomized rounding after the thresholds: S[t,x] kept
    /// with probability S*[t,x], this many draws per LP (fixed seed).
    std::size_t random_roundings = 24;

    /// How the time is split (shares of what is left when each step starts).
    /// The first MILP leaves time for the relaxation when it does not finish;
    /// re-solves after a placement missed the budget may take more.
    static constexpr double first_milp_share = 0.4;
    static constexpr double milp_resolve_share = 0.7;
    static constexpr double lp_share = 0.8;               ///< one LP relaxation
    static constexpr double random_rounding_share = 0.8;  ///< randomized rounding leaves the rest to later LPs
    /// The exact placement of one plan: this share of the time left, at most so many seconds.
    static constexpr double store_all_exact_share = 0.05;
    static constexpr double store_all_exact_seconds = 2.0;
    static constexpr double milp_exact_share = 0.1;
    static constexpr double milp_exact_seconds = 2.0;
    static constexpr double rounding_exact_share = 0.05;
    static constexpr double rounding_exact_seconds = 1.0;

    /// Plans `g` within `opt.budget` bytes of arena; see the file comment.
    using remat_planner<checkmate<S>>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        using result_type = remat_result_of<Graph>;
        using planned_type = planned_of<Graph>;
        const Graph& g = ctx.graph();
        result_type out = this->start_result(ctx);
        const memplan::deadline until = opt.time_limit.from_now();

        // Keeping everything costs nothing extra: when it fits, it is optimal.
        {
            auto planned = tighten_within(g, ctx.store_all_placement(opt.alignment), opt.budget, opt.alignment,
                                          until.share(store_all_exact_share).within(store_all_exact_seconds));
            if (has_solution(planned.status) && planned.plan.arena_bytes <= opt.budget) {
                detail::finish_remat_result(ctx, opt, std::move(planned), out);
                out.status = status::optimal;
                out.message = "keeping every tensor fits";
                out.seconds = watch.seconds();
                return out;
            }
        }
        if (opt.budget < ctx.min_memory().first) {
            detail::no_plan_within_budget(ctx, opt, out, name);
            out.seconds = watch.seconds();
            return out;
        }

        bool have = false;
        std::string notes;
        auto offer = [&](planned_type planned) {
            if (!has_solution(planned.status) || planned.plan.arena_bytes > opt.budget) return false;
            const double cost = schedule_cost(g, planned.plan.steps);
            if (have && cost >= out.cost) return false;
            detail::finish_remat_result(ctx, opt, std::move(planned), out);
            have = true;
            if (opt.on_progress)
                opt.on_progress({name, out.arena(), out.overhead(), watch.seconds()});
            return true;
        };

        auto layout = detail::make_checkmate_layout(g, ctx.index(), ctx.base_order(), ctx.boundary(), 0);
        auto size = detail::checkmate_model_size(g, layout);
        bool proven = false;
        if (size.first <= exact_max_binaries * 3) {
            proven = solve_exact(ctx, layout, opt, until, offer, notes);
        }
        if (!have && !until.expired()) {
            // Merge backward groups until the relaxation is small enough.
            std::size_t stages = layout.stages();
            while (size.first > lp_max_columns && stages > 3) {
                stages = std::max<std::size_t>(3, stages * 3 / 4);
                layout = detail::make_checkmate_layout(g, ctx.index(), ctx.base_order(), ctx.boundary(), stages);
                size = detail::checkmate_model_size(g, layout);
            }
            if (size.first > lp_max_columns) {
                notes += (notes.empty() ? "" : "; ") + std::string("LP relaxation too large (about ") +
                         std::to_string(size.first) + " columns with " + std::to_string(layout.stages()) + " stages)";
            } else {
                solve_relaxation(ctx, layout, opt, until, offer, notes);
            }
        }

        if (have) {
            out.status = proven ? status::optimal : status::feasible;
            out.message = notes;
        } else {
            detail::no_plan_within_budget(ctx, opt, out, name);
            if (!notes.empty()) out.message += " (" + notes + ")";
        }
        out.seconds = watch.seconds();
        return out;
    }

private:
    template <class Graph>
    static std::vector<std::vector<char>> keep_of(const Graph& g, const detail::checkmate_layout<Graph>& L,
                                                  const detail::checkmate_milp& cm, const std::vector<double>& x,
                                                  double threshold) {
        std::vector<std::vector<char>> keep(L.stages() + 1, std::vector<char>(g.num_tensors(), 0));
        for (std::size_t t = 0; t < cm.s_col.size() && t < keep.size(); ++t)
            for (std::size_t v = 0; v < g.num_tensors(); ++v)
                if (cm.s_col[t][v] != detail::cm_none) keep[t][v] = x[cm.s_col[t][v]] >= threshold;
        return keep;
    }

    /// The MILP, re-solved with a smaller budget while fragmentation keeps
    /// the arena above the budget. True when the plan it gave is optimal.
    template <class Graph, class Offer>
    bool solve_exact(const remat_context<Graph>& ctx, const detail::checkmate_layout<Graph>& L,
                     const remat_options& opt, memplan::deadline until, Offer& offer,
                     std::string& notes) const {
        const Graph& g = ctx.graph();
        std::uint64_t milp_budget = opt.budget;
        for (int round = 0; round < 6; ++round) {
            if (until.expired()) break;
            const auto cm = detail::build_checkmate_milp(g, L, milp_budget, true);
            solve_options so;
            // Leave the relaxation time when the MILP does not finish.
            so.time_limit = until.share(round == 0 ? first_milp_share : milp_resolve_share);
            const auto r = solver.solve(cm.model, so);
            notes = "MILP: " + std::to_string(cm.binaries) + " binaries, " + std::to_string(cm.model.columns.size()) +
                    " columns, " + std::to_string(cm.model.rows.size()) + " rows, " + std::string(to_string(r.status)) +
                    " in " + std::to_string(r.seconds) + " s";
            if (!r.message.empty() && !has_solution(r.status)) notes += " (" + r.message + ")";
            if (!has_solution(r.status)) return false;
            const auto s = detail::checkmate_schedule(g, L, keep_of(g, L, cm, r.values, 0.5));
            auto planned = place_within(g, s, opt.budget, opt.alignment,
                                        until.share(milp_exact_share).within(milp_exact_seconds));
            if (!has_solution(planned.status)) return false;
            const auto arena = planned.plan.arena_bytes;
            if (arena <= opt.budget) {
                offer(std::move(planned));
                return r.status == status::optimal && milp_budget == opt.budget;
            }
            // Ask for less by what the placement lost.
            // Doubling each round: the model's slack (see checkmate_model.hpp)
            // may need more than the first excess to close.
            const std::uint64_t excess = (arena - opt.budget + opt.alignment) << round;
            if (excess >= milp_budget) break;
            milp_budget -= excess;
            notes += "; arena " + std::to_string(arena) + " over budget, MILP budget lowered to " +
                     std::to_string(milp_budget);
        }
        return false;
    }

    /// Checkmate's LP relaxation and deterministic rounding.
    template <class Graph, class Offer>
    void solve_relaxation(const remat_context<Graph>& ctx, const detail::checkmate_layout<Graph>& L,
                          const remat_options& opt, memplan::deadline until, Offer& offer,
                          std::string& notes) const {
        const Graph& g = ctx.graph();
        std::set<std::vector<std::pair<typename Graph::id_type, typename Graph::id_type>>> tried;
        bool found = false;
        std::string log;
        for (std::size_t f = 0; f < lp_budget_factors.size(); ++f) {
            const double factor = lp_budget_factors[f];
            if (found && factor < 1.0) break; // a lower budget only costs more
            if (until.remaining() <= 0.5) break;
            const auto lp_budget = static_cast<std::uint64_t>(static_cast<double>(opt.budget) * factor);
            const auto cm = detail::build_checkmate_milp(g, L, lp_budget, false);
            solve_options so;
            so.time_limit = until.share(lp_share);
            so.lp_method = lp_method;
            const auto r = solver.solve(cm.model, so);
            log += (log.empty() ? "" : "; ") + std::string("LP at ") + std::to_string(factor) + " x budget: " +
                   std::to_string(cm.model.columns.size()) + " columns, " + std::to_string(cm.model.rows.size()) +
                   " rows, " + std::to_string(L.stages()) + " stages, " + std::string(to_string(r.status)) + " in " +
                   std::to_string(r.seconds) + " s";
            if (!has_solution(r.status) && !r.message.empty()) log += " (" + r.message + ")";
            if (!has_solution(r.status)) {
                if (r.status == status::no_solution) break; // out of time
                continue;
            }
            std::size_t fits = 0;
            std::mt19937_64 rng(f + 1);
            std::uniform_real_distribution<double> coin(0.0, 1.0);
            const memplan::deadline random_by = until.share(random_rounding_share);
            for (std::size_t round = 0; round < thresholds.size() + random_roundings; ++round) {
                if (until.expired()) break;
                std::vector<std::vector<char>> keep;
                if (round < thresholds.size()) {
                    keep = keep_of(g, L, cm, r.values, thresholds[round]);
                } else {
                    // Randomized rounding leaves time for later LPs.
                    if (random_by.expired()) break;
                    std::vector<double> drawn(r.values.size());
                    for (auto& d : drawn) d = coin(rng);
                    for (std::size_t j = 0; j < drawn.size(); ++j) drawn[j] = drawn[j] < r.values[j] ? 1.0 : 0.0;
                    keep = keep_of(g, L, cm, drawn, 0.5);
                }
                const auto s = detail::checkmate_schedule(g, L, keep);
                std::vector<std::pair<typename Graph::id_type, typename Graph::id_type>> key;
                for (const auto& st : s) key.push_back({st.op, st.variant});
                if (!tried.insert(key).second) continue;
                if (schedule_lower_bound(g, s) > opt.budget) continue;
                auto planned =
                    place_within(g, s, opt.budget, opt.alignment,
                                 until.share(rounding_exact_share).within(rounding_exact_seconds));
                if (has_solution(planned.status) && planned.plan.arena_bytes <= opt.budget) ++fits;
                if (offer(std::move(planned))) found = true;
            }
            log += ", " + std::to_string(fits) + " rounded plans fit";
        }
        notes += (notes.empty() ? "" : "; ") + log;
    }
};

} // namespace memplan
