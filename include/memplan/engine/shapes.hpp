// What every backend reads the same way from a kernel_call: which saved
// tensor a backward variant reads, and the geometry of a layer's op taken
// from the network's shapes, checked against the tensors the step binds.
//
// The CPU backend (engine/cpu/) and the CUDA backend (src/cuda/) both call
// these, so a layer's shapes are interpreted, and validated, in one place; a
// mismatch is a memplan::error naming the op, never a kernel out of bounds.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/engine/program.hpp>
#include <memplan/nn/attention.hpp>
#include <memplan/nn/conv.hpp>
#include <memplan/nn/elementwise.hpp>
#include <memplan/nn/linear.hpp>
#include <memplan/nn/loss.hpp>
#include <memplan/nn/norm.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace memplan::engine {

/// ReLU's backward reads the 1-bit mask: its variant says so, or (no
/// variant) the step binds the mask.
inline bool reads_mask(const kernel_call& c) {
    return c.variant == nn::impl_kind::from_mask ||
           (c.variant == nn::impl_kind::none && c.slot(nn::slot::internal(0)));
}

/// Batch-norm's backward starts from the output: its variant says so, or (no
/// variant) the step does not bind the input.
inline bool reads_output(const kernel_call& c) {
    return c.variant == nn::impl_kind::from_output ||
           (c.variant == nn::impl_kind::none && !c.slot(nn::slot::input(0)));
}

/// An extent or an offset, in values.
using extent = std::int64_t;

/// Throws the shape error of op `c` (category "engine").
[[noreturn]] inline void shape_fail(const kernel_call& c, const std::string& what) {
    throw error("engine", "op '" + c.name() + "': " + what);
}

/// The memory of slot `s`; throws (category `category`) naming the op when
/// the step does not bind it.
inline tensor_ref bound_slot(std::string_view category, const kernel_call& c, nn::slot s, const char* what) {
    auto r = c.slot(s);
    if (!r) throw error(category, "op '" + c.name() + "': needs " + what + " but the step does not bind it");
    return r;
}

/// True for the forward (fwd) of a one-op layer, false for its backward
/// (bwd); throws (category `category`) naming the op and `backend` for any
/// other pass.
inline bool is_forward_pass(std::string_view category, std::string_view backend, const kernel_call& c) {
    switch (c.pass()) {
    case nn::op_pass::fwd: return true;
    case nn::op_pass::bwd: return false;
    default:
        throw error(category, "op '" + c.name() + "': the " + std::string(backend) +
                                  " backend has no kernel for this op");
    }
}

/// Product of the extents of `s` from axis `from` to the end (1 when none).
inline extent inner_size(const nn::shape& s, std::size_t from) {
    extent n = 1;
    for (std::size_t a = from; a < s.rank(); ++a) n *= static_cast<extent>(s[a]);
    return n;
}

/// Checks that slot `s`, when the step binds it, holds `numel` values.
inline void expect_numel(const kernel_call& c, nn::slot s, extent numel, const char* what) {
    const auto r = c.slot(s);
    if (r && static_cast<extent>(r.numel()) != numel)
        shape_fail(c, std::string(what) + " has " + std::to_string(r.numel()) +
                          " values where the layer's shapes give " + std::to_string(numel));
}

/// The shape of node input `i` and of the node's output, checked for rank
/// (`rank` 0: any) and for the step's bindings of the input and its gradient.
inline const nn::shape& input_shape(const kernel_call& c, std::uint32_t i, std::size_t rank = 0) {
    if (i >= c.node_inputs.size())
        shape_fail(c, "reads input " + std::to_string(i) + " of a layer with " + std::to_string(c.node_inputs.size()));
    const auto& s = c.node_inputs[i].shape;
    if (rank && s.rank() != rank)
        shape_fail(c, "input " + std::to_string(i) + " has shape " + s.to_string() + ", not rank " +
                          std::to_string(rank));
    return s;
}
inline const nn::shape& output_shape(const kernel_call& c) {
    if (!c.node_output) shape_fail(c, "reached the backend without the layer's output shape");
    return c.node_output->shape;
}

// ----- convolution ------------------------------------------------------------

/// conv2d: x (n, c, h, w) -> y (n, k, ho, wo), filter (k, c / groups, r, s).
struct conv_geometry {
    extent n, c, h, w, k, r, s, ho, wo, sh, sw, ph, pw, dh, dw, groups;
    extent cg() const { return c / groups; }
    extent kg() const { return k / groups; }
    extent rows() const { return cg() * r * s; } ///< im2col rows of one group
    extent cols() const { return ho * wo; }      ///< im2col columns
};

inline conv_geometry conv_shape(const nn::conv2d& l, const kernel_call& c) {
    const auto& x = input_shape(c, 0, 4);
    const auto& y = output_shape(c);
    auto e = [](std::uint64_t v) { return static_cast<extent>(v); };
    if (y.rank() != 4 || x[1] != l.in_channels || y[1] != l.out_channels || y[0] != x[0])
        shape_fail(c, "shapes " + x.to_string() + " -> " + y.to_string() + " do not fit a convolution of " +
                          std::to_string(l.in_channels) + " -> " + std::to_string(l.out_channels) + " channels");
    const conv_geometry q{e(x[0]), e(x[1]), e(x[2]), e(x[3]), e(y[1]), e(l.kernel_h), e(l.kernel_w), e(y[2]),
                          e(y[3]), e(l.stride_h), e(l.stride_w), e(l.pad_h), e(l.pad_w), e(l.dilation_h),
                          e(l.dilation_w), e(l.groups)};
    using nn::slot;
    expect_numel(c, slot::input(0), q.n * q.c * q.h * q.w, "the input");
    expect_numel(c, slot::grad_input(0), q.n * q.c * q.h * q.w, "the input gradient");
    expect_numel(c, slot::output(), q.n * q.k * q.cols(), "the output");
    expect_numel(c, slot::grad_output(), q.n * q.k * q.cols(), "the output gradient");
    expect_numel(c, slot::param(0), q.k * q.rows(), "the filter");
    expect_numel(c, slot::grad_param(0), q.k * q.rows(), "the filter gradient");
    return q;
}

// ----- fully connected -----------------------------------------------------------

/// x (rows, in) -> y (rows, out) over the last axis; weight (out, in).
struct linear_geometry {
    extent rows, in, out;
};

inline linear_geometry linear_shape(const nn::linear& l, const kernel_call& c) {
    const auto& x = input_shape(c, 0);
    const auto& y = output_shape(c);
    if (x.rank() == 0 || y.rank() != x.rank() || x[x.rank() - 1] != l.in_features ||
        y[y.rank() - 1] != l.out_features || x.numel() / l.in_features != y.numel() / l.out_features)
        shape_fail(c, "shapes " + x.to_string() + " -> " + y.to_string() + " do not fit a linear layer of " +
                          std::to_string(l.in_features) + " -> " + std::to_string(l.out_features) + " features");
    const linear_geometry q{static_cast<extent>(x.numel() / l.in_features), static_cast<extent>(l.in_features),
                            static_cast<extent>(l.out_features)};
    using nn::slot;
    expect_numel(c, slot::input(0), q.rows * q.in, "the input");
    expect_numel(c, slot::grad_input(0), q.rows * q.in, "the input gradient");
    expect_numel(c, slot::output(), q.rows * q.out, "the output");
    expect_numel(c, slot::grad_output(), q.rows * q.out, "the output gradient");
    expect_numel(c, slot::param(0), q.out * q.in, "the weight");
    expect_numel(c, slot::grad_param(0), q.out * q.in, "the weight gradient");
    if (l.bias) {
        expect_numel(c, slot::param(1), q.out, "the bias");
        expect_numel(c, slot::grad_param(1), q.out, "the bias gradient");
    }
    return q;
}

// ----- normalisation ----------------------------------------------------------------

/// Batch-norm over (n, c, s...): statistics per channel, s the spatial size.
struct batch_norm_geometry {
    extent n, c, s;
};

inline batch_norm_geometry batch_norm_shape(const nn::batch_norm& l, const kernel_call& c) {
    const auto& y = output_shape(c);
    if (y.rank() < 2 || y[1] != l.channels)
        shape_fail(c, "output shape " + y.to_string() + " does not fit a batch-norm of " + std::to_string(l.channels) +
                          " channels");
    const batch_norm_geometry q{static_cast<extent>(y[0]), static_cast<extent>(y[1]), inner_size(y, 2)};
    const extent values = q.n * q.c * q.s;
    using nn::slot;
    expect_numel(c, slot::input(0), values, "the input");
    expect_numel(c, slot::grad_input(0), values, "the input gradient");
    expect_numel(c, slot::output(), values, "the output");
    expect_numel(c, slot::grad_output(), values, "the output gradient");
    for (std::uint32_t i = 0; i < 2; ++i) {
        expect_numel(c, slot::param(i), q.c, i == 0 ? "gamma" : "beta");
        expect_numel(c, slot::grad_param(i), q.c, i == 0 ? "the gamma gradient" : "the beta gradient");
        expect_numel(c, slot::state(i), q.c, i == 0 ? "the running mean" : "the running variance");
    }
    expect_numel(c, slot::internal(0), 2 * q.c, "the saved statistics");
    return q;
}

/// Layer-norm over rows of the last axis (`features` wide).
struct layer_norm_geometry {
    extent rows, features;
};

inline layer_norm_geometry layer_norm_shape(const nn::layer_norm& l, const kernel_call& c) {
    const auto& y = output_shape(c);
    if (y.rank() == 0 || y[y.rank() - 1] != l.features)
        shape_fail(c, "output shape " + y.to_string() + " does not fit a layer-norm of " +
                          std::to_string(l.features) + " features");
    const layer_norm_geometry q{static_cast<extent>(y.numel() / l.features), static_cast<extent>(l.features)};
    using nn::slot;
    expect_numel(c, slot::input(0), q.rows * q.features, "the input");
    expect_numel(c, slot::grad_input(0), q.rows * q.features, "the input gradient");
    expect_numel(c, slot::output(), q.rows * q.features, "the output");
    expect_numel(c, slot::grad_output(), q.rows * q.features, "the output gradient");
    for (std::uint32_t i = 0; i < 2; ++i) {
        expect_numel(c, slot::param(i), q.features, i == 0 ? "gamma" : "beta");
        expect_numel(c, slot::grad_param(i), q.features, i == 0 ? "the gamma gradient" : "the beta gradient");
    }
    expect_numel(c, slot::internal(0), 2 * q.rows, "the saved statistics");
    return q;
}

// ----- pooling ------------------------------------------------------------------

/// x (planes = N * C, h, w) -> y (planes, ho, wo); a 2-D output (global pooling) is 1 x 1.
struct pool_geometry {
    extent planes, h, w, ho, wo;
};

inline pool_geometry pool_shape(const kernel_call& c) {
    const auto& x = input_shape(c, 0, 4);
    const auto& y = output_shape(c);
    auto e = [](std::uint64_t v) { return static_cast<extent>(v); };
    if ((y.rank() != 4 && y.rank() != 2) || y[0] != x[0] || y[1] != x[1])
        shape_fail(c, "shapes " + x.to_string() + " -> " + y.to_string() + " do not fit a pooling");
    const pool_geometry q{e(x[0]) * e(x[1]), e(x[2]), e(x[3]), y.rank() == 4 ? e(y[2]) : 1,
                          y.rank() == 4 ? e(y[3]) : 1};
    using nn::slot;
    expect_numel(c, slot::input(0), q.planes * q.h * q.w, "the input");
    expect_numel(c, slot::grad_input(0), q.planes * q.h * q.w, "the input gradient");
    expect_numel(c, slot::output(), q.planes * q.ho * q.wo, "the output");
    expect_numel(c, slot::grad_output(), q.planes * q.ho * q.wo, "the output gradient");
    return q;
}

// ----- concatenation ----------------------------------------------------------------

/// The output as (outer, total) rows; input i is the column block of width(i).
struct concat_geometry {
    extent outer, total;
    std::span<const nn::tensor_info> inputs;
    extent width(std::size_t i) const { return static_cast<extent>(inputs[i].numel()) / outer; }
};

inline concat_geometry concat_shape(const nn::concat& l, const kernel_call& c) {
    const auto& y = output_shape(c);
    if (l.axis >= y.rank()) shape_fail(c, "axis " + std::to_string(l.axis) + " is outside " + y.to_string());
    extent outer = 1;
    for (std::size_t a = 0; a < l.axis; ++a) outer *= static_cast<extent>(y[a]);
    const concat_geometry q{outer, static_cast<extent>(y[l.axis]) * inner_size(y, l.axis + 1), c.node_inputs};
    extent sum = 0;
    for (std::size_t i = 0; i < q.inputs.size(); ++i) sum += q.width(i);
    if (sum != q.total)
        shape_fail(c, "the inputs' widths add up to " + std::to_string(sum) + " of the output's " +
                          std::to_string(q.total));
    return q;
}

// ----- attention ----------------------------------------------------------------------

/// Heads are column blocks `dh` wide of Q, K, V: (N, S, D) tensors, or
/// column thirds of one packed (N, S, 3D) input (leading dimension `ld`).
/// The internal slots are nn::attention's without dropout.
struct attention_geometry {
    bool packed;
    extent n, sq, sk, d, heads, dh, ld, off_k, off_v;
    float scale; ///< 1 / sqrt(dh)
    nn::slot q, k, v;
    nn::slot scores = nn::slot::internal(0), probs = nn::slot::internal(1), d_probs = nn::slot::internal(2),
             d_scores = nn::slot::internal(3);
    nn::slot d_v; ///< internal(4) when packed, else the gradient of V
    extent plane() const { return sq * sk; } ///< one head's scores
};

inline attention_geometry attention_shape(const nn::attention& l, const kernel_call& c) {
    using nn::slot;
    const std::size_t inputs = c.node_inputs.size();
    if (inputs != 1 && inputs != 3)
        shape_fail(c, "attention takes 1 or 3 inputs, the layer has " + std::to_string(inputs));
    const bool packed = inputs == 1;
    const auto& qs = input_shape(c, 0, 3);
    auto e = [](std::uint64_t v) { return static_cast<extent>(v); };
    attention_geometry g{};
    g.packed = packed;
    g.n = e(qs[0]);
    g.sq = e(qs[1]);
    g.d = e(qs[2]) / (packed ? 3 : 1);
    g.sk = packed ? g.sq : e(input_shape(c, 1, 3)[1]);
    g.heads = e(l.heads);
    if (g.heads <= 0 || g.d % g.heads)
        shape_fail(c, "width " + std::to_string(g.d) + " is not divisible by " + std::to_string(g.heads) + " heads");
    g.dh = g.d / g.heads;
    g.ld = packed ? 3 * g.d : g.d;
    g.off_k = packed ? g.d : 0;
    g.off_v = packed ? 2 * g.d : 0;
    g.scale = 1.0f / std::sqrt(static_cast<float>(g.dh));
    g.q = slot::input(0);
    g.k = packed ? slot::input(0) : slot::input(1);
    g.v = packed ? slot::input(0) : slot::input(2);
    g.d_v = packed ? slot::internal(4) : slot::grad_input(2);
    const extent per_head = g.n * g.heads * g.plane();
    expect_numel(c, g.scores, per_head, "the scores");
    expect_numel(c, g.probs, per_head, "the probabilities");
    expect_numel(c, g.d_probs, per_head, "the probabilities' gradient");
    expect_numel(c, g.d_scores, per_head, "the scores' gradient");
    expect_numel(c, slot::output(), g.n * g.sq * g.d, "the output");
    expect_numel(c, slot::grad_output(), g.n * g.sq * g.d, "the output gradient");
    return g;
}

// ----- loss ------------------------------------------------------------------------------

/// Logits as (outer, classes, inner): classes on axis 1, or on the last axis.
struct class_geometry {
    extent outer, classes, inner;
    extent positions() const { return outer * inner; }
};

inline class_geometry loss_shape(const nn::softmax_cross_entropy& l, const kernel_call& c) {
    const auto& s = input_shape(c, 0);
    if (s.rank() < 2) shape_fail(c, "logits shape " + s.to_string() + " has no class axis");
    const std::size_t axis = l.class_axis_last ? s.rank() - 1 : 1;
    extent outer = 1;
    for (std::size_t a = 0; a < axis; ++a) outer *= static_cast<extent>(s[a]);
    const class_geometry q{outer, static_cast<extent>(s[axis]), inner_size(s, axis + 1)};
    using nn::slot;
    expect_numel(c, slot::input(0), q.outer * q.classes * q.inner, "the logits");
    expect_numel(c, slot::internal(0), q.outer * q.classes * q.inner, "the log-probabilities");
    expect_numel(c, slot::grad_input(0), q.outer * q.classes * q.inner, "the logits gradient");
    expect_numel(c, slot::input(1), q.positions(), "the labels");
    return q;
}

} // namespace memplan::engine
