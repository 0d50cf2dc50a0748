// One clock for a whole command: the point in time after which a planner
// stops and returns the best it has (OR-tools passes its TimeLimit down the
// same way). Planners take a deadline instead of a number of seconds plus a
// start time of their own, so the phases of one call (an order, then its
// allocation; every point of a Pareto sweep) share one limit, and a phase
// that splits its time takes a named share of what is left: a share never
// ends after its parent.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace memplan {

class deadline {
public:
    using clock = std::chrono::steady_clock;

    /// No limit.
    constexpr deadline() noexcept = default;
    static constexpr deadline none() noexcept { return deadline{}; }

    /// `seconds` from now. Infinite (or more than a century): no limit;
    /// zero, negative or NaN: already expired.
    static deadline after(double seconds) noexcept {
        if (std::isnan(seconds)) seconds = 0;
        if (seconds > max_seconds) return none();
        return at(clock::now() + to_duration(std::max(0.0, seconds)));
    }
    template <class Rep, class Period>
    static deadline after(std::chrono::duration<Rep, Period> d) noexcept {
        return after(std::chrono::duration<double>(d).count());
    }
    /// A deadline that has already passed: a step given it skips whatever
    /// is optional (an exact search after a heuristic).
    static deadline passed() noexcept { return at(clock::now()); }
    static constexpr deadline at(clock::time_point end) noexcept {
        deadline d;
        d.end_ = end;
        return d;
    }

    constexpr bool unlimited() const noexcept { return end_ == clock::time_point::max(); }
    /// The point in time; `clock::time_point::max()` when unlimited.
    constexpr clock::time_point end() const noexcept { return end_; }
    /// Seconds left: 0 once expired, infinity when unlimited.
    double remaining() const noexcept {
        if (unlimited()) return std::numeric_limits<double>::infinity();
        const auto now = clock::now();
        return now >= end_ ? 0.0 : std::chrono::duration<double>(end_ - now).count();
    }
    bool expired() const noexcept { return !unlimited() && clock::now() >= end_; }

    /// A deadline `fraction` (clamped to [0, 1]) of the time left from now:
    /// never later than this one; unlimited stays unlimited.
    deadline share(double fraction) const noexcept {
        if (unlimited()) return *this;
        const auto now = clock::now();
        if (now >= end_ || !(fraction > 0)) return at(std::min(now, end_));
        if (fraction >= 1) return *this;
        const auto part = std::chrono::duration_cast<clock::duration>((end_ - now) * fraction);
        return at(std::min(end_, now + part));
    }
    /// This deadline, or `seconds` from now when that comes first.
    deadline within(double seconds) const noexcept { return earliest(*this, after(seconds)); }

    friend constexpr deadline earliest(deadline a, deadline b) noexcept { return a.end_ <= b.end_ ? a : b; }
    friend constexpr bool operator==(deadline a, deadline b) noexcept { return a.end_ == b.end_; }

private:
    // A century: beyond it a time point may overflow the clock's representation.
    static constexpr double max_seconds = 100.0 * 365 * 24 * 3600;

    static clock::duration to_duration(double seconds) noexcept {
        return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
    }

    clock::time_point end_ = clock::time_point::max();
};

/// How long a call may run, as its options say it: seconds counted from the
/// moment the call starts, a deadline (a caller hands its own down: one
/// clock for a whole command), or both, whichever comes first. A planner
/// resolves it once, at its entry (`from_now`), into the deadline its steps
/// share.
///
///     o.time_limit = 5;          // five seconds from the call
///     o.time_limit = until;      // the caller's deadline
///     o.time_limit = {until, 5}; // both
class time_limit {
public:
    /// No limit.
    constexpr time_limit() noexcept = default;
    /// `seconds` from the start of the call (infinity: none).
    constexpr time_limit(double seconds) noexcept : seconds_(seconds) {}
    /// By `d`.
    constexpr time_limit(deadline d) noexcept : until_(d) {}
    /// By `d`, and at most `seconds` from the start of the call.
    constexpr time_limit(deadline d, double seconds) noexcept : seconds_(seconds), until_(d) {}

    /// The deadline of a call that starts now.
    deadline from_now() const noexcept { return until_.within(seconds_); }
    constexpr double seconds() const noexcept { return seconds_; }
    constexpr deadline until() const noexcept { return until_; }

private:
    double seconds_ = std::numeric_limits<double>::infinity();
    deadline until_{};
};

/// A stopwatch for the `seconds` a result reports (not a limit: limits are deadlines).
class stopwatch {
public:
    stopwatch() noexcept : start_(deadline::clock::now()) {}
    double seconds() const noexcept {
        return std::chrono::duration<double>(deadline::clock::now() - start_).count();
    }

private:
    deadline::clock::time_point start_;
};

} // namespace memplan
