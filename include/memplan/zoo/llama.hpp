// A Llama-style decoder (Touvron et al. 2023; Llama 3, Grattafiori et al.
// 2024) with its sizes as options: token embedding, L pre-norm blocks of
// RMSNorm, grouped-query attention with rotary embeddings on Q and K and a
// fused (FlashAttention) kernel, a residual add, RMSNorm, a SwiGLU MLP
// (gate and up projections, silu(gate) * up, down projection) and a second
// residual add; a final RMSNorm, an LM head without bias (tied to the token
// embedding or not) and next-token cross-entropy. No bias and no dropout
// anywhere, as in Llama. Layer names follow Hugging Face's
// LlamaForCausalLM ("model.layers.3.self_attn.q_proj"), so a graph reads
// beside that model's export.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/zoo/blocks.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace memplan::zoo {

/// The sizes of a decoder. In an override, 0 (or an empty `tied`) keeps the
/// preset's value.
struct llama_config {
    std::uint64_t layers = 0;
    std::uint64_t hidden = 0;   ///< model width
    std::uint64_t heads = 0;    ///< query heads; head width = hidden / heads
    std::uint64_t kv_heads = 0; ///< key/value heads (grouped-query attention); heads: plain multi-head
    std::uint64_t ffn = 0;      ///< width of the SwiGLU MLP
    std::uint64_t vocab = 0;
    std::optional<bool> tied;   ///< LM head shares the token embedding

    std::uint64_t head_dim() const noexcept { return heads ? hidden / heads : 0; }
};

/// A published configuration by name.
struct llama_preset {
    std::string_view name;
    llama_config config;
    std::string_view source;
};

namespace detail {
inline const std::array<llama_preset, 4>& llama_presets() {
    static const std::array<llama_preset, 4> table{{
        {"llama3-8b", {32, 4096, 32, 8, 14336, 128256, false}, "Meta-Llama-3-8B config.json"},
        {"llama3-70b", {80, 8192, 64, 8, 28672, 128256, false}, "Meta-Llama-3-70B config.json"},
        {"llama3.2-1b", {16, 2048, 32, 8, 8192, 128256, true}, "Llama-3.2-1B config.json"},
        {"tiny", {2, 64, 4, 2, 176, 512, false}, "a small decoder for tests (about 0.16 M parameters)"},
    }};
    return table;
}
} // namespace detail

/// The presets, in a fixed order.
inline std::span<const llama_preset> llama_presets() { return detail::llama_presets(); }

/// The preset's configuration with every field `overrides` sets replaced.
/// Throws memplan::error("zoo", ...) for an unknown preset or sizes that do
/// not make a decoder (naming the field).
inline llama_config resolve_llama(std::string_view preset, const llama_config& overrides = {}) {
    const llama_preset* p = nullptr;
    for (const auto& x : llama_presets())
        if (x.name == preset) p = &x;
    if (!p) {
        std::string all;
        for (const auto& x : llama_presets()) all += (all.empty() ? "" : ", ") + std::string(x.name);
        throw error("zoo", "unknown llama preset '" + std::string(preset) + "'; expected one of " + all);
    }
    llama_config c = p->config;
    auto take = [](std::uint64_t& field, std::uint64_t v) {
        if (v) field = v;
    };
    take(c.layers, overrides.layers);
    take(c.hidden, overrides.hidden);
    take(c.heads, overrides.heads);
    take(c.kv_heads, overrides.kv_heads);
    take(c.ffn, overrides.ffn);
    take(c.vocab, overrides.vocab);
    if (overrides.tied) c.tied = overrides.tied;
    if (c.hidden % c.heads)
        throw error("zoo", "llama: hidden " + std::to_string(c.hidden) + " is not divisible by " +
                               std::to_string(c.heads) + " heads");
    if (c.head_dim() % 2)
        throw error("zoo", "llama: the head width " + std::to_string(c.head_dim()) +
                               " (hidden / heads) must be even for rotary embeddings");
    if (c.kv_heads > c.heads || c.heads % c.kv_heads)
        throw error("zoo", "llama: kv-heads " + std::to_string(c.kv_heads) + " must divide heads " +
                               std::to_string(c.heads));
    return c;
}

/// The decoder `c` (resolved: every field set) on `batch` sequences of `seq` tokens.
inline nn::network llama(const llama_config& c, std::uint64_t batch, std::uint64_t seq) {
    detail::expect_positive("llama", batch, seq);
    for (auto [field, v] : {std::pair<const char*, std::uint64_t>{"layers", c.layers}, {"hidden", c.hidden},
                            {"heads", c.heads}, {"kv-heads", c.kv_heads}, {"ffn", c.ffn}, {"vocab", c.vocab}})
        if (v == 0) throw error("zoo", std::string("llama: ") + field + " must be positive");
    const std::uint64_t d = c.hidden, dh = c.head_dim(), kv = c.kv_heads * dh;
    nn::network net("llama");
    auto tokens = net.input("tokens", {batch, seq}, nn::element::i64);
    auto labels = net.input("labels", {batch, seq}, nn::element::i64);
    auto x = net.add(nn::embedding{c.vocab, d}, {tokens}, "model.embed_tokens");
    for (std::uint64_t i = 0; i < c.layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        auto a = net.add(nn::rms_norm{d}, {x}, p + "input_layernorm");
        auto q = net.add(nn::linear{d, d, false}, {a}, p + "self_attn.q_proj");
        auto k = net.add(nn::linear{d, kv, false}, {a}, p + "self_attn.k_proj");
        auto v = net.add(nn::linear{d, kv, false}, {a}, p + "self_attn.v_proj");
        q = net.add(nn::rotary{dh}, {q}, p + "self_attn.q_rotary");
        k = net.add(nn::rotary{dh}, {k}, p + "self_attn.k_rotary");
        a = net.add(nn::flash_attention{c.heads, c.kv_heads, true}, {q, k, v}, p + "self_attn.attn");
        a = net.add(nn::linear{d, d, false}, {a}, p + "self_attn.o_proj");
        x = net.add(nn::add{}, {a, x}, p + "attn_residual");
        auto h = net.add(nn::rms_norm{d}, {x}, p + "post_attention_layernorm");
        auto gate = net.add(nn::linear{d, c.ffn, false}, {h}, p + "mlp.gate_proj");
        auto up = net.add(nn::linear{d, c.ffn, false}, {h}, p + "mlp.up_proj");
        h = net.add(nn::swiglu{}, {gate, up}, p + "mlp.act");
        h = net.add(nn::linear{c.ffn, d, false}, {h}, p + "mlp.down_proj");
        x = net.add(nn::add{}, {h, x}, p + "mlp_residual");
    }
    x = net.add(nn::rms_norm{d}, {x}, "model.norm");
    if (c.tied.value_or(false))
        x = net.add(nn::linear{d, c.vocab, false}, {x}, "lm_head", {{"w", "model.embed_tokens.w"}});
    else
        x = net.add(nn::linear{d, c.vocab, false}, {x}, "lm_head");
    net.add(nn::softmax_cross_entropy{true}, {x, labels}, "loss");
    return net;
}

} // namespace memplan::zoo
