// From a schedule with recomputation to a placed plan under a budget: the
// optimizer updates moved after the last reads of what they overwrite, then
// an allocator, and the exact search in decision mode when the allocator
// misses a budget that the schedule's bound says is within reach.
#pragma once

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/exact.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/deadline.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memplan {

/// `s` with every in-place optimizer update (an update-phase op without
/// outputs, formats.md) moved, when needed, to right after the last later
/// step that reads one of its persistent inputs. Such an update overwrites
/// the parameter (and its optimizer state) where it is, so a
/// forward op recomputed after it — for a backward reader that comes later,
/// as with a tied embedding whose gradient completes early — would read the
/// new value (the executor refuses such a plan). These updates write
/// nothing another op reads, so moving one later changes no other step; its
/// gradient lives longer. Steps that need no move keep their order.
template <class Graph>
basic_schedule<typename Graph::id_type> updates_after_their_readers(const Graph& g,
                                                                    const basic_schedule<typename Graph::id_type>& s) {
    using id_type = typename Graph::id_type;
    // Per persistent tensor: the last step that reads it, updates aside.
    std::vector<std::size_t> last_read(g.num_tensors(), 0);
    std::vector<char> read(g.num_tensors(), 0);
    for (std::size_t k = 0; k < s.size(); ++k) {
        const auto& op = g.op(s[k].op);
        if (op.phase == phase::update && op.outputs.empty()) continue;
        for (id_type t : g.reads_of(s[k].op, s[k].variant))
            if (g.tensor(t).persistent) {
                last_read[t] = k;
                read[t] = 1;
            }
    }
    std::vector<std::vector<std::size_t>> after(s.size());
    std::vector<char> moved(s.size(), 0);
    bool any = false;
    for (std::size_t k = 0; k < s.size(); ++k) {
        const auto& op = g.op(s[k].op);
        if (op.phase != phase::update || !op.outputs.empty()) continue;
        std::size_t need = k;
        for (id_type t : op.inputs)
            if (g.tensor(t).persistent && read[t]) need = std::max(need, last_read[t]);
        if (need > k) {
            after[need].push_back(k);
            moved[k] = 1;
            any = true;
        }
    }
    if (!any) return s;
    basic_schedule<id_type> out;
    out.reserve(s.size());
    for (std::size_t k = 0; k < s.size(); ++k) {
        if (!moved[k]) out.push_back(s[k]);
        for (auto u : after[k]) out.push_back(s[u]);
    }
    return out;
}

/// `planned` (a placement of its own steps), or, when it misses `budget`
/// although its per-schedule bound fits, the exact search's placement of the
/// same steps in decision mode until `exact_until` (`deadline::passed()`: no
/// search), when that one fits.
template <class Graph>
planned_of<Graph> tighten_within(const Graph& g, planned_of<Graph> planned, std::uint64_t budget, std::uint64_t alignment,
                                 memplan::deadline exact_until) {
    if (!has_solution(planned.status) || planned.plan.arena_bytes <= budget || planned.bound > budget ||
        exact_until.expired())
        return planned;
    plan_options po;
    po.alignment = alignment;
    po.validate = false;
    exact e;
    e.time_limit = exact_until;
    e.capacity = budget;
    auto tight = make_plan(g, planned.plan.steps, e, po);
    if (!has_solution(tight.status) || tight.plan.arena_bytes > budget) return planned;
    tight.seconds += planned.seconds;
    return tight;
}

/// Places the buffers of schedule `s` with `allocator` (the best of the
/// heuristics by default), then, when that misses `budget` although the
/// per-schedule bound fits, with the exact search in decision mode until
/// `exact_until` (`deadline::passed()`: no search). The plan is not
/// validated here: it is one of a planner's many candidates, and the
/// planner's entry (remat/planner.hpp) checks the plan it returns.
template <class Graph, AllocatorLike<typename Graph::size_type> Allocator = best_heuristic>
planned_of<Graph>
place_within(const Graph& g, const basic_schedule<typename Graph::id_type>& s, std::uint64_t budget,
             std::uint64_t alignment, memplan::deadline exact_until, const Allocator& allocator = {}) {
    plan_options po;
    po.alignment = alignment;
    po.validate = false;
    return tighten_within(g, make_plan(g, updates_after_their_readers(g, s), allocator, po), budget, alignment,
                          exact_until);
}

} // namespace memplan
