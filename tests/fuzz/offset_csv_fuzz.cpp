// libFuzzer harness for the offset CSV reader (io/offset_csv.hpp).
// Bad input must end in memplan::error. An accepted instance is placed with
// greedy_by_size and check_placement must accept the result; a given offset
// column is checked (a report, never a throw) and, on small instances, must
// agree with a brute-force check in 128-bit arithmetic; the writer round-trips.
#include "fuzz_support.hpp"

#include <memplan/alloc/greedy.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/io/offset_csv.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

/// Placing is the expensive step; larger instances are only read and written.
constexpr std::size_t max_placed_rows = 2000;
/// The brute-force check is quadratic.
constexpr std::size_t max_brute_force_rows = 256;

/// An independent judgement of `offsets` (alignment 1, no capacity), none of
/// check_placement's code: every pair of live items, byte ranges compared
/// without wrapping.
struct brute_force_verdict {
    bool overlap = false;
    bool live_overflow = false; ///< a live item (bytes, non-empty lifetime) ends past 2^64 - 1
    bool any_overflow = false;  ///< any item does
};

brute_force_verdict brute_force_check(const memplan::alloc_problem& p, const std::vector<std::uint64_t>& offsets) {
    using u128 = unsigned __int128;
    constexpr u128 limit = static_cast<u128>(static_cast<std::uint64_t>(-1));
    brute_force_verdict v;
    auto live = [&](std::size_t i) { return p.items[i].size > 0 && p.items[i].begin < p.items[i].end; };
    for (std::size_t i = 0; i < p.items.size(); ++i) {
        if (static_cast<u128>(offsets[i]) + p.items[i].size > limit) {
            v.any_overflow = true;
            if (live(i)) v.live_overflow = true;
        }
        if (!live(i)) continue;
        for (std::size_t j = i + 1; j < p.items.size(); ++j) {
            if (!live(j)) continue;
            const auto &a = p.items[i], &b = p.items[j];
            const bool same_time = std::max(a.begin, b.begin) < std::min(a.end, b.end);
            const bool same_bytes = std::max<u128>(offsets[i], offsets[j]) <
                                    std::min(static_cast<u128>(offsets[i]) + a.size, static_cast<u128>(offsets[j]) + b.size);
            if (same_time && same_bytes) v.overlap = true;
        }
    }
    return v;
}

/// check_placement's report on `offsets` must agree with the brute force:
/// an overlap or a live item past 2^64 is invalid; without either (and with
/// no item past 2^64 at all) the placement is valid.
void check_placement_agrees(const memplan::alloc_problem& p, const std::vector<std::uint64_t>& offsets,
                            std::string_view whose) {
    const auto report = memplan::check_placement(p, offsets);
    if (p.items.size() > max_brute_force_rows) return;
    const auto v = brute_force_check(p, offsets);
    if ((v.overlap || v.live_overflow) && report.ok())
        memplan_fuzz::fail("check_placement accepts an invalid placement", whose);
    if (!v.overlap && !v.any_overflow && !report.ok())
        memplan_fuzz::fail("check_placement rejects a valid placement", std::string(whose) + "\n" + report.to_string());
}

void check_round_trip(const memplan::offset_csv& csv, const std::vector<std::uint64_t>& offsets) {
    std::string text;
    try {
        text = memplan::format_offset_csv(csv, offsets);
    } catch (const memplan::error&) {
        return; // an id the format cannot carry (a '\r' inside it): a documented refusal
    }
    memplan::offset_csv back;
    try {
        back = memplan::parse_offset_csv(text, "roundtrip.csv");
    } catch (const memplan::error& e) {
        memplan_fuzz::fail("parse_offset_csv rejects what format_offset_csv wrote", std::string(e.what()) + "\n" + text);
    }
    bool same = back.ids == csv.ids && back.offsets && *back.offsets == offsets &&
                back.problem.items.size() == csv.problem.items.size();
    for (std::size_t i = 0; same && i < csv.problem.items.size(); ++i) {
        const auto &a = csv.problem.items[i], &b = back.problem.items[i];
        same = a.size == b.size && a.begin == b.begin && a.end == b.end;
    }
    if (!same) memplan_fuzz::fail("offset CSV round trip differs", text);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = memplan_fuzz::as_text(data, size);
    const auto csv_read = memplan_fuzz::accepted([&] { return memplan::parse_offset_csv(text, "fuzz.csv"); });
    if (!csv_read) return 0; // bad input ended in memplan::error, as promised
    const auto& csv = *csv_read;

    // A given placement is judged, never thrown at, and judged right.
    if (csv.offsets) {
        check_placement_agrees(csv.problem, *csv.offsets, "the offset column");
        check_round_trip(csv, *csv.offsets);
    }

    if (csv.problem.items.size() > max_placed_rows) return 0;
    // A size that overflows when aligned is an allowed refusal.
    const auto placed_read = memplan_fuzz::accepted([&] { return memplan::greedy_by_size{}.place(csv.problem); });
    if (!placed_read || !memplan::has_solution(placed_read->status)) return 0;
    const auto& placed = *placed_read;
    const auto report = memplan::check_placement(csv.problem, placed.offsets);
    if (!report.ok()) memplan_fuzz::fail("check_placement rejects greedy_by_size's placement", report.to_string());
    check_placement_agrees(csv.problem, placed.offsets, "greedy_by_size's placement");
    check_round_trip(csv, placed.offsets);
    return 0;
}
