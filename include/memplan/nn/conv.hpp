// Convolution layers: conv2d (stride, padding, dilation, groups) and the
// transposed convolution of U-Net's up-sampling path.
//
// Convolutions offer algorithms with different speed and scratch memory, as
// cuDNN does (MONeT, ICLR 2021, picks one per op). The table below is an
// estimate to be replaced by measured values: implicit GEMM needs no
// workspace but runs 1.3x the GEMM time; GEMM over an im2col column buffer
// (N * C_in * kh * kw * H_out * W_out values) is the reference; Winograd
// F(2x2, 3x3) for dense 3x3 stride-1 convolutions runs 0.55x with a workspace
// of the transformed tiles (4x input + 4x output + 16/9 x filter). 1x1
// stride-1 convolutions are plain GEMMs, grouped ones direct kernels: no
// variants. Implicit GEMM is listed first, so the default schedule uses none
// of the workspace, like cuDNN's heuristic choice without a workspace limit.
#pragma once

#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

namespace detail {

/// Output extent of a window of `k` taps (dilation `d`) sliding with stride
/// `s` over `extent` padded by `p` on both sides.
inline std::uint64_t window_out(std::uint64_t extent, std::uint64_t k, std::uint64_t s, std::uint64_t p,
                                std::uint64_t d, bool ceil_mode, std::string_view axis, const shape& in,
                                std::string_view name, std::string_view kind) {
    if (k == 0 || s == 0 || d == 0) shape_error(name, kind, "kernel, stride and dilation must be positive");
    const std::uint64_t span = d * (k - 1) + 1;
    if (extent + 2 * p < span)
        shape_error(name, kind, "input shape " + in.to_string() + ": " + std::string(axis) + " " +
                                    std::to_string(extent) + " padded by " + std::to_string(p) +
                                    " is smaller than the window " + std::to_string(span));
    const std::uint64_t room = extent + 2 * p - span;
    std::uint64_t out = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    // PyTorch: with ceil_mode the last window must start inside the input or its left padding.
    if (ceil_mode && (out - 1) * s >= extent + p) --out;
    return out;
}

/// The algorithm table of the file comment for one convolution pass.
inline std::vector<impl_spec> conv_variants(bool dense3x3, bool plain_gemm, std::uint64_t column_values,
                                            std::uint64_t winograd_values) {
    if (plain_gemm) return {};
    std::vector<impl_spec> v{{impl_kind::implicit_gemm, 1.3, 0}, {impl_kind::gemm_im2col, 1.0, column_values}};
    if (dense3x3) v.push_back({impl_kind::winograd, 0.55, winograd_values});
    return v;
}

} // namespace detail

/// 2-D convolution over (N, C, H, W).
struct conv2d {
    static constexpr std::string_view kind = "conv2d";
    std::uint64_t in_channels = 0, out_channels = 0;
    std::uint64_t kernel_h = 1, kernel_w = 1;
    std::uint64_t stride_h = 1, stride_w = 1;
    std::uint64_t pad_h = 0, pad_w = 0;
    std::uint64_t dilation_h = 1, dilation_w = 1;
    std::uint64_t groups = 1;
    bool bias = true;

    /// A square convolution (the common case).
    static conv2d make(std::uint64_t in, std::uint64_t out, std::uint64_t kernel, std::uint64_t stride = 1,
                       std::uint64_t padding = 0, std::uint64_t groups = 1, bool bias = true,
                       std::uint64_t dilation = 1) {
        return conv2d{in, out, kernel, kernel, stride, stride, padding, padding, dilation, dilation, groups, bias};
    }

    /// (N, C_in, H, W) -> (N, C_out, H_out, W_out).
    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 4, "(N, C, H, W)", name, kind);
        const auto& s = in[0].shape;
        if (groups == 0 || in_channels % groups || out_channels % groups)
            shape_error(name, kind, "channels " + std::to_string(in_channels) + " -> " + std::to_string(out_channels) +
                                        " are not divisible by groups " + std::to_string(groups));
        if (s[1] != in_channels)
            shape_error(name, kind, "input shape " + s.to_string() + " has " + std::to_string(s[1]) +
                                        " channels but the layer expects " + std::to_string(in_channels));
        const auto ho = detail::window_out(s[2], kernel_h, stride_h, pad_h, dilation_h, false, "height", s, name, kind);
        const auto wo = detail::window_out(s[3], kernel_w, stride_w, pad_w, dilation_w, false, "width", s, name, kind);
        return {shape{s[0], out_channels, ho, wo}, element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        std::vector<param_spec> p{{param_role::weight, shape{out_channels, in_channels / groups, kernel_h, kernel_w}, true}};
        if (bias) p.push_back({param_role::bias, shape{out_channels}, true});
        return p;
    }

    /// Multiply-adds of one pass (forward, backward-data or backward-filter), x2.
    double matmul_flops(const lower_context& c) const {
        const auto& y = c.output.shape;
        return 2.0 * double(y[0]) * double(y[1]) * double(y[2]) * double(y[3]) * double(in_channels / groups) *
               double(kernel_h) * double(kernel_w);
    }

    layer_ops lower(const lower_context& c) const {
        const auto& x = c.inputs[0].shape;
        const auto& y = c.output.shape;
        const double mm = matmul_flops(c);
        const double bias_flops = bias ? double(y.numel()) : 0.0;
        const bool plain = kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 &&
                           pad_w == 0;
        const bool grouped = groups != 1;
        const bool dense3x3 = !grouped && kernel_h == 3 && kernel_w == 3 && stride_h == 1 && stride_w == 1 &&
                              dilation_h == 1 && dilation_w == 1;
        const std::uint64_t column = x[0] * in_channels * kernel_h * kernel_w * y[2] * y[3];
        const std::uint64_t winograd = 4 * (x.numel() + y.numel()) + 16 * out_channels * in_channels;
        const auto variants = detail::conv_variants(dense3x3, plain || grouped, column, winograd);

        return weight_product_ops(mm, bias, bias_flops, op_pass::bwd_filter, variants);
    }
};

/// 2-D transposed convolution ("up-convolution") over (N, C, H, W):
/// H_out = (H - 1) * stride - 2 * padding + kernel. One direct algorithm.
struct conv_transpose2d {
    static constexpr std::string_view kind = "conv_transpose2d";
    std::uint64_t in_channels = 0, out_channels = 0;
    std::uint64_t kernel = 2, stride = 2, padding = 0;
    bool bias = true;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 4, "(N, C, H, W)", name, kind);
        const auto& s = in[0].shape;
        if (kernel == 0 || stride == 0) shape_error(name, kind, "kernel and stride must be positive");
        if (s[1] != in_channels)
            shape_error(name, kind, "input shape " + s.to_string() + " has " + std::to_string(s[1]) +
                                        " channels but the layer expects " + std::to_string(in_channels));
        auto out = [&](std::uint64_t e) {
            const std::uint64_t full = (e - 1) * stride + kernel;
            if (e == 0 || full <= 2 * padding)
                shape_error(name, kind, "input shape " + s.to_string() + " leaves no output with padding " +
                                            std::to_string(padding));
            return full - 2 * padding;
        };
        return {shape{s[0], out_channels, out(s[2]), out(s[3])}, element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        std::vector<param_spec> p{{param_role::weight, shape{in_channels, out_channels, kernel, kernel}, true}};
        if (bias) p.push_back({param_role::bias, shape{out_channels}, true});
        return p;
    }

    layer_ops lower(const lower_context& c) const {
        const auto& x = c.inputs[0].shape;
        // Every input value scatters into kernel^2 outputs of each output channel.
        const double mm = 2.0 * double(x.numel()) * double(out_channels) * double(kernel * kernel);
        const double bias_flops = bias ? double(c.output.shape.numel()) : 0.0;
        return weight_product_ops(mm, bias, bias_flops, op_pass::bwd_filter);
    }
};

} // namespace memplan::nn
