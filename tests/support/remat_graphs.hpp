// Random training-like graphs for rematerialization tests: a forward pass of
// plain layers and residual blocks (branches that join, so not every position
// is an articulation point), a loss, and a backward pass that reads forward
// tensors as a training graph does (inputs, and the output for ReLU-like
// layers), sums gradients of tensors read twice, and updates weights.
#pragma once

#include <memplan/graph/validate.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace memplan::testing {

struct remat_graph_options {
    std::size_t blocks = 8;
    double p_residual = 0.35;    ///< a block is a two-layer residual block
    double p_variants = 0.2;     ///< a forward layer gets two variants (workspace vs time)
    double p_output_read = 0.3;  ///< its backward reads its output instead of its input (ReLU-like)
    std::uint64_t max_bytes = 1 << 20;
};

inline graph random_remat_graph(std::mt19937_64& rng, remat_graph_options opt = {}) {
    using id = graph::id_type;
    auto bytes = [&] { return std::uniform_int_distribution<std::uint64_t>(opt.max_bytes / 16, opt.max_bytes)(rng); };
    auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
    auto cost = [&] { return std::uniform_real_distribution<double>(0.5, 4.0)(rng); };
    graph g("remat-random");
    struct layer {
        id op;
        std::vector<id> acts; // activation inputs
        id weight;            // or npos
        id out;
        bool reads_output;
    };
    std::vector<layer> layers;
    std::size_t n = 0;
    auto add_layer = [&](std::vector<id> acts, bool with_weight) {
        const std::string k = std::to_string(n++);
        op o;
        o.name = "f" + k;
        o.cost = cost();
        o.inputs = acts;
        id w = graph::npos;
        if (with_weight) {
            w = g.add_tensor("w" + k, bytes() / 8, true);
            o.inputs.push_back(w);
        }
        const id y = g.add_tensor("a" + k, bytes());
        o.outputs.push_back(y);
        if (chance(opt.p_variants)) {
            o.variants.push_back({"fast", o.cost, bytes() / 2, {}});
            o.variants.push_back({"lean", o.cost * 1.4, 0, {}});
        }
        layers.push_back({g.add_op(std::move(o)), acts, w, y, acts.size() == 1 && chance(opt.p_output_read)});
        return y;
    };
    id cur = g.add_tensor("x", bytes());
    for (std::size_t b = 0; b < opt.blocks; ++b) {
        if (chance(opt.p_residual)) {
            const id h = add_layer({cur}, true);
            const id h2 = add_layer({h}, true);
            cur = add_layer({h2, cur}, false);
        } else {
            cur = add_layer({cur}, chance(0.7));
        }
    }
    const id labels = g.add_tensor("labels", 64);
    const id loss = g.add_tensor("loss", 4);
    g.add_op("loss", {g.tensor(cur).name, "labels"}, {"loss"}, 1.0);
    g.add_output(loss);
    (void)labels;

    // Backward, layer by layer in reverse; gradients of a tensor read twice
    // are summed as the second contribution arrives.
    std::map<id, id> grad;
    const id dcur = g.add_tensor("d_out", g.tensor(cur).bytes);
    g.add_op("loss.bwd", {g.tensor(cur).name, "labels"}, {"d_out"}, 1.0, 0, phase::backward);
    grad[cur] = dcur;
    std::size_t acc = 0;
    for (std::size_t i = layers.size(); i-- > 0;) {
        const layer L = layers[i];
        const std::string k = std::to_string(i);
        op b;
        b.name = "b" + k;
        b.phase = phase::backward;
        b.cost = 2 * g.op(L.op).cost;
        if (L.reads_output) {
            b.inputs.push_back(L.out);
        } else {
            for (auto a : L.acts) b.inputs.push_back(a);
        }
        b.inputs.push_back(grad.at(L.out));
        if (L.weight != graph::npos) b.inputs.push_back(L.weight);
        std::vector<std::pair<id, id>> contributions;
        for (std::size_t j = 0; j < L.acts.size(); ++j) {
            const id a = L.acts[j];
            if (g.tensor(a).name == "x") continue;
            const id d = g.add_tensor("d" + k + "_" + std::to_string(j), g.tensor(a).bytes);
            b.outputs.push_back(d);
            contributions.push_back({a, d});
        }
        id dw = graph::npos;
        if (L.weight != graph::npos) {
            dw = g.add_tensor("dw" + k, g.tensor(L.weight).bytes);
            b.outputs.push_back(dw);
        }
        if (b.outputs.empty()) b.outputs.push_back(g.add_tensor("dnone" + k, 4));
        g.add_op(std::move(b));
        if (dw != graph::npos)
            g.add_op("u" + k, {g.tensor(L.weight).name, g.tensor(dw).name}, {}, 0.5, 0, phase::update);
        for (auto [a, d] : contributions) {
            auto it = grad.find(a);
            if (it == grad.end()) {
                grad[a] = d;
                continue;
            }
            const std::string s = "acc" + std::to_string(acc++);
            g.add_tensor(s, g.tensor(a).bytes);
            g.add_op(s + ".op", {g.tensor(it->second).name, g.tensor(d).name}, {s}, 0.2, 0, phase::backward);
            it->second = *g.find_tensor(s);
        }
    }
    validate(g);
    return g;
}

/// x -> f0 -> t0 -> f1 -> a1 -> f2 -> a2, a loss on a2, and a backward pass
/// in which b1 reads the large a1 after a larger temporary (`mid`, a skip
/// connection's shape), and so does b2 before it when `b2_reads_a1`; t0 is
/// read by f1 only (a checkpoint candidate), f0 costs `f0_cost`.
inline graph skip_reader_graph(const std::string& name, std::uint64_t t0_bytes = 1000, double f0_cost = 1.0,
                               bool b2_reads_a1 = true) {
    graph g(name);
    g.add_tensor("x", 100);
    g.add_tensor("w", 50, true);
    g.add_tensor("t0", t0_bytes);
    g.add_tensor("a1", 1000);
    g.add_tensor("a2", 100);
    g.add_tensor("l", 4);
    g.add_tensor("g2", 100);
    g.add_tensor("big", 1500);
    g.add_tensor("gm", 100);
    g.add_tensor("g1", 100);
    g.add_tensor("dw", 50);
    g.add_op("f0", {"x", "w"}, {"t0"}, f0_cost);
    g.add_op("f1", {"t0"}, {"a1"});
    g.add_op("f2", {"a1"}, {"a2"});
    g.add_op("loss", {"a2"}, {"l"});
    if (b2_reads_a1) g.add_op("b2", {"l", "a1"}, {"g2"}, 1.0, 0, phase::backward);
    else g.add_op("b2", {"l"}, {"g2"}, 1.0, 0, phase::backward);
    g.add_op("mid", {"g2"}, {"big"}, 1.0, 0, phase::backward);
    g.add_op("mid2", {"big"}, {"gm"}, 1.0, 0, phase::backward);
    g.add_op("b1", {"gm", "a1"}, {"g1"}, 1.0, 0, phase::backward);
    g.add_op("bw", {"g1", "x"}, {"dw"}, 1.0, 0, phase::backward);
    g.add_op("w.update", {"w", "dw"}, {}, 1.0, 0, phase::update);
    return g;
}

} // namespace memplan::testing
