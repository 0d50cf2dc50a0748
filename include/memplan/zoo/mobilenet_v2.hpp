// MobileNet-V2 (Sandler et al. 2018) at width 1.0 as torchvision builds it:
// inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1 linear
// projection) with ReLU6, a residual add where stride is 1 and widths match,
// and a 1280-wide head. Published parameter count: 3,504,872.
#pragma once

#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace memplan::zoo {

inline nn::network mobilenet_v2(std::uint64_t batch, std::uint64_t height = 224, std::uint64_t width = 224) {
    detail::expect_positive("mobilenet_v2", batch, height, width);
    struct stage { std::uint64_t expand, out, repeat, stride; };
    constexpr std::array<stage, 7> stages{{{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                           {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}}};
    nn::network net("mobilenet_v2");
    auto x = net.input("x", {batch, 3, height, width});
    x = detail::conv_bn(net, x, "features.0.conv", "features.0.bn", "features.0.relu6", nn::conv2d::make(3, 32, 3, 2, 1),
                        1e-5, 6);
    std::uint64_t in = 32;
    int index = 1;
    for (const auto& st : stages) {
        for (std::uint64_t r = 0; r < st.repeat; ++r, ++index) {
            const std::uint64_t stride = r == 0 ? st.stride : 1;
            const std::uint64_t hidden = in * st.expand;
            const std::string p = "features." + std::to_string(index) + ".";
            nn::value y = x;
            if (st.expand != 1)
                y = detail::conv_bn(net, y, p + "expand.conv", p + "expand.bn", p + "expand.relu6",
                                    nn::conv2d::make(in, hidden, 1), 1e-5, 6);
            y = detail::conv_bn(net, y, p + "dw.conv", p + "dw.bn", p + "dw.relu6",
                                nn::conv2d::make(hidden, hidden, 3, stride, 1, hidden), 1e-5, 6);
            y = detail::conv_bn(net, y, p + "project.conv", p + "project.bn", "", nn::conv2d::make(hidden, st.out, 1));
            if (stride == 1 && in == st.out) y = net.add(nn::add{}, {y, x}, p + "add");
            x = y;
            in = st.out;
        }
    }
    x = detail::conv_bn(net, x, "features.18.conv", "features.18.bn", "features.18.relu6",
                        nn::conv2d::make(in, 1280, 1), 1e-5, 6);
    detail::classifier_head(net, x, batch, 1280, 1000, 0.2);
    return net;
}

} // namespace memplan::zoo
