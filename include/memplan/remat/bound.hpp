// A proven lower bound on the compute cost of every plan that fits a
// budget: the LP relaxation of Checkmate's MILP (Jain et al., MLSys 2020),
// relaxed further until it is a bound on memplan's whole schedule space, on
// any `SolverLike` backend.
//
// The space. A plan runs every op once in the base order of `remat_context`
// (its first runs), and before any op it may run forward ops again for the
// tensors that op, or a later one, reads: MONeT's stages on a training graph
// (the forward part once, then one stage per backward op), Checkmate's (one
// stage per op) on a graph without a backward part. Every planner of
// remat/ makes plans of this space. For a graph without a backward part the
// order of first runs is part of the space: `plan_cost_bound` takes it from
// the plan (a plan made on a reordering is bounded on that reordering).
//
// Two relaxations, each a valid bound; the larger is reported.
//
//  - Checkmate's LP (remat/detail/checkmate_model.hpp, `checkmate_relaxation::
//    bound`): each op costs its cheapest variant, reads only what every
//    variant reads and needs the smallest workspace; an in-place pair counts
//    once at its op; memory is capped where a stage's own ops run, not
//    between the recomputations of a stage, which a plan may order as it
//    likes; every forward op may run again, one that also writes a graph
//    output or a persistent tensor included (PyTorch's batch norm), as in
//    the plans. It charges recomputation recursively (a dropped tensor's
//    inputs must be there or be made again), so it is the tight one; its
//    size grows with stages x ops, so it runs when its estimate is within
//    `max_columns`.
//  - The knapsack LP (ours): a droppable tensor may be absent in each gap
//    between two consecutive uses of it (its producer's first run and its
//    readers' first runs), at the price of one run of its producer (its
//    cheapest variant) before the next use; so may a graph output a forward
//    op makes (the end is its last use: a plan that runs the op again keeps
//    only the last copy); every other tensor lives from its producer to its
//    last reader; at each first run, what is present must fit. One column
//    per gap and one row per op: it bounds graphs of any size in a fraction
//    of a second, but it does not charge the inputs a recomputation needs,
//    so it is looser.
//
// A checkpoint (remat_choice::checkpoint: a tensor only the forward part
// reads, kept for recomputations) only makes a tensor live longer: Checkmate's
// LP lets any forward tensor be present, and the knapsack LP counts such a
// tensor to its last forward reader, so both stay bounds with checkpoints.
//
// Each step only drops constraints or lowers costs, so either LP's optimum,
// plus every op once at its fastest variant, is at most the cost of any
// plan whose live bytes fit the budget (and the arena of a placed plan is at
// least its live bytes). An LP that is infeasible proves that no plan of
// the space fits.
//
// A bound is tested against brute force on small graphs
// (tests/solver/remat_bound_test.cpp) and against every planner's plans.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/core/status.hpp>
#include <memplan/remat/detail/checkmate_model.hpp>
#include <memplan/remat/detail/relist.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace memplan {

/// A lower bound on the cost of every plan of the space (see the file
/// comment) that fits a budget.
struct remat_cost_bound {
    /// optimal: `cost` is a proven bound; infeasible: no plan of the space
    /// fits (proven); no_solution: no bound within the time (cost is then
    /// the trivial one, every op once at its fastest variant); error: the
    /// solver failed (message).
    memplan::status status = memplan::status::no_solution;
    double cost = 0;
    double fastest_cost = 0; ///< every op once at its fastest variant: the trivial bound
    std::size_t stages = 0;          ///< of the space
    std::size_t modeled_stages = 0;  ///< of them in the LP
    std::size_t columns = 0, rows = 0;
    double seconds = 0;
    std::string message;

    bool proven() const noexcept { return status == memplan::status::optimal; }
    /// The bound as a compute overhead (cost / fastest_cost - 1), 0 when unproven.
    double overhead() const noexcept {
        return proven() && fastest_cost > 0 ? std::max(0.0, cost / fastest_cost - 1.0) : 0.0;
    }
};

struct remat_bound_options {
    /// Checkmate's LP runs when its size estimate is within this many columns.
    std::size_t max_columns = 60000;
    memplan::deadline deadline{};
};

namespace detail {

/// The knapsack LP of the file comment for `budget` bytes.
template <class Graph>
milp_model knapsack_bound_model(const remat_context<Graph>& ctx, std::uint64_t budget) {
    using id_type = typename Graph::id_type;
    const Graph& g = ctx.graph();
    const auto& order = ctx.base_order();
    const std::size_t n = order.size(), m = g.num_tensors();
    const auto L = make_checkmate_layout(g, ctx.index(), order, ctx.boundary(), 1, checkmate_relaxation::bound);
    const double unit = std::max(1.0, static_cast<double>(budget) / 1e3);
    auto mb = [&](std::uint64_t b) { return static_cast<double>(b) / unit; };
    // Uses of each tensor in base positions: its producer, then every op
    // that reads it whichever variant runs; a graph output lives to the end.
    std::vector<std::vector<std::size_t>> uses(m);
    std::vector<char> is_output(m, 0);
    for (auto t : g.outputs()) is_output[t] = 1;
    std::vector<double> at(n, 0); // bytes that must be present at each first run
    double persistent = 0;
    for (std::size_t x = 0; x < m; ++x)
        if (g.tensor(static_cast<id_type>(x)).persistent) persistent += mb(g.tensor(static_cast<id_type>(x)).bytes);
    for (std::size_t i = 0; i < n; ++i) {
        const auto o = order[i];
        at[i] += mb(L.workspace[o]) - mb(L.shared[o]);
        for (auto y : g.op(o).outputs) uses[y].push_back(i);
        for (auto x : L.reads[o]) uses[x].push_back(i);
    }
    // A graph output made by a forward op is not droppable, yet a plan that
    // runs its producer again (for another output: batch norm's saved
    // statistics beside its running ones) keeps only the last copy to the
    // end, and the first one dies at its last read: its gaps may be absent
    // too, at the same price.
    std::vector<char> gaps(m, 0);
    for (std::size_t x = 0; x < m; ++x) {
        const auto id = static_cast<id_type>(x);
        const auto p = ctx.index().producer[x];
        gaps[x] = ctx.droppable(id) || (is_output[x] && !g.tensor(id).persistent && p != Graph::npos &&
                                        g.op(p).phase == phase::forward);
    }
    // One run restores every output of an op: each such output's gap is
    // charged its share, so that the run is not counted twice.
    std::vector<double> outputs_of(g.num_ops(), 0);
    for (std::size_t x = 0; x < m; ++x)
        if (gaps[x]) outputs_of[ctx.index().producer[x]] += 1;
    milp_model M;
    std::vector<std::vector<milp_term>> row(n);
    for (std::size_t x = 0; x < m; ++x) {
        const auto id = static_cast<id_type>(x);
        if (g.tensor(id).persistent) continue;
        auto& u = uses[x];
        if (ctx.index().is_graph_input(id)) u.insert(u.begin(), 0);
        if (is_output[x]) u.push_back(n - 1);
        if (u.empty()) continue;
        std::sort(u.begin(), u.end());
        u.erase(std::unique(u.begin(), u.end()), u.end());
        const double b = mb(g.tensor(id).bytes);
        for (auto i : u) at[i] += b; // read or made there
        const bool droppable = gaps[x] != 0;
        const auto p = ctx.index().producer[x];
        for (std::size_t j = 0; j + 1 < u.size(); ++j) {
            if (u[j + 1] == u[j] + 1) continue; // no first run in between
            std::size_t col = 0;
            if (droppable) col = M.add_column("gap[" + g.tensor(id).name + "," + std::to_string(j) + "]",
                                              column_kind::continuous, 0, 1, L.cost[p] / outputs_of[p]);
            for (std::size_t i = u[j] + 1; i < u[j + 1]; ++i) {
                at[i] += b;
                if (droppable) row[i].push_back({col, b});
            }
        }
    }
    const double cap = mb(budget) * (1 + 1e-7) - persistent;
    bool consistent = true;
    for (std::size_t i = 0; i < n; ++i) {
        // Present bytes = at[i] - sum(b * absent) <= cap.
        if (at[i] <= cap) continue;
        if (row[i].empty()) {
            consistent = false;
            continue;
        }
        M.add_ge("fit[" + g.op(order[i]).name + "]", std::move(row[i]), at[i] - cap);
    }
    if (!consistent) M.add_row("inconsistent", {}, 1, 1);
    return M;
}

/// Solves one bound LP and adds what it proves to `out` (the larger bound
/// wins; every LP's outcome is named in the message).
template <SolverLike S>
void solve_bound_lp(const milp_model& model, const S& solver, const remat_bound_options& opt, std::string_view what,
                    remat_cost_bound& out) {
    solve_options so;
    so.time_limit = opt.deadline;
    so.lp_method = lp_algorithm::simplex; // a vertex proven optimal: an interior point's objective is no bound
    const auto r = solver.solve(model, so);
    std::string note = std::string(what) + " (" + std::to_string(model.columns.size()) + " columns, " +
                       std::to_string(model.rows.size()) + " rows, " + std::string(S::name) + ", " +
                       std::to_string(r.seconds).substr(0, 5) + " s): ";
    auto add = [&](const std::string& part) { out.message += (out.message.empty() ? "" : "; ") + note + part; };
    if (r.status == status::infeasible) {
        out.status = status::infeasible;
        add("infeasible, no plan of the space fits");
        return;
    }
    if (r.status != status::optimal) {
        if (!out.proven()) out.status = r.status == status::error ? status::error : status::no_solution;
        add(std::string(to_string(r.status)) + (r.message.empty() ? "" : " (" + r.message + ")"));
        return;
    }
    // The solver's optimality tolerance, taken off so that the bound stays one.
    const double lp = std::max(0.0, r.objective - 1e-6 * std::max(1.0, std::fabs(r.objective)));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.2f %%", out.fastest_cost > 0 ? 100 * lp / out.fastest_cost : 0.0);
    add(buf);
    if (out.proven() && out.fastest_cost + lp <= out.cost) return;
    out.cost = out.fastest_cost + lp;
    out.status = status::optimal;
    out.columns = model.columns.size();
    out.rows = model.rows.size();
}

} // namespace detail

/// The bound for `budget` bytes on the plans of `ctx`'s space.
template <class Graph, SolverLike S>
remat_cost_bound cost_lower_bound(const remat_context<Graph>& ctx, std::uint64_t budget, const S& solver,
                                  const remat_bound_options& opt = {}) {
    const stopwatch watch;
    const Graph& g = ctx.graph();
    remat_cost_bound out;
    out.fastest_cost = ctx.fastest_cost();
    out.cost = out.fastest_cost;
    auto done = [&] {
        out.seconds = watch.seconds();
        return out;
    };
    if (budget < ctx.min_memory().first) {
        out.status = status::infeasible;
        out.message = "the budget is below what op '" + ctx.min_memory().second + "' needs in any schedule";
        return done();
    }
    detail::solve_bound_lp(detail::knapsack_bound_model(ctx, budget), solver, opt, "knapsack LP", out);
    if (out.status == status::infeasible) return done();
    const auto L = detail::make_checkmate_layout(g, ctx.index(), ctx.base_order(), ctx.boundary(), 0,
                                                 detail::checkmate_relaxation::bound);
    if (const auto size = detail::checkmate_model_size(g, L).first; size > opt.max_columns) {
        out.message += "; Checkmate's LP relaxation skipped (about " + std::to_string(size) + " columns)";
        return done();
    }
    if (opt.deadline.expired()) return done();
    detail::solve_bound_lp(detail::build_checkmate_milp(g, L, budget, false).model, solver, opt,
                           "Checkmate's LP relaxation", out);
    return done();
}

/// The bound for the space of `steps`: on a graph without a backward part,
/// the order of first runs is taken from the steps (the graph relisted in
/// it); on a training graph the space is the context's.
template <class Graph, SolverLike S>
remat_cost_bound plan_cost_bound(const remat_context<Graph>& ctx, const basic_schedule<typename Graph::id_type>& steps,
                                 std::uint64_t budget, const S& solver, const remat_bound_options& opt = {}) {
    using id_type = typename Graph::id_type;
    const Graph& g = ctx.graph();
    if (!ctx.general()) return cost_lower_bound(ctx, budget, solver, opt);
    std::vector<id_type> order;
    std::vector<char> seen(g.num_ops(), 0);
    for (const auto& st : steps)
        if (st.op < seen.size() && !seen[st.op]) {
            seen[st.op] = 1;
            order.push_back(st.op);
        }
    if (order.size() != g.num_ops() || order == ctx.base_order()) return cost_lower_bound(ctx, budget, solver, opt);
    const Graph h = detail::relisted(g, order);
    const remat_context<Graph> hc(h);
    return cost_lower_bound(hc, budget, solver, opt);
}
template <class Graph, SolverLike S>
remat_cost_bound plan_cost_bound(const Graph& g, const basic_schedule<typename Graph::id_type>& steps,
                                 std::uint64_t budget, const S& solver, const remat_bound_options& opt = {}) {
    return plan_cost_bound(remat_context<Graph>(g), steps, budget, solver, opt);
}

/// Attaches the bound of its plan's space to a result (remat_result's
/// `cost_bound`, `bound_proven`, `bound_note`); a result without a plan gets
/// the bound for its budget on the listed order, which may prove that no
/// plan fits. On the context the result was planned on, or on its graph.
template <class Graph, SolverLike S>
void attach_cost_bound(const remat_context<Graph>& ctx, remat_result_of<Graph>& r, const S& solver,
                       const remat_bound_options& opt = {}) {
    if (r.budget == std::numeric_limits<typename Graph::size_type>::max()) { // no budget: nothing to bound
        r.cost_bound = r.fastest_cost;
        r.bound_proven = true;
        r.bound_note = "no budget: every op once at its fastest variant";
        return;
    }
    const auto b = has_solution(r.status) ? plan_cost_bound(ctx, r.plan.steps, r.budget, solver, opt)
                                          : cost_lower_bound(ctx, r.budget, solver, opt);
    if (r.fastest_cost <= 0) r.fastest_cost = b.fastest_cost; // a result without a plan may lack it
    r.cost_bound = b.proven() ? b.cost : b.fastest_cost;
    r.bound_proven = b.proven();
    r.bound_note = b.status == status::infeasible ? "proof: " + b.message : b.message;
    if (b.status == status::infeasible && !has_solution(r.status)) r.status = status::infeasible;
}
template <class Graph, SolverLike S>
void attach_cost_bound(const Graph& g, remat_result_of<Graph>& r, const S& solver, const remat_bound_options& opt = {}) {
    attach_cost_bound(remat_context<Graph>(g), r, solver, opt);
}

} // namespace memplan
