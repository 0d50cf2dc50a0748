// The CUDA kernels of the structural layers: add, concatenation (strided
// copies), flatten (a copy unless in place) and dropout (the CPU backend's
// hash-seeded masks).
#include "common.hpp"

#include <cstddef>
#include <functional>
#include <string>

namespace memplan::engine::cuda::detail {

void run(context& x, const nn::add&, const kernel_call& c) {
    using nn::slot;
    if (c.pass() != nn::op_pass::fwd) fail(c, "the CUDA backend has no kernel for this op");
    const auto a = need(c, slot::input(0), "input 0");
    kernels::add(x.stream, fp(a), fp(need(c, slot::input(1), "input 1")), fp(need(c, slot::output(), "the output")),
                 count(a));
    launched(c);
}

void run(context& x, const nn::concat& l, const kernel_call& c) {
    using nn::slot;
    const bool forward = forward_or_backward(c);
    const auto whole = forward ? need(c, slot::output(), "the output") : need(c, slot::grad_output(), "the output gradient");
    const auto q = concat_shape(l, c);
    const i64 outer = q.outer, total = q.total;
    float* Z = fp(whole);
    i64 at = 0;
    for (std::uint32_t i = 0; i < c.node->inputs.size(); ++i) {
        const auto part = forward ? need(c, slot::input(i), "an input") : c.slot(slot::grad_input(i));
        const i64 width = q.width(i);
        if (part) {
            const auto row = static_cast<std::size_t>(width) * sizeof(float);
            const auto pitch = static_cast<std::size_t>(total) * sizeof(float);
            if (forward)
                MEMPLAN_CUDA_CHECK(cudaMemcpy2DAsync(Z + at, pitch, fp(part), row, row, static_cast<std::size_t>(outer),
                                                     cudaMemcpyDeviceToDevice, x.stream));
            else
                MEMPLAN_CUDA_CHECK(cudaMemcpy2DAsync(fp(part), row, Z + at, pitch, row, static_cast<std::size_t>(outer),
                                                     cudaMemcpyDeviceToDevice, x.stream));
        }
        at += width;
    }
}

void run(context& x, const nn::flatten&, const kernel_call& c) {
    using nn::slot;
    const auto in = need(c, slot::input(0), "the input");
    const auto y = need(c, slot::output(), "the output");
    if (in.data != y.data)
        MEMPLAN_CUDA_CHECK(cudaMemcpyAsync(y.data, in.data, static_cast<std::size_t>(count(in)) * sizeof(float),
                                           cudaMemcpyDeviceToDevice, x.stream));
}

void run(context& x, const nn::dropout& l, const kernel_call& c) {
    using nn::slot;
    auto* mask = need(c, slot::internal(0), "the keep-mask").as<std::uint8_t>();
    const float scale = 1.0f / (1.0f - static_cast<float>(l.p));
    if (forward_or_backward(c)) {
        const auto in = need(c, slot::input(0), "the input");
        // The CPU backend's seed: the same masks on both devices.
        const std::uint64_t seed = std::hash<std::string>{}(c.node->name) ^ (c.iteration * 0x9E3779B97F4A7C15ull);
        const auto threshold = static_cast<std::uint64_t>(l.p * 18446744073709551616.0);
        kernels::dropout_forward(x.stream, fp(in), fp(need(c, slot::output(), "the output")), mask, count(in), seed,
                                 threshold, scale);
    } else {
        const auto dy = need(c, slot::grad_output(), "the output gradient");
        kernels::dropout_backward(x.stream, fp(dy), mask, fp(need(c, slot::grad_input(0), "the input gradient")),
                                  count(dy), scale);
    }
    launched(c);
}

} // namespace memplan::engine::cuda::detail
