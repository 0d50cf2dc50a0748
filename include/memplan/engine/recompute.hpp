// Simple recomputation schedules, kept for the CUDA examples only: the CPU
// examples and the engine tests use the rematerialization planners
// (memplan/remat/select.hpp), which choose variants too. Drop a set of forward tensors after
// their forward use and re-run their producers right before the first later
// op that reads them (recursively for dropped inputs of those producers), in
// forward order. Liveness then frees the first copy after its last forward
// read. A greedy drops the tensors with the most bytes per microsecond of
// recomputation until the planned arena fits a budget.
#pragma once

#include <memplan/graph/graph.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/plan/alloc/best_heuristic.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

namespace memplan::engine {

/// Variant of op `o` when every step asks for variant `v`: the op's last
/// variant when it has fewer, npos when it has none.
template <class Graph>
typename Graph::id_type pick_variant(const Graph& g, typename Graph::id_type o, std::uint32_t v) {
    const auto n = g.op(o).variants.size();
    if (n == 0) return Graph::npos;
    return static_cast<typename Graph::id_type>(std::min<std::size_t>(v, n - 1));
}

/// The forward ops once in listed order, then every other op in listed order,
/// each preceded by re-runs of the producers of the `dropped` tensors it reads
/// that have not been re-run yet. Every step runs variant `variant` (see
/// pick_variant). `dropped` has one flag per tensor; only outputs of forward
/// ops may be dropped (others are ignored).
template <class Graph>
basic_schedule<typename Graph::id_type> recompute_schedule(const Graph& g, const std::vector<bool>& dropped,
                                                           std::uint32_t variant = 0) {
    using id = typename Graph::id_type;
    const graph_index<Graph> index(g);
    basic_schedule<id> s;
    std::vector<char> fresh(g.num_tensors(), 1); // readable without recomputation
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto p = index.producer[t];
        if (t < dropped.size() && dropped[t] && p != Graph::npos && g.op(p).phase == phase::forward) fresh[t] = 0;
    }
    std::function<void(id)> ensure = [&](id t) {
        if (fresh[t]) return;
        const id p = index.producer[t];
        for (auto u : g.reads_of(p, pick_variant(g, p, variant))) ensure(u);
        s.push_back({p, pick_variant(g, p, variant)});
        for (auto u : g.op(p).outputs) fresh[u] = 1;
    };
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        if (g.op(static_cast<id>(o)).phase == phase::forward)
            s.push_back({static_cast<id>(o), pick_variant(g, static_cast<id>(o), variant)});
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto op = static_cast<id>(o);
        if (g.op(op).phase == phase::forward) continue;
        for (auto t : g.reads_of(op, pick_variant(g, op, variant))) ensure(t);
        s.push_back({op, pick_variant(g, op, variant)});
    }
    return s;
}

/// A plan that fits `budget_bytes` if the greedy can reach it.
struct budget_plan {
    plan best;                        ///< the smallest arena reached (store-all when nothing helped)
    std::vector<bool> dropped;        ///< per tensor
    std::uint64_t store_all_bytes = 0; ///< arena of the plan that drops nothing
    bool fits = false;                 ///< best.arena_bytes <= budget_bytes
};

/// Greedy: candidates are forward tensors that no graph output depends on
/// through their producer, largest bytes per unit of recompute cost first;
/// each is dropped when that lowers the arena (best_heuristic placement),
/// until the arena fits `budget_bytes`. Budget 0: the smallest arena the
/// greedy reaches. Every step runs variant `variant`.
template <class Graph>
budget_plan plan_for_budget(const Graph& g, std::uint64_t budget_bytes, std::uint32_t variant = 0) {
    using id = typename Graph::id_type;
    const graph_index<Graph> index(g);
    budget_plan out;
    out.dropped.assign(g.num_tensors(), false);
    auto arena_of = [&](const std::vector<bool>& d, plan* keep) {
        auto made = make_plan(g, recompute_schedule(g, d, variant), best_heuristic{});
        if (!has_solution(made.status)) return UINT64_MAX;
        if (keep) *keep = std::move(made.plan);
        return static_cast<std::uint64_t>(keep ? keep->arena_bytes : made.plan.arena_bytes);
    };
    out.store_all_bytes = arena_of(out.dropped, &out.best);
    std::uint64_t current = out.store_all_bytes;
    std::vector<char> near_output(g.num_ops(), 0);
    for (auto t : g.outputs())
        if (index.producer[t] != Graph::npos) near_output[index.producer[t]] = 1;
    std::vector<id> cand;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto p = index.producer[t];
        if (p == Graph::npos || g.op(p).phase != phase::forward || near_output[p] || g.tensor(static_cast<id>(t)).persistent)
            continue;
        cand.push_back(static_cast<id>(t));
    }
    auto density = [&](id t) { return double(g.tensor(t).bytes) / std::max(1e-9, g.cost_of(index.producer[t])); };
    std::stable_sort(cand.begin(), cand.end(), [&](id a, id b) { return density(a) > density(b); });
    for (auto t : cand) {
        if (current <= budget_bytes) break;
        auto trial = out.dropped;
        trial[t] = true;
        plan p;
        const auto a = arena_of(trial, &p);
        if (a < current) {
            current = a;
            out.dropped = std::move(trial);
            out.best = std::move(p);
        }
    }
    out.fits = current <= budget_bytes;
    return out;
}

} // namespace memplan::engine
