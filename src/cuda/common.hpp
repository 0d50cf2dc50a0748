// Shared pieces of the CUDA backend's host code: the context (stream, cuBLAS
// and cuDNN handles, RAII), helpers every layer family uses (errors naming
// the op, launch and index checks, row-major GEMMs on cuBLAS), and the
// declarations of the per-family kernels, one .cpp per family as
// engine/cpu/ has one header per family. Private to src/cuda.
#pragma once

#include "check.hpp"
#include "kernels.cuh"

#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/engine/program.hpp>
#include <memplan/engine/shapes.hpp>
#include <memplan/nn/layer.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace memplan::engine::cuda::detail {

using i64 = std::int64_t;

/// MEMPLAN_CUDA_SYNC=1 (any value but empty or 0): the synchronising debug
/// mode (backend_options::sync_each_op), without rebuilding the program.
inline bool sync_requested_by_environment() noexcept {
    const char* v = std::getenv("MEMPLAN_CUDA_SYNC");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

struct context {
    backend_options opt;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cudnnHandle_t dnn = nullptr;
    backend_stats stats;

    explicit context(backend_options o) : opt(o) {
        if (sync_requested_by_environment()) opt.sync_each_op = true; // read once, here
        if (device_count() <= opt.device)
            throw error("cuda", "the CUDA backend needs device " + std::to_string(opt.device) + " but " +
                                    std::to_string(device_count()) + " were found");
        MEMPLAN_CUDA_CHECK(cudaSetDevice(opt.device));
        MEMPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        try {
            MEMPLAN_CUDA_CHECK(cublasCreate(&blas));
            MEMPLAN_CUDA_CHECK(cublasSetStream(blas, stream));
            MEMPLAN_CUDA_CHECK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH)); // fp32 as the CPU computes it
            MEMPLAN_CUDA_CHECK(cudnnCreate(&dnn));
            MEMPLAN_CUDA_CHECK(cudnnSetStream(dnn, stream));
            if (opt.alloc == allocation::stream_pool) {
                // Keep freed memory in the pool (the default threshold returns it at every synchronisation).
                cudaMemPool_t pool = nullptr;
                MEMPLAN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, opt.device));
                std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
                MEMPLAN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
            }
        } catch (...) {
            release();
            throw;
        }
    }
    context(const context&) = delete;
    context& operator=(const context&) = delete;
    ~context() { release(); }

    void release() noexcept {
        // Queued work may still use the handles and the stream: let it finish first.
        if (stream) (void)cudaStreamSynchronize(stream);
        if (stream && opt.alloc == allocation::stream_pool) {
            // Hand the pool's cached memory back: the release threshold above keeps it past
            // this backend, and the next one's cudaMemGetInfo baseline would hide its reuse.
            cudaMemPool_t pool = nullptr;
            if (cudaDeviceGetDefaultMemPool(&pool, opt.device) == cudaSuccess) (void)cudaMemPoolTrimTo(pool, 0);
        }
        if (dnn) cudnnDestroy(dnn);
        if (blas) cublasDestroy(blas);
        if (stream) kernels::release_scratch(stream); // batch-norm's partial sums (kernels.cuh)
        if (stream) cudaStreamDestroy(stream);
        dnn = nullptr;
        blas = nullptr;
        stream = nullptr;
    }
};

// ----- shared helpers ---------------------------------------------------------

/// The memory of slot `s`; throws naming the op when the step did not bind it.
inline tensor_ref need(const kernel_call& c, nn::slot s, const char* what) { return bound_slot("cuda", c, s, what); }

/// True for fwd, false for bwd of a one-op layer; throws naming the op otherwise.
inline bool forward_or_backward(const kernel_call& c) { return is_forward_pass("cuda", "CUDA", c); }

inline float* fp(const tensor_ref& r) { return r.as<float>(); }
inline i64 count(const tensor_ref& r) { return static_cast<i64>(r.numel()); }

/// Checks the launches just queued for op `c`.
inline void launched(const kernel_call& c) {
    const cudaError_t e = kernels::last_error();
    if (e != cudaSuccess) fail(c, std::string("kernel launch failed: ") + cudaGetErrorString(e));
}

/// Throws naming op `c` when a kernel recorded an index outside its range.
inline void check_indices(context& x, const kernel_call& c, const char* what, i64 limit) {
    const auto b = kernels::take_bad_index(x.stream);
    if (b.error != cudaSuccess) fail(c, std::string("reading the index check failed: ") + cudaGetErrorString(b.error));
    if (b.any)
        fail(c, std::string(what) + " " + std::to_string(b.value) + " at position " + std::to_string(b.position) +
                    " is outside [0, " + std::to_string(limit) + ")");
}

/// Row-major C (m x n) = alpha op(A) op(B) + beta C, as column-major C^T = op(B)^T op(A)^T.
inline void gemm(context& x, bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, const float* A, i64 lda,
                 const float* B, i64 ldb, float beta, float* C, i64 ldc) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    MEMPLAN_CUDA_CHECK(cublasSgemm(x.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, i(n), i(m),
                                   i(k), &alpha, B, i(ldb), A, i(lda), &beta, C, i(ldc)));
}
inline void gemm_batched(context& x, bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, const float* A, i64 lda,
                         i64 sa, const float* B, i64 ldb, i64 sb, float beta, float* C, i64 ldc, i64 sc, i64 batch) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    MEMPLAN_CUDA_CHECK(cublasSgemmStridedBatched(x.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                 i(n), i(m), i(k), &alpha, B, i(ldb), sb, A, i(lda), sa, &beta, C,
                                                 i(ldc), sc, i(batch)));
}

// ----- the layer families (one .cpp each, as engine/cpu/ has one header each) ----

void run(context& x, const nn::linear& l, const kernel_call& c);                  // linear.cpp
void run(context& x, const nn::conv2d& l, const kernel_call& c);                  // conv.cpp
void run(context& x, const nn::conv_transpose2d& l, const kernel_call& c);        // conv.cpp
void run(context& x, const nn::batch_norm& l, const kernel_call& c);              // norm.cpp
void run(context& x, const nn::layer_norm& l, const kernel_call& c);              // norm.cpp
void run(context& x, const nn::relu& l, const kernel_call& c);                    // activation.cpp
void run(context& x, const nn::gelu& l, const kernel_call& c);                    // activation.cpp
void run(context& x, const nn::max_pool2d& l, const kernel_call& c);              // pool.cpp
void run(context& x, const nn::avg_pool2d& l, const kernel_call& c);              // pool.cpp
void run(context& x, const nn::adaptive_avg_pool2d& l, const kernel_call& c);     // pool.cpp
void run(context& x, const nn::global_avg_pool& l, const kernel_call& c);         // pool.cpp
void run(context& x, const nn::add& l, const kernel_call& c);                     // elementwise.cpp
void run(context& x, const nn::concat& l, const kernel_call& c);                  // elementwise.cpp
void run(context& x, const nn::flatten& l, const kernel_call& c);                 // elementwise.cpp
void run(context& x, const nn::dropout& l, const kernel_call& c);                 // elementwise.cpp
void run(context& x, const nn::embedding& l, const kernel_call& c);               // embedding.cpp
void run(context& x, const nn::position_embedding& l, const kernel_call& c);      // embedding.cpp
void run(context& x, const nn::attention& l, const kernel_call& c);               // attention.cpp
void run(context& x, const nn::softmax_cross_entropy& l, const kernel_call& c);   // loss.cpp
/// A layer kind without a CUDA kernel (the zoo decoder's RMSNorm, rotary,
/// SwiGLU and fused attention): an error naming the op.
template <class Layer>
void run(context&, const Layer&, const kernel_call& c) {
    fail(c, "the CUDA engine has no kernel for layer kind '" + std::string(Layer::kind) + "'");
}
void run_grad_acc(context& x, const kernel_call& c);                              // optimizer.cpp
void run_update(context& x, const kernel_call& c);                                // optimizer.cpp

} // namespace memplan::engine::cuda::detail
