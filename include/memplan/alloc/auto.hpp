// The default allocator, `auto`: the best heuristic, then the exact search
// until the height is within a relative gap of the lower bound (`auto_gap`,
// 1e-4, by default) or the time runs out. It is what the command line runs
// unless told otherwise, and what a library user should reach for first:
// closing the last 0.01 % is rarely worth the whole time limit.
#pragma once

#include <memplan/alloc/exact.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/deadline.hpp>

#include <functional>
#include <string_view>

namespace memplan {

struct auto_allocator {
    static constexpr std::string_view name = "auto";

    memplan::time_limit time_limit = 10.0; ///< seconds from the call, or the caller's deadline
    double gap = auto_gap;          ///< stops once (height - bound) <= gap * bound
    /// Called about once a second while the exact search runs.
    std::function<void(const exact_progress&)> on_progress;

    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        exact ex;
        ex.time_limit = time_limit;
        ex.gap = gap;
        ex.on_progress = on_progress;
        return ex.place(p);
    }
};

} // namespace memplan
