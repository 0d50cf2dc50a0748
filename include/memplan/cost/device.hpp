// Device profiles and the roofline time of an op: the bottom of the cost
// layer (cost/model.hpp builds the cost models on it).
//
// An op's time is estimated as the larger of its arithmetic time and its
// memory time: max(flops / rate, bytes / bandwidth), where matrix products
// (convolutions, linear layers, attention matmuls) run at the device's matrix
// rate and everything else at its vector rate. The estimate ignores launch
// latency and cache reuse; it only has to rank ops and variants consistently.
// The roofline model is Williams, Waterman and Patterson, CACM 2009.
#pragma once

#include <memplan/core/error.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace memplan::cost {

/// Arithmetic rates (FLOP/s) and memory bandwidth (bytes/s) of one device.
/// The rates are the same for fp32, fp16 and bf16 runs: a half-precision run
/// only moves fewer bytes. (A simplification; tensor-core rates differ.)
struct device_profile {
    std::string_view name; ///< static storage: a literal
    double matmul_flops_per_s = 0; ///< matrix products
    double other_flops_per_s = 0;  ///< element-wise, reductions, normalisation
    double bytes_per_s = 0;        ///< memory bandwidth
};

/// NVIDIA V100: 15.7 TFLOP/s fp32 for everything, 0.9 TB/s.
inline constexpr device_profile v100{"v100", 15.7e12, 15.7e12, 0.9e12};
/// NVIDIA H200: 400 TFLOP/s for matrix products (TF32), 60 TFLOP/s otherwise, 4.3 TB/s.
inline constexpr device_profile h200{"h200", 400e12, 60e12, 4.3e12};

/// The profiles memplan knows, by name.
inline constexpr std::array<device_profile, 2> device_profiles{v100, h200};

inline std::optional<device_profile> find_device(std::string_view name) noexcept {
    for (const auto& d : device_profiles)
        if (d.name == name) return d;
    return std::nullopt;
}

/// How an op's arithmetic runs: on the matrix units or the vector units.
/// `pointwise` ops (element-wise and normalisation) run on the vector units
/// like `other`, and a compiler can fold them into the op that produces
/// their input (the `fused` cost model).
enum class compute_kind : unsigned char { matmul, other, pointwise };

/// Roofline time in microseconds (the cost unit of derived training graphs):
/// max(flops / rate, bytes / bandwidth).
inline double roofline_us(const device_profile& dev, compute_kind kind, double flops, double bytes) {
    const double rate = kind == compute_kind::matmul ? dev.matmul_flops_per_s : dev.other_flops_per_s;
    if (!(rate > 0) || !(dev.bytes_per_s > 0))
        throw error("nn", "device profile '" + std::string(dev.name) + "' has a rate or bandwidth that is not positive");
    return std::max(flops / rate, bytes / dev.bytes_per_s) * 1e6;
}

} // namespace memplan::cost
