// The exact evaluation of a choice by the `joint` planner (remat/joint.hpp):
// its schedule with recomputation, its liveness, the bytes live at every step, the peak,
// the cost, and how far the profile is above a target. Every move the
// planner considers is judged by it.
#pragma once

#include <memplan/remat/recompute.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/liveness.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace memplan::detail {

template <class Graph>
struct joint_evaluation {
    using size_type = typename Graph::size_type;
    basic_schedule<typename Graph::id_type> schedule;
    basic_liveness<size_type, typename Graph::id_type> liveness; ///< of `schedule`
    std::vector<size_type> live; ///< bytes live per step
    size_type peak = 0;
    std::size_t peak_step = 0;
    double cost = 0;
    long double excess = 0; ///< bytes above the target, summed over steps
    size_type over = 0;     ///< bytes of the peak above the target
    /// What freeing `bytes` at the peak is worth: no more than the peak is
    /// over the target (a plan a few bytes over it needs the cheapest move
    /// that frees a few bytes, not the most bytes per cost).
    double worth(double bytes) const { return over > 0 ? std::min(bytes, double(over)) : bytes; }
};

/// Schedules `c` and measures it against `target`.
template <class Graph>
joint_evaluation<Graph> evaluate_choice(const remat_context<Graph>& ctx, const remat_choice<Graph>& c,
                                        typename Graph::size_type target) {
    const auto& g = ctx.graph();
    joint_evaluation<Graph> e;
    e.schedule = ctx.schedule_of(c);
    e.liveness = compute_liveness(g, e.schedule);
    e.live = live_bytes(e.liveness.buffers, e.liveness.alias_of, e.schedule.size());
    for (std::size_t i = 0; i < e.live.size(); ++i) {
        if (e.live[i] > e.peak) {
            e.peak = e.live[i];
            e.peak_step = i;
        }
        if (e.live[i] > target) e.excess += static_cast<long double>(e.live[i] - target);
    }
    e.over = e.peak > target ? e.peak - target : 0;
    e.cost = schedule_cost(g, e.schedule);
    return e;
}

} // namespace memplan::detail
