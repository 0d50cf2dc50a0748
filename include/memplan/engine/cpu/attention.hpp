// CPU kernels of multi-head attention as its lowered ops: scores = Q K^T /
// sqrt(d_head) (causal: -inf above the diagonal), softmax in place, context =
// P V, and their backward ops. Heads are strided column blocks of the
// (N, S, D) inputs (or of the packed (N, S, 3D) input), mapped without copies.
// Internal slots, in the layer's order: scores, probs, d_probs, d_scores, and
// d_v for a packed input. Attention dropout is not supported on the CPU.
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/attention.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace memplan::engine::cpu {

/// Runs one of "<attention>.scores", ".softmax", ".context", ".context_bwd",
/// ".softmax_bwd", ".scores_bwd".
inline void run(const nn::attention& l, const kernel_call& c) {
    using nn::slot;
    if (l.dropout > 0) fail(c, "attention dropout is not supported by the CPU backend");
    const auto g = attention_shape(l, c);
    const bool packed = g.packed;
    const index N = g.n, Sq = g.sq, Sk = g.sk, D = g.d, H = g.heads, dh = g.dh, ld_q = g.ld, ld_k = g.ld;
    const float scale = g.scale;
    // Column offsets of Q, K, V inside their tensors, and the tensors' slots.
    const slot sq = g.q, sk = g.k, sv = g.v;
    const index off_k = g.off_k, off_v = g.off_v;
    const slot s_scores = g.scores, s_probs = g.probs, s_dprobs = g.d_probs, s_dscores = g.d_scores;
    const index plane = g.plane();
    auto head = [&](float* base, index n, index rows, index ld, index col, index h) {
        return strided_map(base + n * rows * ld + col + h * dh, rows, dh, Eigen::OuterStride<>(ld));
    };
    switch (c.pass()) {
    case nn::op_pass::scores: {
        float* Q = fp(need(c, sq, "Q"));
        float* K = fp(need(c, sk, "K"));
        float* Sc = fp(need(c, s_scores, "the scores"));
        for (index n = 0; n < N; ++n)
            for (index h = 0; h < H; ++h) {
                matrix_map S(Sc + (n * H + h) * plane, Sq, Sk);
                S.noalias() = head(Q, n, Sq, ld_q, 0, h) * head(K, n, Sk, ld_k, off_k, h).transpose();
                S *= scale;
                if (l.causal)
                    for (index i = 0; i < Sq; ++i)
                        for (index j = i + 1; j < Sk; ++j) S(i, j) = -std::numeric_limits<float>::infinity();
            }
        return;
    }
    case nn::op_pass::softmax: {
        const float* Sc = fp(need(c, s_scores, "the scores"));
        float* P = fp(need(c, s_probs, "the probabilities"));
        for (index r = 0; r < N * H * Sq; ++r) {
            const float* s = Sc + r * Sk;
            float* p = P + r * Sk;
            float m = s[0];
            for (index j = 1; j < Sk; ++j) m = std::max(m, s[j]);
            float z = 0;
            for (index j = 0; j < Sk; ++j) z += std::exp(s[j] - m);
            for (index j = 0; j < Sk; ++j) p[j] = std::exp(s[j] - m) / z;
        }
        return;
    }
    case nn::op_pass::context: {
        float* P = fp(need(c, s_probs, "the probabilities"));
        float* V = fp(need(c, sv, "V"));
        float* Y = fp(need(c, slot::output(), "the output"));
        for (index n = 0; n < N; ++n)
            for (index h = 0; h < H; ++h)
                head(Y, n, Sq, D, 0, h).noalias() =
                    const_matrix_map(P + (n * H + h) * plane, Sq, Sk) * head(V, n, Sk, ld_k, off_v, h);
        return;
    }
    case nn::op_pass::context_bwd: {
        float* DY = fp(need(c, slot::grad_output(), "the output gradient"));
        float* P = fp(need(c, s_probs, "the probabilities"));
        float* V = fp(need(c, sv, "V"));
        float* DP = fp(need(c, s_dprobs, "the probabilities' gradient"));
        const auto dv = c.slot(g.d_v);
        for (index n = 0; n < N; ++n)
            for (index h = 0; h < H; ++h) {
                matrix_map(DP + (n * H + h) * plane, Sq, Sk).noalias() =
                    head(DY, n, Sq, D, 0, h) * head(V, n, Sk, ld_k, off_v, h).transpose();
                if (dv)
                    head(fp(dv), n, Sk, D, 0, h).noalias() =
                        const_matrix_map(P + (n * H + h) * plane, Sq, Sk).transpose() * head(DY, n, Sq, D, 0, h);
            }
        return;
    }
    case nn::op_pass::softmax_bwd: {
        const float* P = fp(need(c, s_probs, "the probabilities"));
        const float* DP = fp(need(c, s_dprobs, "the probabilities' gradient"));
        float* DS = fp(need(c, s_dscores, "the scores' gradient"));
        for (index r = 0; r < N * H * Sq; ++r) {
            const float* p = P + r * Sk;
            const float* dp = DP + r * Sk;
            float dot = 0;
            for (index j = 0; j < Sk; ++j) dot += p[j] * dp[j];
            float* ds = DS + r * Sk;
            for (index j = 0; j < Sk; ++j) ds[j] = p[j] * (dp[j] - dot);
        }
        return;
    }
    case nn::op_pass::scores_bwd: {
        float* DS = fp(need(c, s_dscores, "the scores' gradient"));
        float* Q = fp(need(c, sq, "Q"));
        float* K = fp(need(c, sk, "K"));
        const auto dq = c.slot(slot::grad_input(0));
        const auto dk = packed ? dq : c.slot(slot::grad_input(1));
        for (index n = 0; n < N; ++n)
            for (index h = 0; h < H; ++h) {
                const const_matrix_map S(DS + (n * H + h) * plane, Sq, Sk);
                if (dq) head(fp(dq), n, Sq, ld_q, 0, h).noalias() = scale * (S * head(K, n, Sk, ld_k, off_k, h));
                if (dk) head(fp(dk), n, Sk, ld_k, off_k, h).noalias() = scale * (S.transpose() * head(Q, n, Sq, ld_q, 0, h));
            }
        if (packed && dq) {
            const float* DV = fp(need(c, g.d_v, "the staged V gradient"));
            for (index r = 0; r < N * Sq; ++r)
                std::memcpy(fp(dq) + r * 3 * D + 2 * D, DV + r * D, static_cast<std::size_t>(D) * sizeof(float));
        }
        return;
    }
    default: fail(c, "the CPU backend has no kernel for this op");
    }
}

} // namespace memplan::engine::cpu
