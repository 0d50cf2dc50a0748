// CPU kernels of batch-norm (training mode: batch statistics) and layer-norm.
//
// Both save the mean and the inverse standard deviation (fp32), sums run in
// double. Batch-norm's backward recovers the normalised input from x
// ("from_input") or from y as (y - beta) / gamma ("from_output", MONeT); a
// recomputed forward leaves the running statistics alone, so a plan with
// recomputation trains exactly as the naive run does.
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/norm.hpp>

#include <cmath>
#include <vector>

namespace memplan::engine::cpu {

/// Runs "<batch_norm>.fwd" or ".bwd".
inline void run(const nn::batch_norm& l, const kernel_call& c) {
    using nn::slot;
    const auto gamma = need(c, slot::param(0), "gamma");
    const auto stats = need(c, slot::internal(0), "the saved statistics");
    const bool forward = forward_or_backward(c);
    const auto q = batch_norm_shape(l, c);
    const index N = q.n, C = q.c, S = q.s;
    const double M = double(N * S);
    const float* G = fp(gamma);
    float* mean = fp(stats);
    float* invstd = mean + C;
    if (forward) {
        const float* X = fp(c.slot(slot::input(0)));
        float* Y = fp(need(c, slot::output(), "the output"));
        const float* B = fp(need(c, slot::param(1), "beta"));
        for (index ch = 0; ch < C; ++ch) {
            double sum = 0;
            for (index n = 0; n < N; ++n) sum += const_vector_map(X + (n * C + ch) * S, S).cast<double>().sum();
            const double mu = sum / M;
            double sq = 0;
            for (index n = 0; n < N; ++n)
                sq += (const_vector_map(X + (n * C + ch) * S, S).cast<double>().array() - mu).square().sum();
            const double var = sq / M;
            const double is = 1.0 / std::sqrt(var + l.eps);
            mean[ch] = static_cast<float>(mu);
            invstd[ch] = static_cast<float>(is);
            const float scale = static_cast<float>(is * G[ch]);
            const float shift = static_cast<float>(B[ch] - mu * is * G[ch]);
            for (index n = 0; n < N; ++n)
                vector_map(Y + (n * C + ch) * S, S) = const_vector_map(X + (n * C + ch) * S, S).array() * scale + shift;
            if (!c.recompute) {
                // PyTorch: momentum 0.1, the unbiased variance.
                float* rm = fp(need(c, slot::state(0), "the running mean"));
                float* rv = fp(need(c, slot::state(1), "the running variance"));
                rm[ch] = static_cast<float>(0.9 * rm[ch] + 0.1 * mu);
                rv[ch] = static_cast<float>(0.9 * rv[ch] + 0.1 * (M > 1 ? var * M / (M - 1) : var));
            }
        }
        return;
    }
    const float* DY = fp(c.slot(slot::grad_output()));
    const bool from_output = reads_output(c);
    const float* src = from_output ? fp(need(c, slot::output(), "the output")) : fp(need(c, slot::input(0), "the input"));
    const float* B = from_output ? fp(need(c, slot::param(1), "beta")) : nullptr;
    const auto dx = c.slot(slot::grad_input(0));
    float* DG = fp(need(c, slot::grad_param(0), "the gamma gradient"));
    float* DB = fp(need(c, slot::grad_param(1), "the beta gradient"));
    for (index ch = 0; ch < C; ++ch) {
        if (from_output && G[ch] == 0.0f) fail(c, "backward from the output needs a non-zero gamma");
        auto xhat = [&](float v) {
            return from_output ? (v - B[ch]) / G[ch] : (v - mean[ch]) * invstd[ch];
        };
        double sdy = 0, sdyx = 0;
        for (index n = 0; n < N; ++n) {
            const float* d = DY + (n * C + ch) * S;
            const float* v = src + (n * C + ch) * S;
            for (index i = 0; i < S; ++i) {
                sdy += d[i];
                sdyx += double(d[i]) * xhat(v[i]);
            }
        }
        DG[ch] = static_cast<float>(sdyx);
        DB[ch] = static_cast<float>(sdy);
        if (!dx) continue;
        float* DX = fp(dx);
        const double k = double(G[ch]) * invstd[ch] / M;
        for (index n = 0; n < N; ++n) {
            const float* d = DY + (n * C + ch) * S;
            const float* v = src + (n * C + ch) * S;
            float* o = DX + (n * C + ch) * S;
            for (index i = 0; i < S; ++i) o[i] = static_cast<float>(k * (M * d[i] - sdy - xhat(v[i]) * sdyx));
        }
    }
}

/// Runs "<layer_norm>.fwd" or ".bwd" over rows of the last axis.
inline void run(const nn::layer_norm& l, const kernel_call& c) {
    using nn::slot;
    const auto q = layer_norm_shape(l, c);
    const index F = q.features, R = q.rows;
    const float* G = fp(need(c, slot::param(0), "gamma"));
    float* stats = fp(need(c, slot::internal(0), "the saved statistics"));
    const auto x = need(c, slot::input(0), "the input");
    float* mean = stats;
    float* invstd = stats + R;
    const float* X = fp(x);
    if (forward_or_backward(c)) {
        float* Y = fp(need(c, slot::output(), "the output"));
        const float* B = fp(need(c, slot::param(1), "beta"));
        for (index r = 0; r < R; ++r) {
            const auto xr = const_vector_map(X + r * F, F).cast<double>();
            const double mu = xr.sum() / double(F);
            const double var = (xr.array() - mu).square().sum() / double(F);
            const double is = 1.0 / std::sqrt(var + l.eps);
            mean[r] = static_cast<float>(mu);
            invstd[r] = static_cast<float>(is);
            for (index i = 0; i < F; ++i)
                Y[r * F + i] = static_cast<float>((X[r * F + i] - mu) * is * G[i] + B[i]);
        }
        return;
    }
    const float* DY = fp(need(c, slot::grad_output(), "the output gradient"));
    const auto dx = c.slot(slot::grad_input(0));
    float* DG = fp(need(c, slot::grad_param(0), "the gamma gradient"));
    float* DB = fp(need(c, slot::grad_param(1), "the beta gradient"));
    std::vector<double> dg(static_cast<std::size_t>(F), 0.0), db(static_cast<std::size_t>(F), 0.0);
    for (index r = 0; r < R; ++r) {
        double s1 = 0, s2 = 0;
        for (index i = 0; i < F; ++i) {
            const double xh = (X[r * F + i] - mean[r]) * double(invstd[r]);
            const double d = DY[r * F + i];
            dg[static_cast<std::size_t>(i)] += d * xh;
            db[static_cast<std::size_t>(i)] += d;
            s1 += d * G[i];
            s2 += d * G[i] * xh;
        }
        if (!dx) continue;
        float* DX = fp(dx);
        for (index i = 0; i < F; ++i) {
            const double xh = (X[r * F + i] - mean[r]) * double(invstd[r]);
            DX[r * F + i] = static_cast<float>(invstd[r] / double(F) * (double(F) * DY[r * F + i] * G[i] - s1 - xh * s2));
        }
    }
    for (index i = 0; i < F; ++i) {
        DG[i] = static_cast<float>(dg[static_cast<std::size_t>(i)]);
        DB[i] = static_cast<float>(db[static_cast<std::size_t>(i)]);
    }
}

} // namespace memplan::engine::cpu
