// Element types of tensors in a training graph.
//
// Floating activations, weights and gradients take the training data type
// (`dtype`: fp32 by default, fp16 / bf16 for half-precision training); a few
// tensors have a fixed element type whatever the training type is (token ids
// and labels are int64, dropout masks one byte, ReLU sign masks one bit,
// normalisation statistics fp32), so sizes go through `element`.
#pragma once

#include <memplan/core/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memplan::nn {

/// The floating-point type of a training run.
enum class dtype : std::uint8_t { fp32, fp16, bf16 };

constexpr std::string_view to_string(dtype d) noexcept {
    switch (d) {
    case dtype::fp32: return "fp32";
    case dtype::fp16: return "fp16";
    case dtype::bf16: return "bf16";
    }
    return "fp32";
}

constexpr std::optional<dtype> parse_dtype(std::string_view s) noexcept {
    if (s == "fp32") return dtype::fp32;
    if (s == "fp16") return dtype::fp16;
    if (s == "bf16") return dtype::bf16;
    return std::nullopt;
}

/// Bytes of one value of `d`.
constexpr std::uint64_t size_of(dtype d) noexcept { return d == dtype::fp32 ? 4 : 2; }

/// The element type of one tensor. `floating` follows the run's dtype.
enum class element : std::uint8_t {
    floating, ///< activations, weights, gradients, optimizer state
    f32,      ///< always fp32: normalisation statistics, the loss
    i64,      ///< token ids, class labels
    u8,       ///< one byte per value: dropout keep-masks
    bit,      ///< one bit per value: ReLU sign masks
};

constexpr std::string_view to_string(element e) noexcept {
    switch (e) {
    case element::floating: return "floating";
    case element::f32: return "f32";
    case element::i64: return "i64";
    case element::u8: return "u8";
    case element::bit: return "bit";
    }
    return "floating";
}

/// Bits of one value of `e` in a run of type `d`.
constexpr std::uint64_t bits_of(element e, dtype d) noexcept {
    switch (e) {
    case element::floating: return 8 * size_of(d);
    case element::f32: return 32;
    case element::i64: return 64;
    case element::u8: return 8;
    case element::bit: return 1;
    }
    return 8 * size_of(d);
}

/// Bytes of `count` values of `e` (bit masks round up to whole bytes).
/// Throws on overflow.
inline std::uint64_t bytes_of(element e, dtype d, std::uint64_t count) {
    const std::uint64_t bits = bits_of(e, d);
    if (count != 0 && bits > UINT64_MAX / count)
        throw error("nn", "a tensor of " + std::to_string(count) + " values of " + std::string(to_string(e)) +
                              " overflows 64 bits of bytes");
    return (count * bits + 7) / 8;
}

} // namespace memplan::nn
