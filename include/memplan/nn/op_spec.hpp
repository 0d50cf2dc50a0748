// What a layer contributes to a training graph, independent of names, data
// type and device.
//
// A layer lowers to forward and backward op specs over *slots*: its inputs,
// its output, its parameters and state, tensors private to it (saved
// statistics, masks, attention scores) and the gradients of all of these.
// nn/training.hpp binds slots to graph tensors, sizes them for the run's
// dtype and prices each op with the device's roofline; a training engine can
// run the same specs with real kernels. Passes, implementation variants and
// parameter roles are enums: a backend switches on them, and their graph
// names come from the to_string tables below, the one place they are spelt.
#pragma once

#include <memplan/graph/graph.hpp>
#include <memplan/nn/device.hpp>
#include <memplan/nn/shape.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan::nn {

/// Which computation of a layer an op performs; its graph name is
/// "<layer>.<to_string(pass)>". A backend's kernel switches on it.
enum class op_pass : std::uint8_t {
    fwd,         ///< the forward op of a one-op layer
    bwd,         ///< the backward op of a one-op layer
    bwd_data,    ///< gradient of a weight product's input
    bwd_filter,  ///< weight gradient of a convolution
    bwd_weight,  ///< weight gradient of a linear layer or an embedding table
    scores,      ///< attention: Q K^T / sqrt(d_head)
    softmax,     ///< attention: softmax over the scores
    dropout,     ///< attention: dropout on the probabilities
    context,     ///< attention: probabilities times V
    context_bwd, ///< attention: gradients of the probabilities and of V
    dropout_bwd, ///< attention: gradient through the dropout
    softmax_bwd, ///< attention: gradient of the scores
    scores_bwd,  ///< attention: gradients of Q and K
};

/// The graph name of a pass ("fwd", "bwd_data", ...).
constexpr std::string_view to_string(op_pass p) noexcept {
    switch (p) {
    case op_pass::fwd: return "fwd";
    case op_pass::bwd: return "bwd";
    case op_pass::bwd_data: return "bwd_data";
    case op_pass::bwd_filter: return "bwd_filter";
    case op_pass::bwd_weight: return "bwd_weight";
    case op_pass::scores: return "scores";
    case op_pass::softmax: return "softmax";
    case op_pass::dropout: return "dropout";
    case op_pass::context: return "context";
    case op_pass::context_bwd: return "context_bwd";
    case op_pass::dropout_bwd: return "dropout_bwd";
    case op_pass::softmax_bwd: return "softmax_bwd";
    case op_pass::scores_bwd: return "scores_bwd";
    }
    return "?";
}

/// Every pass, in declaration order.
inline constexpr std::array<op_pass, 13> all_op_passes{
    op_pass::fwd,     op_pass::bwd,     op_pass::bwd_data,    op_pass::bwd_filter,  op_pass::bwd_weight,
    op_pass::scores,  op_pass::softmax, op_pass::dropout,     op_pass::context,     op_pass::context_bwd,
    op_pass::dropout_bwd, op_pass::softmax_bwd, op_pass::scores_bwd};

/// The pass an op name suffix denotes (read from a file); nullopt for a suffix no layer uses.
constexpr std::optional<op_pass> parse_op_pass(std::string_view suffix) noexcept {
    for (auto p : all_op_passes)
        if (to_string(p) == suffix) return p;
    return std::nullopt;
}

/// One implementation of an op, as a graph variant names it
/// (`to_string`). `none`: the op has no variants (never a graph name).
enum class impl_kind : std::uint8_t {
    none,
    implicit_gemm, ///< convolution without a workspace
    gemm_im2col,   ///< convolution as a GEMM over an im2col column buffer
    winograd,      ///< Winograd F(2x2, 3x3) convolution
    from_input,    ///< backward that reads the forward input (batch-norm)
    from_output,   ///< backward that reads the forward output (batch-norm, ReLU)
    from_mask,     ///< backward that reads a 1-bit mask (ReLU)
};

/// Every impl_kind that names a graph variant, in declaration order.
inline constexpr std::array<impl_kind, 6> named_impl_kinds{impl_kind::implicit_gemm, impl_kind::gemm_im2col,
                                                           impl_kind::winograd,      impl_kind::from_input,
                                                           impl_kind::from_output,   impl_kind::from_mask};

/// The graph name of an implementation ("gemm_im2col", "from_mask", ...); empty for `none`.
constexpr std::string_view to_string(impl_kind k) noexcept {
    switch (k) {
    case impl_kind::none: return "";
    case impl_kind::implicit_gemm: return "implicit_gemm";
    case impl_kind::gemm_im2col: return "gemm_im2col";
    case impl_kind::winograd: return "winograd";
    case impl_kind::from_input: return "from_input";
    case impl_kind::from_output: return "from_output";
    case impl_kind::from_mask: return "from_mask";
    }
    return "?";
}

/// The implementation a graph variant name denotes (read from a file); nullopt for a name no layer uses.
constexpr std::optional<impl_kind> parse_impl_kind(std::string_view name) noexcept {
    for (auto k : named_impl_kinds)
        if (to_string(k) == name) return k;
    return std::nullopt;
}

/// What a parameter or state tensor is to its layer; its graph name is
/// "<layer>.<to_string(role)>". Initialisation depends on it.
enum class param_role : std::uint8_t {
    weight,       ///< "w": a weight matrix, filter or embedding table
    bias,         ///< "b"
    gamma,        ///< normalisation scale
    beta,         ///< normalisation shift
    running_mean, ///< batch-norm state
    running_var,  ///< batch-norm state
};

/// The graph name suffix of a parameter role ("w", "b", "gamma", ...).
constexpr std::string_view to_string(param_role r) noexcept {
    switch (r) {
    case param_role::weight: return "w";
    case param_role::bias: return "b";
    case param_role::gamma: return "gamma";
    case param_role::beta: return "beta";
    case param_role::running_mean: return "running_mean";
    case param_role::running_var: return "running_var";
    }
    return "?";
}

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

/// A parameter or state tensor of a layer; its graph name is "<layer>.<suffix()>".
struct param_spec {
    param_role role = param_role::weight;
    nn::shape shape;
    bool trainable = true; ///< false: persistent state that gets no gradient

    std::string suffix() const { return std::string(to_string(role)); }
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
    impl_kind kind = impl_kind::none;
    double time_factor = 1.0;
    std::uint64_t workspace_values = 0;
    std::vector<slot> inputs{}; ///< what this implementation reads (a subset of the op's); empty: all

    /// The graph variant's name.
    std::string name() const { return std::string(to_string(kind)); }
};

/// One op of a layer. Its graph name is "<layer>.<suffix()>". Bytes moved
/// are not listed: the derivation takes them as the bytes of all inputs and
/// outputs (each read or written once).
struct op_spec {
    op_pass pass = op_pass::fwd;
    memplan::phase phase = memplan::phase::forward;
    compute_kind kind = compute_kind::other;
    std::vector<slot> inputs;
    std::vector<slot> outputs;
    double flops = 0;
    std::uint64_t workspace_values = 0; ///< used when there are no variants
    std::vector<impl_spec> variants;     ///< the first is the default
    std::vector<std::pair<slot, slot>> inplace; ///< (input, output) that may share a buffer
    /// Scratch that is fp32 whatever the training type (accumulators of a
    /// fused kernel), in values; added to `workspace_values`'s bytes.
    std::uint64_t workspace_f32_values = 0;

    /// "fwd", "bwd_data", "softmax", ...: the op's name within its layer.
    std::string suffix() const { return std::string(to_string(pass)); }
    /// Whether `k` is one of the variants.
    bool offers(impl_kind k) const noexcept {
        for (const auto& v : variants)
            if (v.kind == k) return true;
        return false;
    }
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
/// the input, and the weight gradient (pass `weight_grad`), which reads the
/// forward input. `mm` is the FLOPs of one product; the bias adds `bias_flops`
/// to the forward and to the weight gradient. Each of the three ops may run
/// as any of `variants` (e.g. convolution algorithms).
inline layer_ops weight_product_ops(double mm, bool bias, double bias_flops, op_pass weight_grad,
                                    const std::vector<impl_spec>& variants = {}) {
    layer_ops ops;
    op_spec fwd{op_pass::fwd, phase::forward, compute_kind::matmul, {slot::input(0), slot::param(0)}, {slot::output()},
                mm + bias_flops, 0, variants, {}};
    if (bias) fwd.inputs.push_back(slot::param(1));
    ops.forward.push_back(std::move(fwd));
    ops.backward.push_back({op_pass::bwd_data, phase::backward, compute_kind::matmul, {slot::grad_output(), slot::param(0)},
                            {slot::grad_input(0)}, mm, 0, variants, {}});
    op_spec weight{weight_grad, phase::backward, compute_kind::matmul, {slot::input(0), slot::grad_output()},
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
