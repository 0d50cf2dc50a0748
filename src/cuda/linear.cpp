// The CUDA kernels of the fully connected layer: one cuBLAS GEMM per pass,
// the bias added and summed by memplan's own kernels.
#include "common.hpp"

namespace memplan::engine::cuda::detail {

void run(context& x, const nn::linear& l, const kernel_call& c) {
    using nn::slot;
    const auto q = linear_shape(l, c);
    const i64 in = q.in, out = q.out, rows = q.rows;
    const auto w = c.slot(slot::param(0));
    if (!w && c.pass() != nn::op_pass::bwd_weight) need(c, slot::param(0), "the weight");
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const auto xi = need(c, slot::input(0), "the input");
        const auto y = need(c, slot::output(), "the output");
        gemm(x, false, true, rows, out, in, 1.0f, fp(xi), in, fp(w), in, 0.0f, fp(y), out);
        if (l.bias) kernels::add_bias_rows(x.stream, fp(y), fp(need(c, slot::param(1), "the bias")), rows, out);
        break;
    }
    case nn::op_pass::bwd_data: {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const auto dx = need(c, slot::grad_input(0), "the input gradient");
        gemm(x, false, false, rows, in, out, 1.0f, fp(dy), out, fp(w), in, 0.0f, fp(dx), in);
        break;
    }
    case nn::op_pass::bwd_weight: {
        const auto xi = need(c, slot::input(0), "the input");
        const auto dy = need(c, slot::grad_output(), "the output gradient");
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

} // namespace memplan::engine::cuda::detail
