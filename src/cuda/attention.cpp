// The CUDA kernels of multi-head attention as its lowered ops: cuBLAS
// strided-batched GEMMs over the heads and memplan's own softmax.
#include "common.hpp"

#include <cstddef>

namespace memplan::engine::cuda::detail {

void run(context& x, const nn::attention& l, const kernel_call& c) {
    using nn::slot;
    if (l.dropout > 0) fail(c, "attention dropout is not supported by the CUDA backend");
    const auto g = attention_shape(l, c);
    const bool packed = g.packed;
    const i64 N = g.n, Sq = g.sq, Sk = g.sk, D = g.d, H = g.heads, dh = g.dh, ld = g.ld, plane = g.plane();
    const i64 off_k = g.off_k, off_v = g.off_v;
    const float scale = g.scale;
    const slot sq = g.q, sk = g.k, sv = g.v;
    const slot s_scores = g.scores, s_probs = g.probs, s_dprobs = g.d_probs, s_dscores = g.d_scores;
    // Per batch item, one strided-batched GEMM over the H heads (column blocks dh apart).
    switch (c.pass()) {
    case nn::op_pass::scores: {
        const float* Q = fp(need(c, sq, "Q"));
        const float* K = fp(need(c, sk, "K"));
        float* Sc = fp(need(c, s_scores, "the scores"));
        for (i64 n = 0; n < N; ++n)
            gemm_batched(x, false, true, Sq, Sk, dh, scale, Q + n * Sq * ld, ld, dh, K + n * Sk * ld + off_k, ld, dh,
                         0.0f, Sc + n * H * plane, Sk, plane, H);
        if (l.causal) kernels::causal_mask(x.stream, Sc, N * H, Sq, Sk);
        break;
    }
    case nn::op_pass::softmax: {
        kernels::softmax_rows(x.stream, fp(need(c, s_scores, "the scores")), fp(need(c, s_probs, "the probabilities")),
                              N * H * Sq, Sk);
        break;
    }
    case nn::op_pass::context: {
        const float* P = fp(need(c, s_probs, "the probabilities"));
        const float* V = fp(need(c, sv, "V"));
        float* Y = fp(need(c, slot::output(), "the output"));
        for (i64 n = 0; n < N; ++n)
            gemm_batched(x, false, false, Sq, dh, Sk, 1.0f, P + n * H * plane, Sk, plane, V + n * Sk * ld + off_v, ld, dh,
                         0.0f, Y + n * Sq * D, D, dh, H);
        break;
    }
    case nn::op_pass::context_bwd: {
        const float* DY = fp(need(c, slot::grad_output(), "the output gradient"));
        const float* P = fp(need(c, s_probs, "the probabilities"));
        const float* V = fp(need(c, sv, "V"));
        float* DP = fp(need(c, s_dprobs, "the probabilities' gradient"));
        const auto dv = c.slot(g.d_v);
        for (i64 n = 0; n < N; ++n) {
            gemm_batched(x, false, true, Sq, Sk, dh, 1.0f, DY + n * Sq * D, D, dh, V + n * Sk * ld + off_v, ld, dh, 0.0f,
                         DP + n * H * plane, Sk, plane, H);
            if (dv)
                gemm_batched(x, true, false, Sk, dh, Sq, 1.0f, P + n * H * plane, Sk, plane, DY + n * Sq * D, D, dh, 0.0f,
                             fp(dv) + n * Sk * D, D, dh, H);
        }
        break;
    }
    case nn::op_pass::softmax_bwd: {
        kernels::softmax_rows_backward(x.stream, fp(need(c, s_probs, "the probabilities")),
                                       fp(need(c, s_dprobs, "the probabilities' gradient")),
                                       fp(need(c, s_dscores, "the scores' gradient")), N * H * Sq, Sk);
        break;
    }
    case nn::op_pass::scores_bwd: {
        const float* DS = fp(need(c, s_dscores, "the scores' gradient"));
        const float* Q = fp(need(c, sq, "Q"));
        const float* K = fp(need(c, sk, "K"));
        const auto dq = c.slot(slot::grad_input(0));
        const auto dk = packed ? dq : c.slot(slot::grad_input(1));
        for (i64 n = 0; n < N; ++n) {
            if (dq)
                gemm_batched(x, false, false, Sq, dh, Sk, scale, DS + n * H * plane, Sk, plane, K + n * Sk * ld + off_k,
                             ld, dh, 0.0f, fp(dq) + n * Sq * ld, ld, dh, H);
            if (dk)
                gemm_batched(x, true, false, Sk, dh, Sq, scale, DS + n * H * plane, Sk, plane, Q + n * Sq * ld, ld, dh,
                             0.0f, fp(dk) + n * Sk * ld + off_k, ld, dh, H);
        }
        if (packed && dq) {
            const float* DV = fp(need(c, g.d_v, "the staged V gradient"));
            const auto row = static_cast<std::size_t>(D) * sizeof(float);
            MEMPLAN_CUDA_CHECK(cudaMemcpy2DAsync(fp(dq) + 2 * D, static_cast<std::size_t>(3 * D) * sizeof(float), DV, row,
                                                 row, static_cast<std::size_t>(N * Sq), cudaMemcpyDeviceToDevice,
                                                 x.stream));
        }
        break;
    }
    default: fail(c, "the CUDA backend has no kernel for this op");
    }
    launched(c);
}

} // namespace memplan::engine::cuda::detail
