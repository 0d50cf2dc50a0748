// Chen et al.'s planners: segments cut the forward part at articulation
// points only; sqrt_n and chen_greedy return valid plans that keep within
// their budget when feasible, never cost less than store-all, and report
// budgets below what any schedule needs as infeasible, naming the op.
#include "support/remat_graphs.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/remat/chen.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/zoo/zoo.hpp>

#include <doctest/doctest.h>

#include <random>

using namespace memplan;

TEST_CASE("remat.segments.chain_and_residual") {
    graph g("seg");
    g.add_tensor("x", 10);
    for (const char* t : {"a", "b", "c", "d", "loss", "dd", "dc", "db", "da"}) g.add_tensor(t, 100);
    g.add_op("fa", {"x"}, {"a"});
    g.add_op("fb", {"a"}, {"b"});
    g.add_op("fc", {"b"}, {"c"});
    g.add_op("fd", {"c", "a"}, {"d"}); // skip from a: no cut after fb or fc
    g.add_op("loss", {"d"}, {"loss"});
    g.add_output(*g.find_tensor("loss"));
    g.add_op("bd", {"loss", "c", "a"}, {"dd"}, 1.0, 0, phase::backward);
    g.add_op("bc", {"dd", "b"}, {"dc"}, 1.0, 0, phase::backward);
    g.add_op("bb", {"dc", "a"}, {"db"}, 1.0, 0, phase::backward);
    const remat_context<graph> ctx(g);
    const auto seg = detail::segment_forward(ctx);
    REQUIRE(seg.size() == 3);
    CHECK(seg.end == std::vector<std::size_t>{1, 4, 5});
    CHECK(g.tensor(seg.cut[0]).name == "a");
    CHECK(g.tensor(seg.cut[1]).name == "d");
}

namespace {

template <class Planner>
void check_planner(const Planner& p, const graph& g, const remat_result& base) {
    const auto [need, op] = remat_context<graph>(g).min_memory();
    for (double frac : {1.0, 0.7, 0.5, 0.3}) {
        CAPTURE(frac);
        remat_options o;
        o.budget = std::max<std::uint64_t>(static_cast<std::uint64_t>(static_cast<double>(base.arena()) * frac), 1);
        o.time_limit = 2;
        const auto r = p.plan(g, o);
        CHECK(r.planner == Planner::name);
        CHECK(r.overhead() >= -1e-9);
        if (r.status == status::feasible) CHECK(r.arena() <= o.budget);
        if (o.budget < need) {
            CHECK(r.status == status::infeasible);
            CHECK(r.bound_op == op);
            CHECK(r.message.find(op) != std::string::npos);
        }
        if (!r.plan.steps.empty()) {
            const auto report = check_plan(g, r.plan);
            CHECK_MESSAGE(report.ok(), report.to_string());
        }
    }
}

} // namespace

TEST_CASE("remat.chen.random_graphs_valid") {
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 25; ++trial) {
        CAPTURE(trial);
        testing::remat_graph_options go;
        go.blocks = 3 + static_cast<std::size_t>(trial) % 12;
        const graph g = testing::random_remat_graph(rng, go);
        const auto base = store_all{}.plan(g, {});
        check_planner(sqrt_n{}, g, base);
        check_planner(chen_greedy{}, g, base);
        remat_options loose;
        const auto r = chen_greedy{}.plan(g, loose);
        CHECK(r.status == status::feasible);
        CHECK(r.cost == doctest::Approx(base.cost)); // no budget: keep everything
    }
}

TEST_CASE("remat.chen.zoo_small_batch") {
    for (const char* name : {"resnet18", "mobilenet_v2"}) {
        CAPTURE(name);
        zoo_options zo;
        zo.batch = 16;
        const graph g = zoo_graph(name, zo);
        const auto base = store_all{}.plan(g, {});
        check_planner(sqrt_n{}, g, base);
        check_planner(chen_greedy{}, g, base);
        const auto s = sqrt_n{}.plan(g, {});
        CHECK(s.status == status::feasible);
        CHECK(s.arena() < base.arena()); // checkpointing saves memory on these chains
        CHECK(s.overhead() > 0);
    }
}
