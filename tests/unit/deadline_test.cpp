// The one clock (core/deadline.hpp): shares never end after their parent,
// expiry, the unlimited deadline; and a deadline handed down stops the exact
// search, which also stops early once within its relative gap.
#include <memplan/alloc/exact.hpp>
#include <memplan/core/deadline.hpp>
#include <memplan/remat/remat.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>

using namespace memplan;

TEST_CASE("deadline.unlimited") {
    const deadline d;
    CHECK(d.unlimited());
    CHECK(d == deadline::none());
    CHECK_FALSE(d.expired());
    CHECK(std::isinf(d.remaining()));
    CHECK(d.share(0.5).unlimited());
    CHECK(deadline::after(std::numeric_limits<double>::infinity()).unlimited());
    CHECK(d.within(std::numeric_limits<double>::infinity()).unlimited());
    CHECK_FALSE(d.within(5).unlimited());
}

TEST_CASE("deadline.expiry") {
    CHECK(deadline::passed().expired());
    CHECK(deadline::after(0.0).expired());
    CHECK(deadline::after(-3.0).expired());
    CHECK(deadline::after(std::nan("")).expired());
    CHECK(deadline::after(0.0).remaining() == 0.0);
    const auto d = deadline::after(std::chrono::milliseconds(30));
    CHECK_FALSE(d.expired());
    CHECK(d.remaining() <= 0.03);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    CHECK(d.expired());
    CHECK(d.remaining() == 0.0);
    CHECK(d.share(0.5).expired());
}

TEST_CASE("deadline.shares_never_end_after_the_parent") {
    const auto parent = deadline::after(10.0);
    CHECK(parent.remaining() > 9.0);
    CHECK(parent.remaining() <= 10.0);
    for (double f : {0.0, 1e-9, 0.1, 0.5, 0.999, 1.0, 2.0, 1e300}) {
        const auto s = parent.share(f);
        CHECK(s.end() <= parent.end());
        CHECK(s.share(0.5).end() <= s.end());
    }
    CHECK(parent.share(1.0) == parent);
    CHECK(parent.share(5.0) == parent);
    CHECK(parent.share(0.0).expired());
    CHECK(parent.share(-1.0).expired());
    CHECK(parent.share(std::nan("")).expired());
    const double half = parent.share(0.5).remaining();
    CHECK(half > 4.0);
    CHECK(half <= 5.0);
    // within: the earlier of the two.
    CHECK(parent.within(1.0).remaining() <= 1.0);
    CHECK(parent.within(100.0) == parent);
    CHECK(earliest(parent, deadline::none()) == parent);
    CHECK(earliest(parent.share(0.1), parent).end() < parent.end());
    CHECK(earliest(deadline::none(), parent.within(1.0)).end() <= parent.end());
}

namespace {

// One huge block live all the time and two 1-byte blocks beside it: with
// 256-byte alignment no placement meets the (unaligned) lower bound, and the
// best one is 255 bytes above it, a relative gap of about 2e-7.
alloc_problem almost_at_the_bound() {
    alloc_problem p;
    p.alignment = 256;
    p.items.push_back({std::uint64_t{1} << 30, 0, 4});
    p.items.push_back({1, 0, 4});
    p.items.push_back({1, 1, 3});
    return p;
}

} // namespace

TEST_CASE("alloc.exact.gap_stops_within_the_gap_of_the_bound") {
    const auto p = almost_at_the_bound();
    exact e;
    e.time_limit = 30;
    e.gap = auto_gap;
    const auto r = e.place(p);
    INFO(r.message);
    REQUIRE(has_solution(r.status));
    CHECK(r.status == status::feasible); // not proven: it stopped at the gap
    CHECK(r.message.find("gap") != std::string::npos);
    CHECK(r.size > r.bound);
    CHECK(static_cast<double>(r.size - r.bound) <= auto_gap * static_cast<double>(r.size));
    CHECK(r.seconds < 5.0); // well before its 30 s limit

    // Without a gap, the search goes on to prove the height optimal.
    e.gap = 0;
    const auto proven = e.place(p);
    CHECK(proven.status == status::optimal);
    CHECK(proven.size == r.size);
}

TEST_CASE("alloc.exact.stops_at_a_deadline_handed_down") {
    const auto p = almost_at_the_bound();
    exact e;
    e.time_limit = deadline::passed();
    const auto r = e.place(p); // a heuristic placement, no search
    REQUIRE(has_solution(r.status));
    CHECK(r.status == status::feasible);
    CHECK(r.seconds < 5.0);
}

TEST_CASE("deadline.time_limit_resolves_to_the_earlier_of_its_seconds_and_its_deadline") {
    // Seconds from the call and a deadline: the earlier one applies.
    const auto far = deadline::after(100.0);
    CHECK(time_limit(far, 1).from_now().remaining() <= 1.0);
    CHECK(time_limit(far, 1000).from_now().remaining() <= 100.0);
    CHECK(time_limit(far, 1000).from_now().remaining() > 99.0);
    // Seconds alone count from the moment it is resolved; a deadline alone stays itself.
    CHECK(time_limit(5.0).from_now().remaining() > 4.0);
    CHECK(time_limit(far).from_now() == far);
    CHECK(time_limit().from_now().unlimited());
    // What options are written with: a number of seconds, a deadline, or both.
    remat_options o;
    o.time_limit = 2;
    CHECK(o.time_limit.seconds() == 2.0);
    CHECK(o.time_limit.until().unlimited());
    o.time_limit = far;
    CHECK(std::isinf(o.time_limit.seconds()));
    o.time_limit = {far, 3};
    CHECK(o.time_limit.seconds() == 3.0);
    CHECK(o.time_limit.until() == far);
}
