// How a convolution pass becomes one cuDNN call, shared by the backend
// (conv.cpp) and the profiler (profile.cpp) so that both ask cuDNN the same
// question: the same descriptors and math type, the same algorithm per
// variant (engine/cuda/algorithms.hpp), and one reading of cuDNN 9's
// statuses: a NOT_SUPPORTED-category status means "this algorithm cannot run
// this shape" (fall back, counted), any other failure is an error naming the
// op. `choose` is a template over the workspace query, so the host tests
// (tests/cuda/host_test.cpp) check it with stubs, without a GPU. Private to src/cuda.
#pragma once

#include "check.hpp"

#include <memplan/engine/cuda/algorithms.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/program.hpp>
#include <memplan/engine/shapes.hpp>
#include <memplan/nn/conv.hpp>
#include <memplan/nn/op_spec.hpp>
#include <memplan/nn/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace memplan::engine::cuda::detail {

// ----- statuses ------------------------------------------------------------------

enum class cudnn_outcome : std::uint8_t {
    success,
    not_supported, ///< the algorithm cannot run this shape, layout, ...: fall back
    failure        ///< anything else (bad parameter, internal error, ...): an error
};

/// What a cuDNN status means for an algorithm choice.
constexpr cudnn_outcome classify(cudnnStatus_t s) noexcept {
    if (s == CUDNN_STATUS_SUCCESS) return cudnn_outcome::success;
#ifdef CUDNN_STATUS_CATEGORY // cuDNN 9: NOT_SUPPORTED_SHAPE, _LAYOUT, ... share the category
    return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED ? cudnn_outcome::not_supported
                                                                   : cudnn_outcome::failure;
#else
    return s == CUDNN_STATUS_NOT_SUPPORTED ? cudnn_outcome::not_supported : cudnn_outcome::failure;
#endif
}

// ----- descriptors and algorithms ------------------------------------------------

struct conv_setup {
    tensor_desc x, y, bias; // x (n, c, h, w), y (n, k, ho, wo), bias (1, k, 1, 1)
    filter_desc w;          // (k, c / groups, r, s)
    conv_desc conv;
};

/// The math type of every convolution: TF32 tensor cores only when allowed
/// (otherwise fp32 FMA, as the CPU computes). The profiler must time with the
/// backend's choice: the algorithms' speed and workspace depend on it.
constexpr cudnnMathType_t conv_math(bool allow_tf32) noexcept {
    return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/// x (n, c, h, w) -> y (n, k, ho, wo) with filter (k, c / groups, r, s).
inline void describe(conv_setup& d, const conv_geometry& q, bool allow_tf32) {
    auto i = [](std::int64_t v) { return static_cast<int>(v); };
    set4d(d.x, q.n, q.c, q.h, q.w);
    set4d(d.y, q.n, q.k, q.ho, q.wo);
    set4d(d.bias, 1, q.k, 1, 1);
    MEMPLAN_CUDA_CHECK(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(q.k), i(q.cg()), i(q.r),
                                                  i(q.s)));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolution2dDescriptor(d.conv, i(q.ph), i(q.pw), i(q.sh), i(q.sw), i(q.dh), i(q.dw),
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolutionGroupCount(d.conv, i(q.groups)));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolutionMathType(d.conv, conv_math(allow_tf32)));
}

/// The geometry of conv2d `l` from input shape `x` to output shape `y`
/// (the profiler's; the backend reads it from the kernel_call, checked).
inline conv_geometry geometry_of(const nn::conv2d& l, const nn::shape& x, const nn::shape& y) {
    auto e = [](std::uint64_t v) { return static_cast<extent>(v); };
    return {e(x[0]),       e(x[1]),       e(x[2]),     e(x[3]),     e(y[1]),       e(l.kernel_h),
            e(l.kernel_w), e(y[2]),       e(y[3]),     e(l.stride_h), e(l.stride_w), e(l.pad_h),
            e(l.pad_w),    e(l.dilation_h), e(l.dilation_w), e(l.groups)};
}

// engine/cuda/algorithms.hpp's table as cuDNN enums (implicit GEMM for none).
constexpr cudnnConvolutionFwdAlgo_t fwd_algo(nn::impl_kind variant) noexcept {
    switch (variant) {
    case nn::impl_kind::gemm_im2col: return CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
    case nn::impl_kind::winograd: return CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    default: return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    }
}
constexpr cudnnConvolutionBwdDataAlgo_t bwd_data_algo(nn::impl_kind variant) noexcept {
    switch (variant) {
    case nn::impl_kind::gemm_im2col: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    case nn::impl_kind::winograd: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    default: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    }
}
constexpr cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo(nn::impl_kind variant) noexcept {
    switch (variant) {
    case nn::impl_kind::gemm_im2col: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    case nn::impl_kind::winograd: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    default: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
    }
}

/// The zero-workspace algorithm of each pass: what a refused variant falls back to.
constexpr cudnnConvolutionFwdAlgo_t fallback_algo(cudnnConvolutionFwdAlgo_t) noexcept {
    return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
}
constexpr cudnnConvolutionBwdDataAlgo_t fallback_algo(cudnnConvolutionBwdDataAlgo_t) noexcept {
    return CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
}
constexpr cudnnConvolutionBwdFilterAlgo_t fallback_algo(cudnnConvolutionBwdFilterAlgo_t) noexcept {
    return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
}

// ----- the choice ----------------------------------------------------------------

/// The variant's name in messages ("implicit_gemm" for none: it runs that algorithm).
inline std::string variant_name(nn::impl_kind v) {
    return v == nn::impl_kind::none ? std::string("implicit_gemm") : std::string(nn::to_string(v));
}

[[noreturn]] inline void refused(const kernel_call& c, const char* what, const std::string& why, cudnnStatus_t st) {
    fail(c, std::string(what) + " " + why + ": " + cudnnGetErrorString(st));
}

/// Asks `query` for the workspace of the zero-workspace `fallback`; throws naming op `c` unless it succeeds.
template <class Algo, class Query>
void query_fallback(const kernel_call& c, Algo fallback, Query& query, std::size_t& bytes, const char* what) {
    const cudnnStatus_t st = query(fallback, bytes);
    switch (classify(st)) {
    case cudnn_outcome::success: return;
    case cudnn_outcome::not_supported:
        refused(c, what, "supports neither the variant's algorithm nor the zero-workspace one for this shape", st);
    case cudnn_outcome::failure: refused(c, what, "failed for the zero-workspace algorithm", st);
    }
}

/// The algorithm one convolution pass of op `c` runs, and its workspace in
/// `bytes`. `query(algo, bytes)` is the pass's cudnnGet*WorkspaceSize
/// (`what` names it). The variant's algorithm `wanted` when cuDNN supports
/// it for this shape; when the query says NOT_SUPPORTED (any status of that
/// category), the zero-workspace `fallback`, counted in
/// `stats.conv_fallbacks`. A workspace larger than the plan's
/// (`c.workspace_bytes`) is an error naming the op, the variant and both
/// sizes, or with workspace_shortfall::fallback the fallback, counted in
/// `stats.workspace_fallbacks`. Any other failed query is an error naming
/// the op and cuDNN's status (a bad parameter is a bug, not a shape cuDNN
/// does not cover); so is a shape neither algorithm supports.
template <class Algo, class Query>
Algo choose(backend_stats& stats, workspace_shortfall policy, const kernel_call& c, Algo wanted, Algo fallback,
            Query&& query, std::size_t& bytes, const char* what) {
    Algo algo = wanted;
    const cudnnStatus_t st = query(wanted, bytes);
    switch (classify(st)) {
    case cudnn_outcome::success: break;
    case cudnn_outcome::not_supported:
        if (wanted == fallback)
            refused(c, what, "does not support the zero-workspace algorithm for this shape", st);
        ++stats.conv_fallbacks;
        algo = fallback;
        query_fallback(c, fallback, query, bytes, what);
        break;
    case cudnn_outcome::failure:
        refused(c, what, "failed for the algorithm of variant '" + variant_name(c.variant) + "'", st);
    }
    if (bytes > c.workspace_bytes && policy == workspace_shortfall::fallback && algo != fallback) {
        ++stats.workspace_fallbacks;
        algo = fallback;
        query_fallback(c, fallback, query, bytes, what);
    }
    if (bytes > c.workspace_bytes)
        fail(c, "cuDNN's algorithm for variant '" + variant_name(c.variant) + "' needs a workspace of " +
                    std::to_string(bytes) + " bytes, the plan gives " + std::to_string(c.workspace_bytes));
    return algo;
}

} // namespace memplan::engine::cuda::detail
