// VGG-16 (Simonyan & Zisserman 2015, configuration D) as torchvision builds
// it: thirteen 3x3 convolutions with bias, no batch-norm, an adaptive 7x7
// average pool and three fully connected layers with dropout.
// Published parameter count: 138,357,544.
#pragma once

#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace memplan::zoo {

inline nn::network vgg16(std::uint64_t batch, std::uint64_t height = 224, std::uint64_t width = 224) {
    detail::expect_positive("vgg16", batch, height, width);
    nn::network net("vgg16");
    auto x = net.input("x", {batch, 3, height, width});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    constexpr std::array<int, 5> convs{2, 2, 3, 3, 3};
    std::uint64_t in = 3;
    for (int stage = 0; stage < 5; ++stage) {
        const std::uint64_t out = std::min<std::uint64_t>(64ull << stage, 512);
        const std::string s = std::to_string(stage + 1);
        for (int c = 0; c < convs[static_cast<std::size_t>(stage)]; ++c) {
            const std::string id = s + "_" + std::to_string(c + 1);
            x = net.add(nn::conv2d::make(in, out, 3, 1, 1), {x}, "conv" + id);
            x = net.add(nn::relu{}, {x}, "relu" + id);
            in = out;
        }
        x = net.add(nn::max_pool2d{2, 2, 0, false}, {x}, "pool" + s);
    }
    x = net.add(nn::adaptive_avg_pool2d{7, 7}, {x}, "avgpool");
    x = net.add(nn::flatten{}, {x}, "flatten");
    x = net.add(nn::linear{512 * 7 * 7, 4096}, {x}, "fc6");
    x = net.add(nn::relu{}, {x}, "relu6");
    x = net.add(nn::dropout{0.5}, {x}, "drop6");
    x = net.add(nn::linear{4096, 4096}, {x}, "fc7");
    x = net.add(nn::relu{}, {x}, "relu7");
    x = net.add(nn::dropout{0.5}, {x}, "drop7");
    x = net.add(nn::linear{4096, 1000}, {x}, "fc8");
    net.add(nn::softmax_cross_entropy{}, {x, labels}, "loss");
    return net;
}

} // namespace memplan::zoo
