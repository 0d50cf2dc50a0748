// The backend concept: what the executor needs of a device.
//
// A backend reserves and releases device memory (the executor asks once for
// the whole arena, ggml-alloc's "reserve" before "bind"), copies bytes between
// host and device, fills memory with quiet NaNs for the poison mode, and runs
// one kernel_call (it dispatches on the layer kind and the op's pass). The CPU
// backend (engine/cpu/backend.hpp) is the reference; a CUDA backend plugs into
// the same concept.
#pragma once

#include <memplan/engine/program.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace memplan::engine {

template <class B>
concept BackendLike = requires(B& b, std::uint64_t n, std::byte* p, const std::byte* cp, const kernel_call& call) {
    { b.allocate(n) } -> std::same_as<std::byte*>;  ///< device memory, aligned to at least 256 bytes
    { b.deallocate(p, n) } noexcept;                ///< frees what allocate(n) returned
    b.upload(p, cp, n);                             ///< host `cp` -> device `p`
    b.download(p, cp, n);                           ///< device `cp` -> host `p`
    b.poison(p, n);                                 ///< fill with quiet-NaN bytes (0xFF)
    b.run(call);                                    ///< one step; throws memplan::error on bad input
    b.synchronize();                                ///< wait for queued work
};

} // namespace memplan::engine
