// The CUDA backend's host code: device discovery, memory, and the dispatch of
// a kernel_call to the layer family's kernels (common.hpp declares them, one
// .cpp per family). Compiled by the C++ compiler; only kernels.cu needs nvcc.
#include "common.hpp"

#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/nn/layer.hpp>

#include <algorithm>
#include <string>
#include <variant>

namespace memplan::engine::cuda {

int device_count() noexcept {
    int n = 0; // left untouched on failure (error 35 without a driver)
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

device_info describe_device(int index) {
    if (index < 0 || index >= device_count())
        throw error("cuda", "no CUDA device " + std::to_string(index) + " (" + std::to_string(device_count()) +
                                " found)");
    cudaDeviceProp p{};
    MEMPLAN_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    return {p.name, static_cast<std::uint64_t>(p.totalGlobalMem), p.major, p.minor};
}

std::uint64_t device_bytes_in_use() noexcept {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return total - free;
}

namespace detail {

void context_deleter::operator()(context* c) const noexcept { delete c; }

} // namespace detail

// ----- backend -------------------------------------------------------------------------

detail::context& backend::ctx() {
    if (!ctx_) ctx_.reset(new detail::context(opt_));
    return *ctx_;
}

std::byte* backend::allocate(std::uint64_t bytes) {
    auto& x = ctx();
    void* p = nullptr;
    const auto n = static_cast<std::size_t>(bytes ? bytes : 1);
    const cudaError_t e = x.opt.alloc == allocation::stream_pool ? cudaMallocAsync(&p, n, x.stream) : cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw error("cuda", "cannot allocate " + std::to_string(bytes) + " bytes of device memory: " +
                                cudaGetErrorString(e));
    }
    x.stats.allocated_bytes += bytes;
    x.stats.peak_bytes = std::max(x.stats.peak_bytes, x.stats.allocated_bytes);
    ++x.stats.allocations;
    return static_cast<std::byte*>(p);
}

void backend::deallocate(std::byte* p, std::uint64_t bytes) noexcept {
    if (!ctx_ || !p) return;
    if (ctx_->opt.alloc == allocation::stream_pool)
        cudaFreeAsync(p, ctx_->stream);
    else
        cudaFree(p);
    ctx_->stats.allocated_bytes -= bytes;
}

void backend::upload(std::byte* device, const std::byte* host, std::uint64_t bytes) {
    auto& x = ctx();
    // Synchronous on purpose: the host buffer may go away right after.
    MEMPLAN_CUDA_CHECK(cudaMemcpyAsync(device, host, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice, x.stream));
    MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(x.stream));
}

void backend::download(std::byte* host, const std::byte* device, std::uint64_t bytes) {
    auto& x = ctx();
    MEMPLAN_CUDA_CHECK(cudaMemcpyAsync(host, device, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost, x.stream));
    MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(x.stream));
}

void backend::poison(std::byte* p, std::uint64_t bytes) {
    MEMPLAN_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, static_cast<std::size_t>(bytes), ctx().stream));
}

void backend::synchronize() { MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(ctx().stream)); }

namespace {

void dispatch(detail::context& x, const kernel_call& c) {
    switch (c.kind) {
    case op_origin_kind::grad_acc: detail::run_grad_acc(x, c); return;
    case op_origin_kind::update: detail::run_update(x, c); return;
    case op_origin_kind::layer: break;
    }
    if (!c.node || !c.spec) throw error("cuda", "a layer op reached the CUDA backend without its layer");
    std::visit([&](const auto& l) { detail::run(x, l, c); }, c.node->layer);
}

/// The debug mode's check after op `c`: its kernels ran to the end. A fault
/// (an illegal address, say) otherwise surfaces at a later synchronisation,
/// naming whichever call happened to wait; a launch error (bad configuration)
/// only in cudaGetLastError.
void check_finished(detail::context& x, const kernel_call& c) {
    const cudaError_t waited = cudaStreamSynchronize(x.stream);
    const cudaError_t last = cudaGetLastError();
    const cudaError_t e = waited != cudaSuccess ? waited : last;
    if (e != cudaSuccess)
        detail::fail(c, std::string("failed on the device (MEMPLAN_CUDA_SYNC / sync_each_op): ") + cudaGetErrorName(e) +
                            ": " + cudaGetErrorString(e));
}

} // namespace

void backend::run(const kernel_call& c) {
    auto& x = ctx();
    dispatch(x, c);
    if (x.opt.sync_each_op) check_finished(x, c);
}

backend_stats backend::stats() const noexcept { return ctx_ ? ctx_->stats : backend_stats{}; }

} // namespace memplan::engine::cuda
