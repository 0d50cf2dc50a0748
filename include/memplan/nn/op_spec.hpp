// What a layer contributes to a training graph, independent of names, data
// type and device.
//
// A layer lowers to forward and backward op specs over *slots*: its inputs,
// its output, its parameters and state, tensors private to it (saved
// statistics, masks, attention scores) and the gradients of all of these.
// nn/training.hpp binds slots to graph tensors, sizes them for the run's
// dtype and prices each op with the device's roofline; a training engine can
// run the same specs with real kernels.
#pragma once

#include <memplan/graph/graph.hpp>
#include <memplan/nn/device.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace memplan::nn {

enum class slot_kind : std::uint8_t {
    input,       ///< forward input `index`
    output,      ///< the layer's output
    param,       ///< trainable parameter `index` (counting only the trainable ones of params())
    state,       ///< non-trainable persistent state `index` (counting only those of params())
    internal,    ///< tensor `index` of layer_ops::internals
    grad_output, ///< gradient of the output (the incoming gradient)
    grad_input,  ///< gradient of input `index`
    grad_param,  ///< gradient of parameter `index`
};

/// A tensor as a layer sees it.
struct slot {
    slot_kind kind = slot_kind::input;
    std::uint32_t index = 0;

    static constexpr slot input(std::uint32_t i = 0) noexcept { return {slot_kind::input, i}; }
    static constexpr slot output() noexcept { return {slot_kind::output, 0}; }
    static constexpr slot param(std::uint32_t i) noexcept { return {slot_kind::param, i}; }
    static constexpr slot state(std::uint32_t i) noexcept { return {slot_kind::state, i}; }
    static constexpr slot internal(std::uint32_t i) noexcept { return {slot_kind::internal, i}; }
    static constexpr slot grad_output() noexcept { return {slot_kind::grad_output, 0}; }
    static constexpr slot grad_input(std::uint32_t i = 0) noexcept { return {slot_kind::grad_input, i}; }
    static constexpr slot grad_param(std::uint32_t i) noexcept { return {slot_kind::grad_param, i}; }

    friend bool operator==(const slot&, const slot&) = default;
};

/// A parameter or state tensor of a layer; its graph name is "<layer>.<suffix>".
struct param_spec {
    std::string suffix; ///< "w", "b", "gamma", "running_mean", ...
    nn::shape shape;
    bool trainable = true; ///< false: persistent state that gets no gradient
};

/// A tensor private to one layer; its graph name is "<layer>.<suffix>".
struct internal_spec {
    std::string suffix;
    tensor_info info;
};

/// One implementation of an op. Its time is the roofline time of the op
/// reading `inputs` scaled by `time_factor`; its scratch memory is
/// `workspace_values` floating values.
struct impl_spec {
    std::string name;
    double time_factor = 1.0;
    std::uint64_t workspace_values = 0;
    std::vector<slot> inputs{}; ///< what this implementation reads (a subset of the op's); empty: all
};

/// One op of a layer. Its graph name is "<layer>.<suffix>". Bytes moved are
/// not listed: the derivation takes them as the bytes of all inputs and
/// outputs (each read or written once).
struct op_spec {
    std::string suffix; ///< "fwd", "bwd_data", "bwd_filter", "softmax", ...
    memplan::phase phase = memplan::phase::forward;
    compute_kind kind = compute_kind::other;
    std::vector<slot> inputs;
    std::vector<slot> outputs;
    double flops = 0;
    std::uint64_t workspace_values = 0; ///< used when there are no variants
    std::vector<impl_spec> variants;     ///< the first is the default
    std::vector<std::pair<slot, slot>> inplace; ///< (input, output) that may share a buffer
};

/// Everything a layer contributes: its private tensors, its forward ops in
/// order, its backward ops in order, and which inputs simply receive the
/// output's gradient (element-wise add, views) without any op.
struct layer_ops {
    std::vector<internal_spec> internals;
    std::vector<op_spec> forward;
    std::vector<op_spec> backward;
    std::vector<bool> passthrough; ///< per input; empty means none
};

/// The three ops of a layer that is one matrix product with a weight and an
/// optional bias (linear, transposed convolution): forward, the gradient of
/// the input, and the weight gradient (named `weight_grad`), which reads the
/// forward input. `mm` is the FLOPs of one product; the bias adds `bias_flops`
/// to the forward and to the weight gradient. Each of the three ops may run
/// as any of `variants` (e.g. convolution algorithms).
inline layer_ops weight_product_ops(double mm, bool bias, double bias_flops, std::string weight_grad,
                                    const std::vector<impl_spec>& variants = {}) {
    layer_ops ops;
    op_spec fwd{"fwd", phase::forward, compute_kind::matmul, {slot::input(0), slot::param(0)}, {slot::output()},
                mm + bias_flops, 0, variants, {}};
    if (bias) fwd.inputs.push_back(slot::param(1));
    ops.forward.push_back(std::move(fwd));
    ops.backward.push_back({"bwd_data", phase::backward, compute_kind::matmul, {slot::grad_output(), slot::param(0)},
                            {slot::grad_input(0)}, mm, 0, variants, {}});
    op_spec weight{std::move(weight_grad), phase::backward, compute_kind::matmul, {slot::input(0), slot::grad_output()},
                   {slot::grad_param(0)}, mm + bias_flops, 0, variants, {}};
    if (bias) weight.outputs.push_back(slot::grad_param(1));
    ops.backward.push_back(std::move(weight));
    return ops;
}

/// What a layer knows when it lowers itself.
struct lower_context {
    std::span<const tensor_info> inputs;
    tensor_info output;
};

} // namespace memplan::nn
