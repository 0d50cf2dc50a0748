// Rematerialization: fit a training step into a memory budget by keeping
// fewer forward tensors and recomputing them in the backward pass, and by
// choosing, per executed step, the implementation variant (convolution
// algorithm, batch-norm/ReLU backward that keeps less) — Checkmate (Jain et
// al., MLSys 2020) and MONeT (Shah et al., ICLR 2021).
//
// Every planner here answers the same question: given a graph, a budget in
// bytes for the final arena (after ordering and allocation, not only the
// live-bytes bound) and a time limit, return the cheapest valid plan it finds
// that fits, as a value: `optimal` when proven cheapest, `feasible`,
// `infeasible` with the smallest memory any schedule needs and the op that
// needs it, or `no_solution` when the limit came first.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/core/status.hpp>
#include <memplan/plan/make_plan.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

namespace memplan {

/// What a rematerialization planner reports while it runs (at most about
/// once a second; on the caller's thread).
struct remat_progress {
    std::string_view planner;      ///< which planner (in a portfolio: the one running)
    std::uint64_t best_arena = 0;  ///< arena of the cheapest fitting plan so far; 0 while none
    double best_overhead = 0;      ///< its compute overhead
    double elapsed_seconds = 0;
};

struct remat_options {
    /// The arena must not exceed this many bytes; max() means no limit.
    std::uint64_t budget = std::numeric_limits<std::uint64_t>::max();
    /// Seconds from the planner's start, or a deadline (a command hands one
    /// through all its steps), or both; resolved once, at the planner's entry.
    memplan::time_limit time_limit = 10.0;
    std::uint64_t alignment = 256; ///< every offset a multiple of it
    std::function<void(const remat_progress&)> on_progress; ///< optional

    /// These options for a step that starts now and must stop by `d` (and
    /// by `time_limit`).
    remat_options until(memplan::deadline d) const {
        remat_options o = *this;
        o.time_limit = earliest(time_limit.from_now(), d);
        return o;
    }
};

/// The outcome of a planner: one status (the allocation's outcome is folded
/// into it). `plan` is valid for the graph and fits the budget when
/// `has_solution(status)`: `plan(graph, options)` checks it with `check_plan`,
/// and a plan the validator rejects comes back as `error` with the report.
template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_remat_result {
    memplan::status status = memplan::status::error;
    std::string message;
    /// Proven lower bound on `size`: the smallest memory any schedule of the
    /// graph needs (schedule-free bound), and the op that needs it.
    Size bound = 0;
    std::string bound_op;
    Size size = 0;        ///< the arena of `plan`
    double seconds = 0;
    basic_plan<Size, Id> plan; ///< steps (recomputations, variants) and buffers
    Size schedule_bound = 0;   ///< per-schedule bound of `plan.steps`: no placement of them is smaller
    double cost = 0;                 ///< sum of step costs of the plan
    double fastest_cost = 0;         ///< store-all (every op once) with every op's fastest variant: what no plan can beat
    double base_cost = 0;            ///< store-all with every op's default variant (`default_variant_overhead`)
    Size budget = std::numeric_limits<Size>::max();
    std::string planner; ///< which planner produced the plan (a portfolio names its member)
    /// A proven lower bound on `cost` for every plan of the same schedule
    /// space within `budget` (remat/bound.hpp), when `bound_proven`; else
    /// `fastest_cost`, the trivial one. `bound_note` says how it was found.
    double cost_bound = 0;
    bool bound_proven = false;
    std::string bound_note;

    /// The compute overhead: cost / (cost of store-all with every op's
    /// fastest variant) - 1, what a framework runs without
    /// rematerialization and what MONeT measures against. The price of
    /// recomputation and of slower, leaner variants; never negative.
    double overhead() const noexcept { return fastest_cost > 0 ? cost / fastest_cost - 1.0 : 0.0; }
    /// cost / (cost of store-all with every op's default variant) - 1: may
    /// be negative when the defaults are not the fastest (a slow default
    /// convolution algorithm), so it is never the headline figure.
    double default_variant_overhead() const noexcept { return base_cost > 0 ? cost / base_cost - 1.0 : 0.0; }
    Size arena() const noexcept { return size; } ///< `size`, by its name in this field
    /// `cost_bound` as an overhead: no plan of the space within the budget
    /// has a smaller one (0 when no bound was proven).
    double overhead_bound() const noexcept {
        return bound_proven && fastest_cost > 0 ? std::max(0.0, cost_bound / fastest_cost - 1.0) : 0.0;
    }
    /// overhead() - overhead_bound(): how far the plan may be from the best
    /// of its space, in overhead (a fraction; 0 when the bound is met).
    double gap() const noexcept { return std::max(0.0, overhead() - overhead_bound()); }
};

using remat_result = basic_remat_result<>;

/// The result type of a planner on graphs of type `Graph`.
template <class Graph>
using remat_result_of = basic_remat_result<typename Graph::size_type, typename Graph::id_type>;

/// A rematerialization planner: a named policy with `plan(graph, options)`.
template <class P, class Graph>
concept RematPlannerLike = requires(const P& p, const Graph& g, const remat_options& o) {
    { P::name } -> std::convertible_to<std::string_view>;
    { p.plan(g, o) } -> std::same_as<remat_result_of<Graph>>;
};

} // namespace memplan
