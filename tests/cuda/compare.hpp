// How the GPU tests compare a tensor with the CPU reference. Non-finite
// values must match exactly (NaN with NaN, +inf with +inf, -inf with -inf,
// at the same positions); the relative difference is scaled per tensor by
// the largest finite value only. A masked -inf in attention scores would
// otherwise make the scale infinite and every difference vanish. Pure C++:
// the CPU-only unit tests check it too (tests/unit/compare_test.cpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

namespace memplan::test {

/// The outcome of comparing a tensor `b` with its reference `a`.
struct comparison {
    /// max |a - b| over the positions finite in both / max(max |a| there, smallest normal float);
    /// +infinity when `mismatched` > 0.
    double relative = 0;
    std::size_t mismatched = 0;     ///< positions whose non-finite values differ (and any size difference)
    std::size_t first_mismatch = 0; ///< the first of them (when mismatched > 0)
    std::size_t nonfinite = 0;      ///< positions where both hold the same non-finite value

    bool agrees(double tolerance) const noexcept { return mismatched == 0 && relative < tolerance; }
};

/// Same non-finite class: both NaN, or both the same infinity.
inline bool same_nonfinite(float a, float b) noexcept {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b; // both infinite here: equal only with the same sign
}

/// Compares `b` with the reference `a`, position by position.
inline comparison compare(std::span<const float> a, std::span<const float> b) noexcept {
    comparison r;
    double diff = 0, scale = 0;
    const std::size_t n = a.size() < b.size() ? a.size() : b.size();
    if (a.size() != b.size()) {
        r.mismatched = (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
        r.first_mismatch = n;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const bool fa = std::isfinite(a[i]), fb = std::isfinite(b[i]);
        if (fa && fb) {
            diff = std::fmax(diff, std::fabs(double(a[i]) - double(b[i])));
            scale = std::fmax(scale, std::fabs(double(a[i])));
        } else if (!fa && !fb && same_nonfinite(a[i], b[i])) {
            ++r.nonfinite;
        } else {
            if (r.mismatched == 0 || i < r.first_mismatch) r.first_mismatch = i;
            ++r.mismatched;
        }
    }
    r.relative = r.mismatched ? std::numeric_limits<double>::infinity()
                              : diff / std::fmax(scale, double(std::numeric_limits<float>::min()));
    return r;
}

} // namespace memplan::test
