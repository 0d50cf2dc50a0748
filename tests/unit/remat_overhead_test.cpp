// "Overhead" is measured against store-all with every op's fastest variant
// (what a framework runs, and what MONeT measures against), recomputed here
// from the plan's steps and the graph's variant costs, on the case of the
// command line's `memplan plan resnet50.json --budget 33%`.
#include <memplan/remat/select.hpp>
#include <memplan/zoo/zoo.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

using namespace memplan;

TEST_CASE("remat.overhead.is_against_store_all_with_the_fastest_variants") {
    const graph g = zoo_graph("resnet50");
    remat_options o;
    o.time_limit = 5;
    const auto all = plan_remat("store_all", g, o);
    REQUIRE(has_solution(all.status));
    o.budget = static_cast<std::uint64_t>(static_cast<double>(all.arena()) * 0.33);
    const auto r = plan_remat("auto", g, o);
    INFO(r.planner << ": " << r.message);
    REQUIRE(has_solution(r.status));
    REQUIRE(r.arena() <= o.budget);

    double cost = 0;
    for (const auto& st : r.plan.steps) {
        const auto& op = g.op(st.op);
        cost += st.has_variant() ? op.variants.at(st.variant).cost : op.cost;
    }
    double fastest = 0, slowest_default_gap = 0;
    for (std::size_t k = 0; k < g.num_ops(); ++k) {
        const auto& op = g.op(static_cast<graph::id_type>(k));
        double c = op.variants.empty() ? op.cost : op.variants.front().cost;
        for (const auto& v : op.variants) c = std::min(c, v.cost);
        fastest += c;
        slowest_default_gap += g.cost_of(static_cast<graph::id_type>(k), default_variant(g, static_cast<graph::id_type>(k))) - c;
    }
    REQUIRE(fastest > 0);
    CHECK(r.cost == doctest::Approx(cost).epsilon(1e-12));
    CHECK(r.fastest_cost == doctest::Approx(fastest).epsilon(1e-12));
    CHECK(r.overhead() == doctest::Approx(cost / fastest - 1).epsilon(1e-9));
    // Never negative: no plan beats store-all with the fastest variants. The
    // default-variant figure is lower when the defaults are slower (here the
    // zoo's default convolution algorithms), so it is never the headline.
    CHECK(r.overhead() >= 0);
    CHECK(slowest_default_gap > 0);
    CHECK(r.default_variant_overhead() < r.overhead());
    // store-all itself, as a framework would run it with its default variants.
    CHECK(all.overhead() == doctest::Approx(all.cost / fastest - 1).epsilon(1e-9));
    CHECK(all.default_variant_overhead() == doctest::Approx(0.0));
}
