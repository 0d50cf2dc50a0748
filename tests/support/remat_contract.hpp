// The contract every rematerialization planner keeps, whatever its method:
// on one graph, over a sweep of budgets, every plan it returns passes the
// validator and fits its budget; it says infeasible only below the
// schedule-free bound it names, and that bound is never above a plan any
// planner found; status, message and the named bound agree.
#pragma once

#include <memplan/check/validator.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/schedule/schedule.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace memplan::testing {

/// What one planner did on one graph over the sweep.
struct remat_contract_summary {
    std::uint64_t min_memory = 0;   ///< the schedule-free bound the planner named
    std::uint64_t smallest_arena = std::numeric_limits<std::uint64_t>::max(); ///< of its plans
    int solved = 0;                 ///< budgets with a plan
    int infeasible = 0;             ///< budgets reported infeasible
};

/// Checks one result of `planner` for budget `budget` on `g`.
template <class Graph>
void check_remat_result(const Graph& g, const remat_result_of<Graph>& r, std::uint64_t budget) {
    INFO("planner " << r.planner << ", budget " << budget << ": " << to_string(r.status) << " '" << r.message << "'");
    CHECK(!r.planner.empty());
    CHECK(std::uint64_t(r.budget) == budget);
    // A well-formed graph never makes a planner fail: it finds a plan, proves
    // there is none, or runs out of time.
    CHECK((has_solution(r.status) || r.status == status::infeasible || r.status == status::no_solution));
    if (has_solution(r.status)) {
        const auto report = check_plan(g, r.plan);
        INFO(report.to_string());
        CHECK(report.ok());
        CHECK(std::uint64_t(r.arena()) <= budget);
        CHECK(r.cost == doctest::Approx(schedule_cost(g, r.plan.steps)));
        CHECK(r.cost >= r.fastest_cost - 1e-9 * std::max(1.0, r.fastest_cost)); // no plan beats the fastest variants
        CHECK(r.fastest_cost <= r.base_cost + 1e-9 * std::max(1.0, r.base_cost));
        return;
    }
    // Without a plan the message says why, and names the bound.
    CHECK(!r.message.empty());
    CHECK(r.bound > 0);
    CHECK(r.message.find(std::to_string(r.bound)) != std::string::npos);
    if (r.status == status::infeasible) {
        CHECK(std::uint64_t(r.bound) > budget); // infeasible only below the bound it names
        CHECK(!r.bound_op.empty());
        CHECK(r.message.find("'" + r.bound_op + "'") != std::string::npos);
    } else {
        CHECK(std::uint64_t(r.bound) <= budget); // below it, the answer is a proof, not a timeout
    }
}

/// Runs `planner` on `g` at budgets from 1 byte to unlimited: 1, the bound
/// it names minus one, the bound, fractions of the store-all arena
/// `store_all_arena`, that arena, and no limit.
template <class Planner, class Graph>
remat_contract_summary check_remat_contract(const Planner& planner, const Graph& g, std::uint64_t store_all_arena,
                                            double seconds) {
    remat_contract_summary sum;
    remat_options o;
    o.time_limit = seconds;
    auto run = [&](std::uint64_t budget) {
        o.budget = budget;
        const auto r = planner.plan(g, o);
        check_remat_result(g, r, budget);
        if (has_solution(r.status)) {
            ++sum.solved;
            sum.smallest_arena = std::min<std::uint64_t>(sum.smallest_arena, r.arena());
        } else {
            if (r.status == status::infeasible) ++sum.infeasible;
            // One graph, one schedule-free bound, whatever the budget.
            if (sum.min_memory != 0) CHECK(std::uint64_t(r.bound) == sum.min_memory);
        }
        return r;
    };
    // One byte fits nothing: every planner proves it and names the bound.
    const auto tiny = run(1);
    REQUIRE(tiny.status == status::infeasible);
    sum.min_memory = tiny.bound;
    REQUIRE(sum.min_memory > 1);
    CHECK(run(sum.min_memory - 1).status == status::infeasible);
    CHECK(run(sum.min_memory).status != status::infeasible);
    for (double f : {0.3, 0.45, 0.6, 0.8}) {
        const auto budget = static_cast<std::uint64_t>(double(store_all_arena) * f);
        const auto r = run(budget);
        CHECK((r.status == status::infeasible) == (budget < sum.min_memory));
    }
    // Keeping everything fits from the store-all arena up.
    CHECK(has_solution(run(store_all_arena).status));
    CHECK(has_solution(run(std::numeric_limits<std::uint64_t>::max()).status));
    // The bound is a bound: no plan is smaller.
    CHECK(sum.min_memory <= sum.smallest_arena);
    return sum;
}

} // namespace memplan::testing
