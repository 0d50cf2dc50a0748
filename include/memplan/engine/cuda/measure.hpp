// Measuring a training graph on the GPU: the other half of profile.hpp.
// `measure` times every op of the graph on the CUDA backend (the naive
// executor, each step synchronised, median of a few training steps) and asks
// cuDNN's Find for the time and workspace of each convolution variant's
// algorithm. Declarations only; defined in memplan::cuda's library. Needs a
// device: throws memplan::error("cuda", ...) without one.
#pragma once

#include <memplan/engine/cuda/profile.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/nn/network.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace memplan::engine::cuda {

struct measure_options {
    int repeats = 3; ///< training steps timed; the median per op is kept
    /// Data of each graph input (name, raw bytes); inputs not listed get zeros (labels 0).
    std::vector<std::pair<std::string, std::vector<std::byte>>> inputs;
    memplan::optimizer opt = memplan::optimizer::sgd_momentum;
};

/// Measures every op of `g` (from `training_graph(net, ..., prog)`) on device 0.
profile_table measure(const nn::network& net, const graph& g, const training_program& prog,
                      const measure_options& o = {});

} // namespace memplan::engine::cuda
