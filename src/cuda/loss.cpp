// The CUDA kernels of softmax cross-entropy.
#include "common.hpp"

namespace memplan::engine::cuda::detail {

void run(context& x, const nn::softmax_cross_entropy& l, const kernel_call& c) {
    using nn::slot;
    const auto q = loss_shape(l, c);
    const i64 outer = q.outer, C = q.classes, inner = q.inner;
    const auto lp = need(c, slot::internal(0), "the log-probabilities");
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

} // namespace memplan::engine::cuda::detail
