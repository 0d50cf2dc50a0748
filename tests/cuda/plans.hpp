// The plans the GPU tests run: store-all with every step on one variant (a
// network's convolutions on one algorithm throughout), and the plan that
// recomputes the most (the smallest budget the default planner reaches).
#pragma once

#include <memplan/remat/pareto.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstdint>

namespace memplan::test {

/// Every op once, in listed order, each on variant `v`, or on its last
/// variant when it has fewer (ops without variants keep none).
template <class Graph>
basic_schedule<typename Graph::id_type> on_variant(const Graph& g, std::uint32_t v) {
    auto s = default_schedule(g);
    for (auto& step : s) {
        const auto n = g.op(step.op).variants.size();
        if (n > 0) step.variant = static_cast<typename Graph::id_type>(std::min<std::size_t>(v, n - 1));
    }
    return s;
}

/// The default planner's plan at the smallest budget it reaches (a few
/// bisection steps of a second each): the plan that recomputes the most.
inline remat_result smallest_plan(const graph& g) {
    remat_options o;
    o.time_limit = 1;
    const auto top = plan_remat("store_all", g, o).arena();
    pareto_options po;
    po.tolerance = 0.05;
    po.max_bisection_steps = 4;
    return smallest_budget_plan(g, top, [&](std::uint64_t b) {
        o.budget = b;
        return plan_remat("auto", g, o);
    }, po);
}

} // namespace memplan::test
