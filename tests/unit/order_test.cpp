// Ordering planners without a solver: the MODeL/OLLA diamond, validity of
// every order, the list scheduler's own memory count against liveness, the
// greedy order against an exhaustive search, the order-independent bound, the
// MILP model's warm start (feasible and exact) and selection by name.
#include "support/fixtures.hpp"
#include "support/order_brute_force.hpp"

#include <memplan/schedule/order/default_order.hpp>
#include <memplan/schedule/order/detail/order_model.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/schedule/order/select.hpp>

#include <doctest/doctest.h>

#include <numeric>
#include <random>
#include <string>

using namespace memplan;
using memplan::testing::message_of;

namespace {

std::vector<graph::id_type> names_to_ids(const graph& g, std::initializer_list<const char*> names) {
    std::vector<graph::id_type> ids;
    for (auto n : names) ids.push_back(*g.find_op(n));
    return ids;
}

template <class R>
void check_result(const graph& g, const R& r) {
    REQUIRE(has_solution(r.status));
    const auto ids = order_of(r.schedule);
    CHECK_FALSE(check_topological_order(g, ids));
    CHECK(r.schedule == schedule_from_order(g, ids)); // default variants
    CHECK(r.size == schedule_lower_bound(g, r.schedule));
    CHECK(r.bound <= r.size);
    CHECK(r.bound >= order_lower_bound(g));
    CHECK((r.status == status::optimal) == (r.bound == r.size));
}


} // namespace

TEST_CASE("order.greedy.diamond") {
    const graph g = testing::order_diamond();
    const auto d = default_order{}.order(g);
    check_result(g, d);
    CHECK(d.size == 150);
    CHECK(d.bound == 120); // the schedule-free bound: F holds 60 + 50 + 10

    const auto r = greedy_order{}.order(g);
    check_result(g, r);
    CHECK(r.size == 130);
    CHECK(order_of(r.schedule) == names_to_ids(g, {"A", "B", "D", "E", "C", "F", "G"}));
    CHECK(r.status == status::feasible); // 130 is optimal, but no bound here proves it
}

TEST_CASE("order.planners.satisfy_the_concept") {
    static_assert(OrderPlannerLike<default_order, graph>);
    static_assert(OrderPlannerLike<greedy_order, graph>);
    using small_graph = basic_graph<std::uint32_t, std::uint16_t>;
    static_assert(OrderPlannerLike<greedy_order, small_graph>);
    small_graph g("tiny");
    g.add_tensor("x", 4);
    g.add_tensor("y", 8);
    g.add_op("p", {"x"}, {"y"});
    const auto r = greedy_order{}.order(g);
    CHECK(r.size == 12);
    CHECK(r.status == status::optimal);
}

TEST_CASE("order.check_topological_order.names_the_fault") {
    const graph g = testing::order_diamond();
    CHECK(check_topological_order(g, names_to_ids(g, {"A", "B", "C", "D", "E", "F", "G"})) == std::nullopt);
    CHECK(check_topological_order(g, names_to_ids(g, {"A", "C", "B", "D", "E", "F", "G"}))->find("reads tensor 'bc' before its producer 'B'") != std::string::npos);
    CHECK(check_topological_order(g, names_to_ids(g, {"A", "B", "C", "D", "E", "F"}))->find("'G' is missing") != std::string::npos);
    CHECK(check_topological_order(g, names_to_ids(g, {"A", "A", "B", "C", "D", "E", "F"}))->find("'A' appears twice") != std::string::npos);
}

TEST_CASE("order.list_state.counts_bytes_as_liveness_does") {
    // The scheduler's incremental count must equal the reference on any order.
    for (const auto& g : testing::small_order_graphs(11, 60)) {
        std::mt19937_64 rng(g.num_ops());
        detail::list_state<graph> s(g);
        std::vector<std::uint64_t> steps;
        while (!s.finished()) {
            const auto& ready = s.ready();
            const auto o = ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)];
            steps.push_back(s.step_bytes(o));
            s.apply(o);
        }
        const auto sched = schedule_from_order(g, s.order());
        const auto live = compute_liveness(g, sched);
        CHECK(steps == live_bytes(live.buffers, live.alias_of, live.num_steps));
        CHECK(s.peak() == schedule_lower_bound(g, sched));
        // Undo takes the state back to the start.
        while (s.steps() > 0) s.undo();
        CHECK(s.peak() == 0);
        auto again = s.ready();
        detail::list_state<graph> fresh(g);
        auto expect = fresh.ready();
        std::sort(again.begin(), again.end());
        std::sort(expect.begin(), expect.end());
        CHECK(again == expect);
        CHECK(s.carried() == fresh.carried());
    }
}

TEST_CASE("order.greedy.against_brute_force") {
    std::size_t equal = 0, total = 0, chains = 0;
    for (const auto& g : testing::small_order_graphs(2024, 120)) {
        const auto best = testing::brute_force_best_peak(g);
        for (const auto& r : {greedy_order{}.order(g), default_order{}.order(g)}) {
            check_result(g, r);
            CHECK(r.size >= best);
            CHECK(r.bound <= best); // the bound holds for every order
            if (r.status == status::optimal) CHECK(r.size == best);
        }
        const auto r = greedy_order{}.order(g);
        // One order only: nothing to choose, so greedy must find it.
        if (testing::count_topological_orders(g) == 1) {
            CHECK(r.size == best);
            ++chains;
        }
        // Greedy keeps the listed order when nothing beats it.
        CHECK(r.size <= default_order{}.order(g).size);
        ++total;
        if (r.size == best) ++equal;
    }
    MESSAGE("greedy optimal on " << equal << " of " << total << " small graphs (" << chains << " with one order)");
    CHECK(equal * 10 >= total * 7); // a regression guard, well below what is measured
}

TEST_CASE("order.greedy.lookahead_and_rules_are_valid") {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 10; ++i) {
        const graph g = testing::random_training_dag(rng, 30);
        for (auto rule : {greedy_rule::carried, greedy_rule::step, greedy_rule::peak})
            for (std::size_t depth : {1, 2, 4}) {
                const auto ord = detail::greedy_list_order(g, rule, depth, 3);
                CHECK_FALSE(check_topological_order(g, ord));
            }
        greedy_order no_lookahead;
        no_lookahead.lookahead = 0;
        check_result(g, no_lookahead.order(g));
        check_result(g, greedy_order{}.order(g));
    }
}

TEST_CASE("order.greedy.large_training_graph") {
    // About 10,000 ops; the planner must stay near-linear (no timing assertion).
    std::mt19937_64 rng(7);
    const graph g = testing::random_training_dag(rng, 3900);
    REQUIRE(g.num_ops() >= 9000);
    const auto r = greedy_order{}.order(g);
    check_result(g, r);
    CHECK(r.size <= default_order{}.order(g).size);
    MESSAGE(g.num_ops() << " ops: greedy peak " << r.size << " vs listed " << default_order{}.order(g).size
                        << " in " << r.seconds << " s (" << r.message << ")");
}

TEST_CASE("order.lower_bound.step_zero_and_last_step") {
    graph g("bounds");
    g.add_tensor("in", 100);
    g.add_tensor("w", 30, true);
    g.add_tensor("out", 50);
    g.add_tensor("y", 5);
    g.add_op("p", {"in"}, {"y"});
    g.add_op("q", {"y", "w"}, {"out"});
    g.add_output(*g.find_tensor("out"));
    // Step 0 holds every graph input (130) and p's output (5); the last step
    // holds w and out (80); no op alone needs more than 135.
    CHECK(order_lower_bound(g) == 135);
    const auto r = greedy_order{}.order(g);
    CHECK(r.size == 135);
    CHECK(r.status == status::optimal);
}

TEST_CASE("order.model.incumbent_is_feasible_and_exact") {
    // The MILP's warm start (the given order) must satisfy every row, and its
    // peak must be the order's real peak: the model counts as liveness does.
    std::size_t checked = 0;
    for (const auto& g : testing::small_order_graphs(99, 80)) {
        const graph_index<graph> index(g);
        std::vector<graph::id_type> ord(g.num_ops());
        std::iota(ord.begin(), ord.end(), graph::id_type{0});
        const auto live = compute_liveness(g, schedule_from_order(g, ord));
        const auto bytes = live_bytes(live.buffers, live.alias_of, live.num_steps);
        const std::size_t n = g.num_ops();
        for (std::size_t lo = 0; lo < n; ++lo)
            for (std::size_t hi = lo + 1; hi <= n; hi += 2) {
                std::string why;
                auto om = detail::make_order_model(g, index, ord, lo, hi, std::uint64_t{0}, 100000, why);
                REQUIRE(om);
                REQUIRE(validate_model(om->model) == std::nullopt);
                CHECK(check_solution(om->model, om->model.incumbent) == std::nullopt);
                const auto window_peak = *std::max_element(bytes.begin() + static_cast<std::ptrdiff_t>(lo),
                                                           bytes.begin() + static_cast<std::ptrdiff_t>(hi));
                CHECK(om->model.incumbent[om->peak_column] * om->unit == doctest::Approx(static_cast<double>(window_peak)));
                // Reading the incumbent back gives the order back.
                CHECK(detail::order_from_solution(g, index, ord, *om, om->model.incumbent) == ord);
                ++checked;
            }
    }
    MESSAGE(checked << " windows checked");
}

TEST_CASE("order.select.by_name") {
    const graph g = testing::order_diamond();
    CHECK(order_names() == std::vector<std::string_view>{"default", "greedy", "ilp"});
    CHECK(order_by_name("default", g).size == 150);
    CHECK(order_by_name("greedy", g).size == 130);
    // Without a backend linked, "ilp" by name says so (tests/solver runs it on GLPK and CBC).
    CHECK(message_of([&] { order_by_name("ilp", g); }).find("no MILP solver backend in this build") !=
          std::string::npos);
    CHECK(find_order_planner("ilp").needs_solver);
    CHECK(message_of([&] { order_by_name("fastest", g); }) ==
          "[memplan.order] unknown ordering planner 'fastest'; expected one of: default, greedy, ilp");
}

TEST_CASE("order.planners.reject_bad_graphs") {
    graph empty("empty");
    CHECK(message_of([&] { greedy_order{}.order(empty); }).find("has no ops") != std::string::npos);
    graph cyc("cycle");
    cyc.add_tensor("x", 4);
    cyc.add_tensor("y", 4);
    cyc.add_op("p", {"y"}, {"x"});
    cyc.add_op("q", {"x"}, {"y"});
    CHECK(message_of([&] { greedy_order{}.order(cyc); }).find("cycle") != std::string::npos);
    CHECK(message_of([&] { default_order{}.order(cyc); }).find("cycle") != std::string::npos);
}
