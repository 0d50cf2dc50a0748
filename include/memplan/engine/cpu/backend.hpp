// The CPU backend: the reference implementation of BackendLike.
//
// Memory is host memory (aligned to 256 bytes); kernels are single-threaded,
// deterministic Eigen code over arena memory, one header per layer family.
// `run` dispatches on the layer kind (std::visit over nn::layer) and the op's
// pass (nn::op_pass); gradient accumulation and optimizer updates have their
// own kernels.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/engine/backend.hpp>
#include <memplan/engine/cpu/activation.hpp>
#include <memplan/engine/cpu/attention.hpp>
#include <memplan/engine/cpu/conv.hpp>
#include <memplan/engine/cpu/elementwise.hpp>
#include <memplan/engine/cpu/embedding.hpp>
#include <memplan/engine/cpu/linear.hpp>
#include <memplan/engine/cpu/loss.hpp>
#include <memplan/engine/cpu/norm.hpp>
#include <memplan/engine/cpu/optimizer.hpp>
#include <memplan/engine/cpu/pool.hpp>
#include <memplan/nn/layer.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <variant>

namespace memplan::engine::cpu {

/// A layer kind without a CPU kernel (the decoder layers of the zoo's
/// `llama`, which are planned, not run, here): an error naming the op.
template <class Layer>
void run(const Layer&, const kernel_call& c) {
    fail(c, "the CPU engine has no kernel for layer kind '" + std::string(Layer::kind) + "'");
}

class backend {
public:
    static constexpr std::size_t alignment = 256;

    /// Host memory of `bytes` (at least one byte), aligned to 256. Throws on exhaustion.
    std::byte* allocate(std::uint64_t bytes) {
        const auto n = static_cast<std::size_t>((bytes + alignment - 1) / alignment * alignment);
        void* p = ::operator new(n ? n : alignment, std::align_val_t{alignment}, std::nothrow);
        if (!p) throw error("engine", "the CPU backend cannot allocate " + std::to_string(bytes) + " bytes");
        allocated_ += bytes;
        return static_cast<std::byte*>(p);
    }
    void deallocate(std::byte* p, std::uint64_t bytes) noexcept {
        ::operator delete(p, std::align_val_t{alignment});
        allocated_ -= bytes;
    }
    void upload(std::byte* device, const std::byte* host, std::uint64_t bytes) {
        std::memcpy(device, host, static_cast<std::size_t>(bytes));
    }
    void download(std::byte* host, const std::byte* device, std::uint64_t bytes) {
        std::memcpy(host, device, static_cast<std::size_t>(bytes));
    }
    /// 0xFF bytes: a quiet NaN in every float, an out-of-window arg-max, a negative id.
    void poison(std::byte* p, std::uint64_t bytes) { std::memset(p, 0xFF, static_cast<std::size_t>(bytes)); }
    void synchronize() noexcept {}

    /// Runs one step. Throws memplan::error naming the op when it has no kernel or bad data.
    void run(const kernel_call& c) {
        switch (c.kind) {
        case op_origin_kind::grad_acc: run_grad_acc(c); return;
        case op_origin_kind::update: run_update(c); return;
        case op_origin_kind::layer: break;
        }
        if (!c.node || !c.spec) throw error("engine", "a layer op reached the CPU backend without its layer");
        std::visit([&](const auto& l) { cpu::run(l, c); }, c.node->layer);
    }

    /// Bytes currently allocated through this backend.
    std::uint64_t allocated_bytes() const noexcept { return allocated_; }

private:
    std::uint64_t allocated_ = 0;
};

static_assert(BackendLike<backend>);

} // namespace memplan::engine::cpu
