// The CUDA kernels of batch-norm (cuDNN where it applies, own kernels for the
// in-place forward and the backward from the output) and layer-norm.
#include "common.hpp"

#include <string>

namespace memplan::engine::cuda::detail {

namespace {

/// The stream's fixed scratch for batch-norm's partial sums (kernels::stream_scratch).
kernels::reduction_scratch bn_scratch(context& x, const kernel_call& c) {
    kernels::reduction_scratch s;
    const cudaError_t e = kernels::stream_scratch(x.stream, s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fail(c, std::string("cannot allocate batch-norm's reduction scratch: ") + cudaGetErrorString(e));
    }
    return s;
}

} // namespace

/// Batch-norm: cuDNN (spatial mode) for the forward that does not write over
/// its input and for the backward from the input; own kernels for the
/// in-place forward (y over x, whose behaviour cuDNN does not document), the
/// backward from the output (MONeT; cuDNN has none) and a backward without
/// an input gradient. Both save (mean, inverse std) as the CPU backend does.
/// The own kernels split each channel over many blocks; their partial sums go
/// to a fixed 256 KiB scratch per stream (the ops have no planned workspace).
void run(context& x, const nn::batch_norm& l, const kernel_call& c) {
    using nn::slot;
    const auto q = batch_norm_shape(l, c);
    const i64 N = q.n, C = q.c, S = q.s;
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
            kernels::batch_norm_forward(x.stream, in, y, G, B, stats, rm, rv, N, C, S, l.eps, bn_scratch(x, c));
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
                                         C, S, bn_scratch(x, c));
    }
    launched(c);
}

void run(context& x, const nn::layer_norm& l, const kernel_call& c) {
    using nn::slot;
    const auto q = layer_norm_shape(l, c);
    const i64 F = q.features, R = q.rows;
    const float* G = fp(need(c, slot::param(0), "gamma"));
    float* stats = fp(need(c, slot::internal(0), "the saved statistics"));
    const auto in = need(c, slot::input(0), "the input");
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

} // namespace memplan::engine::cuda::detail
