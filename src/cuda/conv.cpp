// The CUDA kernels of conv2d and conv_transpose2d on cuDNN: the algorithm of
// the step's variant (engine/cuda/algorithms.hpp) inside the plan's workspace,
// with the zero-workspace fallback when cuDNN refuses it or (by policy) needs
// more than the plan gives. conv_choice.hpp holds the descriptors and the
// choice, which the profiler shares.
#include "common.hpp"
#include "conv_choice.hpp"

#include <memplan/engine/cuda/algorithms.hpp>
#include <cstddef>
#include <string>

namespace memplan::engine::cuda::detail {

namespace {

/// Chooses the algorithm (conv_choice.hpp's choose, with the backend's
/// statistics and shortfall policy) and runs `call(algo, bytes)`. cuDNN may
/// refuse an algorithm at run time although its workspace query succeeded
/// (a NOT_SUPPORTED-category status): then the fallback runs, counted as
/// unsupported, when its workspace fits the plan's. `query_name` and
/// `call_name` name the two cuDNN functions in messages.
template <class Algo, class Query, class Call>
void run_conv(context& ctx, const kernel_call& c, Algo wanted, Query query, Call call, const char* query_name,
              const char* call_name) {
    const Algo fallback = fallback_algo(wanted);
    std::size_t bytes = 0;
    const Algo algo = choose(ctx.stats, ctx.opt.shortfall, c, wanted, fallback, query, bytes, query_name);
    cudnnStatus_t st = call(algo, bytes);
    if (classify(st) == cudnn_outcome::not_supported && algo != fallback) {
        ++ctx.stats.conv_fallbacks;
        query_fallback(c, fallback, query, bytes, query_name);
        if (bytes > c.workspace_bytes)
            fail(c, std::string(call_name) + " refused the variant's algorithm and its zero-workspace fallback needs " +
                        std::to_string(bytes) + " bytes, the plan gives " + std::to_string(c.workspace_bytes));
        st = call(fallback, bytes);
    }
    if (st != CUDNN_STATUS_SUCCESS) fail(c, std::string(call_name) + " failed: " + cudnnGetErrorString(st));
}

/// x -> y forward, dy -> dx backward-data, (x, dy) -> dw backward-filter of one
/// convolution described by `d`; `x`, `y` are the convolution's own sides.
/// Overwrites `out` (beta 0), as the CPU backend does.
void conv_pass_run(context& ctx, const kernel_call& c, conv_setup& d, conv_pass pass, nn::impl_kind variant,
                   const float* in_x, const float* in_w, const float* in_dy, float* out) {
    const float one = 1.0f, zero = 0.0f;
    if (pass == conv_pass::forward) {
        run_conv(
            ctx, c, fwd_algo(variant),
            [&](cudnnConvolutionFwdAlgo_t a, std::size_t& b) {
                return cudnnGetConvolutionForwardWorkspaceSize(ctx.dnn, d.x, d.w, d.conv, d.y, a, &b);
            },
            [&](cudnnConvolutionFwdAlgo_t a, std::size_t b) {
                return cudnnConvolutionForward(ctx.dnn, &one, d.x, in_x, d.w, in_w, d.conv, a, c.workspace, b, &zero,
                                               d.y, out);
            },
            "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward");
    } else if (pass == conv_pass::backward_data) {
        run_conv(
            ctx, c, bwd_data_algo(variant),
            [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t& b) {
                return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.dnn, d.w, d.y, d.conv, d.x, a, &b);
            },
            [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t b) {
                return cudnnConvolutionBackwardData(ctx.dnn, &one, d.w, in_w, d.y, in_dy, d.conv, a, c.workspace, b,
                                                    &zero, d.x, out);
            },
            "cudnnGetConvolutionBackwardDataWorkspaceSize", "cudnnConvolutionBackwardData");
    } else {
        run_conv(
            ctx, c, bwd_filter_algo(variant),
            [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t& b) {
                return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.dnn, d.x, d.y, d.conv, d.w, a, &b);
            },
            [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t b) {
                return cudnnConvolutionBackwardFilter(ctx.dnn, &one, d.x, in_x, d.y, in_dy, d.conv, a, c.workspace, b,
                                                      &zero, d.w, out);
            },
            "cudnnGetConvolutionBackwardFilterWorkspaceSize", "cudnnConvolutionBackwardFilter");
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
    describe(d, conv_shape(l, c), ctx.opt.allow_tf32);
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
    describe(d, {e(out[0]), e(out[1]), e(out[2]), e(out[3]), e(in[1]), k, k, e(in[2]), e(in[3]), s, s, pad, pad, 1, 1, 1},
             ctx.opt.allow_tf32);
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
