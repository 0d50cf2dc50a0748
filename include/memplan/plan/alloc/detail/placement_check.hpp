// The allocators' own last check of a placement they are about to return:
// one offset per item, aligned, below the capacity, and no byte shared by two
// items live at a common time. It accepts exactly what check/placement.hpp's
// check_placement accepts, but reports only the first fault: planners sit
// below the independent validators in the layers (docs/architecture.md), so
// they cannot call them.
#pragma once

#include <memplan/plan/alloc/problem.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace memplan::detail {

/// The first fault of `offsets` as a placement of `p` within `capacity` (0:
/// none), or nullopt when there is none. A sweep over time that keeps the
/// live items ordered by offset: an item entering overlaps a live one only
/// if it overlaps its neighbour in that order. O(n log n).
template <class Size>
std::optional<std::string> placement_fault(const basic_alloc_problem<Size>& p, const std::vector<Size>& offsets,
                                           Size capacity = 0) {
    const auto& items = p.items;
    if (offsets.size() != items.size())
        return std::to_string(offsets.size()) + " offsets for " + std::to_string(items.size()) + " items";
    for (std::size_t k = 0; k < items.size(); ++k) {
        const Size off = offsets[k], size = items[k].size;
        if (items[k].begin > items[k].end) return "item " + std::to_string(k) + " begins after its end";
        if (p.alignment > 1 && off % p.alignment != 0) return "item " + std::to_string(k) + " is not aligned";
        if (capacity > 0 && (size > capacity || off > capacity - size))
            return "item " + std::to_string(k) + " ends past the capacity";
    }
    // (time, 0 = leaves / 1 = enters, item): at equal times leaving comes
    // first, the intervals being half-open.
    std::vector<std::tuple<std::uint64_t, int, std::size_t>> events;
    events.reserve(2 * items.size());
    for (std::size_t k = 0; k < items.size(); ++k)
        if (items[k].size > 0 && items[k].begin < items[k].end) {
            events.emplace_back(items[k].begin, 1, k);
            events.emplace_back(items[k].end, 0, k);
        }
    std::sort(events.begin(), events.end());
    auto top_of = [&](std::size_t k) {
        const Size off = offsets[k], size = items[k].size;
        return off > std::numeric_limits<Size>::max() - size ? std::numeric_limits<Size>::max() : Size(off + size);
    };
    std::map<Size, std::size_t> live; // offset -> item; offsets of live items are distinct while nothing overlaps
    for (const auto& [time, enters, k] : events) {
        if (!enters) {
            live.erase(offsets[k]);
            continue;
        }
        const auto next = live.lower_bound(offsets[k]);
        std::optional<std::size_t> other;
        if (next != live.end() && next->first < top_of(k)) other = next->second;
        else if (next != live.begin() && top_of(std::prev(next)->second) > offsets[k]) other = std::prev(next)->second;
        if (other)
            return "items " + std::to_string(std::min(k, *other)) + " and " + std::to_string(std::max(k, *other)) +
                   " share bytes at time " + std::to_string(time);
        live.emplace(offsets[k], k);
    }
    return std::nullopt;
}

} // namespace memplan::detail
