// Tensor shapes and the shape errors of layers.
//
// A shape is a list of extents, outermost first (PyTorch's NCHW / NSD
// conventions). Shape inference failures throw `memplan::error` in category
// "nn" whose message names the layer, its kind and the offending shape, so a
// model author finds the bad layer without a debugger.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/nn/dtype.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan::nn {

struct shape {
    std::vector<std::uint64_t> dims;

    shape() = default;
    shape(std::initializer_list<std::uint64_t> d) : dims(d) {}
    explicit shape(std::vector<std::uint64_t> d) : dims(std::move(d)) {}

    std::size_t rank() const noexcept { return dims.size(); }
    std::uint64_t operator[](std::size_t i) const { return dims.at(i); }
    std::uint64_t back() const { return dims.at(dims.size() - 1); }

    /// Number of values (1 for a scalar). Throws on overflow.
    std::uint64_t numel() const {
        std::uint64_t n = 1;
        for (auto d : dims) {
            if (d != 0 && n > UINT64_MAX / d) throw error("nn", "shape " + to_string() + " has too many values");
            n *= d;
        }
        return n;
    }

    /// "(8, 64, 56, 56)"; a scalar is "()".
    std::string to_string() const {
        std::string s = "(";
        for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
        return s + ")";
    }

    friend bool operator==(const shape&, const shape&) = default;
};

/// Shape and element type of one tensor.
struct tensor_info {
    nn::shape shape;
    element elem = element::floating;

    std::uint64_t numel() const { return shape.numel(); }
    std::uint64_t bytes(dtype d) const { return bytes_of(elem, d, shape.numel()); }
    friend bool operator==(const tensor_info&, const tensor_info&) = default;
};

/// Throws the shape error of layer `name` of kind `kind`.
[[noreturn]] inline void shape_error(std::string_view name, std::string_view kind, const std::string& what) {
    throw error("nn", "layer '" + std::string(name) + "' (" + std::string(kind) + "): " + what);
}

namespace detail {

/// Checks the number of inputs of a layer.
inline void expect_inputs(std::size_t got, std::size_t want, std::string_view name, std::string_view kind) {
    if (got != want)
        shape_error(name, kind, "takes " + std::to_string(want) + " input" + (want == 1 ? "" : "s") + ", got " +
                                    std::to_string(got));
}

/// Checks that input `i` is floating with rank `rank` (0: any rank >= 1).
inline void expect_floating(const tensor_info& t, std::size_t i, std::size_t rank, std::string_view rank_text,
                            std::string_view name, std::string_view kind) {
    if (t.elem != element::floating)
        shape_error(name, kind, "input " + std::to_string(i) + " has element type " + std::string(to_string(t.elem)) +
                                    " but the layer expects floating values");
    if (rank != 0 && t.shape.rank() != rank)
        shape_error(name, kind, "input " + std::to_string(i) + " has shape " + t.shape.to_string() +
                                    " but the layer expects " + std::string(rank_text));
    if (rank == 0 && t.shape.rank() == 0)
        shape_error(name, kind, "input " + std::to_string(i) + " is a scalar but the layer expects " +
                                    std::string(rank_text));
}

} // namespace detail

} // namespace memplan::nn
