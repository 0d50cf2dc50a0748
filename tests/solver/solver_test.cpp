// MILP backends through the SolverLike concept: known optima, malformed
// models, infeasibility, time limits with a warm start, concurrent solves.
#include "backends.hpp"

#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace memplan;

namespace {

// max 3x + 2y  s.t.  x + y <= 4,  x + 3y <= 6,  x <= 3  -> x = 3, y = 1, 11.
milp_model small_lp() {
    milp_model m;
    m.sense = objective_sense::maximize;
    const auto x = m.add_column("x", column_kind::continuous, 0, 3, 3);
    const auto y = m.add_column("y", column_kind::continuous, 0, milp_infinity, 2);
    m.add_le("cap", {{x, 1}, {y, 1}}, 4);
    m.add_le("mix", {{x, 1}, {y, 3}}, 6);
    return m;
}

// 0/1 knapsack: values 8 11 6 4, weights 5 7 4 3, capacity 14 -> 21 (items 2, 3, 4).
milp_model knapsack() {
    milp_model m;
    m.sense = objective_sense::maximize;
    const double value[] = {8, 11, 6, 4}, weight[] = {5, 7, 4, 3};
    std::vector<milp_term> row;
    for (int j = 0; j < 4; ++j) row.push_back({m.add_binary("item" + std::to_string(j), value[j]), weight[j]});
    m.add_le("weight", row, 14);
    return m;
}

// min 10 + x + y + w, 3 <= 2x + 3y <= 5, x == y, w fixed at 2, all integer -> x = y = 1, 14.
milp_model ranged_integer() {
    milp_model m;
    m.objective_offset = 10;
    const auto x = m.add_column("x", column_kind::integer, 0, 10, 1);
    const auto y = m.add_column("y", column_kind::integer, 0, 10, 1);
    const auto w = m.add_column("w", column_kind::integer, 2, 2, 1);
    m.add_row("range", {{x, 2}, {y, 3}}, 3, 5);
    m.add_eq("same", {{x, 1}, {y, -1}}, 0);
    m.add_ge("w_used", {{w, 1}}, 1);
    return m;
}

// Market split (Cornuejols & Dawande 1998): sum_j a_ij x_j + s_i+ - s_i- = d_i,
// minimise the slack. The LP bound is 0 and branch-and-bound crawls, so a
// short time limit ends with an incumbent and a gap.
milp_model market_split(unsigned seed, int rows, int cols) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> coef(0, 99);
    milp_model m;
    for (int j = 0; j < cols; ++j) m.add_binary(std::string("x").append(std::to_string(j)));
    std::vector<std::vector<int>> a(rows, std::vector<int>(cols));
    for (int i = 0; i < rows; ++i) {
        int sum = 0;
        for (int j = 0; j < cols; ++j) sum += a[i][j] = coef(rng);
        const std::string tag = std::to_string(i); // (GCC 12 warns falsely on "literal" + to_string here)
        const auto plus = m.add_column(std::string("over").append(tag), column_kind::continuous, 0, milp_infinity, 1);
        const auto minus = m.add_column(std::string("under").append(tag), column_kind::continuous, 0, milp_infinity, 1);
        std::vector<milp_term> row;
        for (int j = 0; j < cols; ++j) row.push_back({static_cast<std::size_t>(j), static_cast<double>(a[i][j])});
        row.push_back({plus, 1});
        row.push_back({minus, -1});
        m.add_eq("split" + std::to_string(i), row, std::floor(sum / 2.0));
    }
    // Warm start: every x at 0, the slack carries the whole right-hand side.
    m.incumbent.assign(m.columns.size(), 0.0);
    for (int i = 0; i < rows; ++i) m.incumbent[static_cast<std::size_t>(cols + 2 * i)] = m.rows[i].lower;
    return m;
}

// Transportation: min sum c_ij x_ij, supply rows <= s_i, demand rows >= d_j
// (total supply exceeds total demand): large, sparse, always feasible.
milp_model transportation(unsigned seed, int sources, int sinks) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> cost(1, 50), amount(10, 100);
    milp_model m;
    std::vector<std::vector<milp_term>> supply(static_cast<std::size_t>(sources)), demand(static_cast<std::size_t>(sinks));
    for (int i = 0; i < sources; ++i)
        for (int j = 0; j < sinks; ++j) {
            const auto c = m.add_column(std::string("x").append(std::to_string(i)).append("_").append(std::to_string(j)),
                                        column_kind::continuous, 0, milp_infinity, cost(rng));
            supply[static_cast<std::size_t>(i)].push_back({c, 1});
            demand[static_cast<std::size_t>(j)].push_back({c, 1});
        }
    for (int i = 0; i < sources; ++i) m.add_le("supply", supply[static_cast<std::size_t>(i)], 2.0 * amount(rng));
    for (int j = 0; j < sinks; ++j) m.add_ge("demand", demand[static_cast<std::size_t>(j)], amount(rng));
    return m;
}

solve_options interior_point(double seconds = 10) {
    solve_options o;
    o.lp_method = lp_algorithm::interior;
    o.time_limit = seconds;
    return o;
}

} // namespace

static_assert(SolverLike<glpk_solver>);

TEST_CASE_TEMPLATE("solver.lp.interior_point_matches_simplex", S, MEMPLAN_SOLVERS) {
    // Backends without an interior-point method use simplex; either way the
    // optimum is the same, up to the interior point's tolerance.
    const S solver{};
    const auto small = solver.solve(small_lp(), interior_point());
    INFO(small.message);
    REQUIRE(has_solution(small.status));
    CHECK(small.objective == doctest::Approx(11).epsilon(1e-6));
    for (unsigned seed : {1u, 2u}) {
        const auto m = transportation(seed, 30, 40);
        const auto simplex = solver.solve(m, {});
        const auto ipm = solver.solve(m, interior_point());
        INFO(ipm.message);
        REQUIRE(simplex.status == status::optimal);
        REQUIRE(has_solution(ipm.status));
        CHECK(ipm.objective == doctest::Approx(simplex.objective).epsilon(1e-5));
        CHECK(ipm.objective == doctest::Approx(objective_value(m, ipm.values)).epsilon(1e-9));
        CHECK_FALSE(check_solution(m, ipm.values, 1e-6));
    }
    // A MILP ignores the option: its relaxations need simplex.
    const auto k = solver.solve(knapsack(), interior_point());
    REQUIRE(k.status == status::optimal);
    CHECK(k.objective == doctest::Approx(21));
}

TEST_CASE("solver.glpk.interior_point_time_limit") {
    // GLPK's interior point has no time limit of its own; the output hook
    // stops it, and the thread's GLPK environment is usable afterwards.
    const auto m = transportation(3, 200, 200);
    const auto r = glpk_solver{}.solve(m, interior_point(0.01));
    CHECK(r.status == status::no_solution);
    CHECK(r.message.find("interior") != std::string::npos);
    CHECK(r.seconds < 5);
    CHECK(glpk_solver{}.solve(small_lp(), {}).status == status::optimal);
    const auto again = glpk_solver{}.solve(transportation(1, 30, 40), interior_point());
    CHECK(has_solution(again.status));
}

TEST_CASE_TEMPLATE("solver.lp.known_optimum", S, MEMPLAN_SOLVERS) {
    const auto r = S{}.solve(small_lp(), {});
    REQUIRE(r.status == status::optimal);
    CHECK(r.objective == doctest::Approx(11));
    CHECK(r.bound == doctest::Approx(11));
    REQUIRE(r.values.size() == 2);
    CHECK(r.values[0] == doctest::Approx(3));
    CHECK(r.values[1] == doctest::Approx(1));
    CHECK(r.nodes == 0);
}

TEST_CASE_TEMPLATE("solver.milp.knapsack", S, MEMPLAN_SOLVERS) {
    const auto m = knapsack();
    const auto r = S{}.solve(m, {});
    REQUIRE(r.status == status::optimal);
    CHECK(r.objective == doctest::Approx(21));
    CHECK(r.bound == doctest::Approx(21));
    CHECK(r.gap() == 0);
    CHECK_FALSE(check_solution(m, r.values));
    CHECK(r.values[0] == 0);
    CHECK(r.values[1] == 1);
}

TEST_CASE_TEMPLATE("solver.milp.ranged_equality_fixed_offset", S, MEMPLAN_SOLVERS) {
    const auto m = ranged_integer();
    const auto r = S{}.solve(m, {});
    REQUIRE(r.status == status::optimal);
    CHECK(r.objective == doctest::Approx(14));
    CHECK(r.values[0] == 1);
    CHECK(r.values[1] == 1);
    CHECK(r.values[2] == 2);
    CHECK_FALSE(check_solution(m, r.values));
}

TEST_CASE_TEMPLATE("solver.milp.warm_start_is_used_and_bad_one_ignored", S, MEMPLAN_SOLVERS) {
    auto m = knapsack();
    m.incumbent = {1, 1, 0, 0}; // value 19, feasible
    auto r = S{}.solve(m, {});
    REQUIRE(r.status == status::optimal);
    CHECK(r.objective == doctest::Approx(21));
    m.incumbent = {1, 1, 1, 1}; // overweight: must not be trusted
    r = S{}.solve(m, {});
    REQUIRE(r.status == status::optimal);
    CHECK(r.objective == doctest::Approx(21));
    CHECK(r.message.find("incumbent ignored") != std::string::npos);
}

TEST_CASE_TEMPLATE("solver.model.malformed_is_an_error_result", S, MEMPLAN_SOLVERS) {
    const S solver{};
    {
        auto m = knapsack();
        m.rows[0].terms[1].coefficient = std::nan("");
        const auto r = solver.solve(m, {});
        CHECK(r.status == status::error);
        CHECK(r.message.find("row 0 'weight'") != std::string::npos);
        CHECK(r.message.find("item1") != std::string::npos);
    }
    {
        auto m = knapsack();
        m.columns[2].kind = column_kind::integer;
        m.columns[2].lower = 3;
        m.columns[2].upper = 2;
        const auto r = solver.solve(m, {});
        CHECK(r.status == status::error);
        CHECK(r.message.find("column 2 'item2'") != std::string::npos);
    }
    {
        auto m = knapsack();
        m.rows[0].terms.push_back({17, 1.0});
        const auto r = solver.solve(m, {});
        CHECK(r.status == status::error);
        CHECK(r.message.find("column 17") != std::string::npos);
    }
    {
        auto m = knapsack();
        m.columns[3].upper = 2;
        const auto r = solver.solve(m, {});
        CHECK(r.status == status::error);
        CHECK(r.message.find("binary") != std::string::npos);
    }
    {
        auto m = knapsack();
        m.rows[0].terms.push_back({0, 2.0}); // column 0 twice
        CHECK(solver.solve(m, {}).status == status::error);
        m = knapsack();
        m.incumbent = {1, 0};
        CHECK(solver.solve(m, {}).status == status::error);
    }
    // The process is fine and the backend still works.
    CHECK(solver.solve(knapsack(), {}).status == status::optimal);
}

TEST_CASE_TEMPLATE("solver.infeasible_and_unbounded", S, MEMPLAN_SOLVERS) {
    const S solver{};
    {
        milp_model m; // LP infeasible
        const auto x = m.add_column("x", column_kind::continuous, 0, 10);
        const auto y = m.add_column("y", column_kind::integer, 0, 10);
        m.add_ge("low", {{x, 1}, {y, 1}}, 5);
        m.add_le("high", {{x, 1}, {y, 1}}, 3);
        const auto r = solver.solve(m, {});
        CHECK(r.status == status::infeasible);
        CHECK_FALSE(r.message.empty());
    }
    {
        milp_model m; // LP feasible (x = 0.5), no integer point
        const auto x = m.add_column("x", column_kind::integer, 0, 10, 1);
        m.add_eq("half", {{x, 2}}, 1);
        const auto r = solver.solve(m, {});
        CHECK(r.status == status::infeasible);
        CHECK_FALSE(r.message.empty());
    }
    {
        milp_model m;
        m.sense = objective_sense::maximize;
        const auto x = m.add_column("x", column_kind::integer, 0, milp_infinity, 1);
        const auto y = m.add_column("y", column_kind::continuous, 0, milp_infinity, 1);
        m.add_ge("some", {{x, 1}, {y, 1}}, 1);
        CHECK(solver.solve(m, {}).status == status::unbounded);
    }
}

TEST_CASE_TEMPLATE("solver.time_limit_gives_incumbent_and_bound", S, MEMPLAN_SOLVERS) {
    const auto m = market_split(7, 4, 36);
    solve_options o;
    o.time_limit = 0.5;
    const auto r = S{}.solve(m, o);
    INFO(r.message);
    REQUIRE(has_solution(r.status));
    CHECK_FALSE(check_solution(m, r.values));
    CHECK(r.objective <= objective_value(m, m.incumbent) + 1e-6);
    CHECK(r.bound >= -1e-6);
    CHECK(r.bound <= r.objective + 1e-6);
    if (r.status == status::feasible) {
        CHECK(r.gap() > 0);
        CHECK(r.nodes > 0);
    } else {
        CHECK(r.objective == doctest::Approx(r.bound));
    }
}

TEST_CASE_TEMPLATE("solver.threads_match_serial_runs", S, MEMPLAN_SOLVERS) {
    std::vector<milp_model> models = {knapsack(), ranged_integer(), market_split(3, 2, 14), market_split(5, 2, 16)};
    const S solver{};
    std::vector<double> serial;
    for (const auto& m : models) {
        const auto r = solver.solve(m, {});
        REQUIRE(r.status == status::optimal);
        serial.push_back(r.objective);
    }
    std::vector<std::vector<double>> seen(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
            for (int round = 0; round < 3; ++round)
                for (std::size_t k = 0; k < models.size(); ++k) {
                    const auto& m = models[(k + static_cast<std::size_t>(t)) % models.size()];
                    const auto r = solver.solve(m, {});
                    seen[t].push_back(r.status == status::optimal ? r.objective : -1e300);
                }
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 2; ++t)
        for (std::size_t i = 0; i < seen[t].size(); ++i) {
            const std::size_t k = i % models.size();
            CHECK(seen[t][i] == doctest::Approx(serial[(k + static_cast<std::size_t>(t)) % models.size()]));
        }
}

TEST_CASE("solver.glpk.error_hook_traps_a_real_glpk_error") {
    detail::glpk_session session;
    const bool failed = detail::glpk_guarded(session, [] {
        glp_prob* p = glp_create_prob();
        glp_add_cols(p, 1);
        glp_set_col_bnds(p, 5, GLP_LO, 0.0, 0.0); // column 5 does not exist: GLPK would abort
    });
    CHECK(failed);
    CHECK(session.log.find("out of range") != std::string::npos);
    // The environment was freed and rebuilt: solving on this thread still works.
    CHECK(glpk_solver{}.solve(knapsack(), {}).status == status::optimal);
    // And once more from another thread, whose environment is its own.
    bool ok = false;
    std::thread([&] {
        detail::glpk_session s;
        const bool f = detail::glpk_guarded(s, [] { glp_set_col_bnds(glp_create_prob(), 1, GLP_LO, 0.0, 0.0); });
        ok = f && glpk_solver{}.solve(small_lp(), {}).status == status::optimal;
    }).join();
    CHECK(ok);
}

TEST_CASE("solver.glpk.last_error_names_the_call") {
    CHECK(detail::glpk_last_error("glp_set_col_bnds: j = 5; column number out of range\nError detected in file "
                                  "api/prob1.c at line 1013\n")
              .find("glp_set_col_bnds: j = 5") == 0);
}
