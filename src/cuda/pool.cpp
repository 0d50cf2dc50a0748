// The CUDA kernels of max, average, adaptive average and global average pooling.
#include "common.hpp"

#include <utility>

namespace memplan::engine::cuda::detail {

namespace {

/// engine::pool_shape with the window for the kernels.
kernels::pool_geometry pool_shape(const kernel_call& c, i64 k, i64 s, i64 p) {
    const auto q = engine::pool_shape(c);
    return {q.planes, q.h, q.w, q.ho, q.wo, k, s, p};
}

/// (x or dx, y or dy) of a pool pass.
std::pair<float*, float*> pool_refs(const kernel_call& c, bool& forward) {
    using nn::slot;
    forward = forward_or_backward(c);
    return forward ? std::pair{fp(need(c, slot::input(0), "the input")), fp(need(c, slot::output(), "the output"))}
                   : std::pair{fp(need(c, slot::grad_input(0), "the input gradient")),
                               fp(need(c, slot::grad_output(), "the output gradient"))};
}

void average(context& x, const kernel_call& c, i64 k, i64 s, i64 p, bool adaptive) {
    bool fwd;
    auto [a, b] = pool_refs(c, fwd);
    const auto q = pool_shape(c, k, s, p);
    if (fwd)
        kernels::avg_pool_forward(x.stream, a, b, q, adaptive);
    else
        kernels::avg_pool_backward(x.stream, b, a, q, adaptive);
    launched(c);
}

} // namespace

void run(context& x, const nn::max_pool2d& l, const kernel_call& c) {
    bool fwd;
    auto [a, b] = pool_refs(c, fwd);
    const auto q = pool_shape(c, static_cast<i64>(l.kernel), static_cast<i64>(l.stride), static_cast<i64>(l.padding));
    auto* arg = need(c, nn::slot::internal(0), "the arg-max").as<std::uint8_t>();
    if (fwd)
        kernels::max_pool_forward(x.stream, a, b, arg, q);
    else
        kernels::max_pool_backward(x.stream, b, arg, a, q);
    launched(c);
    if (!fwd) check_indices(x, c, "arg-max byte", q.k * q.k);
}

void run(context& x, const nn::avg_pool2d& l, const kernel_call& c) {
    average(x, c, static_cast<i64>(l.kernel), static_cast<i64>(l.stride), static_cast<i64>(l.padding), false);
}
void run(context& x, const nn::adaptive_avg_pool2d&, const kernel_call& c) { average(x, c, 0, 1, 0, true); }
void run(context& x, const nn::global_avg_pool&, const kernel_call& c) {
    // Global pooling is adaptive pooling to 1x1 (pool_shape reads a 2-D output as 1x1).
    average(x, c, 0, 1, 0, true);
}

} // namespace memplan::engine::cuda::detail
