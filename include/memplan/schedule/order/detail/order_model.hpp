// The ordering MILP of MODeL / OLLA (Steiner et al., ICML 2023), restricted
// to a window of consecutive steps of a given order (the whole order is the
// window lo = 0, hi = n). Ops outside the window keep their steps.
//
// Columns: C[o,s] = 1 when window op o runs at step s, only inside o's
// ASAP..ALAP window (ancestors / descendants among the window ops);
// P[x,s] = 1 when tensor x is kept into step s from an earlier step, only
// where x can be live; z[o,s,x] in [0,1] for in-place sharing; and the peak.
// Rows: each op once, one op per step, a reader runs only while its input is
// kept (this is what enforces precedence), a tensor is kept only if it was
// made or kept the step before (graph outputs and persistent tensors must be
// kept), aggregated precedence rows per edge (they only tighten the LP), and
// peak >= bytes live at each step, counted exactly as liveness.hpp does:
// inputs from step 0, outputs and persistent tensors to the end, workspace on
// the op's step, and an in-place output sharing its input's bytes when the
// step is the input's last use. z <= C[o,s] and z <= 1 - P[x,s+1] give that
// sharing exactly at an optimum and never more than liveness grants, so the
// model's value of any solution is >= the real peak of its order, and every
// order has a solution of value equal to its real peak: the MILP optimum is
// the true optimum and its dual bound a true lower bound.
#pragma once

#include <memplan/graph/validate.hpp>
#include <memplan/schedule/schedule.hpp>
#include <memplan/solver/model.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace memplan::detail {

/// The byte unit of the model: the gcd of every tensor and workspace size,
/// so the coefficients stay small integers. At least 1.
template <class Graph>
typename Graph::size_type order_model_unit(const Graph& g) {
    using size_type = typename Graph::size_type;
    size_type u = 0;
    for (const auto& t : g.tensors()) u = std::gcd(u, t.bytes);
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto id = static_cast<typename Graph::id_type>(o);
        u = std::gcd(u, g.workspace_of(id, default_variant(g, id)));
    }
    return u == 0 ? size_type{1} : u;
}

template <class Graph>
struct order_model {
    using id_type = typename Graph::id_type;
    milp_model model;
    std::size_t lo = 0, hi = 0;          ///< the window: steps lo..hi-1
    std::vector<id_type> ops;            ///< window ops, in the given order
    std::vector<std::size_t> asap, alap; ///< per window op, absolute steps
    std::vector<std::size_t> c_first;    ///< per window op: column of C[op, asap]
    std::size_t peak_column = 0;
    double unit = 1;                     ///< bytes per model unit
    std::size_t binaries = 0;            ///< C and P columns
};

/// Builds the window model of `order` (a topological order of every op)
/// with the given peak lower bound (bytes) and the order as the incumbent.
/// Returns nullopt, with `why` set, when the model would have more than
/// `max_columns` columns or its numbers are too large to be exact in doubles.
template <class Graph>
std::optional<order_model<Graph>> make_order_model(const Graph& g, const graph_index<Graph>& index,
                                                   const std::vector<typename Graph::id_type>& order, std::size_t lo,
                                                   std::size_t hi, typename Graph::size_type peak_lower,
                                                   std::size_t max_columns, std::string& why) {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    const std::size_t n = order.size();
    const std::size_t W = hi - lo;

    order_model<Graph> out;
    out.lo = lo;
    out.hi = hi;
    const size_type unit = order_model_unit(g);
    out.unit = static_cast<double>(unit);
    {
        // Every live sum is <= the total of all sizes (validate checks it
        // fits); in units it must stay an exact double.
        long double total = 0;
        for (const auto& t : g.tensors()) total += static_cast<long double>(t.bytes / unit);
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto id = static_cast<id_type>(o);
            total += static_cast<long double>(g.workspace_of(id, default_variant(g, id)) / unit);
        }
        if (total > 4503599627370496.0L) {
            why = "sizes too large for exact arithmetic in the MILP";
            return std::nullopt;
        }
    }
    auto units = [&](size_type b) { return static_cast<double>(b / unit); };

    std::vector<std::size_t> pos(g.num_ops(), none);
    for (std::size_t i = 0; i < n; ++i) pos[order[i]] = i;
    std::vector<std::size_t> loc(g.num_ops(), none);
    for (std::size_t i = lo; i < hi; ++i) {
        out.ops.push_back(order[i]);
        loc[order[i]] = i - lo;
    }
    auto in_window = [&](id_type o) { return loc[o] != none; };
    auto ws_of = [&](id_type o) { return g.workspace_of(o, default_variant(g, o)); };

    // Direct predecessors inside the window, then ancestor / descendant
    // counts by bit sets (the window is in topological order).
    std::vector<std::vector<std::size_t>> preds(W);
    for (std::size_t i = 0; i < W; ++i) {
        std::unordered_set<std::size_t> seen;
        for (auto t : g.op(out.ops[i]).inputs) {
            const auto p = index.producer[t];
            if (p != Graph::npos && in_window(p) && seen.insert(loc[p]).second) preds[i].push_back(loc[p]);
        }
    }
    const std::size_t words = (W + 63) / 64;
    std::vector<std::uint64_t> bits(W * words, 0);
    out.asap.resize(W);
    out.alap.resize(W);
    for (std::size_t i = 0; i < W; ++i) {
        auto* row = &bits[i * words];
        for (auto p : preds[i]) {
            const auto* pr = &bits[p * words];
            for (std::size_t w = 0; w < words; ++w) row[w] |= pr[w];
            row[p / 64] |= std::uint64_t{1} << (p % 64);
        }
        std::size_t c = 0;
        for (std::size_t w = 0; w < words; ++w) c += static_cast<std::size_t>(std::popcount(row[w]));
        out.asap[i] = lo + c;
    }
    std::fill(bits.begin(), bits.end(), 0);
    for (std::size_t i = W; i-- > 0;) {
        auto* row = &bits[i * words];
        std::size_t c = 0;
        for (std::size_t w = 0; w < words; ++w) c += static_cast<std::size_t>(std::popcount(row[w]));
        out.alap[i] = hi - 1 - c;
        for (auto p : preds[i]) {
            auto* pr = &bits[p * words];
            for (std::size_t w = 0; w < words; ++w) pr[w] |= row[w];
            pr[i / 64] |= std::uint64_t{1} << (i % 64);
        }
    }
    std::size_t c_count = 0;
    for (std::size_t i = 0; i < W; ++i) c_count += out.alap[i] - out.asap[i] + 1;
    if (c_count > max_columns) {
        why = "the MILP would have more than " + std::to_string(max_columns) + " columns";
        return std::nullopt;
    }

    // Tensors: what each contributes on the window's steps.
    std::vector<char> must(g.num_tensors(), 0);
    for (auto t : g.outputs()) must[t] = 1;
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (g.tensor(static_cast<id_type>(t)).persistent) must[t] = 1;
    enum class kind : std::uint8_t { none, decreasing, keep, read };
    struct tensor_info {
        kind k = kind::none;
        std::size_t p_lo = 0, p_hi = 0; ///< P columns for steps p_lo..p_hi (when k != none)
        std::size_t p_col = 0;
        std::size_t forced_from = 0;    ///< P forced to 1 on steps forced_from..forced_until-1
        std::size_t forced_until = 0;
        bool alive_after = false;       ///< live at step hi whatever the window does
        std::vector<std::size_t> readers; ///< window-local readers
    };
    std::vector<tensor_info> info(g.num_tensors());
    std::vector<double> constant(W, 0.0);
    std::size_t p_count = 0;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto id = static_cast<id_type>(t);
        auto& ti = info[t];
        const auto prod = index.producer[t];
        if (prod != Graph::npos && pos[prod] >= hi) continue; // made after the window
        std::size_t last_out = prod == Graph::npos ? 0 : pos[prod]; // last live step fixed by outside ops
        {
            std::unordered_set<id_type> seen;
            for (auto v : index.consumers[t]) {
                if (!seen.insert(v).second) continue;
                // A variant may read fewer tensors than its op lists; the
                // model runs every op as its default variant.
                const auto& reads = g.reads_of(v, default_variant(g, v));
                if (std::find(reads.begin(), reads.end(), id) == reads.end()) continue;
                if (in_window(v)) ti.readers.push_back(loc[v]);
                else last_out = std::max(last_out, pos[v]);
            }
        }
        if (must[t]) last_out = n; // live past the last step, so never "last used" by a window op
        const double b = units(g.tensor(id).bytes);
        if (prod == Graph::npos || !in_window(prod)) {
            // Live from before the window; only its end can move.
            ti.alive_after = last_out >= hi;
            if (ti.readers.empty() || last_out >= hi) {
                if (b > 0)
                    for (std::size_t s = lo; s < hi && s <= last_out; ++s) constant[s - lo] += b;
                ti.readers.clear();
                continue;
            }
            // last_out < lo here: readers outside the window all come before it.
            ti.k = kind::decreasing;
            ti.p_lo = lo;
            ti.p_hi = 0;
            std::size_t latest_asap = lo;
            for (auto r : ti.readers) {
                ti.p_hi = std::max(ti.p_hi, out.alap[r]);
                latest_asap = std::max(latest_asap, out.asap[r]);
            }
            ti.forced_from = lo;
            ti.forced_until = latest_asap + 1;
        } else {
            const std::size_t p = loc[prod];
            ti.alive_after = last_out >= hi;
            if (!ti.alive_after && ti.readers.empty()) continue; // live on its producer's step only
            ti.p_lo = out.asap[p] + 1;
            ti.forced_from = out.alap[p] + 1; // the producer has run by then
            if (ti.alive_after) {
                ti.k = kind::keep;
                ti.forced_until = hi;
                ti.p_hi = hi - 1;
                ti.readers.clear(); // kept to the end anyway
            } else {
                ti.k = kind::read;
                ti.p_hi = 0;
                std::size_t latest_asap = 0;
                for (auto r : ti.readers) {
                    ti.p_hi = std::max(ti.p_hi, out.alap[r]);
                    latest_asap = std::max(latest_asap, out.asap[r]);
                }
                ti.forced_until = latest_asap + 1;
            }
            if (ti.p_lo > ti.p_hi) {
                ti.k = kind::none;
                continue;
            }
        }
        p_count += ti.p_hi - ti.p_lo + 1;
    }
    if (c_count + p_count > max_columns) {
        why = "the MILP would have more than " + std::to_string(max_columns) + " columns";
        return std::nullopt;
    }

    auto& m = out.model;
    m.sense = objective_sense::minimize;
    out.c_first.resize(W);
    for (std::size_t i = 0; i < W; ++i) {
        out.c_first[i] = m.columns.size();
        const auto& name = g.op(out.ops[i]).name;
        for (std::size_t s = out.asap[i]; s <= out.alap[i]; ++s) m.add_binary("C[" + name + "," + std::to_string(s) + "]");
    }
    auto c_col = [&](std::size_t i, std::size_t s) -> std::size_t {
        return (s < out.asap[i] || s > out.alap[i]) ? none : out.c_first[i] + (s - out.asap[i]);
    };
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        auto& ti = info[t];
        if (ti.k == kind::none) continue;
        ti.p_col = m.columns.size();
        const auto& name = g.tensor(static_cast<id_type>(t)).name;
        for (std::size_t s = ti.p_lo; s <= ti.p_hi; ++s) {
            const bool forced = s >= ti.forced_from && s < ti.forced_until;
            m.add_column("P[" + name + "," + std::to_string(s) + "]", column_kind::binary, forced ? 1.0 : 0.0, 1.0);
        }
    }
    out.binaries = m.columns.size();
    auto p_col = [&](std::size_t t, std::size_t s) -> std::size_t {
        const auto& ti = info[t];
        return (ti.k == kind::none || s < ti.p_lo || s > ti.p_hi) ? none : ti.p_col + (s - ti.p_lo);
    };

    std::vector<std::vector<milp_term>> mem(W);
    // Outputs and workspace on the op's own step.
    for (std::size_t i = 0; i < W; ++i) {
        const auto o = out.ops[i];
        size_type here = ws_of(o);
        for (auto t : g.op(o).outputs) here += g.tensor(t).bytes;
        if (here == 0) continue;
        for (std::size_t s = out.asap[i]; s <= out.alap[i]; ++s) mem[s - lo].push_back({c_col(i, s), units(here)});
    }
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& ti = info[t];
        if (ti.k == kind::none) continue;
        const double b = units(g.tensor(static_cast<id_type>(t)).bytes);
        const auto& name = g.tensor(static_cast<id_type>(t)).name;
        if (b > 0)
            for (std::size_t s = ti.p_lo; s <= ti.p_hi; ++s) mem[s - lo].push_back({p_col(t, s), b});
        // Kept only if made or kept the step before.
        const auto prod = index.producer[t];
        for (std::size_t s = ti.p_lo; s <= ti.p_hi; ++s) {
            std::vector<milp_term> terms{{p_col(t, s), 1.0}};
            if (s > ti.p_lo) terms.push_back({p_col(t, s - 1), -1.0});
            if (ti.k != kind::decreasing) {
                const std::size_t c = c_col(loc[prod], s - 1);
                if (c != none) terms.push_back({c, -1.0});
            } else if (s == ti.p_lo) {
                continue; // live before the window
            }
            const std::string rn = "keep[" + name + "," + std::to_string(s) + "]";
            if (ti.k == kind::keep) m.add_eq(rn, std::move(terms), 0.0);
            else m.add_le(rn, std::move(terms), 0.0);
        }
        // A reader runs only while the tensor is kept.
        for (auto r : ti.readers)
            for (std::size_t s = out.asap[r]; s <= out.alap[r]; ++s) {
                const std::size_t pc = p_col(t, s);
                if (pc == none) continue; // cannot happen: P spans every reader's window
                m.add_le("read[" + g.op(out.ops[r]).name + "," + name + "," + std::to_string(s) + "]",
                         {{c_col(r, s), 1.0}, {pc, -1.0}}, 0.0);
            }
    }
    // In-place sharing (see the file comment).
    for (std::size_t i = 0; i < W; ++i) {
        const auto o = out.ops[i];
        for (auto [x, y] : g.op(o).inplace) {
            const auto& xi = info[x];
            const size_type bx = g.tensor(x).bytes, by = g.tensor(y).bytes;
            if (must[x] || bx < by || x == y || by == 0) continue;
            if (xi.alive_after) continue; // live past the window: never its last use here
            for (std::size_t s = out.asap[i]; s <= out.alap[i]; ++s) {
                const std::size_t z = m.add_column("z[" + g.op(o).name + "," + g.tensor(x).name + "," + std::to_string(s) + "]",
                                                   column_kind::continuous, 0.0, 1.0);
                m.add_le("share_step[" + std::to_string(z) + "]", {{z, 1.0}, {c_col(i, s), -1.0}}, 0.0);
                if (const std::size_t pc = p_col(x, s + 1); pc != none)
                    m.add_le("share_last[" + std::to_string(z) + "]", {{z, 1.0}, {pc, 1.0}}, 1.0);
                mem[s - lo].push_back({z, -units(by)});
            }
        }
    }
    // Each op once; one op per step.
    std::vector<std::vector<milp_term>> per_step(W);
    for (std::size_t i = 0; i < W; ++i) {
        std::vector<milp_term> terms;
        for (std::size_t s = out.asap[i]; s <= out.alap[i]; ++s) {
            terms.push_back({c_col(i, s), 1.0});
            per_step[s - lo].push_back({c_col(i, s), 1.0});
        }
        m.add_eq("once[" + g.op(out.ops[i]).name + "]", std::move(terms), 1.0);
    }
    for (std::size_t s = 0; s < W; ++s) m.add_eq("step[" + std::to_string(lo + s) + "]", std::move(per_step[s]), 1.0);
    // Aggregated precedence: step(v) >= step(u) + 1 for each window edge u -> v.
    for (std::size_t v = 0; v < W; ++v)
        for (auto u : preds[v]) {
            std::vector<milp_term> terms;
            for (std::size_t s = out.asap[v]; s <= out.alap[v]; ++s)
                if (s > lo) terms.push_back({c_col(v, s), static_cast<double>(s - lo)});
            for (std::size_t s = out.asap[u]; s <= out.alap[u]; ++s)
                if (s > lo) terms.push_back({c_col(u, s), -static_cast<double>(s - lo)});
            m.add_ge("before[" + g.op(out.ops[u]).name + "," + g.op(out.ops[v]).name + "]", std::move(terms), 1.0);
        }
    // peak >= live bytes at every step.
    out.peak_column = m.add_column("peak", column_kind::integer, std::ceil(units(peak_lower) - 1e-9), milp_infinity, 1.0);
    for (std::size_t s = 0; s < W; ++s) {
        auto terms = std::move(mem[s]);
        for (auto& t : terms) t.coefficient = -t.coefficient;
        terms.push_back({out.peak_column, 1.0});
        m.add_ge("memory[" + std::to_string(lo + s) + "]", std::move(terms), constant[s]);
    }

    // Incumbent: the given order, with every tensor kept exactly as long as
    // liveness keeps it.
    auto& x = m.incumbent;
    x.assign(m.columns.size(), 0.0);
    for (std::size_t i = 0; i < W; ++i) x[c_col(i, lo + i)] = 1.0;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& ti = info[t];
        if (ti.k == kind::none) continue;
        std::size_t first = ti.k == kind::decreasing ? lo : pos[index.producer[t]] + 1;
        std::size_t last = ti.p_hi;
        if (ti.k != kind::keep) {
            last = 0;
            for (auto r : ti.readers) last = std::max(last, lo + r);
        }
        for (std::size_t s = std::max(first, ti.p_lo); s <= last && s <= ti.p_hi; ++s) x[p_col(t, s)] = 1.0;
    }
    // z columns follow their rows: set each to the largest value its rows allow.
    {
        std::vector<double> z_cap(m.columns.size(), 1.0);
        std::vector<char> is_z(m.columns.size(), 0);
        for (std::size_t j = out.binaries; j < m.columns.size(); ++j)
            if (j != out.peak_column) is_z[j] = 1;
        for (const auto& row : m.rows) {
            if (row.terms.empty() || !is_z[row.terms.front().column] || row.terms.size() != 2) continue;
            const auto z = row.terms.front().column;
            const auto& other = row.terms.back();
            // z - C <= 0  or  z + P <= 1
            const double cap = other.coefficient < 0 ? x[other.column] : 1.0 - x[other.column];
            z_cap[z] = std::min(z_cap[z], cap);
        }
        for (std::size_t j = 0; j < m.columns.size(); ++j)
            if (is_z[j]) x[j] = std::max(0.0, z_cap[j]);
    }
    double peak = std::ceil(units(peak_lower) - 1e-9);
    for (std::size_t s = 0; s < W; ++s) {
        const auto& row = m.rows[m.rows.size() - W + s];
        double live = row.lower;
        for (const auto& t : row.terms)
            if (t.column != out.peak_column) live -= t.coefficient * x[t.column];
        peak = std::max(peak, live);
    }
    x[out.peak_column] = peak;
    return out;
}

/// The window's order read back from a solution: each op at the step whose
/// C column is largest, ties and any precedence slip repaired by a
/// topological pass that follows those steps.
template <class Graph>
std::vector<typename Graph::id_type> order_from_solution(const Graph& g, const graph_index<Graph>& index,
                                                         const std::vector<typename Graph::id_type>& order,
                                                         const order_model<Graph>& om,
                                                         const std::vector<double>& values) {
    using id_type = typename Graph::id_type;
    const std::size_t W = om.ops.size();
    std::vector<double> at(W, 0.0);
    for (std::size_t i = 0; i < W; ++i) {
        double best = -1;
        for (std::size_t s = om.asap[i]; s <= om.alap[i]; ++s) {
            const double v = values[om.c_first[i] + (s - om.asap[i])];
            if (v > best + 1e-9) {
                best = v;
                at[i] = static_cast<double>(s);
            }
        }
    }
    std::vector<std::size_t> loc(g.num_ops(), static_cast<std::size_t>(-1));
    for (std::size_t i = 0; i < W; ++i) loc[om.ops[i]] = i;
    std::vector<std::size_t> preds_left(W, 0);
    std::vector<std::vector<std::size_t>> succ(W);
    for (std::size_t i = 0; i < W; ++i) {
        std::unordered_set<std::size_t> seen;
        for (auto t : g.op(om.ops[i]).inputs) {
            const auto p = index.producer[t];
            if (p != Graph::npos && loc[p] != static_cast<std::size_t>(-1) && seen.insert(loc[p]).second) {
                ++preds_left[i];
                succ[loc[p]].push_back(i);
            }
        }
    }
    std::vector<id_type> result(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(om.lo));
    std::vector<char> done(W, 0);
    for (std::size_t k = 0; k < W; ++k) {
        std::size_t pick = W;
        for (std::size_t i = 0; i < W; ++i)
            if (!done[i] && preds_left[i] == 0 && (pick == W || at[i] < at[pick])) pick = i;
        done[pick] = 1;
        result.push_back(om.ops[pick]);
        for (auto v : succ[pick]) --preds_left[v];
    }
    result.insert(result.end(), order.begin() + static_cast<std::ptrdiff_t>(om.hi), order.end());
    return result;
}

} // namespace memplan::detail
