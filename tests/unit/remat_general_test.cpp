// Rematerialization on graphs with no backward part (remat_context's general
// form): any forward tensor may be dropped; it then dies after its first
// reader and runs again before each later one. Checked: every keep /
// per-use choice of small random layered DAGs gives a schedule the
// validator accepts whose peak is never below the schedule-free bound; a
// hand-made graph whose budget only recomputation meets gets a plan from
// joint and auto, with the overhead of exactly the recomputation; the
// generator is deterministic.
#include "../support/fixtures.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/portfolio.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/zoo/random_layered.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace memplan;
using testing::runs_of;

namespace {

/// x -> a (large) -> b -> c -> d -> e: a is read by b and, through a long
/// skip, by e; between them c is large. Keeping a to e costs its bytes
/// across c; dropping it costs one more run of `make_a`.
graph long_skip() {
    graph g("long-skip");
    g.add_tensor("x", 100);
    g.add_tensor("a", 1000);
    g.add_tensor("b", 100);
    g.add_tensor("c", 1500);
    g.add_tensor("d", 100);
    g.add_tensor("e", 100);
    g.add_op("make_a", {"x"}, {"a"}, 3.0);
    g.add_op("make_b", {"a"}, {"b"}, 1.0);
    g.add_op("make_c", {"b"}, {"c"}, 1.0);
    g.add_op("make_d", {"c"}, {"d"}, 1.0);
    g.add_op("make_e", {"d", "a"}, {"e"}, 1.0);
    g.add_output(*g.find_tensor("e"));
    return g;
}

/// Two independent chains x -> a1 (large) -> a2 and x -> b1 (large) -> b2,
/// listed interleaved so that a1 and b1 are live together; run one chain
/// after the other, only one of them is.
graph interleaved_chains() {
    graph g("interleaved");
    g.add_tensor("x", 100);
    g.add_tensor("a1", 1000);
    g.add_tensor("b1", 1000);
    g.add_tensor("a2", 100);
    g.add_tensor("b2", 100);
    g.add_op("make_a1", {"x"}, {"a1"});
    g.add_op("make_b1", {"x"}, {"b1"});
    g.add_op("make_a2", {"a1"}, {"a2"});
    g.add_op("make_b2", {"b1"}, {"b2"});
    g.add_output(*g.find_tensor("a2"));
    g.add_output(*g.find_tensor("b2"));
    return g;
}


} // namespace

TEST_CASE("remat.general.forward_only_graphs_use_the_general_space") {
    const auto g = long_skip();
    const remat_context<graph> ctx(g);
    CHECK(ctx.general());
    const auto a = *g.find_tensor("a");
    CHECK(ctx.droppable(a));
    CHECK(ctx.droppable(*g.find_tensor("c"))); // one reader: dropped, a recomputation reading it makes it again
    auto c = ctx.keep_all();
    c.keep[a] = 0;
    const auto s = ctx.schedule_of(c);
    CHECK(runs_of(g, s, "make_a") == 2);
    CHECK(check_plan(g, make_plan(g, s, best_heuristic{}).plan).ok());
    // Dropped, a is not live across make_c: the peak falls below keeping it.
    CHECK(schedule_lower_bound(g, s) < schedule_lower_bound(g, ctx.schedule_of(ctx.keep_all())));
}

TEST_CASE("remat.general.a_dropped_tensors_first_life_ends_where_the_choice_says") {
    // a is read by make_b (position 1) and make_e (4).
    const auto g = long_skip();
    const remat_context<graph> ctx(g);
    const auto a = *g.find_tensor("a");
    CHECK(ctx.position(*g.find_op("make_b")) == 1);
    CHECK(ctx.first_read(a) == 1);
    const auto all_peak = schedule_lower_bound(g, ctx.schedule_of(ctx.keep_all()));
    auto c = ctx.keep_all();
    c.keep[a] = 0;
    c.drop_after.assign(g.num_tensors(), remat_choice<graph>::none);
    auto runs_and_peak = [&](std::size_t after) {
        c.drop_after[a] = after;
        const auto s = ctx.schedule_of(c);
        CHECK(check_plan(g, make_plan(g, s, best_heuristic{}).plan).ok());
        return std::pair{runs_of(g, s, "make_a"), schedule_lower_bound(g, s)};
    };
    // After its first reader (named, or by default): made again for make_e, not live across make_c.
    for (std::size_t after : {std::size_t{1}, remat_choice<graph>::none}) {
        const auto [runs, peak] = runs_and_peak(after);
        CHECK(runs == 2);
        CHECK(peak < all_peak);
    }
    {
        // Where it is made: gone at once, made again for make_b and then living
        // to its last read (the computation deferred, not shortened).
        const auto [runs, peak] = runs_and_peak(0);
        CHECK(runs == 2);
        CHECK(peak == all_peak);
    }
    {
        // A position where a is not read never ends its first life: as if kept.
        const auto [runs, peak] = runs_and_peak(3);
        CHECK(runs == 1);
        CHECK(peak == all_peak);
    }
    c.drop_after.resize(2);
    CHECK_THROWS_AS(ctx.schedule_of(c), memplan::error); // one entry per tensor or none
}

TEST_CASE("remat.general.a_budget_only_recomputation_meets_is_planned") {
    const auto g = long_skip();
    const remat_context<graph> ctx(g);
    const auto keep_all_peak = make_plan(g, ctx.schedule_of(ctx.keep_all()), best_heuristic{}).plan.arena_bytes;
    remat_options o;
    o.budget = keep_all_peak - 256;
    o.alignment = 1;
    o.time_limit = 5;
    for (const auto& r : {joint{}.plan(ctx, o), auto_remat{}.plan(ctx, o)}) {
        INFO(r.planner, ": ", r.message);
        REQUIRE(has_solution(r.status));
        CHECK(r.arena() <= o.budget);
        CHECK(check_plan(g, r.plan).ok());
        CHECK(runs_of(g, r.plan.steps, "make_a") == 2);
        CHECK(r.overhead() == doctest::Approx(3.0 / 7.0)); // one more make_a over a step of 7
    }
}

TEST_CASE("remat.general.auto_reorders_when_the_order_meets_the_budget") {
    const auto g = interleaved_chains();
    const remat_context<graph> ctx(g);
    const auto listed = make_plan(g, ctx.schedule_of(ctx.keep_all()), best_heuristic{}).plan.arena_bytes;
    remat_options o;
    o.alignment = 1;
    o.budget = 1300; // one large tensor with the small ones: only the other order fits
    o.time_limit = 5;
    REQUIRE(listed > o.budget);
    CHECK_FALSE(has_solution(joint{}.plan(ctx, o).status)); // the listed order alone cannot
    const auto r = auto_remat{}.plan(ctx, o);
    INFO(r.message);
    REQUIRE(has_solution(r.status));
    CHECK(r.planner.find("greedy_order") != std::string::npos);
    CHECK(r.arena() <= o.budget);
    CHECK(check_plan(g, r.plan).ok());
    CHECK(r.overhead() == doctest::Approx(0.0)); // nothing recomputed: the order alone fits
    CHECK(r.plan.steps.size() == g.num_ops());
}

TEST_CASE("remat.general.every_choice_of_small_random_dags_is_valid") {
    std::size_t graphs = 0, choices = 0;
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
        random_layered_options ro;
        ro.max_width = 3;
        ro.unit_bytes = 64;
        ro.skip_probability = 0.4;
        const auto g = random_layered_dag(6 + seed % 6, seed, ro);
        const remat_context<graph> ctx(g);
        REQUIRE(ctx.general());
        const auto bound = ctx.min_memory().first;
        std::vector<graph::id_type> drop;
        for (std::size_t t = 0; t < g.num_tensors(); ++t)
            if (ctx.droppable(static_cast<graph::id_type>(t))) drop.push_back(static_cast<graph::id_type>(t));
        if (drop.size() > 6) drop.resize(6);
        ++graphs;
        // Every subset dropped, each either per use or not (3^k choices).
        std::size_t total = 1;
        for (std::size_t i = 0; i < drop.size(); ++i) total *= 3;
        for (std::size_t code = 0; code < total; ++code) {
            auto c = ctx.keep_all();
            c.per_use.assign(g.num_tensors(), 0);
            std::size_t k = code;
            for (auto t : drop) {
                const auto d = k % 3;
                k /= 3;
                c.keep[t] = d == 0;
                c.per_use[t] = d == 2;
            }
            const auto s = ctx.schedule_of(c);
            const auto planned = make_plan(g, s, best_heuristic{});
            const auto report = check_plan(g, planned.plan);
            INFO(g.name(), " choice ", code, ": ", report.to_string());
            REQUIRE(report.ok());
            CHECK(schedule_lower_bound(g, s) >= bound);
            ++choices;
        }
    }
    CHECK(graphs == 40);
    CHECK(choices > 40);
}

TEST_CASE("remat.general.random_layered_dags_are_deterministic_and_well_formed") {
    const auto a = random_layered_dag(200, 7), b = random_layered_dag(200, 7), c = random_layered_dag(200, 8);
    REQUIRE(a.num_ops() == 200);
    CHECK(a.num_tensors() == 201);
    bool same = a.num_tensors() == b.num_tensors();
    for (std::size_t o = 0; same && o < a.num_ops(); ++o)
        same = a.op(static_cast<graph::id_type>(o)).inputs == b.op(static_cast<graph::id_type>(o)).inputs &&
               a.op(static_cast<graph::id_type>(o)).cost == b.op(static_cast<graph::id_type>(o)).cost;
    CHECK(same);
    bool differs = false;
    for (std::size_t o = 0; !differs && o < a.num_ops(); ++o)
        differs = a.op(static_cast<graph::id_type>(o)).inputs != c.op(static_cast<graph::id_type>(o)).inputs;
    CHECK(differs);
    for (const auto& op : a.ops()) CHECK(op.phase == phase::forward);
    CHECK_FALSE(a.outputs().empty());
    CHECK_THROWS_AS(random_layered_dag(1, 0), memplan::error);
    random_layered_options bad;
    bad.skip_probability = 2;
    CHECK_THROWS_AS(random_layered_dag(10, 0, bad), memplan::error);
}
