// Random training-like graphs and schedules for property tests: a forward
// DAG with branches, a mirrored backward pass, update ops on persistent
// weights, variants with workspaces, in-place pairs, and schedules that
// recompute forward ops.
#pragma once

#include <memplan/graph/validate.hpp>
#include <memplan/schedule/schedule.hpp>

#include <random>
#include <string>
#include <vector>

namespace memplan::testing {

/// "prefix" followed by i. (Not `"b" + std::to_string(i)`: GCC 12 warns
/// falsely on that with -Wrestrict.)
inline std::string numbered(const char* prefix, std::size_t i) {
    std::string s(prefix);
    s += std::to_string(i);
    return s;
}

struct random_graph_options {
    std::size_t forward_ops = 12;
    std::uint64_t max_bytes = 1 << 20;
    double p_variants = 0.3;
    double p_inplace = 0.3;
};

inline graph random_training_graph(std::mt19937_64& rng, random_graph_options opt = {}) {
    using id = graph::id_type;
    auto bytes = [&] { return std::uniform_int_distribution<std::uint64_t>(0, opt.max_bytes)(rng); };
    auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
    graph g("random");
    std::vector<id> acts; // forward activations, in creation order
    std::vector<id> weights;
    const id x = g.add_tensor("x", bytes());
    acts.push_back(x);
    std::vector<std::pair<id, id>> fwd; // (op, output)
    for (std::size_t i = 0; i < opt.forward_ops; ++i) {
        const std::string n = std::to_string(i);
        op o;
        o.name = "f" + n;
        o.cost = std::uniform_real_distribution<double>(0.5, 4.0)(rng);
        // One or two inputs among recent activations (branches and joins).
        const std::size_t k = std::min<std::size_t>(acts.size(), 4);
        o.inputs.push_back(acts[acts.size() - 1 - std::uniform_int_distribution<std::size_t>(0, k - 1)(rng)]);
        if (chance(0.3) && acts.size() > 1) {
            const id other = acts[std::uniform_int_distribution<std::size_t>(0, acts.size() - 1)(rng)];
            if (other != o.inputs.front()) o.inputs.push_back(other);
        }
        if (chance(0.5)) {
            const id w = g.add_tensor("w" + n, bytes() / 8, true);
            weights.push_back(w);
            o.inputs.push_back(w);
        }
        const id y = g.add_tensor("a" + n, bytes());
        o.outputs.push_back(y);
        if (chance(opt.p_inplace) && g.tensor(o.inputs.front()).bytes >= g.tensor(y).bytes &&
            !g.tensor(o.inputs.front()).persistent)
            o.inplace.push_back({o.inputs.front(), y});
        if (chance(opt.p_variants)) {
            o.variants.push_back({"fast", o.cost, bytes()});
            o.variants.push_back({"lean", o.cost * 1.5, 0});
        } else if (chance(0.2)) {
            o.workspace = bytes() / 4;
        }
        fwd.push_back({g.add_op(std::move(o)), y});
        acts.push_back(y);
    }
    const id loss = g.add_tensor("loss", 4);
    g.add_op("loss", {g.tensor(acts.back()).name}, {"loss"}, 1.0);
    g.add_output(loss);
    // Backward: one op per forward op, in reverse, reading the op's inputs and
    // the gradient of its output; weight gradients feed update ops.
    id grad = g.add_tensor("dloss", 4);
    g.add_op("dloss", {"loss"}, {"dloss"}, 1.0, 0, phase::backward);
    std::size_t wi = weights.size();
    for (std::size_t i = fwd.size(); i-- > 0;) {
        const op f = g.op(fwd[i].first); // a copy: adding ops below reallocates
        op b;
        b.name = numbered("b", i);
        b.phase = phase::backward;
        b.cost = 2 * f.cost;
        b.inputs = f.inputs;
        if (!f.inplace.empty()) b.inputs.front() = f.outputs.front(); // like ReLU: backward reads its output
        b.inputs.push_back(grad);
        const id dg = g.add_tensor(numbered("d", i), g.tensor(f.inputs.front()).bytes);
        b.outputs.push_back(dg);
        id dw = graph::npos;
        if (wi > 0 && g.tensor(f.inputs.back()).persistent) {
            dw = g.add_tensor(numbered("dw", i), g.tensor(f.inputs.back()).bytes);
            b.outputs.push_back(dw);
            --wi;
        }
        g.add_op(std::move(b));
        if (dw != graph::npos)
            g.add_op(numbered("u", i), {g.tensor(f.inputs.back()).name, g.tensor(dw).name}, {}, 0.5, 0,
                     phase::update);
        grad = dg;
    }
    validate(g);
    return g;
}

/// The default schedule with `extra` recomputations of forward ops inserted
/// at random places after their first execution.
inline schedule random_schedule_with_recompute(const graph& g, std::mt19937_64& rng, std::size_t extra) {
    schedule s = default_schedule(g);
    for (std::size_t r = 0; r < extra; ++r) {
        std::vector<std::size_t> forward_steps;
        for (std::size_t i = 0; i < s.size(); ++i)
            if (g.op(s[i].op).phase == phase::forward) forward_steps.push_back(i);
        if (forward_steps.empty()) break;
        const std::size_t at = forward_steps[std::uniform_int_distribution<std::size_t>(0, forward_steps.size() - 1)(rng)];
        const std::size_t pos = std::uniform_int_distribution<std::size_t>(at + 1, s.size())(rng);
        step st = s[at];
        if (g.op(st.op).has_variants())
            st.variant = static_cast<graph::id_type>(
                std::uniform_int_distribution<std::size_t>(0, g.op(st.op).variants.size() - 1)(rng));
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), st);
    }
    return s;
}

} // namespace memplan::testing
