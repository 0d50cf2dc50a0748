// Embedding tables: token embedding (ids -> vectors) and learned position
// embedding (adds row s of its table to position s of every sequence, as
// GPT-2's wpe). Token ids are not differentiable; the table's gradient is a
// scatter-add of the incoming gradient. Rotary position embedding (Su et al.
// 2021; Llama's RoPE) rotates each pair of a head's features by an angle of
// its position: no parameters, and its backward (the inverse rotation of the
// incoming gradient) reads nothing of the forward. Its cos/sin tables
// (positions x head width, made each step) are not modelled: at Llama-3-8B's
// shape they are 2 MiB beside gigabytes of activations.
#pragma once

#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

/// (...) int64 ids -> (..., dim).
struct embedding {
    static constexpr std::string_view kind = "embedding";
    std::uint64_t num_embeddings = 0, dim = 0;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        if (in[0].elem != element::i64)
            shape_error(name, kind, "input " + in[0].shape.to_string() + " has element type " +
                                        std::string(to_string(in[0].elem)) + " but the layer expects i64 ids");
        auto dims = in[0].shape.dims;
        dims.push_back(dim);
        return {shape(std::move(dims)), element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        return {{param_role::weight, shape{num_embeddings, dim}, true}};
    }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::other, {slot::input(0), slot::param(0)},
                               {slot::output()}, 0, 0, {}, {}});
        ops.backward.push_back({op_pass::bwd_weight, phase::backward, compute_kind::other,
                                {slot::input(0), slot::grad_output()}, {slot::grad_param(0)}, n, 0, {}, {}});
        return ops;
    }
};

/// (N, S, dim) -> (N, S, dim) + table[0:S]; S <= max_positions.
struct position_embedding {
    static constexpr std::string_view kind = "position_embedding";
    std::uint64_t max_positions = 0, dim = 0;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 3, "(N, S, dim)", name, kind);
        const auto& s = in[0].shape;
        if (s[2] != dim)
            shape_error(name, kind, "input shape " + s.to_string() + " has width " + std::to_string(s[2]) +
                                        " but the table has " + std::to_string(dim));
        if (s[1] > max_positions)
            shape_error(name, kind, "input shape " + s.to_string() + " is longer than the " +
                                        std::to_string(max_positions) + " positions of the table");
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        return {{param_role::weight, shape{max_positions, dim}, true}};
    }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::other, {slot::input(0), slot::param(0)},
                               {slot::output()}, n, 0, {}, {{slot::input(0), slot::output()}}});
        // The table's gradient sums the incoming gradient over the batch.
        ops.backward.push_back({op_pass::bwd_weight, phase::backward, compute_kind::other, {slot::grad_output()},
                                {slot::grad_param(0)}, n, 0, {}, {}});
        ops.passthrough = {true};
        return ops;
    }
};

/// (N, S, heads * head_dim) -> same shape, each head's feature pairs rotated.
struct rotary {
    static constexpr std::string_view kind = "rotary";
    std::uint64_t head_dim = 0; ///< width of one head; even

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 3, "(N, S, heads * head_dim)", name, kind);
        if (head_dim == 0 || head_dim % 2)
            shape_error(name, kind, "head width " + std::to_string(head_dim) + " must be even and positive");
        if (in[0].shape[2] % head_dim)
            shape_error(name, kind, "input shape " + in[0].shape.to_string() + " is not a whole number of heads of " +
                                        std::to_string(head_dim));
        return in[0];
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const { return {}; }

    layer_ops lower(const lower_context& c) const {
        const double n = double(c.output.shape.numel());
        layer_ops ops;
        ops.forward.push_back({op_pass::fwd, phase::forward, compute_kind::pointwise, {slot::input(0)}, {slot::output()},
                               3 * n, 0, {}, {{slot::input(0), slot::output()}}});
        ops.backward.push_back({op_pass::bwd, phase::backward, compute_kind::pointwise, {slot::grad_output()},
                                {slot::grad_input(0)}, 3 * n, 0, {}, {{slot::grad_output(), slot::grad_input(0)}}});
        return ops;
    }
};

} // namespace memplan::nn
