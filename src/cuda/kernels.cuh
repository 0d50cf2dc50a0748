// Launchers of memplan's own CUDA kernels (the ops cuDNN and cuBLAS do not
// cover: 1-bit ReLU masks, losses, optimizer updates, norms, pooling with
// saved arg-max bytes, attention pieces). Plain declarations: host code
// compiled by the C++ compiler calls them; only kernels.cu needs nvcc.
//
// Every launcher queues work on `s` and returns; all kernels overwrite their
// outputs and stay correct when an output aliases its input element for element.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace memplan::engine::cuda::kernels {

void add_bias_rows(cudaStream_t s, float* y, const float* b, std::int64_t rows, std::int64_t cols);
void column_sums(cudaStream_t s, const float* x, float* out, std::int64_t rows, std::int64_t cols);
void add(cudaStream_t s, const float* a, const float* b, float* out, std::int64_t n);

void relu_forward(cudaStream_t s, const float* x, float* y, std::uint8_t* mask, std::int64_t n, float cap);
void relu_backward_mask(cudaStream_t s, const float* dy, const std::uint8_t* mask, float* dx, std::int64_t n);
void relu_backward_value(cudaStream_t s, const float* dy, const float* v, float* dx, std::int64_t n, float cap);
void gelu_forward(cudaStream_t s, const float* x, float* y, std::int64_t n);
void gelu_backward(cudaStream_t s, const float* x, const float* dy, float* dx, std::int64_t n);
void dropout_forward(cudaStream_t s, const float* x, float* y, std::uint8_t* mask, std::int64_t n, std::uint64_t seed,
                     std::uint64_t threshold, float scale);
void dropout_backward(cudaStream_t s, const float* dy, const std::uint8_t* mask, float* dx, std::int64_t n, float scale);

void sgd(cudaStream_t s, float* w, const float* g, std::int64_t n, float lr);
void sgd_momentum(cudaStream_t s, float* w, const float* g, float* v, std::int64_t n, float lr, float mu);
void adam(cudaStream_t s, float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2,
          float eps, float c1, float c2);

/// Device memory for the partial sums of the batch-norm reductions, `values` doubles.
struct reduction_scratch {
    double* data = nullptr;
    std::int64_t values = 0;
};
/// What stream_scratch allocates per stream (256 KiB): the partials of channels x chunks
/// (about 4096 blocks in all) and three doubles per channel, for up to 6553 channels; wider
/// layers reduce with one block per channel and need none of it.
constexpr std::int64_t reduction_scratch_values = 32768;
/// The scratch of stream `s` on the current device: cudaMalloc'd at the first call for that
/// stream, then the same memory until release_scratch(s). Thread-safe.
cudaError_t stream_scratch(cudaStream_t s, reduction_scratch& out);
/// Frees the scratch of `s`, if any. Call it once the stream's work is done (before destroying it).
void release_scratch(cudaStream_t s) noexcept;

/// Batch-norm over (N, C, S): saves mean and inverse std in stats[0..C), stats[C..2C).
/// running_* may be null (a recomputed forward). y may alias x. `scratch` must stay this
/// stream's alone until the work queued here is done; an empty one is allowed (one block per channel).
void batch_norm_forward(cudaStream_t s, const float* x, float* y, const float* gamma, const float* beta, float* stats,
                        float* running_mean, float* running_var, std::int64_t N, std::int64_t C, std::int64_t S,
                        double eps, const reduction_scratch& scratch);
/// from_output: src is y and xhat = (y - beta) / gamma; else src is x. dx may be null, or alias dy.
void batch_norm_backward(cudaStream_t s, const float* dy, const float* src, bool from_output, const float* gamma,
                         const float* beta, const float* stats, float* dx, float* dgamma, float* dbeta, std::int64_t N,
                         std::int64_t C, std::int64_t S, const reduction_scratch& scratch);
void layer_norm_forward(cudaStream_t s, const float* x, float* y, const float* gamma, const float* beta, float* stats,
                        std::int64_t rows, std::int64_t F, double eps);
void layer_norm_backward(cudaStream_t s, const float* x, const float* dy, const float* gamma, const float* stats,
                         float* dx, float* dgamma, float* dbeta, std::int64_t rows, std::int64_t F);

struct pool_geometry {
    std::int64_t planes, h, w, ho, wo, k, stride, pad;
};
void max_pool_forward(cudaStream_t s, const float* x, float* y, std::uint8_t* arg, const pool_geometry& q);
void max_pool_backward(cudaStream_t s, const float* dy, const std::uint8_t* arg, float* dx, const pool_geometry& q);
/// adaptive: windows [i*H/Ho, ceil((i+1)*H/Ho)); else kernel/stride/pad with PyTorch's include-pad divisor.
void avg_pool_forward(cudaStream_t s, const float* x, float* y, const pool_geometry& q, bool adaptive);
void avg_pool_backward(cudaStream_t s, const float* dy, float* dx, const pool_geometry& q, bool adaptive);

/// Log-softmax over `C` classes at stride `inner`, the mean NLL into *loss.
/// A label outside [0, C) is recorded (see take_bad_index).
void softmax_xent_forward(cudaStream_t s, const float* x, float* logp, float* loss, const std::int64_t* labels,
                          std::int64_t outer, std::int64_t C, std::int64_t inner);
void softmax_xent_backward(cudaStream_t s, const float* logp, const std::int64_t* labels, float* dx, std::int64_t outer,
                           std::int64_t C, std::int64_t inner);
void embedding_forward(cudaStream_t s, const std::int64_t* ids, const float* table, float* y, std::int64_t n,
                       std::int64_t D, std::int64_t V);
void embedding_backward(cudaStream_t s, const std::int64_t* ids, const float* dy, float* dtable, std::int64_t n,
                        std::int64_t D, std::int64_t V);
void position_forward(cudaStream_t s, const float* x, const float* table, float* y, std::int64_t N, std::int64_t SD);
void position_backward(cudaStream_t s, const float* dy, float* dtable, std::int64_t N, std::int64_t SD,
                       std::int64_t table_values);

/// Rows of `cols` values: causal masking (-inf above the diagonal of each (rows, cols) plane).
void causal_mask(cudaStream_t s, float* scores, std::int64_t planes, std::int64_t rows, std::int64_t cols);
void softmax_rows(cudaStream_t s, const float* x, float* y, std::int64_t rows, std::int64_t cols);
void softmax_rows_backward(cudaStream_t s, const float* p, const float* dp, float* ds, std::int64_t rows,
                           std::int64_t cols);

/// The first out-of-range id or label recorded since the last call (any = false when none). Synchronises `s`;
/// `error` is the first CUDA error met while reading the record (the stream's own, too).
struct bad_index {
    bool any = false;
    long long value = 0, position = 0;
    cudaError_t error = cudaSuccess;
};
bad_index take_bad_index(cudaStream_t s);

/// The last launch error (cudaGetLastError).
cudaError_t last_error();

} // namespace memplan::engine::cuda::kernels
