// Structural layers: element-wise add (residual connections), concatenation
// along an axis (Inception, U-Net skips), dropout and flatten.
//
// The gradient of add reaches both inputs unchanged, and flatten is a view,
// so neither has a backward op: their inputs' gradients are the output's
// gradient tensor itself (`passthrough`). Add may write over its first
// input; dropout keeps a one-byte keep-mask (PyTorch's bool mask) and may
// run in place, since its backward needs only the mask.
#pragma once

#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

struct add {
    static constexpr std::string_view kind = "add";

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 2, name, kind);
        detail::expect_floating(in[0], 0, 0, "a tensor", name, kind);
        detail::expect_floating(in[1], 1, 0, "a tensor", name, kind);
        if (in[0].shape != in[1].shape)
            shape_error(name, kind, "input shapes " + in[0].shape.to_string() + " and " + in[1].shape.to_string() +
                                        " differ");
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0), slot::input(1)},
                               {slot::output()}, double(c.output.shape.numel()), 0, {},
                               {{slot::input(0), slot::output()}}});
        ops.passthrough = {true, true};
        return ops;
    }
};

/// Concatenation along `axis` (1: channels of (N, C, H, W)). Backward copies
/// the incoming gradient's slices out, one tensor per input.
struct concat {
    static constexpr std::string_view kind = "concat";
    std::size_t axis = 1;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        if (in.empty()) shape_error(name, kind, "takes at least one input, got 0");
        for (std::size_t i = 0; i < in.size(); ++i) detail::expect_floating(in[i], i, 0, "a tensor", name, kind);
        const auto& s0 = in[0].shape;
        if (axis >= s0.rank())
            shape_error(name, kind, "axis " + std::to_string(axis) + " is out of range for input shape " + s0.to_string());
        auto dims = s0.dims;
        for (std::size_t i = 1; i < in.size(); ++i) {
            const auto& s = in[i].shape;
            bool ok = s.rank() == s0.rank();
            for (std::size_t a = 0; ok && a < s.rank(); ++a) ok = a == axis || s[a] == s0[a];
            if (!ok)
                shape_error(name, kind, "input " + std::to_string(i) + " has shape " + s.to_string() +
                                            " which does not match input 0 " + s0.to_string() +
                                            " outside axis " + std::to_string(axis));
            dims[axis] += s[axis];
        }
        return {shape(std::move(dims)), element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        layer_ops ops;
        op_spec fwd{op_pass::fwd, phase::forward, compute_kind::other, {}, {slot::output()}, 0, 0, {}, {}};
        op_spec bwd{op_pass::bwd, phase::backward, compute_kind::other, {slot::grad_output()}, {}, 0, 0, {}, {}};
        for (std::uint32_t i = 0; i < c.inputs.size(); ++i) {
            fwd.inputs.push_back(slot::input(i));
            bwd.outputs.push_back(slot::grad_input(i));
        }
        ops.forward.push_back(std::move(fwd));
        ops.backward.push_back(std::move(bwd));
        return ops;
    }
};

struct dropout {
    static constexpr std::string_view kind = "dropout";
    double p = 0.1; ///< drop probability

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 0, "a tensor", name, kind);
        if (!(p >= 0 && p < 1)) shape_error(name, kind, "drop probability must be in [0, 1)");
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.internals.push_back({"mask", {c.output.shape, element::u8}});
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0)},
                               {slot::output(), slot::internal(0)}, 2 * n, 0, {}, {{slot::input(0), slot::output()}}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::pointwise, {slot::internal(0), slot::grad_output()},
                                {slot::grad_input(0)}, n, 0, {}, {{slot::grad_output(), slot::grad_input(0)}}});
        return ops;
    }
};

/// (N, d1, d2, ...) -> (N, d1 * d2 * ...): a view, run in place.
struct flatten {
    static constexpr std::string_view kind = "flatten";

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 0, "(N, ...)", name, kind);
        const auto& s = in[0].shape;
        std::uint64_t rest = 1;
        for (std::size_t a = 1; a < s.rank(); ++a) rest *= s[a];
        return {shape{s[0], rest}, element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context&) const {
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0)}, {slot::output()}, 0, 0,
                               {}, {{slot::input(0), slot::output()}}});
        ops.passthrough = {true};
        return ops;
    }
};

} // namespace memplan::nn
