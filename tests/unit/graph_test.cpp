// Graph construction, validation and the lower bounds on hand-made graphs.
#include "support/fixtures.hpp"
#include <memplan/graph/validate.hpp>
#include <memplan/plan/bounds.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace memplan;
using memplan::testing::message_of;

namespace {

graph diamond() { return testing::diamond_graph(); }


} // namespace

TEST_CASE("graph.diamond.lower_bounds_of_the_three_orders") {
    const graph g = diamond();
    validate(g);
    auto order = [&](std::initializer_list<const char*> names) {
        std::vector<graph::id_type> ids;
        for (auto n : names) ids.push_back(*g.find_op(n));
        return schedule_from_order(g, ids);
    };
    CHECK(schedule_lower_bound(g, order({"A", "B", "D", "E", "C", "F", "G"})) == 130);
    CHECK(schedule_lower_bound(g, order({"A", "B", "C", "D", "E", "F", "G"})) == 150);
    CHECK(schedule_lower_bound(g, order({"A", "B", "D", "C", "E", "F", "G"})) == 150);
    CHECK(schedule_free_lower_bound(g) == 120); // F: 60 + 50 in, 10 out
}

TEST_CASE("graph.validate.rejections_name_the_culprit") {
    SUBCASE("produced twice") {
        graph g;
        g.add_tensor("x", 4);
        g.add_op("p", {}, {"x"});
        g.add_op("q", {}, {"x"});
        CHECK(message_of([&] { validate(g); }).find("tensor 'x' is produced twice") != std::string::npos);
    }
    SUBCASE("cycle") {
        graph g;
        g.add_tensor("x", 4);
        g.add_tensor("y", 4);
        g.add_op("p", {"y"}, {"x"});
        g.add_op("q", {"x"}, {"y"});
        CHECK(message_of([&] { validate(g); }).find("cycle") != std::string::npos);
    }
    SUBCASE("read before producer") {
        graph g;
        g.add_tensor("x", 4);
        g.add_tensor("y", 4);
        g.add_op("q", {"x"}, {"y"});
        g.add_op("p", {}, {"x"});
        CHECK(message_of([&] { validate(g); }).find("op 'q' reads tensor 'x' before its producer 'p'") !=
              std::string::npos);
    }
    SUBCASE("overflow") {
        graph g;
        g.add_tensor("x", ~std::uint64_t{0});
        g.add_tensor("y", 1);
        CHECK(message_of([&] { validate(g); }).find("overflows at tensor 'y'") != std::string::npos);
    }
    SUBCASE("unknown name") {
        graph g;
        CHECK(message_of([&] { g.add_op("p", {"nope"}, {}); }).find("op 'p' names tensor 'nope'") !=
              std::string::npos);
    }
    SUBCASE("duplicate names") {
        graph g;
        g.add_tensor("x", 1);
        CHECK(message_of([&] { g.add_tensor("x", 2); }).find("tensor 'x' is declared twice") != std::string::npos);
    }
}

TEST_CASE("graph.liveness.inplace_output_takes_over_input") {
    graph g("inplace");
    g.add_tensor("x", 100);
    g.add_tensor("y", 100);
    g.add_tensor("z", 10);
    g.add_op("p", {}, {"x"});
    const auto r = g.add_op("relu", {"x"}, {"y"});
    g.op_at(r).inplace.push_back({*g.find_tensor("x"), *g.find_tensor("y")});
    g.add_op("q", {"y"}, {"z"});
    validate(g);
    const auto live = compute_liveness(g, default_schedule(g));
    REQUIRE(live.alias_of.size() == 3);
    CHECK(live.alias_of[1] == 0);               // y takes over x
    CHECK(live.buffers[1].alias == *g.find_tensor("x"));
    CHECK(lower_bound(live) == 110);            // step 1: x and y share 100; step 2: y + z
    const auto no_inplace = compute_liveness(g, default_schedule(g), {.use_inplace = false});
    CHECK(lower_bound(no_inplace) == 200);      // x and y side by side at step 1
    CHECK(schedule_free_lower_bound(g) == 110);
}
