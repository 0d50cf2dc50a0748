// Every zoo model's training graph, planned in its default order and in the
// greedy memory-aware order, passes the independent validator; the greedy
// order never peaks above the default one, and both respect the bounds.
#include <memplan/alloc/allocators.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/zoo/zoo.hpp>

#include <doctest/doctest.h>

using namespace memplan;

TEST_CASE("zoo.plans.every_model_valid_in_default_and_greedy_order") {
    for (auto name : zoo_names()) {
        CAPTURE(name);
        zoo_options o;
        o.batch = 1;
        if (name == "unet") o.height = 64, o.width = 96; // keep the test small; shapes still exercise every layer
        const graph g = zoo_graph(name, o);
        const auto dflt = default_schedule(g);
        const auto greedy = greedy_order{}.order(g);
        REQUIRE(greedy.schedule.size() == g.num_ops());
        CHECK(greedy.size <= schedule_lower_bound(g, dflt));
        CHECK(greedy.size >= greedy.bound);
        CHECK(greedy.bound >= schedule_free_lower_bound(g));
        for (const auto* s : {&dflt, &greedy.schedule}) {
            const auto r = make_plan(g, *s, "best_heuristic", {});
            REQUIRE(has_solution(r.status));
            const auto report = check_plan(g, r.plan);
            CHECK_MESSAGE(report.ok(), report.to_string());
            CHECK(r.plan.arena_bytes >= r.bound);
            CHECK(r.bound >= schedule_free_lower_bound(g));
        }
    }
}
