// Test helpers for the ordering planners: small random DAGs that exercise
// every liveness rule (graph inputs, persistent tensors, graph outputs,
// unread outputs, workspace, variants, in-place pairs), and the exact optimum
// by enumerating every topological order and evaluating each with the
// library's own reference, schedule_lower_bound.
#pragma once

#include "fixtures.hpp"

#include <memplan/graph/validate.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace memplan::testing {

/// The MODeL/OLLA diamond (see fixtures.hpp).
inline graph order_diamond() { return diamond_graph(); }

/// A random DAG of `n` ops listed in a topological order.
inline graph random_order_dag(std::mt19937_64& rng, std::size_t n) {
    using id = graph::id_type;
    auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
    auto pick = [&](std::size_t k) { return std::uniform_int_distribution<std::size_t>(0, k - 1)(rng); };
    auto size = [&] { return std::uniform_int_distribution<std::uint64_t>(0, 12)(rng) * 8; };
    graph g("random-dag");
    std::vector<id> pool; // tensors that later ops may read
    const std::size_t inputs = pick(3);
    for (std::size_t i = 0; i < inputs; ++i) {
        std::string name = "in";
        name += std::to_string(i);
        pool.push_back(g.add_tensor(std::move(name), size(), coin(0.3)));
    }
    for (std::size_t o = 0; o < n; ++o) {
        op x;
        x.name = "op";
        x.name += std::to_string(o);
        const std::size_t reads = pool.empty() ? 0 : pick(std::min<std::size_t>(pool.size(), 3) + 1);
        for (std::size_t r = 0; r < reads; ++r) {
            // Mostly recent tensors, so the DAG has depth as well as width.
            const std::size_t back = std::min(pool.size(), std::size_t{4});
            const id t = coin(0.7) ? pool[pool.size() - 1 - pick(back)] : pool[pick(pool.size())];
            if (std::find(x.inputs.begin(), x.inputs.end(), t) == x.inputs.end()) x.inputs.push_back(t);
        }
        const std::size_t writes = coin(0.15) ? 0 : (coin(0.3) ? 2 : 1);
        for (std::size_t w = 0; w < writes; ++w) {
            std::string name = "t";
            name += std::to_string(o);
            name += '_';
            name += std::to_string(w);
            const id t = g.add_tensor(std::move(name), size(), coin(0.05));
            x.outputs.push_back(t);
        }
        if (coin(0.25)) x.workspace = size();
        if (coin(0.1)) {
            x.variants.push_back({"v0", 1.0, size()});
            x.variants.push_back({"v1", 2.0, 0});
        }
        if (!x.inputs.empty() && !x.outputs.empty() && coin(0.3) && !g.tensor(x.inputs.front()).persistent &&
            g.tensor(x.inputs.front()).bytes >= g.tensor(x.outputs.front()).bytes)
            x.inplace.push_back({x.inputs.front(), x.outputs.front()});
        for (auto t : x.outputs) pool.push_back(t);
        g.add_op(std::move(x));
    }
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (coin(0.08)) g.add_output(static_cast<id>(t));
    validate(g);
    return g;
}

/// A random training-like graph: a forward chain with skip connections and
/// persistent weights, a loss (graph output), a mirrored backward pass that
/// reads the forward activations, and update ops for the weights. About
/// 3 x `forward` ops (plus updates); sizes in [0, max_bytes].
inline graph random_training_dag(std::mt19937_64& rng, std::size_t forward, std::uint64_t max_bytes = 1 << 20,
                                 double p_inplace = 0.2) {
    using id = graph::id_type;
    auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
    auto bytes = [&] { return std::uniform_int_distribution<std::uint64_t>(0, max_bytes)(rng); };
    graph g("training");
    std::vector<id> acts{g.add_tensor("x", bytes())};
    struct fwd_info {
        std::vector<id> inputs;
        id weight = graph::npos;
        id out = 0;
    };
    std::vector<fwd_info> fwd;
    for (std::size_t i = 0; i < forward; ++i) {
        const std::string n = std::to_string(i);
        op o;
        o.name = "f";
        o.name += n;
        o.inputs.push_back(acts.back());
        if (acts.size() > 2 && coin(0.25)) {
            const id skip = acts[std::uniform_int_distribution<std::size_t>(0, acts.size() - 2)(rng)];
            o.inputs.push_back(skip);
        }
        fwd_info f;
        if (coin(0.6)) {
            f.weight = g.add_tensor("w" + n, bytes() / 16, true);
            o.inputs.push_back(f.weight);
        }
        f.inputs = o.inputs;
        f.out = g.add_tensor("a" + n, bytes());
        o.outputs.push_back(f.out);
        if (coin(0.3)) o.workspace = bytes() / 4;
        if (coin(p_inplace) && g.tensor(o.inputs.front()).bytes >= g.tensor(f.out).bytes)
            o.inplace.push_back({o.inputs.front(), f.out});
        g.add_op(std::move(o));
        acts.push_back(f.out);
        fwd.push_back(f);
    }
    const id loss = g.add_tensor("loss", 4);
    g.add_op("loss", {g.tensor(acts.back()).name}, {"loss"});
    g.add_output(loss);
    id grad = g.add_tensor("dloss", 4);
    g.add_op("dloss", {"loss"}, {"dloss"}, 1.0, 0, phase::backward);
    for (std::size_t i = fwd.size(); i-- > 0;) {
        const auto& f = fwd[i];
        const std::string n = std::to_string(i);
        op b;
        b.name = "b";
        b.name += n;
        b.phase = phase::backward;
        b.inputs = f.inputs;
        b.inputs.push_back(grad);
        const id d = g.add_tensor("d" + n, g.tensor(f.inputs.front()).bytes);
        b.outputs.push_back(d);
        id dw = graph::npos;
        if (f.weight != graph::npos) {
            dw = g.add_tensor("dw" + n, g.tensor(f.weight).bytes);
            b.outputs.push_back(dw);
        }
        if (coin(0.3)) b.workspace = bytes() / 4;
        g.add_op(std::move(b));
        if (dw != graph::npos) {
            op u;
            u.name = "u";
            u.name += n;
            u.phase = phase::update;
            u.inputs = {f.weight, dw};
            g.add_op(std::move(u));
        }
        grad = d;
    }
    validate(g);
    return g;
}

/// Direct predecessor ops of each op, as bit masks (n <= 20).
inline std::vector<std::uint32_t> predecessor_masks(const graph& g) {
    const graph_index<graph> index(g);
    std::vector<std::uint32_t> m(g.num_ops(), 0);
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        for (auto t : g.op(static_cast<graph::id_type>(o)).inputs)
            if (index.producer[t] != graph::npos) m[o] |= std::uint32_t{1} << index.producer[t];
    return m;
}

/// Number of topological orders (dynamic programming over sets of ops).
inline std::uint64_t count_topological_orders(const graph& g) {
    const auto pred = predecessor_masks(g);
    const std::size_t n = g.num_ops();
    std::vector<std::uint64_t> ways(std::size_t{1} << n, 0);
    ways[0] = 1;
    for (std::uint32_t s = 0; s < ways.size(); ++s) {
        if (ways[s] == 0) continue;
        for (std::size_t o = 0; o < n; ++o)
            if (!(s >> o & 1) && (pred[o] & ~s) == 0) ways[s | (std::uint32_t{1} << o)] += ways[s];
    }
    return ways.back();
}

/// The smallest schedule_lower_bound over every topological order.
inline std::uint64_t brute_force_best_peak(const graph& g) {
    const auto pred = predecessor_masks(g);
    const std::size_t n = g.num_ops();
    std::vector<graph::id_type> order;
    std::uint64_t best = UINT64_MAX;
    auto rec = [&](auto&& self, std::uint32_t done) -> void {
        if (order.size() == n) {
            best = std::min(best, schedule_lower_bound(g, schedule_from_order(g, order)));
            return;
        }
        for (std::size_t o = 0; o < n; ++o)
            if (!(done >> o & 1) && (pred[o] & ~done) == 0) {
                order.push_back(static_cast<graph::id_type>(o));
                self(self, done | (std::uint32_t{1} << o));
                order.pop_back();
            }
    };
    rec(rec, 0);
    return best;
}

/// Random small graphs whose orders can be enumerated quickly: DAGs of 2-10
/// ops and small training graphs, each with at most `max_orders` orders.
inline std::vector<graph> small_order_graphs(std::uint64_t seed, std::size_t count, std::uint64_t max_orders = 4000) {
    std::mt19937_64 rng(seed);
    std::vector<graph> out;
    while (out.size() < count) {
        graph g;
        if (out.size() % 4 == 3) {
            g = random_training_dag(rng, 2 + out.size() % 2, 64);
        } else {
            g = random_order_dag(rng, 2 + std::uniform_int_distribution<std::size_t>(0, 8)(rng));
        }
        if (g.num_ops() > 12 || count_topological_orders(g) > max_orders) continue;
        out.push_back(std::move(g));
    }
    return out;
}

} // namespace memplan::testing
