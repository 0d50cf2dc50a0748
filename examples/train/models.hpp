// The example networks of the training engine at small sizes, and their
// synthetic data (fixed seed): an MLP, a CNN with batch-norm, a small ResNet,
// a small U-Net (two levels down, two up, skip concatenations) and a
// two-layer transformer encoder with a next-token loss. Shared by the
// train_* programs and the engine tests.
#pragma once

#include <memplan/engine/executor.hpp>
#include <memplan/nn/network.hpp>

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

/// x (N, 64) -> 128 -> 128 -> 10 classes, ReLU between.
inline model mlp(std::uint64_t batch = 32) {
    nn::network net("mlp");
    auto x = net.input("x", {batch, 64});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    auto h = net.add(nn::linear{64, 128}, {x}, "fc1");
    h = net.add(nn::relu{}, {h}, "relu1");
    h = net.add(nn::linear{128, 128}, {h}, "fc2");
    h = net.add(nn::relu{}, {h}, "relu2");
    h = net.add(nn::linear{128, 10}, {h}, "fc3");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return {std::move(net), detail::images_and_labels(batch * 64, batch, 10)};
}

/// x (N, 3, 16, 16): two conv-bn-relu-maxpool stages, then a linear classifier.
inline model cnn(std::uint64_t batch = 8) {
    nn::network net("cnn");
    auto x = net.input("x", {batch, 3, 16, 16});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    auto h = net.add(nn::conv2d::make(3, 16, 3, 1, 1), {x}, "conv1");
    h = net.add(nn::batch_norm{16}, {h}, "bn1");
    h = net.add(nn::relu{}, {h}, "relu1");
    h = net.add(nn::max_pool2d{}, {h}, "pool1");
    h = net.add(nn::conv2d::make(16, 32, 3, 1, 1), {h}, "conv2");
    h = net.add(nn::batch_norm{32}, {h}, "bn2");
    h = net.add(nn::relu{}, {h}, "relu2");
    h = net.add(nn::max_pool2d{}, {h}, "pool2");
    h = net.add(nn::flatten{}, {h}, "flatten");
    h = net.add(nn::linear{32 * 4 * 4, 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return {std::move(net), detail::images_and_labels(batch * 3 * 16 * 16, batch, 10)};
}

/// A small ResNet: stem, three basic blocks (the second down-samples with a
/// 1x1 projection), global average pooling and a linear classifier.
inline model resnet(std::uint64_t batch = 8) {
    nn::network net("resnet");
    auto x = net.input("x", {batch, 3, 16, 16});
    auto labels = net.input("labels", {batch}, nn::element::i64);
    auto cbr = [&](nn::value in, std::uint64_t cin, std::uint64_t cout, std::uint64_t stride, const std::string& name,
                   bool relu) {
        auto h = net.add(nn::conv2d::make(cin, cout, 3, stride, 1, 1, false), {in}, name + ".conv");
        h = net.add(nn::batch_norm{cout}, {h}, name + ".bn");
        return relu ? net.add(nn::relu{}, {h}, name + ".relu") : h;
    };
    auto h = cbr(x, 3, 16, 1, "stem", true);
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
    h = block(h, 16, 16, 1, "block1");
    h = block(h, 16, 32, 2, "block2");
    h = block(h, 32, 32, 1, "block3");
    h = net.add(nn::global_avg_pool{}, {h}, "gap");
    h = net.add(nn::linear{32, 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return {std::move(net), detail::images_and_labels(batch * 3 * 16 * 16, batch, 10)};
}

/// A small U-Net for per-pixel classes: two levels down (conv, relu, max
/// pool), a bottleneck, two levels up (transposed conv, concatenation with the
/// skip, conv, relu) and a 1x1 head.
inline model unet(std::uint64_t batch = 4) {
    nn::network net("unet");
    auto x = net.input("x", {batch, 3, 16, 16});
    auto labels = net.input("labels", {batch, 16, 16}, nn::element::i64);
    auto cr = [&](nn::value in, std::uint64_t cin, std::uint64_t cout, const std::string& name) {
        auto h = net.add(nn::conv2d::make(cin, cout, 3, 1, 1), {in}, name + ".conv");
        return net.add(nn::relu{}, {h}, name + ".relu");
    };
    auto e1 = cr(x, 3, 8, "enc1");                                        // (N, 8, 16, 16)
    auto e2 = cr(net.add(nn::max_pool2d{}, {e1}, "down1"), 8, 16, "enc2"); // (N, 16, 8, 8)
    auto b = cr(net.add(nn::max_pool2d{}, {e2}, "down2"), 16, 32, "mid"); // (N, 32, 4, 4)
    auto u2 = net.add(nn::conv_transpose2d{32, 16}, {b}, "up2");           // (N, 16, 8, 8)
    auto d2 = cr(net.add(nn::concat{}, {u2, e2}, "cat2"), 32, 16, "dec2");
    auto u1 = net.add(nn::conv_transpose2d{16, 8}, {d2}, "up1"); // (N, 8, 16, 16)
    auto d1 = cr(net.add(nn::concat{}, {u1, e1}, "cat1"), 16, 8, "dec1");
    auto logits = net.add(nn::conv2d::make(8, 4, 1), {d1}, "head");
    net.add(nn::softmax_cross_entropy{}, {logits, labels}, "loss");
    return {std::move(net), [batch](std::uint64_t step) {
                // Labels: the quadrant of each pixel, and the image says which (learnable).
                engine::rng r(2000 + step % 4);
                std::vector<float> img(batch * 3 * 256);
                for (auto& v : img) v = r.uniform(-1.0f, 1.0f);
                std::vector<std::int64_t> y(batch * 256);
                for (std::size_t i = 0; i < y.size(); ++i) {
                    const std::size_t p = i % 256, n = i / 256;
                    const auto q = static_cast<std::int64_t>((p / 16 >= 8 ? 2 : 0) + (p % 16 >= 8 ? 1 : 0));
                    y[i] = (q + static_cast<std::int64_t>(img[n * 768] > 0 ? 1 : 0)) % 4;
                }
                return batch_data{{"x", detail::bytes_of(img)}, {"labels", detail::bytes_of(y)}};
            }};
}

/// Token embedding + positions, two pre-norm encoder layers (packed QKV
/// attention, GELU MLP), a final layer-norm and a next-token head.
inline model transformer(std::uint64_t batch = 4, std::uint64_t seq = 16, bool causal = true) {
    constexpr std::uint64_t vocab = 64, d = 32, heads = 4;
    nn::network net("transformer");
    auto ids = net.input("ids", {batch, seq}, nn::element::i64);
    auto labels = net.input("labels", {batch, seq}, nn::element::i64);
    auto h = net.add(nn::embedding{vocab, d}, {ids}, "wte");
    h = net.add(nn::position_embedding{seq, d}, {h}, "wpe");
    for (int l = 0; l < 2; ++l) {
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
