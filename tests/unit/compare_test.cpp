// The GPU tests' tensor comparison (tests/cuda/compare.hpp), checked here on
// the CPU: the GPU tests only run where there is a device.
#include "cuda/compare.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

constexpr float compare_inf = std::numeric_limits<float>::infinity();
constexpr float compare_nan = std::numeric_limits<float>::quiet_NaN();

memplan::test::comparison compare_vectors(const std::vector<float>& a, const std::vector<float>& b) {
    return memplan::test::compare(a, b);
}

} // namespace

TEST_CASE("test_support.compare.same_minus_infinity_agrees") {
    const auto r = compare_vectors({1.0f, -compare_inf, 3.0f}, {1.0f, -compare_inf, 3.0f});
    CHECK(r.mismatched == 0);
    CHECK(r.nonfinite == 1);
    CHECK(r.relative == 0.0);
    CHECK(r.agrees(2e-3));
}

TEST_CASE("test_support.compare.infinity_against_finite_disagrees") {
    const auto r = compare_vectors({1.0f, -compare_inf, 3.0f}, {1.0f, -1e30f, 3.0f});
    CHECK(r.mismatched == 1);
    CHECK(r.first_mismatch == 1);
    CHECK(std::isinf(r.relative));
    CHECK_FALSE(r.agrees(2e-3));
    // The other way round, and infinities of opposite signs.
    CHECK_FALSE(compare_vectors({2.0f}, {compare_inf}).agrees(2e-3));
    CHECK_FALSE(compare_vectors({compare_inf}, {-compare_inf}).agrees(2e-3));
}

TEST_CASE("test_support.compare.nan_against_nan_agrees") {
    const auto r = compare_vectors({compare_nan, 2.0f}, {compare_nan, 2.0f});
    CHECK(r.mismatched == 0);
    CHECK(r.nonfinite == 1);
    CHECK(r.agrees(2e-3));
    CHECK_FALSE(compare_vectors({compare_nan}, {1.0f}).agrees(2e-3));
    CHECK_FALSE(compare_vectors({compare_nan}, {compare_inf}).agrees(2e-3));
}

TEST_CASE("test_support.compare.scale_comes_from_finite_values") {
    // Scaled by 4 (the largest finite value), not by the infinity.
    const auto r = compare_vectors({-compare_inf, 2.0f, 4.0f}, {-compare_inf, 2.0f, 4.004f});
    CHECK(r.mismatched == 0);
    CHECK(r.relative == doctest::Approx(1e-3).epsilon(1e-3));
    CHECK(r.agrees(2e-3));
    CHECK_FALSE(r.agrees(5e-4));
    // No floor of 1: a tensor of small values is compared relatively too.
    CHECK(compare_vectors({1e-6f, -2e-6f}, {1e-6f, -1e-6f}).relative == doctest::Approx(0.5));
    // All zero on both sides: no difference, no division by zero.
    CHECK(compare_vectors({0.0f, 0.0f}, {0.0f, 0.0f}).relative == 0.0);
}

TEST_CASE("test_support.compare.sizes_must_match") {
    const auto r = compare_vectors({1.0f, 2.0f}, {1.0f});
    CHECK(r.mismatched == 1);
    CHECK(r.first_mismatch == 1);
    CHECK_FALSE(r.agrees(2e-3));
}
