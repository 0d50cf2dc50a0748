// The rematerialization contract (tests/support/remat_contract.hpp) for the
// Checkmate planner on every solver backend, on the graphs the other
// planners keep it on in tests/unit/remat_contract_test.cpp.
#include "backends.hpp"

#include "support/fixtures.hpp"
#include "support/random_graph.hpp"
#include "support/remat_contract.hpp"
#include "support/remat_graphs.hpp"

#include <memplan/remat/checkmate.hpp>
#include <memplan/remat/store_all.hpp>

#include <random>
#include <vector>

TEST_CASE_TEMPLATE("remat.contract.checkmate", S, MEMPLAN_SOLVERS) {
    std::vector<memplan::graph> gs;
    std::mt19937_64 rng(2024);
    for (std::size_t blocks : {3, 5}) {
        memplan::testing::remat_graph_options o;
        o.blocks = blocks;
        gs.push_back(memplan::testing::random_remat_graph(rng, o));
    }
    memplan::testing::random_graph_options ro;
    ro.forward_ops = 6;
    gs.push_back(memplan::testing::random_training_graph(rng, ro));
    gs.push_back(memplan::testing::diamond_graph());
    for (const auto& g : gs) {
        CAPTURE(g.num_ops());
        const auto all = memplan::store_all{}.plan(g, {});
        REQUIRE(all.status == memplan::status::feasible);
        (void)memplan::testing::check_remat_contract(memplan::checkmate<S>{}, g, all.arena(), 2.0);
    }
}
