// Pooling over (N, C, H, W): max pooling, average pooling, adaptive average
// pooling (torchvision's VGG head) and global average pooling to (N, C).
//
// Max pooling saves the position of each window's maximum as one byte (the
// window has at most 256 taps), so its backward needs neither x nor y.
// Average pooling's backward needs only the incoming gradient and the shape.
#pragma once

#include <memplan/nn/conv.hpp>
#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

namespace detail {

inline layer_ops pool_ops(double fwd_flops, double bwd_flops, const internal_spec* argmax) {
    layer_ops ops;
    op_spec fwd{op_pass::fwd, phase::forward, compute_kind::other, {slot::input(0)}, {slot::output()}, fwd_flops, 0, {}, {}};
    op_spec bwd{op_pass::bwd, phase::backward, compute_kind::other, {slot::grad_output()}, {slot::grad_input(0)}, bwd_flops,
                0, {}, {}};
    if (argmax) {
        ops.internals.push_back(*argmax);
        fwd.outputs.push_back(slot::internal(0));
        bwd.inputs = {slot::internal(0), slot::grad_output()};
    }
    ops.forward.push_back(std::move(fwd));
    ops.backward.push_back(std::move(bwd));
    return ops;
}

} // namespace detail

struct max_pool2d {
    static constexpr std::string_view kind = "max_pool2d";
    std::uint64_t kernel = 2, stride = 2, padding = 0;
    bool ceil_mode = false;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 4, "(N, C, H, W)", name, kind);
        if (kernel * kernel > 256) shape_error(name, kind, "windows of more than 256 taps are not supported");
        if (2 * padding > kernel) shape_error(name, kind, "padding must be at most half the kernel");
        const auto& s = in[0].shape;
        return {shape{s[0], s[1], detail::window_out(s[2], kernel, stride, padding, 1, ceil_mode, "height", s, name, kind),
                      detail::window_out(s[3], kernel, stride, padding, 1, ceil_mode, "width", s, name, kind)},
                element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double out = double(c.output.shape.numel());
        const internal_spec argmax{"argmax", {c.output.shape, element::u8}};
        return detail::pool_ops(out * double(kernel * kernel), double(c.inputs[0].shape.numel()), &argmax);
    }
};

struct avg_pool2d {
    static constexpr std::string_view kind = "avg_pool2d";
    std::uint64_t kernel = 2, stride = 2, padding = 0;
    bool ceil_mode = false;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 4, "(N, C, H, W)", name, kind);
        if (2 * padding > kernel) shape_error(name, kind, "padding must be at most half the kernel");
        const auto& s = in[0].shape;
        return {shape{s[0], s[1], detail::window_out(s[2], kernel, stride, padding, 1, ceil_mode, "height", s, name, kind),
                      detail::window_out(s[3], kernel, stride, padding, 1, ceil_mode, "width", s, name, kind)},
                element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double out = double(c.output.shape.numel());
        return detail::pool_ops(out * double(kernel * kernel), double(c.inputs[0].shape.numel()), nullptr);
    }
};

/// PyTorch's AdaptiveAvgPool2d: (N, C, H, W) -> (N, C, out_h, out_w), window
/// i covering [floor(i H / out_h), ceil((i + 1) H / out_h)).
struct adaptive_avg_pool2d {
    static constexpr std::string_view kind = "adaptive_avg_pool2d";
    std::uint64_t out_h = 1, out_w = 1;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 4, "(N, C, H, W)", name, kind);
        if (out_h == 0 || out_w == 0) shape_error(name, kind, "output size must be positive");
        const auto& s = in[0].shape;
        return {shape{s[0], s[1], out_h, out_w}, element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const auto& x = c.inputs[0].shape;
        // Each window spans at most ceil(H / out_h) + 1 rows (and columns).
        const double taps = double((x[2] + out_h - 1) / out_h + 1) * double((x[3] + out_w - 1) / out_w + 1);
        return detail::pool_ops(double(c.output.shape.numel()) * taps, double(x.numel()), nullptr);
    }
};

/// (N, C, H, W) -> (N, C): the mean over each channel's map.
struct global_avg_pool {
    static constexpr std::string_view kind = "global_avg_pool";

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 4, "(N, C, H, W)", name, kind);
        return {shape{in[0].shape[0], in[0].shape[1]}, element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.inputs[0].shape.numel());
        return detail::pool_ops(n, n, nullptr);
    }
};

} // namespace memplan::nn
