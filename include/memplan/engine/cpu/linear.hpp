// CPU kernels of the fully connected layer: Y = X W^T + b over the last axis,
// its input gradient dX = dY W, and its weight gradient dW = dY^T X,
// db = column sums of dY. One Eigen GEMM each, over arena memory.
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/linear.hpp>

namespace memplan::engine::cpu {

/// Runs "<linear>.fwd", ".bwd_data" or ".bwd_weight".
inline void run(const nn::linear& l, const kernel_call& c) {
    using nn::slot;
    const auto q = linear_shape(l, c);
    const index in = q.in, out = q.out, rows = q.rows;
    const auto w = c.slot(slot::param(0)); // the weight gradient does not read it
    if (!w && c.pass() != nn::op_pass::bwd_weight) need(c, slot::param(0), "the weight");
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const auto x = need(c, slot::input(0), "the input");
        const auto y = need(c, slot::output(), "the output");
        matrix_map Y(fp(y), rows, out);
        Y.noalias() = const_matrix_map(fp(x), rows, in) * const_matrix_map(fp(w), out, in).transpose();
        if (l.bias) Y.rowwise() += const_vector_map(fp(need(c, slot::param(1), "the bias")), out).transpose();
        return;
    }
    case nn::op_pass::bwd_data: {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const auto dx = need(c, slot::grad_input(0), "the input gradient");
        matrix_map(fp(dx), rows, in).noalias() = const_matrix_map(fp(dy), rows, out) * const_matrix_map(fp(w), out, in);
        return;
    }
    case nn::op_pass::bwd_weight: {
        const auto x = need(c, slot::input(0), "the input");
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const const_matrix_map DY(fp(dy), rows, out);
        matrix_map(fp(need(c, slot::grad_param(0), "the weight gradient")), out, in).noalias() =
            DY.transpose() * const_matrix_map(fp(x), rows, in);
        if (l.bias)
            vector_map(fp(need(c, slot::grad_param(1), "the bias gradient")), out) = DY.colwise().sum().transpose();
        return;
    }
    default: fail(c, "the CPU backend has no kernel for this op");
    }
}

} // namespace memplan::engine::cpu
