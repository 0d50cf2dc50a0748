// The convolution variants of nn/conv.hpp as cuDNN algorithms. memplan plans
// one variant per convolution step (its workspace and cost); the CUDA backend
// runs the cuDNN algorithm this table names for the step's pass, and the
// profiler measures the same algorithms. Pure C++: the backend maps the
// names to cuDNN's enums.
//
//   variant         forward                 backward-data        backward-filter
//   implicit_gemm   IMPLICIT_GEMM           ALGO_0               ALGO_0          (no workspace)
//   gemm_im2col     GEMM (explicit im2col)  ALGO_1               ALGO_1
//   winograd        WINOGRAD_NONFUSED       WINOGRAD_NONFUSED    WINOGRAD_NONFUSED
//   (none / other)  as implicit_gemm
//
// When cuDNN does not support the named algorithm for a shape, the backend
// falls back to implicit_gemm's (no workspace) and counts the fallback.
#pragma once

#include <memplan/nn/op_spec.hpp>

#include <cstdint>
#include <string_view>

namespace memplan::engine::cuda {

enum class conv_pass : std::uint8_t { forward, backward_data, backward_filter };

/// The cuDNN pass of a conv2d op (fwd, bwd_data, bwd_filter; anything else as forward).
constexpr conv_pass pass_of(nn::op_pass p) noexcept {
    switch (p) {
    case nn::op_pass::bwd_data: return conv_pass::backward_data;
    case nn::op_pass::bwd_filter: return conv_pass::backward_filter;
    default: return conv_pass::forward;
    }
}

/// The cuDNN algorithm (enum name without the CUDNN_CONVOLUTION_*_ALGO_ prefix) of a variant and pass.
constexpr std::string_view cudnn_algorithm(nn::impl_kind variant, conv_pass pass) noexcept {
    switch (variant) {
    case nn::impl_kind::gemm_im2col:
        return pass == conv_pass::forward ? std::string_view("GEMM") : std::string_view("ALGO_1");
    case nn::impl_kind::winograd: return "WINOGRAD_NONFUSED";
    default: return pass == conv_pass::forward ? std::string_view("IMPLICIT_GEMM") : std::string_view("ALGO_0");
    }
}

} // namespace memplan::engine::cuda
