// Element-wise activations: ReLU (optionally capped, ReLU6) and GELU.
//
// ReLU's backward needs only where the input was positive, which it can read
// from the input, from the output, or from a 1-bit sign mask (MONeT, ICLR
// 2021): a mask is 1/32 of an fp32 activation, and it lets the forward run in
// place without keeping anything else. When the backward does not read the
// input, the forward may overwrite its input. By default (`choice`) the
// backward has both the output and the mask variant and a planner picks.
// GELU's backward needs its input. SwiGLU (Shazeer 2020; Llama's MLP) is
// silu(gate) * up in one fused op, as Megatron-Core and torch.compile run it:
// its backward reads both inputs, and no silu(gate) tensor exists.
#pragma once

#include <memplan/nn/norm.hpp>
#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

struct relu {
    static constexpr std::string_view kind = "relu";
    double cap = 0; ///< clip at this value when > 0 (6 for ReLU6)
    saved_tensor backward_from = saved_tensor::choice;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 0, "a tensor", name, kind);
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        op_spec fwd{op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0)}, {slot::output()}, n, 0, {}, {}};
        op_spec bwd{op_pass::bwd, phase::backward, compute_kind::pointwise, {}, {slot::grad_input(0)}, n, 0, {},
                    {{slot::grad_output(), slot::grad_input(0)}}};
        switch (backward_from) {
        case saved_tensor::input:
            bwd.inputs = {slot::input(0), slot::grad_output()};
            break;
        case saved_tensor::output:
            fwd.inplace.push_back({slot::input(0), slot::output()});
            bwd.inputs = {slot::output(), slot::grad_output()};
            break;
        case saved_tensor::mask:
            // (shape of x) at one bit per value; with a cap, the bit marks 0 < x < cap.
            ops.internals.push_back({"mask", {c.output.shape, element::bit}});
            fwd.outputs.push_back(slot::internal(0));
            fwd.inplace.push_back({slot::input(0), slot::output()});
            bwd.inputs = {slot::internal(0), slot::grad_output()};
            break;
        case saved_tensor::choice:
            // The forward writes y and the mask; the backward reads y (what
            // frameworks do, listed first) or only the mask.
            ops.internals.push_back({"mask", {c.output.shape, element::bit}});
            fwd.outputs.push_back(slot::internal(0));
            fwd.inplace.push_back({slot::input(0), slot::output()});
            bwd.inputs = {slot::output(), slot::internal(0), slot::grad_output()};
            bwd.variants = {{impl_kind::from_output, 1.0, 0, {slot::output(), slot::grad_output()}},
                            {impl_kind::from_mask, 1.0, 0, {slot::internal(0), slot::grad_output()}}};
            break;
        }
        ops.forward.push_back(std::move(fwd));
        ops.backward.push_back(std::move(bwd));
        return ops;
    }
};

/// GELU (tanh approximation as in GPT-2; erf form in BERT: same memory).
struct gelu {
    static constexpr std::string_view kind = "gelu";

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 0, "a tensor", name, kind);
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0)}, {slot::output()},
                               10 * n, 0, {}, {}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::pointwise, {slot::input(0), slot::grad_output()},
                                {slot::grad_input(0)}, 20 * n, 0, {}, {{slot::grad_output(), slot::grad_input(0)}}});
        return ops;
    }
};

/// SwiGLU: silu(gate) * up, with gate and up the two inputs of one shape.
struct swiglu {
    static constexpr std::string_view kind = "swiglu";

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 2, name, kind);
        detail::expect_floating(in[0], 0, 0, "a tensor", name, kind);
        detail::expect_floating(in[1], 1, 0, "a tensor", name, kind);
        if (in[0].shape != in[1].shape)
            shape_error(name, kind, "gate " + in[0].shape.to_string() + " and up " + in[1].shape.to_string() +
                                        " differ in shape");
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0), slot::input(1)},
                               {slot::output()}, 6 * n, 0, {}, {}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::pointwise,
                                {slot::input(0), slot::input(1), slot::grad_output()},
                                {slot::grad_input(0), slot::grad_input(1)}, 12 * n, 0, {},
                                {{slot::grad_output(), slot::grad_input(0)}}});
        return ops;
    }
};

} // namespace memplan::nn
