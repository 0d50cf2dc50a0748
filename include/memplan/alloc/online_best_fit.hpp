// What a framework's caching allocator does (ggml-alloc, ONNX Runtime's arena,
// PyTorch's caching allocator without its size classes): walk the time points
// in order, free the items that ended, then allocate the items that start,
// larger first, each into the best-fitting free hole of the arena (freed
// neighbours coalesce), growing the arena when no hole fits. It sees no
// future lifetimes, which is why it can end up near 2x the lower bound.
#pragma once

#include <memplan/alloc/greedy.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/detail/checked.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

struct online_best_fit {
    static constexpr std::string_view name = "online_best_fit";

    /// Simulates the allocator; status `error` when the arena overflows
    /// `Size`. Throws `memplan::error` on a malformed problem.
    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        return detail::run_pass(p, [&](std::vector<Size>& offsets) { return simulate(p, offsets); });
    }

private:
    template <class Size>
    static bool simulate(const basic_alloc_problem<Size>& p, std::vector<Size>& offsets) {
        // Events (time, kind, item): frees (kind 0) before allocations (kind 1)
        // at the same time, since lifetimes are half-open; allocations larger first.
        struct event {
            std::uint64_t time;
            int kind;
            Size size;
            std::size_t item;
        };
        std::vector<event> events;
        for (std::size_t i = 0; i < p.items.size(); ++i) {
            const auto& it = p.items[i];
            if (!detail::is_live(it)) continue;
            const Size size = *detail::checked_align_up<Size>(it.size, p.alignment);
            events.push_back({it.begin, 1, size, i});
            events.push_back({it.end, 0, size, i});
        }
        std::sort(events.begin(), events.end(), [](const event& a, const event& b) {
            if (a.time != b.time) return a.time < b.time;
            if (a.kind != b.kind) return a.kind < b.kind;
            if (a.size != b.size) return a.size > b.size;
            return a.item < b.item;
        });

        std::map<Size, Size> holes_by_offset;       // offset -> length
        std::set<std::pair<Size, Size>> holes_by_fit; // (length, offset): best fit, lowest offset on ties
        Size arena = 0;
        auto add_hole = [&](Size off, Size len) {
            holes_by_offset.emplace(off, len);
            holes_by_fit.emplace(len, off);
        };
        auto remove_hole = [&](typename std::map<Size, Size>::iterator h) {
            holes_by_fit.erase({h->second, h->first});
            return holes_by_offset.erase(h);
        };

        for (const auto& e : events) {
            if (e.kind == 0) { // free, coalescing with the holes on either side
                Size off = offsets[e.item], len = e.size;
                auto next = holes_by_offset.lower_bound(off);
                if (next != holes_by_offset.end() && next->first == off + len) {
                    len += next->second;
                    next = remove_hole(next);
                }
                if (next != holes_by_offset.begin()) {
                    auto prev = std::prev(next);
                    if (prev->first + prev->second == off) {
                        off = prev->first;
                        len += prev->second;
                        remove_hole(prev);
                    }
                }
                add_hole(off, len);
                continue;
            }
            auto fit = holes_by_fit.lower_bound({e.size, Size{0}});
            if (fit != holes_by_fit.end()) {
                const auto [len, off] = *fit;
                remove_hole(holes_by_offset.find(off));
                if (len > e.size) add_hole(off + e.size, len - e.size);
                offsets[e.item] = off;
                continue;
            }
            // No hole fits: grow the arena, reusing a free block at its top if there is one.
            Size off = arena;
            if (!holes_by_offset.empty()) {
                auto last = std::prev(holes_by_offset.end());
                if (last->first + last->second == arena) {
                    off = last->first;
                    remove_hole(last);
                }
            }
            const auto top = detail::checked_add<Size>(off, e.size);
            if (!top) return false;
            arena = *top;
            offsets[e.item] = off;
        }
        return true;
    }
};

} // namespace memplan
