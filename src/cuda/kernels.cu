// memplan's own CUDA kernels: element-wise ops, reductions with one block per
// row or column, batch-norm's split over channels x chunks (sums in double,
// fixed order: deterministic), pooling with
// saved arg-max bytes, softmax cross-entropy, embeddings and attention's
// softmax. Simple grid-stride kernels: these ops are memory-bound and small
// next to the convolutions and GEMMs that cuDNN and cuBLAS run.
#include "kernels.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace memplan::engine::cuda::kernels {

namespace {

using i64 = std::int64_t;
constexpr int threads = 256;

unsigned blocks_for(i64 n) {
    const i64 b = (n + threads - 1) / threads;
    return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

#define MEMPLAN_GRID_LOOP(i, n) for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// One out-of-range index per run: the flag, then the value and the position.
__device__ int g_bad_flag = 0;
__device__ long long g_bad_value = 0;
__device__ long long g_bad_position = 0;

__device__ void record_bad(long long value, long long position) {
    if (atomicCAS(&g_bad_flag, 0, 1) == 0) {
        g_bad_value = value;
        g_bad_position = position;
    }
}

// Block-wide sum of a double (blockDim.x == threads); every thread gets the total.
__device__ double block_sum(double v) {
    __shared__ double part[threads];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = threads / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    const double total = part[0];
    __syncthreads();
    return total;
}

__global__ void add_bias_rows_k(float* y, const float* b, i64 rows, i64 cols) {
    MEMPLAN_GRID_LOOP(i, rows * cols) y[i] += b[i % cols];
}
__global__ void column_sums_k(const float* x, float* out, i64 rows, i64 cols) {
    const i64 c = blockIdx.x;
    double acc = 0;
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x) acc += x[r * cols + c];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[c] = static_cast<float>(acc);
}
__global__ void add_k(const float* a, const float* b, float* out, i64 n) {
    MEMPLAN_GRID_LOOP(i, n) out[i] = a[i] + b[i];
}

__device__ bool relu_passes(float v, float cap) { return v > 0.0f && (cap <= 0.0f || v < cap); }

// One thread per mask byte: it reads its 8 values before writing them (in place).
__global__ void relu_forward_k(const float* x, float* y, std::uint8_t* mask, i64 n, float cap) {
    MEMPLAN_GRID_LOOP(byte, (n + 7) / 8) {
        std::uint8_t m = 0;
        for (int k = 0; k < 8; ++k) {
            const i64 i = byte * 8 + k;
            if (i >= n) break;
            const float v = x[i];
            if (relu_passes(v, cap)) m = static_cast<std::uint8_t>(m | (1u << k));
            const float r = v > 0.0f ? v : 0.0f;
            y[i] = cap > 0.0f ? fminf(r, cap) : r;
        }
        if (mask) mask[byte] = m;
    }
}
__global__ void relu_backward_mask_k(const float* dy, const std::uint8_t* mask, float* dx, i64 n) {
    MEMPLAN_GRID_LOOP(i, n) dx[i] = ((mask[i >> 3] >> (i & 7)) & 1u) ? dy[i] : 0.0f;
}
__global__ void relu_backward_value_k(const float* dy, const float* v, float* dx, i64 n, float cap) {
    MEMPLAN_GRID_LOOP(i, n) dx[i] = relu_passes(v[i], cap) ? dy[i] : 0.0f;
}
constexpr float gelu_k_ = 0.7978845608028654f, gelu_a_ = 0.044715f;
__global__ void gelu_forward_k(const float* x, float* y, i64 n) {
    MEMPLAN_GRID_LOOP(i, n) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(gelu_k_ * (v + gelu_a_ * v * v * v)));
    }
}
__global__ void gelu_backward_k(const float* x, const float* dy, float* dx, i64 n) {
    MEMPLAN_GRID_LOOP(i, n) {
        const float v = x[i];
        const float t = tanhf(gelu_k_ * (v + gelu_a_ * v * v * v));
        dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * gelu_k_ * (1.0f + 3.0f * gelu_a_ * v * v));
    }
}
// The CPU backend's hash: the same keep-mask on both devices.
__global__ void dropout_forward_k(const float* x, float* y, std::uint8_t* mask, i64 n, std::uint64_t seed,
                                  std::uint64_t threshold, float scale) {
    MEMPLAN_GRID_LOOP(i, n) {
        std::uint64_t z = seed + static_cast<std::uint64_t>(i) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
        z ^= z >> 29;
        const bool keep = z >= threshold;
        mask[i] = keep ? 1 : 0;
        y[i] = keep ? x[i] * scale : 0.0f;
    }
}
__global__ void dropout_backward_k(const float* dy, const std::uint8_t* mask, float* dx, i64 n, float scale) {
    MEMPLAN_GRID_LOOP(i, n) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

__global__ void sgd_k(float* w, const float* g, i64 n, float lr) {
    MEMPLAN_GRID_LOOP(i, n) w[i] -= lr * g[i];
}
__global__ void sgd_momentum_k(float* w, const float* g, float* v, i64 n, float lr, float mu) {
    MEMPLAN_GRID_LOOP(i, n) {
        v[i] = mu * v[i] + g[i];
        w[i] -= lr * v[i];
    }
}
__global__ void adam_k(float* w, const float* g, float* m, float* v, i64 n, float lr, float b1, float b2, float eps,
                       float c1, float c2) {
    MEMPLAN_GRID_LOOP(i, n) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

// Batch-norm. The statistics are reductions over N*S values per channel, and
// a layer with few channels (ResNet-50's first: 64 channels of 184*112*112
// values) gives one block per channel too few blocks for the GPU. So each
// channel is cut into `parts` contiguous chunks (in n-major, s-minor order):
// a grid of channels x parts blocks writes partial sums (double) to a fixed
// scratch area, a small kernel adds each channel's partials in a fixed order
// (deterministic) and a grid-wide element-wise kernel writes y or dx, which
// may therefore overwrite x or dy. Layers with more channels than the scratch
// holds keep one block per channel: they fill the GPU that way.

// Walks the values of one channel of an (N, C, S) tensor: channel-local index
// l = n*S + s, in steps of `step`, without a 64-bit division per value.
struct channel_walk {
    i64 at, s;               // flat index of the value, its position in the plane
    i64 S, step_s, step_at, wrap;
    __device__ channel_walk(i64 l, i64 c, i64 C, i64 S_, i64 step) : S(S_) {
        const i64 n = l / S;
        s = l - n * S;
        at = (n * C + c) * S + s;
        const i64 dn = step / S;
        step_s = step - dn * S;
        step_at = dn * C * S + step_s;
        wrap = (C - 1) * S; // (n, s >= S) -> (n + 1, s - S)
    }
    __device__ void advance() {
        s += step_s;
        at += step_at;
        if (s >= S) {
            s -= S;
            at += wrap;
        }
    }
};

// The channel of flat index e of an (N, C, S) tensor, kept up to date in
// grid-stride steps of `step` (one division per thread, not per value).
struct channel_of {
    i64 s, c, C, S, step_s, step_c;
    __device__ channel_of(i64 e, i64 C_, i64 S_, i64 step) : C(C_), S(S_) {
        const i64 plane = e / S;
        s = e - plane * S;
        c = plane % C;
        const i64 dp = step / S;
        step_s = step - dp * S;
        step_c = dp % C;
    }
    __device__ void advance() {
        s += step_s;
        c += step_c;
        if (s >= S) {
            s -= S;
            ++c;
        }
        if (c >= C) c -= C; // c + step_c + 1 <= 2C - 1
    }
};

// Loads in flight per thread in the batch-norm loops (memory-bound: the
// loads of a group are issued before their values are used).
constexpr int bn_unroll = 4;

// The chunk [begin, end) of channel blockIdx.x / parts, for block blockIdx.x.
__device__ void bn_chunk(i64 N, i64 S, i64 parts, i64& c, i64& begin, i64& end) {
    c = blockIdx.x / parts;
    const i64 j = blockIdx.x % parts, M = N * S;
    begin = M * j / parts; // M * parts < 2^63 for any tensor that fits in memory
    end = M * (j + 1) / parts;
}

// Partial sums of x - shift and (x - shift)^2 per chunk. The shift (the
// channel's first value) keeps E[(x-k)^2] - E[x-k]^2 free of cancellation
// when the mean is far from zero; the CPU's two passes give the same up to
// double rounding.
__global__ void __launch_bounds__(threads) bn_partial_stats_k(const float* x, double* part, i64 N, i64 C, i64 S,
                                                              i64 parts) {
    i64 c, begin, end;
    bn_chunk(N, S, parts, c, begin, end);
    const double shift = x[c * S];
    double s1 = 0, s2 = 0;
    channel_walk w(begin + threadIdx.x, c, C, S, blockDim.x);
    for (i64 l = begin + threadIdx.x; l < end; l += i64(bn_unroll) * blockDim.x) {
        float v[bn_unroll];
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u) {
            v[u] = l + i64(u) * blockDim.x < end ? x[w.at] : 0.0f;
            w.advance();
        }
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u)
            if (l + i64(u) * blockDim.x < end) {
                const double d = double(v[u]) - shift;
                s1 += d;
                s2 += d * d;
            }
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = s1;
        part[2 * blockIdx.x + 1] = s2;
    }
}
// One thread per channel: the partials in order, then what bn_stats_k writes.
__global__ void bn_finish_stats_k(const float* x, const double* part, float* stats, float* rm, float* rv, i64 N,
                                  i64 C, i64 S, i64 parts, double eps) {
    MEMPLAN_GRID_LOOP(c, C) {
        double s1 = 0, s2 = 0;
        for (i64 j = 0; j < parts; ++j) {
            s1 += part[2 * (c * parts + j)];
            s2 += part[2 * (c * parts + j) + 1];
        }
        const double M = double(N * S);
        const double d = s1 / M; // mean - shift
        const double mu = double(x[c * S]) + d;
        const double var = fmax(s2 / M - d * d, 0.0);
        stats[c] = static_cast<float>(mu);
        stats[C + c] = static_cast<float>(1.0 / sqrt(var + eps));
        if (rm && rv) { // PyTorch: momentum 0.1, unbiased variance
            rm[c] = static_cast<float>(0.9 * rm[c] + 0.1 * mu);
            rv[c] = static_cast<float>(0.9 * rv[c] + 0.1 * (M > 1 ? var * M / (M - 1) : var));
        }
    }
}
// The fallback for many channels: one block per channel, two passes.
__global__ void bn_stats_k(const float* x, float* stats, float* rm, float* rv, i64 N, i64 C, i64 S, double eps) {
    const i64 c = blockIdx.x;
    double sum = 0;
    for (i64 n = 0; n < N; ++n)
        for (i64 i = threadIdx.x; i < S; i += blockDim.x) sum += x[(n * C + c) * S + i];
    const double M = double(N * S);
    const double mu = block_sum(sum) / M;
    double sq = 0;
    for (i64 n = 0; n < N; ++n)
        for (i64 i = threadIdx.x; i < S; i += blockDim.x) {
            const double d = x[(n * C + c) * S + i] - mu;
            sq += d * d;
        }
    const double var = block_sum(sq) / M;
    if (threadIdx.x == 0) {
        stats[c] = static_cast<float>(mu);
        stats[C + c] = static_cast<float>(1.0 / sqrt(var + eps));
        if (rm && rv) { // PyTorch: momentum 0.1, unbiased variance
            rm[c] = static_cast<float>(0.9 * rm[c] + 0.1 * mu);
            rv[c] = static_cast<float>(0.9 * rv[c] + 0.1 * (M > 1 ? var * M / (M - 1) : var));
        }
    }
}
// y may be x: each value is read, then written, by one thread.
__global__ void __launch_bounds__(threads) bn_apply_k(const float* x, float* y, const float* gamma, const float* beta,
                                                      const float* stats, i64 N, i64 C, i64 S) {
    const i64 total = N * C * S, step = i64(gridDim.x) * blockDim.x;
    i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x;
    if (e >= total) return;
    channel_of w(e, C, S, step);
    for (; e < total; e += bn_unroll * step) {
        float v[bn_unroll];
        i64 ch[bn_unroll];
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u) {
            ch[u] = w.c;
            v[u] = e + u * step < total ? x[e + u * step] : 0.0f;
            w.advance();
        }
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u) {
            const i64 c = ch[u];
            if (e + u * step < total) y[e + u * step] = (v[u] - stats[c]) * stats[C + c] * gamma[c] + beta[c];
        }
    }
}
__device__ float bn_xhat(float v, bool from_output, const float* gamma, const float* beta, const float* stats, i64 C,
                         i64 c) {
    return from_output ? (v - beta[c]) / gamma[c] : (v - stats[c]) * stats[C + c];
}
// Partial sums of dy and dy * xhat per chunk.
__global__ void __launch_bounds__(threads) bn_partial_grad_k(const float* dy, const float* src, bool from_output,
                                                             const float* gamma, const float* beta, const float* stats,
                                                             double* part, i64 N, i64 C, i64 S, i64 parts) {
    i64 c, begin, end;
    bn_chunk(N, S, parts, c, begin, end);
    double sdy = 0, sdyx = 0;
    channel_walk w(begin + threadIdx.x, c, C, S, blockDim.x);
    for (i64 l = begin + threadIdx.x; l < end; l += i64(bn_unroll) * blockDim.x) {
        float d[bn_unroll], v[bn_unroll];
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u) {
            const bool in = l + i64(u) * blockDim.x < end;
            d[u] = in ? dy[w.at] : 0.0f;
            v[u] = in ? src[w.at] : 0.0f;
            w.advance();
        }
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u)
            if (l + i64(u) * blockDim.x < end) {
                sdy += d[u];
                sdyx += double(d[u]) * bn_xhat(v[u], from_output, gamma, beta, stats, C, c);
            }
    }
    sdy = block_sum(sdy);
    sdyx = block_sum(sdyx);
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = sdy;
        part[2 * blockIdx.x + 1] = sdyx;
    }
}
// One thread per channel: dgamma, dbeta, and dx's coefficients in double,
// dx = a * dy - b - k * xhat (bn_backward_k's k * (M dy - sdy - xhat sdyx)).
__global__ void bn_finish_grad_k(const double* part, const float* gamma, const float* stats, double* coef, float* dg,
                                 float* db, i64 N, i64 C, i64 S, i64 parts) {
    MEMPLAN_GRID_LOOP(c, C) {
        double sdy = 0, sdyx = 0;
        for (i64 j = 0; j < parts; ++j) {
            sdy += part[2 * (c * parts + j)];
            sdyx += part[2 * (c * parts + j) + 1];
        }
        dg[c] = static_cast<float>(sdyx);
        db[c] = static_cast<float>(sdy);
        const double M = double(N * S);
        const double k = double(gamma[c]) * stats[C + c] / M;
        coef[3 * c] = k * M;
        coef[3 * c + 1] = k * sdy;
        coef[3 * c + 2] = k * sdyx;
    }
}
// dx may be dy: each value is read, then written, by one thread.
__global__ void __launch_bounds__(threads) bn_grad_input_k(const float* dy, const float* src, bool from_output,
                                                           const float* gamma, const float* beta, const float* stats,
                                                           const double* coef, float* dx, i64 N, i64 C, i64 S) {
    const i64 total = N * C * S, step = i64(gridDim.x) * blockDim.x;
    i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x;
    if (e >= total) return;
    channel_of w(e, C, S, step);
    for (; e < total; e += bn_unroll * step) {
        float d[bn_unroll], v[bn_unroll];
        i64 ch[bn_unroll];
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u) {
            const bool in = e + u * step < total;
            ch[u] = w.c;
            d[u] = in ? dy[e + u * step] : 0.0f;
            v[u] = in ? src[e + u * step] : 0.0f;
            w.advance();
        }
#pragma unroll
        for (int u = 0; u < bn_unroll; ++u) {
            const i64 c = ch[u];
            const float xh = bn_xhat(v[u], from_output, gamma, beta, stats, C, c);
            if (e + u * step < total)
                dx[e + u * step] = static_cast<float>(coef[3 * c] * d[u] - coef[3 * c + 1] - xh * coef[3 * c + 2]);
        }
    }
}
// The fallback for many channels: one block per channel.
__global__ void bn_backward_k(const float* dy, const float* src, bool from_output, const float* gamma,
                              const float* beta, const float* stats, float* dx, float* dg, float* db, i64 N, i64 C,
                              i64 S) {
    const i64 c = blockIdx.x;
    double sdy = 0, sdyx = 0;
    for (i64 n = 0; n < N; ++n)
        for (i64 i = threadIdx.x; i < S; i += blockDim.x) {
            const i64 at = (n * C + c) * S + i;
            sdy += dy[at];
            sdyx += double(dy[at]) * bn_xhat(src[at], from_output, gamma, beta, stats, C, c);
        }
    sdy = block_sum(sdy);
    sdyx = block_sum(sdyx);
    if (threadIdx.x == 0) {
        dg[c] = static_cast<float>(sdyx);
        db[c] = static_cast<float>(sdy);
    }
    if (!dx) return;
    const double M = double(N * S);
    const double k = double(gamma[c]) * stats[C + c] / M;
    // dx may alias dy: each element is read, then written, by one thread.
    for (i64 n = 0; n < N; ++n)
        for (i64 i = threadIdx.x; i < S; i += blockDim.x) {
            const i64 at = (n * C + c) * S + i;
            const float xh = bn_xhat(src[at], from_output, gamma, beta, stats, C, c);
            dx[at] = static_cast<float>(k * (M * dy[at] - sdy - xh * sdyx));
        }
}

__global__ void ln_forward_k(const float* x, float* y, const float* gamma, const float* beta, float* stats, i64 rows,
                             i64 F, double eps) {
    const i64 r = blockIdx.x;
    const float* xr = x + r * F;
    double s = 0;
    for (i64 i = threadIdx.x; i < F; i += blockDim.x) s += xr[i];
    const double mu = block_sum(s) / double(F);
    double q = 0;
    for (i64 i = threadIdx.x; i < F; i += blockDim.x) q += (xr[i] - mu) * (xr[i] - mu);
    const double is = 1.0 / sqrt(block_sum(q) / double(F) + eps);
    if (threadIdx.x == 0) {
        stats[r] = static_cast<float>(mu);
        stats[rows + r] = static_cast<float>(is);
    }
    for (i64 i = threadIdx.x; i < F; i += blockDim.x)
        y[r * F + i] = static_cast<float>((xr[i] - mu) * is * gamma[i] + beta[i]);
}
__global__ void ln_backward_dx_k(const float* x, const float* dy, const float* gamma, const float* stats, float* dx,
                                 i64 rows, i64 F) {
    const i64 r = blockIdx.x;
    const double mean = stats[r], is = stats[rows + r];
    double s1 = 0, s2 = 0;
    for (i64 i = threadIdx.x; i < F; i += blockDim.x) {
        const double xh = (x[r * F + i] - mean) * is;
        const double d = double(dy[r * F + i]) * gamma[i];
        s1 += d;
        s2 += d * xh;
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    for (i64 i = threadIdx.x; i < F; i += blockDim.x) {
        const double xh = (x[r * F + i] - mean) * is;
        dx[r * F + i] = static_cast<float>(is / double(F) * (double(F) * dy[r * F + i] * gamma[i] - s1 - xh * s2));
    }
}
__global__ void ln_backward_params_k(const float* x, const float* dy, const float* stats, float* dg, float* db,
                                     i64 rows, i64 F) {
    MEMPLAN_GRID_LOOP(i, F) {
        double g = 0, b = 0;
        for (i64 r = 0; r < rows; ++r) {
            const double xh = (x[r * F + i] - double(stats[r])) * double(stats[rows + r]);
            g += dy[r * F + i] * xh;
            b += dy[r * F + i];
        }
        dg[i] = static_cast<float>(g);
        db[i] = static_cast<float>(b);
    }
}

__global__ void max_pool_forward_k(const float* x, float* y, std::uint8_t* arg, pool_geometry q) {
    MEMPLAN_GRID_LOOP(o, q.planes * q.ho * q.wo) {
        const i64 j = o % q.wo, i = (o / q.wo) % q.ho, p = o / (q.wo * q.ho);
        const float* xp = x + p * q.h * q.w;
        float best = -INFINITY;
        int at = -1;
        for (i64 a = 0; a < q.k; ++a)
            for (i64 b = 0; b < q.k; ++b) {
                const i64 r = i * q.stride - q.pad + a, s = j * q.stride - q.pad + b;
                if (r < 0 || r >= q.h || s < 0 || s >= q.w) continue;
                if (at < 0 || xp[r * q.w + s] > best) {
                    best = xp[r * q.w + s];
                    at = static_cast<int>(a * q.k + b);
                }
            }
        y[o] = best;
        arg[o] = static_cast<std::uint8_t>(at);
    }
}
__global__ void max_pool_backward_k(const float* dy, const std::uint8_t* arg, float* dx, pool_geometry q) {
    MEMPLAN_GRID_LOOP(o, q.planes * q.ho * q.wo) {
        const i64 j = o % q.wo, i = (o / q.wo) % q.ho, p = o / (q.wo * q.ho);
        const i64 a = arg[o] / q.k, b = arg[o] % q.k;
        const i64 r = i * q.stride - q.pad + a, s = j * q.stride - q.pad + b;
        if (arg[o] >= q.k * q.k || r < 0 || r >= q.h || s < 0 || s >= q.w) {
            record_bad(arg[o], o);
            continue;
        }
        atomicAdd(dx + p * q.h * q.w + r * q.w + s, dy[o]);
    }
}
__device__ void avg_window(const pool_geometry& q, bool adaptive, i64 i, i64 j, i64& h0, i64& h1, i64& w0, i64& w1,
                           float& d) {
    if (adaptive) {
        h0 = i * q.h / q.ho;
        h1 = ((i + 1) * q.h + q.ho - 1) / q.ho;
        w0 = j * q.w / q.wo;
        w1 = ((j + 1) * q.w + q.wo - 1) / q.wo;
        d = static_cast<float>((h1 - h0) * (w1 - w0));
        return;
    }
    h0 = i * q.stride - q.pad;
    w0 = j * q.stride - q.pad;
    h1 = min(h0 + q.k, q.h + q.pad);
    w1 = min(w0 + q.k, q.w + q.pad);
    d = static_cast<float>((h1 - h0) * (w1 - w0));
    h0 = max(h0, i64(0));
    w0 = max(w0, i64(0));
    h1 = min(h1, q.h);
    w1 = min(w1, q.w);
}
__global__ void avg_pool_forward_k(const float* x, float* y, pool_geometry q, bool adaptive) {
    MEMPLAN_GRID_LOOP(o, q.planes * q.ho * q.wo) {
        const i64 j = o % q.wo, i = (o / q.wo) % q.ho, p = o / (q.wo * q.ho);
        i64 h0, h1, w0, w1;
        float d;
        avg_window(q, adaptive, i, j, h0, h1, w0, w1, d);
        float s = 0;
        for (i64 a = h0; a < h1; ++a)
            for (i64 b = w0; b < w1; ++b) s += x[p * q.h * q.w + a * q.w + b];
        y[o] = s / d;
    }
}
__global__ void avg_pool_backward_k(const float* dy, float* dx, pool_geometry q, bool adaptive) {
    MEMPLAN_GRID_LOOP(o, q.planes * q.ho * q.wo) {
        const i64 j = o % q.wo, i = (o / q.wo) % q.ho, p = o / (q.wo * q.ho);
        i64 h0, h1, w0, w1;
        float d;
        avg_window(q, adaptive, i, j, h0, h1, w0, w1, d);
        const float g = dy[o] / d;
        for (i64 a = h0; a < h1; ++a)
            for (i64 b = w0; b < w1; ++b) atomicAdd(dx + p * q.h * q.w + a * q.w + b, g);
    }
}

// One block: positions strided over the threads, the mean NLL reduced in a
// fixed order (deterministic).
__global__ void softmax_xent_forward_k(const float* x, float* logp, float* loss, const std::int64_t* labels, i64 outer,
                                       i64 C, i64 inner) {
    double total = 0;
    for (i64 pos = threadIdx.x; pos < outer * inner; pos += blockDim.x) {
        const i64 o = pos / inner, i = pos % inner, base = o * C * inner + i;
        float m = x[base];
        for (i64 k = 1; k < C; ++k) m = fmaxf(m, x[base + k * inner]);
        double z = 0;
        for (i64 k = 0; k < C; ++k) z += exp(double(x[base + k * inner] - m));
        const float lse = m + static_cast<float>(log(z));
        for (i64 k = 0; k < C; ++k) logp[base + k * inner] = x[base + k * inner] - lse;
        const std::int64_t y = labels[pos];
        if (y < 0 || y >= C) {
            record_bad(y, pos);
            continue;
        }
        total -= logp[base + y * inner];
    }
    total = block_sum(total);
    if (threadIdx.x == 0) *loss = static_cast<float>(total / double(outer * inner));
}
__global__ void softmax_xent_backward_k(const float* logp, const std::int64_t* labels, float* dx, i64 outer, i64 C,
                                        i64 inner) {
    const float inv = static_cast<float>(1.0 / double(outer * inner));
    MEMPLAN_GRID_LOOP(e, outer * C * inner) {
        const i64 i = e % inner, k = (e / inner) % C, o = e / (inner * C);
        const std::int64_t y = labels[o * inner + i];
        if (y < 0 || y >= C) record_bad(y, o * inner + i);
        dx[e] = (expf(logp[e]) - (k == y ? 1.0f : 0.0f)) * inv;
    }
}
__global__ void embedding_forward_k(const std::int64_t* ids, const float* table, float* y, i64 n, i64 D, i64 V) {
    MEMPLAN_GRID_LOOP(e, n * D) {
        const i64 t = e / D;
        const std::int64_t id = ids[t];
        if (id < 0 || id >= V) {
            record_bad(id, t);
            y[e] = 0.0f;
            continue;
        }
        y[e] = table[id * D + e % D];
    }
}
__global__ void embedding_backward_k(const std::int64_t* ids, const float* dy, float* dt, i64 n, i64 D, i64 V) {
    MEMPLAN_GRID_LOOP(e, n * D) {
        const i64 t = e / D;
        const std::int64_t id = ids[t];
        if (id < 0 || id >= V) {
            record_bad(id, t);
            continue;
        }
        atomicAdd(dt + id * D + e % D, dy[e]);
    }
}
__global__ void position_forward_k(const float* x, const float* table, float* y, i64 N, i64 SD) {
    MEMPLAN_GRID_LOOP(e, N * SD) y[e] = x[e] + table[e % SD];
}
__global__ void position_backward_k(const float* dy, float* dt, i64 N, i64 SD, i64 total) {
    MEMPLAN_GRID_LOOP(e, total) {
        float s = 0;
        if (e < SD)
            for (i64 n = 0; n < N; ++n) s += dy[n * SD + e];
        dt[e] = s;
    }
}
__global__ void causal_mask_k(float* s, i64 planes, i64 rows, i64 cols) {
    MEMPLAN_GRID_LOOP(e, planes * rows * cols) {
        const i64 j = e % cols, i = (e / cols) % rows;
        if (j > i) s[e] = -INFINITY;
    }
}
// One block per row.
__global__ void softmax_rows_k(const float* x, float* y, i64 cols) {
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    __shared__ float red[threads];
    float m = -INFINITY;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int w = threads / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
        __syncthreads();
    }
    m = red[0];
    double z = 0;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) z += expf(xr[j] - m);
    const float zt = static_cast<float>(block_sum(z));
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) / zt;
}
__global__ void softmax_rows_backward_k(const float* p, const float* dp, float* ds, i64 cols) {
    const i64 off = blockIdx.x * cols;
    double dot = 0;
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) dot += double(p[off + j]) * dp[off + j];
    const float d = static_cast<float>(block_sum(dot));
    for (i64 j = threadIdx.x; j < cols; j += blockDim.x) ds[off + j] = p[off + j] * (dp[off + j] - d);
}

unsigned grid_of(i64 n) { return static_cast<unsigned>(n < 1 ? 1 : n); }

} // namespace

void add_bias_rows(cudaStream_t s, float* y, const float* b, i64 rows, i64 cols) {
    add_bias_rows_k<<<blocks_for(rows * cols), threads, 0, s>>>(y, b, rows, cols);
}
void column_sums(cudaStream_t s, const float* x, float* out, i64 rows, i64 cols) {
    column_sums_k<<<grid_of(cols), threads, 0, s>>>(x, out, rows, cols);
}
void add(cudaStream_t s, const float* a, const float* b, float* out, i64 n) {
    add_k<<<blocks_for(n), threads, 0, s>>>(a, b, out, n);
}
void relu_forward(cudaStream_t s, const float* x, float* y, std::uint8_t* mask, i64 n, float cap) {
    relu_forward_k<<<blocks_for((n + 7) / 8), threads, 0, s>>>(x, y, mask, n, cap);
}
void relu_backward_mask(cudaStream_t s, const float* dy, const std::uint8_t* mask, float* dx, i64 n) {
    relu_backward_mask_k<<<blocks_for(n), threads, 0, s>>>(dy, mask, dx, n);
}
void relu_backward_value(cudaStream_t s, const float* dy, const float* v, float* dx, i64 n, float cap) {
    relu_backward_value_k<<<blocks_for(n), threads, 0, s>>>(dy, v, dx, n, cap);
}
void gelu_forward(cudaStream_t s, const float* x, float* y, i64 n) { gelu_forward_k<<<blocks_for(n), threads, 0, s>>>(x, y, n); }
void gelu_backward(cudaStream_t s, const float* x, const float* dy, float* dx, i64 n) {
    gelu_backward_k<<<blocks_for(n), threads, 0, s>>>(x, dy, dx, n);
}
void dropout_forward(cudaStream_t s, const float* x, float* y, std::uint8_t* mask, i64 n, std::uint64_t seed,
                     std::uint64_t threshold, float scale) {
    dropout_forward_k<<<blocks_for(n), threads, 0, s>>>(x, y, mask, n, seed, threshold, scale);
}
void dropout_backward(cudaStream_t s, const float* dy, const std::uint8_t* mask, float* dx, i64 n, float scale) {
    dropout_backward_k<<<blocks_for(n), threads, 0, s>>>(dy, mask, dx, n, scale);
}
void sgd(cudaStream_t s, float* w, const float* g, i64 n, float lr) { sgd_k<<<blocks_for(n), threads, 0, s>>>(w, g, n, lr); }
void sgd_momentum(cudaStream_t s, float* w, const float* g, float* v, i64 n, float lr, float mu) {
    sgd_momentum_k<<<blocks_for(n), threads, 0, s>>>(w, g, v, n, lr, mu);
}
void adam(cudaStream_t s, float* w, const float* g, float* m, float* v, i64 n, float lr, float b1, float b2, float eps,
          float c1, float c2) {
    adam_k<<<blocks_for(n), threads, 0, s>>>(w, g, m, v, n, lr, b1, b2, eps, c1, c2);
}
namespace {

// Batch-norm's split: about bn_target_blocks blocks in all (a few waves on
// an H200's 132 SMs, the same split on every GPU so results do not depend on
// the device), chunks of at least bn_min_chunk values.
constexpr i64 bn_target_blocks = 4096, bn_min_chunk = 2048;

i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }

/// Chunks per channel; below 1 when the scratch cannot hold the partials (2 per
/// chunk) and dx's coefficients (3 per channel): one block per channel then.
i64 bn_parts(i64 N, i64 C, i64 S, const reduction_scratch& scratch) {
    const i64 wanted = std::min(ceil_div(bn_target_blocks, C), ceil_div(N * S, bn_min_chunk));
    const i64 room = scratch.data ? (scratch.values - 3 * C) / (2 * C) : 0;
    return std::min(wanted, room);
}

/// Blocks of the element-wise batch-norm kernels: about 16 values per thread,
/// so channel_of's divisions are paid once per 16 values.
unsigned bn_elementwise_blocks(i64 total) {
    return static_cast<unsigned>(std::clamp<i64>(ceil_div(total, threads * 16), 1, i64(1) << 20));
}

} // namespace

void batch_norm_forward(cudaStream_t s, const float* x, float* y, const float* gamma, const float* beta, float* stats,
                        float* rm, float* rv, i64 N, i64 C, i64 S, double eps, const reduction_scratch& scratch) {
    if (C <= 0) return;
    const i64 parts = bn_parts(N, C, S, scratch);
    if (parts >= 1) {
        bn_partial_stats_k<<<static_cast<unsigned>(C * parts), threads, 0, s>>>(x, scratch.data, N, C, S, parts);
        bn_finish_stats_k<<<blocks_for(C), threads, 0, s>>>(x, scratch.data, stats, rm, rv, N, C, S, parts, eps);
    } else {
        bn_stats_k<<<grid_of(C), threads, 0, s>>>(x, stats, rm, rv, N, C, S, eps);
    }
    bn_apply_k<<<bn_elementwise_blocks(N * C * S), threads, 0, s>>>(x, y, gamma, beta, stats, N, C, S);
}
void batch_norm_backward(cudaStream_t s, const float* dy, const float* src, bool from_output, const float* gamma,
                         const float* beta, const float* stats, float* dx, float* dg, float* db, i64 N, i64 C, i64 S,
                         const reduction_scratch& scratch) {
    if (C <= 0) return;
    const i64 parts = bn_parts(N, C, S, scratch);
    if (parts < 1) {
        bn_backward_k<<<grid_of(C), threads, 0, s>>>(dy, src, from_output, gamma, beta, stats, dx, dg, db, N, C, S);
        return;
    }
    double* coef = scratch.data + 2 * C * parts;
    bn_partial_grad_k<<<static_cast<unsigned>(C * parts), threads, 0, s>>>(dy, src, from_output, gamma, beta, stats,
                                                                           scratch.data, N, C, S, parts);
    bn_finish_grad_k<<<blocks_for(C), threads, 0, s>>>(scratch.data, gamma, stats, coef, dg, db, N, C, S, parts);
    if (dx)
        bn_grad_input_k<<<bn_elementwise_blocks(N * C * S), threads, 0, s>>>(dy, src, from_output, gamma, beta, stats,
                                                                             coef, dx, N, C, S);
}

namespace {

// One scratch per (device, stream): a stream runs its launches in order, so
// one batch-norm's partials never meet another's; two streams never share.
std::mutex scratch_mutex;
std::map<std::pair<int, cudaStream_t>, double*> scratch_table;

} // namespace

cudaError_t stream_scratch(cudaStream_t s, reduction_scratch& out) {
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
    const std::lock_guard<std::mutex> lock(scratch_mutex);
    auto& p = scratch_table[{device, s}];
    if (!p)
        if (const cudaError_t e = cudaMalloc(&p, reduction_scratch_values * sizeof(double)); e != cudaSuccess) {
            p = nullptr;
            scratch_table.erase({device, s});
            return e;
        }
    out = {p, reduction_scratch_values};
    return cudaSuccess;
}
void release_scratch(cudaStream_t s) noexcept {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return;
    const std::lock_guard<std::mutex> lock(scratch_mutex);
    const auto at = scratch_table.find({device, s});
    if (at == scratch_table.end()) return;
    (void)cudaFree(at->second); // the stream's work using it has finished: the caller synchronised it
    scratch_table.erase(at);
}
void layer_norm_forward(cudaStream_t s, const float* x, float* y, const float* gamma, const float* beta, float* stats,
                        i64 rows, i64 F, double eps) {
    ln_forward_k<<<grid_of(rows), threads, 0, s>>>(x, y, gamma, beta, stats, rows, F, eps);
}
void layer_norm_backward(cudaStream_t s, const float* x, const float* dy, const float* gamma, const float* stats,
                         float* dx, float* dg, float* db, i64 rows, i64 F) {
    // The parameter gradients first: dx may overwrite dy.
    ln_backward_params_k<<<blocks_for(F), threads, 0, s>>>(x, dy, stats, dg, db, rows, F);
    if (dx) ln_backward_dx_k<<<grid_of(rows), threads, 0, s>>>(x, dy, gamma, stats, dx, rows, F);
}
void max_pool_forward(cudaStream_t s, const float* x, float* y, std::uint8_t* arg, const pool_geometry& q) {
    max_pool_forward_k<<<blocks_for(q.planes * q.ho * q.wo), threads, 0, s>>>(x, y, arg, q);
}
void max_pool_backward(cudaStream_t s, const float* dy, const std::uint8_t* arg, float* dx, const pool_geometry& q) {
    cudaMemsetAsync(dx, 0, static_cast<std::size_t>(q.planes * q.h * q.w) * sizeof(float), s);
    max_pool_backward_k<<<blocks_for(q.planes * q.ho * q.wo), threads, 0, s>>>(dy, arg, dx, q);
}
void avg_pool_forward(cudaStream_t s, const float* x, float* y, const pool_geometry& q, bool adaptive) {
    avg_pool_forward_k<<<blocks_for(q.planes * q.ho * q.wo), threads, 0, s>>>(x, y, q, adaptive);
}
void avg_pool_backward(cudaStream_t s, const float* dy, float* dx, const pool_geometry& q, bool adaptive) {
    cudaMemsetAsync(dx, 0, static_cast<std::size_t>(q.planes * q.h * q.w) * sizeof(float), s);
    avg_pool_backward_k<<<blocks_for(q.planes * q.ho * q.wo), threads, 0, s>>>(dy, dx, q, adaptive);
}
void softmax_xent_forward(cudaStream_t s, const float* x, float* logp, float* loss, const std::int64_t* labels, i64 outer,
                          i64 C, i64 inner) {
    softmax_xent_forward_k<<<1, threads, 0, s>>>(x, logp, loss, labels, outer, C, inner);
}
void softmax_xent_backward(cudaStream_t s, const float* logp, const std::int64_t* labels, float* dx, i64 outer, i64 C,
                           i64 inner) {
    softmax_xent_backward_k<<<blocks_for(outer * C * inner), threads, 0, s>>>(logp, labels, dx, outer, C, inner);
}
void embedding_forward(cudaStream_t s, const std::int64_t* ids, const float* table, float* y, i64 n, i64 D, i64 V) {
    embedding_forward_k<<<blocks_for(n * D), threads, 0, s>>>(ids, table, y, n, D, V);
}
void embedding_backward(cudaStream_t s, const std::int64_t* ids, const float* dy, float* dt, i64 n, i64 D, i64 V) {
    cudaMemsetAsync(dt, 0, static_cast<std::size_t>(V * D) * sizeof(float), s);
    embedding_backward_k<<<blocks_for(n * D), threads, 0, s>>>(ids, dy, dt, n, D, V);
}
void position_forward(cudaStream_t s, const float* x, const float* table, float* y, i64 N, i64 SD) {
    position_forward_k<<<blocks_for(N * SD), threads, 0, s>>>(x, table, y, N, SD);
}
void position_backward(cudaStream_t s, const float* dy, float* dt, i64 N, i64 SD, i64 total) {
    position_backward_k<<<blocks_for(total), threads, 0, s>>>(dy, dt, N, SD, total);
}
void causal_mask(cudaStream_t s, float* sc, i64 planes, i64 rows, i64 cols) {
    causal_mask_k<<<blocks_for(planes * rows * cols), threads, 0, s>>>(sc, planes, rows, cols);
}
void softmax_rows(cudaStream_t s, const float* x, float* y, i64 rows, i64 cols) {
    softmax_rows_k<<<grid_of(rows), threads, 0, s>>>(x, y, cols);
}
void softmax_rows_backward(cudaStream_t s, const float* p, const float* dp, float* ds, i64 rows, i64 cols) {
    softmax_rows_backward_k<<<grid_of(rows), threads, 0, s>>>(p, dp, ds, cols);
}
bad_index take_bad_index(cudaStream_t s) {
    // All copies on `s`: a plain cudaMemcpyToSymbol runs on the legacy stream, which does not
    // order against a non-blocking `s`, and its pageable copy may still be in flight when the
    // next kernel on `s` records a bad index.
    bad_index b;
    int flag = 0;
    auto step = [&](cudaError_t e) {
        if (b.error == cudaSuccess) b.error = e;
    };
    step(cudaMemcpyFromSymbolAsync(&flag, g_bad_flag, sizeof(int), 0, cudaMemcpyDeviceToHost, s));
    step(cudaStreamSynchronize(s));
    if (b.error != cudaSuccess || !flag) return b;
    b.any = true;
    step(cudaMemcpyFromSymbolAsync(&b.value, g_bad_value, sizeof(long long), 0, cudaMemcpyDeviceToHost, s));
    step(cudaMemcpyFromSymbolAsync(&b.position, g_bad_position, sizeof(long long), 0, cudaMemcpyDeviceToHost, s));
    static const int zero = 0;
    step(cudaMemcpyToSymbolAsync(g_bad_flag, &zero, sizeof(int), 0, cudaMemcpyHostToDevice, s));
    step(cudaStreamSynchronize(s));
    return b;
}
cudaError_t last_error() { return cudaGetLastError(); }

} // namespace memplan::engine::cuda::kernels
