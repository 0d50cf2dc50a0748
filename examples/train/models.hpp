// The example networks of the training engine and their synthetic data
// (fixed seed): an MLP, a CNN with batch-norm, a ResNet with basic blocks, a
// U-Net with skip concatenations and a pre-norm transformer encoder with a
// next-token loss. Deep and narrow on purpose, with a batch large enough that
// activations, not parameters and optimizer state, fill the arena: so that
// recomputation has something to save (half of the store-all arena is in
// reach). Shared by the train_* programs, their CUDA twins and the tests.
#pragma once

#include <memplan/engine/executor.hpp>
#include <memplan/nn/network.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace memplan::examples {

using batch_data = std::vector<std::pair<std::string, std::vector<std::byte>>>;

/// A network and the data of training step `step` for each of its inputs.
struct model {
    nn::network net;
    std::function<batch_data(std::uint64_t step)> batch;
};

namespace detail {

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    return {p, p + v.size() * sizeof(T)};
}

/// Values uniform in [-1, 1) for `image`, labels in [0, classes) for
/// `labels`; four batches cycle, so the network can learn them.
inline std::function<batch_data(std::uint64_t)> images_and_labels(std::uint64_t image_values, std::uint64_t label_count,
                                                                  std::int64_t classes) {
    return [=](std::uint64_t step) {
        engine::rng r(1000 + step % 4);
        std::vector<float> x(image_values);
        for (auto& v : x) v = r.uniform(-1.0f, 1.0f);
        std::vector<std::int64_t> y(label_count);
        for (auto& v : y) v = static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(classes)));
        return batch_data{{"x", bytes_of(x)}, {"labels", bytes_of(y)}};
    };
}

} // namespace detail

/// x (N, 32) -> `depth` hidden layers of `width` with ReLU -> 10 classes; the
/// class of a row is the position of its largest value among the first ten
/// (learnable). Deep, narrow, a large batch: activations fill memory, not
/// parameters and Adam's state.
inline model mlp(std::uint64_t batch = 1024, std::uint64_t depth = 16, std::uint64_t width = 32) {
    constexpr std::uint64_t features = 32, classes = 10;
    nn::network net("mlp");
    auto h = net.input("x", {batch, features});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    for (std::uint64_t l = 1; l <= depth; ++l) {
        const auto i = std::to_string(l);
        h = net.add(nn::linear{l == 1 ? features : width, width}, {h}, "fc" + i);
        h = net.add(nn::relu{}, {h}, "relu" + i);
    }
    h = net.add(nn::linear{width, classes}, {h}, "fc" + std::to_string(depth + 1));
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return {std::move(net), [batch](std::uint64_t step) {
                engine::rng r(1000 + step % 4);
                std::vector<float> x(batch * features);
                for (auto& v : x) v = r.uniform(-1.0f, 1.0f);
                std::vector<std::int64_t> y(batch);
                for (std::uint64_t n = 0; n < batch; ++n) {
                    const auto* row = x.data() + n * features;
                    y[n] = std::max_element(row, row + classes) - row;
                }
                return batch_data{{"x", detail::bytes_of(x)}, {"labels", detail::bytes_of(y)}};
            }};
}

/// x (N, 3, image, image): two stages of `convs` conv-bn-relu (`width`, then
/// 2 `width` channels), each ending in a 2x2 max pool, then a linear
/// classifier. Layers are numbered through (conv1, bn1, relu1, ..., pool1,
/// pool2); cnn(8, 1, 16, 16) is the earlier two-conv network.
inline model cnn(std::uint64_t batch = 8, std::uint64_t convs = 4, std::uint64_t width = 4, std::uint64_t image = 32) {
    nn::network net("cnn");
    auto h = net.input("x", {batch, 3, image, image});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    std::uint64_t c = 3, n = 0;
    for (std::uint64_t stage = 1; stage <= 2; ++stage) {
        const std::uint64_t out = width << (stage - 1);
        for (std::uint64_t k = 0; k < convs; ++k, c = out) {
            const auto i = std::to_string(++n);
            h = net.add(nn::conv2d::make(c, out, 3, 1, 1), {h}, "conv" + i);
            h = net.add(nn::batch_norm{out}, {h}, "bn" + i);
            h = net.add(nn::relu{}, {h}, "relu" + i);
        }
        h = net.add(nn::max_pool2d{}, {h}, "pool" + std::to_string(stage));
    }
    h = net.add(nn::flatten{}, {h}, "flatten");
    h = net.add(nn::linear{c * (image / 4) * (image / 4), 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return {std::move(net), detail::images_and_labels(batch * 3 * image * image, batch, 10)};
}

/// A small ResNet: stem, two stages of `blocks` basic blocks (`width`, then
/// 2 `width` channels; the first block of stage two down-samples with a 1x1
/// projection), global average pooling and a linear classifier.
inline model resnet(std::uint64_t batch = 8, std::uint64_t blocks = 3, std::uint64_t width = 8,
                    std::uint64_t image = 64) {
    nn::network net("resnet");
    auto x = net.input("x", {batch, 3, image, image});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    auto cbr = [&](nn::value in, std::uint64_t cin, std::uint64_t cout, std::uint64_t stride, const std::string& name,
                   bool relu) {
        auto h = net.add(nn::conv2d::make(cin, cout, 3, stride, 1, 1, false), {in}, name + ".conv");
        h = net.add(nn::batch_norm{cout}, {h}, name + ".bn");
        return relu ? net.add(nn::relu{}, {h}, name + ".relu") : h;
    };
    auto block = [&](nn::value in, std::uint64_t cin, std::uint64_t cout, std::uint64_t stride, const std::string& name) {
        auto a = cbr(in, cin, cout, stride, name + ".a", true);
        auto b = cbr(a, cout, cout, 1, name + ".b", false);
        auto skip = in;
        if (stride != 1 || cin != cout) {
            skip = net.add(nn::conv2d::make(cin, cout, 1, stride, 0, 1, false), {in}, name + ".proj");
            skip = net.add(nn::batch_norm{cout}, {skip}, name + ".proj_bn");
        }
        auto s = net.add(nn::add{}, {b, skip}, name + ".add");
        return net.add(nn::relu{}, {s}, name + ".out");
    };
    auto h = cbr(x, 3, width, 1, "stem", true);
    std::uint64_t c = width, n = 0;
    for (std::uint64_t stage = 1; stage <= 2; ++stage)
        for (std::uint64_t k = 0; k < blocks; ++k) {
            const std::uint64_t out = width << (stage - 1);
            h = block(h, c, out, stage > 1 && k == 0 ? 2 : 1, "block" + std::to_string(++n));
            c = out;
        }
    h = net.add(nn::global_avg_pool{}, {h}, "gap");
    h = net.add(nn::linear{c, 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return {std::move(net), detail::images_and_labels(batch * 3 * image * image, batch, 10)};
}

/// A small U-Net for per-pixel classes: `levels` levels down (two
/// conv-bn-relu, max pool; `width` channels doubling per level), a
/// bottleneck, as many levels up (transposed conv, concatenation with the
/// skip, two conv-bn-relu) and a 1x1 head. `image` must be divisible by
/// 2^levels.
inline model unet(std::uint64_t batch = 4, std::uint64_t levels = 3, std::uint64_t width = 4,
                  std::uint64_t image = 64) {
    nn::network net("unet");
    auto x = net.input("x", {batch, 3, image, image});
    auto labels = net.input("labels", {batch, image, image}, nn::element::i64);
    // Two conv-bn-relu per level: Ronneberger et al. (2015) with batch-norm.
    auto cr = [&](nn::value in, std::uint64_t cin, std::uint64_t cout, const std::string& name) {
        auto h = in;
        for (int k = 1; k <= 2; ++k, cin = cout) {
            const auto i = std::to_string(k);
            h = net.add(nn::conv2d::make(cin, cout, 3, 1, 1, 1, false), {h}, name + ".conv" + i);
            h = net.add(nn::batch_norm{cout}, {h}, name + ".bn" + i);
            h = net.add(nn::relu{}, {h}, name + ".relu" + i);
        }
        return h;
    };
    std::vector<nn::value> skips;
    auto h = x;
    std::uint64_t c = 3;
    for (std::uint64_t l = 1; l <= levels; ++l) {
        const auto i = std::to_string(l);
        if (l > 1) h = net.add(nn::max_pool2d{}, {h}, "down" + std::to_string(l - 1));
        h = cr(h, c, width << (l - 1), "enc" + i); // (N, width 2^(l-1), image / 2^(l-1), ...)
        c = width << (l - 1);
        skips.push_back(h);
    }
    h = cr(net.add(nn::max_pool2d{}, {h}, "down" + std::to_string(levels)), c, 2 * c, "mid");
    c *= 2;
    for (std::uint64_t l = levels; l >= 1; --l) {
        const auto i = std::to_string(l);
        auto u = net.add(nn::conv_transpose2d{c, c / 2}, {h}, "up" + i);
        h = cr(net.add(nn::concat{}, {u, skips[l - 1]}, "cat" + i), c, c / 2, "dec" + i);
        c /= 2;
    }
    auto logits = net.add(nn::conv2d::make(c, 4, 1), {h}, "head");
    net.add(nn::softmax_cross_entropy{}, {logits, labels}, "loss");
    return {std::move(net), [batch, image](std::uint64_t step) {
                // Labels: the quadrant of each pixel, and the image says which (learnable).
                engine::rng r(2000 + step % 4);
                const std::uint64_t pixels = image * image;
                std::vector<float> img(batch * 3 * pixels);
                for (auto& v : img) v = r.uniform(-1.0f, 1.0f);
                std::vector<std::int64_t> y(batch * pixels);
                for (std::size_t i = 0; i < y.size(); ++i) {
                    const std::size_t p = i % pixels, n = i / pixels;
                    const auto q = static_cast<std::int64_t>((p / image >= image / 2 ? 2 : 0) +
                                                             (p % image >= image / 2 ? 1 : 0));
                    y[i] = (q + static_cast<std::int64_t>(img[n * 3 * pixels] > 0 ? 1 : 0)) % 4;
                }
                return batch_data{{"x", detail::bytes_of(img)}, {"labels", detail::bytes_of(y)}};
            }};
}

/// Token embedding + positions, `layers` pre-norm encoder layers (packed QKV
/// attention, GELU MLP), a final layer-norm and a next-token head. The
/// attention scores (batch x heads x seq^2) dominate memory.
inline model transformer(std::uint64_t batch = 8, std::uint64_t seq = 64, bool causal = true, std::uint64_t layers = 4) {
    constexpr std::uint64_t vocab = 64, d = 32, heads = 4;
    nn::network net("transformer");
    auto ids = net.input("ids", {batch, seq}, nn::element::i64);
    auto labels = net.input("labels", {batch, seq}, nn::element::i64);
    auto h = net.add(nn::embedding{vocab, d}, {ids}, "wte");
    h = net.add(nn::position_embedding{seq, d}, {h}, "wpe");
    for (std::uint64_t l = 0; l < layers; ++l) {
        const std::string p = "layer" + std::to_string(l);
        auto a = net.add(nn::layer_norm{d}, {h}, p + ".ln1");
        a = net.add(nn::linear{d, 3 * d}, {a}, p + ".qkv");
        a = net.add(nn::attention{heads, causal, 0.0}, {a}, p + ".attn");
        a = net.add(nn::linear{d, d}, {a}, p + ".proj");
        h = net.add(nn::add{}, {a, h}, p + ".res1");
        auto m = net.add(nn::layer_norm{d}, {h}, p + ".ln2");
        m = net.add(nn::linear{d, 2 * d}, {m}, p + ".fc1");
        m = net.add(nn::gelu{}, {m}, p + ".gelu");
        m = net.add(nn::linear{2 * d, d}, {m}, p + ".fc2");
        h = net.add(nn::add{}, {m, h}, p + ".res2");
    }
    h = net.add(nn::layer_norm{d}, {h}, "ln_f");
    h = net.add(nn::linear{d, vocab}, {h}, "head");
    net.add(nn::softmax_cross_entropy{true}, {h, labels}, "loss");
    return {std::move(net), [=](std::uint64_t step) {
                // Arithmetic sequences modulo the vocabulary: the next token is predictable.
                engine::rng r(3000 + step % 4);
                std::vector<std::int64_t> x(batch * seq), y(batch * seq);
                for (std::uint64_t n = 0; n < batch; ++n) {
                    const auto start = static_cast<std::int64_t>(r.below(vocab));
                    const auto stride = static_cast<std::int64_t>(1 + r.below(3));
                    for (std::uint64_t s = 0; s < seq; ++s) {
                        x[n * seq + s] = (start + stride * static_cast<std::int64_t>(s)) % std::int64_t(vocab);
                        y[n * seq + s] = (start + stride * static_cast<std::int64_t>(s + 1)) % std::int64_t(vocab);
                    }
                }
                return batch_data{{"ids", detail::bytes_of(x)}, {"labels", detail::bytes_of(y)}};
            }};
}

/// Feeds step `step`'s data to an executor.
template <class Executor>
void feed(Executor& ex, const model& m, std::uint64_t step) {
    for (const auto& [name, bytes] : m.batch(step)) ex.set_input(name, bytes);
}

} // namespace memplan::examples
