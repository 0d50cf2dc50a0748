// Memory budgets as people write them: "8000000000", "7.5GiB", "8GB", "40%"
// of a reference, or "saved:0.5" (half of what store-all saves for the
// backward), resolved against the store-all plan's figures, for the arena's
// peak or for the bytes at the boundary (remat/boundary.hpp). One parser for
// the command line, benches and configuration files.
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

/// What a budget bounds: the arena (`peak`), or only the bytes live at the
/// boundary between the forward and the backward (`saved`: what any plan
/// holds there and what it saves for the backward, as PyTorch's
/// activation_memory_budget does).
enum class budget_on : std::uint8_t { peak, saved };

constexpr std::string_view to_string(budget_on b) noexcept { return b == budget_on::saved ? "saved" : "peak"; }

/// Parses "peak" or "saved"; `what` names the value in the message. Throws
/// `memplan::error("budget")` naming it and the value.
inline budget_on parse_budget_on(std::string_view what, std::string_view v) {
    if (v == "peak") return budget_on::peak;
    if (v == "saved") return budget_on::saved;
    throw error("budget", std::string(what) + ": expected peak or saved, got '" + std::string(v) + "'");
}

/// The store-all plan's figures a budget is resolved against
/// (remat/boundary.hpp's `boundary_bytes` of its plan).
struct budget_reference {
    std::uint64_t arena = 0;    ///< the store-all arena
    std::uint64_t resident = 0; ///< bytes at the boundary any plan holds (persistent tensors, graph outputs)
    std::uint64_t kept = 0;     ///< the other bytes store-all keeps across the boundary: what it saves
};

/// A memory budget: bytes, a percentage of a reference, or a fraction of
/// what store-all saves for the backward.
struct budget_spec {
    std::uint64_t bytes = 0;
    std::optional<double> percent; ///< set for "60%"
    std::optional<double> saved;   ///< set for "saved:0.6": the fraction of store-all's kept bytes, in (0, 1]

    /// The bound in bytes (rounded down) that the budget sets on what `on`
    /// names, given the store-all plan's figures `r`:
    /// - peak, the arena: bytes as given; P% of r.arena; saved:F,
    ///   r.arena - (1 - F) r.kept (store-all saving F of what it saves);
    /// - saved, the bytes at the boundary: r.resident + bytes (bytes saved on
    ///   top of what is there anyway); P% of r.resident + r.kept; saved:F,
    ///   r.resident + F r.kept.
    std::uint64_t of(const budget_reference& r, budget_on on = budget_on::peak) const {
        const auto resident = static_cast<long double>(r.resident);
        const auto kept = static_cast<long double>(r.kept);
        if (on == budget_on::peak) {
            if (percent) return down(static_cast<long double>(r.arena) * static_cast<long double>(*percent) / 100.0L);
            if (saved) return down(static_cast<long double>(r.arena) - (1.0L - static_cast<long double>(*saved)) * kept);
            return bytes;
        }
        if (percent) return down((resident + kept) * static_cast<long double>(*percent) / 100.0L);
        if (saved) return down(resident + static_cast<long double>(*saved) * kept);
        return r.resident > UINT64_MAX - bytes ? UINT64_MAX : r.resident + bytes;
    }

    /// The arena bound given only the store-all arena: bytes, or P% of it.
    /// Throws `memplan::error("budget")` for saved:F, which needs what
    /// store-all keeps across the boundary (the overload above).
    std::uint64_t of(std::uint64_t arena) const {
        if (saved)
            throw error("budget", "a budget of saved:F needs the bytes store-all saves for the backward, not only "
                                  "its arena");
        return of(budget_reference{arena, 0, 0});
    }

private:
    static std::uint64_t down(long double b) {
        if (!(b > 0)) return 0;
        return b >= 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(b);
    }
};

/// Parses "BYTES", "N KiB|MiB|GiB|TiB|KB|MB|GB|TB" (no space needed), "P%"
/// or "saved:F" (F in (0, 1]); `what` names the value in the message (an
/// option, a field). Throws `memplan::error("budget")` naming it and the value.
inline budget_spec parse_budget(std::string_view what, const std::string& v) {
    auto bad = [&]() -> error {
        return error("budget", std::string(what) + ": expected bytes (e.g. 8000000000 or 7.5GiB), a percentage of "
                               "the store-all arena (e.g. 50%) or saved:F (F in (0, 1]), got '" + v + "'");
    };
    if (v.empty() || v.size() > 40 || v.find_first_of(" \t") != std::string::npos) throw bad();
    if (v.starts_with("saved:")) {
        const char* f = v.c_str() + 6;
        char* end = nullptr;
        const double x = std::strtod(f, &end);
        if (end == f || *end != '\0' || !std::isfinite(x) || !(x > 0) || x > 1 || *f == '+' || *f == '-')
            throw error("budget", std::string(what) + ": saved:F wants a fraction F in (0, 1] of what store-all "
                                                      "saves for the backward, got '" + v + "'");
        budget_spec out;
        out.saved = x;
        return out;
    }
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
