// Exact operator ordering by MILP (MODeL / OLLA, Steiner et al., ICML 2023):
// the model of detail/order_model.hpp over the whole order, warm-started from
// greedy_order, solved by any `SolverLike` backend under a time limit.
//
// The solver's order is read back from its C columns and re-evaluated with
// schedule_lower_bound, so the reported peak is always the real liveness
// peak; the better of it and the greedy order is returned. The solver's dual
// bound is a true lower bound because the model counts bytes exactly as
// liveness.hpp does (in-place sharing included).
#pragma once

#include <memplan/schedule/order/detail/order_model.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/schedule/order/order.hpp>
#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace memplan {

namespace detail {

inline std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s);
    return buf;
}

template <class Graph>
std::string model_size_text(const order_model<Graph>& om) {
    return std::to_string(om.model.columns.size()) + " columns (" + std::to_string(om.binaries) + " binary), " +
           std::to_string(om.model.rows.size()) + " rows";
}

} // namespace detail

/// Ordering by MILP (see the file comment). `options.time_limit.from_now()` (its deadline,
/// or its time limit from the call) bounds the whole call, the greedy warm
/// start included.
template <SolverLike S>
struct ilp_order {
    static constexpr std::string_view name = "ilp";

    S solver{};
    solve_options options{};
    greedy_order warm{};               ///< the incumbent handed to the solver
    std::size_t max_columns = 400000;  ///< above this, keep the greedy order (use `windowed`)
    /// Stop once the peak is within this fraction of the order-free bound
    /// (cut_bound.hpp) or of the solver's bound, which is never below it.
    double gap = 1e-4;

    /// Status optimal when the peak is proven minimal (MILP optimal, or the
    /// greedy order meets a bound); feasible when the time limit or the model
    /// size stopped the search; error (with the greedy order still filled in)
    /// when the backend failed. Throws `memplan::error` on a malformed graph.
    template <class Graph>
    order_result<Graph> order(const Graph& g) const {
        using size_type = typename Graph::size_type;
        const auto start = std::chrono::steady_clock::now();
        auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
        const memplan::deadline until = options.time_limit.from_now();

        greedy_order start_order = warm;
        start_order.deadline = earliest(start_order.deadline, until);
        order_result<Graph> r = start_order.order(g);
        if (r.status == status::optimal) {
            r.message = "greedy order meets the lower bound (" + r.message + "); no MILP needed";
            r.seconds = elapsed();
            return r;
        }
        if (static_cast<double>(r.size - std::min(r.size, r.bound)) <= gap * static_cast<double>(r.size)) {
            r.message = "greedy order within the relative gap of the lower bound (" + r.message + "); no MILP needed";
            r.seconds = elapsed();
            return r;
        }
        const auto greedy_order_ids = order_of(r.schedule);
        const graph_index<Graph> index(g);
        std::string why;
        auto om = detail::make_order_model(g, index, greedy_order_ids, 0, g.num_ops(), r.bound, max_columns, why);
        if (!om) {
            r.message = "kept the greedy order: " + why;
            r.seconds = elapsed();
            return r;
        }
        solve_options o = options;
        o.time_limit = until;
        o.relative_gap = std::max(o.relative_gap, gap); // the model's bound is >= the cut bound
        const milp_result mr = solver.solve(om->model, o);

        std::string note = "MILP " + detail::model_size_text(*om) + "; " + std::string(S::name) + " " +
                           std::string(to_string(mr.status)) + " in " + detail::seconds_text(mr.seconds) + " s, " +
                           std::to_string(mr.nodes) + " nodes";
        if (mr.status == status::error || mr.status == status::infeasible || mr.status == status::unbounded) {
            r.status = status::error;
            r.message = note + ": " + mr.message + "; the schedule is the greedy order";
            r.seconds = elapsed();
            return r;
        }
        size_type bound = r.bound;
        if (!std::isnan(mr.bound) && mr.bound > 0) {
            const double units = std::ceil(mr.bound - 1e-6);
            bound = std::max(bound, static_cast<size_type>(static_cast<size_type>(units) *
                                                           static_cast<size_type>(om->unit)));
        }
        auto best = greedy_order_ids;
        size_type best_peak = r.size;
        std::string kept = "kept the greedy order";
        if (has_solution(mr.status)) {
            auto mine = detail::order_from_solution(g, index, greedy_order_ids, *om, mr.values);
            if (!check_topological_order(g, mine)) {
                const size_type p = schedule_lower_bound(g, schedule_from_order(g, mine));
                if (p <= best_peak) {
                    best_peak = p;
                    best = std::move(mine);
                    kept = "kept the MILP order";
                }
            }
        }
        detail::finish_order_result(g, best, bound, r);
        r.message = note + "; " + kept;
        r.seconds = elapsed();
        return r;
    }
};

} // namespace memplan
