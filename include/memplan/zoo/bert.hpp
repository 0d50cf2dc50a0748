// BERT-base encoder (Devlin et al. 2019): 12 post-LayerNorm transformer
// layers, width 768, 12 heads, feed-forward 3072, GELU, dropout 0.1, with
// separate query/key/value projections as in the reference implementation.
// Embeddings and pooler are left out (the published encoder count,
// 85,054,464); the input is the embedded sequence (N, S, 768), and the loss
// is a parameter-free softmax cross-entropy over the 768 output features per
// token, standing in for a task head so the count stays the encoder's.
#pragma once

#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <cstdint>
#include <string>

namespace memplan::zoo {

inline nn::network bert_base(std::uint64_t batch, std::uint64_t seq = 512) {
    detail::expect_positive("bert_base", batch, seq);
    constexpr std::uint64_t d = 768, ff = 3072, heads = 12;
    constexpr double eps = 1e-12, drop = 0.1;
    nn::network net("bert_base");
    auto x = net.input("hidden", {batch, seq, d});
    auto labels = net.input("labels", {batch, seq}, nn::element::i64);
    for (int i = 0; i < 12; ++i) {
        const std::string p = "encoder." + std::to_string(i) + ".";
        auto q = net.add(nn::linear{d, d}, {x}, p + "query");
        auto k = net.add(nn::linear{d, d}, {x}, p + "key");
        auto v = net.add(nn::linear{d, d}, {x}, p + "value");
        auto a = net.add(nn::attention{heads, false, drop}, {q, k, v}, p + "attention");
        a = net.add(nn::linear{d, d}, {a}, p + "attn_out");
        a = net.add(nn::dropout{drop}, {a}, p + "attn_drop");
        a = net.add(nn::add{}, {a, x}, p + "attn_add");
        x = net.add(nn::layer_norm{d, eps}, {a}, p + "attn_norm");
        auto h = net.add(nn::linear{d, ff}, {x}, p + "ffn_in");
        h = net.add(nn::gelu{}, {h}, p + "gelu");
        h = net.add(nn::linear{ff, d}, {h}, p + "ffn_out");
        h = net.add(nn::dropout{drop}, {h}, p + "ffn_drop");
        h = net.add(nn::add{}, {h, x}, p + "ffn_add");
        x = net.add(nn::layer_norm{d, eps}, {h}, p + "ffn_norm");
    }
    net.add(nn::softmax_cross_entropy{true}, {x, labels}, "loss");
    return net;
}

} // namespace memplan::zoo
