// Variants that read fewer tensors than their op lists (MONeT's batch-norm
// backward from the output, ReLU backward from a 1-bit mask): liveness keeps
// only what the chosen variant reads, the validator checks exactly that, and
// the JSON format carries the per-variant inputs.
#include "support/fixtures.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/make_plan.hpp>

#include <doctest/doctest.h>

using namespace memplan;

namespace {

// f produces big y and tiny mask; h reads y (variant "y") or only the mask
// (variant "mask"); between them an op m needs scratch.
graph mask_graph() {
    graph g("mask");
    g.add_tensor("x", 100);
    g.add_tensor("y", 1000);
    g.add_tensor("mask", 10);
    g.add_tensor("z", 100);
    g.add_tensor("out", 100);
    g.add_op("f", {"x"}, {"y", "mask"});
    g.add_op("m", {"x"}, {"z"}, 1.0, 500);
    g.add_op("h", {"y", "mask", "z"}, {"out"});
    const auto h = *g.find_op("h");
    const auto y = *g.find_tensor("y"), mask = *g.find_tensor("mask"), z = *g.find_tensor("z");
    g.op_at(h).variants = {{"y", 1.0, 0, {y, z}}, {"mask", 1.2, 0, {mask, z}}};
    g.add_output(*g.find_tensor("out"));
    return g;
}

} // namespace

TEST_CASE("graph.variant_inputs.liveness_follows_the_chosen_variant") {
    const graph g = mask_graph();
    validate(g);
    const auto h = *g.find_op("h");
    schedule by_y = default_schedule(g);
    schedule by_mask = by_y;
    by_mask[2].variant = 1;
    CHECK(g.reads_of(h, 0).size() == 2);
    CHECK(g.reads_of(h).size() == 3); // no variant named: everything the op lists
    // Reading y keeps it over m's step (x 100 + y 1000 + z 100 + scratch 500;
    // the unread mask died at once); reading the mask lets y die at once and
    // the peak is f's own step (x + y + mask).
    CHECK(schedule_lower_bound(g, by_y) == 100 + 1000 + 100 + 500);
    CHECK(schedule_lower_bound(g, by_mask) == 100 + 1000 + 10);
    for (const auto& s : {by_y, by_mask}) {
        const auto p = make_plan(g, s, best_heuristic{});
        REQUIRE(has_solution(p.status));
        CHECK(check_plan(g, p.plan).ok());
    }
    // The schedule-free bound may not exceed the cheaper variant's need.
    CHECK(schedule_free_lower_bound(g) <= schedule_lower_bound(g, by_mask));
}

TEST_CASE("graph.variant_inputs.validator_checks_what_the_variant_reads") {
    const graph g = mask_graph();
    schedule s = default_schedule(g);
    s[2].variant = 1;
    auto p = make_plan(g, s, best_heuristic{});
    REQUIRE(has_solution(p.status));
    REQUIRE(check_plan(g, p.plan).ok());
    // The plan frees y at once; the same buffers with the y-reading variant
    // must be rejected under rule 2.
    p.plan.steps[2].variant = 0;
    const auto report = check_plan(g, p.plan);
    CHECK_FALSE(report.ok());
    CHECK(report.to_string().find("reads tensor 'y'") != std::string::npos);
}

TEST_CASE("graph.variant_inputs.json_round_trip_and_errors") {
    const graph g = mask_graph();
    const graph back = parse_graph_json(format_graph_json(g), "mask.json");
    const auto h = *back.find_op("h");
    REQUIRE(back.op(h).variants.size() == 2);
    CHECK(back.op(h).variants[1].inputs == g.op(*g.find_op("h")).variants[1].inputs);
    // A variant may only read tensors its op lists.
    graph bad = mask_graph();
    bad.op_at(*bad.find_op("m")).variants = {{"v", 1.0, 0, {*bad.find_tensor("y")}}};
    CHECK(testing::message_of([&] { validate(bad); }).find("variant 'v' reads 'y'") != std::string::npos);
    auto text = format_graph_json(g);
    const std::string mask_reads = "\"inputs\": [\"mask\", \"z\"]";
    const auto at = text.find(mask_reads);
    REQUIRE(at != std::string::npos);
    text.replace(at, mask_reads.size(), "\"inputs\": [\"x\", \"z\"]");
    CHECK(testing::message_of([&] { (void)parse_graph_json(text, "bad.json"); }).find("is not one of the op's inputs") !=
          std::string::npos);
}

TEST_CASE("graph.variant_inputs.zoo_relu_and_batch_norm_offer_both") {
    // The zoo's conv-bn-relu blocks give batch-norm's backward a from-input
    // and a from-output variant and ReLU's a from-output and a from-mask one.
    nn::network net("block");
    auto x = net.input("x", {2, 3, 8, 8});
    auto y = net.add(nn::conv2d::make(3, 4, 3, 1, 1), {x}, "c");
    y = net.add(nn::batch_norm{4}, {y}, "bn");
    y = net.add(nn::relu{}, {y}, "r");
    y = net.add(nn::global_avg_pool{}, {y}, "gap");
    y = net.add(nn::linear{4, 5}, {y}, "fc");
    auto label = net.input("label", {2}, nn::element::i64);
    net.add(nn::softmax_cross_entropy{}, {y, label}, "loss");
    const graph g = training_graph(net);
    const auto& bn = g.op(*g.find_op("bn.bwd"));
    REQUIRE(bn.variants.size() == 2);
    CHECK(bn.variants[0].name == "from_input");
    CHECK(bn.variants[1].name == "from_output");
    const auto& r = g.op(*g.find_op("r.bwd"));
    REQUIRE(r.variants.size() == 2);
    CHECK(r.variants[1].name == "from_mask");
    // Whatever each step picks, the plan is valid.
    schedule s = default_schedule(g);
    for (auto& st : s)
        if (g.op(st.op).variants.size() == 2) st.variant = 1;
    const auto p = make_plan(g, s, best_heuristic{});
    REQUIRE(has_solution(p.status));
    CHECK(check_plan(g, p.plan).ok());
    CHECK(schedule_lower_bound(g, s) <= schedule_lower_bound(g, default_schedule(g)));
}
