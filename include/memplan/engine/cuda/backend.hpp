// The CUDA backend of the training engine: BackendLike on one NVIDIA GPU.
//
// One stream, one cuBLAS and one cuDNN handle (RAII, created on first use,
// so a default-constructed backend costs nothing). Matrix products run on
// cuBLAS (fp32, no TF32), convolutions on cuDNN with the algorithm of the
// step's variant (engine/cuda/algorithms.hpp) inside the plan's workspace
// buffer, everything else on memplan's own kernels (src/cuda/kernels.cu).
// The arena is the executor's one allocate(); every CUDA, cuBLAS or cuDNN
// failure becomes memplan::error("cuda", ...) naming the call and file:line.
// Kernels run asynchronously, so a fault shows at a later synchronisation;
// the debug mode `sync_each_op` (or MEMPLAN_CUDA_SYNC=1) waits after each op
// so that a faulting kernel names its op.
// This header is pure C++: the definitions are in memplan::cuda's library.
#pragma once

#include <memplan/engine/backend.hpp>
#include <memplan/engine/program.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace memplan::engine::cuda {

namespace detail {
struct context; // streams, handles, statistics: src/cuda/common.hpp
struct context_deleter {
    void operator()(context* c) const noexcept;
};
struct profiler_access; // the profiler's way to the context's stream: src/cuda/profile.cpp
} // namespace detail

/// How allocate() gets device memory: cudaMalloc / cudaFree, or the
/// stream-ordered pool (cudaMallocAsync / cudaFreeAsync, memory kept cached).
enum class allocation : std::uint8_t { device_malloc, stream_pool };

/// What a convolution does when cuDNN needs more workspace for the variant's
/// algorithm than the plan gave the step.
enum class workspace_shortfall : std::uint8_t {
    error,   ///< throw memplan::error naming the op, the variant and both sizes
    fallback ///< run the zero-workspace algorithm instead and count it (stats().workspace_fallbacks)
};

struct backend_options {
    int device = 0;
    allocation alloc = allocation::device_malloc;
    bool allow_tf32 = false; ///< let cuDNN use TF32 tensor cores (results then differ from the CPU's)
    workspace_shortfall shortfall = workspace_shortfall::error;
    /// Debugging: after every op, wait for the stream and throw memplan::error
    /// naming the op and the CUDA error when it failed on the device (slow).
    /// Also on when the environment variable MEMPLAN_CUDA_SYNC is 1 as the
    /// backend creates its context (its first allocation or op); options()
    /// shows only what the caller set.
    bool sync_each_op = false;
};

/// What the backend did so far.
struct backend_stats {
    std::uint64_t allocated_bytes = 0; ///< live through allocate()
    std::uint64_t peak_bytes = 0;      ///< high-water mark of allocated_bytes
    std::uint64_t allocations = 0;     ///< allocate() calls
    std::uint64_t conv_fallbacks = 0;  ///< convolution passes whose variant's algorithm cuDNN did not support
    std::uint64_t workspace_fallbacks = 0; ///< passes that needed more workspace than planned (policy fallback)
};

class backend {
public:
    backend() noexcept = default;
    explicit backend(backend_options o) noexcept : opt_(o) {}
    backend(backend&&) noexcept = default;
    backend& operator=(backend&&) noexcept = default;
    ~backend() = default;

    /// Device memory of `bytes` (cudaMalloc: aligned to 256). Throws memplan::error on failure.
    std::byte* allocate(std::uint64_t bytes);
    void deallocate(std::byte* p, std::uint64_t bytes) noexcept;
    void upload(std::byte* device, const std::byte* host, std::uint64_t bytes);
    void download(std::byte* host, const std::byte* device, std::uint64_t bytes);
    /// 0xFF bytes (quiet NaN floats), queued on the stream.
    void poison(std::byte* p, std::uint64_t bytes);
    /// Queues one step. Throws memplan::error naming the op on bad input or a failed call.
    void run(const kernel_call& c);
    /// Waits for the stream; throws when queued work failed.
    void synchronize();

    backend_stats stats() const noexcept;
    const backend_options& options() const noexcept { return opt_; }

private:
    friend struct detail::profiler_access;
    detail::context& ctx();
    backend_options opt_{};
    std::unique_ptr<detail::context, detail::context_deleter> ctx_;
};

static_assert(BackendLike<backend>);

} // namespace memplan::engine::cuda
