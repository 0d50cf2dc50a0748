// GPT-2 small (Radford et al. 2019): token and learned position embeddings
// (1024 positions), 12 pre-LayerNorm decoder blocks of width 768 with 12
// causal heads and a 3072 GELU MLP, dropout 0.1, a final LayerNorm and an LM
// head tied to the token embedding. Published parameter count 124,439,808.
// The attention projections are packed (c_attn: 768 -> 2304) as in OpenAI's
// checkpoint; the loss is next-token softmax cross-entropy over 50,257 tokens.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <cstdint>
#include <string>

namespace memplan::zoo {

inline nn::network gpt2_small(std::uint64_t batch, std::uint64_t seq = 1024) {
    detail::expect_positive("gpt2", batch, seq);
    constexpr std::uint64_t d = 768, ff = 3072, heads = 12, vocab = 50257, positions = 1024;
    constexpr double drop = 0.1;
    if (seq > positions)
        throw error("zoo", "model 'gpt2' takes at most " + std::to_string(positions) + " tokens, got " +
                               std::to_string(seq));
    nn::network net("gpt2");
    auto tokens = net.input("tokens", {batch, seq}, nn::element::i64);
    auto labels = net.input("labels", {batch, seq}, nn::element::i64);
    auto x = net.add(nn::embedding{vocab, d}, {tokens}, "wte");
    x = net.add(nn::position_embedding{positions, d}, {x}, "wpe");
    x = net.add(nn::dropout{drop}, {x}, "drop");
    for (int i = 0; i < 12; ++i) {
        const std::string p = "h." + std::to_string(i) + ".";
        auto a = net.add(nn::layer_norm{d}, {x}, p + "ln_1");
        a = net.add(nn::linear{d, 3 * d}, {a}, p + "attn.c_attn");
        a = net.add(nn::attention{heads, true, drop}, {a}, p + "attn.sdpa");
        a = net.add(nn::linear{d, d}, {a}, p + "attn.c_proj");
        a = net.add(nn::dropout{drop}, {a}, p + "attn.resid_drop");
        x = net.add(nn::add{}, {a, x}, p + "add_1");
        auto h = net.add(nn::layer_norm{d}, {x}, p + "ln_2");
        h = net.add(nn::linear{d, ff}, {h}, p + "mlp.c_fc");
        h = net.add(nn::gelu{}, {h}, p + "mlp.gelu");
        h = net.add(nn::linear{ff, d}, {h}, p + "mlp.c_proj");
        h = net.add(nn::dropout{drop}, {h}, p + "mlp.resid_drop");
        x = net.add(nn::add{}, {h, x}, p + "add_2");
    }
    x = net.add(nn::layer_norm{d}, {x}, "ln_f");
    x = net.add(nn::linear{d, vocab, false}, {x}, "lm_head", {{"w", "wte.w"}});
    net.add(nn::softmax_cross_entropy{true}, {x, labels}, "loss");
    return net;
}

} // namespace memplan::zoo
