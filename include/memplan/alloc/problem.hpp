// Offset assignment for a fixed schedule (dynamic storage allocation): items
// with a size and a half-open live interval [begin, end) get offsets so that
// items live at the same time never share a byte. This is the form shared by
// every allocator, by the MiniMalloc CSV format (formats.md §3) and by plans.
#pragma once

#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/core/status.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

template <class Size = std::uint64_t>
struct basic_alloc_item {
    Size size = 0;
    std::uint64_t begin = 0; ///< first time point live
    std::uint64_t end = 0;   ///< one past the last time point live

    /// Never live when begin == end; such items overlap nothing.
    bool overlaps_in_time(const basic_alloc_item& o) const noexcept {
        return begin < end && o.begin < o.end && begin < o.end && o.begin < end;
    }
};

template <class Size = std::uint64_t>
struct basic_alloc_problem {
    using size_type = Size;
    std::vector<basic_alloc_item<Size>> items;
    Size alignment = 1; ///< every offset must be a multiple of it (0 and 1: none)
    /// Largest height allowed; 0: none. Heuristics ignore it (the caller checks
    /// the height); exact planners use it in decision mode.
    Size capacity = 0;
};

template <class Size = std::uint64_t>
struct basic_alloc_result {
    memplan::status status = memplan::status::error;
    std::string message;       ///< reason for infeasible / error; empty otherwise
    Size bound = 0;            ///< proven lower bound on `size` (at least the summed sizes live at one time)
    Size size = 0;             ///< the height: max over items of offset + size
    double seconds = 0;        ///< wall time spent placing
    std::vector<Size> offsets; ///< one per item

    /// size / bound (1 when both are 0).
    double ratio() const noexcept {
        return bound == 0 ? (size == 0 ? 1.0 : 0.0) : static_cast<double>(size) / static_cast<double>(bound);
    }
};

using alloc_item = basic_alloc_item<>;
using alloc_problem = basic_alloc_problem<>;
using alloc_result = basic_alloc_result<>;

/// Rejects items with begin > end and sizes that overflow when aligned.
/// (Heights that pass the size type are an allocator's `error` status, or,
/// for plans, refused by `make_plan` naming the tensor.)
template <class Size>
void validate(const basic_alloc_problem<Size>& p) {
    for (std::size_t i = 0; i < p.items.size(); ++i) {
        const auto& it = p.items[i];
        if (it.begin > it.end)
            throw error("alloc", "item " + std::to_string(i) + " has begin " + std::to_string(it.begin) +
                                     " after end " + std::to_string(it.end));
        if (!detail::checked_align_up<Size>(it.size, p.alignment))
            throw error("alloc", "item " + std::to_string(i) + " (" + std::to_string(it.size) +
                                     " bytes) overflows the size type when aligned to " +
                                     std::to_string(p.alignment));
    }
}

/// Whether the sizes of `p`, each aligned, sum within the size type: then no
/// placement an allocator makes is higher than the sum, and no offset + size
/// can wrap.
template <class Size>
bool aligned_sizes_fit(const basic_alloc_problem<Size>& p) noexcept {
    Size total = 0;
    for (const auto& it : p.items) {
        const auto aligned = detail::checked_align_up<Size>(it.size, p.alignment);
        const auto sum = aligned ? detail::checked_add<Size>(total, *aligned) : std::nullopt;
        if (!sum) return false;
        total = *sum;
    }
    return true;
}

/// Max over time of the summed sizes of the items live then. Sweep over the
/// sorted interval ends: O(n log n).
template <class Size>
Size lower_bound(const basic_alloc_problem<Size>& p) {
    // ((time, 0 = end / 1 = start), size): ends sort first at equal times (half-open intervals).
    std::vector<std::pair<std::pair<std::uint64_t, int>, Size>> events;
    events.reserve(2 * p.items.size());
    for (const auto& it : p.items) {
        if (it.begin >= it.end || it.size == 0) continue;
        events.push_back({{it.begin, 1}, it.size});
        events.push_back({{it.end, 0}, it.size});
    }
    std::sort(events.begin(), events.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    Size cur = 0, best = 0;
    for (const auto& [key, size] : events) {
        if (key.second == 1) {
            auto s = detail::checked_add<Size>(cur, size);
            if (!s) throw error("alloc", "live sizes overflow the size type at time " + std::to_string(key.first));
            cur = *s;
            best = std::max(best, cur);
        } else {
            cur -= size;
        }
    }
    return best;
}

/// An allocation policy: a type with a `name` and a `place` member that
/// returns one offset per item (each a multiple of the problem's alignment),
/// with no two time-overlapping items sharing a byte. Heuristics ignore the
/// capacity; exact policies honour it and report `infeasible`.
template <class A, class Size = std::uint64_t>
concept AllocatorLike = requires(const A& a, const basic_alloc_problem<Size>& p) {
    { A::name } -> std::convertible_to<std::string_view>;
    { a.place(p) } -> std::same_as<basic_alloc_result<Size>>;
};

/// Height of a placement: max over items of offset + size.
template <class Size>
Size placement_height(const basic_alloc_problem<Size>& p, const std::vector<Size>& offsets) {
    Size h = 0;
    for (std::size_t i = 0; i < p.items.size() && i < offsets.size(); ++i)
        if (p.items[i].size > 0 && p.items[i].begin < p.items[i].end) h = std::max<Size>(h, offsets[i] + p.items[i].size);
    return h;
}

} // namespace memplan
