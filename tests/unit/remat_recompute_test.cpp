// remat_context: how a choice becomes a schedule. Per-use recomputation
// (remat_choice::per_use) runs a dropped tensor's producer again for each
// backward reader and frees it after that reader, together with what was
// recomputed only to make it; the base order puts every update after every
// other reader of its parameter.
#include "../support/fixtures.hpp"
#include "../support/remat_graphs.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/no_reuse.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/recompute.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

using namespace memplan;
using testing::runs_of;

namespace {

graph two_readers() { return testing::skip_reader_graph("two-readers"); }

} // namespace

TEST_CASE("remat.recompute.per_use_runs_again_for_each_reader") {
    const auto g = two_readers();
    const remat_context<graph> ctx(g);
    const auto a1 = *g.find_tensor("a1");
    REQUIRE(ctx.droppable(a1));

    auto once = ctx.keep_all();
    once.keep[a1] = 0;
    const auto s_once = ctx.schedule_of(once);
    CHECK(runs_of(g, s_once, "f1") == 2); // recomputed once, then kept to b1
    CHECK(runs_of(g, s_once, "f0") == 2);

    auto per_use = once;
    per_use.per_use.assign(g.num_tensors(), 0);
    per_use.per_use[a1] = 1;
    const auto s_per_use = ctx.schedule_of(per_use);
    CHECK(runs_of(g, s_per_use, "f1") == 3); // once for b2, once more for b1
    CHECK(runs_of(g, s_per_use, "f0") == 3); // t0 was made only for a1: it goes too
    // a1 no longer lives across `mid`: less memory for more compute.
    CHECK(schedule_lower_bound(g, s_per_use) < schedule_lower_bound(g, s_once));
    CHECK(schedule_cost(g, s_per_use) > schedule_cost(g, s_once));
    for (const auto* s : {&s_once, &s_per_use}) {
        const auto p = make_plan(g, *s, best_heuristic{}).plan;
        const auto report = check_plan(g, p);
        CHECK_MESSAGE(report.ok(), (report.ok() ? "" : report.violations.front().message));
    }

    // A per-use flag on a kept tensor changes nothing.
    auto kept = ctx.keep_all();
    kept.per_use.assign(g.num_tensors(), 1);
    CHECK(ctx.schedule_of(kept).size() == g.num_ops());
}

TEST_CASE("remat.recompute.a_checkpoint_is_where_recomputation_starts") {
    // t0 is read by the forward part only: without a checkpoint it is gone
    // after the forward and a1's recomputation runs f0 again; kept as a
    // checkpoint, it lives into the backward and only f1 runs again.
    const auto g = two_readers();
    const remat_context<graph> ctx(g);
    const auto a1 = *g.find_tensor("a1"), t0 = *g.find_tensor("t0");
    REQUIRE(ctx.checkpointable(t0));
    CHECK_FALSE(ctx.checkpointable(a1)); // the backward reads it: kept or dropped, not a checkpoint
    auto c = ctx.keep_all();
    c.keep[a1] = 0;
    const auto without = ctx.schedule_of(c);
    c.checkpoint.assign(g.num_tensors(), 0);
    c.checkpoint[t0] = 1;
    const auto with = ctx.schedule_of(c);
    CHECK(runs_of(g, without, "f0") == 2);
    CHECK(runs_of(g, with, "f0") == 1);
    CHECK(runs_of(g, with, "f1") == 2);
    CHECK(schedule_cost(g, with) < schedule_cost(g, without));
    const auto p = make_plan(g, with, best_heuristic{}).plan;
    const auto report = check_plan(g, p);
    CHECK_MESSAGE(report.ok(), (report.ok() ? "" : report.violations.front().message));
    // t0's buffer lives from f0 to the recomputation of f1 in the backward.
    const auto b = std::find_if(p.buffers.begin(), p.buffers.end(), [&](const auto& x) { return x.tensor == t0; });
    REQUIRE(b != p.buffers.end());
    CHECK(g.op(with[b->last].op).name == "f1");
    CHECK(b->last > 3); // f0, f1, f2 and loss are steps 0-3: it crosses into the backward
    // Nothing else may be a checkpoint.
    c.checkpoint[a1] = 1;
    CHECK_THROWS_WITH_AS(ctx.schedule_of(c), doctest::Contains("'a1'"), memplan::error);
    // Without a dropped tensor a checkpoint changes nothing.
    auto kept = ctx.keep_all();
    kept.checkpoint.assign(g.num_tensors(), 0);
    kept.checkpoint[t0] = 1;
    CHECK(ctx.schedule_of(kept).size() == g.num_ops());
}

TEST_CASE("remat.recompute.choice_sizes_are_checked") {
    const auto g = two_readers();
    const remat_context<graph> ctx(g);
    auto c = ctx.keep_all();
    c.per_use.assign(3, 1);
    CHECK_THROWS_WITH_AS(ctx.schedule_of(c), doctest::Contains("two-readers"), memplan::error);
    c.per_use.clear();
    c.keep[*g.find_tensor("gm")] = 0; // made by a backward op: cannot be dropped
    CHECK_THROWS_WITH_AS(ctx.schedule_of(c), doctest::Contains("'gm'"), memplan::error);
}

TEST_CASE("remat.recompute.updates_follow_every_reader_of_their_parameter") {
    const auto g = two_readers();
    const remat_context<graph> ctx(g);
    const auto& order = ctx.base_order();
    const auto pos = [&](const std::string& name) {
        return std::find_if(order.begin(), order.end(), [&](auto o) { return g.op(o).name == name; }) - order.begin();
    };
    // bw is a weight gradient (its output feeds only the update): it runs as
    // soon as g1 exists; the update waits for it.
    CHECK(pos("bw") < pos("w.update"));
    CHECK(pos("f0") < pos("w.update"));
    CHECK(pos("w.update") == static_cast<std::ptrdiff_t>(order.size()) - 1);
}

TEST_CASE("remat.recompute.in_place_updates_move_past_recomputed_readers") {
    // f reads the weight; its output is recomputed for a backward reader that
    // comes after the weight's update (a tied weight whose gradient completes
    // early). The update must follow that recomputation, or the recomputed f
    // reads the new weight; everything else keeps its order.
    graph g("update-then-read");
    g.add_tensor("x", 64);
    g.add_tensor("w", 64, true);
    g.add_tensor("y", 64);
    g.add_tensor("dy", 64);
    g.add_tensor("dw", 64);
    g.add_tensor("dz", 64);
    const auto f = g.add_op("f", {"x", "w"}, {"y"});
    const auto back = g.add_op("back", {"y"}, {"dy", "dw"}, 1.0, 0, phase::backward);
    const auto upd = g.add_op("w.update", {"w", "dw"}, {}, 1.0, 0, phase::update);
    const auto late = g.add_op("late", {"dy", "y"}, {"dz"}, 1.0, 0, phase::backward);
    g.add_output(*g.find_tensor("dz"));
    const auto none = graph::npos;
    const schedule s{{f, none}, {back, none}, {upd, none}, {f, none}, {late, none}};
    const auto moved = updates_after_their_readers(g, s);
    REQUIRE(moved.size() == s.size());
    const std::vector<graph::id_type> expected{f, back, f, upd, late};
    for (std::size_t k = 0; k < moved.size(); ++k) CHECK(moved[k].op == expected[k]);
    // Nothing to move: the same schedule back.
    const schedule fine{{f, none}, {back, none}, {f, none}, {late, none}, {upd, none}};
    const auto same = updates_after_their_readers(g, fine);
    for (std::size_t k = 0; k < same.size(); ++k) CHECK(same[k].op == fine[k].op);
    // place_within plans the moved order: valid, and the update last reads w.
    const auto planned = place_within(g, s, 1u << 20, 1, deadline::passed());
    REQUIRE(has_solution(planned.status));
    CHECK(check_plan(g, planned.plan).ok());
    CHECK(planned.plan.steps[3].op == upd);
}

TEST_CASE("remat.recompute.place_within_takes_an_allocator_policy") {
    // The same schedule placed by two policies: no_reuse gives every buffer a
    // byte range of its own, the default (best_heuristic) reuses; both valid.
    // Below no_reuse's arena, the exact search (given time) places the same
    // steps within the budget instead.
    std::mt19937_64 rng(7);
    const auto g = testing::random_remat_graph(rng);
    const remat_context<graph> ctx(g);
    const auto s = ctx.schedule_of(ctx.keep_all());
    const auto unlimited = std::numeric_limits<std::uint64_t>::max();
    const auto spread = place_within(g, s, unlimited, 1, deadline::passed(), no_reuse{});
    const auto packed = place_within(g, s, unlimited, 1, deadline::passed());
    REQUIRE(has_solution(spread.status));
    REQUIRE(has_solution(packed.status));
    CHECK(check_plan(g, spread.plan).ok());
    CHECK(check_plan(g, packed.plan).ok());
    std::uint64_t total = 0;
    for (const auto& b : spread.plan.buffers) total += b.bytes;
    CHECK(spread.plan.arena_bytes == total);
    REQUIRE(packed.plan.arena_bytes < spread.plan.arena_bytes);

    const auto budget = packed.plan.arena_bytes;
    const auto tightened = place_within(g, s, budget, 1, deadline::after(10.0), no_reuse{});
    REQUIRE(has_solution(tightened.status));
    CHECK(tightened.plan.arena_bytes <= budget);
    CHECK(check_plan(g, tightened.plan).ok());
}
