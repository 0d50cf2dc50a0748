// The convolution variants of nn/conv.hpp as cuDNN algorithms. memplan plans
// one variant per convolution step (its workspace and cost); the CUDA backend
// runs the cuDNN algorithm this table names for the step's pass, and the
// profiler measures the same algorithms. Pure C++: names only, the backend
// maps them to cuDNN's enums.
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

#include <array>
#include <cstdint>
#include <string_view>

namespace memplan::engine::cuda {

enum class conv_pass : std::uint8_t { forward, backward_data, backward_filter };

/// The pass of a conv2d op suffix ("fwd", "bwd_data", "bwd_filter").
constexpr conv_pass pass_of(std::string_view suffix) noexcept {
    return suffix == "bwd_data" ? conv_pass::backward_data
           : suffix == "bwd_filter" ? conv_pass::backward_filter
                                    : conv_pass::forward;
}

/// The variant names of nn/conv.hpp, in the order the table lists them.
inline constexpr std::array<std::string_view, 3> conv_variant_names{"implicit_gemm", "gemm_im2col", "winograd"};

/// The cuDNN algorithm (enum name without the CUDNN_CONVOLUTION_*_ALGO_ prefix) of a variant and pass.
constexpr std::string_view cudnn_algorithm(std::string_view variant, conv_pass pass) noexcept {
    if (variant == "gemm_im2col")
        return pass == conv_pass::forward ? std::string_view("GEMM") : std::string_view("ALGO_1");
    if (variant == "winograd") return "WINOGRAD_NONFUSED";
    return pass == conv_pass::forward ? std::string_view("IMPLICIT_GEMM") : std::string_view("ALGO_0");
}

} // namespace memplan::engine::cuda
