// Shared pieces of the CPU kernels: row-major Eigen maps over arena memory,
// 1-bit masks, and errors that name the op at fault. Layer geometry and its
// checks are the CUDA backend's too: engine/shapes.hpp.
//
// Kernels read and write only the memory the executor binds; they allocate
// nothing, overwrite (never accumulate into) their outputs, and work when an
// in-place output and its input are the same memory.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/engine/program.hpp>
#include <memplan/engine/shapes.hpp>

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <string>

namespace memplan::engine::cpu {

using index = Eigen::Index;
using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_map = Eigen::Map<row_matrix>;
using const_matrix_map = Eigen::Map<const row_matrix>;
using strided_map = Eigen::Map<row_matrix, 0, Eigen::OuterStride<>>;
using const_strided_map = Eigen::Map<const row_matrix, 0, Eigen::OuterStride<>>;
using vector_map = Eigen::Map<Eigen::VectorXf>;
using const_vector_map = Eigen::Map<const Eigen::VectorXf>;

/// Throws the error of op `c` (category "engine").
[[noreturn]] inline void fail(const kernel_call& c, const std::string& what) {
    throw error("engine", "op '" + c.name() + "': " + what);
}

/// The memory of slot `s`; throws naming the op when the step did not bind it.
inline tensor_ref need(const kernel_call& c, nn::slot s, const char* what) { return bound_slot("engine", c, s, what); }

/// True for fwd, false for bwd of a one-op layer; throws naming the op otherwise.
inline bool forward_or_backward(const kernel_call& c) { return is_forward_pass("engine", "CPU", c); }

inline index dim(const tensor_ref& r, std::size_t axis) { return static_cast<index>(r.shape()[axis]); }
inline index count(const tensor_ref& r) { return static_cast<index>(r.numel()); }
inline float* fp(const tensor_ref& r) { return r.as<float>(); }

/// Packs `bit(i)` for i < n into bytes, least significant bit first. Whole
/// bytes are written, so a mask never depends on what its memory held.
template <class Bit>
void write_mask(std::uint8_t* mask, index n, Bit bit) {
    for (index byte = 0; byte * 8 < n; ++byte) {
        std::uint8_t m = 0;
        for (index k = 0; k < 8 && byte * 8 + k < n; ++k)
            if (bit(byte * 8 + k)) m = static_cast<std::uint8_t>(m | (1u << k));
        mask[byte] = m;
    }
}
inline bool mask_bit(const std::uint8_t* mask, index i) { return (mask[i >> 3] >> (i & 7)) & 1u; }

/// For `a = b * stride - pad + offset` with b in [0, b_count): the range
/// [lo, hi) of b for which a lies in [0, a_count).
inline void valid_range(index a_count, index b_count, index stride, index pad, index offset, index& lo, index& hi) {
    // a >= 0  <=>  b >= ceil((pad - offset) / stride)
    const index need = pad - offset;
    lo = need <= 0 ? 0 : (need + stride - 1) / stride;
    // a <= a_count - 1  <=>  b <= floor((a_count - 1 + pad - offset) / stride)
    const index top = a_count - 1 + pad - offset;
    hi = top < 0 ? 0 : top / stride + 1;
    if (hi > b_count) hi = b_count;
    if (lo > hi) lo = hi;
}

} // namespace memplan::engine::cpu
