// CPU kernels of conv2d and conv_transpose2d.
//
// conv2d has two paths, as cuDNN's algorithms do: "gemm_im2col" unfolds each
// image into a column matrix (C/g * kh * kw, H_out * W_out) in the step's
// planned workspace and runs one Eigen GEMM per group; the direct path
// ("implicit_gemm", and "winograd", for which the CPU backend has no kernel of
// its own) walks the filter taps with no scratch memory. A 1x1 stride-1
// convolution is a plain GEMM over the input. The transposed convolution is
// direct. Every pass writes its whole output.
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/conv.hpp>

#include <algorithm>

namespace memplan::engine::cpu {

namespace detail {

/// Column matrix (C * R * S, Ho * Wo) of one image; zero where the window
/// hangs over the padding.
inline void im2col(const conv_geometry& q, const float* x, float* col) {
    for (index ch = 0; ch < q.c; ++ch)
        for (index a = 0; a < q.r; ++a)
            for (index b = 0; b < q.s; ++b) {
                float* row = col + ((ch * q.r + a) * q.s + b) * q.cols();
                index h0, h1, w0, w1;
                valid_range(q.h, q.ho, q.sh, q.ph, a * q.dh, h0, h1);
                valid_range(q.w, q.wo, q.sw, q.pw, b * q.dw, w0, w1);
                std::fill(row, row + q.cols(), 0.0f);
                for (index oh = h0; oh < h1; ++oh) {
                    const float* src = x + (ch * q.h + oh * q.sh - q.ph + a * q.dh) * q.w;
                    for (index ow = w0; ow < w1; ++ow) row[oh * q.wo + ow] = src[ow * q.sw - q.pw + b * q.dw];
                }
            }
}

/// Adds the column matrix of one image back into its (C, H, W) gradient.
inline void col2im(const conv_geometry& q, const float* col, float* dx) {
    std::fill(dx, dx + q.c * q.h * q.w, 0.0f);
    for (index ch = 0; ch < q.c; ++ch)
        for (index a = 0; a < q.r; ++a)
            for (index b = 0; b < q.s; ++b) {
                const float* row = col + ((ch * q.r + a) * q.s + b) * q.cols();
                index h0, h1, w0, w1;
                valid_range(q.h, q.ho, q.sh, q.ph, a * q.dh, h0, h1);
                valid_range(q.w, q.wo, q.sw, q.pw, b * q.dw, w0, w1);
                for (index oh = h0; oh < h1; ++oh) {
                    float* dst = dx + (ch * q.h + oh * q.sh - q.ph + a * q.dh) * q.w;
                    for (index ow = w0; ow < w1; ++ow) dst[ow * q.sw - q.pw + b * q.dw] += row[oh * q.wo + ow];
                }
            }
}

/// Calls f(out_row, in_row, lo, hi) for every tap (a, b) and output row, where
/// output columns [lo, hi) read input column ow * sw - pw + b * dw.
template <class F>
void for_each_tap(const conv_geometry& q, index a, index b, F f) {
    index h0, h1, w0, w1;
    valid_range(q.h, q.ho, q.sh, q.ph, a * q.dh, h0, h1);
    valid_range(q.w, q.wo, q.sw, q.pw, b * q.dw, w0, w1);
    for (index oh = h0; oh < h1; ++oh) f(oh, oh * q.sh - q.ph + a * q.dh, w0, w1, b * q.dw - q.pw);
}

} // namespace detail

/// Runs "<conv2d>.fwd", ".bwd_data" or ".bwd_filter" with the step's variant.
inline void run(const nn::conv2d& l, const kernel_call& c) {
    using nn::slot;
    const bool fwd = c.pass() == nn::op_pass::fwd, data = c.pass() == nn::op_pass::bwd_data,
               filter = c.pass() == nn::op_pass::bwd_filter;
    if (!fwd && !data && !filter) fail(c, "the CPU backend has no kernel for this op");
    const auto w = filter ? tensor_ref{} : need(c, slot::param(0), "the filter");
    const auto xs = fwd || filter ? need(c, slot::input(0), "the input") : tensor_ref{};
    const auto dy = fwd ? tensor_ref{} : need(c, slot::grad_output(), "the output gradient");
    const auto y = fwd ? need(c, slot::output(), "the output") : tensor_ref{};
    const auto dx = data ? need(c, slot::grad_input(0), "the input gradient") : tensor_ref{};
    const auto q = conv_shape(l, c);
    const bool plain = q.r == 1 && q.s == 1 && q.sh == 1 && q.sw == 1 && q.ph == 0 && q.pw == 0 && q.groups == 1;
    // implicit_gemm and winograd (no CPU kernel of its own) run the direct path.
    const bool gemm = plain || c.variant == nn::impl_kind::gemm_im2col;
    const index xsz = q.c * q.h * q.w, ysz = q.k * q.cols(), colsz = q.c * q.r * q.s * q.cols();
    if (gemm && !plain && c.workspace_bytes < std::uint64_t(q.n * colsz) * sizeof(float))
        fail(c, "gemm_im2col needs a workspace of " + std::to_string(q.n * colsz * 4) + " bytes, the step has " +
                    std::to_string(c.workspace_bytes));
    float* ws = reinterpret_cast<float*>(c.workspace);
    const float* W = fp(w);

    if (fwd) {
        const float* X = fp(xs);
        float* Y = fp(y);
        for (index n = 0; n < q.n; ++n) {
            const float* xn = X + n * xsz;
            float* yn = Y + n * ysz;
            if (gemm) {
                const float* col = xn;
                if (!plain) {
                    detail::im2col(q, xn, ws + n * colsz);
                    col = ws + n * colsz;
                }
                for (index g = 0; g < q.groups; ++g)
                    matrix_map(yn + g * q.kg() * q.cols(), q.kg(), q.cols()).noalias() =
                        const_matrix_map(W + g * q.kg() * q.rows(), q.kg(), q.rows()) *
                        const_matrix_map(col + g * q.rows() * q.cols(), q.rows(), q.cols());
            } else {
                std::fill(yn, yn + ysz, 0.0f);
                for (index k = 0; k < q.k; ++k) {
                    const index g = k / q.kg();
                    float* yk = yn + k * q.cols();
                    for (index ci = 0; ci < q.cg(); ++ci) {
                        const float* xc = xn + (g * q.cg() + ci) * q.h * q.w;
                        for (index a = 0; a < q.r; ++a)
                            for (index b = 0; b < q.s; ++b) {
                                const float wv = W[((k * q.cg() + ci) * q.r + a) * q.s + b];
                                detail::for_each_tap(q, a, b, [&](index oh, index ih, index w0, index w1, index off) {
                                    float* yr = yk + oh * q.wo;
                                    const float* xr = xc + ih * q.w;
                                    for (index ow = w0; ow < w1; ++ow) yr[ow] += wv * xr[ow * q.sw + off];
                                });
                            }
                    }
                }
            }
            if (l.bias) {
                const float* B = fp(need(c, slot::param(1), "the bias"));
                for (index k = 0; k < q.k; ++k) vector_map(yn + k * q.cols(), q.cols()).array() += B[k];
            }
        }
        return;
    }

    const float* DY = fp(dy);
    if (data) {
        float* DX = fp(dx);
        for (index n = 0; n < q.n; ++n) {
            const float* dyn = DY + n * ysz;
            float* dxn = DX + n * xsz;
            if (gemm) {
                float* col = plain ? dxn : ws + n * colsz;
                for (index g = 0; g < q.groups; ++g)
                    matrix_map(col + g * q.rows() * q.cols(), q.rows(), q.cols()).noalias() =
                        const_matrix_map(W + g * q.kg() * q.rows(), q.kg(), q.rows()).transpose() *
                        const_matrix_map(dyn + g * q.kg() * q.cols(), q.kg(), q.cols());
                if (!plain) detail::col2im(q, col, dxn);
            } else {
                std::fill(dxn, dxn + xsz, 0.0f);
                for (index k = 0; k < q.k; ++k) {
                    const index g = k / q.kg();
                    const float* dyk = dyn + k * q.cols();
                    for (index ci = 0; ci < q.cg(); ++ci) {
                        float* dxc = dxn + (g * q.cg() + ci) * q.h * q.w;
                        for (index a = 0; a < q.r; ++a)
                            for (index b = 0; b < q.s; ++b) {
                                const float wv = W[((k * q.cg() + ci) * q.r + a) * q.s + b];
                                detail::for_each_tap(q, a, b, [&](index oh, index ih, index w0, index w1, index off) {
                                    const float* dyr = dyk + oh * q.wo;
                                    float* dxr = dxc + ih * q.w;
                                    for (index ow = w0; ow < w1; ++ow) dxr[ow * q.sw + off] += wv * dyr[ow];
                                });
                            }
                    }
                }
            }
        }
        return;
    }

    // Filter (and bias) gradient.
    const float* X = fp(xs);
    float* DW = fp(need(c, slot::grad_param(0), "the filter gradient"));
    const index wsz = q.k * q.rows();
    std::fill(DW, DW + wsz, 0.0f);
    for (index n = 0; n < q.n; ++n) {
        const float* xn = X + n * xsz;
        const float* dyn = DY + n * ysz;
        if (gemm) {
            const float* col = xn;
            if (!plain) {
                detail::im2col(q, xn, ws + n * colsz);
                col = ws + n * colsz;
            }
            for (index g = 0; g < q.groups; ++g)
                matrix_map(DW + g * q.kg() * q.rows(), q.kg(), q.rows()).noalias() +=
                    const_matrix_map(dyn + g * q.kg() * q.cols(), q.kg(), q.cols()) *
                    const_matrix_map(col + g * q.rows() * q.cols(), q.rows(), q.cols()).transpose();
        } else {
            for (index k = 0; k < q.k; ++k) {
                const index g = k / q.kg();
                const float* dyk = dyn + k * q.cols();
                for (index ci = 0; ci < q.cg(); ++ci) {
                    const float* xc = xn + (g * q.cg() + ci) * q.h * q.w;
                    for (index a = 0; a < q.r; ++a)
                        for (index b = 0; b < q.s; ++b) {
                            float acc = 0;
                            detail::for_each_tap(q, a, b, [&](index oh, index ih, index w0, index w1, index off) {
                                const float* dyr = dyk + oh * q.wo;
                                const float* xr = xc + ih * q.w;
                                for (index ow = w0; ow < w1; ++ow) acc += dyr[ow] * xr[ow * q.sw + off];
                            });
                            DW[((k * q.cg() + ci) * q.r + a) * q.s + b] += acc;
                        }
                }
            }
        }
    }
    if (l.bias) {
        float* DB = fp(need(c, slot::grad_param(1), "the bias gradient"));
        for (index k = 0; k < q.k; ++k) {
            float acc = 0;
            for (index n = 0; n < q.n; ++n) acc += const_vector_map(DY + n * ysz + k * q.cols(), q.cols()).sum();
            DB[k] = acc;
        }
    }
}

/// Runs "<conv_transpose2d>.fwd", ".bwd_data" or ".bwd_filter" (direct).
/// y[n, o, i*s - p + a, j*s - p + b] += x[n, c, i, j] * w[c, o, a, b].
inline void run(const nn::conv_transpose2d& l, const kernel_call& c) {
    using nn::slot;
    const bool fwd = c.pass() == nn::op_pass::fwd, data = c.pass() == nn::op_pass::bwd_data,
               filter = c.pass() == nn::op_pass::bwd_filter;
    if (!fwd && !data && !filter) fail(c, "the CPU backend has no kernel for this op");
    const float* W = filter ? nullptr : fp(need(c, slot::param(0), "the filter"));
    const auto x = fwd || filter ? need(c, slot::input(0), "the input") : need(c, slot::grad_input(0), "the input gradient");
    const auto y = fwd ? need(c, slot::output(), "the output") : need(c, slot::grad_output(), "the output gradient");
    const auto& xsh = c.node_inputs[0].shape;
    const auto& ysh = c.node_output->shape;
    const auto N = static_cast<index>(xsh[0]), C = static_cast<index>(xsh[1]), H = static_cast<index>(xsh[2]),
               Wd = static_cast<index>(xsh[3]);
    const auto O = static_cast<index>(ysh[1]), Ho = static_cast<index>(ysh[2]), Wo = static_cast<index>(ysh[3]);
    const auto K = static_cast<index>(l.kernel), S = static_cast<index>(l.stride), P = static_cast<index>(l.padding);
    float* X = fp(x);
    float* Y = fp(y);
    auto taps = [&](auto f) {
        for (index n = 0; n < N; ++n)
            for (index ch = 0; ch < C; ++ch)
                for (index o = 0; o < O; ++o)
                    for (index a = 0; a < K; ++a)
                        for (index b = 0; b < K; ++b) {
                            index i0, i1, j0, j1;
                            valid_range(Ho, H, S, P, a, i0, i1);
                            valid_range(Wo, Wd, S, P, b, j0, j1);
                            f(n, ch, o, a, b, i0, i1, j0, j1);
                        }
    };
    if (fwd) {
        for (index n = 0; n < N; ++n)
            for (index o = 0; o < O; ++o) {
                const float bv = l.bias ? fp(need(c, slot::param(1), "the bias"))[o] : 0.0f;
                std::fill(Y + (n * O + o) * Ho * Wo, Y + (n * O + o + 1) * Ho * Wo, bv);
            }
        taps([&](index n, index ch, index o, index a, index b, index i0, index i1, index j0, index j1) {
            const float wv = W[((ch * O + o) * K + a) * K + b];
            for (index i = i0; i < i1; ++i) {
                const float* xr = X + ((n * C + ch) * H + i) * Wd;
                float* yr = Y + ((n * O + o) * Ho + i * S - P + a) * Wo;
                for (index j = j0; j < j1; ++j) yr[j * S - P + b] += wv * xr[j];
            }
        });
    } else if (data) {
        std::fill(X, X + N * C * H * Wd, 0.0f);
        taps([&](index n, index ch, index o, index a, index b, index i0, index i1, index j0, index j1) {
            const float wv = W[((ch * O + o) * K + a) * K + b];
            for (index i = i0; i < i1; ++i) {
                float* xr = X + ((n * C + ch) * H + i) * Wd;
                const float* yr = Y + ((n * O + o) * Ho + i * S - P + a) * Wo;
                for (index j = j0; j < j1; ++j) xr[j] += wv * yr[j * S - P + b];
            }
        });
    } else {
        float* DW = fp(need(c, slot::grad_param(0), "the filter gradient"));
        std::fill(DW, DW + C * O * K * K, 0.0f);
        taps([&](index n, index ch, index o, index a, index b, index i0, index i1, index j0, index j1) {
            float acc = 0;
            for (index i = i0; i < i1; ++i) {
                const float* xr = X + ((n * C + ch) * H + i) * Wd;
                const float* yr = Y + ((n * O + o) * Ho + i * S - P + a) * Wo;
                for (index j = j0; j < j1; ++j) acc += xr[j] * yr[j * S - P + b];
            }
            DW[((ch * O + o) * K + a) * K + b] += acc;
        });
        if (l.bias) {
            float* DB = fp(need(c, slot::grad_param(1), "the bias gradient"));
            for (index o = 0; o < O; ++o) {
                float acc = 0;
                for (index n = 0; n < N; ++n) acc += const_vector_map(Y + (n * O + o) * Ho * Wo, Ho * Wo).sum();
                DB[o] = acc;
            }
        }
    }
}

} // namespace memplan::engine::cpu
