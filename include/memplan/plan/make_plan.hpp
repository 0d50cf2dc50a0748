// From a graph and a schedule to a placed plan: liveness, then one allocation
// item per block (a buffer and the in-place outputs that take it over), then
// an allocation policy places the blocks in one arena. The plan is checked
// by the independent validator before it is returned: a plan it rejects is a
// bug report (status `error`, the report as message), never a result.
#pragma once

#include <memplan/alloc/problem.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/core/detail/checked.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/schedule/liveness.hpp>
#include <memplan/schedule/plan.hpp>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <vector>

namespace memplan {

struct plan_options {
    std::uint64_t alignment = 256; ///< every offset a multiple of it
    liveness_options liveness{};
    /// Run `check_plan` on the result (O(n log n) in steps and buffers; see
    /// docs/architecture.md for its cost). Planners that place many
    /// candidate schedules turn it off for those and check what they return.
    bool validate = true;
};

/// A plan with the figures of how it was made.
template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_planned {
    memplan::status status = memplan::status::error; ///< the allocator's outcome (error: the plan fails check_plan)
    std::string message;     ///< reason when status has no solution
    Size bound = 0;          ///< per-schedule bound of the plan's buffers: no placement of them is smaller
    Size size = 0;           ///< the arena (`plan.arena_bytes`) when `has_solution(status)`
    double seconds = 0;      ///< liveness + allocation (+ validation) wall time
    basic_plan<Size, Id> plan;

    double ratio() const noexcept {
        return bound == 0 ? 1.0 : static_cast<double>(size) / static_cast<double>(bound);
    }
};

using planned = basic_planned<>;

/// The result type of planning a graph of type `Graph`.
template <class Graph>
using planned_of = basic_planned<typename Graph::size_type, typename Graph::id_type>;

/// The allocation problem of a liveness result: one item per block of
/// in-place-chained buffers. `block_of[b]` receives the item of buffer b.
template <class Size, class Id>
basic_alloc_problem<Size> allocation_problem(const basic_liveness<Size, Id>& live, Size alignment,
                                             std::vector<std::size_t>& block_of) {
    constexpr std::size_t none = basic_liveness<Size, Id>::none;
    basic_alloc_problem<Size> p;
    p.alignment = alignment;
    block_of.assign(live.buffers.size(), none);
    for (std::size_t b = 0; b < live.buffers.size(); ++b) {
        const auto& x = live.buffers[b];
        const std::size_t src = live.alias_of[b];
        if (src == none) { // sources precede the outputs that take them over
            block_of[b] = p.items.size();
            p.items.push_back({x.bytes, x.first, static_cast<std::uint64_t>(x.last) + 1});
        } else {
            block_of[b] = block_of[src];
            auto& item = p.items[block_of[b]];
            item.size = std::max(item.size, x.bytes);
            item.end = std::max<std::uint64_t>(item.end, static_cast<std::uint64_t>(x.last) + 1);
        }
    }
    return p;
}

namespace detail {

/// When `p` fails the validator: status `error` and the report as the
/// message (a planner bug to report, never a result to use).
template <class Graph, class Plan>
void reject_invalid_plan(const Graph& g, const Plan& p, memplan::status& status, std::string& message) {
    const auto report = check_plan(g, p);
    if (report.ok()) return;
    status = memplan::status::error;
    message = "internal error (please report it): the plan fails check_plan: " + report.to_string();
    if (!message.empty() && message.back() == '\n') message.pop_back();
}

/// Rejects, naming the tensor, an alignment under which a buffer or the sum
/// of all buffers no longer fits the size type (what `validate` of the
/// allocation problem would reject by item number).
template <class Graph, class Live, class Size>
void check_aligned_sizes(const Graph& g, const Live& live, const basic_schedule<typename Graph::id_type>& s,
                         const basic_alloc_problem<Size>& p, const std::vector<std::size_t>& block_of) {
    auto describe = [&](std::size_t item) {
        for (std::size_t b = 0; b < live.buffers.size(); ++b)
            if (block_of[b] == item) {
                const auto& x = live.buffers[b];
                if (!x.is_workspace()) return "tensor '" + g.tensor(x.tensor).name + "'";
                return "the workspace of step " + std::to_string(x.step) +
                       (x.step < s.size() ? " (op '" + g.op(s[x.step].op).name + "')" : std::string());
            }
        return "item " + std::to_string(item);
    };
    Size total = 0;
    for (std::size_t i = 0; i < p.items.size(); ++i) {
        const auto aligned = detail::checked_align_up<Size>(p.items[i].size, p.alignment);
        if (!aligned)
            throw error("plan", "graph '" + g.name() + "': " + describe(i) + " (" + std::to_string(p.items[i].size) +
                                    " bytes) overflows 64 bits when aligned to " + std::to_string(p.alignment));
        const auto sum = detail::checked_add<Size>(total, *aligned);
        if (!sum)
            throw error("plan", "graph '" + g.name() + "': aligned to " + std::to_string(p.alignment) +
                                    ", the buffers up to " + describe(i) +
                                    " sum past 64 bits of bytes: no arena could hold them (is the alignment meant?)");
        total = *sum;
    }
}

} // namespace detail

/// Places the buffers of schedule `s` with allocation policy `alloc`.
/// Throws on a malformed schedule; the allocator's outcome is in `status`,
/// or `error` with the validator's report when the plan fails `check_plan`.
template <class Graph, class Allocator>
    requires AllocatorLike<Allocator, typename Graph::size_type>
planned_of<Graph>
make_plan(const Graph& g, const basic_schedule<typename Graph::id_type>& s, const Allocator& alloc,
          plan_options opt = {}) {
    using size_type = typename Graph::size_type;
    const auto t0 = std::chrono::steady_clock::now();
    planned_of<Graph> out;
    const auto live = compute_liveness(g, s, opt.liveness);
    std::vector<std::size_t> block_of;
    auto problem = allocation_problem(live, static_cast<size_type>(opt.alignment), block_of);
    detail::check_aligned_sizes(g, live, s, problem, block_of);
    const auto placed = alloc.place(problem);

    out.plan.graph = g.name();
    out.plan.alignment = static_cast<size_type>(opt.alignment);
    out.plan.steps = s;
    out.plan.buffers = live.buffers;
    out.bound = lower_bound(live);
    out.status = placed.status;
    out.message = placed.message;
    if (has_solution(placed.status)) {
        size_type arena = 0;
        for (std::size_t b = 0; b < out.plan.buffers.size(); ++b) {
            auto& x = out.plan.buffers[b];
            x.offset = placed.offsets[block_of[b]];
            if (x.bytes > 0) arena = std::max<size_type>(arena, x.offset + x.bytes);
        }
        out.plan.arena_bytes = arena;
        out.size = arena;
        if (opt.validate) detail::reject_invalid_plan(g, out.plan, out.status, out.message);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace memplan
