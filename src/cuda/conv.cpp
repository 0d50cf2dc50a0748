// The CUDA kernels of conv2d and conv_transpose2d on cuDNN: the algorithm of
// the step's variant (engine/cuda/algorithms.hpp) inside the plan's workspace,
// with the zero-workspace fallback when cuDNN refuses it or (by policy) needs
// more than the plan gives.
#include "common.hpp"

#include <memplan/engine/cuda/algorithms.hpp>
#include <cstddef>
#include <string>

namespace memplan::engine::cuda::detail {

namespace {

struct conv_setup {
    tensor_desc x, y, bias;
    filter_desc w;
    conv_desc conv;
};

/// x (n, c, h, w) -> y (n, k, ho, wo) with filter (k, c / groups, r, s).
void describe(context& ctx, conv_setup& d, const conv_geometry& q) {
    auto i = [](i64 v) { return static_cast<int>(v); };
    set4d(d.x, q.n, q.c, q.h, q.w);
    set4d(d.y, q.n, q.k, q.ho, q.wo);
    set4d(d.bias, 1, q.k, 1, 1);
    MEMPLAN_CUDA_CHECK(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(q.k), i(q.cg()), i(q.r),
                                                  i(q.s)));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolution2dDescriptor(d.conv, i(q.ph), i(q.pw), i(q.sh), i(q.sw), i(q.dh), i(q.dw),
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolutionGroupCount(d.conv, i(q.groups)));
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

} // namespace

void run(context& ctx, const nn::conv2d& l, const kernel_call& c) {
    using nn::slot;
    const nn::op_pass p = c.pass();
    if (p != nn::op_pass::fwd && p != nn::op_pass::bwd_data && p != nn::op_pass::bwd_filter)
        fail(c, "the CUDA backend has no kernel for this op");
    const conv_pass pass = pass_of(p);
    conv_setup d;
    describe(ctx, d, conv_shape(l, c));
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
    // The equivalent convolution: its x is our output side, its y our input side.
    const auto& in = input_shape(c, 0, 4);
    const auto& out = output_shape(c);
    auto e = [](std::uint64_t v) { return static_cast<i64>(v); };
    const auto k = e(l.kernel), s = e(l.stride), pad = e(l.padding);
    describe(ctx, d, {e(out[0]), e(out[1]), e(out[2]), e(out[3]), e(in[1]), k, k, e(in[2]), e(in[3]), s, s, pad, pad, 1,
                      1, 1});
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

} // namespace memplan::engine::cuda::detail
