// CPU kernels of the token embedding (a gather of table rows by int64 id;
// its gradient a scatter-add) and the learned position embedding (adds row s
// of the table to position s; may run in place; its gradient sums over the
// batch).
#pragma once

#include <memplan/engine/cpu/common.hpp>
#include <memplan/nn/embedding.hpp>

#include <algorithm>
#include <cstring>

namespace memplan::engine::cpu {

/// Runs "<embedding>.fwd" or ".bwd_weight". Throws on an id outside the table.
inline void run(const nn::embedding& l, const kernel_call& c) {
    using nn::slot;
    const auto D = static_cast<index>(l.dim), V = static_cast<index>(l.num_embeddings);
    const auto ids = need(c, slot::input(0), "the token ids");
    const index n = count(ids);
    const auto* I = ids.as<const std::int64_t>();
    auto check = [&](index i) {
        if (I[i] < 0 || I[i] >= V)
            fail(c, "token id " + std::to_string(I[i]) + " at position " + std::to_string(i) + " is outside the table of " +
                        std::to_string(V));
    };
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const float* W = fp(need(c, slot::param(0), "the table"));
        float* Y = fp(need(c, slot::output(), "the output"));
        for (index i = 0; i < n; ++i) {
            check(i);
            std::memcpy(Y + i * D, W + I[i] * D, static_cast<std::size_t>(D) * sizeof(float));
        }
        return;
    }
    case nn::op_pass::bwd_weight: {
        const float* DY = fp(need(c, slot::grad_output(), "the output gradient"));
        float* DW = fp(need(c, slot::grad_param(0), "the table gradient"));
        std::fill(DW, DW + V * D, 0.0f);
        for (index i = 0; i < n; ++i) {
            check(i);
            vector_map(DW + I[i] * D, D) += const_vector_map(DY + i * D, D);
        }
        return;
    }
    default: fail(c, "the CPU backend has no kernel for this op");
    }
}

/// Runs "<position_embedding>.fwd" or ".bwd_weight".
inline void run(const nn::position_embedding& l, const kernel_call& c) {
    using nn::slot;
    const auto D = static_cast<index>(l.dim), P = static_cast<index>(l.max_positions);
    switch (c.pass()) {
    case nn::op_pass::fwd: {
        const auto x = need(c, slot::input(0), "the input");
        const index N = dim(x, 0), S = dim(x, 1);
        const float* W = fp(need(c, slot::param(0), "the table"));
        const float* X = fp(x);
        float* Y = fp(need(c, slot::output(), "the output"));
        for (index n = 0; n < N; ++n)
            vector_map(Y + n * S * D, S * D) = const_vector_map(X + n * S * D, S * D) + const_vector_map(W, S * D);
        return;
    }
    case nn::op_pass::bwd_weight: {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        const index N = static_cast<index>(c.node_output->shape[0]), S = static_cast<index>(c.node_output->shape[1]);
        const float* DY = fp(dy);
        float* DW = fp(need(c, slot::grad_param(0), "the table gradient"));
        std::fill(DW, DW + P * D, 0.0f);
        for (index n = 0; n < N; ++n) vector_map(DW, S * D) += const_vector_map(DY + n * S * D, S * D);
        return;
    }
    default: fail(c, "the CPU backend has no kernel for this op");
    }
}

} // namespace memplan::engine::cpu
