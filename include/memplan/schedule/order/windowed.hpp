// Ordering improvement for graphs too large for one MILP: slide a window of
// W consecutive steps over the greedy order, and re-solve the order of the
// ops inside each window with the MILP of detail/order_model.hpp while every
// other op keeps its step. Reordering inside a window changes only the bytes
// live on the window's steps, so only windows holding a step at the current
// peak are solved; a new order is kept when it lowers (peak, number of steps
// at the peak). Passes repeat until one improves nothing or time runs out.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/schedule/order/detail/order_model.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/schedule/order/order.hpp>
#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

/// Windowed MILP improvement of the greedy order (see the file comment).
template <SolverLike S>
struct windowed {
    static constexpr std::string_view name = "windowed";

    S solver{};
    std::size_t window = 24;                ///< steps per window (>= 2)
    std::size_t stride = 0;                 ///< steps between window starts; 0: window / 2
    memplan::time_limit time_limit = 10.0;  ///< the whole call: seconds from its start, or a deadline
    double window_seconds = 2;              ///< seconds for one window's solve (within time_limit)
    double gap = 1e-4;                      ///< stop once the peak is within this fraction of the bound
    std::size_t max_passes = 8;
    greedy_order start{};

    /// The improved order with the order-independent bound; status optimal
    /// only when the peak meets that bound. Throws `memplan::error` on a
    /// malformed graph.
    template <class Graph>
    order_result<Graph> order(const Graph& g) const {
        using id_type = typename Graph::id_type;
        using size_type = typename Graph::size_type;
        const auto t0 = std::chrono::steady_clock::now();
        auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        const memplan::deadline until = time_limit.from_now();

        greedy_order start_order = start;
        start_order.deadline = earliest(start_order.deadline, until);
        order_result<Graph> r = start_order.order(g);
        if (r.status == status::optimal) {
            r.message = "greedy order meets the lower bound (" + r.message + ")";
            r.seconds = elapsed();
            return r;
        }
        const graph_index<Graph> index(g);
        const std::size_t n = g.num_ops();
        const std::size_t W = std::clamp<std::size_t>(window, 2, n);
        const std::size_t step = stride == 0 ? std::max<std::size_t>(1, W / 2) : stride;

        std::vector<id_type> order = order_of(r.schedule);
        auto profile = [&](const std::vector<id_type>& ord) {
            const auto live = compute_liveness(g, schedule_from_order(g, ord));
            return live_bytes(live.buffers, live.alias_of, live.num_steps);
        };
        auto score = [](const std::vector<size_type>& live) {
            const size_type p = *std::max_element(live.begin(), live.end());
            return std::pair(p, static_cast<std::size_t>(std::count(live.begin(), live.end(), p)));
        };
        std::vector<size_type> live = profile(order);
        auto best = score(live);
        std::size_t solved = 0, improved = 0, errors = 0;
        std::string last_error;
        bool out_of_time = false, close_enough = false;
        const size_type bound = r.bound;
        for (std::size_t pass = 0; pass < max_passes && !out_of_time && !close_enough; ++pass) {
            bool any = false;
            for (std::size_t lo = 0; lo + 1 < n; lo += step) {
                const std::size_t hi = std::min(n, lo + W);
                if (static_cast<double>(best.first - std::min(best.first, bound)) <=
                    gap * static_cast<double>(best.first)) {
                    close_enough = true;
                    break;
                }
                const double left = until.remaining();
                if (left <= 0.01) {
                    out_of_time = true;
                    break;
                }
                if (*std::max_element(live.begin() + static_cast<std::ptrdiff_t>(lo),
                                      live.begin() + static_cast<std::ptrdiff_t>(hi)) >= best.first) {
                    std::string why;
                    auto om = detail::make_order_model(g, index, order, lo, hi, size_type{0},
                                                       static_cast<std::size_t>(-1), why);
                    if (om) {
                        solve_options o;
                        o.time_limit = {until, window_seconds};
                        const milp_result mr = solver.solve(om->model, o);
                        ++solved;
                        if (has_solution(mr.status)) {
                            auto cand = detail::order_from_solution(g, index, order, *om, mr.values);
                            auto cand_live = profile(cand);
                            if (auto sc = score(cand_live); sc < best) {
                                best = sc;
                                order = std::move(cand);
                                live = std::move(cand_live);
                                ++improved;
                                any = true;
                            }
                        } else if (mr.status != status::no_solution) {
                            ++errors;
                            last_error = mr.message;
                        }
                    }
                }
                if (hi == n) break;
            }
            if (!any) break;
        }
        const std::string greedy_note = r.message;
        detail::finish_order_result(g, order, bound, r);
        r.message = "windows of " + std::to_string(W) + " steps: " + std::to_string(solved) + " solved, " +
                    std::to_string(improved) + " improved" + (out_of_time ? ", time limit reached" : "") +
                    (close_enough ? ", within the relative gap of the bound" : "") +
                    "; start: " + greedy_note;
        if (errors > 0) r.message += "; " + std::to_string(errors) + " solver errors, last: " + last_error;
        r.seconds = elapsed();
        return r;
    }};

} // namespace memplan
