// The registries that select policies by name: every row is named as its
// type, runs what it says, and every family answers an unknown name with the
// same message listing its choices.
#include "support/fixtures.hpp"
#include "support/remat_graphs.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/named.hpp>
#include <memplan/remat/budget.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/schedule/order/select.hpp>
#include <memplan/solver/select.hpp>

#include <doctest/doctest.h>

#include <initializer_list>
#include <optional>
#include <string>

#include <random>
#include <set>
#include <string>

using namespace memplan;

namespace {

template <class Run>
void check_table(std::span<const registry_entry<Run>> table) {
    std::set<std::string_view> names;
    for (const auto& e : table) {
        CAPTURE(e.name);
        CHECK(!e.name.empty());
        CHECK(!e.description.empty());
        CHECK(static_cast<bool>(e.run));
        CHECK(names.insert(e.name).second); // unique
    }
}

} // namespace

TEST_CASE("registry.rows_are_named_as_their_types") {
    check_table(allocator_registry());
    check_table(order_registry<graph>());
    check_table(remat_registry<graph>());
    CHECK(find_allocator(greedy_by_size::name).name == "greedy_by_size");
    CHECK(find_allocator(auto_allocator::name).name == "auto");
    CHECK(find_order_planner(greedy_order::name).name == "greedy");
    CHECK(find_remat_planner(chain_dp::name).name == "chain_dp");
    CHECK(find_remat_planner(auto_remat::name).name == "auto");
    CHECK(remat_registry<graph>().front().name == "auto"); // the default
    CHECK(order_registry<graph>().front().name == "default");
}

TEST_CASE("registry.one_unknown_name_message") {
    CHECK(testing::message_of([] { find_allocator("fits_all"); }) ==
          "[memplan.alloc] unknown allocator 'fits_all'; expected one of: " + registry_names(allocator_registry()));
    CHECK(testing::message_of([] { find_order_planner("random"); }) ==
          "[memplan.order] unknown ordering planner 'random'; expected one of: default, greedy, ilp");
    CHECK(testing::message_of([] { find_remat_planner("magic"); }) ==
          "[memplan.remat] unknown planner 'magic'; expected one of: auto, joint, checkmate, chain_dp, block_dp, "
          "chen_greedy, sqrt_n, store_all");
}

TEST_CASE("registry.rows_run_their_planner") {
    const graph g = testing::diamond_graph();
    const auto s = default_schedule(g);
    for (const auto& e : allocator_registry()) {
        CAPTURE(e.name);
        if (e.needs_solver) {
            // This test binary links no backend: the row says so instead of running.
            CHECK(solver_backends().empty());
            CHECK(testing::message_of([&] { make_plan(g, s, e.name); }).find("no MILP solver backend") !=
                  std::string::npos);
            continue;
        }
        allocator_settings st;
        st.time_limit = 1;
        const auto r = make_plan(g, s, e.name, {}, st);
        REQUIRE(has_solution(r.status));
        CHECK(check_plan(g, r.plan).ok());
    }
    std::mt19937_64 rng(7);
    const graph t = testing::random_remat_graph(rng);
    const remat_context<graph> ctx(t);
    for (const auto& e : remat_registry<graph>()) {
        CAPTURE(e.name);
        remat_options o;
        o.time_limit = 1;
        if (e.needs_solver) {
            CHECK_THROWS_AS(e.run(ctx, o, {}), memplan::error);
            continue;
        }
        const auto r = e.run(ctx, o, {});
        REQUIRE(has_solution(r.status));
        CHECK(check_plan(t, r.plan).ok());
    }
}

TEST_CASE("registry.solver_by_name_without_backends") {
    CHECK(solver_backends().empty());
    CHECK(solver_backend_names() == "none");
    CHECK(testing::message_of([] { check_solver_name("glpk"); }).find("no MILP solver backend in this build") !=
          std::string::npos);
}

namespace {

/// Every one of `bad` is refused with a message containing `message`.
void refused(std::initializer_list<const char*> bad, const std::string& message) {
    for (const char* b : bad) {
        CAPTURE(b);
        CHECK(testing::message_of([&] { parse_budget("option --budget", b); }).find(message) != std::string::npos);
    }
}

} // namespace

TEST_CASE("budget.parse") {
    CHECK(parse_budget("b", "8000000000").bytes == 8000000000ull);
    CHECK(parse_budget("b", "7.5GiB").bytes == 8053063680ull);
    CHECK(parse_budget("b", "8GB").bytes == 8000000000ull);
    const auto p = parse_budget("b", "40%");
    REQUIRE(p.percent);
    CHECK(p.of(1000) == 400);
    refused({"", "0", "-5", "lots", "5 GiB", "1.5", "0%", "12XB"}, "option --budget: expected bytes");
}

/// "FORM:0.25" and "FORM:1" read as those fractions in `field` (saved or fraction), and no percentage.
budget_spec parses_fraction(const std::string& form, std::optional<double> budget_spec::*field) {
    const auto b = parse_budget("b", form + ":0.25");
    REQUIRE((b.*field).has_value());
    CHECK(*(b.*field) == 0.25);
    CHECK(!b.percent);
    CHECK(parse_budget("b", form + ":1").*field == 1.0);
    return b;
}

TEST_CASE("budget.parse_saved_fraction") {
    const auto s = parses_fraction("saved", &budget_spec::saved);
    CHECK(!s.fraction);
    refused({"saved:0", "saved:1.5", "saved:", "saved:x", "saved:-0.5", "saved:0.5GiB", "saved:nan"},
            "option --budget: saved:F wants a fraction F in (0, 1]");
    // Only the arena known: saved:F has nothing to refer to.
    CHECK(testing::message_of([&] { (void)s.of(1000); }).find("saved:F needs") != std::string::npos);
}

TEST_CASE("budget.parse_fraction") {
    const auto f = parses_fraction("fraction", &budget_spec::fraction);
    CHECK(!f.saved);
    CHECK(parse_budget("b", "fraction:0").fraction == 0.0);
    refused({"fraction:1.5", "fraction:", "fraction:x", "fraction:-0.5", "fraction:-0", "fraction:nan", "fraction:inf",
             "fraction:0.5GiB", "fraction:+0.5"},
            "option --budget: fraction:F wants a fraction F in [0, 1]");
    // Below 1 the smallest peak is needed, which the arena alone does not give; 1 is the arena.
    CHECK(f.needs_floor());
    CHECK(!f.needs_floor(budget_on::saved));
    CHECK(!parse_budget("b", "fraction:1").needs_floor());
    CHECK(parse_budget("b", "fraction:1").of(1000) == 1000);
    CHECK(testing::message_of([&] { (void)f.of(1000); }).find("fraction:F needs the smallest peak") !=
          std::string::npos);
}

TEST_CASE("budget.fraction_interpolates_from_the_smallest_peak") {
    budget_reference r{10000, 1000, 4000}; // store-all: arena, resident, kept
    r.floor = 6000;                        // the smallest peak found
    CHECK(parse_budget("b", "fraction:0").of(r) == 6000);
    CHECK(parse_budget("b", "fraction:0.25").of(r) == 7000);
    CHECK(parse_budget("b", "fraction:1").of(r) == 10000);
    // Monotone in F, every value within [floor, arena].
    std::uint64_t last = 0;
    for (int i = 0; i <= 100; ++i) {
        const auto b = parse_budget("b", "fraction:" + std::to_string(i / 100.0)).of(r);
        CHECK(b >= last);
        CHECK(b >= r.floor);
        CHECK(b <= r.arena);
        last = b;
    }
    // On the boundary: the resident bytes and F of what store-all keeps, as saved:F (F = 0 allowed).
    CHECK(parse_budget("b", "fraction:0.25").of(r, budget_on::saved) == 2000);
    CHECK(parse_budget("b", "fraction:0").of(r, budget_on::saved) == 1000);
    // A floor at or above the arena (nothing below store-all found) is the arena.
    r.floor = 10000;
    CHECK(parse_budget("b", "fraction:0").of(r) == 10000);
}

TEST_CASE("budget.resolved_for_the_peak_and_for_the_boundary") {
    const budget_reference r{10000, 1000, 4000}; // store-all: arena, resident, kept
    const auto bytes = parse_budget("b", "3000");
    const auto pct = parse_budget("b", "40%");
    const auto saved = parse_budget("b", "saved:0.25");
    // The arena: bytes as given, P% of store-all's arena, its arena less (1 - F) of what it keeps.
    CHECK(bytes.of(r) == 3000);
    CHECK(pct.of(r) == 4000);
    CHECK(saved.of(r) == 10000 - 3000);
    CHECK(parse_budget("b", "saved:1").of(r) == 10000);
    CHECK(pct.of(r) == pct.of(std::uint64_t{10000})); // the one-number form, for callers that know only the arena
    // The bytes at the boundary: resident + bytes saved, P% of resident + kept, resident + F kept.
    CHECK(bytes.of(r, budget_on::saved) == 4000);
    CHECK(pct.of(r, budget_on::saved) == 2000);
    CHECK(saved.of(r, budget_on::saved) == 2000);
    CHECK(parse_budget("b", "saved:1").of(r, budget_on::saved) == 5000);
    CHECK(parse_budget("b", "18446744073709551615").of(r, budget_on::saved) == UINT64_MAX); // saturates
    // Rounded down.
    CHECK(parse_budget("b", "saved:0.3333").of({10, 0, 10}, budget_on::saved) == 3);
}

TEST_CASE("budget.on_parse") {
    CHECK(parse_budget_on("b", "peak") == budget_on::peak);
    CHECK(parse_budget_on("b", "saved") == budget_on::saved);
    CHECK(to_string(budget_on::saved) == "saved");
    CHECK(testing::message_of([] { parse_budget_on("option --budget-on", "arena"); })
              .find("option --budget-on: expected peak or saved, got 'arena'") != std::string::npos);
}
