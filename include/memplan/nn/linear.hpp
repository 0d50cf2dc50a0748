// Fully connected layer y = x W^T + b over the last axis, as PyTorch's Linear:
// (..., in_features) -> (..., out_features). Backward-data reads only the
// weight and the incoming gradient; backward-weight reads the input, which is
// why the input stays live until then.
#pragma once

#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::nn {

struct linear {
    static constexpr std::string_view kind = "linear";
    std::uint64_t in_features = 0, out_features = 0;
    bool bias = true;

    tensor_info infer(std::span<const tensor_info> in, std::string_view name) const {
        detail::expect_inputs(in.size(), 1, name, kind);
        detail::expect_floating(in[0], 0, 0, "(..., features)", name, kind);
        const auto& s = in[0].shape;
        if (s.back() != in_features)
            shape_error(name, kind, "input shape " + s.to_string() + " has " + std::to_string(s.back()) +
                                        " features but the layer expects " + std::to_string(in_features));
        auto dims = s.dims;
        dims.back() = out_features;
        return {shape(std::move(dims)), element::floating};
    }

    std::vector<param_spec> params(std::span<const tensor_info>) const {
        std::vector<param_spec> p{{param_role::weight, shape{out_features, in_features}, true}};
        if (bias) p.push_back({param_role::bias, shape{out_features}, true});
        return p;
    }

    layer_ops lower(const lower_context& c) const {
        const double rows = double(c.output.shape.numel() / (out_features ? out_features : 1));
        const double mm = 2.0 * rows * double(in_features) * double(out_features);
        const double bias_flops = bias ? rows * double(out_features) : 0.0;
        return weight_product_ops(mm, bias, bias_flops, op_pass::bwd_weight);
    }
};

} // namespace memplan::nn
