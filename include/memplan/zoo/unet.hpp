// U-Net (Ronneberger et al. 2015) with the paper's widths, 64 .. 1024
// channels, and one change every common implementation makes: 3x3
// convolutions are padded, so the output map has the input's size and any
// height and width divisible by 16 work (MONeT's 416 x 608 included).
// Definition used here: 3 input channels, convolutions with bias and ReLU,
// no batch-norm, 2x2 max-pool down, 2x2 stride-2 transposed convolution up
// (halving channels), skip concatenation, 1x1 output convolution to 2
// classes, per-pixel softmax cross-entropy. Parameter count: 31,031,810.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace memplan::zoo {

inline nn::network unet(std::uint64_t batch, std::uint64_t height = 416, std::uint64_t width = 608,
                        std::uint64_t classes = 2) {
    detail::expect_positive("unet", batch, height, width);
    if (height % 16 || width % 16)
        throw error("zoo", "model 'unet' needs a height and width divisible by 16, got " + std::to_string(height) +
                               "x" + std::to_string(width));
    nn::network net("unet");
    auto x = net.input("x", {batch, 3, height, width});
    auto labels = net.input("labels", {batch, height, width}, nn::element::i64);
    auto double_conv = [&](nn::value v, const std::string& name, std::uint64_t in, std::uint64_t out) {
        v = net.add(nn::conv2d::make(in, out, 3, 1, 1), {v}, name + ".conv1");
        v = net.add(nn::relu{}, {v}, name + ".relu1");
        v = net.add(nn::conv2d::make(out, out, 3, 1, 1), {v}, name + ".conv2");
        return net.add(nn::relu{}, {v}, name + ".relu2");
    };
    std::vector<nn::value> skips;
    std::uint64_t in = 3, width_ch = 64;
    for (int level = 1; level <= 4; ++level) {
        x = double_conv(x, "down" + std::to_string(level), in, width_ch);
        skips.push_back(x);
        x = net.add(nn::max_pool2d{2, 2, 0, false}, {x}, "pool" + std::to_string(level));
        in = width_ch;
        width_ch *= 2;
    }
    x = double_conv(x, "bottom", in, width_ch); // 1024 channels
    for (int level = 4; level >= 1; --level) {
        const std::string l = std::to_string(level);
        x = net.add(nn::conv_transpose2d{width_ch, width_ch / 2, 2, 2, 0, true}, {x}, "up" + l + ".upconv");
        x = net.add(nn::concat{1}, {skips[static_cast<std::size_t>(level - 1)], x}, "up" + l + ".concat");
        x = double_conv(x, "up" + l, width_ch, width_ch / 2);
        width_ch /= 2;
    }
    x = net.add(nn::conv2d::make(64, classes, 1), {x}, "outc");
    net.add(nn::softmax_cross_entropy{}, {x, labels}, "loss");
    return net;
}

} // namespace memplan::zoo
