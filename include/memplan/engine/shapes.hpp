// What every backend reads the same way from a kernel_call: which saved
// tensor a backward variant reads, and the geometry of a layer's op taken
// from the network's shapes, checked against the memory the step binds.
//
// The CPU backend (engine/cpu/) and the CUDA backend (src/cuda/) both call
// these, so a layer's shapes are interpreted, and validated, in one place.
#pragma once

#include <memplan/engine/program.hpp>
#include <memplan/nn/activation.hpp>
#include <memplan/nn/norm.hpp>

namespace memplan::engine {

/// ReLU's backward reads the 1-bit mask: its variant says so, or (no
/// variant) the step binds the mask.
inline bool reads_mask(const kernel_call& c) {
    return c.variant == nn::impl_kind::from_mask ||
           (c.variant == nn::impl_kind::none && c.slot(nn::slot::internal(0)));
}

/// Batch-norm's backward starts from the output: its variant says so, or (no
/// variant) the step does not bind the input.
inline bool reads_output(const kernel_call& c) {
    return c.variant == nn::impl_kind::from_output ||
           (c.variant == nn::impl_kind::none && !c.slot(nn::slot::input(0)));
}

} // namespace memplan::engine
