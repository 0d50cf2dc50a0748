// The repeated-block start of `joint` (remat/detail/block_frontier.hpp): one
// block's keep sets on the front of bytes against cost, replicated and mixed
// across the zoo decoder's equal blocks; every mix a valid plan; joint never
// dearer than a mix that fits; and joint returning before its time limit
// once it has converged.
#include <memplan/check/validator.hpp>
#include <memplan/remat/detail/block_frontier.hpp>
#include <memplan/remat/detail/joint_search.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/place.hpp>
#include <memplan/zoo/zoo.hpp>

#include "support/decoder.hpp"

#include <doctest/doctest.h>

using namespace memplan;
namespace remat_block_frontier_test {

using testing::tiny_decoder;

TEST_CASE("remat.block_frontier.one_block_front_replicated") {
    const graph g = tiny_decoder(6);
    const remat_context<graph> ctx(g);
    const detail::joint_search<graph> search(ctx, deadline::after(60), 24, 1.0);
    const detail::block_frontier<graph> frontier(ctx, search.fastest());
    REQUIRE(frontier.usable());
    CHECK(frontier.blocks() == 6);
    const auto& front = frontier.front();
    REQUIRE(front.size() >= 3);
    // A front: more bytes kept, strictly less recomputation; its cheapest end
    // reruns nothing.
    for (std::size_t i = 1; i < front.size(); ++i) {
        CHECK(front[i].bytes > front[i - 1].bytes);
        CHECK(front[i].cost < front[i - 1].cost);
    }
    CHECK(front.back().rerun == 0);
    CHECK(front.back().cost == 0.0);
    CHECK(frontier.mixed(front.size() - 1, front.size() - 1, 0).keep == ctx.keep_all().keep);

    // Every mix schedules into a valid plan; k = 0 is all on the first set,
    // k = blocks all on the second.
    const std::size_t a = 0, b = front.size() / 2;
    CHECK(frontier.mixed(a, b, 0).keep == frontier.mixed(a, a, 0).keep);
    CHECK(frontier.mixed(a, b, 6).keep == frontier.mixed(b, b, 0).keep);
    double previous = -1;
    for (std::size_t k = 0; k <= 6; ++k) {
        CAPTURE(k);
        const auto c = frontier.mixed(b, a, k);
        const auto placed = place_within(g, ctx.schedule_of(c), ~std::uint64_t{0}, 256, deadline::passed());
        REQUIRE(has_solution(placed.status));
        const auto report = check_plan(g, placed.plan);
        CHECK_MESSAGE(report.ok(), report.to_string());
        // More blocks on the set that keeps less: never cheaper.
        const double cost = search.evaluate(c, 0).cost;
        CHECK(cost >= previous);
        previous = cost;
    }
}

TEST_CASE("remat.block_frontier.joint_is_never_dearer_than_a_fitting_mix") {
    const graph g = tiny_decoder(4);
    const remat_context<graph> ctx(g);
    const auto store = ctx.store_all_placement(256).plan.arena_bytes;
    const auto need = ctx.min_memory().first;
    const detail::joint_search<graph> search(ctx, deadline::after(60), 24, 1.0);
    const detail::block_frontier<graph> frontier(ctx, search.fastest());
    REQUIRE(frontier.usable());
    int compared = 0;
    for (double f : {0.3, 0.5, 0.7, 0.9}) {
        const auto budget = need + static_cast<std::uint64_t>(f * double(store - need));
        CAPTURE(f);
        const auto starts = frontier.starts(
            budget, [&](const remat_choice<graph>& c, std::uint64_t t) { return search.evaluate(c, t); },
            deadline::after(60));
        REQUIRE(!starts.empty());
        remat_options o;
        o.budget = budget;
        o.time_limit = 20;
        const auto j = joint{}.checked(ctx, o);
        REQUIRE(has_solution(j.status));
        CHECK(j.arena() <= budget);
        const auto e = search.evaluate(starts.front(), budget);
        if (e.peak > budget) continue;
        const auto placed = place_within(g, e.schedule, budget, 256, deadline::passed());
        if (!has_solution(placed.status) || placed.plan.arena_bytes > budget) continue;
        ++compared;
        CHECK(j.cost <= e.cost * (1 + 1e-9));
    }
    CHECK(compared >= 2);
}

TEST_CASE("remat.block_frontier.not_usable_without_equal_blocks") {
    zoo_options o;
    o.batch = 2;
    const graph g = zoo_graph("resnet18", o);
    const remat_context<graph> ctx(g);
    const detail::joint_search<graph> search(ctx, deadline::after(60), 24, 1.0);
    CHECK(!detail::block_frontier<graph>(ctx, search.fastest()).usable());
    // One block: nothing to replicate.
    const graph one = tiny_decoder(1);
    const remat_context<graph> one_ctx(one);
    const detail::joint_search<graph> one_search(one_ctx, deadline::after(60), 24, 1.0);
    CHECK(!detail::block_frontier<graph>(one_ctx, one_search.fastest()).usable());
}

TEST_CASE("remat.joint.returns_early_once_converged") {
    const graph g = tiny_decoder(4);
    const remat_context<graph> ctx(g);
    const auto store = ctx.store_all_placement(256).plan.arena_bytes;
    remat_options o;
    o.budget = store - (store - ctx.min_memory().first) / 2;
    o.time_limit = 120;
    const auto j = joint{}.checked(ctx, o);
    REQUIRE(has_solution(j.status));
    // Converged long before the limit (the stall rule: no cheaper plan for
    // max(2 s, half the time spent)); generous against a slow machine.
    CHECK(j.seconds < 60);
    // At the store-all arena nothing beats store-all with the fastest
    // variants: the search stops at once.
    o.budget = store;
    const auto top = joint{}.checked(ctx, o);
    REQUIRE(has_solution(top.status));
    CHECK(top.cost <= ctx.fastest_cost() * (1 + 1e-12));
    CHECK(top.seconds < 60);
}

} // namespace remat_block_frontier_test
