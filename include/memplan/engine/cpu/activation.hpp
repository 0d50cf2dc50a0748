// CPU kernels of ReLU (optionally capped) and GELU (tanh form, as GPT-2).
//
// ReLU's forward writes y and, when the layer has one, the 1-bit mask of
// where the gradient passes; its backward reads y ("from_output"), the mask
// ("from_mask") or x, whichever the step's variant binds. Both may run in
// place (y over x, dx over dy).
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/activation.hpp>

#include <algorithm>
#include <cmath>

namespace memplan::engine::cpu {

/// Runs "<relu>.fwd" or ".bwd".
inline void run(const nn::relu& l, const kernel_call& c) {
    using nn::slot;
    const float cap = static_cast<float>(l.cap);
    auto passes = [cap](float v) { return v > 0.0f && (cap <= 0.0f || v < cap); };
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const auto x = need(c, slot::input(0), "the input");
        const index n = count(x);
        const float* X = fp(x);
        if (const auto m = c.slot(slot::internal(0)))
            write_mask(m.as<std::uint8_t>(), n, [&](index i) { return passes(X[i]); });
        float* Y = fp(need(c, slot::output(), "the output"));
        for (index i = 0; i < n; ++i) {
            const float v = X[i] > 0.0f ? X[i] : 0.0f;
            Y[i] = cap > 0.0f ? std::min(v, cap) : v;
        }
        return;
    }
    case nn::op_pass::bwd: break;
    default: fail(c, "the CPU backend has no kernel for this op");
    }
    const auto dy = need(c, slot::grad_output(), "the output gradient");
    const index n = count(dy);
    const float* DY = fp(dy);
    float* DX = fp(need(c, slot::grad_input(0), "the input gradient"));
    if (reads_mask(c)) {
        const auto* m = need(c, slot::internal(0), "the mask").as<const std::uint8_t>();
        for (index i = 0; i < n; ++i) DX[i] = mask_bit(m, i) ? DY[i] : 0.0f;
    } else {
        // From y: y > 0 exactly where x > 0 (and below the cap where y < cap).
        const auto s = c.slot(slot::output()) ? c.slot(slot::output()) : need(c, slot::input(0), "the input");
        const float* V = fp(s);
        for (index i = 0; i < n; ++i) DX[i] = passes(V[i]) ? DY[i] : 0.0f;
    }
}

/// Runs "<gelu>.fwd" or ".bwd" (tanh approximation).
inline void run(const nn::gelu&, const kernel_call& c) {
    using nn::slot;
    constexpr float k = 0.7978845608028654f, a = 0.044715f;
    const auto x = need(c, slot::input(0), "the input");
    const index n = count(x);
    const float* X = fp(x);
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        float* Y = fp(need(c, slot::output(), "the output"));
        for (index i = 0; i < n; ++i) {
            const float v = X[i];
            Y[i] = 0.5f * v * (1.0f + std::tanh(k * (v + a * v * v * v)));
        }
        return;
    }
    case nn::op_pass::bwd: break;
    default: fail(c, "the CPU backend has no kernel for this op");
    }
    const float* DY = fp(need(c, slot::grad_output(), "the output gradient"));
    float* DX = fp(need(c, slot::grad_input(0), "the input gradient"));
    for (index i = 0; i < n; ++i) {
        const float v = X[i];
        const float t = std::tanh(k * (v + a * v * v * v));
        const float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * a * v * v);
        DX[i] = DY[i] * d;
    }
}

} // namespace memplan::engine::cpu
