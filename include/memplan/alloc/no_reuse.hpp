// The naive baseline: every item gets its own byte range, stacked in item
// order, as if nothing were ever freed. Its height is the sum of the aligned
// sizes, the figure every real allocator is measured against.
#pragma once

#include <memplan/alloc/greedy.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/detail/checked.hpp>

#include <chrono>
#include <string_view>

namespace memplan {

struct no_reuse {
    static constexpr std::string_view name = "no_reuse";

    /// Stacks the live items in item order. Status `error` when the total
    /// overflows `Size`; throws `memplan::error` on a malformed problem.
    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        return detail::run_pass(p, [&](std::vector<Size>& offsets) {
            Size top = 0;
            for (std::size_t i = 0; i < p.items.size(); ++i) {
                if (!detail::is_live(p.items[i])) continue;
                offsets[i] = top;
                const auto next =
                    detail::checked_add<Size>(top, *detail::checked_align_up<Size>(p.items[i].size, p.alignment));
                if (!next) return false;
                top = *next;
            }
            return true;
        });
    }
};

} // namespace memplan
