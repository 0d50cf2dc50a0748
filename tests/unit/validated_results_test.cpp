// The library checks what it returns: make_plan and the rematerialization
// planners' plan(graph, options) run the independent validator, and a plan it
// rejects comes back as status error with the report, never as a result.
#include "support/fixtures.hpp"
#include "support/remat_graphs.hpp"

#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

using namespace memplan;

namespace {

// A broken allocator: every item at offset 0, claimed optimal.
struct everything_at_zero {
    static constexpr std::string_view name = "everything_at_zero";
    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        basic_alloc_result<Size> r;
        r.offsets.assign(p.items.size(), Size{0});
        for (const auto& it : p.items) r.size = std::max(r.size, it.size);
        r.bound = r.size;
        r.status = status::optimal;
        return r;
    }
};

// A broken remat planner: store-all's plan with every buffer moved to offset
// 0, or (with `over`) a valid plan reported as fitting a budget it exceeds.
struct broken_remat : remat_planner<broken_remat> {
    static constexpr std::string_view name = "broken";
    bool over = false;
    using remat_planner<broken_remat>::plan;
    template <class Graph>
    remat_result_of<Graph> plan(const remat_context<Graph>& ctx, const remat_options& opt) const {
        remat_options all = opt;
        all.budget = std::numeric_limits<std::uint64_t>::max();
        auto r = store_all{}.plan(ctx, all);
        r.planner = std::string(name);
        if (over) {
            r.budget = static_cast<typename Graph::size_type>(opt.budget);
        } else {
            for (auto& b : r.plan.buffers) b.offset = 0;
        }
        r.status = status::feasible;
        return r;
    }
};

} // namespace

TEST_CASE("check.library.make_plan_rejects_an_invalid_placement") {
    const graph g = testing::diamond_graph();
    const auto r = make_plan(g, default_schedule(g), everything_at_zero{});
    CHECK(r.status == status::error);
    CHECK(r.message.find("check_plan") != std::string::npos);
    CHECK(r.message.find("rule 4") != std::string::npos); // the validator's report: overlaps
    // Turned off, the broken plan comes back as the allocator said (for the
    // planners' internal candidates, which their entry points check).
    plan_options off;
    off.validate = false;
    CHECK(make_plan(g, default_schedule(g), everything_at_zero{}, off).status == status::optimal);
}

TEST_CASE("check.library.remat_entry_rejects_an_invalid_plan") {
    std::mt19937_64 rng(5);
    const graph g = testing::random_remat_graph(rng);
    remat_options o;
    o.time_limit = 2;
    const auto bad = broken_remat{}.plan(g, o);
    CHECK(bad.status == status::error);
    CHECK(bad.message.find("check_plan") != std::string::npos);
    CHECK(bad.message.find("rule 4") != std::string::npos);

    const auto all = store_all{}.plan(g, o);
    REQUIRE(has_solution(all.status));
    CHECK(all.bound > 0); // every result carries the schedule-free bound
    CHECK(all.bound <= all.size);
    o.budget = all.size - 1;
    broken_remat liar;
    liar.over = true;
    const auto over = liar.plan(g, o);
    CHECK(over.status == status::error);
    CHECK(over.message.find("over the budget") != std::string::npos);
}
