// Measuring a training graph on the GPU: the other half of profile.hpp.
// `measure` times every op and every variant of the graph on the CUDA
// backend, as the CPU's profile_graph does: one pass per variant index (pass
// k runs each op with variants on its k-th, or its last when it has fewer),
// each a planned store-all training step, each op timed by a pair of CUDA
// events on the backend's stream (GPU time; the upload of the batch is
// outside every op). Each convolution variant's cuDNN algorithm is also run
// alone: its workspace query says whether cuDNN supports it and how much
// workspace the backend will ask for, and its median over a few runs is the
// variant's time. Declarations only; defined in memplan::cuda's library.
// Needs a device: throws memplan::error("cuda", ...) without one.
#pragma once

#include <memplan/engine/cuda/profile.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/nn/network.hpp>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace memplan::engine::cuda {

struct measure_options {
    int warmup = 1;  ///< untimed steps (and algorithm runs) first: cuDNN and cuBLAS pick kernels on first use
    int repeats = 3; ///< timed steps per pass (and runs per convolution algorithm); the median is kept
    /// Data of each graph input (name, raw bytes); inputs not listed get zeros (labels 0).
    std::vector<std::pair<std::string, std::vector<std::byte>>> inputs;
    memplan::optimizer opt = memplan::optimizer::sgd_momentum;
    /// The math type to time convolutions with: it must be the one the
    /// backend that runs the plan uses (backend_options::allow_tf32, same default).
    bool allow_tf32 = false;
};

/// Measures every op and variant of `g` (from `training_graph(net, ..., prog)`)
/// on device 0. A convolution variant cuDNN does not support is recorded
/// unsupported; one whose workspace cannot be allocated is recorded supported,
/// with its workspace bytes, not timed (and a reason). Throws memplan::error
/// naming the op when cuDNN fails other than by not supporting an algorithm.
profile_table measure(const nn::network& net, const graph& g, const training_program& prog,
                      const measure_options& o = {});

} // namespace memplan::engine::cuda
