// The Checkmate MILP (Jain et al., MLSys 2020) on memplan's training graphs,
// with MONeT's stage structure (Shah et al., ICLR 2021): stage 0 runs the
// whole forward part once; each later stage runs one group of backward ops
// (with the optimizer updates that follow them), preceded by whatever
// forward ops it recomputes. R[t,k]: forward op k runs in stage t; S[t,x]:
// tensor x is in memory when stage t starts; FREE[t,x,k]: x is freed right
// after op k of stage t; U[t,k]: bytes in use once op k of stage t has run.
// Memory follows liveness exactly for tight S (in-place sharing aside, which
// the model ignores, so it only overestimates), which is what lets tests
// compare the MILP with enumeration of schedules.
//
// On a graph without a backward part (remat_context::general()) the stages
// are Checkmate's own: stage t runs the t-th listed op for the first time,
// preceded by any earlier op it recomputes, so any tensor may be recomputed
// for any later reader.
//
// A *relaxed* layout (`checkmate_relaxation::bound`) makes the LP a lower
// bound on every plan of the space, variants included: each op costs its
// cheapest variant, needs only the inputs every variant reads and the
// smallest workspace, an in-place pair's shared bytes count once on the
// step of the op, and memory is capped only at the stage's own ops, not
// between its recomputations (whose order a plan chooses). Every forward
// op of the forward part may run again there, as in memplan's plans, also
// one that writes a graph output or a persistent tensor (the exact model
// keeps those to one run). Dropping constraints and underestimating costs
// only lowers the optimum, so the relaxed LP's optimum is a valid bound
// (remat/bound.hpp).
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/schedule/schedule.hpp>
#include <memplan/solver/model.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace memplan::detail {

inline constexpr std::size_t cm_none = std::numeric_limits<std::size_t>::max();

/// How each tensor enters the model.
enum class cm_kind : std::uint8_t {
    persistent, ///< counted on every step, never freed
    candidate,  ///< made by a recomputable forward op: S varies per stage
    input,      ///< non-persistent graph input: S varies, never recomputed
    fixed,      ///< made by a non-recomputable op: live from its producer to its last possible read
};

/// Whether a layout describes plans exactly (default variants) or relaxes
/// the space for a lower bound (see the file comment).
enum class checkmate_relaxation : std::uint8_t { exact, bound };

/// The stage structure and per-tensor facts the model and the schedule
/// derivation share.
template <class Graph>
struct checkmate_layout {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    std::vector<std::vector<id_type>> reads;     ///< per op: what a run reads
    std::vector<double> cost;                    ///< per op: the price of a run
    std::vector<size_type> workspace;            ///< per op
    std::vector<size_type> shared;               ///< per op: in-place bytes counted once (bound only)
    /// A relaxation for a lower bound: memory is capped only where a stage
    /// starts and at its own ops (first runs), not between recomputations,
    /// whose order inside a stage a plan may choose freely.
    bool bound = false;
    std::vector<std::vector<id_type>> fixed_ops; ///< per stage, in order; stage 0: the forward part
    std::vector<std::size_t> stage_of_op;        ///< stage of each op's first run
    std::vector<char> recomputable;              ///< per op
    std::vector<id_type> forward;                ///< recomputable ops in listed (topological) order
    std::vector<cm_kind> kind;                   ///< per tensor
    std::vector<char> is_output;                 ///< per tensor
    std::vector<std::size_t> need_until;         ///< per tensor: last stage that may read it (T for outputs)
    std::vector<std::size_t> need_until_op;      ///< per recomputable op: last stage it may run in
    std::vector<id_type> variant;                ///< default variant per op
    std::vector<id_type> producer;               ///< per tensor (Graph::npos for inputs)
    std::uint64_t persistent_bytes = 0;

    std::size_t stages() const noexcept { return fixed_ops.size(); }
    /// Recomputable op k may run again in stage t >= 1 (after its first run).
    bool candidate_at(std::size_t t, id_type k) const {
        return t >= 1 && recomputable[k] && stage_of_op[k] < t && need_until_op[k] >= t;
    }
};

/// Builds the layout from the base order (forward part, then the rest):
/// `base`, `boundary` as remat_context gives them (boundary == base.size():
/// a graph without a backward part, one stage per op). Consecutive groups
/// are merged so that there are at most `max_stages` stages (0: no limit);
/// fewer stages make a smaller model and coarser recomputation (a plan
/// heuristic, never a bound).
template <class Graph>
checkmate_layout<Graph> make_checkmate_layout(const Graph& g, const graph_index<Graph>& index,
                                              const std::vector<typename Graph::id_type>& base, std::size_t boundary,
                                              std::size_t max_stages,
                                              checkmate_relaxation relax = checkmate_relaxation::exact) {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    checkmate_layout<Graph> L;
    const std::size_t n = g.num_ops(), m = g.num_tensors();
    const bool general = boundary == base.size();
    L.variant.resize(n);
    L.reads.resize(n);
    L.cost.resize(n);
    L.workspace.resize(n);
    L.shared.assign(n, 0);
    for (std::size_t o = 0; o < n; ++o) {
        const auto k = static_cast<id_type>(o);
        L.variant[o] = default_variant(g, k);
        if (relax == checkmate_relaxation::exact || g.op(k).variants.size() < 2) {
            L.reads[o] = g.reads_of(k, L.variant[o]);
            L.cost[o] = g.cost_of(k, L.variant[o]);
            L.workspace[o] = g.workspace_of(k, L.variant[o]);
        } else {
            // What every variant reads, the cheapest cost, the smallest workspace.
            const auto& vs = g.op(k).variants;
            for (auto x : g.reads_of(k, 0)) {
                bool everywhere = true;
                for (std::size_t v = 1; v < vs.size() && everywhere; ++v) {
                    const auto& r = g.reads_of(k, static_cast<id_type>(v));
                    everywhere = std::find(r.begin(), r.end(), x) != r.end();
                }
                if (everywhere && std::find(L.reads[o].begin(), L.reads[o].end(), x) == L.reads[o].end())
                    L.reads[o].push_back(x);
            }
            L.cost[o] = g.cost_of(k, 0);
            L.workspace[o] = g.workspace_of(k, 0);
            for (std::size_t v = 1; v < vs.size(); ++v) {
                L.cost[o] = std::min(L.cost[o], g.cost_of(k, static_cast<id_type>(v)));
                L.workspace[o] = std::min(L.workspace[o], g.workspace_of(k, static_cast<id_type>(v)));
            }
        }
        if (relax == checkmate_relaxation::bound)
            for (auto [x, y] : g.op(k).inplace)
                if (x != y && !g.tensor(x).persistent && !g.tensor(y).persistent)
                    L.shared[o] += std::min<size_type>(g.tensor(x).bytes, g.tensor(y).bytes);
    }
    L.bound = relax == checkmate_relaxation::bound;
    L.producer = index.producer;
    L.is_output.assign(m, 0);
    for (auto t : g.outputs()) L.is_output[t] = 1;

    // Groups: each non-update op after the forward part opens one; updates
    // join the open group. Without a backward part every op is one group
    // and stage 0 is the first of them.
    std::vector<std::vector<id_type>> groups;
    for (std::size_t i = general ? 0 : boundary; i < base.size(); ++i) {
        const auto o = base[i];
        if (groups.empty() || general || g.op(o).phase != phase::update) groups.emplace_back();
        groups.back().push_back(o);
    }
    std::size_t per = 1;
    if (max_stages > 1 && groups.size() + 1 > max_stages) per = (groups.size() + max_stages - 2) / (max_stages - 1);
    if (!general) L.fixed_ops.emplace_back(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(boundary));
    for (std::size_t i = 0; i < groups.size(); i += per) {
        L.fixed_ops.emplace_back();
        for (std::size_t j = i; j < std::min(groups.size(), i + per); ++j)
            L.fixed_ops.back().insert(L.fixed_ops.back().end(), groups[j].begin(), groups[j].end());
    }
    if (L.fixed_ops.empty()) L.fixed_ops.emplace_back();
    const std::size_t T = L.fixed_ops.size();
    L.stage_of_op.assign(n, 0);
    for (std::size_t t = 0; t < T; ++t)
        for (auto o : L.fixed_ops[t]) L.stage_of_op[o] = t;

    // Recomputable: a forward op of the forward part. A plan of memplan's
    // space may run any of them again (remat_context::schedule_of), one that
    // also writes a graph output or a persistent tensor included (PyTorch's
    // batch norm returns the new running statistics beside its result and
    // the saved statistics): the exact model leaves those out (their
    // outputs then stay from their first run to their last possible read),
    // a bound must not, or it would charge keeping tensors that plans drop.
    L.recomputable.assign(n, 0);
    for (std::size_t i = 0; i < (general ? base.size() : boundary); ++i) {
        const auto o = base[i];
        const auto& op = g.op(o);
        bool ok = op.phase == phase::forward;
        if (relax == checkmate_relaxation::exact)
            for (auto t : op.outputs)
                if (g.tensor(t).persistent || L.is_output[t]) ok = false;
        L.recomputable[o] = ok;
    }
    for (std::size_t o = 0; o < n; ++o)
        if (L.recomputable[o]) L.forward.push_back(static_cast<id_type>(o));

    L.kind.assign(m, cm_kind::fixed);
    for (std::size_t t = 0; t < m; ++t) {
        const auto x = static_cast<id_type>(t);
        if (g.tensor(x).persistent) {
            L.kind[t] = cm_kind::persistent;
            L.persistent_bytes += g.tensor(x).bytes;
        } else if (index.is_graph_input(x)) {
            L.kind[t] = cm_kind::input;
        } else if (L.recomputable[index.producer[t]]) {
            L.kind[t] = cm_kind::candidate;
        }
    }

    // Last stage that may read each tensor: consumers come after producers in
    // listed order, so one reverse sweep settles every op before its inputs.
    // An op runs again only for an output some op reads then or later, so a
    // graph output (kept to the end, not read there) does not extend its
    // producer's recomputations.
    std::vector<std::size_t> read_until(m, 0);
    L.need_until_op.assign(n, 0);
    for (std::size_t o = n; o-- > 0;) {
        const auto k = static_cast<id_type>(o);
        std::size_t last = L.stage_of_op[o];
        if (L.recomputable[o]) {
            std::size_t nu = 0;
            for (auto y : g.op(k).outputs) nu = std::max(nu, read_until[y]);
            L.need_until_op[o] = nu;
            last = std::max(last, nu); // its first run reads its inputs even when nothing reads its outputs
        }
        for (auto x : L.reads[o]) read_until[x] = std::max(read_until[x], last);
    }
    L.need_until = std::move(read_until);
    for (std::size_t t = 0; t < m; ++t) {
        if (L.is_output[t]) L.need_until[t] = T;
        // What an op that never runs again makes (PyTorch's running-count
        // increments, read by nobody) is fixed: kept from its first run
        // while needed, as its S columns would have to be anyway.
        if (L.bound && L.kind[t] == cm_kind::candidate) {
            const auto p = L.producer[t];
            if (L.need_until_op[p] <= L.stage_of_op[p]) L.kind[t] = cm_kind::fixed;
        }
    }
    return L;
}

/// A linear expression value of one model quantity: a constant or a column.
struct cm_term {
    double constant = 0;
    std::size_t column = cm_none;
    bool is_const() const noexcept { return column == cm_none; }
};

/// The built model and where its R and S columns are.
struct checkmate_milp {
    milp_model model;
    std::vector<std::vector<std::size_t>> r_col; ///< [stage][op]
    std::vector<std::vector<std::size_t>> s_col; ///< [stage][tensor]
    std::size_t binaries = 0;
    double unit = 1; ///< bytes per model memory unit
};

/// Counts what the model would have (columns, nonzeros) without building it,
/// so that too large a model is refused before any memory goes into it.
template <class Graph>
std::pair<std::size_t, std::size_t> checkmate_model_size(const Graph& g, const checkmate_layout<Graph>& L) {
    std::size_t positions = L.fixed_ops[0].size(), reads = 0;
    for (auto o : L.fixed_ops[0]) reads += L.reads[o].size() + g.op(o).outputs.size();
    for (std::size_t t = 1; t < L.stages(); ++t) {
        for (auto k : L.forward)
            if (L.candidate_at(t, k)) {
                ++positions;
                reads += L.reads[k].size() + g.op(k).outputs.size();
            }
        positions += L.fixed_ops[t].size();
    }
    // Per position: R, U and about one FREE per read or output, each with a few rows.
    return {3 * positions + reads, 6 * positions + 6 * reads};
}

/// Builds the MILP for stage memory at most `budget` bytes (the arena
/// budget the schedule must meet, before fragmentation). Binaries when
/// `integral`, else the LP relaxation.
template <class Graph>
checkmate_milp build_checkmate_milp(const Graph& g, const checkmate_layout<Graph>& L, std::uint64_t budget,
                                    bool integral) {
    using id_type = typename Graph::id_type;
    const std::size_t T = L.stages(), m = g.num_tensors(), n = g.num_ops();
    checkmate_milp out;
    auto& M = out.model;
    out.unit = std::max(1.0, static_cast<double>(budget) / 1e3); // moderate coefficients keep GLPK exact
    const double unit = out.unit;
    auto mb = [&](std::uint64_t bytes) { return static_cast<double>(bytes) / unit; };
    const column_kind bin = integral ? column_kind::binary : column_kind::continuous;
    auto binary = [&](std::string name, double objective) {
        ++out.binaries;
        return M.add_column(std::move(name), bin, 0, 1, objective);
    };

    out.r_col.assign(T, std::vector<std::size_t>(n, cm_none));
    out.s_col.assign(T + 1, std::vector<std::size_t>(m, cm_none));
    for (std::size_t t = 1; t < T; ++t)
        for (auto k : L.forward)
            if (L.candidate_at(t, k))
                out.r_col[t][k] = binary("R[" + std::to_string(t) + "," + g.op(k).name + "]", L.cost[k]);
    for (std::size_t x = 0; x < m; ++x) {
        if (L.kind[x] != cm_kind::candidate && L.kind[x] != cm_kind::input) continue;
        const std::size_t made = L.kind[x] == cm_kind::candidate ? L.stage_of_op[L.producer[x]] : 0;
        for (std::size_t t = made + 1; t < T && t <= L.need_until[x]; ++t)
            out.s_col[t][x] = binary("S[" + std::to_string(t) + "," + g.tensor(static_cast<id_type>(x)).name + "]", 0);
    }

    auto R = [&](std::size_t t, id_type k) -> cm_term {
        if (t < T && out.r_col[t][k] != cm_none) return {0, out.r_col[t][k]};
        if (t < T && L.stage_of_op[k] == t) return {1, cm_none};
        return {0, cm_none};
    };
    auto S = [&](std::size_t t, std::size_t x) -> cm_term {
        switch (L.kind[x]) {
        case cm_kind::persistent: return {1, cm_none};
        case cm_kind::candidate:
        case cm_kind::input:
            if (t == 0) return {L.kind[x] == cm_kind::input ? 1.0 : 0.0, cm_none};
            if (t >= T) return {L.is_output[x] ? 1.0 : 0.0, cm_none};
            if (out.s_col[t][x] != cm_none) return {0, out.s_col[t][x]};
            return {0, cm_none};
        case cm_kind::fixed:
            if (t >= T) return {L.is_output[x] ? 1.0 : 0.0, cm_none};
            return {L.stage_of_op[L.producer[x]] < t && t <= L.need_until[x] ? 1.0 : 0.0, cm_none};
        }
        return {0, cm_none};
    };
    // Adds lower <= sum(coef * term) <= upper with constants folded; returns
    // false when a row of constants alone is violated.
    bool consistent = true;
    auto add_row = [&](std::string name, std::initializer_list<std::pair<double, cm_term>> parts, double lower,
                       double upper) {
        std::vector<milp_term> terms;
        double c = 0;
        for (const auto& [coef, term] : parts) {
            if (term.is_const()) {
                c += coef * term.constant;
                continue;
            }
            bool merged = false;
            for (auto& e : terms)
                if (e.column == term.column) {
                    e.coefficient += coef;
                    merged = true;
                }
            if (!merged) terms.push_back({term.column, coef});
        }
        std::erase_if(terms, [](const milp_term& e) { return e.coefficient == 0; });
        if (terms.empty()) {
            if (c < lower - 1e-9 || c > upper + 1e-9) consistent = false;
            return;
        }
        M.add_row(std::move(name), std::move(terms), lower - c, upper - c);
    };

    // Carry: S[t+1,x] <= S[t,x] + R[t,producer].
    for (std::size_t x = 0; x < m; ++x) {
        if (L.kind[x] != cm_kind::candidate && L.kind[x] != cm_kind::input) continue;
        for (std::size_t t = 0; t < T; ++t) {
            const auto next = S(t + 1, x);
            if (next.is_const() && next.constant == 0) continue;
            const cm_term made = L.kind[x] == cm_kind::candidate ? R(t, L.producer[x]) : cm_term{};
            add_row("carry", {{1.0, next}, {-1.0, S(t, x)}, {-1.0, made}}, -milp_infinity, 0);
        }
    }

    // A bound's cap is a hair above the budget, so that the solver's
    // tolerances never cut off a plan that fits exactly.
    const double cap = mb(budget) * (L.bound ? 1 + 1e-7 : 1.0) - mb(L.persistent_bytes);
    constexpr double slack = 0.02;
    std::vector<id_type> ops;
    std::vector<char> done(n, 0); // ran earlier in the current stage
    for (std::size_t t = 0; t < T; ++t) {
        ops.clear();
        if (t > 0)
            for (auto k : L.forward)
                if (L.candidate_at(t, k)) ops.push_back(k);
        ops.insert(ops.end(), L.fixed_ops[t].begin(), L.fixed_ops[t].end());
        const std::string st = std::to_string(t);

        // Dependencies: whatever op j of this stage reads is kept or made earlier in the stage.
        if (t > 0) {
            for (auto j : ops) {
                for (auto x : L.reads[j]) {
                    if (L.kind[x] == cm_kind::persistent) continue;
                    const auto p = L.producer[x];
                    const cm_term made = p != Graph::npos && done[p] ? R(t, p) : cm_term{};
                    add_row("dep[" + st + "," + g.op(j).name + "]", {{1.0, R(t, j)}, {-1.0, S(t, x)}, {-1.0, made}},
                            -milp_infinity, 0);
                }
                done[j] = 1;
            }
            for (auto j : ops) done[j] = 0;
        }

        // Memory: U_i = U_{i-1} - freed after op i-1 + outputs of op i.
        std::vector<std::pair<double, std::size_t>> start; // (coef, column)
        double start_const = 0;
        for (std::size_t x = 0; x < m; ++x) {
            if (L.kind[x] == cm_kind::persistent) continue;
            const auto s = S(t, x);
            const double b = mb(g.tensor(static_cast<id_type>(x)).bytes);
            if (s.is_const()) start_const += b * s.constant;
            else start.push_back({b, s.column});
        }
        std::size_t prev_u = cm_none;
        std::vector<milp_term> freed;
        double freed_const = 0;
        // Direct form (MILP): each position's row sums everything in use.
        std::vector<double> cur(integral ? M.columns.size() : 0, 0.0);
        std::vector<char> listed(cur.size(), 0);
        std::vector<std::size_t> cur_cols;
        double cur_const = start_const;
        auto cur_add = [&](std::size_t c, double v) {
            if (c >= cur.size()) {
                cur.resize(c + 1, 0.0);
                listed.resize(c + 1, 0);
            }
            if (!listed[c]) cur_cols.push_back(c);
            listed[c] = 1;
            cur[c] += v;
        };
        if (integral)
            for (auto [b, c] : start) cur_add(c, b);
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const auto k = ops[i];
            const auto rk = R(t, k);
            double out_bytes = 0;
            for (auto y : g.op(k).outputs)
                if (L.kind[y] != cm_kind::persistent) out_bytes += mb(g.tensor(y).bytes);
            const double ws = mb(L.workspace[k]);
            const double shared = mb(L.shared[k]); // 0 unless a bound
            const std::string where = "[" + st + "," + g.op(k).name + "]";
            if (integral) {
                // Backends round binaries that sat within their integrality
                // tolerance (1e-5 x a tensor of up to 1000 units), so the
                // budget row gets a small slack; placement checks the real
                // memory of every schedule anyway, and the planner asks
                // for less when a schedule went over.
                for (const auto& f : freed) cur_add(f.column, -f.coefficient);
                cur_const -= freed_const;
                if (rk.is_const()) cur_const += (out_bytes + ws) * rk.constant;
                else cur_add(rk.column, out_bytes + ws);
                std::vector<milp_term> terms;
                for (auto c : cur_cols)
                    if (cur[c] != 0) terms.push_back({c, cur[c]});
                if (!terms.empty()) M.add_le("mem" + where, std::move(terms), cap + slack - cur_const);
                else if (cur_const > cap + slack) consistent = false;
                if (rk.is_const()) cur_const -= ws * rk.constant;
                else cur_add(rk.column, -ws);
                std::erase_if(cur_cols, [&](std::size_t c) {
                    if (cur[c] != 0) return false;
                    listed[c] = 0; // it may come back later in the stage
                    return true;
                });
            } else {
                // Chain form (LP): U_i = U_{i-1} - freed after op i-1 + outputs of op i.
                const double at_op = ws - shared; // the step's extra bytes beyond U
                const bool capped = !L.bound || !(t > 0 && i + L.fixed_ops[t].size() < ops.size());
                const auto u = M.add_column("U" + where, column_kind::continuous, 0,
                                            at_op != 0 || !capped ? milp_infinity : cap);
                std::vector<milp_term> terms{{u, 1.0}};
                double rhs = 0;
                if (prev_u == cm_none) {
                    for (auto [b, c] : start) terms.push_back({c, -b});
                    rhs += start_const;
                } else {
                    terms.push_back({prev_u, -1.0});
                    for (const auto& f : freed) terms.push_back(f);
                    rhs -= freed_const;
                }
                if (rk.is_const()) rhs += out_bytes * rk.constant;
                else if (out_bytes > 0) terms.push_back({rk.column, -out_bytes});
                M.add_ge("mem" + where, std::move(terms), rhs); // U only has to bound the bytes in use from above
                if (at_op != 0 && capped) {
                    if (rk.is_const()) M.add_le("peak" + where, {{u, 1.0}}, cap - at_op * rk.constant);
                    else M.add_le("peak" + where, {{u, 1.0}, {rk.column, at_op}}, cap);
                }
                prev_u = u;
            }

            // What may be freed right after op k: its reads and outputs, when
            // k ran, no later op of the stage reads them and the next stage does not keep them.
            freed.clear();
            freed_const = 0;
            auto consider = [&](std::size_t x) {
                if (L.kind[x] == cm_kind::persistent) return;
                std::vector<cm_term> bounds{rk};
                const auto next = S(t + 1, x);
                bounds.push_back(next.is_const() ? cm_term{1 - next.constant, cm_none} : cm_term{-1, next.column});
                for (std::size_t j = i + 1; j < ops.size(); ++j) {
                    const auto& rd = L.reads[ops[j]];
                    if (std::find(rd.begin(), rd.end(), static_cast<id_type>(x)) == rd.end()) continue;
                    const auto rj = R(t, ops[j]);
                    bounds.push_back(rj.is_const() ? cm_term{1 - rj.constant, cm_none} : cm_term{-1, rj.column});
                }
                // A negative constant marks "1 - column"; a constant 0 rules freeing out.
                bool all_const = true;
                for (const auto& b : bounds) {
                    if (b.is_const() && b.constant <= 0) return;
                    if (!b.is_const()) all_const = false;
                }
                const double b = mb(g.tensor(static_cast<id_type>(x)).bytes);
                if (all_const) {
                    freed_const += b;
                    return;
                }
                const auto f = M.add_column("FREE[" + st + "," + g.tensor(static_cast<id_type>(x)).name + "," +
                                                g.op(k).name + "]",
                                            bin, 0, 1);
                if (integral) ++out.binaries;
                for (const auto& bd : bounds) {
                    if (bd.is_const()) continue;
                    if (bd.constant == 0) M.add_le("free", {{f, 1.0}, {bd.column, -1.0}}, 0); // f <= R[t,k]
                    else M.add_le("free", {{f, 1.0}, {bd.column, 1.0}}, 1);                 // f <= 1 - column
                }
                freed.push_back({f, b});
            };
            std::vector<id_type> seen;
            for (auto x : L.reads[k])
                if (std::find(seen.begin(), seen.end(), x) == seen.end()) {
                    seen.push_back(x);
                    consider(x);
                }
            for (auto y : g.op(k).outputs) consider(y);
        }
    }
    if (!consistent) {
        // A row of constants that fails means some op can never have its
        // inputs; the model is then infeasible as a whole.
        M.add_row("inconsistent", {}, 1, 1);
    }
    return out;
}

/// The forward ops each stage must recompute so that every op of the stage
/// finds its inputs and the tensors `keep[t+1]` marks are in memory when
/// stage t+1 starts (Checkmate's derivation of R from S, one sweep per
/// stage). `keep[t][x]` is read only for candidate tensors; inputs stay
/// until their last read anyway. Returns the schedule, default variants.
template <class Graph>
basic_schedule<typename Graph::id_type> checkmate_schedule(const Graph& g, const checkmate_layout<Graph>& L,
                                                           const std::vector<std::vector<char>>& keep) {
    using id_type = typename Graph::id_type;
    const std::size_t T = L.stages();
    basic_schedule<id_type> s;
    for (auto o : L.fixed_ops[0]) s.push_back({o, L.variant[o]});
    std::vector<char> avail(g.num_tensors(), 1), run(g.num_ops(), 0);
    std::vector<id_type> stack;
    for (std::size_t t = 1; t < T; ++t) {
        for (std::size_t x = 0; x < g.num_tensors(); ++x)
            if (L.kind[x] == cm_kind::candidate) avail[x] = keep[t][x] != 0;
        // What the stage's own ops make (first runs) is there for their readers.
        for (auto o : L.fixed_ops[t])
            for (auto y : g.op(o).outputs) avail[y] = 1;
        std::fill(run.begin(), run.end(), 0);
        auto need = [&](id_type x) {
            if (avail[x] || L.kind[x] != cm_kind::candidate) return;
            stack.push_back(L.producer[x]);
            while (!stack.empty()) {
                const auto p = stack.back();
                stack.pop_back();
                if (run[p]) continue;
                run[p] = 1;
                for (auto y : g.op(p).outputs) avail[y] = 1;
                for (auto r : L.reads[p])
                    if (!avail[r] && L.kind[r] == cm_kind::candidate) stack.push_back(L.producer[r]);
            }
        };
        for (auto o : L.fixed_ops[t])
            for (auto x : L.reads[o]) need(x);
        if (t + 1 < T)
            for (std::size_t x = 0; x < g.num_tensors(); ++x)
                if (L.kind[x] == cm_kind::candidate && keep[t + 1][x]) need(static_cast<id_type>(x));
        for (auto k : L.forward)
            if (run[k]) s.push_back({k, L.variant[k]});
        for (auto o : L.fixed_ops[t]) s.push_back({o, L.variant[o]});
    }
    return s;
}

} // namespace memplan::detail
