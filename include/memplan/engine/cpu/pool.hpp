// CPU kernels of pooling: max (saving each window's arg-max as one byte),
// average (PyTorch's count_include_pad divisor), adaptive average and global
// average pooling. Backward passes scatter the incoming gradient.
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/pool.hpp>

#include <algorithm>
#include <limits>

namespace memplan::engine::cpu {

namespace detail {

/// The tensors of a pool's pass: x (or dx) and y (or dy).
inline void pool_refs(const kernel_call& c, tensor_ref& x, tensor_ref& y, bool& forward) {
    using nn::slot;
    forward = forward_or_backward(c);
    x = forward ? need(c, slot::input(0), "the input") : need(c, slot::grad_input(0), "the input gradient");
    y = forward ? need(c, slot::output(), "the output") : need(c, slot::grad_output(), "the output gradient");
}

/// Average over windows [h0(i), h1(i)) x [w0(j), w1(j)) with divisor d(i, j).
template <class Window>
void average(const kernel_call& c, Window window) {
    tensor_ref x, y;
    bool forward;
    pool_refs(c, x, y, forward);
    const auto q = pool_shape(c);
    float* X = fp(x);
    float* Y = fp(y);
    if (!forward) std::fill(X, X + q.planes * q.h * q.w, 0.0f);
    for (index p = 0; p < q.planes; ++p)
        for (index i = 0; i < q.ho; ++i)
            for (index j = 0; j < q.wo; ++j) {
                index h0, h1, w0, w1;
                float divisor;
                window(i, j, h0, h1, w0, w1, divisor);
                float* xp = X + p * q.h * q.w;
                float& out = Y[(p * q.ho + i) * q.wo + j];
                if (forward) {
                    float s = 0;
                    for (index a = h0; a < h1; ++a)
                        for (index b = w0; b < w1; ++b) s += xp[a * q.w + b];
                    out = s / divisor;
                } else {
                    const float g = out / divisor;
                    for (index a = h0; a < h1; ++a)
                        for (index b = w0; b < w1; ++b) xp[a * q.w + b] += g;
                }
            }
}

} // namespace detail

/// Runs "<max_pool2d>.fwd" (y and the arg-max bytes) or ".bwd".
inline void run(const nn::max_pool2d& l, const kernel_call& c) {
    tensor_ref x, y;
    bool forward;
    detail::pool_refs(c, x, y, forward);
    const auto q = pool_shape(c);
    const auto K = static_cast<index>(l.kernel), S = static_cast<index>(l.stride), P = static_cast<index>(l.padding);
    auto* arg = need(c, nn::slot::internal(0), "the arg-max").as<std::uint8_t>();
    float* X = fp(x);
    float* Y = fp(y);
    if (!forward) std::fill(X, X + q.planes * q.h * q.w, 0.0f);
    for (index p = 0; p < q.planes; ++p)
        for (index i = 0; i < q.ho; ++i)
            for (index j = 0; j < q.wo; ++j) {
                const index o = (p * q.ho + i) * q.wo + j;
                float* xp = X + p * q.h * q.w;
                if (forward) {
                    float best = -std::numeric_limits<float>::infinity();
                    index at = -1;
                    for (index a = 0; a < K; ++a)
                        for (index b = 0; b < K; ++b) {
                            const index r = i * S - P + a, s = j * S - P + b;
                            if (r < 0 || r >= q.h || s < 0 || s >= q.w) continue;
                            if (at < 0 || xp[r * q.w + s] > best) {
                                best = xp[r * q.w + s];
                                at = a * K + b;
                            }
                        }
                    Y[o] = best;
                    arg[o] = static_cast<std::uint8_t>(at);
                } else {
                    const index a = arg[o] / K, b = arg[o] % K;
                    const index r = i * S - P + a, s = j * S - P + b;
                    if (arg[o] >= K * K || r < 0 || r >= q.h || s < 0 || s >= q.w)
                        fail(c, "arg-max byte " + std::to_string(arg[o]) + " is outside its window");
                    xp[r * q.w + s] += Y[o];
                }
            }
}

/// Runs "<avg_pool2d>.fwd" or ".bwd".
inline void run(const nn::avg_pool2d& l, const kernel_call& c) {
    const auto K = static_cast<index>(l.kernel), S = static_cast<index>(l.stride), P = static_cast<index>(l.padding);
    tensor_ref x, y;
    bool forward;
    detail::pool_refs(c, x, y, forward);
    const auto q = pool_shape(c);
    const index H = q.h, W = q.w;
    detail::average(c, [&](index i, index j, index& h0, index& h1, index& w0, index& w1, float& d) {
        h0 = i * S - P;
        w0 = j * S - P;
        h1 = std::min(h0 + K, H + P);
        w1 = std::min(w0 + K, W + P);
        d = static_cast<float>((h1 - h0) * (w1 - w0));
        h0 = std::max<index>(h0, 0);
        w0 = std::max<index>(w0, 0);
        h1 = std::min(h1, H);
        w1 = std::min(w1, W);
    });
}

/// Runs "<adaptive_avg_pool2d>.fwd" or ".bwd".
inline void run(const nn::adaptive_avg_pool2d&, const kernel_call& c) {
    tensor_ref x, y;
    bool forward;
    detail::pool_refs(c, x, y, forward);
    const auto q = pool_shape(c);
    const index H = q.h, W = q.w, Ho = q.ho, Wo = q.wo;
    detail::average(c, [&](index i, index j, index& h0, index& h1, index& w0, index& w1, float& d) {
        h0 = i * H / Ho;
        h1 = ((i + 1) * H + Ho - 1) / Ho;
        w0 = j * W / Wo;
        w1 = ((j + 1) * W + Wo - 1) / Wo;
        d = static_cast<float>((h1 - h0) * (w1 - w0));
    });
}

/// Runs "<global_avg_pool>.fwd" ((N, C, H, W) -> (N, C)) or ".bwd".
inline void run(const nn::global_avg_pool&, const kernel_call& c) {
    tensor_ref x, y;
    bool forward;
    detail::pool_refs(c, x, y, forward);
    const auto q = pool_shape(c);
    const index planes = q.planes, S = q.h * q.w;
    float* X = fp(x);
    float* Y = fp(y);
    for (index p = 0; p < planes; ++p) {
        if (forward)
            Y[p] = const_vector_map(X + p * S, S).sum() / static_cast<float>(S);
        else
            vector_map(X + p * S, S).setConstant(Y[p] / static_cast<float>(S));
    }
}

} // namespace memplan::engine::cpu
