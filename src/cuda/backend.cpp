// The CUDA backend's host code: device discovery, the context (stream,
// cuBLAS and cuDNN handles, RAII), memory, and the dispatch of a kernel_call
// to cuBLAS, cuDNN or memplan's kernels, one section per layer family in the
// CPU backend's order. Compiled by the C++ compiler; only kernels.cu needs nvcc.
#include "check.hpp"
#include "kernels.cuh"

#include <memplan/engine/cuda/algorithms.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/engine/shapes.hpp>
#include <memplan/nn/layer.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <variant>

namespace memplan::engine::cuda {

int device_count() noexcept {
    int n = 0; // left untouched on failure (error 35 without a driver)
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

device_info describe_device(int index) {
    if (index < 0 || index >= device_count())
        throw error("cuda", "no CUDA device " + std::to_string(index) + " (" + std::to_string(device_count()) +
                                " found)");
    cudaDeviceProp p{};
    MEMPLAN_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    return {p.name, static_cast<std::uint64_t>(p.totalGlobalMem), p.major, p.minor};
}

std::uint64_t device_bytes_in_use() noexcept {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return total - free;
}

namespace detail {

using i64 = std::int64_t;

struct context {
    backend_options opt;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cudnnHandle_t dnn = nullptr;
    backend_stats stats;

    explicit context(backend_options o) : opt(o) {
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
        if (stream) cudaStreamDestroy(stream);
        dnn = nullptr;
        blas = nullptr;
        stream = nullptr;
    }
};

void context_deleter::operator()(context* c) const noexcept { delete c; }

// ----- shared helpers ---------------------------------------------------------

[[noreturn]] void fail(const kernel_call& c, const std::string& what) {
    throw error("cuda", "op '" + c.name() + "': " + what);
}

tensor_ref need(const kernel_call& c, nn::slot s, const char* what) {
    auto r = c.slot(s);
    if (!r) fail(c, std::string("needs ") + what + " but the step does not bind it");
    return r;
}

/// True for the forward (fwd) of a one-op layer, false for its backward
/// (bwd); throws naming the op for any other pass.
bool forward_or_backward(const kernel_call& c) {
    switch (c.pass()) {
    case nn::op_pass::fwd: return true;
    case nn::op_pass::bwd: return false;
    default: fail(c, "the CUDA backend has no kernel for this op");
    }
}

float* fp(const tensor_ref& r) { return r.as<float>(); }
i64 count(const tensor_ref& r) { return static_cast<i64>(r.numel()); }
i64 inner_size(const nn::shape& s, std::size_t from) {
    i64 n = 1;
    for (std::size_t a = from; a < s.rank(); ++a) n *= static_cast<i64>(s[a]);
    return n;
}

/// Checks the launches just queued for op `c`.
void launched(const kernel_call& c) {
    const cudaError_t e = kernels::last_error();
    if (e != cudaSuccess) fail(c, std::string("kernel launch failed: ") + cudaGetErrorString(e));
}

/// Throws naming op `c` when a kernel recorded an index outside its range.
void check_indices(context& x, const kernel_call& c, const char* what, i64 limit) {
    const auto b = kernels::take_bad_index(x.stream);
    if (b.error != cudaSuccess) fail(c, std::string("reading the index check failed: ") + cudaGetErrorString(b.error));
    if (b.any)
        fail(c, std::string(what) + " " + std::to_string(b.value) + " at position " + std::to_string(b.position) +
                    " is outside [0, " + std::to_string(limit) + ")");
}

/// Row-major C (m x n) = alpha op(A) op(B) + beta C, as column-major C^T = op(B)^T op(A)^T.
void gemm(context& x, bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, const float* A, i64 lda, const float* B,
          i64 ldb, float beta, float* C, i64 ldc) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    MEMPLAN_CUDA_CHECK(cublasSgemm(x.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, i(n), i(m),
                                   i(k), &alpha, B, i(ldb), A, i(lda), &beta, C, i(ldc)));
}
void gemm_batched(context& x, bool ta, bool tb, i64 m, i64 n, i64 k, float alpha, const float* A, i64 lda, i64 sa,
                  const float* B, i64 ldb, i64 sb, float beta, float* C, i64 ldc, i64 sc, i64 batch) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    MEMPLAN_CUDA_CHECK(cublasSgemmStridedBatched(x.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                 i(n), i(m), i(k), &alpha, B, i(ldb), sb, A, i(lda), sa, &beta, C,
                                                 i(ldc), sc, i(batch)));
}

// ----- linear (cuBLAS) -----------------------------------------------------

void run(context& x, const nn::linear& l, const kernel_call& c) {
    using nn::slot;
    const auto in = static_cast<i64>(l.in_features), out = static_cast<i64>(l.out_features);
    const auto w = c.slot(slot::param(0));
    if (!w && c.pass() != nn::op_pass::bwd_weight) need(c, slot::param(0), "the weight");
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const auto xi = need(c, slot::input(0), "the input");
        const auto y = need(c, slot::output(), "the output");
        const i64 rows = count(xi) / in;
        gemm(x, false, true, rows, out, in, 1.0f, fp(xi), in, fp(w), in, 0.0f, fp(y), out);
        if (l.bias) kernels::add_bias_rows(x.stream, fp(y), fp(need(c, slot::param(1), "the bias")), rows, out);
        break;
    }
    case nn::op_pass::bwd_data: {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const auto dx = need(c, slot::grad_input(0), "the input gradient");
        const i64 rows = count(dy) / out;
        gemm(x, false, false, rows, in, out, 1.0f, fp(dy), out, fp(w), in, 0.0f, fp(dx), in);
        break;
    }
    case nn::op_pass::bwd_weight: {
        const auto xi = need(c, slot::input(0), "the input");
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const i64 rows = count(dy) / out;
        gemm(x, true, false, out, in, rows, 1.0f, fp(dy), out, fp(xi), in, 0.0f,
             fp(need(c, slot::grad_param(0), "the weight gradient")), in);
        if (l.bias)
            kernels::column_sums(x.stream, fp(dy), fp(need(c, slot::grad_param(1), "the bias gradient")), rows, out);
        break;
    }
    default: fail(c, "the CUDA backend has no kernel for this op");
    }
    launched(c);
}

// ----- convolutions (cuDNN) --------------------------------------------------

void set4d(const tensor_desc& d, i64 n, i64 ch, i64 h, i64 w) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    MEMPLAN_CUDA_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(n), i(ch), i(h), i(w)));
}

struct conv_setup {
    tensor_desc x, y, bias;
    filter_desc w;
    conv_desc conv;
};

/// x (n, c, h, w) -> y (n, k, ho, wo) with filter (k, c / groups, r, s).
void describe(context& ctx, conv_setup& d, const nn::shape& xs, const nn::shape& ys, i64 r, i64 s, i64 ph, i64 pw,
              i64 sh, i64 sw, i64 dh, i64 dw, i64 groups) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    auto e = [](std::uint64_t v) { return static_cast<i64>(v); };
    set4d(d.x, e(xs[0]), e(xs[1]), e(xs[2]), e(xs[3]));
    set4d(d.y, e(ys[0]), e(ys[1]), e(ys[2]), e(ys[3]));
    set4d(d.bias, 1, e(ys[1]), 1, 1);
    MEMPLAN_CUDA_CHECK(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(e(ys[1])),
                                                  i(e(xs[1]) / groups), i(r), i(s)));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolution2dDescriptor(d.conv, i(ph), i(pw), i(sh), i(sw), i(dh), i(dw),
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolutionGroupCount(d.conv, i(groups)));
    MEMPLAN_CUDA_CHECK(
        cudnnSetConvolutionMathType(d.conv, ctx.opt.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
}

// engine/cuda/algorithms.hpp's table as cuDNN enums (implicit GEMM for none).
cudnnConvolutionFwdAlgo_t fwd_algo(nn::impl_kind variant) {
    switch (variant) {
    case nn::impl_kind::gemm_im2col: return CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
    case nn::impl_kind::winograd: return CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    default: return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    }
}
cudnnConvolutionBwdDataAlgo_t bwd_data_algo(nn::impl_kind variant) {
    switch (variant) {
    case nn::impl_kind::gemm_im2col: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    case nn::impl_kind::winograd: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    default: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    }
}
cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo(nn::impl_kind variant) {
    switch (variant) {
    case nn::impl_kind::gemm_im2col: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    case nn::impl_kind::winograd: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    default: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
    }
}

/// The workspace of the variant's algorithm; NOT_SUPPORTED falls back to the
/// implicit-GEMM one. More than the plan gave is an error naming the op, or
/// with workspace_shortfall::fallback the implicit-GEMM algorithm, counted.
template <class Algo, class Query>
Algo choose(context& ctx, const kernel_call& c, Algo wanted, Algo fallback, Query query, std::size_t& bytes) {
    cudnnStatus_t st = query(wanted, bytes);
    Algo algo = wanted;
    if (st != CUDNN_STATUS_SUCCESS && wanted != fallback) {
        ++ctx.stats.conv_fallbacks;
        algo = fallback;
        st = query(fallback, bytes);
    }
    if (st != CUDNN_STATUS_SUCCESS)
        fail(c, std::string("cuDNN has no workspace size for its algorithm: ") + cudnnGetErrorString(st));
    if (bytes > c.workspace_bytes && ctx.opt.shortfall == workspace_shortfall::fallback && algo != fallback) {
        ++ctx.stats.workspace_fallbacks;
        algo = fallback;
        st = query(fallback, bytes);
        if (st != CUDNN_STATUS_SUCCESS)
            fail(c, std::string("cuDNN has no workspace size for its algorithm: ") + cudnnGetErrorString(st));
    }
    if (bytes > c.workspace_bytes)
        fail(c, "cuDNN's algorithm for variant '" + std::string(c.variant == nn::impl_kind::none ? "implicit_gemm" : nn::to_string(c.variant)) +
                    "' needs a workspace of " + std::to_string(bytes) + " bytes, the plan gives " +
                    std::to_string(c.workspace_bytes));
    return algo;
}

bool not_supported(cudnnStatus_t s) noexcept {
#ifdef CUDNN_STATUS_CATEGORY // cuDNN 9: NOT_SUPPORTED_SHAPE, _LAYOUT, ... share the category
    return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
#else
    return s == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

/// Chooses the algorithm (choose) and runs `call(algo, bytes)`. cuDNN may
/// refuse an algorithm at run time although its workspace query succeeded
/// (NOT_SUPPORTED): then the fallback runs, counted as unsupported, when its
/// workspace fits the plan's.
template <class Algo, class Query, class Call>
void run_conv(context& ctx, const kernel_call& c, Algo wanted, Algo fallback, Query query, Call call,
              const char* what) {
    std::size_t bytes = 0;
    const Algo algo = choose(ctx, c, wanted, fallback, query, bytes);
    cudnnStatus_t st = call(algo, bytes);
    if (not_supported(st) && algo != fallback) {
        ++ctx.stats.conv_fallbacks;
        st = query(fallback, bytes);
        if (st == CUDNN_STATUS_SUCCESS && bytes > c.workspace_bytes)
            fail(c, std::string(what) + " refused the variant's algorithm and its zero-workspace fallback needs " +
                        std::to_string(bytes) + " bytes, the plan gives " + std::to_string(c.workspace_bytes));
        if (st == CUDNN_STATUS_SUCCESS) st = call(fallback, bytes);
    }
    if (st != CUDNN_STATUS_SUCCESS) fail(c, std::string(what) + " failed: " + cudnnGetErrorString(st));
}

/// x -> y forward, dy -> dx backward-data, (x, dy) -> dw backward-filter of one
/// convolution described by `d`; `x`, `y` are the convolution's own sides.
/// Overwrites `out` (beta 0), as the CPU backend does.
void conv_pass_run(context& ctx, const kernel_call& c, conv_setup& d, conv_pass pass, nn::impl_kind variant,
                   const float* in_x, const float* in_w, const float* in_dy, float* out) {
    const float one = 1.0f, zero = 0.0f;
    if (pass == conv_pass::forward) {
        run_conv(
            ctx, c, fwd_algo(variant), CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
            [&](cudnnConvolutionFwdAlgo_t a, std::size_t& b) {
                return cudnnGetConvolutionForwardWorkspaceSize(ctx.dnn, d.x, d.w, d.conv, d.y, a, &b);
            },
            [&](cudnnConvolutionFwdAlgo_t a, std::size_t b) {
                return cudnnConvolutionForward(ctx.dnn, &one, d.x, in_x, d.w, in_w, d.conv, a, c.workspace, b, &zero,
                                               d.y, out);
            },
            "cudnnConvolutionForward");
    } else if (pass == conv_pass::backward_data) {
        run_conv(
            ctx, c, bwd_data_algo(variant), CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
            [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t& b) {
                return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.dnn, d.w, d.y, d.conv, d.x, a, &b);
            },
            [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t b) {
                return cudnnConvolutionBackwardData(ctx.dnn, &one, d.w, in_w, d.y, in_dy, d.conv, a, c.workspace, b,
                                                    &zero, d.x, out);
            },
            "cudnnConvolutionBackwardData");
    } else {
        run_conv(
            ctx, c, bwd_filter_algo(variant), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
            [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t& b) {
                return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.dnn, d.x, d.y, d.conv, d.w, a, &b);
            },
            [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t b) {
                return cudnnConvolutionBackwardFilter(ctx.dnn, &one, d.x, in_x, d.y, in_dy, d.conv, a, c.workspace, b,
                                                      &zero, d.w, out);
            },
            "cudnnConvolutionBackwardFilter");
    }
}

void run(context& ctx, const nn::conv2d& l, const kernel_call& c) {
    using nn::slot;
    const nn::op_pass p = c.pass();
    if (p != nn::op_pass::fwd && p != nn::op_pass::bwd_data && p != nn::op_pass::bwd_filter)
        fail(c, "the CUDA backend has no kernel for this op");
    const conv_pass pass = pass_of(p);
    conv_setup d;
    auto e = [](std::uint64_t v) { return static_cast<i64>(v); };
    describe(ctx, d, c.node_inputs[0].shape, c.node_output->shape, e(l.kernel_h), e(l.kernel_w), e(l.pad_h),
             e(l.pad_w), e(l.stride_h), e(l.stride_w), e(l.dilation_h), e(l.dilation_w), e(l.groups));
    const float one = 1.0f, zero = 0.0f;
    if (pass == conv_pass::forward) {
        const auto y = need(c, slot::output(), "the output");
        conv_pass_run(ctx, c, d, pass, c.variant, fp(need(c, slot::input(0), "the input")),
                      fp(need(c, slot::param(0), "the filter")), nullptr, fp(y));
        if (l.bias)
            MEMPLAN_CUDA_CHECK(cudnnAddTensor(ctx.dnn, &one, d.bias, fp(need(c, slot::param(1), "the bias")), &one,
                                              d.y, fp(y)));
    } else if (pass == conv_pass::backward_data) {
        conv_pass_run(ctx, c, d, pass, c.variant, nullptr, fp(need(c, slot::param(0), "the filter")),
                      fp(need(c, slot::grad_output(), "the output gradient")),
                      fp(need(c, slot::grad_input(0), "the input gradient")));
    } else {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        conv_pass_run(ctx, c, d, pass, c.variant, fp(need(c, slot::input(0), "the input")), nullptr, fp(dy),
                      fp(need(c, slot::grad_param(0), "the filter gradient")));
        if (l.bias)
            MEMPLAN_CUDA_CHECK(cudnnConvolutionBackwardBias(ctx.dnn, &one, d.y, fp(dy), &zero, d.bias,
                                                            fp(need(c, slot::grad_param(1), "the bias gradient"))));
    }
}

/// The transposed convolution is the convolution from its output side to its
/// input side run the other way: forward = that convolution's backward-data,
/// backward-data = its forward, filter (C_in, C_out, k, k) as cuDNN's (K, C, r, s).
void run(context& ctx, const nn::conv_transpose2d& l, const kernel_call& c) {
    using nn::slot;
    const nn::op_pass p = c.pass();
    if (p != nn::op_pass::fwd && p != nn::op_pass::bwd_data && p != nn::op_pass::bwd_filter)
        fail(c, "the CUDA backend has no kernel for this op");
    conv_setup d;
    const auto k = static_cast<i64>(l.kernel), s = static_cast<i64>(l.stride), pad = static_cast<i64>(l.padding);
    // The equivalent convolution: its x is our output side, its y our input side.
    describe(ctx, d, c.node_output->shape, c.node_inputs[0].shape, k, k, pad, pad, s, s, 1, 1, 1);
    tensor_desc out_bias;
    set4d(out_bias, 1, static_cast<i64>(l.out_channels), 1, 1);
    const float one = 1.0f, zero = 0.0f;
    if (p == nn::op_pass::fwd) {
        const auto y = need(c, slot::output(), "the output");
        conv_pass_run(ctx, c, d, conv_pass::backward_data, nn::impl_kind::none, nullptr, fp(need(c, slot::param(0), "the filter")),
                      fp(need(c, slot::input(0), "the input")), fp(y));
        if (l.bias)
            MEMPLAN_CUDA_CHECK(cudnnAddTensor(ctx.dnn, &one, out_bias, fp(need(c, slot::param(1), "the bias")), &one,
                                              d.x, fp(y)));
    } else if (p == nn::op_pass::bwd_data) {
        conv_pass_run(ctx, c, d, conv_pass::forward, nn::impl_kind::none, fp(need(c, slot::grad_output(), "the output gradient")),
                      fp(need(c, slot::param(0), "the filter")), nullptr,
                      fp(need(c, slot::grad_input(0), "the input gradient")));
    } else {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        conv_pass_run(ctx, c, d, conv_pass::backward_filter, nn::impl_kind::none, fp(dy), nullptr, fp(need(c, slot::input(0), "the input")),
                      fp(need(c, slot::grad_param(0), "the filter gradient")));
        if (l.bias)
            MEMPLAN_CUDA_CHECK(cudnnConvolutionBackwardBias(ctx.dnn, &one, d.x, fp(dy), &zero, out_bias,
                                                            fp(need(c, slot::grad_param(1), "the bias gradient"))));
    }
}

// ----- norms -------------------------------------------------------------------

/// Batch-norm: cuDNN (spatial mode) for the forward that does not write over
/// its input and for the backward from the input; own kernels for the
/// in-place forward (y over x, whose behaviour cuDNN does not document), the
/// backward from the output (MONeT; cuDNN has none) and a backward without
/// an input gradient. Both save (mean, inverse std) as the CPU backend does.
void run(context& x, const nn::batch_norm& l, const kernel_call& c) {
    using nn::slot;
    const auto& shape = c.node_output->shape;
    const i64 N = static_cast<i64>(shape[0]), C = static_cast<i64>(shape[1]), S = inner_size(shape, 2);
    const float* G = fp(need(c, slot::param(0), "gamma"));
    float* stats = fp(need(c, slot::internal(0), "the saved statistics"));
    const bool cudnn_eps = l.eps >= CUDNN_BN_MIN_EPSILON;
    const float one = 1.0f, zero = 0.0f;
    tensor_desc data, param;
    set4d(data, N, C, S, 1);
    set4d(param, 1, C, 1, 1);
    if (forward_or_backward(c)) {
        float* rm = c.recompute ? nullptr : fp(need(c, slot::state(0), "the running mean"));
        float* rv = c.recompute ? nullptr : fp(need(c, slot::state(1), "the running variance"));
        const float* in = fp(need(c, slot::input(0), "the input"));
        float* y = fp(need(c, slot::output(), "the output"));
        const float* B = fp(need(c, slot::param(1), "beta"));
        if (in != y && cudnn_eps)
            MEMPLAN_CUDA_CHECK(cudnnBatchNormalizationForwardTraining(x.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, data,
                                                                      in, data, y, param, G, B, 0.1, rm, rv, l.eps,
                                                                      stats, stats + C));
        else
            kernels::batch_norm_forward(x.stream, in, y, G, B, stats, rm, rv, N, C, S, l.eps);
    } else {
        const bool from_output = reads_output(c);
        const float* src = from_output ? fp(need(c, slot::output(), "the output")) : fp(need(c, slot::input(0), "the input"));
        const float* B = from_output ? fp(need(c, slot::param(1), "beta")) : nullptr;
        const auto dx = c.slot(slot::grad_input(0));
        const float* dy = fp(need(c, slot::grad_output(), "the output gradient"));
        float* dg = fp(need(c, slot::grad_param(0), "the gamma gradient"));
        float* db = fp(need(c, slot::grad_param(1), "the beta gradient"));
        if (!from_output && dx && fp(dx) != dy && cudnn_eps)
            MEMPLAN_CUDA_CHECK(cudnnBatchNormalizationBackward(x.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                                               data, src, data, dy, data, fp(dx), param, G, dg, db,
                                                               l.eps, stats, stats + C));
        else
            kernels::batch_norm_backward(x.stream, dy, src, from_output, G, B, stats, dx ? fp(dx) : nullptr, dg, db, N,
                                         C, S);
    }
    launched(c);
}

void run(context& x, const nn::layer_norm& l, const kernel_call& c) {
    using nn::slot;
    const auto F = static_cast<i64>(l.features);
    const float* G = fp(need(c, slot::param(0), "gamma"));
    float* stats = fp(need(c, slot::internal(0), "the saved statistics"));
    const auto in = need(c, slot::input(0), "the input");
    const i64 R = count(in) / F;
    if (forward_or_backward(c)) {
        kernels::layer_norm_forward(x.stream, fp(in), fp(need(c, slot::output(), "the output")), G,
                                    fp(need(c, slot::param(1), "beta")), stats, R, F, l.eps);
    } else {
        const auto dx = c.slot(slot::grad_input(0));
        kernels::layer_norm_backward(x.stream, fp(in), fp(need(c, slot::grad_output(), "the output gradient")), G,
                                     stats, dx ? fp(dx) : nullptr, fp(need(c, slot::grad_param(0), "the gamma gradient")),
                                     fp(need(c, slot::grad_param(1), "the beta gradient")), R, F);
    }
    launched(c);
}

// ----- activations -----------------------------------------------------------------

void run(context& x, const nn::relu& l, const kernel_call& c) {
    using nn::slot;
    const float cap = static_cast<float>(l.cap);
    if (forward_or_backward(c)) {
        const auto in = need(c, slot::input(0), "the input");
        const auto m = c.slot(slot::internal(0));
        kernels::relu_forward(x.stream, fp(in), fp(need(c, slot::output(), "the output")),
                              m ? m.as<std::uint8_t>() : nullptr, count(in), cap);
    } else {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        float* dx = fp(need(c, slot::grad_input(0), "the input gradient"));
        if (reads_mask(c)) {
            kernels::relu_backward_mask(x.stream, fp(dy), need(c, slot::internal(0), "the mask").as<const std::uint8_t>(),
                                        dx, count(dy));
        } else {
            const auto s = c.slot(slot::output()) ? c.slot(slot::output()) : need(c, slot::input(0), "the input");
            kernels::relu_backward_value(x.stream, fp(dy), fp(s), dx, count(dy), cap);
        }
    }
    launched(c);
}

void run(context& x, const nn::gelu&, const kernel_call& c) {
    using nn::slot;
    const auto in = need(c, slot::input(0), "the input");
    if (forward_or_backward(c))
        kernels::gelu_forward(x.stream, fp(in), fp(need(c, slot::output(), "the output")), count(in));
    else
        kernels::gelu_backward(x.stream, fp(in), fp(need(c, slot::grad_output(), "the output gradient")),
                               fp(need(c, slot::grad_input(0), "the input gradient")), count(in));
    launched(c);
}

// ----- pooling -------------------------------------------------------------------

kernels::pool_geometry pool_shape(const kernel_call& c, i64 k, i64 s, i64 p) {
    const auto& xs = c.node_inputs[0].shape;
    const auto& ys = c.node_output->shape;
    auto e = [](std::uint64_t v) { return static_cast<i64>(v); };
    return {e(xs[0]) * e(xs[1]), e(xs[2]), e(xs[3]), ys.rank() == 4 ? e(ys[2]) : 1, ys.rank() == 4 ? e(ys[3]) : 1,
            k, s, p};
}

/// (x or dx, y or dy) of a pool pass.
std::pair<float*, float*> pool_refs(const kernel_call& c, bool& forward) {
    using nn::slot;
    forward = forward_or_backward(c);
    return forward ? std::pair{fp(need(c, slot::input(0), "the input")), fp(need(c, slot::output(), "the output"))}
                   : std::pair{fp(need(c, slot::grad_input(0), "the input gradient")),
                               fp(need(c, slot::grad_output(), "the output gradient"))};
}

void run(context& x, const nn::max_pool2d& l, const kernel_call& c) {
    bool fwd;
    auto [a, b] = pool_refs(c, fwd);
    const auto q = pool_shape(c, static_cast<i64>(l.kernel), static_cast<i64>(l.stride), static_cast<i64>(l.padding));
    auto* arg = need(c, nn::slot::internal(0), "the arg-max").as<std::uint8_t>();
    if (fwd)
        kernels::max_pool_forward(x.stream, a, b, arg, q);
    else
        kernels::max_pool_backward(x.stream, b, arg, a, q);
    launched(c);
    if (!fwd) check_indices(x, c, "arg-max byte", q.k * q.k);
}

void average(context& x, const kernel_call& c, i64 k, i64 s, i64 p, bool adaptive) {
    bool fwd;
    auto [a, b] = pool_refs(c, fwd);
    const auto q = pool_shape(c, k, s, p);
    if (fwd)
        kernels::avg_pool_forward(x.stream, a, b, q, adaptive);
    else
        kernels::avg_pool_backward(x.stream, b, a, q, adaptive);
    launched(c);
}
void run(context& x, const nn::avg_pool2d& l, const kernel_call& c) {
    average(x, c, static_cast<i64>(l.kernel), static_cast<i64>(l.stride), static_cast<i64>(l.padding), false);
}
void run(context& x, const nn::adaptive_avg_pool2d&, const kernel_call& c) { average(x, c, 0, 1, 0, true); }
void run(context& x, const nn::global_avg_pool&, const kernel_call& c) {
    // Global pooling is adaptive pooling to 1x1 (pool_shape reads a 2-D output as 1x1).
    average(x, c, 0, 1, 0, true);
}

// ----- structural layers -------------------------------------------------------

void run(context& x, const nn::add&, const kernel_call& c) {
    using nn::slot;
    if (c.pass() != nn::op_pass::fwd) fail(c, "the CUDA backend has no kernel for this op");
    const auto a = need(c, slot::input(0), "input 0");
    kernels::add(x.stream, fp(a), fp(need(c, slot::input(1), "input 1")), fp(need(c, slot::output(), "the output")),
                 count(a));
    launched(c);
}

void run(context& x, const nn::concat& l, const kernel_call& c) {
    using nn::slot;
    const bool forward = forward_or_backward(c);
    const auto whole = forward ? need(c, slot::output(), "the output") : need(c, slot::grad_output(), "the output gradient");
    const auto& shape = c.node_output->shape;
    i64 outer = 1;
    for (std::size_t a = 0; a < l.axis; ++a) outer *= static_cast<i64>(shape[a]);
    const i64 total = static_cast<i64>(shape[l.axis]) * inner_size(shape, l.axis + 1);
    float* Z = fp(whole);
    i64 at = 0;
    for (std::uint32_t i = 0; i < c.node->inputs.size(); ++i) {
        const auto part = forward ? need(c, slot::input(i), "an input") : c.slot(slot::grad_input(i));
        const i64 width = static_cast<i64>(c.node_inputs[i].numel()) / outer;
        if (part) {
            const auto row = static_cast<std::size_t>(width) * sizeof(float);
            const auto pitch = static_cast<std::size_t>(total) * sizeof(float);
            if (forward)
                MEMPLAN_CUDA_CHECK(cudaMemcpy2DAsync(Z + at, pitch, fp(part), row, row, static_cast<std::size_t>(outer),
                                                     cudaMemcpyDeviceToDevice, x.stream));
            else
                MEMPLAN_CUDA_CHECK(cudaMemcpy2DAsync(fp(part), row, Z + at, pitch, row, static_cast<std::size_t>(outer),
                                                     cudaMemcpyDeviceToDevice, x.stream));
        }
        at += width;
    }
}

void run(context& x, const nn::flatten&, const kernel_call& c) {
    using nn::slot;
    const auto in = need(c, slot::input(0), "the input");
    const auto y = need(c, slot::output(), "the output");
    if (in.data != y.data)
        MEMPLAN_CUDA_CHECK(cudaMemcpyAsync(y.data, in.data, static_cast<std::size_t>(count(in)) * sizeof(float),
                                           cudaMemcpyDeviceToDevice, x.stream));
}

void run(context& x, const nn::dropout& l, const kernel_call& c) {
    using nn::slot;
    auto* mask = need(c, slot::internal(0), "the keep-mask").as<std::uint8_t>();
    const float scale = 1.0f / (1.0f - static_cast<float>(l.p));
    if (forward_or_backward(c)) {
        const auto in = need(c, slot::input(0), "the input");
        // The CPU backend's seed: the same masks on both devices.
        const std::uint64_t seed = std::hash<std::string>{}(c.node->name) ^ (c.iteration * 0x9E3779B97F4A7C15ull);
        const auto threshold = static_cast<std::uint64_t>(l.p * 18446744073709551616.0);
        kernels::dropout_forward(x.stream, fp(in), fp(need(c, slot::output(), "the output")), mask, count(in), seed,
                                 threshold, scale);
    } else {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        kernels::dropout_backward(x.stream, fp(dy), mask, fp(need(c, slot::grad_input(0), "the input gradient")),
                                  count(dy), scale);
    }
    launched(c);
}

// ----- embeddings -----------------------------------------------------------------

void run(context& x, const nn::embedding& l, const kernel_call& c) {
    using nn::slot;
    const auto D = static_cast<i64>(l.dim), V = static_cast<i64>(l.num_embeddings);
    const auto ids = need(c, slot::input(0), "the token ids");
    switch (c.pass()) {
    case nn::op_pass::fwd:
        kernels::embedding_forward(x.stream, ids.as<const std::int64_t>(), fp(need(c, slot::param(0), "the table")),
                                   fp(need(c, slot::output(), "the output")), count(ids), D, V);
        break;
    case nn::op_pass::bwd_weight:
        kernels::embedding_backward(x.stream, ids.as<const std::int64_t>(),
                                    fp(need(c, slot::grad_output(), "the output gradient")),
                                    fp(need(c, slot::grad_param(0), "the table gradient")), count(ids), D, V);
        break;
    default: fail(c, "the CUDA backend has no kernel for this op");
    }
    launched(c);
    check_indices(x, c, "token id", V);
}

void run(context& x, const nn::position_embedding& l, const kernel_call& c) {
    using nn::slot;
    const auto D = static_cast<i64>(l.dim), P = static_cast<i64>(l.max_positions);
    const i64 N = static_cast<i64>(c.node_output->shape[0]), S = static_cast<i64>(c.node_output->shape[1]);
    switch (c.pass()) {
    case nn::op_pass::fwd:
        kernels::position_forward(x.stream, fp(need(c, slot::input(0), "the input")),
                                  fp(need(c, slot::param(0), "the table")), fp(need(c, slot::output(), "the output")),
                                  N, S * D);
        break;
    case nn::op_pass::bwd_weight:
        kernels::position_backward(x.stream, fp(need(c, slot::grad_output(), "the output gradient")),
                                   fp(need(c, slot::grad_param(0), "the table gradient")), N, S * D, P * D);
        break;
    default: fail(c, "the CUDA backend has no kernel for this op");
    }
    launched(c);
}

// ----- attention (cuBLAS strided-batched GEMMs over heads + own softmax) -----------

void run(context& x, const nn::attention& l, const kernel_call& c) {
    using nn::slot;
    if (l.dropout > 0) fail(c, "attention dropout is not supported by the CUDA backend");
    const bool packed = c.node_inputs.size() == 1;
    const auto& qs = c.node_inputs[0].shape;
    const auto N = static_cast<i64>(qs[0]), Sq = static_cast<i64>(qs[1]);
    const i64 D = static_cast<i64>(qs[2]) / (packed ? 3 : 1);
    const i64 Sk = packed ? Sq : static_cast<i64>(c.node_inputs[1].shape[1]);
    const auto H = static_cast<i64>(l.heads);
    const i64 dh = D / H, ld = packed ? 3 * D : D, plane = Sq * Sk;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const slot sq = slot::input(0), sk = packed ? slot::input(0) : slot::input(1), sv = packed ? slot::input(0) : slot::input(2);
    const i64 off_k = packed ? D : 0, off_v = packed ? 2 * D : 0;
    const slot s_scores = slot::internal(0), s_probs = slot::internal(1), s_dprobs = slot::internal(2),
               s_dscores = slot::internal(3);
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
        const auto dv = packed ? c.slot(slot::internal(4)) : c.slot(slot::grad_input(2));
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
            const float* DV = fp(need(c, slot::internal(4), "the staged V gradient"));
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

// ----- loss ------------------------------------------------------------------------

void run(context& x, const nn::softmax_cross_entropy& l, const kernel_call& c) {
    using nn::slot;
    const auto lp = need(c, slot::internal(0), "the log-probabilities");
    const auto& s = lp.shape();
    const std::size_t axis = l.class_axis_last ? s.rank() - 1 : 1;
    i64 outer = 1;
    for (std::size_t a = 0; a < axis; ++a) outer *= static_cast<i64>(s[a]);
    const auto C = static_cast<i64>(s[axis]);
    const i64 inner = inner_size(s, axis + 1);
    const auto* labels = need(c, slot::input(1), "the labels").as<const std::int64_t>();
    const bool forward = forward_or_backward(c);
    if (forward)
        kernels::softmax_xent_forward(x.stream, fp(need(c, slot::input(0), "the logits")), fp(lp),
                                      fp(need(c, slot::output(), "the loss")), labels, outer, C, inner);
    else
        kernels::softmax_xent_backward(x.stream, fp(lp), labels, fp(need(c, slot::grad_input(0), "the logits gradient")),
                                       outer, C, inner);
    launched(c);
    if (forward) check_indices(x, c, "label", C);
}

// ----- training-graph ops ----------------------------------------------------------

void run_grad_acc(context& x, const kernel_call& c) {
    if (c.inputs.size() != 2 || c.outputs.size() != 1 || !c.inputs[0] || !c.inputs[1] || !c.outputs[0])
        fail(c, "a gradient accumulation takes two bound inputs and one output");
    kernels::add(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), fp(c.outputs[0]), count(c.outputs[0]));
    launched(c);
}

void run_update(context& x, const kernel_call& c) {
    if (c.inputs.size() < 2 || !c.opt) fail(c, "an update takes the parameter, its gradient and its state");
    const i64 n = count(c.inputs[0]);
    const auto& o = *c.opt;
    switch (o.kind) {
    case optimizer::sgd: kernels::sgd(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), n, o.lr); break;
    case optimizer::sgd_momentum:
        if (c.inputs.size() < 3) fail(c, "SGD with momentum needs a momentum buffer");
        kernels::sgd_momentum(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), fp(c.inputs[2]), n, o.lr, o.momentum);
        break;
    case optimizer::adam: {
        if (c.inputs.size() < 4) fail(c, "Adam needs its two moment buffers");
        const double t = double(c.iteration);
        kernels::adam(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), fp(c.inputs[2]), fp(c.inputs[3]), n, o.lr, o.beta1,
                      o.beta2, o.eps, static_cast<float>(1.0 - std::pow(double(o.beta1), t)),
                      static_cast<float>(1.0 - std::pow(double(o.beta2), t)));
        break;
    }
    }
    launched(c);
}

} // namespace detail

// ----- backend -------------------------------------------------------------------------

detail::context& backend::ctx() {
    if (!ctx_) ctx_.reset(new detail::context(opt_));
    return *ctx_;
}

std::byte* backend::allocate(std::uint64_t bytes) {
    auto& x = ctx();
    void* p = nullptr;
    const auto n = static_cast<std::size_t>(bytes ? bytes : 1);
    const cudaError_t e = x.opt.alloc == allocation::stream_pool ? cudaMallocAsync(&p, n, x.stream) : cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw error("cuda", "cannot allocate " + std::to_string(bytes) + " bytes of device memory: " +
                                cudaGetErrorString(e));
    }
    x.stats.allocated_bytes += bytes;
    x.stats.peak_bytes = std::max(x.stats.peak_bytes, x.stats.allocated_bytes);
    ++x.stats.allocations;
    return static_cast<std::byte*>(p);
}

void backend::deallocate(std::byte* p, std::uint64_t bytes) noexcept {
    if (!ctx_ || !p) return;
    if (ctx_->opt.alloc == allocation::stream_pool)
        cudaFreeAsync(p, ctx_->stream);
    else
        cudaFree(p);
    ctx_->stats.allocated_bytes -= bytes;
}

void backend::upload(std::byte* device, const std::byte* host, std::uint64_t bytes) {
    auto& x = ctx();
    // Synchronous on purpose: the host buffer may go away right after.
    MEMPLAN_CUDA_CHECK(cudaMemcpyAsync(device, host, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice, x.stream));
    MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(x.stream));
}

void backend::download(std::byte* host, const std::byte* device, std::uint64_t bytes) {
    auto& x = ctx();
    MEMPLAN_CUDA_CHECK(cudaMemcpyAsync(host, device, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost, x.stream));
    MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(x.stream));
}

void backend::poison(std::byte* p, std::uint64_t bytes) {
    MEMPLAN_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, static_cast<std::size_t>(bytes), ctx().stream));
}

void backend::synchronize() { MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(ctx().stream)); }

void backend::run(const kernel_call& c) {
    auto& x = ctx();
    switch (c.kind) {
    case op_origin_kind::grad_acc: detail::run_grad_acc(x, c); return;
    case op_origin_kind::update: detail::run_update(x, c); return;
    case op_origin_kind::layer: break;
    }
    if (!c.node || !c.spec) throw error("cuda", "a layer op reached the CUDA backend without its layer");
    std::visit([&](const auto& l) { detail::run(x, l, c); }, c.node->layer);
}

backend_stats backend::stats() const noexcept { return ctx_ ? ctx_->stats : backend_stats{}; }

} // namespace memplan::engine::cuda
