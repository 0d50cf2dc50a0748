// The closed set of layer kinds, as one value type.
//
// Every layer is a small struct of hyper-parameters that satisfies LayerLike:
// it infers its output from its inputs (throwing an error that names the
// layer), lists its parameters, and lowers itself to forward and backward op
// specs (nn/op_spec.hpp). `layer` is a std::variant of all of them so that a
// network is a plain vector and an engine can visit every kind exhaustively.
#pragma once

#include <memplan/nn/activation.hpp>
#include <memplan/nn/attention.hpp>
#include <memplan/nn/conv.hpp>
#include <memplan/nn/elementwise.hpp>
#include <memplan/nn/embedding.hpp>
#include <memplan/nn/linear.hpp>
#include <memplan/nn/loss.hpp>
#include <memplan/nn/norm.hpp>
#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/pool.hpp>

#include <concepts>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

namespace memplan::nn {

/// What the network and the training-graph derivation need of a layer.
template <class L>
concept LayerLike = std::copyable<L> && requires(const L& l, std::span<const tensor_info> in, std::string_view name,
                                                 const lower_context& ctx) {
    { L::kind } -> std::convertible_to<std::string_view>;
    { l.infer(in, name) } -> std::same_as<tensor_info>;
    { l.params(in) } -> std::same_as<std::vector<param_spec>>;
    { l.lower(ctx) } -> std::same_as<layer_ops>;
};

using layer = std::variant<conv2d, conv_transpose2d, linear, batch_norm, layer_norm, rms_norm, relu, gelu, swiglu,
                           max_pool2d, avg_pool2d, adaptive_avg_pool2d, global_avg_pool, add, concat, dropout, flatten,
                           embedding, position_embedding, rotary, attention, flash_attention, softmax_cross_entropy>;

namespace detail {
template <class V>
struct all_layer_like;
template <class... L>
struct all_layer_like<std::variant<L...>> : std::bool_constant<(LayerLike<L> && ...)> {};
} // namespace detail
static_assert(detail::all_layer_like<layer>::value, "every alternative of nn::layer must be LayerLike");

/// "conv2d", "relu", ...
inline std::string_view kind_of(const layer& l) noexcept {
    return std::visit([](const auto& x) -> std::string_view { return std::decay_t<decltype(x)>::kind; }, l);
}

/// Output of layer `l` (named `name` in errors) applied to `inputs`.
inline tensor_info infer(const layer& l, std::span<const tensor_info> inputs, std::string_view name) {
    return std::visit([&](const auto& x) { return x.infer(inputs, name); }, l);
}

/// Parameters and state of `l` for these inputs, in slot order within each kind.
inline std::vector<param_spec> params_of(const layer& l, std::span<const tensor_info> inputs) {
    return std::visit([&](const auto& x) { return x.params(inputs); }, l);
}

/// Forward and backward op specs of `l`. Precondition: `ctx` holds shapes that `infer` accepted.
inline layer_ops lower(const layer& l, const lower_context& ctx) {
    return std::visit([&](const auto& x) { return x.lower(ctx); }, l);
}

} // namespace memplan::nn
