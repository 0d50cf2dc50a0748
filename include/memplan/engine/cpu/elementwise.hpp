// CPU kernels of the structural layers: add (may write over its first
// input), concatenation along an axis and its slicing backward, flatten (a
// copy unless it runs in place), and dropout (a keep-mask drawn from a hash of
// the training step, the layer and the position, so a recomputed forward
// draws the same mask again).
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/elementwise.hpp>

#include <algorithm>
#include <cstring>
#include <functional>

namespace memplan::engine::cpu {

/// Runs "<add>.fwd".
inline void run(const nn::add&, const kernel_call& c) {
    using nn::slot;
    if (c.pass() != nn::op_pass::fwd) fail(c, "the CPU backend has no kernel for this op");
    const auto a = need(c, slot::input(0), "input 0");
    const index n = count(a);
    vector_map(fp(need(c, slot::output(), "the output")), n) =
        const_vector_map(fp(a), n) + const_vector_map(fp(need(c, slot::input(1), "input 1")), n);
}

/// Runs "<concat>.fwd" or ".bwd" (gradients of unneeded inputs are skipped).
inline void run(const nn::concat& l, const kernel_call& c) {
    using nn::slot;
    const bool forward = forward_or_backward(c);
    const auto whole = forward ? need(c, slot::output(), "the output") : need(c, slot::grad_output(), "the output gradient");
    const auto q = concat_shape(l, c);
    const index outer = q.outer, total = q.total;
    float* Z = fp(whole);
    index at = 0;
    for (std::uint32_t i = 0; i < c.node->inputs.size(); ++i) {
        const auto part = forward ? need(c, slot::input(i), "an input") : c.slot(slot::grad_input(i));
        // The part's width from the network's shapes: its gradient may be unbound.
        const index width = q.width(i);
        if (part) {
            float* P = fp(part);
            for (index o = 0; o < outer; ++o) {
                if (forward)
                    std::memcpy(Z + o * total + at, P + o * width, static_cast<std::size_t>(width) * sizeof(float));
                else
                    std::memcpy(P + o * width, Z + o * total + at, static_cast<std::size_t>(width) * sizeof(float));
            }
        }
        at += width;
    }
}

/// Runs "<flatten>.fwd": a copy, or nothing when the output took the input's buffer.
inline void run(const nn::flatten&, const kernel_call& c) {
    using nn::slot;
    const auto x = need(c, slot::input(0), "the input");
    const auto y = need(c, slot::output(), "the output");
    if (x.data != y.data) std::memmove(y.data, x.data, static_cast<std::size_t>(count(x)) * sizeof(float));
}

/// Runs "<dropout>.fwd" or ".bwd" (inverted dropout: kept values scaled by 1 / (1 - p)).
inline void run(const nn::dropout& l, const kernel_call& c) {
    using nn::slot;
    auto* mask = need(c, slot::internal(0), "the keep-mask").as<std::uint8_t>();
    const float scale = 1.0f / (1.0f - static_cast<float>(l.p));
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const auto x = need(c, slot::input(0), "the input");
        const index n = count(x);
        const std::uint64_t seed = std::hash<std::string>{}(c.node->name) ^ (c.iteration * 0x9E3779B97F4A7C15ull);
        const auto threshold = static_cast<std::uint64_t>(l.p * 18446744073709551616.0);
        const float* X = fp(x);
        float* Y = fp(need(c, slot::output(), "the output"));
        for (index i = 0; i < n; ++i) {
            std::uint64_t z = seed + static_cast<std::uint64_t>(i) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
            z ^= z >> 29;
            mask[i] = z >= threshold ? 1 : 0;
            Y[i] = mask[i] ? X[i] * scale : 0.0f;
        }
        return;
    }
    case nn::op_pass::bwd: {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const float* DY = fp(dy);
        float* DX = fp(need(c, slot::grad_input(0), "the input gradient"));
        for (index i = 0; i < count(dy); ++i) DX[i] = mask[i] ? DY[i] * scale : 0.0f;
        return;
    }
    default: fail(c, "the CPU backend has no kernel for this op");
    }
}

} // namespace memplan::engine::cpu
