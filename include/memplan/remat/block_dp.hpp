// Rematerialization by blocks, composed (the design of Rockmate, Zhao et al.,
// ICML 2023: blocks solved on their own at several memory levels, then
// composed by Rotor's chain program). The forward part is cut at its
// articulation points into segments (remat/detail/segments.hpp); each
// segment with its backward group is a small training graph of its own (a
// block), which `joint` solves at a few memory levels, choosing what to keep,
// what to recompute inside the block and which variant each op runs. Every
// plan found becomes an option of the segment in the chain program of
// chain_dp.hpp, next to Rotor's own ways of running it (keep everything,
// keep only the output and come back later), so the program picks per
// segment either a block plan or multi-level recomputation of the whole
// segment. Identical blocks (equal but for names: a ResNet stage's repeated
// bottlenecks) are solved once. Each block's figures are exact for its own
// schedule; the composed schedule is placed and checked like any other, so
// the program's model only steers the search, it never decides validity.
#pragma once

#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/liveness.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

namespace detail {

/// One segment with its backward group as a training graph of its own. Op
/// k of `sub` is op `ops[k]` of the graph, tensor j of `sub` is
/// `tensors[j]`; tensors made outside the block are inputs of `sub`, and
/// tensors the block makes that are read outside it (or are outputs of the
/// graph) are outputs of `sub`.
template <class Graph>
struct remat_block {
    using id_type = typename Graph::id_type;
    std::vector<id_type> ops;
    std::vector<id_type> tensors;
    std::size_t forward = 0; ///< ops[0, forward) are the segment's forward ops
    Graph sub;
    /// Equal for blocks that differ only in names (same structure, sizes,
    /// costs and variants): their plans carry over by position.
    std::string signature;
};

template <class T>
void append_bits(std::string& s, T x) {
    s.append(reinterpret_cast<const char*>(&x), sizeof x);
}

/// The block of forward ops `fwd` and backward-part ops `bwd` of `ctx`'s
/// graph, both in base order.
template <class Graph>
remat_block<Graph> extract_block(const remat_context<Graph>& ctx, const std::vector<typename Graph::id_type>& fwd,
                                 const std::vector<typename Graph::id_type>& bwd) {
    using id_type = typename Graph::id_type;
    const Graph& g = ctx.graph();
    remat_block<Graph> b;
    b.ops = fwd;
    b.ops.insert(b.ops.end(), bwd.begin(), bwd.end());
    b.forward = fwd.size();
    std::vector<char> in_block(g.num_ops(), 0);
    for (auto o : b.ops) in_block[o] = 1;
    std::vector<id_type> local(g.num_tensors(), Graph::npos);
    auto map = [&](id_type t) {
        if (local[t] == Graph::npos) {
            local[t] = static_cast<id_type>(b.tensors.size());
            b.tensors.push_back(t);
        }
        return local[t];
    };
    for (auto o : b.ops) {
        for (auto t : g.op(o).inputs) map(t);
        for (auto t : g.op(o).outputs) map(t);
    }
    b.sub = Graph(g.name() + "/block");
    b.sub.set_costs_from(g.cost_unit(), g.cost_model());
    std::vector<char> is_output(g.num_tensors(), 0);
    for (auto t : g.outputs()) is_output[t] = 1;
    std::string& sig = b.signature;
    for (auto t : b.tensors) {
        const auto& x = g.tensor(t);
        b.sub.add_tensor(x.name, x.bytes, x.persistent);
        const auto p = ctx.index().producer[t];
        append_bits(sig, x.bytes);
        append_bits(sig, static_cast<char>(x.persistent));
        append_bits(sig, static_cast<char>(p != Graph::npos && in_block[p]));
    }
    auto remap = [&](std::vector<id_type>& v) {
        for (auto& t : v) {
            t = local[t];
            append_bits(sig, t);
        }
        append_bits(sig, static_cast<std::uint32_t>(v.size()));
    };
    for (auto o : b.ops) {
        auto op = g.op(o);
        append_bits(sig, static_cast<int>(op.phase));
        append_bits(sig, op.cost);
        append_bits(sig, op.workspace);
        remap(op.inputs);
        remap(op.outputs);
        for (auto& v : op.variants) {
            append_bits(sig, v.cost);
            append_bits(sig, v.workspace);
            remap(v.inputs);
        }
        append_bits(sig, static_cast<std::uint32_t>(op.variants.size()));
        for (auto& [x, y] : op.inplace) {
            x = local[x];
            y = local[y];
            append_bits(sig, x);
            append_bits(sig, y);
        }
        append_bits(sig, static_cast<std::uint32_t>(op.inplace.size()));
        b.sub.add_op(std::move(op));
    }
    for (std::size_t j = 0; j < b.tensors.size(); ++j) {
        const auto t = b.tensors[j];
        const auto p = ctx.index().producer[t];
        if (p == Graph::npos || !in_block[p]) continue;
        bool out = is_output[t] != 0;
        for (auto c : ctx.index().consumers[t]) out = out || !in_block[c];
        if (out) {
            b.sub.add_output(static_cast<id_type>(j));
            append_bits(sig, static_cast<id_type>(j));
        }
    }
    return b;
}

/// A plan of a block, in the block's own ids: the forward run and the
/// backward part, and its figures in bytes (chain_option; `cost` there is
/// the whole block's: forward run and backward part).
template <class Graph>
struct block_plan {
    basic_schedule<typename Graph::id_type> forward, backward;
    double cost = 0;
    std::size_t abar = 0, ovf = 0, peak_back = 0;
};

/// The figures of a block schedule `steps` whose first `forward` steps are
/// the forward ops, each once; false when they are not. Inputs of the block
/// and persistent tensors are not counted.
template <class Graph>
bool block_figures(const Graph& sub, const basic_schedule<typename Graph::id_type>& steps, std::size_t forward,
                   block_plan<Graph>& out) {
    if (steps.size() <= forward) return false;
    for (std::size_t i = 0; i < forward; ++i)
        if (sub.op(steps[i].op).phase != phase::forward) return false;
    auto live = compute_liveness(sub, steps);
    const graph_index<Graph> index(sub);
    for (auto& buf : live.buffers)
        if (!buf.is_workspace() && (sub.tensor(buf.tensor).persistent || index.is_graph_input(buf.tensor))) buf.bytes = 0;
    const auto bytes = live_bytes(live.buffers, live.alias_of, live.num_steps);
    out = {};
    out.forward.assign(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(forward));
    out.backward.assign(steps.begin() + static_cast<std::ptrdiff_t>(forward), steps.end());
    out.cost = schedule_cost(sub, steps);
    for (std::size_t i = 0; i < steps.size(); ++i)
        (i < forward ? out.ovf : out.peak_back) = std::max<std::size_t>(i < forward ? out.ovf : out.peak_back,
                                                                        static_cast<std::size_t>(bytes[i]));
    for (const auto& buf : live.buffers)
        if (!buf.is_workspace() && buf.first < forward && buf.last >= forward)
            out.abar += static_cast<std::size_t>(buf.bytes);
    return true;
}

/// What solving the blocks of a chain did.
struct block_stats {
    std::size_t blocks = 0;   ///< segments
    std::size_t distinct = 0; ///< distinct blocks among those that can be solved on their own
    std::size_t solved = 0;   ///< blocks solved (each distinct one once)
    std::size_t options = 0;  ///< options added to the chain program, over all segments
    std::size_t plans = 0;    ///< block plans found, before removing dominated ones
};

/// Whether segment i's tensors are read only inside its block (its output
/// also by the next block), and its backward group reads no forward tensor
/// of another segment but its input: then the block can be planned alone.
template <class Graph>
bool block_is_closed(const remat_context<Graph>& ctx, const graph_chain<Graph>& chain, std::size_t i,
                     const std::vector<std::size_t>& block_of_op) {
    const Graph& g = ctx.graph();
    if (chain.backward[i].empty()) return false;
    for (auto o : chain.forward_all[i])
        for (auto t : g.op(o).outputs) {
            if (g.tensor(t).persistent) continue;
            const bool is_cut = i < chain.seg.cut.size() && chain.seg.cut[i] == t;
            for (auto c : ctx.index().consumers[t])
                if (block_of_op[c] != i && !(is_cut && block_of_op[c] == i + 1)) return false;
        }
    for (auto o : chain.backward[i])
        for (auto t : g.op(o).inputs) {
            const auto p = ctx.index().producer[t];
            if (p == Graph::npos || g.tensor(t).persistent || g.op(p).phase != phase::forward) continue;
            const bool input = i > 0 && chain.seg.cut[i - 1] == t;
            if (block_of_op[p] != i && !input) return false;
        }
    return true;
}

} // namespace detail

/// Blocks solved by `joint` at a few memory levels, composed by Rotor's
/// chain program (see the file comment). On a graph without a backward part
/// there is no chain: the whole graph is one block, planned by `joint`.
struct block_dp : remat_planner<block_dp> {
    static constexpr std::string_view name = "block_dp";
    std::size_t levels = 24; ///< memory levels each distinct block is solved at, from its least to store-all
    /// Consecutive segments are joined into blocks of at least so many
    /// forward ops; 0: try several sizes (see plan()), the cheapest plan wins.
    std::size_t min_block_ops = 0;
    std::size_t slots = 3000; ///< memory discretisation of the chain program
    /// Time shares: solving the blocks (of the whole), then the chain
    /// program's finer pass and the exact placement (`exact_share`, of what
    /// is left), as in chain_dp.
    static constexpr double blocks_share = 0.5;
    /// Of the time left when it starts, what each block size but the last
    /// takes (the finest is fast; the coarsest gains most from time).
    static constexpr double size_shares[] = {0.15, 0.3};
    static constexpr double first_pass_share = 0.5;
    static constexpr double max_seconds_per_level = 2.0; ///< one block at one level

    using remat_planner<block_dp>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        if (ctx.general()) {
            auto r = joint{}.plan(ctx, opt);
            r.planner = std::string(name);
            r.message = "no backward part: the whole graph is one block, planned by joint" +
                        (r.message.empty() ? std::string() : "; " + r.message);
            return r;
        }
        using result_type = remat_result_of<Graph>;
        result_type best;
        if (opt.budget < ctx.min_memory().first) { // below what any schedule needs: nothing to solve
            detail::no_plan_within_budget(ctx, opt, best, name);
            best.planner = std::string(name);
            best.seconds = watch.seconds();
            return best;
        }
        const memplan::deadline until = opt.time_limit.from_now();
        // Block sizes tried, finest first: every articulation point that a
        // backward op needs (each a block of its own), then blocks of at
        // least a quarter and half of the forward ops. Coarse blocks let
        // `joint` drop the tensors between segments inside a block; fine
        // ones let the program recompute whole segments, at several levels.
        const auto finest = detail::merge_unread_cuts(ctx, detail::segment_forward(ctx));
        std::vector<std::size_t> sizes;
        if (min_block_ops > 0) sizes.push_back(min_block_ops);
        else sizes = {1, ctx.boundary() / 4, ctx.boundary() / 2};
        bool found = false;
        std::size_t last_blocks = 0;
        std::string tried;
        for (std::size_t k = 0; k < sizes.size(); ++k) {
            const auto seg = detail::join_segments(finest, std::max<std::size_t>(sizes[k], 1));
            if (k > 0 && seg.size() == last_blocks) continue; // the same blocks again
            last_blocks = seg.size();
            const memplan::deadline by = k + 1 == sizes.size() ? until : until.share(size_shares[k]);
            detail::graph_chain<Graph> chain(ctx, seg, fastest_variants(ctx.graph()));
            const auto stats = add_block_options(ctx, opt, chain, by.share(blocks_share));
            // The program over the blocks always runs to the end: the blocks'
            // plans, which took the time, are its options.
            auto r = detail::plan_on_chain(ctx, opt.until(by), chain, slots, first_pass_share, exact_share, name,
                                           false);
            const std::string summary = std::to_string(stats.blocks) + " blocks (" + std::to_string(stats.solved) +
                                        " solved, identical ones once; " + std::to_string(stats.options) +
                                        " block plans)";
            tried += (tried.empty() ? "" : ", ") + summary + " " + std::string(to_string(r.status));
            const bool fits = has_solution(r.status) && r.arena() <= opt.budget;
            if (fits && (!found || r.cost < best.cost)) {
                best = std::move(r);
                best.message = summary;
                found = true;
            } else if (!found && (k == 0 || r.status == status::infeasible)) {
                best = std::move(r);
            }
        }
        best.planner = std::string(name);
        best.message += (best.message.empty() ? "" : "; ") + std::string("tried ") + tried;
        best.seconds = watch.seconds();
        return best;
    }

    /// Solves the blocks of `chain` (each distinct one once) and adds their
    /// plans to it as options; stops solving at `by`.
    template <class Graph>
    detail::block_stats add_block_options(const remat_context<Graph>& ctx, const remat_options& opt,
                                          detail::graph_chain<Graph>& chain, memplan::deadline by) const {
        const Graph& g = ctx.graph();
        const std::size_t L = chain.seg.size();
        detail::block_stats stats;
        stats.blocks = L;
        chain.option_runs.assign(L, {});
        std::vector<std::size_t> block_of_op(g.num_ops(), L);
        for (std::size_t i = 0; i < L; ++i) {
            for (auto o : chain.forward_all[i]) block_of_op[o] = i;
            for (auto o : chain.backward[i]) block_of_op[o] = i;
        }
        std::vector<detail::remat_block<Graph>> blocks(L);
        std::vector<char> closed(L, 0);
        std::map<std::string, std::size_t> first_of; // signature -> first block with it
        for (std::size_t i = 0; i < L; ++i) {
            if (!detail::block_is_closed(ctx, chain, i, block_of_op)) continue;
            blocks[i] = detail::extract_block(ctx, chain.forward_all[i], chain.backward[i]);
            closed[i] = 1;
            first_of.emplace(blocks[i].signature, i);
        }
        stats.distinct = first_of.size();
        // Solve each distinct block; the time is shared evenly among the
        // (block, level) pairs still to come.
        std::map<std::string, std::vector<detail::block_plan<Graph>>> solved;
        std::size_t pairs_left = first_of.size() * (levels + 2);
        for (std::size_t i = 0; i < L; ++i) {
            if (!closed[i] || first_of[blocks[i].signature] != i) continue;
            auto& plans = solved[blocks[i].signature];
            const auto per_level = [&] {
                return std::min(max_seconds_per_level, by.remaining() / static_cast<double>(std::max<std::size_t>(pairs_left, 1)));
            };
            if (by.expired()) break;
            ++stats.solved;
            try {
                solve_block(blocks[i], opt, by, per_level, pairs_left, plans);
            } catch (const error&) {
                plans.clear(); // a block the planners cannot take keeps Rotor's ways only
            }
            stats.plans += plans.size();
        }
        // Options per segment, in the graph's ids and the chain's terms.
        for (std::size_t i = 0; i < L; ++i) {
            if (!closed[i]) continue;
            const auto it = solved.find(blocks[i].signature);
            if (it == solved.end()) continue;
            const std::size_t k = i + 1;
            double default_backward = 0;
            for (auto o : chain.backward[i]) default_backward += g.cost_of(o, chain.variant[o]);
            const auto& b = blocks[i];
            for (const auto& p : it->second) {
                detail::chain_option w;
                w.cost = p.cost - default_backward;
                w.abar = p.abar;
                w.ovf = p.ovf;
                w.ovb = chain.bytes.d[k] + p.peak_back - std::min(p.peak_back, p.abar);
                typename detail::graph_chain<Graph>::option_steps run;
                for (auto st : p.forward) run.forward.push_back({b.ops[st.op], st.variant});
                for (auto st : p.backward) run.backward.push_back({b.ops[st.op], st.variant});
                chain.bytes.options[k].push_back(w);
                chain.option_runs[i].push_back(std::move(run));
                ++stats.options;
            }
        }
        return stats;
    }

private:
    /// Per op, its cheapest variant (npos for ops without variants).
    template <class Graph>
    static std::vector<typename Graph::id_type> fastest_variants(const Graph& g) {
        std::vector<typename Graph::id_type> v(g.num_ops(), Graph::npos);
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto& op = g.op(static_cast<typename Graph::id_type>(o));
            for (std::size_t k = 0; k < op.variants.size(); ++k)
                if (k == 0 || op.variants[k].cost < op.variants[v[o]].cost) v[o] = static_cast<typename Graph::id_type>(k);
        }
        return v;
    }

    /// `sub` with every tensor and workspace of its backward part at 0
    /// bytes: its memory is then what the forward keeps (and what the
    /// backward recomputes), so that a budget on it asks for plans that keep
    /// little whatever their backward needs on top.
    template <class Graph>
    static Graph forward_memory_only(const Graph& sub) {
        Graph h = sub;
        for (std::size_t o = 0; o < h.num_ops(); ++o) {
            auto& op = h.op_at(static_cast<typename Graph::id_type>(o));
            if (op.phase == phase::forward) continue;
            op.workspace = 0;
            for (auto& v : op.variants) v.workspace = 0;
            for (auto t : op.outputs) h.tensor_at(t).bytes = 0;
        }
        return h;
    }

    /// Plans of one block at `levels` memory levels between the least any
    /// schedule of it needs and its store-all arena with the fastest
    /// variants, without those another plan beats in every figure.
    template <class Graph, class PerLevel>
    void solve_block(const detail::remat_block<Graph>& b, const remat_options& opt, memplan::deadline by,
                     const PerLevel& per_level, std::size_t& pairs_left,
                     std::vector<detail::block_plan<Graph>>& plans) const {
        const std::size_t half = (levels + 1) / 2;
        // Two families of levels: the block's whole memory (plans that
        // balance what they keep against what their backward needs), and
        // the memory of its forward part alone (plans that keep little).
        for (int family = 0; family < 2; ++family) {
            const std::size_t count = family == 0 ? levels - half : half;
            const Graph h = family == 0 ? b.sub : forward_memory_only(b.sub);
            const remat_context<Graph> sub(h);
            if (sub.general()) {
                pairs_left -= std::min(pairs_left, count + 1);
                continue;
            }
            auto run = [&](std::uint64_t budget) {
                remat_options o;
                o.budget = budget;
                o.alignment = opt.alignment;
                o.time_limit = {earliest(opt.time_limit.from_now(), by), per_level()};
                if (pairs_left > 0) --pairs_left;
                auto r = joint{}.plan(sub, o);
                if (!has_solution(r.status)) return std::uint64_t{0};
                detail::block_plan<Graph> p;
                if (detail::block_figures(b.sub, r.plan.steps, b.forward, p)) plans.push_back(std::move(p));
                return static_cast<std::uint64_t>(r.arena());
            };
            const std::uint64_t hi = run(std::numeric_limits<std::uint64_t>::max());
            const std::uint64_t lo = sub.min_memory().first;
            if (hi == 0 || hi <= lo) {
                pairs_left -= std::min(pairs_left, count);
                continue;
            }
            for (std::size_t k = 0; k < count; ++k) run(lo + (hi - lo) * k / count);
        }
        // Keep only plans no other beats (or equals, earlier) in every figure.
        auto beats = [](const detail::block_plan<Graph>& x, const detail::block_plan<Graph>& y) {
            return x.cost <= y.cost && x.abar <= y.abar && x.ovf <= y.ovf && x.peak_back <= y.peak_back;
        };
        std::vector<detail::block_plan<Graph>> kept;
        for (std::size_t i = 0; i < plans.size(); ++i) {
            bool dominated = false;
            for (std::size_t j = 0; j < plans.size() && !dominated; ++j)
                dominated = j != i && beats(plans[j], plans[i]) && (j < i || !beats(plans[i], plans[j]));
            if (!dominated) kept.push_back(std::move(plans[i]));
        }
        plans = std::move(kept);
    }
};

} // namespace memplan
