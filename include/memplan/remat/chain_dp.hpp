// Optimal checkpointing of a chain (Beaumont, Eyraud-Dubois, Herrmann, Joly,
// Shilova, "Optimal checkpointing for heterogeneous chains", 2019/2021 —
// Rotor): the forward part, cut at its articulation points, is a chain of
// segments; a dynamic program over (first segment, last segment, memory in
// slots) picks, for every sub-chain, either to run its first segment keeping
// everything its backward needs, or to run ahead keeping only a checkpoint
// and come back later — recursively, so a segment may run many times. The
// planner emits the program's exact sequence of steps (forward segments, some
// recomputed several times, and each backward op once), then searches the
// program's memory limit so that the arena after allocation fits the budget.
#pragma once

#include <memplan/remat/detail/segments.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

namespace detail {

/// A further way to run one segment with its backward (block_dp): its
/// forward with chosen variants, keeping some of its tensors, then its
/// backward part with the recomputations that this needs, all within the
/// segment.
struct chain_option {
    double cost = 0;      ///< forward run + backward part, less the cost of the default backward part
    std::size_t abar = 0; ///< what the forward run leaves for the backward (the output included)
    std::size_t ovf = 0;  ///< peak of the forward run, abar included, its input not
    std::size_t ovb = 0;  ///< peak of the backward part beyond abar (gradients included)
};

/// Rotor's chain in memory slots. Segments are numbered 1..L; index 0 of
/// every vector is unused, except `a[0]`, the chain's input (always 0: the
/// data is a graph input, present whatever the schedule does).
struct chain_model {
    std::vector<double> f;            ///< cost of a forward run that keeps what the backward needs
    std::vector<double> f_n;          ///< cost of a forward run that makes only the output
    std::vector<double> f_b;          ///< cost of a forward run that makes only what its own backward reads
    std::vector<std::size_t> a;       ///< the output (checkpoint); a[L] unused
    std::vector<std::size_t> abar;    ///< what a keeping run leaves for the backward (includes a[i])
    std::vector<std::size_t> ovf_n;   ///< peak of a forward-only run, its output included, its input not
    std::vector<std::size_t> ovf_all; ///< peak of a keeping run, abar included, its input not
    std::vector<std::size_t> abar_b;  ///< what a run for the backward only leaves (no output)
    std::vector<std::size_t> ovf_b;   ///< peak of that run
    std::vector<std::size_t> ovb;     ///< peak of the backward beyond stored forward tensors (gradients included)
    std::vector<std::size_t> d;       ///< gradient bytes alive while segment i waits for its backward; d[L] = 0
    std::vector<std::vector<chain_option>> options; ///< per segment: further ways to run it (may be empty)

    std::size_t length() const noexcept { return f.empty() ? 0 : f.size() - 1; }
    void resize(std::size_t L) {
        for (auto* v : {&f, &f_n, &f_b}) v->assign(L + 1, 0.0);
        for (auto* v : {&a, &abar, &ovf_n, &ovf_all, &abar_b, &ovf_b, &ovb, &d}) v->assign(L + 1, 0);
        options.assign(L + 1, {});
    }
};

/// forward_none: make only the output; forward_all: keep what the backward
/// needs and the output; forward_back: keep what the backward needs, right
/// before it; backward: the segment's backward ops.
enum class chain_step_kind : std::uint8_t { forward_none, forward_all, forward_back, backward };

struct chain_step {
    static constexpr std::size_t builtin = std::numeric_limits<std::size_t>::max();
    chain_step_kind kind = chain_step_kind::forward_all;
    std::size_t segment = 0; ///< 1..L
    /// forward_all and backward: index in chain_model::options[segment] of
    /// the way the segment runs, or `builtin` (default variants, keep all).
    std::size_t option = builtin;
};

/// The dynamic program of Rotor over a chain_model, for every memory limit
/// 0..max_memory slots at once. opt(s, t, m): the least forward cost to run
/// the backward of segments s..t with the input of s held by the caller (not
/// counted in m) and m slots for everything else.
class chain_solver {
public:
    static constexpr double infinity = std::numeric_limits<double>::infinity();

    /// Stops at `until` (its time grows with the cube of the chain's
    /// length): then complete() is false and nothing else may be asked.
    chain_solver(const chain_model& model, std::size_t max_memory, const memplan::deadline& until = {})
        : model_(model), L_(model.length()), M_(max_memory) {
        const std::size_t pairs = L_ * (L_ + 1) / 2;
        cost_.assign(pairs * (M_ + 1), infinity);
        choice_.assign(pairs * (M_ + 1), 0);
        first_.assign(pairs, M_ + 1);
        const auto& x = model_;
        for (std::size_t len = 0; len < L_; ++len) {
            if (until.expired()) {
                complete_ = false;
                return;
            }
            for (std::size_t s = 1; s + len <= L_; ++s) {
                const std::size_t t = s + len;
                double* row = &cost_[at(s, t, 0)];
                std::uint32_t* pick = &choice_[at(s, t, 0)];
                // Run s keeping everything, then the rest; for s == t, also
                // keeping only what the backward reads.
                const std::size_t need_all = std::max(x.d[t] + x.ovf_all[s], x.abar[s] + x.ovb[s]);
                for (std::size_t m = need_all; m <= M_; ++m) {
                    const double rest = s == t ? 0.0 : cost(s + 1, t, m - x.abar[s]);
                    if (rest == infinity) continue;
                    row[m] = x.f[s] + rest;
                    pick[m] = keep_all_choice;
                }
                for (std::size_t j = 0; j < x.options[s].size(); ++j) {
                    const auto& w = x.options[s][j];
                    const std::size_t need = std::max(x.d[t] + w.ovf, w.abar + w.ovb);
                    for (std::size_t m = need; m <= M_; ++m) {
                        const double rest = s == t ? 0.0 : cost(s + 1, t, m - w.abar);
                        if (rest == infinity) continue;
                        const double c = w.cost + rest;
                        if (c < row[m] - 1e-12 * std::max(1.0, std::abs(c))) {
                            row[m] = c;
                            pick[m] = option_flag | static_cast<std::uint32_t>(j);
                        }
                    }
                }
                if (s == t) {
                    const std::size_t need_back = std::max(x.d[t] + x.ovf_b[s], x.abar_b[s] + x.ovb[s]);
                    for (std::size_t m = need_back; m <= M_; ++m)
                        if (x.f_b[s] <= row[m]) {
                            row[m] = x.f_b[s];
                            pick[m] = back_choice;
                        }
                }
                // Run s..k-1 keeping only the last output, solve k..t, come back.
                std::size_t fwd_need = 0;
                double fwd_cost = 0;
                for (std::size_t k = s + 1; k <= t; ++k) {
                    const std::size_t j = k - 1; // the segment run last before the checkpoint
                    fwd_need = std::max(fwd_need, x.d[t] + (j > s ? x.a[j - 1] : 0) + x.ovf_n[j]);
                    fwd_cost += x.f_n[j];
                    // Both parts cost less with more memory, so each is finite
                    // from its first finite limit on: start there.
                    const double* right_row = &cost_[at(k, t, 0)];
                    const double* left_row = &cost_[at(s, j, 0)];
                    const std::size_t from = std::max({fwd_need, x.a[j], first_of(k, t) + x.a[j], first_of(s, j)});
                    // An infinite part makes c infinite, which never wins the test below.
                    for (std::size_t m = from; m <= M_; ++m) {
                        const double c = fwd_cost + right_row[m - x.a[j]] + left_row[m];
                        if (c < row[m] - 1e-12 * std::max(1.0, c)) {
                            row[m] = c;
                            pick[m] = static_cast<std::uint32_t>(k);
                        }
                    }
                }
                std::size_t first = 0;
                while (first <= M_ && row[first] == infinity) ++first;
                first_[at(s, t, 0) / (M_ + 1)] = first;
            }
        }
    }

    std::size_t length() const noexcept { return L_; }
    std::size_t max_memory() const noexcept { return M_; }
    /// Whether the program ran to the end (before its deadline).
    bool complete() const noexcept { return complete_; }

    /// opt(1, L, m); infinity when nothing fits in m slots.
    double cost(std::size_t m) const { return L_ == 0 ? 0.0 : cost(1, L_, std::min(m, M_)); }
    double cost(std::size_t s, std::size_t t, std::size_t m) const { return cost_[at(s, t, std::min(m, M_))]; }

    /// The smallest memory limit with a solution, or max_memory() + 1.
    std::size_t min_memory() const {
        for (std::size_t m = 0; m <= M_; ++m)
            if (cost(m) != infinity) return m;
        return M_ + 1;
    }

    /// The optimal sequence of segment runs for m slots (cost(m) finite).
    std::vector<chain_step> sequence(std::size_t m) const {
        std::vector<chain_step> out;
        if (L_ > 0) emit(1, L_, std::min(m, M_), out);
        return out;
    }

private:
    static constexpr std::uint32_t keep_all_choice = 0;
    static constexpr std::uint32_t back_choice = 1; // only for s == t; checkpoints are > s >= 1
    static constexpr std::uint32_t option_flag = 1u << 31; // | j: options[s][j], then the rest

    /// The smallest memory limit at which pair (s, t) has a finite cost (M_ + 1: none).
    std::size_t first_of(std::size_t s, std::size_t t) const { return first_[at(s, t, 0) / (M_ + 1)]; }

    std::size_t at(std::size_t s, std::size_t t, std::size_t m) const {
        // Pairs (s, t) with s <= t, grouped by s.
        const std::size_t before = (s - 1) * L_ - (s - 1) * (s - 2) / 2;
        return (before + (t - s)) * (M_ + 1) + m;
    }

    void emit(std::size_t s, std::size_t t, std::size_t m, std::vector<chain_step>& out) const {
        const auto k = choice_[at(s, t, m)];
        if (k & option_flag) {
            const std::size_t j = k & ~option_flag;
            out.push_back({chain_step_kind::forward_all, s, j});
            if (s < t) emit(s + 1, t, m - model_.options[s][j].abar, out);
            out.push_back({chain_step_kind::backward, s, j});
            return;
        }
        if (k == back_choice) {
            out.push_back({chain_step_kind::forward_back, s});
            out.push_back({chain_step_kind::backward, s});
            return;
        }
        if (s == t || k == keep_all_choice) {
            out.push_back({chain_step_kind::forward_all, s});
            if (s < t) emit(s + 1, t, m - model_.abar[s], out);
            out.push_back({chain_step_kind::backward, s});
            return;
        }
        for (std::size_t j = s; j < k; ++j) out.push_back({chain_step_kind::forward_none, j});
        emit(k, t, m - model_.a[k - 1], out);
        emit(s, k - 1, m, out);
    }

    chain_model model_;
    std::size_t L_ = 0, M_ = 0;
    bool complete_ = true;
    std::vector<double> cost_;
    std::vector<std::size_t> first_; ///< per pair: first_of
    std::vector<std::uint32_t> choice_;
};

/// The chain of a graph: its segments, what each runs and reads, and the
/// model figures in bytes (before rounding to slots).
template <class Graph>
struct graph_chain {
    using id_type = typename Graph::id_type;
    forward_segments<Graph> seg;
    std::vector<id_type> variant;                  ///< per op: the variant Rotor's ways of running a segment use
    std::vector<std::vector<id_type>> forward_all; ///< per segment: its forward ops
    std::vector<std::vector<id_type>> forward_out; ///< per segment: the forward ops its output needs
    std::vector<std::vector<id_type>> forward_back; ///< per segment: the forward ops its backward reads need
    std::vector<std::vector<id_type>> backward;    ///< per segment: its backward-part ops, in base order
    chain_model bytes;                             ///< figures in bytes (model.length() == segments)
    /// Per segment, per option of `bytes.options[segment + 1]`: the steps of
    /// its forward run and of its backward part.
    struct option_steps {
        basic_schedule<id_type> forward, backward;
    };
    std::vector<std::vector<option_steps>> option_runs;

    explicit graph_chain(const remat_context<Graph>& ctx) : graph_chain(ctx, segment_forward(ctx)) {}

    /// The chain of `segments` (articulation points of `ctx`'s forward part,
    /// all of them or some), every op running `variants` (empty: the defaults).
    graph_chain(const remat_context<Graph>& ctx, forward_segments<Graph> segments, std::vector<id_type> variants = {})
        : seg(std::move(segments)), variant(std::move(variants)) {
        const Graph& g = ctx.graph();
        const auto& order = ctx.base_order();
        const std::size_t B = ctx.boundary(), n = order.size();
        const std::size_t L = seg.size();
        if (variant.empty()) variant = ctx.keep_all().variant;
        forward_all.resize(L);
        forward_out.resize(L);
        forward_back.resize(L);
        backward.resize(L);
        bytes.resize(L);
        std::vector<std::size_t> pos(g.num_ops(), 0);
        for (std::size_t i = 0; i < n; ++i) pos[order[i]] = i;
        constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
        std::vector<std::size_t> seg_of(g.num_tensors(), none); // segment a forward tensor belongs to
        std::vector<std::size_t> cut_of(g.num_tensors(), none);  // segment a cut tensor ends
        for (std::size_t i = 0; i + 1 < L; ++i) cut_of[seg.cut[i]] = i;
        std::vector<char> is_output(g.num_tensors(), 0);
        for (auto t : g.outputs()) is_output[t] = 1;
        auto size = [&](id_type t) { return static_cast<std::size_t>(g.tensor(t).bytes); };

        for (std::size_t i = 0; i < L; ++i)
            for (std::size_t p = seg.begin(i); p < seg.end[i]; ++p) {
                forward_all[i].push_back(order[p]);
                for (auto t : g.op(order[p]).outputs) seg_of[t] = i;
            }

        // Backward groups: walking the backward part in base order, an op joins
        // the lowest segment whose forward tensors it or an op before it
        // reads; a cut tensor counts as the input of the segment after it.
        std::vector<std::size_t> group(n, 0);
        std::vector<std::vector<char>> read_by_group(L);
        {
            std::size_t low = L - 1;
            for (std::size_t p = B; p < n; ++p) {
                for (auto t : g.op(order[p]).inputs) {
                    if (seg_of[t] == none || g.tensor(t).persistent) continue;
                    const std::size_t s = cut_of[t] != none ? cut_of[t] + 1 : seg_of[t];
                    low = std::min(low, s);
                }
                group[p] = low;
                backward[low].push_back(order[p]);
            }
            for (std::size_t i = 0; i < L; ++i) {
                read_by_group[i].assign(g.num_tensors(), 0);
                for (auto o : backward[i])
                    for (auto t : g.op(o).inputs)
                        if (seg_of[t] == i) read_by_group[i][t] = 1;
            }
        }

        for (std::size_t i = 0; i < L; ++i) {
            const bool last = i + 1 == L;
            // The ops that make what the output needs, and what the backward reads.
            auto ancestors = [&](std::vector<char> need) {
                std::vector<id_type> ops;
                for (auto it = forward_all[i].rbegin(); it != forward_all[i].rend(); ++it) {
                    const auto& op = g.op(*it);
                    bool needed = false;
                    for (auto t : op.outputs) needed = needed || need[t] || (last && is_output[t]);
                    if (!needed) continue;
                    ops.push_back(*it);
                    for (auto t : op.inputs) need[t] = 1;
                }
                return std::vector<id_type>(ops.rbegin(), ops.rend());
            };
            if (!last) {
                std::vector<char> need(g.num_tensors(), 0);
                need[seg.cut[i]] = 1;
                forward_out[i] = ancestors(std::move(need));
            } else {
                forward_out[i] = forward_all[i];
            }
            forward_back[i] = ancestors(read_by_group[i]);
            const std::size_t k = i + 1; // model index
            for (auto o : forward_all[i]) bytes.f[k] += g.cost_of(o, variant[o]);
            for (auto o : forward_out[i]) bytes.f_n[k] += g.cost_of(o, variant[o]);
            for (auto o : forward_back[i]) bytes.f_b[k] += g.cost_of(o, variant[o]);
            bytes.a[k] = last ? 0 : size(seg.cut[i]);
            for (auto o : forward_all[i])
                for (auto t : g.op(o).outputs)
                    if (ctx.droppable(t) || (!last && t == seg.cut[i])) bytes.abar[k] += size(t);
            for (auto o : forward_back[i])
                for (auto t : g.op(o).outputs)
                    if (ctx.droppable(t)) bytes.abar_b[k] += size(t);
            const id_type out = last ? Graph::npos : seg.cut[i];
            bytes.ovf_all[k] = forward_peak(ctx, forward_all[i], out, true, is_output);
            bytes.ovf_n[k] = forward_peak(ctx, forward_out[i], out, false, is_output);
            bytes.ovf_b[k] = forward_peak(ctx, forward_back[i], Graph::npos, true, is_output);
        }

        // Bytes of backward-made tensors live at each backward position.
        std::vector<std::size_t> add(n + 1, 0), sub(n + 1, 0);
        for (std::size_t t = 0; t < g.num_tensors(); ++t) {
            const auto p = ctx.index().producer[t];
            if (p == Graph::npos || pos[p] < B || g.tensor(static_cast<id_type>(t)).persistent) continue;
            std::size_t last = is_output[t] ? n - 1 : pos[p];
            for (auto c : ctx.index().consumers[t]) last = std::max(last, pos[c]);
            add[pos[p]] += size(static_cast<id_type>(t));
            sub[last + 1] += size(static_cast<id_type>(t));
        }
        std::vector<std::size_t> live(n + 1, 0); // live[p]: during step p; live[n]: after the last
        std::size_t cur = 0;
        for (std::size_t p = 0; p <= n; ++p) {
            cur += add[p];
            cur -= sub[p];
            live[p] = cur;
        }
        // Gradients waiting across the gap just before step p: live during
        // p - 1 and still read at or after p.
        std::vector<std::size_t> across(n + 1, 0);
        for (std::size_t p = B; p <= n; ++p) across[p] = p == 0 ? 0 : live[p - 1] - sub[p];
        for (std::size_t i = 0; i < L; ++i) {
            std::size_t start = n; // first backward position of group <= i
            for (std::size_t p = B; p < n; ++p)
                if (group[p] <= i) {
                    start = p;
                    break;
                }
            const std::size_t k = i + 1;
            bytes.d[k] = i + 1 < L ? across[start] : 0;
            std::size_t peak = bytes.d[k];
            for (std::size_t p = B; p < n; ++p)
                if (group[p] == i)
                    peak = std::max(peak, live[p] + static_cast<std::size_t>(g.workspace_of(order[p], variant[order[p]])));
            bytes.ovb[k] = peak;
        }
    }

    /// Peak bytes of a forward run of `ops` (the segment's input not counted):
    /// kept tensors (droppable ones when `keep`, the output always) live to
    /// the end, others until their last read within the run.
    std::size_t forward_peak(const remat_context<Graph>& ctx, const std::vector<id_type>& ops, id_type out, bool keep,
                             const std::vector<char>& is_output) const {
        const Graph& g = ctx.graph();
        const std::size_t n = ops.size();
        std::vector<std::size_t> add(n + 1, 0), sub(n + 1, 0);
        std::vector<std::size_t> made_at(g.num_tensors(), std::numeric_limits<std::size_t>::max());
        for (std::size_t i = 0; i < n; ++i)
            for (auto t : g.op(ops[i]).outputs) made_at[t] = i;
        std::vector<std::size_t> last_read(g.num_tensors(), 0);
        for (std::size_t i = 0; i < n; ++i)
            for (auto t : g.op(ops[i]).inputs)
                if (made_at[t] != std::numeric_limits<std::size_t>::max()) last_read[t] = i;
        for (std::size_t i = 0; i < n; ++i)
            for (auto t : g.op(ops[i]).outputs) {
                const bool kept = t == out || is_output[t] || (keep && ctx.droppable(t));
                const std::size_t last = kept ? n - 1 : std::max(i, last_read[t]);
                add[i] += static_cast<std::size_t>(g.tensor(t).bytes);
                sub[last + 1] += static_cast<std::size_t>(g.tensor(t).bytes);
            }
        std::size_t cur = 0, peak = 0;
        for (std::size_t i = 0; i < n; ++i) {
            cur += add[i];
            peak = std::max(peak, cur + static_cast<std::size_t>(g.workspace_of(ops[i], variant[ops[i]])));
            cur -= sub[i + 1];
        }
        return peak;
    }

    /// The model in slots of `slot` bytes (sizes rounded up).
    chain_model in_slots(std::size_t slot) const {
        chain_model m = bytes;
        auto up = [slot](std::size_t x) { return (x + slot - 1) / slot; };
        for (auto* v : {&m.a, &m.abar, &m.ovf_n, &m.ovf_all, &m.abar_b, &m.ovf_b, &m.ovb, &m.d})
            for (auto& x : *v) x = up(x);
        for (auto& seg_options : m.options)
            for (auto& w : seg_options) {
                w.abar = up(w.abar);
                w.ovf = up(w.ovf);
                w.ovb = up(w.ovb);
            }
        return m;
    }

    /// Memory the model needs when every segment keeps everything (or, with
    /// options, more than any way of running the chain needs: each segment
    /// keeping the most any of its ways keeps, peaking the most).
    static std::size_t keep_all_need(const chain_model& m) {
        const std::size_t L = m.length();
        std::size_t cum = 0, peak = 0;
        for (std::size_t i = 1; i <= L; ++i) {
            std::size_t keep = m.abar[i], fwd = m.ovf_all[i], back = m.abar[i] + m.ovb[i];
            if (i < m.options.size())
                for (const auto& w : m.options[i]) {
                    keep = std::max(keep, w.abar);
                    fwd = std::max(fwd, w.ovf);
                    back = std::max(back, w.abar + w.ovb);
                }
            peak = std::max(peak, cum + m.d[L] + fwd);
            peak = std::max(peak, cum + back);
            cum += keep;
        }
        return peak;
    }

    /// The schedule of a sequence of segment runs.
    basic_schedule<id_type> schedule_of(const std::vector<chain_step>& steps) const {
        basic_schedule<id_type> s;
        std::vector<char> ran(forward_all.size(), 0);
        for (const auto& st : steps) {
            const std::size_t i = st.segment - 1;
            // The first run of a segment runs all of it: every op must run once,
            // and the store-all cost counts it anyway.
            if (st.option != chain_step::builtin) { // an option's forward runs every forward op of the segment
                const auto& run = option_runs[i][st.option];
                const auto& steps = st.kind == chain_step_kind::backward ? run.backward : run.forward;
                s.insert(s.end(), steps.begin(), steps.end());
                if (st.kind != chain_step_kind::backward) ran[i] = 1;
                continue;
            }
            const bool first = st.kind != chain_step_kind::backward && !ran[i];
            if (st.kind != chain_step_kind::backward) ran[i] = 1;
            const auto& ops = first || st.kind == chain_step_kind::forward_all ? forward_all[i]
                              : st.kind == chain_step_kind::forward_none       ? forward_out[i]
                              : st.kind == chain_step_kind::forward_back       ? forward_back[i]
                                                                               : backward[i];
            for (auto o : ops) s.push_back({o, variant[o]});
        }
        return s;
    }
};

} // namespace detail

namespace detail {

/// The cheapest plan of `chain`'s dynamic program whose placed arena fits
/// `opt.budget`: the program's memory limit searched by bisection, at
/// `slots` slots and then finer around where the arena crosses the budget
/// (`zoom_share` of the time: the finer pass starts only before it is
/// spent), and, when no limit fits, the exact placement of the smallest plan
/// with `exact_share` of what is left. The program itself stops at the
/// deadline (then there is no plan) unless `program_stops_at_deadline` is
/// false.
template <class Graph>
remat_result_of<Graph>
plan_on_chain(const remat_context<Graph>& ctx, const remat_options& opt, const graph_chain<Graph>& chain,
              std::size_t slots, double zoom_share, double exact_share, std::string_view name,
              bool program_stops_at_deadline = true) {
    const stopwatch watch;
    using planned_type = planned_of<Graph>;
    remat_result_of<Graph> out;
    out.planner = std::string(name);
    const Graph& g = ctx.graph();
    const memplan::deadline until = opt.time_limit.from_now();
    const memplan::deadline zoom_by = until.share(zoom_share);
    const std::size_t S = std::max<std::size_t>(slots, 8);

    planned_type best, smallest;
    double best_cost = 0;
    bool have_best = false, have_smallest = false;
    std::size_t evaluations = 0;
    // Places the program's plan for m slots; remembers the cheapest that
    // fits and the smallest seen.
    auto evaluate = [&](const chain_solver& dp, std::size_t m) {
        ++evaluations;
        const auto s = chain.schedule_of(dp.sequence(m));
        auto planned = place_within(g, s, opt.budget, opt.alignment, memplan::deadline::passed());
        if (!has_solution(planned.status)) return false;
        const double cost = schedule_cost(g, s);
        const bool fits = planned.plan.arena_bytes <= opt.budget;
        if (fits && (!have_best || cost < best_cost ||
                     (cost == best_cost && planned.plan.arena_bytes < best.plan.arena_bytes))) {
            best = planned;
            best_cost = cost;
            have_best = true;
        }
        if (!have_smallest || planned.plan.arena_bytes < smallest.plan.arena_bytes) {
            smallest = std::move(planned);
            have_smallest = true;
        }
        return fits;
    };

    // Pass 1 covers everything up to keeping all; pass 2 zooms in on the
    // limit where the arena crosses the budget, for a finer resolution.
    std::size_t range = std::max<std::size_t>(graph_chain<Graph>::keep_all_need(chain.bytes), 1);
    for (int pass = 0; pass < 2; ++pass) {
        if (pass > 0 && zoom_by.expired()) break;
        const std::size_t slot = std::max<std::size_t>((range + S - 1) / S, 1);
        const auto model = chain.in_slots(slot);
        const std::size_t top = graph_chain<Graph>::keep_all_need(model);
        const chain_solver dp(model, top, program_stops_at_deadline ? until : memplan::deadline{});
        if (!dp.complete()) break;
        std::size_t lo = dp.min_memory(), hi = top;
        if (lo > top) break;
        if (evaluate(dp, hi)) break; // the most memory the chain can use fits
        if (!evaluate(dp, lo)) {
            if (pass == 0) break;
            continue;
        }
        while (hi - lo > 1 && !until.expired()) {
            const std::size_t mid = lo + (hi - lo) / 2;
            (evaluate(dp, mid) ? lo : hi) = mid;
        }
        range = std::min(range, (hi + 1) * slot);
        if (range <= S) break; // already byte-exact
    }
    // When no limit fits, the exact placement may close the gap left by
    // the heuristics on the smallest plan.
    if (!have_best && have_smallest && smallest.bound <= opt.budget) {
        if (until.remaining() > 0.5) {
            auto tight = place_within(g, smallest.plan.steps, opt.budget, opt.alignment, until.share(exact_share));
            if (has_solution(tight.status) && tight.plan.arena_bytes <= opt.budget) {
                best_cost = schedule_cost(g, tight.plan.steps);
                best = std::move(tight);
                have_best = true;
            }
        }
    }

    if (have_best) {
        finish_remat_result(ctx, opt, std::move(best), out);
        out.status = status::feasible;
        out.message = std::to_string(chain.seg.size()) + " segments, " + std::to_string(evaluations) +
                      " memory limits tried";
    } else {
        std::uint64_t arena = 0;
        if (have_smallest) {
            arena = smallest.plan.arena_bytes;
            finish_remat_result(ctx, opt, std::move(smallest), out);
        }
        no_plan_within_budget(ctx, opt, out, name);
        if (have_smallest) out.message += "; the chain's smallest plan needs " + std::to_string(arena) + " bytes";
    }
    out.seconds = watch.seconds();
    return out;
}

} // namespace detail

/// Rotor's optimal chain checkpointing, with the memory limit of its dynamic
/// program searched so that the placed arena fits the budget.
struct chain_dp : remat_planner<chain_dp> {
    static constexpr std::string_view name = "chain_dp";
    std::size_t slots = 500; ///< memory discretisation of the dynamic program
    /// The finer second pass runs only while this share of the time is not spent.
    static constexpr double first_pass_share = 0.5;

    using remat_planner<chain_dp>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        const detail::graph_chain<Graph> chain(ctx);
        auto r = detail::plan_on_chain(ctx, opt, chain, slots, first_pass_share, exact_share, name);
        r.seconds = watch.seconds();
        return r;
    }
};

} // namespace memplan
