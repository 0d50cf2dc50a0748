// Memory budgets as people write them: "8000000000", "7.5GiB", "8GB", "40%"
// of a reference, "saved:0.5" (half of what store-all saves for the
// backward) or "fraction:0.5" (halfway from the smallest peak a planner
// reaches to store-all's), resolved against the store-all plan's figures,
// for the arena's peak or for the bytes at the boundary
// (remat/boundary.hpp). One parser for the command line, benches and
// configuration files.
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
    /// The smallest arena a planner reached (fraction:0 of a peak budget;
    /// remat/pareto.hpp's smallest_budget_search), when the budget needs it.
    std::uint64_t floor = 0;
};

/// A memory budget: bytes, a percentage of a reference, a fraction of what
/// store-all saves for the backward, or a fraction of the way from the
/// smallest peak to store-all's.
struct budget_spec {
    std::uint64_t bytes = 0;
    std::optional<double> percent;  ///< set for "60%"
    std::optional<double> saved;    ///< set for "saved:0.6": the fraction of store-all's kept bytes, in (0, 1]
    std::optional<double> fraction; ///< set for "fraction:0.6", in [0, 1]

    /// Whether `of` needs `budget_reference::floor` for what `on` names
    /// (a fraction of a peak budget below 1).
    bool needs_floor(budget_on on = budget_on::peak) const noexcept {
        return fraction && on == budget_on::peak && *fraction < 1;
    }

    /// The bound in bytes (rounded down) that the budget sets on what `on`
    /// names, given the store-all plan's figures `r`:
    /// - peak, the arena: bytes as given; P% of r.arena; saved:F,
    ///   r.arena - (1 - F) r.kept (store-all saving F of what it saves);
    ///   fraction:F, r.floor + F (r.arena - r.floor) (F = 1: r.arena);
    /// - saved, the bytes at the boundary: r.resident + bytes (bytes saved on
    ///   top of what is there anyway); P% of r.resident + r.kept; saved:F
    ///   and fraction:F, r.resident + F r.kept.
    std::uint64_t of(const budget_reference& r, budget_on on = budget_on::peak) const {
        const auto resident = static_cast<long double>(r.resident);
        const auto kept = static_cast<long double>(r.kept);
        if (on == budget_on::peak) {
            if (percent) return down(static_cast<long double>(r.arena) * static_cast<long double>(*percent) / 100.0L);
            if (saved) return down(static_cast<long double>(r.arena) - (1.0L - static_cast<long double>(*saved)) * kept);
            if (fraction) {
                if (*fraction >= 1 || r.floor >= r.arena) return r.arena;
                return r.floor + static_cast<std::uint64_t>(static_cast<long double>(*fraction) *
                                                            static_cast<long double>(r.arena - r.floor));
            }
            return bytes;
        }
        if (percent) return down((resident + kept) * static_cast<long double>(*percent) / 100.0L);
        if (saved || fraction) return down(resident + static_cast<long double>(saved ? *saved : *fraction) * kept);
        return r.resident > UINT64_MAX - bytes ? UINT64_MAX : r.resident + bytes;
    }

    /// The arena bound given only the store-all arena: bytes, or P% of it.
    /// Throws `memplan::error("budget")` for saved:F, which needs what
    /// store-all keeps across the boundary, and for fraction:F below 1,
    /// which needs the smallest peak (the overload above).
    std::uint64_t of(std::uint64_t arena) const {
        if (saved)
            throw error("budget", "a budget of saved:F needs the bytes store-all saves for the backward, not only "
                                  "its arena");
        if (needs_floor())
            throw error("budget", "a budget of fraction:F needs the smallest peak a planner reaches, not only the "
                                  "store-all arena");
        return of(budget_reference{arena, 0, 0});
    }

private:
    static std::uint64_t down(long double b) {
        if (!(b > 0)) return 0;
        return b >= 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(b);
    }
};

/// Parses "BYTES", "N KiB|MiB|GiB|TiB|KB|MB|GB|TB" (no space needed), "P%",
/// "saved:F" (F in (0, 1]) or "fraction:F" (F in [0, 1]); `what` names the
/// value in the message (an option, a field). Throws
/// `memplan::error("budget")` naming it and the value.
inline budget_spec parse_budget(std::string_view what, const std::string& v) {
    auto bad = [&]() -> error {
        return error("budget", std::string(what) + ": expected bytes (e.g. 8000000000 or 7.5GiB), a percentage of "
                               "the store-all arena (e.g. 50%), fraction:F or saved:F (F a fraction), got '" + v + "'");
    };
    if (v.empty() || v.size() > 40 || v.find_first_of(" \t") != std::string::npos) throw bad();
    // F of fraction:F and saved:F: a plain decimal number, within [0, 1] (saved: above 0).
    auto fraction_of = [&](std::size_t prefix, bool zero, std::string_view meaning) {
        const char* f = v.c_str() + prefix;
        char* end = nullptr;
        const double x = std::strtod(f, &end);
        if (end == f || *end != '\0' || !std::isfinite(x) || x < 0 || (!zero && x == 0) || x > 1 || *f == '+' ||
            *f == '-')
            throw error("budget", std::string(what) + ": " + v.substr(0, prefix) + "F wants a fraction F in " +
                                      (zero ? "[0, 1] " : "(0, 1] ") + std::string(meaning) + ", got '" + v + "'");
        return x;
    };
    if (v.starts_with("saved:")) {
        budget_spec out;
        out.saved = fraction_of(6, false, "of what store-all saves for the backward");
        return out;
    }
    if (v.starts_with("fraction:")) {
        budget_spec out;
        out.fraction = fraction_of(9, true, "of the way from the smallest peak to store-all's");
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
