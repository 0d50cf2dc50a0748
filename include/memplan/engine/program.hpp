// What one step of a plan asks a backend to do: the op's origin (a layer's
// forward or backward spec, a gradient accumulation, an optimizer update),
// the chosen variant, and device memory for every tensor it touches.
//
// Device memory stays opaque (a byte pointer, already base + offset), so the
// same call drives the CPU backend and a GPU backend. A tensor the chosen
// variant does not read, or a gradient nobody needs, is an empty reference:
// a kernel that touches it is wrong, and the null pointer makes that loud.
#pragma once

#include <memplan/nn/training.hpp>
#include <memplan/nn/network.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace memplan::engine {

/// A tensor as a kernel sees it: device memory and its shape. `data` is null
/// when the step does not bind it.
struct tensor_ref {
    std::byte* data = nullptr;
    const nn::tensor_info* info = nullptr;

    explicit operator bool() const noexcept { return data != nullptr; }
    std::uint64_t numel() const { return info ? info->numel() : 0; }
    const nn::shape& shape() const { return info->shape; }
    template <class T>
    T* as() const noexcept {
        return reinterpret_cast<T*>(data);
    }
};

/// Hyper-parameters of the update ops (PyTorch's defaults for Adam and
/// AdamW; lr 0.01 and momentum 0.9 for SGD).
struct optimizer_config {
    memplan::optimizer kind = memplan::optimizer::sgd_momentum;
    float lr = 0.01f;
    float momentum = 0.9f;
    float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    float weight_decay = 0.01f; ///< AdamW's decoupled decay: w *= 1 - lr * weight_decay before the step
};

/// One step of a plan, resolved to memory.
struct kernel_call {
    op_origin_kind kind = op_origin_kind::layer;
    const nn::node* node = nullptr;    ///< layer ops: the network node
    const nn::op_spec* spec = nullptr; ///< layer ops: the spec (its pass selects the kernel)
    /// The chosen variant, resolved from the graph's name when the executor
    /// was built; `none` when the step names none (the kernel reads what is bound).
    nn::impl_kind variant = nn::impl_kind::none;
    std::span<const std::pair<nn::slot, tensor_ref>> slots; ///< layer ops: every slot of the spec
    std::span<const nn::tensor_info> node_inputs; ///< layer ops: shapes of the node's inputs (bound or not)
    /// Layer ops: the node's output shape. Use it, not the gradient's: a
    /// gradient passed through a view (flatten) has the view's shape.
    const nn::tensor_info* node_output = nullptr;
    std::span<const tensor_ref> inputs;  ///< the graph op's inputs, in order
    std::span<const tensor_ref> outputs; ///< the graph op's outputs, in order
    std::byte* workspace = nullptr;      ///< the step's planned scratch memory
    std::uint64_t workspace_bytes = 0;
    bool recompute = false;      ///< a forward op run again in the same step: must not touch running statistics
    std::uint64_t iteration = 1; ///< 1-based training step (Adam's bias correction)
    const optimizer_config* opt = nullptr;

    /// The memory bound to slot `s`; an empty reference when the spec has no such slot or it is unbound.
    tensor_ref slot(nn::slot s) const noexcept {
        for (const auto& [x, r] : slots)
            if (x == s) return r;
        return {};
    }
    /// Layer ops: the pass the kernel runs.
    nn::op_pass pass() const noexcept { return spec->pass; }
    /// The op's name for error messages: "<layer>.<suffix>".
    std::string name() const {
        if (node && spec) return node->name + "." + spec->suffix();
        return kind == op_origin_kind::update ? "update" : "grad_acc";
    }
};

} // namespace memplan::engine
