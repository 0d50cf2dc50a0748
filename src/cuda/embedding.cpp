// The CUDA kernels of the token and the learned position embedding.
#include "common.hpp"

namespace memplan::engine::cuda::detail {

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

} // namespace memplan::engine::cuda::detail
