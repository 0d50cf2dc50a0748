// One contract for every rematerialization planner (tests/support/
// remat_contract.hpp): on random training graphs of both generators and the
// diamond, over a sweep of budgets, plans pass the validator and fit, and
// infeasible means below the schedule-free bound the result names. The
// Checkmate MILP keeps the same contract in tests/solver.
#include "support/fixtures.hpp"
#include "support/random_graph.hpp"
#include "support/remat_contract.hpp"
#include "support/remat_graphs.hpp"

#include <memplan/remat/block_dp.hpp>
#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/chen.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/portfolio.hpp>
#include <memplan/remat/store_all.hpp>

#include <doctest/doctest.h>

#include <random>
#include <vector>

TYPE_TO_STRING(memplan::store_all);
TYPE_TO_STRING(memplan::sqrt_n);
TYPE_TO_STRING(memplan::chen_greedy);
TYPE_TO_STRING(memplan::chain_dp);
TYPE_TO_STRING(memplan::block_dp);
TYPE_TO_STRING(memplan::joint);
TYPE_TO_STRING(memplan::auto_remat);

namespace {

/// Small graphs the contract runs on: training graphs of both generators
/// (residual joins, variants, in-place pairs, workspaces) and the diamond,
/// whose tensors cannot be dropped at all.
std::vector<memplan::graph> contract_graphs() {
    std::vector<memplan::graph> gs;
    std::mt19937_64 rng(2024);
    for (std::size_t blocks : {3, 5, 7}) {
        memplan::testing::remat_graph_options o;
        o.blocks = blocks;
        gs.push_back(memplan::testing::random_remat_graph(rng, o));
    }
    for (std::size_t ops : {4, 8}) {
        memplan::testing::random_graph_options o;
        o.forward_ops = ops;
        gs.push_back(memplan::testing::random_training_graph(rng, o));
    }
    gs.push_back(memplan::testing::diamond_graph());
    return gs;
}

} // namespace

TEST_CASE_TEMPLATE("remat.contract", P, memplan::store_all, memplan::sqrt_n, memplan::chen_greedy, memplan::chain_dp,
                   memplan::block_dp, memplan::joint, memplan::auto_remat) {
    for (const auto& g : contract_graphs()) {
        CAPTURE(g.num_ops());
        const auto all = memplan::store_all{}.plan(g, {});
        REQUIRE(all.status == memplan::status::feasible);
        const auto sum = memplan::testing::check_remat_contract(P{}, g, all.arena(), 1.0);
        MESSAGE(P::name << " on " << g.num_ops() << " ops: " << sum.solved << " of 9 budgets planned");
    }
}
