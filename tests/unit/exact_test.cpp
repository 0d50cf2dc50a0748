// The exact offset search: brute force on small random instances, decision
// and minimisation modes, alignment, and MiniMalloc's challenging set.
#include <memplan/alloc/exact.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/io/offset_csv.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace memplan;

namespace {

// The true minimum height by enumeration: for every order, put each item at
// the lowest aligned offset where it fits among the items already placed.
// Sorting any optimal placement by offset gives an order whose first fit is
// no higher, so the minimum over orders is the optimum.
std::uint64_t brute_force_height(const alloc_problem& p) {
    std::vector<std::size_t> order(p.items.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const std::uint64_t a = p.alignment > 1 ? p.alignment : 1;
    std::uint64_t best = ~std::uint64_t{0};
    std::vector<std::uint64_t> off(p.items.size());
    std::vector<char> done(p.items.size());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    do {
        std::fill(done.begin(), done.end(), 0);
        std::uint64_t h = 0;
        for (auto i : order) {
            const auto& x = p.items[i];
            busy.clear();
            for (std::size_t j = 0; j < p.items.size(); ++j)
                if (done[j] && p.items[j].overlaps_in_time(x)) busy.push_back({off[j], off[j] + p.items[j].size});
            std::sort(busy.begin(), busy.end());
            std::uint64_t at = 0;
            for (const auto& [lo, hi] : busy) {
                if (lo >= at + x.size) break;
                at = std::max(at, (hi + a - 1) / a * a);
            }
            off[i] = at;
            done[i] = 1;
            if (x.size > 0 && x.begin < x.end) h = std::max(h, at + x.size);
        }
        best = std::min(best, h);
    } while (std::next_permutation(order.begin(), order.end()) && best > 0);
    return best;
}

alloc_problem random_problem(std::mt19937_64& rng, std::size_t n, std::uint64_t horizon, std::uint64_t max_size) {
    alloc_problem p;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t b = rng() % horizon, e = b + 1 + rng() % (horizon - b);
        p.items.push_back({1 + rng() % max_size, b, e});
    }
    return p;
}

void require_valid(const alloc_problem& p, const alloc_result& r, std::uint64_t capacity = 0) {
    REQUIRE(has_solution(r.status));
    REQUIRE(r.offsets.size() == p.items.size());
    CHECK(check_placement(p, r.offsets, capacity).ok());
    CHECK(r.size == placement_height(p, r.offsets));
    CHECK(r.size >= lower_bound(p));
}

std::string challenging(const std::string& name) {
    return std::string(MEMPLAN_DATA_DIR) + "/minimalloc-challenging/" + name + ".1048576.csv";
}

} // namespace

TEST_CASE("alloc.exact.empty_and_trivial") {
    alloc_problem p;
    auto r = exact{}.place(p);
    CHECK(r.status == status::optimal);
    CHECK(r.size == 0);
    CHECK(r.offsets.empty());

    // Items with no bytes or no lifetime take no room.
    p.items = {{0, 0, 5}, {7, 3, 3}, {4, 1, 2}};
    r = exact{}.place(p);
    CHECK(r.status == status::optimal);
    CHECK(r.size == 4);
    CHECK(r.offsets.size() == 3);
}

TEST_CASE("alloc.exact.brute_force_small_random") {
    std::mt19937_64 rng(20240611);
    int proven_by_search = 0;
    for (int t = 0; t < 160; ++t) {
        const std::size_t n = 1 + static_cast<std::size_t>(rng() % (t < 150 ? 7 : 8));
        auto p = random_problem(rng, n, 2 + rng() % 8, 10);
        if (t % 4 == 0) p.alignment = 1 + rng() % 4;
        CAPTURE(t);
        const std::uint64_t best = brute_force_height(p);

        const auto r = exact{}.place(p); // minimisation
        require_valid(p, r);
        CHECK(r.size == best);
        CHECK(r.status == status::optimal);
        for (auto o : r.offsets) CHECK(o % std::max<std::uint64_t>(1, p.alignment) == 0);

        p.capacity = best; // decision at the optimum: must be found
        const auto at = exact{}.place(p);
        require_valid(p, at, best);
        CHECK(at.size <= best);

        if (best > 1) { // and one byte less (a capacity of 0 means none): proven impossible
            p.capacity = best - 1;
            const auto below = exact{}.place(p);
            CHECK(below.status == status::infeasible);
            CHECK_FALSE(below.message.empty());
            proven_by_search += below.message.find("search exhausted") != std::string::npos;
        }
    }
    CHECK(proven_by_search > 0); // not every refutation came from the lower bound
}

// Small perfect tilings (and tilings with a few tiles removed) make whole
// sections full at the optimum: there the search merges the buffers meeting
// at a full boundary (detail/exact_reduce.hpp) and confines buffers inside
// the single buffer they replace. Brute force is the oracle for both the
// placement at the optimum and the proof one byte below it.
TEST_CASE("alloc.exact.brute_force_small_tilings") {
    std::mt19937_64 rng(7031);
    int reduced = 0;
    for (int t = 0; t < 120; ++t) {
        // Guillotine cuts of [0, H) x [0, T) into n tiles, each one buffer.
        struct tile {
            std::uint64_t y0, y1, t0, t1;
        };
        const std::uint64_t H = 3 + rng() % 6, T = 3 + rng() % 6;
        std::vector<tile> ts{{0, H, 0, T}};
        const std::size_t n = 2 + rng() % 6;
        for (int guard = 0; ts.size() < n && guard < 100; ++guard) {
            const std::size_t i = rng() % ts.size();
            const tile a = ts[i];
            const bool bytes = rng() % 2 == 0;
            if (bytes && a.y1 - a.y0 >= 2) {
                const std::uint64_t y = a.y0 + 1 + rng() % (a.y1 - a.y0 - 1);
                ts[i].y1 = y;
                ts.push_back({y, a.y1, a.t0, a.t1});
            } else if (!bytes && a.t1 - a.t0 >= 2) {
                const std::uint64_t x = a.t0 + 1 + rng() % (a.t1 - a.t0 - 1);
                ts[i].t1 = x;
                ts.push_back({a.y0, a.y1, x, a.t1});
            }
        }
        if (t % 3 == 2 && ts.size() > 2) ts.erase(ts.begin() + static_cast<std::ptrdiff_t>(rng() % ts.size()));
        alloc_problem p;
        for (const auto& a : ts) p.items.push_back({a.y1 - a.y0, a.t0, a.t1});
        CAPTURE(t);
        const std::uint64_t best = brute_force_height(p);
        p.capacity = best;
        const auto at = exact{}.place(p);
        require_valid(p, at, best);
        const auto prep = detail::exact_prepare(p);
        reduced += detail::exact_reduce(prep.instance, best / prep.align).has_value();
        if (best > 1) {
            p.capacity = best - 1;
            CHECK(exact{}.place(p).status == status::infeasible);
        }
    }
    CHECK(reduced > 10); // the merges were exercised
}

TEST_CASE("alloc.exact.reduce_merges_a_full_boundary") {
    // Capacity 8, full everywhere: z lives throughout; x hands its bytes to
    // y at time 2 (one ends, one starts): they are one buffer. Where two end
    // and one starts nothing merges.
    alloc_problem p;
    p.items = {{4, 0, 2}, {4, 2, 4}, {4, 0, 4}};
    auto prep = detail::exact_prepare(p);
    const auto r = detail::exact_reduce(prep.instance, 8 / prep.align);
    REQUIRE(r.has_value());
    CHECK(r->instance.num_buffers() == 2);
    CHECK(r->rep[0] == r->rep[1]);
    CHECK(r->rep[0] != r->rep[2]);
    CHECK_FALSE(detail::exact_reduce(prep.instance, 12 / prep.align).has_value()); // not full at 12

    p.items = {{2, 0, 2}, {2, 0, 2}, {4, 2, 4}, {4, 0, 4}};
    prep = detail::exact_prepare(p);
    CHECK_FALSE(detail::exact_reduce(prep.instance, 8 / prep.align).has_value());
    p.capacity = 8;
    const auto placed = exact{}.place(p);
    require_valid(p, placed, 8);
    // The single starter covers exactly the two buffers that end before it.
    CHECK(std::min(placed.offsets[0], placed.offsets[1]) == placed.offsets[2]);
}

TEST_CASE("alloc.exact.decision_below_lower_bound_is_infeasible") {
    alloc_problem p;
    p.items = {{10, 0, 4}, {20, 2, 6}, {30, 5, 9}};
    p.capacity = lower_bound(p) - 1;
    const auto r = exact{}.place(p);
    CHECK(r.status == status::infeasible);
    CHECK(r.message.find("lower bound") != std::string::npos);

    // The policy's own capacity overrides the problem's.
    exact e;
    e.capacity = lower_bound(p);
    const auto ok = e.place(p);
    require_valid(p, ok, lower_bound(p));
    CHECK(ok.status == status::optimal);
}

TEST_CASE("alloc.exact.infeasible_by_search") {
    // Load 6 fits a capacity of 6, but with offsets multiples of 4 the second
    // 3-byte buffer cannot start below 4: only the search can tell.
    alloc_problem p;
    p.alignment = 4;
    p.items = {{3, 0, 2}, {3, 1, 3}};
    p.capacity = 6;
    const auto r = exact{}.place(p);
    CHECK(r.status == status::infeasible);
    CHECK(r.message.find("search exhausted") != std::string::npos);
    p.capacity = 0;
    const auto m = exact{}.place(p);
    require_valid(p, m);
    CHECK(m.size == 7);
    CHECK(m.status == status::optimal);
    CHECK(m.bound == 7); // the proven bound, raised past the load of 6
}

TEST_CASE("alloc.exact.alignment") {
    // Offsets are multiples of the alignment, but the topmost buffer needs no
    // padding: 4 bytes at 0 and 2 bytes at 4 fit under 6.
    alloc_problem p;
    p.alignment = 4;
    p.items = {{4, 0, 2}, {2, 0, 2}};
    p.capacity = 6;
    auto r = exact{}.place(p);
    require_valid(p, r, 6);
    for (auto o : r.offsets) CHECK(o % 4 == 0);
    CHECK(r.size == 6);

    p.capacity = 5; // the 2-byte buffer cannot start at an aligned offset below 4
    r = exact{}.place(p);
    CHECK(r.status == status::infeasible);

    p.capacity = 0; // minimisation finds 6 as well
    r = exact{}.place(p);
    require_valid(p, r);
    CHECK(r.size == 6);
    CHECK(r.status == status::optimal);
}

TEST_CASE("alloc.exact.minimisation_reaches_the_lower_bound") {
    // A perfect packing exists (a staircase), the greedy need not find it.
    alloc_problem p;
    p.items = {{3, 0, 4}, {2, 0, 2}, {1, 0, 6}, {2, 2, 6}, {3, 4, 8}, {2, 6, 8}};
    const auto r = exact{}.place(p);
    require_valid(p, r);
    CHECK(r.size == lower_bound(p));
    CHECK(r.status == status::optimal);
}

TEST_CASE("alloc.exact.progress_and_time_limit") {
    auto csv = read_offset_csv(challenging("F"));
    auto p = csv.problem;
    p.capacity = 1048576;
    exact e;
    e.time_limit = 0; // out of time at once: no solution, or a valid one
    int calls = 0;
    e.on_progress = [&](const exact_progress& pr) {
        ++calls;
        CHECK(pr.lower_bound == lower_bound(p));
    };
    const auto r = e.place(p);
    if (has_solution(r.status))
        require_valid(p, r, p.capacity);
    else
        CHECK(r.status == status::no_solution);
    CHECK(calls <= 1);
}

TEST_CASE("alloc.exact.minimalloc_challenging") {
    // Every instance must be packed under 1,048,576 bytes; the load bound is
    // the capacity itself on most, so the packing has to be perfect there.
#ifdef NDEBUG
    const std::vector<std::string> names{"A", "B", "C", "D", "E", "F", "J"};
#else
    const std::vector<std::string> names{"C", "E"}; // the quick ones in a debug build
#endif
    for (const auto& name : names) {
        CAPTURE(name);
        auto p = read_offset_csv(challenging(name)).problem;
        p.capacity = 1048576;
        exact e;
        e.time_limit = 60;
        const auto r = e.place(p);
        require_valid(p, r, p.capacity);
        CHECK(r.size <= p.capacity);
        CHECK(r.bound == lower_bound(p));
    }
}

namespace {

/// From a poor valid placement (greedy by start time) of 12 random problems,
/// `improve(p, offsets)` (true when it lowered them) leaves a valid
/// placement, never higher than the start nor below the bound, says truly
/// whether it lowered it, and lowers at least one. `also(p, start, rng)`
/// checks more on each problem.
template <class Improve, class Also>
void check_lowering(std::uint64_t seed, Improve improve, Also also) {
    std::mt19937_64 rng(seed);
    int lowered = 0;
    for (int t = 0; t < 12; ++t) {
        CAPTURE(t);
        const auto p = random_problem(rng, 300 + rng() % 300, 200, 1000);
        const auto start = greedy_by_begin{}.place(p);
        require_valid(p, start);
        std::vector<std::uint64_t> a = start.offsets;
        const bool improved = improve(p, a);
        CHECK(check_placement(p, a, std::uint64_t{0}).ok());
        const auto h = placement_height(p, a);
        CHECK(h <= start.size);
        CHECK(h >= lower_bound(p));
        CHECK(improved == (h < start.size));
        lowered += improved;
        also(p, start, rng);
    }
    CHECK(lowered > 0);
}

} // namespace

TEST_CASE("alloc.exact.restarts_lower_a_placement_and_stay_valid") {
    // The randomised passes the large instances get; with the gap met at
    // once no pass runs and nothing changes.
    const exact e;
    check_lowering(
        41, [&](const alloc_problem& p, std::vector<std::uint64_t>& off) {
            return e.improve_by_restarts(p, off, {}, deadline::after(0.2), 0.0);
        },
        [&](const alloc_problem& p, const alloc_result& start, std::mt19937_64&) {
            std::vector<std::uint64_t> b = start.offsets;
            (void)e.improve_by_restarts(p, b, {}, deadline::after(0.2), 1.0);
            CHECK(b == start.offsets);
        });
}

TEST_CASE("alloc.exact.first_fit_passes_are_valid_and_at_the_lowest_gap") {
    // The passes in omnimalloc's orders never raise a placement. First fit:
    // each item at the lowest offset where it fits among those placed
    // before it, so no item could sit lower in that order.
    const exact e;
    check_lowering(
        43, [&](const alloc_problem& p, std::vector<std::uint64_t>& off) {
            return e.first_fit_passes(p, off, exact::conflict_degrees(p), deadline::after(1));
        },
        [](const alloc_problem& p, const alloc_result&, std::mt19937_64& rng) {
            std::vector<std::size_t> order;
            for (std::size_t i = 0; i < p.items.size(); ++i) order.push_back(i);
            std::shuffle(order.begin(), order.end(), rng);
            auto tree = detail::make_interval_tree(p);
            std::vector<std::uint64_t> off;
            REQUIRE(detail::greedy_pass(p, order, tree, off, nullptr, {}, true));
            CHECK(check_placement(p, off, std::uint64_t{0}).ok());
            const std::uint64_t align = std::max<std::uint64_t>(p.alignment, 1);
            for (std::size_t k = 0; k < order.size(); ++k) {
                const auto& it = p.items[order[k]];
                if (!detail::is_live(it) || off[order[k]] == 0) continue;
                // One byte lower collides with an item placed before it.
                bool blocked = false;
                for (std::size_t j = 0; j < k && !blocked; ++j) {
                    const auto& o = p.items[order[j]];
                    const auto lo = off[order[j]], hi = off[order[j]] + (o.size + align - 1) / align * align;
                    blocked = it.overlaps_in_time(o) && off[order[k]] - 1 < hi && lo < off[order[k]] - 1 + it.size;
                }
                CHECK(blocked);
            }
        });
}

TEST_CASE("alloc.greedy_pass_gives_up_at_its_deadline") {
    std::mt19937_64 rng(5);
    const auto p = random_problem(rng, 2000, 100, 50);
    auto tree = detail::make_interval_tree(p);
    std::vector<std::uint64_t> off;
    const auto order = detail::greedy_item_order<alloc_order::by_size>(p);
    CHECK(!detail::greedy_pass(p, order, tree, off, nullptr, deadline::passed()));
    CHECK(detail::greedy_pass(p, order, tree, off, nullptr, deadline{}));
    CHECK(check_placement(p, off, std::uint64_t{0}).ok());
}
