// Overflow-checked arithmetic on sizes. Sizes are unsigned; a sum that wraps
// would silently turn a huge plan into a small one, so every accumulation of
// bytes in memplan goes through these helpers.
#pragma once

#include <limits>
#include <optional>
#include <type_traits>

namespace memplan::detail {

template <class T>
    requires std::is_unsigned_v<T>
constexpr std::optional<T> checked_add(T a, T b) noexcept {
    if (a > std::numeric_limits<T>::max() - b) return std::nullopt;
    return static_cast<T>(a + b);
}

template <class T>
    requires std::is_unsigned_v<T>
constexpr std::optional<T> checked_mul(T a, T b) noexcept {
    if (a != 0 && b > std::numeric_limits<T>::max() / a) return std::nullopt;
    return static_cast<T>(a * b);
}

/// Smallest multiple of `alignment` that is >= `value`; nullopt on overflow.
/// An alignment of 0 or 1 leaves the value as it is.
template <class T>
    requires std::is_unsigned_v<T>
constexpr std::optional<T> checked_align_up(T value, T alignment) noexcept {
    if (alignment <= 1) return value;
    const T rem = value % alignment;
    if (rem == 0) return value;
    return checked_add<T>(value, static_cast<T>(alignment - rem));
}

} // namespace memplan::detail
