// Random layered DAGs: the benchmark family of Moccasin (Bartan et al., ICML
// 2023) for rematerialization on graphs without a backward phase, generated
// here from a seed (the generator is memplan's own; the family's shape is
// the paper's).
//
// Nodes are laid out in layers of random width (1 to `max_width`). Each
// node of a layer reads 1 to `max_fan_in` distinct nodes of the layer
// before it, every node of that layer is read at least once, and with
// probability `skip_probability` a node also reads one node of a random
// earlier layer (a long skip edge, which keeps a tensor alive across many
// layers). Every node is one forward op writing one tensor of a random size
// (1 to `max_size_units` units of `unit_bytes`) at a random cost (1 to
// `max_cost`). The first layer reads the graph input `x`; the last layer's
// tensors are the graph outputs. The same (nodes, seed, options) always give
// the same graph, on every platform (the draws use only std::mt19937_64 and
// integer arithmetic).
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace memplan {

struct random_layered_options {
    std::size_t max_width = 8;         ///< nodes per layer, at most (at least 1)
    std::size_t max_fan_in = 3;        ///< reads from the layer before, at most
    double skip_probability = 0.2;     ///< a further read from a random earlier layer
    std::uint64_t unit_bytes = 65536;  ///< tensor sizes are multiples of this
    std::uint64_t max_size_units = 16; ///< and at most this many units
    std::uint64_t max_cost = 10;       ///< op costs are integers 1..max_cost
};

/// A random layered DAG of `nodes` ops (at least 2). Throws memplan::error
/// on bad options.
inline graph random_layered_dag(std::size_t nodes, std::uint64_t seed, const random_layered_options& o = {}) {
    if (nodes < 2) throw error("random_layered", "nodes must be at least 2, got " + std::to_string(nodes));
    if (o.max_width < 1 || o.max_fan_in < 1 || o.unit_bytes < 1 || o.max_size_units < 1 || o.max_cost < 1)
        throw error("random_layered", "max_width, max_fan_in, unit_bytes, max_size_units and max_cost must be >= 1");
    if (!(o.skip_probability >= 0 && o.skip_probability <= 1))
        throw error("random_layered", "skip_probability must be in [0, 1]");
    std::mt19937_64 rng(seed);
    // Uniform in [lo, hi] from raw 64-bit draws (std distributions differ across libraries).
    auto uniform = [&](std::uint64_t lo, std::uint64_t hi) { return lo + rng() % (hi - lo + 1); };
    auto coin = [&](double p) { return double(rng() >> 11) * 0x1.0p-53 < p; };

    graph g("random_layered_" + std::to_string(nodes) + "_" + std::to_string(seed));
    const auto x = g.add_tensor("x", o.unit_bytes * uniform(1, o.max_size_units));
    std::vector<std::vector<graph::id_type>> layers; // tensors of each layer
    std::size_t made = 0;
    while (made < nodes) {
        const std::size_t width = std::min<std::size_t>(static_cast<std::size_t>(uniform(1, o.max_width)), nodes - made);
        std::vector<graph::id_type> layer;
        std::vector<std::vector<graph::id_type>> reads(width);
        if (layers.empty()) {
            for (auto& r : reads) r.push_back(x);
        } else {
            const auto& prev = layers.back();
            for (auto& r : reads) {
                const std::size_t fan = std::min<std::size_t>(static_cast<std::size_t>(uniform(1, o.max_fan_in)), prev.size());
                while (r.size() < fan) {
                    const auto t = prev[static_cast<std::size_t>(uniform(0, prev.size() - 1))];
                    if (std::find(r.begin(), r.end(), t) == r.end()) r.push_back(t);
                }
            }
            // Every node of the layer before is read by someone.
            for (auto t : prev) {
                bool read = false;
                for (const auto& r : reads) read = read || std::find(r.begin(), r.end(), t) != r.end();
                if (!read) reads[static_cast<std::size_t>(uniform(0, width - 1))].push_back(t);
            }
            if (layers.size() >= 2)
                for (auto& r : reads)
                    if (coin(o.skip_probability)) {
                        const auto& earlier = layers[static_cast<std::size_t>(uniform(0, layers.size() - 2))];
                        const auto t = earlier[static_cast<std::size_t>(uniform(0, earlier.size() - 1))];
                        if (std::find(r.begin(), r.end(), t) == r.end()) r.push_back(t);
                    }
        }
        for (std::size_t i = 0; i < width; ++i) {
            const std::string id = std::to_string(made);
            op node;
            node.name = "n" + id;
            node.inputs = std::move(reads[i]);
            node.outputs.push_back(g.add_tensor("t" + id, o.unit_bytes * uniform(1, o.max_size_units)));
            node.cost = static_cast<double>(uniform(1, o.max_cost));
            node.phase = phase::forward;
            layer.push_back(node.outputs.front());
            g.add_op(std::move(node));
            ++made;
        }
        layers.push_back(std::move(layer));
    }
    for (auto t : layers.back()) g.add_output(t);
    return g;
}

} // namespace memplan
