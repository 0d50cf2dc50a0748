// Progress lines of long searches on stderr, only when it is a terminal, at
// most about once a second whatever the planner's own pace; erased before
// the command prints its result.
#pragma once

#include <memplan/alloc/exact.hpp>
#include <memplan/remat/remat.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

namespace memplan::cli {

/// The exact search's progress (it calls at most about once a second).
inline std::function<void(const exact_progress&)> alloc_progress_printer() {
    if (!isatty(2)) return {};
    return [](const exact_progress& p) {
        std::fprintf(stderr, "\r  best %llu, bound %llu, %.1f s   ", static_cast<unsigned long long>(p.best_height),
                     static_cast<unsigned long long>(p.lower_bound), p.elapsed_seconds);
        std::fflush(stderr);
    };
}

/// A rematerialization planner's progress.
inline std::function<void(const remat_progress&)> remat_progress_printer() {
    if (!isatty(2)) return {};
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    return [last](const remat_progress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (now - *last < std::chrono::seconds(1)) return;
        *last = now;
        if (p.best_arena)
            std::fprintf(stderr, "\r  %.*s: best arena %llu, overhead %+.2f %%, %.1f s   ",
                         static_cast<int>(p.planner.size()), p.planner.data(),
                         static_cast<unsigned long long>(p.best_arena), 100 * p.best_overhead, p.elapsed_seconds);
        else
            std::fprintf(stderr, "\r  %.*s: no plan yet, %.1f s   ", static_cast<int>(p.planner.size()),
                         p.planner.data(), p.elapsed_seconds);
        std::fflush(stderr);
    };
}

/// Erases a progress line (terminal only).
inline void clear_progress() {
    if (isatty(2)) std::fprintf(stderr, "\r%70s\r", "");
}

} // namespace memplan::cli
