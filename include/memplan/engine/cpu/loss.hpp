// CPU kernels of softmax cross-entropy: log-softmax over the class axis
// (axis 1, or the last axis), the mean negative log-likelihood of the labels
// as an fp32 scalar, and its gradient (softmax - one-hot) / positions. The
// log-probabilities may overwrite the logits, the gradient the
// log-probabilities.
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/loss.hpp>

#include <cmath>

namespace memplan::engine::cpu {

/// Runs "<softmax_cross_entropy>.fwd" or ".bwd". Throws on a label outside the classes.
inline void run(const nn::softmax_cross_entropy& l, const kernel_call& c) {
    using nn::slot;
    const auto q = loss_shape(l, c);
    const index outer = q.outer, C = q.classes, inner = q.inner;
    const auto lp = need(c, slot::internal(0), "the log-probabilities");
    const auto* labels = need(c, slot::input(1), "the labels").as<const std::int64_t>();
    const double positions = double(outer * inner);
    auto label = [&](index o, index i) {
        const std::int64_t y = labels[o * inner + i];
        if (y < 0 || y >= C)
            fail(c, "label " + std::to_string(y) + " at position " + std::to_string(o * inner + i) +
                        " is outside the " + std::to_string(C) + " classes");
        return static_cast<index>(y);
    };
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const float* X = fp(need(c, slot::input(0), "the logits"));
        float* L = fp(lp);
        double total = 0;
        for (index o = 0; o < outer; ++o)
            for (index i = 0; i < inner; ++i) {
                const index base = o * C * inner + i;
                float m = X[base];
                for (index k = 1; k < C; ++k) m = std::max(m, X[base + k * inner]);
                double z = 0;
                for (index k = 0; k < C; ++k) z += std::exp(double(X[base + k * inner] - m));
                const float lse = m + static_cast<float>(std::log(z));
                for (index k = 0; k < C; ++k) L[base + k * inner] = X[base + k * inner] - lse;
                total -= L[base + label(o, i) * inner];
            }
        *fp(need(c, slot::output(), "the loss")) = static_cast<float>(total / positions);
        return;
    }
    case nn::op_pass::bwd: {
        const float* L = fp(lp);
        float* DX = fp(need(c, slot::grad_input(0), "the logits gradient"));
        const float inv = static_cast<float>(1.0 / positions);
        for (index o = 0; o < outer; ++o)
            for (index i = 0; i < inner; ++i) {
                const index base = o * C * inner + i;
                const index y = label(o, i);
                for (index k = 0; k < C; ++k)
                    DX[base + k * inner] = (std::exp(L[base + k * inner]) - (k == y ? 1.0f : 0.0f)) * inv;
            }
        return;
    }
    default: fail(c, "the CPU backend has no kernel for this op");
    }
}

} // namespace memplan::engine::cpu
