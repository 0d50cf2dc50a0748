// Device profiles and the roofline time of an op: the bottom of the cost
// layer (cost/model.hpp builds the cost models on it).
//
// An op's time is estimated as the larger of its arithmetic time and its
// memory time: max(flops / rate, bytes / bandwidth), where matrix products
// (convolutions, linear layers, attention matmuls) run at the device's matrix
// rate for the op's precision (fp32, fp16/bf16, fp8: tensor cores run the
// narrower types several times faster) and everything else at its vector
// rate. The estimate ignores launch latency and cache reuse; it only has to
// rank ops and variants consistently. The roofline model is Williams,
// Waterman and Patterson, CACM 2009. python/memplan_torch/costs.py holds the
// same table (tests/unit/cost_model_test.cpp and python/tests/test_costs.py
// check both against one list of cases).
#pragma once

#include <memplan/core/error.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace memplan::cost {

/// The arithmetic precision of an op's matrix products: its narrowest
/// floating operand. fp16 and bf16 run at the same (`half`) rate.
enum class precision : unsigned char { fp32, half, fp8 };

constexpr std::string_view to_string(precision p) noexcept {
    switch (p) {
    case precision::fp32: return "fp32";
    case precision::half: return "half";
    case precision::fp8: return "fp8";
    }
    return "fp32";
}

/// Arithmetic rates (FLOP/s) and memory bandwidth (bytes/s) of one device.
/// Matrix products run at the rate of their precision; a rate of 0 means the
/// device has no faster units for that precision (fp8 falls back to the half
/// rate, half to the fp32 rate). Element-wise work runs at one vector rate
/// whatever the precision: a half-precision op moves fewer bytes, which the
/// bandwidth term already counts.
struct device_profile {
    std::string_view name; ///< static storage: a literal
    double matmul_flops_per_s = 0; ///< fp32 matrix products (TF32 tensor cores where the device has them)
    double other_flops_per_s = 0;  ///< element-wise, reductions, normalisation
    double bytes_per_s = 0;        ///< memory bandwidth
    double half_matmul_flops_per_s = 0; ///< fp16/bf16 matrix products (dense tensor cores); 0: the fp32 rate
    double fp8_matmul_flops_per_s = 0;  ///< fp8 matrix products; 0: the half rate

    /// The matrix rate for products in precision `p` (the fallbacks applied).
    constexpr double matmul_rate(precision p) const noexcept {
        const double half = half_matmul_flops_per_s > 0 ? half_matmul_flops_per_s : matmul_flops_per_s;
        if (p == precision::fp8) return fp8_matmul_flops_per_s > 0 ? fp8_matmul_flops_per_s : half;
        return p == precision::half ? half : matmul_flops_per_s;
    }
};

// Dense (no sparsity) rates from the vendors' data sheets, SXM boards:
// V100 (Volta architecture whitepaper, 2017): 15.7 TFLOP/s fp32, 125 fp16
// tensor cores (no bf16 or fp8 units: bf16 is priced like fp16), 0.9 TB/s.
// H100 and H200 (H100 Tensor Core GPU data sheet; H200 data sheet, 2023):
// one GH100 chip, so the same rates: 494 TFLOP/s TF32, 989 fp16/bf16, 1979
// fp8, 67 fp32 on the vector units; H100 SXM 3.35 TB/s of HBM3, H200 4.8 TB/s
// of HBM3e. fp32 matrix products are priced at TF32 (cuDNN's default for
// convolutions; `torch.backends.cuda.matmul.allow_tf32` for matmuls).

/// NVIDIA V100 SXM2: 15.7 TFLOP/s fp32, 125 fp16 (tensor cores), 0.9 TB/s.
inline constexpr device_profile v100{"v100", 15.7e12, 15.7e12, 0.9e12, 125e12, 0};
/// NVIDIA H100 SXM: 494 TFLOP/s TF32, 989 bf16, 1979 fp8, 67 fp32 otherwise, 3.35 TB/s.
inline constexpr device_profile h100{"h100", 494e12, 67e12, 3.35e12, 989e12, 1979e12};
/// NVIDIA H200 SXM: the H100's chip with 4.8 TB/s.
inline constexpr device_profile h200{"h200", 494e12, 67e12, 4.8e12, 989e12, 1979e12};

/// The profiles memplan knows, by name.
inline constexpr std::array<device_profile, 3> device_profiles{v100, h100, h200};

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
/// max(flops / rate, bytes / bandwidth), with the matrix rate of precision
/// `p` for matrix products and the vector rate otherwise.
inline double roofline_us(const device_profile& dev, compute_kind kind, double flops, double bytes,
                          precision p = precision::fp32) {
    const double rate = kind == compute_kind::matmul ? dev.matmul_rate(p) : dev.other_flops_per_s;
    if (!(rate > 0) || !(dev.bytes_per_s > 0))
        throw error("nn", "device profile '" + std::string(dev.name) + "' has a rate or bandwidth that is not positive");
    return std::max(flops / rate, bytes / dev.bytes_per_s) * 1e6;
}

} // namespace memplan::cost
