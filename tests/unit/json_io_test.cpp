// The JSON readers and writers (formats.md §1-2) and the graph of an offset
// instance: exact round trips, every rejection naming its culprit, atomic
// writes, and from_intervals keeping the lower bound of the shared instances.
#include "support/fixtures.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/offset_csv.hpp>
#include <memplan/io/plan_json.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/from_intervals.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

using namespace memplan;
namespace fs = std::filesystem;

using memplan::testing::message_of;

namespace {

bool same_graph(const graph& a, const graph& b) {
    if (a.name() != b.name() || a.num_tensors() != b.num_tensors() || a.num_ops() != b.num_ops() ||
        a.outputs() != b.outputs())
        return false;
    for (std::size_t t = 0; t < a.num_tensors(); ++t) {
        const auto &x = a.tensors()[t], &y = b.tensors()[t];
        if (x.name != y.name || x.bytes != y.bytes || x.persistent != y.persistent) return false;
    }
    for (std::size_t o = 0; o < a.num_ops(); ++o) {
        const auto &x = a.ops()[o], &y = b.ops()[o];
        if (x.name != y.name || x.inputs != y.inputs || x.outputs != y.outputs || x.cost != y.cost ||
            x.workspace != y.workspace || x.phase != y.phase || x.inplace != y.inplace ||
            x.variants.size() != y.variants.size())
            return false;
        for (std::size_t k = 0; k < x.variants.size(); ++k)
            if (x.variants[k].name != y.variants[k].name || x.variants[k].cost != y.variants[k].cost ||
                x.variants[k].workspace != y.variants[k].workspace)
                return false;
    }
    return true;
}

std::vector<fs::path> files_in(const fs::path& dir, std::string_view ext) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ext) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

const fs::path examples_dir = fs::path(MEMPLAN_SOURCE_DIR) / "examples" / "graphs";
const fs::path minimalloc_dir = fs::path(MEMPLAN_DATA_DIR) / "minimalloc-challenging";

// A graph that uses every field: persistent tensors, variants, in-place
// pairs, phases, outputs, awkward names and costs.
graph everything_graph() {
    graph g("every \"field\" ü");
    g.add_tensor("x", 1000);
    g.add_tensor("w", 64, true);
    g.add_tensor("h", 1000);
    g.add_tensor("a", 1000);
    g.add_tensor("big", std::uint64_t{1} << 62);
    g.add_tensor("loss", 4);
    g.add_tensor("dh", 1000);
    g.add_tensor("dw", 64);
    g.add_tensor("empty", 0);
    const auto mm = g.add_op("mm", {"x", "w"}, {"h"}, 0.1, 0);
    g.op_at(mm).variants = {{"fast", 1e-300, 4096}, {"slow", 2.5, 0}};
    const auto relu = g.add_op("relu", {"h"}, {"a"}, 1.0 / 3.0);
    g.op_at(relu).inplace = {{*g.find_tensor("h"), *g.find_tensor("a")}};
    g.add_op("make_big", {}, {"big", "empty"}, 0.0, 17);
    g.add_op("loss", {"a", "a", "big"}, {"loss"}, 12345678.9);
    g.add_op("bwd", {"loss", "a", "w"}, {"dh", "dw"}, 3.0, 8, phase::backward);
    g.add_op("sgd", {"w", "dw"}, {}, 0.5, 0, phase::update);
    g.add_output(*g.find_tensor("loss"));
    g.add_output(*g.find_tensor("dh"));
    validate(g);
    return g;
}

// A small valid graph text whose parts the rejection tests replace.
std::string graph_text(std::string tensors, std::string ops, std::string extra = "") {
    return "{\n\"format\": \"memplan.graph\",\n\"version\": 1,\n\"name\": \"t\",\n\"tensors\": [\n" + tensors +
           "\n],\n\"ops\": [\n" + ops + "\n]" + extra + "\n}\n";
}
const std::string two_tensors = R"({"name": "x", "bytes": 4},
{"name": "y", "bytes": 8})";
const std::string two_ops = R"({"name": "p", "inputs": [], "outputs": ["x"]},
{"name": "q", "inputs": ["x"], "outputs": ["y"]})";

std::string graph_error(const std::string& text) {
    return message_of([&] { (void)parse_graph_json(text, "g.json"); });
}

} // namespace

TEST_CASE("io.graph_json.examples_parse_and_rewrite_identically") {
    const auto files = files_in(examples_dir, ".json");
    REQUIRE(files.size() >= 4);
    for (const auto& f : files) {
        CAPTURE(f);
        const graph g = read_graph_json(f);
        CHECK(g.num_ops() > 0);
        const std::string text = format_graph_json(g);
        // The files use the writer's own layout, so rewriting changes nothing.
        CHECK(text == detail::read_text_file(f));
        const graph back = parse_graph_json(text, "again");
        CHECK(same_graph(g, back));
        CHECK(format_graph_json(back) == text);
    }
}

TEST_CASE("io.graph_json.round_trip_every_field") {
    const graph g = everything_graph();
    const std::string text = format_graph_json(g);
    const graph back = parse_graph_json(text, "every.json");
    CHECK(same_graph(g, back));
    CHECK(back.op(*back.find_op("mm")).variants[0].cost == 1e-300);
    CHECK(back.op(*back.find_op("relu")).cost == 1.0 / 3.0);
    CHECK(back.tensor(*back.find_tensor("w")).persistent);
    CHECK(back.op(*back.find_op("sgd")).phase == phase::update);
    CHECK(format_graph_json(back) == text);
}

TEST_CASE("io.graph_json.defaults_and_unknown_fields") {
    const graph g = parse_graph_json(R"({"format": "memplan.graph", "version": 1, "comment": {"any": [1, 2]},
        "tensors": [{"name": "x", "bytes": 0, "shape": [1, 2]}],
        "ops": [{"name": "p", "inputs": [], "outputs": ["x"], "note": "ignored"}]})",
                                     "d.json");
    CHECK(g.name().empty());
    CHECK(g.outputs().empty());
    const auto& p = g.op(0);
    CHECK(p.cost == 1.0);
    CHECK(p.workspace == 0);
    CHECK(p.phase == phase::forward);
    CHECK(p.variants.empty());
    CHECK(p.inplace.empty());
    CHECK_FALSE(g.tensor(0).persistent);
    // The largest size the format allows.
    const graph big = parse_graph_json(graph_text(R"({"name": "x", "bytes": 18446744073709551615})", ""), "b.json");
    CHECK(big.tensor(0).bytes == ~std::uint64_t{0});
}

TEST_CASE("io.graph_json.rejections_name_file_line_item_and_reason") {
    struct bad {
        std::string text;
        std::vector<std::string> expect; // substrings of the message
    };
    const std::vector<bad> cases = {
        // JSON syntax, with line and column computed from the byte position.
        {"{\n  \"format\": \"memplan.graph\",\n  \"version\": 1,\n  \"tensors\": [}\n", {"g.json:4:15:", "JSON syntax error"}},
        {"", {"g.json:1:1:", "JSON syntax error"}},
        {"[1, 2]", {"g.json", "top level must be a JSON object"}},
        // Header.
        {R"({"format": "memplan.plan", "version": 1, "tensors": [], "ops": []})",
         {"g.json", "format", "must be \"memplan.graph\""}},
        {R"({"version": 1, "tensors": [], "ops": []})", {"g.json", "missing field 'format'"}},
        {R"({"format": "memplan.graph", "version": 2, "tensors": [], "ops": []})",
         {"g.json", "version 2 is not supported"}},
        {R"({"format": "memplan.graph", "version": "1", "tensors": [], "ops": []})", {"g.json", "version"}},
        {R"({"format": "memplan.graph", "version": 1, "ops": []})", {"g.json", "missing field 'tensors'"}},
        {R"({"format": "memplan.graph", "version": 1, "tensors": {}, "ops": []})",
         {"g.json", "field 'tensors' must be an array"}},
        {R"({"format": "memplan.graph", "version": 1, "tensors": []})", {"g.json", "missing field 'ops'"}},
        {R"({"format": "memplan.graph", "version": 1, "name": 7, "tensors": [], "ops": []})",
         {"g.json", "field 'name' must be a string"}},
        // Tensors.
        {graph_text(R"("x")", ""), {"g.json:6: tensors[0]: must be an object"}},
        {graph_text(R"({"bytes": 4})", ""), {"g.json:6: tensors[0]: missing field 'name'"}},
        {graph_text(R"({"name": 5, "bytes": 4})", ""), {"tensors[0]", "field 'name' must be a string"}},
        {graph_text(R"({"name": "", "bytes": 4})", ""), {"g.json:6: tensors[0]: field 'name' is empty"}},
        {graph_text(two_tensors + R"(,
{"name": "x", "bytes": 1})",
                    "[]"),
         {"g.json:8: tensors[2] 'x': the name is already taken"}},
        {graph_text(R"({"name": "x"})", ""), {"tensors[0] 'x': missing field 'bytes'"}},
        {graph_text(R"({"name": "x", "bytes": 4.5})", ""), {"tensors[0] 'x'", "'bytes'", "4.5", "not an integer"}},
        {graph_text(R"({"name": "x", "bytes": -1})", ""), {"tensors[0] 'x'", "'bytes'", "-1", "negative"}},
        {graph_text(R"({"name": "x", "bytes": "12"})", ""), {"tensors[0] 'x'", "'bytes'", "\"12\"", "not a number"}},
        {graph_text(R"({"name": "x", "bytes": 1e30})", ""), {"tensors[0] 'x'", "'bytes'", "does not fit 64 bits"}},
        {graph_text(R"({"name": "x", "bytes": 18446744073709551616})", ""), {"tensors[0] 'x'", "64 bits"}},
        {graph_text(R"({"name": "x", "bytes": 4.0})", ""), {"tensors[0] 'x'", "without a fraction"}},
        {graph_text(R"({"name": "x", "bytes": null})", ""), {"tensors[0] 'x'", "'bytes'"}},
        {graph_text(R"({"name": "x", "bytes": 4, "persistent": "yes"})", ""),
         {"tensors[0] 'x'", "field 'persistent' must be true or false"}},
        // Ops.
        {graph_text(two_tensors, R"(7)"), {"g.json:10: ops[0]: must be an object"}},
        {graph_text(two_tensors, R"({"inputs": [], "outputs": []})"), {"g.json:10: ops[0]: missing field 'name'"}},
        {graph_text(two_tensors, R"({"name": "", "inputs": [], "outputs": []})"), {"ops[0]: field 'name' is empty"}},
        {graph_text(two_tensors, two_ops + R"(,
{"name": "p", "inputs": [], "outputs": []})"),
         {"g.json:12: ops[2] 'p': the name is already taken"}},
        {graph_text(two_tensors, R"({"name": "p", "outputs": []})"), {"ops[0] 'p': missing field 'inputs'"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": []})"), {"ops[0] 'p': missing field 'outputs'"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": "x", "outputs": []})"),
         {"ops[0] 'p'", "field 'inputs' must be an array"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x"]},
{"name": "q", "inputs": ["nope"], "outputs": []})"),
         {"g.json:11: ops[1] 'q': input 'nope' is not a declared tensor"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["nope"]})"),
         {"ops[0] 'p': output 'nope' is not a declared tensor"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [3], "outputs": []})"),
         {"ops[0] 'p': input must be a tensor name"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": [], "cost": "cheap"})"),
         {"ops[0] 'p'", "field 'cost' must be a number"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": [], "workspace": -8})"),
         {"ops[0] 'p'", "'workspace'", "negative"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": [], "workspace": 0.5})"),
         {"ops[0] 'p'", "'workspace'", "not an integer"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": [], "phase": "sideways"})"),
         {"ops[0] 'p': phase 'sideways' is not one of forward, backward, update"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": [], "variants": {}})"),
         {"ops[0] 'p'", "field 'variants' must be an array"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": [], "variants": [{"cost": 1}]})"),
         {"ops[0] 'p': variants[0]: missing field 'name'"}},
        {graph_text(two_tensors,
                    R"({"name": "p", "inputs": [], "outputs": [], "variants": [{"name": "v", "workspace": -1}]})"),
         {"ops[0] 'p': variant 'v'", "'workspace'", "negative"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x"]},
{"name": "q", "inputs": ["x"], "outputs": ["y"], "inplace": [["x"]]})"),
         {"ops[1] 'q': inplace[0] must be a pair"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x"]},
{"name": "q", "inputs": ["x"], "outputs": ["y"], "inplace": [["x", "z"]]})"),
         {"ops[1] 'q': in-place output 'z' is not a declared tensor"}},
        // Graph outputs.
        {graph_text(two_tensors, two_ops, R"(, "outputs": ["nope"])"), {"g.json: outputs[0]: 'nope' is not a declared tensor"}},
        {graph_text(two_tensors, two_ops, R"(, "outputs": ["y", "y"])"), {"outputs[1]: tensor 'y' is listed twice"}},
        {graph_text(two_tensors, two_ops, R"(, "outputs": "y")"), {"field 'outputs' must be an array"}},
        // Structure, through validate(): prefixed with the file name.
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x"]},
{"name": "q", "inputs": [], "outputs": ["x"]})"),
         {"[memplan.graph] g.json: tensor 'x' is produced twice: by op 'p' and by op 'q'"}},
        {graph_text(two_tensors, R"({"name": "q", "inputs": ["x"], "outputs": ["y"]},
{"name": "p", "inputs": [], "outputs": ["x"]})"),
         {"g.json: op 'q' reads tensor 'x' before its producer 'p'"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": ["y"], "outputs": ["x"]},
{"name": "q", "inputs": ["x"], "outputs": ["y"]})"),
         {"g.json: the ops form a cycle"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x"], "cost": -1})"),
         {"g.json: op 'p' has a cost that is not a finite number >= 0"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x"],
  "variants": [{"name": "v"}, {"name": "v"}]})"),
         {"g.json: op 'p' lists variant 'v' twice"}},
        {graph_text(two_tensors, R"({"name": "p", "inputs": [], "outputs": ["x", "y"], "inplace": [["y", "x"]]})"),
         {"g.json: op 'p' in-place pair names 'y' which is not one of its inputs"}},
        {graph_text(R"({"name": "x", "bytes": 18446744073709551615}, {"name": "y", "bytes": 1})", ""),
         {"g.json: the total of tensor sizes overflows at tensor 'y'"}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const std::string msg = graph_error(c.text);
        CAPTURE(msg);
        CHECK(msg.find("g.json") != std::string::npos);
        for (const auto& e : c.expect) CHECK(msg.find(e) != std::string::npos);
    }
}

TEST_CASE("io.graph_json.read_file_errors_name_the_file") {
    const auto missing = fs::temp_directory_path() / "memplan-no-such-dir" / "g.json";
    CHECK(message_of([&] { (void)read_graph_json(missing); }).find("memplan-no-such-dir/g.json") !=
          std::string::npos);
    CHECK(message_of([&] { (void)read_graph_json(fs::temp_directory_path()); }).find("is a directory") !=
          std::string::npos);
}

namespace {

// A plan that uses every field: recomputation, variants, workspace buffers,
// aliases. (Not a valid plan; the reader does not care.)
plan everything_plan(const graph& g) {
    plan p;
    p.graph = g.name();
    p.alignment = 64;
    p.arena_bytes = ~std::uint64_t{0};
    p.steps = {{*g.find_op("mm"), 1}, {*g.find_op("relu")}, {*g.find_op("mm"), 0}, {*g.find_op("sgd")}};
    buffer x;
    x.tensor = *g.find_tensor("h");
    x.offset = 128;
    x.bytes = 1000;
    x.first = 0;
    x.last = 1;
    p.buffers.push_back(x);
    buffer a = x;
    a.tensor = *g.find_tensor("a");
    a.alias = *g.find_tensor("h");
    a.first = 1;
    a.last = 3;
    p.buffers.push_back(a);
    buffer ws;
    ws.step = 2;
    ws.offset = 1 << 20;
    ws.bytes = 4096;
    ws.first = ws.last = 2;
    p.buffers.push_back(ws);
    return p;
}

std::string plan_error(const graph& g, const std::string& text) {
    return message_of([&] { (void)parse_plan_json(text, g, "p.json"); });
}

} // namespace

TEST_CASE("io.plan_json.round_trip_is_exact") {
    SUBCASE("every field") {
        const graph g = everything_graph();
        const plan p = everything_plan(g);
        const std::string text = format_plan_json(g, p);
        CHECK(parse_plan_json(text, g, "p.json") == p);
        CHECK(text.find(R"({"workspace": 2, "offset": 1048576, "bytes": 4096, "first": 2, "last": 2})") !=
              std::string::npos);
        CHECK(text.find(R"("alias": "h")") != std::string::npos);
        CHECK(text.find(R"({"op": "mm", "variant": "slow"})") != std::string::npos);
    }
    SUBCASE("planned example graphs, every allocator") {
        for (const auto& f : files_in(examples_dir, ".json")) {
            const graph g = read_graph_json(f);
            for (auto name : heuristic_allocator_names()) {
                CAPTURE(f);
                CAPTURE(name);
                const auto r = make_plan(g, default_schedule(g), name);
                REQUIRE(has_solution(r.status));
                const std::string text = format_plan_json(g, r.plan);
                const plan back = parse_plan_json(text, g, "p.json");
                CHECK(back == r.plan);
                CHECK(format_plan_json(g, back) == text);
            }
        }
    }
}

TEST_CASE("io.plan_json.rejections_name_the_culprit") {
    const graph g = everything_graph();
    auto with = [&](std::string steps, std::string buffers, std::string head = R"("format": "memplan.plan",
"version": 1, "graph": "g", "alignment": 64, "arena_bytes": 100)") {
        return "{" + head + ",\n\"steps\": [\n" + steps + "\n],\n\"buffers\": [\n" + buffers + "\n]}";
    };
    const std::string ok_steps = R"({"op": "mm", "variant": "fast"})";
    const std::string ok_buffer = R"({"tensor": "h", "offset": 0, "bytes": 8, "first": 0, "last": 0})";
    REQUIRE(parse_plan_json(with(ok_steps, ok_buffer), g, "p.json").steps.size() == 1);

    struct bad {
        std::string text;
        std::vector<std::string> expect;
    };
    const std::vector<bad> cases = {
        {"{\"format\": \"memplan.plan\",", {"p.json:1:", "JSON syntax error"}},
        {with(ok_steps, ok_buffer, R"("format": "memplan.graph", "version": 1, "graph": "g", "alignment": 1, "arena_bytes": 1)"),
         {"p.json: format: must be \"memplan.plan\""}},
        {with(ok_steps, ok_buffer, R"("format": "memplan.plan", "version": 3, "graph": "g", "alignment": 1, "arena_bytes": 1)"),
         {"version 3 is not supported"}},
        {with(ok_steps, ok_buffer, R"("format": "memplan.plan", "version": 1, "graph": "g", "arena_bytes": 1)"),
         {"p.json: missing field 'alignment'"}},
        {with(ok_steps, ok_buffer, R"("format": "memplan.plan", "version": 1, "graph": "g", "alignment": 1, "arena_bytes": -1)"),
         {"'arena_bytes'", "negative"}},
        {with(R"({"op": "nope"})", ok_buffer), {"p.json:4: steps[0]: op 'nope' is not an op of graph"}},
        {with(ok_steps + R"(,
{"variant": "fast"})",
              ok_buffer),
         {"p.json:5: steps[1]: missing field 'op'"}},
        {with(R"({"op": "mm", "variant": "medium"})", ok_buffer),
         {"steps[0]: variant 'medium' is not one of op 'mm''s variants"}},
        {with(R"({"op": "relu", "variant": "fast"})", ok_buffer), {"steps[0]", "(it has none)"}},
        {with(ok_steps, R"({"tensor": "nope", "offset": 0, "bytes": 8, "first": 0, "last": 0})"),
         {"p.json:7: buffers[0]: tensor 'nope' is not a tensor of graph"}},
        {with(ok_steps, R"({"offset": 0, "bytes": 8, "first": 0, "last": 0})"),
         {"buffers[0]: needs exactly one of the fields 'tensor' and 'workspace'"}},
        {with(ok_steps, R"({"tensor": "h", "workspace": 0, "offset": 0, "bytes": 8, "first": 0, "last": 0})"),
         {"buffers[0]: needs exactly one"}},
        {with(ok_steps, R"({"workspace": -2, "offset": 0, "bytes": 8, "first": 0, "last": 0})"),
         {"buffers[0]", "'workspace'", "negative"}},
        {with(ok_steps, R"({"tensor": "h", "bytes": 8, "first": 0, "last": 0})"),
         {"buffers[0] (tensor 'h'): missing field 'offset'"}},
        {with(ok_steps, R"({"workspace": 0, "offset": 0, "bytes": 8, "first": 0.5, "last": 0})"),
         {"buffers[0] (workspace of step 0)", "'first'", "not an integer"}},
        {with(ok_steps, R"({"tensor": "h", "offset": 0, "bytes": 8, "first": 0, "last": 0, "alias": "nope"})"),
         {"buffers[0] (tensor 'h'): alias 'nope' is not a tensor of graph"}},
        {with(ok_steps, R"({"tensor": "h", "offset": 0, "bytes": "8", "first": 0, "last": 0})"),
         {"buffers[0] (tensor 'h')", "'bytes'", "not a number"}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const std::string msg = plan_error(g, c.text);
        CAPTURE(msg);
        for (const auto& e : c.expect) CHECK(msg.find(e) != std::string::npos);
    }
}

TEST_CASE("io.json.atomic_writers_leave_nothing_on_failure") {
    const graph g = everything_graph();
    const plan p = everything_plan(g);
    std::random_device rd;
    const fs::path dir = fs::temp_directory_path() / ("memplan-json-io-" + std::to_string(rd()));
    fs::create_directories(dir);
    const fs::path missing = dir / "no" / "such" / "dir";

    CHECK(message_of([&] { write_graph_json(missing / "g.json", g); }).find("[memplan.io] cannot write") !=
          std::string::npos);
    CHECK(message_of([&] { write_plan_json(missing / "p.json", g, p); }).find("p.json") != std::string::npos);
    CHECK_FALSE(fs::exists(missing / "g.json"));
    CHECK_FALSE(fs::exists(dir / "no"));

    // A plan naming a tensor the graph lacks cannot be formatted: the target
    // keeps its old content.
    write_graph_json(dir / "g.json", g);
    write_plan_json(dir / "p.json", g, p);
    plan broken = p;
    broken.buffers[0].tensor = 999;
    CHECK(message_of([&] { write_plan_json(dir / "p.json", g, broken); }).find("tensor id 999") != std::string::npos);
    CHECK(read_plan_json(dir / "p.json", g) == p);
    CHECK(same_graph(read_graph_json(dir / "g.json"), g));
    std::size_t n_files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n_files;
    CHECK(n_files == 2); // no temporaries left behind
    fs::remove_all(dir);
}

TEST_CASE("graph.from_intervals.small_instance") {
    // Times 0..9: a [0,3), b [3,9), c [2,5), d [4,4) (empty), e [9,10).
    alloc_problem p;
    p.items = {{4, 0, 3}, {4, 3, 9}, {2, 2, 5}, {7, 4, 4}, {1, 9, 10}};
    const std::vector<std::string> ids = {"a", "b", "c", "d", "e"};
    const graph g = graph_from_intervals(p, ids, "small");
    validate(g);
    // Points {0, 2} ∪ {3, 8} ∪ {2, 4} ∪ {9}: steps t0 t2 t3 t4 t8 t9.
    REQUIRE(g.num_ops() == 6);
    CHECK(g.op(0).name == "t0");
    CHECK(g.op(5).name == "t9");
    const auto live = compute_liveness(g, default_schedule(g));
    auto buffer_of = [&](std::string_view name) {
        for (const auto& b : live.buffers)
            if (!b.is_workspace() && g.tensor(b.tensor).name == name) return b;
        FAIL("no buffer for " << name);
        return buffer{};
    };
    CHECK(buffer_of("a").first == 0);
    CHECK(buffer_of("a").last == 1);  // t2: upper - 1 = 2
    CHECK(buffer_of("b").first == 2); // t3
    CHECK(buffer_of("b").last == 4);  // t8
    CHECK(buffer_of("c").first == 1);
    CHECK(buffer_of("c").last == 3);
    CHECK(buffer_of("d").first == 3); // never live in the instance: one step, at t4
    CHECK(buffer_of("d").last == 3);
    CHECK(buffer_of("e").first == 5);
    CHECK(buffer_of("e").last == 5);
    CHECK(g.op(*g.find_op("t4")).outputs.size() == 1);

    CHECK(message_of([&] { (void)graph_from_intervals(p, {"a", "b"}, "x"); }).find("2 ids for 5 items") !=
          std::string::npos);
    CHECK(message_of([&] { (void)graph_from_intervals(p, {"a", "b", "a", "d", "e"}, "x"); })
              .find("repeats the id 'a'") != std::string::npos);
    CHECK(graph_from_intervals(alloc_problem{}, {}, "none").num_ops() == 0);
}

TEST_CASE("graph.from_intervals.shared_minimalloc_instances_keep_their_lower_bound") {
    const auto files = files_in(minimalloc_dir, ".csv");
    REQUIRE(files.size() >= 6);
    for (const auto& f : files) {
        CAPTURE(f);
        const auto csv = read_offset_csv(f);
        const graph g = graph_from_intervals(csv.problem, csv.ids, f.stem().string());
        validate(g);
        REQUIRE(g.num_tensors() == csv.ids.size());
        const auto live = compute_liveness(g, default_schedule(g));
        CHECK(lower_bound(live) == lower_bound(csv.problem));
        // Same time-overlap structure, pair by pair (tensor i has one buffer).
        REQUIRE(live.buffers.size() == csv.problem.items.size());
        std::vector<std::size_t> buffer_of(g.num_tensors());
        for (std::size_t b = 0; b < live.buffers.size(); ++b) buffer_of[live.buffers[b].tensor] = b;
        std::size_t mismatches = 0;
        const auto& items = csv.problem.items;
        for (std::size_t i = 0; i < items.size(); ++i)
            for (std::size_t j = i + 1; j < items.size(); ++j)
                if (items[i].overlaps_in_time(items[j]) !=
                    live.buffers[buffer_of[i]].overlaps_in_time(live.buffers[buffer_of[j]]))
                    ++mismatches;
        CHECK(mismatches == 0);
        // And it survives the JSON round trip.
        CHECK(same_graph(parse_graph_json(format_graph_json(g), "x.json"), g));
    }
}
