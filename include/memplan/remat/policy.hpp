// The recomputation policies practitioners configure by hand, as plans: the
// keep set each one makes on a transformer's training graph, scheduled,
// placed and priced like any planner's, so that a policy and a planner are
// compared on the same cost model and the same validator.
//
// The graph's transformer blocks are found by name: ops named
// "<prefix><i>.<module>.<pass>" (the zoo's `llama` and Hugging Face's naming,
// prefix "model.layers."). A block's input and outputs are the tensors that
// cross its boundary in the forward part; ops outside every block (the
// embedding, the head, the loss) keep what they make. Policies:
//
// - `none`: keep everything (store-all).
// - `full`, `full:k` (Megatron-Core's `recompute_granularity=full`,
//   `recompute_method=uniform`, `recompute_num_layers=k`; torchtitan's `full`
//   AC for k = 1): blocks in groups of k; each group keeps only its input and
//   recomputes its blocks in the backward pass.
// - `selective` (Megatron's default selective recomputation, module
//   `core_attn`): the attention core is recomputed. With a fused attention
//   kernel that recomputes its probabilities anyway, what is left to drop is
//   what only its backward reads (the log-sum-exp); its output stays, kept
//   by the output projection.
// - `op-sac` (torchtitan's default selective AC, per op): in each block keep
//   the outputs of attention and of matrix products, but of the products
//   only the 1st, 3rd, 5th, ... in forward order (its every-second-matmul
//   counter, per block), and recompute everything else.
// - a Megatron `recompute_modules` list, comma-separated: `core_attn` (as
//   `selective`), `mlp` (the MLP's internal tensors dropped: only its input
//   and output stay), `layernorm` (the norms' outputs discarded after use and
//   recomputed, Megatron's output-discarding checkpoint).
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/core/error.hpp>
#include <memplan/remat/choice.hpp>
#include <memplan/remat/context.hpp>
#include <memplan/remat/place.hpp>
#include <memplan/remat/planner.hpp>
#include <memplan/remat/remat.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// A hand-written recomputation policy.
struct recompute_policy {
    enum class kind : std::uint8_t { none, full, op_sac, modules };
    kind what = kind::none;
    std::size_t group = 1;            ///< full: blocks per checkpointed group
    bool core_attn = false;           ///< modules
    bool mlp = false;                 ///< modules
    bool layernorm = false;           ///< modules
    std::string block_prefix = "model.layers.";

    /// The name it was parsed from ("full:2", "mlp,layernorm", ...).
    std::string name() const {
        switch (what) {
        case kind::none: return "none";
        case kind::full: return group == 1 ? "full" : "full:" + std::to_string(group);
        case kind::op_sac: return "op-sac";
        case kind::modules: break;
        }
        if (core_attn && !mlp && !layernorm) return "selective";
        std::string s;
        for (auto [on, n] : {std::pair{core_attn, "core_attn"}, {mlp, "mlp"}, {layernorm, "layernorm"}})
            if (on) s += (s.empty() ? "" : ",") + std::string(n);
        return s;
    }
};

/// Every policy name `parse_recompute_policy` accepts, for help texts.
inline constexpr std::string_view recompute_policy_names =
    "none, full, full:K, selective, op-sac, or a list of core_attn, mlp, layernorm";

/// Parses "none", "full", "full:K", "selective", "op-sac" or a comma-separated
/// list of Megatron modules. Throws memplan::error("remat", ...) naming the
/// part it cannot read.
inline recompute_policy parse_recompute_policy(std::string_view s) {
    recompute_policy p;
    if (s == "none") return p;
    if (s == "op-sac") {
        p.what = recompute_policy::kind::op_sac;
        return p;
    }
    if (s == "full" || s.starts_with("full:")) {
        p.what = recompute_policy::kind::full;
        if (s.size() > 5) {
            const auto k = s.substr(5);
            std::size_t v = 0;
            const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), v);
            if (ec != std::errc{} || end != k.data() + k.size() || v == 0)
                throw error("remat", "policy '" + std::string(s) + "': K in full:K must be a positive integer");
            p.group = v;
        }
        return p;
    }
    p.what = recompute_policy::kind::modules;
    if (s == "selective") {
        p.core_attn = true;
        return p;
    }
    std::size_t at = 0;
    while (at <= s.size()) {
        const auto comma = std::min(s.find(',', at), s.size());
        const auto m = s.substr(at, comma - at);
        if (m == "core_attn") p.core_attn = true;
        else if (m == "mlp") p.mlp = true;
        else if (m == "layernorm") p.layernorm = true;
        else
            throw error("remat", "unknown recomputation policy or module '" + std::string(m) + "' in '" +
                                     std::string(s) + "'; expected " + std::string(recompute_policy_names));
        at = comma + 1;
    }
    return p;
}

namespace detail {

/// Where an op sits: its block (npos outside every block) and its module
/// path within the block ("self_attn.q_proj", "mlp.act", ...).
struct block_position {
    std::size_t block = std::numeric_limits<std::size_t>::max();
    std::string module;
};

inline block_position position_of(std::string_view op_name, std::string_view prefix) {
    block_position p;
    if (!op_name.starts_with(prefix)) return p;
    const auto rest = op_name.substr(prefix.size());
    const auto dot = rest.find('.');
    std::size_t i = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + std::min(dot, rest.size()), i);
    if (ec != std::errc{} || dot == std::string_view::npos || end != rest.data() + dot) return p;
    const auto module = rest.substr(dot + 1);
    const auto last = module.rfind('.');
    p.block = i;
    p.module = std::string(last == std::string_view::npos ? module : module.substr(0, last));
    return p;
}

} // namespace detail

/// Whether `g` has ops named "<prefix><i>.<module>.<pass>": the blocks the
/// policies work on.
template <class Graph>
bool has_blocks(const Graph& g, std::string_view prefix = "model.layers.") {
    for (const auto& op : g.ops())
        if (detail::position_of(op.name, prefix).block != std::numeric_limits<std::size_t>::max()) return true;
    return false;
}

/// The policies practitioners use, in a fixed order: none, full, full:2,
/// full:4, selective, op-sac, mlp, layernorm, mlp,layernorm and
/// core_attn,mlp,layernorm.
inline std::vector<recompute_policy> standard_recompute_policies() {
    std::vector<recompute_policy> out;
    for (auto n : {"none", "full", "full:2", "full:4", "selective", "op-sac", "mlp", "layernorm", "mlp,layernorm",
                   "core_attn,mlp,layernorm"})
        out.push_back(parse_recompute_policy(n));
    return out;
}

/// The keep set policy `p` makes on `ctx`'s graph (default variants).
/// Throws memplan::error("remat", ...) when the graph has no blocks named
/// with the policy's prefix.
template <class Graph>
remat_choice<Graph> policy_choice(const remat_context<Graph>& ctx, const recompute_policy& p) {
    using id_type = typename Graph::id_type;
    const Graph& g = ctx.graph();
    auto c = ctx.keep_all();
    if (p.what == recompute_policy::kind::none) return c;
    constexpr auto outside = std::numeric_limits<std::size_t>::max();

    std::vector<detail::block_position> pos(g.num_ops());
    std::size_t blocks = 0;
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        pos[o] = detail::position_of(g.op(static_cast<id_type>(o)).name, p.block_prefix);
        if (pos[o].block != outside) blocks = std::max(blocks, pos[o].block + 1);
    }
    if (blocks == 0)
        throw error("remat", "policy '" + p.name() + "' needs transformer blocks named '" + p.block_prefix +
                                 "<i>.<module>...' (memplan zoo llama); graph '" + g.name() + "' has none");

    // Per forward tensor: its producer's position, and whether a forward op
    // of another block or module (or outside every block) reads it.
    std::vector<id_type> producer(g.num_tensors(), Graph::npos);
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        if (g.op(static_cast<id_type>(o)).phase == phase::forward)
            for (auto t : g.op(static_cast<id_type>(o)).outputs) producer[t] = static_cast<id_type>(o);
    auto is_attention = [](const std::string& m) { return m.ends_with(".attn") || m == "attn"; };
    auto is_norm = [](const std::string& m) { return m.ends_with("layernorm") || m.ends_with("_norm"); };
    auto in_mlp = [](const std::string& m) { return m.starts_with("mlp."); };
    std::vector<char> leaves_block(g.num_tensors(), 0), leaves_module(g.num_tensors(), 0),
        leaves_mlp(g.num_tensors(), 0);
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        if (op.phase != phase::forward) continue;
        for (auto t : op.inputs) {
            if (producer[t] == Graph::npos) continue;
            const auto& made = pos[producer[t]];
            const bool same_block = made.block == pos[o].block;
            if (!same_block) leaves_block[t] = 1;
            if (!same_block || made.module != pos[o].module) leaves_module[t] = 1;
            if (!same_block || !in_mlp(pos[o].module)) leaves_mlp[t] = 1;
        }
    }
    for (const auto t : g.outputs()) leaves_block[t] = leaves_module[t] = leaves_mlp[t] = 1;

    // Per block, its matrix products in forward order (op-sac's counter).
    std::vector<std::size_t> products_seen(blocks, 0);
    const auto& order = ctx.base_order();
    std::vector<char> keep_product(g.num_ops(), 0);
    for (auto o : order) {
        const auto& op = g.op(o);
        if (op.phase != phase::forward || pos[o].block == outside) continue;
        const auto& m = pos[o].module;
        const bool product = m.ends_with("_proj");
        if (product) keep_product[o] = (products_seen[pos[o].block]++ % 2) == 0; // the 1st, 3rd, ...
    }

    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto id = static_cast<id_type>(t);
        if (producer[t] == Graph::npos) continue;
        const auto& at = pos[producer[t]];
        if (at.block == outside) continue;
        if (!ctx.droppable(id)) {
            // A product's output that no backward op reads (the Q projection
            // before its rotation): op-sac saves it, and recomputations start
            // from it (a checkpoint).
            if (p.what == recompute_policy::kind::op_sac && ctx.checkpointable(id) &&
                at.module.ends_with("_proj") && keep_product[producer[t]]) {
                c.checkpoint.resize(g.num_tensors(), 0);
                c.checkpoint[t] = 1;
            }
            continue;
        }
        bool drop = false;
        switch (p.what) {
        case recompute_policy::kind::none: break;
        case recompute_policy::kind::full: {
            // The group's last block's outputs are the next group's input.
            const std::size_t last_of_group = std::min(blocks, (at.block / p.group + 1) * p.group) - 1;
            drop = !(leaves_block[t] && at.block == last_of_group);
            break;
        }
        case recompute_policy::kind::op_sac:
            drop = !(leaves_block[t] || is_attention(at.module) ||
                     (at.module.ends_with("_proj") && keep_product[producer[t]]));
            break;
        case recompute_policy::kind::modules:
            if (p.core_attn && is_attention(at.module)) drop = !leaves_module[t];
            if (p.mlp && in_mlp(at.module)) drop = drop || !leaves_mlp[t];
            if (p.layernorm && is_norm(at.module)) drop = true;
            break;
        }
        if (drop) c.keep[t] = 0;
    }
    return c;
}

/// A policy as a planner: it does not search; the budget decides only the
/// status (feasible when the policy's arena fits; the plan's figures are
/// kept either way). Its placement is the one every planner's candidates
/// get (remat/place.hpp).
struct policy_planner : remat_planner<policy_planner> {
    static constexpr std::string_view name = "policy";
    recompute_policy policy;

    using remat_planner<policy_planner>::plan; ///< plan(graph, options)

    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        const stopwatch watch;
        auto out = start_result(ctx);
        out.planner += ":" + policy.name();
        const auto s = ctx.schedule_of(policy_choice(ctx, policy));
        detail::settle_placement(ctx, opt, place_within(ctx.graph(), s, opt.budget, opt.alignment, exact_deadline(opt)),
                                 out, "the plan of policy '" + policy.name() + "'",
                                 "policy '" + policy.name() + "'");
        out.seconds = watch.seconds();
        return out;
    }
};

} // namespace memplan
