// ResNet-18 and ResNet-50 (He et al. 2016) as torchvision builds them: the
// stride of a bottleneck sits on its 3x3 convolution ("v1.5"), projection
// shortcuts are 1x1 convolution + batch-norm, convolutions have no bias.
// Published parameter counts: ResNet-18 11,689,512; ResNet-50 25,557,032.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace memplan::zoo {

/// ResNet of depth 18 or 50 on (batch, 3, height, width) images, 1000 classes.
inline nn::network resnet(int depth, std::uint64_t batch, std::uint64_t height = 224, std::uint64_t width = 224) {
    const std::string model = "resnet" + std::to_string(depth);
    if (depth != 18 && depth != 50) throw error("zoo", "ResNet depth " + std::to_string(depth) + " is not 18 or 50");
    detail::expect_positive(model, batch, height, width);
    const bool bottleneck = depth == 50;
    const std::array<int, 4> blocks = bottleneck ? std::array<int, 4>{3, 4, 6, 3} : std::array<int, 4>{2, 2, 2, 2};
    const std::uint64_t expansion = bottleneck ? 4 : 1;

    nn::network net(model);
    auto x = net.input("x", {batch, 3, height, width});
    x = detail::conv_bn(net, x, "conv1", "bn1", "relu", nn::conv2d::make(3, 64, 7, 2, 3));
    x = net.add(nn::max_pool2d{3, 2, 1, false}, {x}, "maxpool");

    std::uint64_t in = 64;
    for (int stage = 0; stage < 4; ++stage) {
        const std::uint64_t planes = 64ull << stage;
        for (int b = 0; b < blocks[static_cast<std::size_t>(stage)]; ++b) {
            const std::uint64_t stride = (stage > 0 && b == 0) ? 2 : 1;
            const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
            const std::uint64_t out = planes * expansion;
            nn::value y;
            if (bottleneck) {
                y = detail::conv_bn(net, x, p + "conv1", p + "bn1", p + "relu1", nn::conv2d::make(in, planes, 1));
                y = detail::conv_bn(net, y, p + "conv2", p + "bn2", p + "relu2",
                                    nn::conv2d::make(planes, planes, 3, stride, 1));
                y = detail::conv_bn(net, y, p + "conv3", p + "bn3", "", nn::conv2d::make(planes, out, 1));
            } else {
                y = detail::conv_bn(net, x, p + "conv1", p + "bn1", p + "relu1",
                                    nn::conv2d::make(in, planes, 3, stride, 1));
                y = detail::conv_bn(net, y, p + "conv2", p + "bn2", "", nn::conv2d::make(planes, planes, 3, 1, 1));
            }
            nn::value shortcut = x;
            if (stride != 1 || in != out)
                shortcut = detail::conv_bn(net, x, p + "downsample.0", p + "downsample.1", "",
                                           nn::conv2d::make(in, out, 1, stride));
            y = net.add(nn::add{}, {y, shortcut}, p + "add");
            x = net.add(nn::relu{}, {y}, p + (bottleneck ? "relu3" : "relu2"));
            in = out;
        }
    }
    detail::classifier_head(net, x, batch, in, 1000, 0);
    return net;
}

} // namespace memplan::zoo
