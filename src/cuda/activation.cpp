// The CUDA kernels of ReLU (value or 1-bit mask backward) and GELU.
#include "common.hpp"

namespace memplan::engine::cuda::detail {

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

} // namespace memplan::engine::cuda::detail
