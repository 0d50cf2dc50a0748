// Normalisation layers: batch-norm over (N, C, ...), layer-norm and RMSNorm
// over the last axis.
//
// Batch- and layer-norm save their per-group mean and inverse standard
// deviation (fp32, as cuDNN does) for the backward pass; RMSNorm (Zhang and
// Sennrich 2019; Llama's normalisation) saves only the inverse root mean
// square of each row, as fused RMSNorm kernels do. Batch-norm's backward can start from its
// input (the usual choice) or from its output (MONeT, ICLR 2021: with the
// saved statistics, gamma and beta the normalised input can be recovered from
// y, so x need not be kept; gamma must not be zero).
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
/// A normalisation over the last axis of one floating input of `features`
/// values: its output has the input's shape.
inline tensor_info last_axis_norm_infer(std::span<const tensor_info> in, std::uint64_t features, std::string_view name,
                                        std::string_view kind) {
    expect_inputs(in.size(), 1, name, kind);
    expect_floating(in[0], 0, 0, "(..., features)", name, kind);
    if (in[0].shape.back() != features)
        shape_error(name, kind, "input shape " + in[0].shape.to_string() + " has " + std::to_string(in[0].shape.back()) +
                                    " features but the layer expects " + std::to_string(features));
    return in[0];
}
} // namespace detail

/// Which forward tensor a layer's backward reads.
enum class saved_tensor : std::uint8_t {
    input,  ///< keep the input x
    output, ///< keep the output y
    mask,   ///< keep a 1-bit sign mask (ReLU only)
    choice, ///< the backward op gets one variant per option; a planner picks per step
};

struct batch_norm {
    static constexpr std::string_view kind = "batch_norm";
    std::uint64_t channels = 0;
    double eps = 1e-5;
    saved_tensor backward_from = saved_tensor::choice;

    /// (N, C, ...) -> same shape.
    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 0, "(N, C, ...)", name, kind);
        const auto& s = in[0].shape;
        if (s.rank() < 2 || s[1] != channels)
            shape_error(name, kind, "input shape " + s.to_string() + " does not have " + std::to_string(channels) +
                                        " channels on axis 1");
        if (backward_from == saved_tensor::mask)
            shape_error(name, kind, "backward can start from the input or the output, not a mask");
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        return {{param_role::gamma, shape{channels}, true},
                {param_role::beta, shape{channels}, true},
                {param_role::running_mean, shape{channels}, false},
                {param_role::running_var, shape{channels}, false}};
    }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.internals.push_back({"stats", {shape{2, channels}, element::f32}}); // (2, C): mean, invstd
        op_spec fwd{op_pass::fwd, phase::forward, compute_kind::pointwise,
                    {slot::input(0), slot::param(0), slot::param(1), slot::state(0), slot::state(1)},
                    {slot::output(), slot::internal(0)}, 8 * n, 0, {}, {}};
        // When the backward starts from y, x is not needed after the forward,
        // which may then write y over x (in-place activated batch-norm, Rota
        // Bulo et al., CVPR 2018): the statistics are taken before any write.
        if (backward_from != saved_tensor::input) fwd.inplace.push_back({slot::input(0), slot::output()});
        ops.forward.push_back(std::move(fwd));
        op_spec bwd{op_pass::bwd, phase::backward, compute_kind::pointwise, {}, {slot::grad_input(0), slot::grad_param(0),
                    slot::grad_param(1)}, 12 * n, 0, {}, {}};
        const std::vector<slot> from_input{slot::input(0), slot::grad_output(), slot::param(0), slot::internal(0)};
        const std::vector<slot> from_output{slot::output(), slot::grad_output(), slot::param(0), slot::param(1),
                                            slot::internal(0)};
        switch (backward_from) {
        case saved_tensor::input: bwd.inputs = from_input; break;
        case saved_tensor::output: bwd.inputs = from_output; break;
        default:
            // Both: the op lists every tensor either variant reads. From the
            // input first: what frameworks do.
            bwd.inputs = {slot::input(0), slot::output(), slot::grad_output(), slot::param(0), slot::param(1),
                          slot::internal(0)};
            bwd.variants = {{impl_kind::from_input, 1.0, 0, from_input}, {impl_kind::from_output, 1.0, 0, from_output}};
            break;
        }
        ops.backward.push_back(std::move(bwd));
        return ops;
    }
};

struct layer_norm {
    static constexpr std::string_view kind = "layer_norm";
    std::uint64_t features = 0; ///< size of the last axis
    double eps = 1e-5;

    /// (..., features) -> same shape.
    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        return detail::last_axis_norm_infer(in, features, name, kind);
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        return {{param_role::gamma, shape{features}, true}, {param_role::beta, shape{features}, true}};
    }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        const std::uint64_t rows = c.output.shape.numel() / (features ? features : 1);
        layer_ops ops;
        ops.internals.push_back({"stats", {shape{2, rows}, element::f32}}); // (2, rows): mean, invstd
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise,
                               {slot::input(0), slot::param(0), slot::param(1)},
                               {slot::output(), slot::internal(0)}, 8 * n, 0, {}, {}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::pointwise,
                                {slot::input(0), slot::grad_output(), slot::param(0), slot::internal(0)},
                                {slot::grad_input(0), slot::grad_param(0), slot::grad_param(1)}, 12 * n, 0, {}, {}});
        return ops;
    }
};

/// y = x / sqrt(mean(x^2) + eps) * gamma over the last axis; no shift.
struct rms_norm {
    static constexpr std::string_view kind = "rms_norm";
    std::uint64_t features = 0; ///< size of the last axis
    double eps = 1e-5;

    /// (..., features) -> same shape.
    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        return detail::last_axis_norm_infer(in, features, name, kind);
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        return {{param_role::gamma, shape{features}, true}};
    }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        const std::uint64_t rows = c.output.shape.numel() / (features ? features : 1);
        layer_ops ops;
        ops.internals.push_back({"rstd", {shape{rows}, element::f32}});
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0), slot::param(0)},
                               {slot::output(), slot::internal(0)}, 4 * n, 0, {}, {}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::pointwise,
                                {slot::input(0), slot::grad_output(), slot::param(0), slot::internal(0)},
                                {slot::grad_input(0), slot::grad_param(0)}, 8 * n, 0, {}, {}});
        return ops;
    }
};

} // namespace memplan::nn
