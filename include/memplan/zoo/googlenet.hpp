// GoogLeNet (Inception v1, Szegedy et al. 2015) as torchvision builds it,
// without the auxiliary classifiers: BasicConv2d = convolution without bias +
// batch-norm (eps 0.001) + ReLU; each Inception block concatenates a 1x1
// branch, two 1x1 -> 3x3 branches (torchvision uses 3x3 where the paper has
// 5x5) and a 3x3 max-pool -> 1x1 branch. Published parameter count: 6,624,904.
#pragma once

#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <cstdint>
#include <string>

namespace memplan::zoo {

namespace detail {

inline nn::value basic_conv(nn::network& net, nn::value x, const std::string& name, nn::conv2d conv) {
    return conv_bn(net, x, name + ".conv", name + ".bn", name + ".relu", conv, 1e-3);
}

inline nn::value inception(nn::network& net, nn::value x, const std::string& name, std::uint64_t in,
                           std::uint64_t c1, std::uint64_t c3r, std::uint64_t c3, std::uint64_t c5r, std::uint64_t c5,
                           std::uint64_t pool_proj) {
    auto b1 = basic_conv(net, x, name + ".branch1", nn::conv2d::make(in, c1, 1));
    auto b2 = basic_conv(net, x, name + ".branch2.0", nn::conv2d::make(in, c3r, 1));
    b2 = basic_conv(net, b2, name + ".branch2.1", nn::conv2d::make(c3r, c3, 3, 1, 1));
    auto b3 = basic_conv(net, x, name + ".branch3.0", nn::conv2d::make(in, c5r, 1));
    b3 = basic_conv(net, b3, name + ".branch3.1", nn::conv2d::make(c5r, c5, 3, 1, 1));
    auto b4 = net.add(nn::max_pool2d{3, 1, 1, true}, {x}, name + ".branch4.0");
    b4 = basic_conv(net, b4, name + ".branch4.1", nn::conv2d::make(in, pool_proj, 1));
    return net.add(nn::concat{1}, {b1, b2, b3, b4}, name + ".concat");
}

} // namespace detail

inline nn::network googlenet(std::uint64_t batch, std::uint64_t height = 224, std::uint64_t width = 224) {
    detail::expect_positive("googlenet", batch, height, width);
    nn::network net("googlenet");
    auto x = net.input("x", {batch, 3, height, width});
    x = detail::basic_conv(net, x, "conv1", nn::conv2d::make(3, 64, 7, 2, 3));
    x = net.add(nn::max_pool2d{3, 2, 0, true}, {x}, "maxpool1");
    x = detail::basic_conv(net, x, "conv2", nn::conv2d::make(64, 64, 1));
    x = detail::basic_conv(net, x, "conv3", nn::conv2d::make(64, 192, 3, 1, 1));
    x = net.add(nn::max_pool2d{3, 2, 0, true}, {x}, "maxpool2");
    x = detail::inception(net, x, "inception3a", 192, 64, 96, 128, 16, 32, 32);
    x = detail::inception(net, x, "inception3b", 256, 128, 128, 192, 32, 96, 64);
    x = net.add(nn::max_pool2d{3, 2, 0, true}, {x}, "maxpool3");
    x = detail::inception(net, x, "inception4a", 480, 192, 96, 208, 16, 48, 64);
    x = detail::inception(net, x, "inception4b", 512, 160, 112, 224, 24, 64, 64);
    x = detail::inception(net, x, "inception4c", 512, 128, 128, 256, 24, 64, 64);
    x = detail::inception(net, x, "inception4d", 512, 112, 144, 288, 32, 64, 64);
    x = detail::inception(net, x, "inception4e", 528, 256, 160, 320, 32, 128, 128);
    x = net.add(nn::max_pool2d{2, 2, 0, true}, {x}, "maxpool4");
    x = detail::inception(net, x, "inception5a", 832, 256, 160, 320, 32, 128, 128);
    x = detail::inception(net, x, "inception5b", 832, 384, 192, 384, 48, 128, 128);
    detail::classifier_head(net, x, batch, 1024, 1000, 0.2);
    return net;
}

} // namespace memplan::zoo
