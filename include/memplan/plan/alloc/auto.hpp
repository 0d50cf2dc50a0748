// The default allocator, `auto`: the best heuristic, then the exact search
// until the height is within a relative gap of the lower bound or the time
// runs out. It is what the command line runs unless told otherwise, and what
// a library user should reach for first.
#pragma once

#include <memplan/plan/alloc/exact.hpp>
#include <memplan/plan/alloc/problem.hpp>

#include <functional>
#include <string_view>

namespace memplan {

struct auto_allocator {
    static constexpr std::string_view name = "auto";

    double time_limit_seconds = 10;
    /// Called about once a second while the exact search runs.
    std::function<void(const exact_progress&)> on_progress;

    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        exact ex;
        ex.time_limit_seconds = time_limit_seconds;
        ex.on_progress = on_progress;
        return ex.place(p);
    }
};

} // namespace memplan
