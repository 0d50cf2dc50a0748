// Whether this machine has a CUDA device, and which. Declarations only (pure
// C++, no CUDA headers): the definitions live in memplan::cuda's small static
// library, so a program that includes this header links memplan::cuda.
//
// Without a GPU cudaGetDeviceCount fails (error 35, no driver, no device):
// every failure reads as "no device", never as an exception.
#pragma once

#include <cstdint>
#include <string>

namespace memplan::engine::cuda {

/// What the device at an index is.
struct device_info {
    std::string name;
    std::uint64_t total_bytes = 0;
    int sm_major = 0, sm_minor = 0;
};

/// Number of usable CUDA devices; 0 on any error (no driver, no device).
int device_count() noexcept;

/// Describes device `index`; throws memplan::error("cuda", ...) when there is none.
device_info describe_device(int index = 0);

/// Device memory in use on the current device (total - free, from
/// cudaMemGetInfo), in bytes; 0 when unknown.
std::uint64_t device_bytes_in_use() noexcept;

} // namespace memplan::engine::cuda
