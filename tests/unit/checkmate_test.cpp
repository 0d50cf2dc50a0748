// Import of Checkmate / Moccasin node-link graphs (formats.md §4): both
// variants, the topological default order with ties by the smaller id, and
// every rejection naming its node or link.
#include <memplan/alloc/allocators.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/io/checkmate_json.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace memplan;

namespace {

std::vector<std::string> op_names(const graph& g) {
    std::vector<std::string> v;
    for (const auto& o : g.ops()) v.push_back(o.name);
    return v;
}

std::string import_error(const std::string& text) {
    try {
        parse_checkmate_json(text, "g.json");
    } catch (const error& e) {
        return e.what();
    }
    return "";
}

// Ids deliberately out of topological order: 3 -> 1 -> 0, 2 -> 0, and 4
// (backward) reads 0 and 3.
const char* checkmate_text = R"({
  "directed": true, "multigraph": false, "graph": {"name": "tiny checkmate"},
  "nodes": [
    {"id": 0, "name": "join", "backward": false, "cost_cpu": 5, "cost_ram": 400},
    {"id": 1, "name": "conv", "backward": false, "cost_cpu": 3, "cost_ram": 300},
    {"id": 2, "name": "input2", "backward": false, "cost_cpu": 1, "cost_ram": 200},
    {"id": 3, "name": "input", "backward": false, "cost_cpu": 1, "cost_ram": 100},
    {"id": 4, "name": "grad", "backward": true, "cost_cpu": 7, "cost_ram": 500.0}
  ],
  "links": [{"source": 3, "target": 1}, {"source": 1, "target": 0}, {"source": 2, "target": 0},
            {"source": 0, "target": 4}, {"source": 3, "target": 4}]
})";

} // namespace

TEST_CASE("io.checkmate.node_link_variant") {
    const graph g = parse_checkmate_json(checkmate_text, "tiny.json");
    CHECK(g.name() == "tiny checkmate");
    // Ready at first: 2 and 3; the smaller id (2) first. Then 3, 1, 0, 4.
    CHECK(op_names(g) == std::vector<std::string>{"input2", "input", "conv", "join", "grad"});
    const auto& join = g.op(*g.find_op("join"));
    CHECK(join.cost == 5.0);
    CHECK(join.inputs.size() == 2);
    CHECK(g.tensor(join.outputs.front()).bytes == 400);
    CHECK(g.op(*g.find_op("grad")).phase == phase::backward);
    CHECK(g.tensor(*g.find_tensor("grad")).bytes == 500);
    const auto r = make_plan(g, default_schedule(g), "greedy_by_size", {});
    CHECK(check_plan(g, r.plan).ok());
}

TEST_CASE("io.checkmate.moccasin_variant") {
    const std::string text = R"({"directed": true, "graph": {},
      "nodes": [{"name": 2, "duration": 4.5, "out_cost": 64},
                {"name": 0, "duration": 1, "out_cost": 32},
                {"name": 1, "duration": 2, "out_cost": 16}],
      "links": [{"0": 0, "1": 2}, {"0": 1, "1": 2}, {"0": 0, "1": 1}]})";
    const graph g = parse_checkmate_json(text, "layered.json");
    CHECK(g.name() == "layered");
    CHECK(op_names(g) == std::vector<std::string>{"0", "1", "2"});
    CHECK(g.op(2).cost == 4.5);
    CHECK(g.op(2).inputs.size() == 2);
    CHECK(g.tensor(g.op(2).outputs.front()).bytes == 64);
}

TEST_CASE("io.checkmate.duplicate_names_get_their_id") {
    const std::string text = R"({"nodes": [{"id": 0, "name": "relu", "cost_ram": 1}, {"id": 1, "name": "relu", "cost_ram": 1}],
                                "links": [{"source": 0, "target": 1}]})";
    const graph g = parse_checkmate_json(text, "dup.json");
    CHECK(op_names(g) == std::vector<std::string>{"relu#0", "relu#1"});
}

TEST_CASE("io.checkmate.rejections_name_the_culprit") {
    CHECK(import_error(R"({"nodes": [{"id": 0, "cost_ram": 1}], "links": [{"source": 0, "target": 9}]})")
              .find("links[0]: field 'target' names node '9' which does not exist") != std::string::npos);
    CHECK(import_error(R"({"nodes": [{"id": 0, "cost_ram": 1}, {"id": 0, "cost_ram": 2}], "links": []})")
              .find("node id '0' is used by an earlier node") != std::string::npos);
    CHECK(import_error(R"({"nodes": [{"id": 0, "cost_ram": -1}], "links": []})").find("'cost_ram' must be a finite number >= 0") !=
          std::string::npos);
    CHECK(import_error(R"({"nodes": [{"id": 0, "name": "a", "cost_ram": 1}, {"id": 1, "name": "b", "cost_ram": 1}],
                          "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}]})")
              .find("cycle through node") != std::string::npos);
    CHECK(import_error(R"({"nodes": [{"id": 0, "cost_ram": 1}]})").find("missing field 'links'") != std::string::npos);
    CHECK(import_error(R"({"nodes": [{"cost_ram": 1}], "links": []})").find("nodes[0]: missing field 'id'") !=
          std::string::npos);
    CHECK(import_error(R"({"nodes": [{"id": 0, "cost_ram": 1}], "links": [{"source": 0, "target": 0}]})")
              .find("depends on itself") != std::string::npos);
    CHECK(import_error("{\"nodes\": [").find("g.json:1:") != std::string::npos);
}
