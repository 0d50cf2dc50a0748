// The independent check of an offset assignment (formats.md §3): one offset
// per item, each aligned, no two items live at a common time sharing a byte,
// and everything below the capacity when one is given.
//
// Same sweep as the plan validator (check/validator.hpp), none of the
// allocators' code; rule numbers follow the plan rules they mirror: 0 for
// structure, 4 for overlaps, 5 for alignment and capacity.
#pragma once

#include <memplan/alloc/problem.hpp>
#include <memplan/check/validator.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace memplan {

/// Checks `offsets` (one per item of `p`) and reports every violation, up to
/// `opt.max_violations`. A capacity of 0 means none. Items with no bytes or an
/// empty interval never conflict; an item whose offset + size passes the
/// size type's end is out of any arena. Messages name item k as `names[k]`
/// (e.g. the ids of an offset CSV) when given, else as "item k". Never
/// throws for a bad placement.
template <class Size>
validation_report check_placement(const basic_alloc_problem<Size>& p, const std::vector<Size>& offsets,
                                  Size capacity = 0, check_options opt = {},
                                  const std::vector<std::string>& names = {}) {
    constexpr std::size_t npos = violation::npos;
    auto item = [&](std::size_t k) {
        return k < names.size() ? "item '" + names[k] + "'" : "item " + std::to_string(k);
    };
    validation_report report;
    detail::violation_sink sink(report, opt.max_violations);
    auto str = [](auto v) { return std::to_string(v); };

    if (offsets.size() != p.items.size()) {
        sink.add(0, npos, npos, "", "the placement has " + str(offsets.size()) + " offsets for " +
                                        str(p.items.size()) + " items");
        return report;
    }
    std::vector<char> item_ok(p.items.size(), 1);
    for (std::size_t k = 0; k < p.items.size(); ++k)
        if (p.items[k].begin > p.items[k].end) {
            item_ok[k] = 0;
            sink.add(0, npos, k, "", item(k) + " begins at time " + str(p.items[k].begin) +
                                         ", after its end " + str(p.items[k].end));
        }

    std::vector<detail::swept_item<Size>> swept;
    swept.reserve(p.items.size());
    for (std::size_t k = 0; k < p.items.size(); ++k)
        if (item_ok[k]) swept.push_back({k, p.items[k].begin, p.items[k].end, offsets[k], p.items[k].size});
    if (!sink.full())
        detail::sweep_overlaps(swept, [&](std::size_t a, std::size_t b, std::uint64_t time, Size lo, Size hi) {
            if (a > b) std::swap(a, b);
            sink.add(4, static_cast<std::size_t>(time), a, "",
                     (names.empty() ? "items " + str(a) + " and " + str(b) : item(a) + " and " + item(b)) + " overlap in bytes [" + str(lo) + ", " + str(hi) + ")");
            return !sink.full();
        });

    // The height, computed here (saturating) so that the report can name it.
    Size height = 0;
    for (std::size_t k = 0; k < p.items.size(); ++k)
        height = std::max(height, detail::saturating_add(offsets[k], p.items[k].size));
    const std::string height_text =
        height == std::numeric_limits<Size>::max() ? std::string("beyond the size type") : str(height);
    for (std::size_t k = 0; k < p.items.size() && !sink.full(); ++k) {
        const Size off = offsets[k], size = p.items[k].size;
        if (size > std::numeric_limits<Size>::max() - off) {
            sink.add(5, npos, k, "", item(k) + " spans offset " + str(off) + " + " + str(size) +
                                         " bytes, past the end of the size type: no arena holds it");
            continue;
        }
        if (p.alignment > 1 && off % p.alignment != 0)
            sink.add(5, npos, k, "", item(k) + " is at offset " + str(off) +
                                         ", not a multiple of the alignment " + str(p.alignment));
        if (capacity > 0 && (size > capacity || off > capacity - size))
            sink.add(5, npos, k, "", item(k) + " spans offset " + str(off) + " + " + str(size) +
                                         " bytes, past the capacity " + str(capacity) +
                                         " (the placement's height is " + height_text + ")");
    }
    return report;
}

} // namespace memplan
