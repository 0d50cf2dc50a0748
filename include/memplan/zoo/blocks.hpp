// Building blocks shared by the zoo's convolutional models: convolution +
// batch-norm (+ ReLU) stacks and the classifier head with its loss, named the
// way torchvision names its modules so parameter names line up with
// published checkpoints ("layer1.0.conv1.w" for "layer1.0.conv1.weight").
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/network.hpp>

#include <cstdint>
#include <string>

namespace memplan::zoo {

namespace detail {

/// Rejects zero sizes early with the model's name.
inline void expect_positive(std::string_view model, std::uint64_t batch, std::uint64_t a, std::uint64_t b = 1) {
    if (batch == 0 || a == 0 || b == 0)
        throw error("zoo", "model '" + std::string(model) + "' needs a positive batch, image size and sequence length");
}

/// conv (no bias) -> batch-norm -> optional ReLU (capped at `cap` when > 0).
inline nn::value conv_bn(nn::network& net, nn::value x, const std::string& conv_name, const std::string& bn_name,
                         const std::string& relu_name, nn::conv2d conv, double bn_eps = 1e-5, double cap = 0) {
    conv.bias = false;
    const auto channels = conv.out_channels;
    auto y = net.add(conv, {x}, conv_name);
    y = net.add(nn::batch_norm{channels, bn_eps, nn::saved_tensor::choice}, {y}, bn_name);
    if (!relu_name.empty()) y = net.add(nn::relu{cap, nn::saved_tensor::choice}, {y}, relu_name);
    return y;
}

/// Global average pool -> [dropout] -> linear -> softmax cross-entropy against
/// int64 labels of shape (N).
inline void classifier_head(nn::network& net, nn::value x, std::uint64_t batch, std::uint64_t features,
                            std::uint64_t classes, double drop) {
    auto labels = net.input("labels", {batch}, nn::element::i64);
    auto y = net.add(nn::global_avg_pool{}, {x}, "avgpool");
    if (drop > 0) y = net.add(nn::dropout{drop}, {y}, "dropout");
    y = net.add(nn::linear{features, classes, true}, {y}, "fc");
    net.add(nn::softmax_cross_entropy{}, {y, labels}, "loss");
}

} // namespace detail

} // namespace memplan::zoo
