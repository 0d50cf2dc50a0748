// The `cpu` device profile: this machine's single-threaded rates, measured
// with the CPU backend's own kind of work, so that `roofline:cpu` and
// `fused:cpu` price ops for the machine the CPU engine runs on.
//
// - matrix rate: an Eigen float GEMM (256 x 256 x 256, the kernels' GEMM);
// - vector rate: a multiply-add over an array that stays in cache;
// - bandwidth: a copy of 64 MiB (bytes read plus bytes written per second).
// Each figure is the best of a few repetitions. The measurement takes about
// a tenth of a second and is made once per process.
#pragma once

#include <memplan/cost/device.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace memplan::engine::cpu {

namespace detail {

/// Best time in seconds of `reps` runs of `f`.
template <class F>
double best_seconds(int reps, F&& f) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return std::max(best, 1e-9);
}

inline cost::device_profile measure_cpu_device_once() {
    constexpr Eigen::Index n = 256;
    const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
    Eigen::MatrixXf c(n, n);
    const double gemm = best_seconds(5, [&] { c.noalias() = a * b; });
    volatile float sink = c(0, 0);

    std::vector<float> v(1 << 14, 1.0f);
    constexpr int passes = 64;
    const double vec = best_seconds(5, [&] {
        for (int p = 0; p < passes; ++p)
            for (auto& x : v) x = x * 0.999f + 0.001f;
    });
    sink = v[7];

    const std::size_t bytes = std::size_t(64) << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    const double copy = best_seconds(3, [&] { std::copy(src.begin(), src.end(), dst.begin()); });
    sink = float(dst[bytes / 2]);
    (void)sink;

    return {"cpu", 2.0 * double(n) * double(n) * double(n) / gemm, 2.0 * double(v.size()) * passes / vec,
            2.0 * double(bytes) / copy};
}

} // namespace detail

/// This machine's `cpu` profile, measured on first use.
inline const cost::device_profile& cpu_device() {
    static const cost::device_profile d = detail::measure_cpu_device_once();
    return d;
}

} // namespace memplan::engine::cpu
