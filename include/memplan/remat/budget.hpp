// Memory budgets as people write them: "8000000000", "7.5GiB", "8GB", or
// "40%" of a reference arena (the store-all plan's). One parser for the
// command line, benches and configuration files.
#pragma once

#include <memplan/core/error.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace memplan {

/// A memory budget: bytes, or a percentage of a reference arena (the
/// store-all plan's, for rematerialization).
struct budget_spec {
    std::uint64_t bytes = 0;
    std::optional<double> percent; ///< set for "60%"

    /// The budget in bytes given the reference arena (rounded down).
    std::uint64_t of(std::uint64_t reference) const {
        if (!percent) return bytes;
        const long double b = static_cast<long double>(reference) * static_cast<long double>(*percent) / 100.0L;
        return b >= 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(b);
    }
};

/// Parses "BYTES", "N KiB|MiB|GiB|TiB|KB|MB|GB|TB" (no space needed) or
/// "P%"; `what` names the value in the message (an option, a field). Throws
/// `memplan::error("budget")` naming it and the value.
inline budget_spec parse_budget(std::string_view what, const std::string& v) {
    auto bad = [&]() -> error {
        return error("budget", std::string(what) + ": expected bytes (e.g. 8000000000 or 7.5GiB) or a "
                               "percentage of the store-all arena (e.g. 50%), got '" + v + "'");
    };
    if (v.empty() || v.size() > 40 || v.find_first_of(" \t") != std::string::npos) throw bad();
    const char* b = v.c_str();
    char* end = nullptr;
    const double x = std::strtod(b, &end);
    if (end == b || !std::isfinite(x) || !(x > 0) || v[0] == '+' || v[0] == '-') throw bad();
    const std::string_view unit(end);
    budget_spec out;
    if (unit == "%") {
        if (x > 1e6) throw bad();
        out.percent = x;
        return out;
    }
    static constexpr struct {
        std::string_view name;
        double factor;
    } units[] = {{"", 1},        {"B", 1},        {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
                 {"KB", 1e3},    {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12}};
    for (const auto& u : units) {
        if (u.name != unit) continue;
        // Plain byte counts must be whole numbers; with a unit, fractions round down.
        if (unit.empty() || unit == "B") {
            std::uint64_t n = 0;
            const auto [p, ec] = std::from_chars(b, b + v.size() - unit.size(), n);
            if (ec != std::errc{} || p != b + v.size() - unit.size() || n == 0) throw bad();
            out.bytes = n;
            return out;
        }
        const double bytes = x * u.factor;
        if (!(bytes >= 1) || bytes >= 1.8e19) throw bad();
        out.bytes = static_cast<std::uint64_t>(bytes);
        return out;
    }
    throw bad();
}

} // namespace memplan
