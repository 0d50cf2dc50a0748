// Softmax cross-entropy loss: logits (class axis 1 as PyTorch, or the last
// axis for sequence models) and int64 labels -> a scalar fp32 loss.
//
// The forward saves the log-probabilities (it may write them over the
// logits); the backward reads them and the labels. The loss is the root of
// the backward pass: its gradient is the constant 1, so no tensor carries it.
#pragma once

#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

struct softmax_cross_entropy {
    static constexpr std::string_view kind = "softmax_cross_entropy";
    bool class_axis_last = false; ///< classes on the last axis (N, S, V) instead of axis 1 (N, C, ...)

    /// Inputs: logits, labels shaped as the logits without the class axis.
    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 2, name, kind);
        detail::expect_floating(in[0], 0, 0, "(N, C, ...)", name, kind);
        const auto& s = in[0].shape;
        if (s.rank() < 2) shape_error(name, kind, "logits shape " + s.to_string() + " has no class axis");
        auto dims = s.dims;
        dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(class_axis_last ? s.rank() - 1 : 1));
        if (in[1].elem != element::i64 || in[1].shape != shape(dims))
            shape_error(name, kind, "labels " + in[1].shape.to_string() + " (" + std::string(to_string(in[1].elem)) +
                                        ") must be i64 of shape " + shape(dims).to_string() + " for logits " +
                                        s.to_string());
        return {shape{}, element::f32};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.inputs[0].shape.numel());
        layer_ops ops;
        ops.internals.push_back({"log_probs", {c.inputs[0].shape, element::floating}});
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::other, {slot::input(0), slot::input(1)},
                               {slot::output(), slot::internal(0)}, 5 * n, 0, {},
                               {{slot::input(0), slot::internal(0)}}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::other, {slot::internal(0), slot::input(1)},
                                {slot::grad_input(0)}, 3 * n, 0, {}, {{slot::internal(0), slot::grad_input(0)}}});
        return ops;
    }
};

} // namespace memplan::nn
