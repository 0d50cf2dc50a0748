// The boundary between the forward and the backward (remat/boundary.hpp):
// which step it is, what a plan holds across it (resident and kept), and the
// boundary memory graph, on which a budget of X + room bounds the bytes at the
// boundary by X and binds nothing else.
#include "../support/fixtures.hpp"
#include "../support/remat_graphs.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/remat/boundary.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/remat/store_all.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace memplan;

namespace {

/// A step whose peak is in the backward and whose forward has a large
/// transient: x (an input the backward reads) -> f0 -> big (read by f1 only)
/// -> f1 -> a -> loss; the backward makes a gradient twenty times a's size.
/// Store-all keeps x and a across the boundary (1100 bytes); w and the loss
/// are resident (54 bytes).
graph hourglass() {
    graph g("hourglass");
    const std::pair<const char*, std::uint64_t> sizes[] = {{"x", 100},   {"big", 10000}, {"a", 1000}, {"loss", 4},
                                                           {"dl", 4},    {"da", 20000},  {"dw", 50}};
    for (const auto& [name, bytes] : sizes) g.add_tensor(name, bytes);
    g.add_tensor("w", 50, true);
    struct row {
        const char* name;
        std::vector<std::string> inputs, outputs;
        double cost;
        std::uint64_t workspace;
        phase ph;
    };
    const row ops[] = {{"f0", {"x"}, {"big"}, 1.0, 300, phase::forward},
                       {"f1", {"big", "w"}, {"a"}, 2.0, 0, phase::forward},
                       {"loss", {"a"}, {"loss"}, 0.5, 0, phase::forward},
                       {"loss.bwd", {"loss"}, {"dl"}, 0.5, 0, phase::backward},
                       {"b1", {"a", "dl"}, {"da"}, 2.0, 5000, phase::backward},
                       {"b0", {"x", "da"}, {"dw"}, 2.0, 0, phase::backward},
                       {"u", {"w", "dw"}, {}, 0.5, 0, phase::update}};
    for (const auto& o : ops) g.add_op(o.name, o.inputs, o.outputs, o.cost, o.workspace, o.ph);
    g.add_output(*g.find_tensor("loss"));
    return g;
}

/// Plans `h` (the boundary memory graph of `g`) with every planner that
/// needs no solver within `x` + room, and checks each plan that fits: valid,
/// the room op at the boundary, at most `x` bytes there. Returns how many fit.
std::size_t check_within(const graph& g, const boundary_graph<graph>& h, std::uint64_t x, double seconds) {
    const remat_context<graph> ctx(h.graph);
    std::size_t fitting = 0;
    for (const auto& e : remat_registry<graph>()) {
        if (e.needs_solver) continue;
        CAPTURE(e.name);
        remat_options o;
        o.budget = x + h.room;
        o.alignment = 1;
        o.time_limit = seconds;
        const auto r = e.run(ctx, o, {});
        if (!has_solution(r.status)) continue;
        ++fitting;
        CHECK(check_plan(h.graph, r.plan).ok());
        const auto at = boundary_bytes(h.graph, r.plan, g);
        REQUIRE(at.step < r.plan.steps.size());
        CHECK(h.graph.op(r.plan.steps[at.step].op).name == boundary_room_name);
        CHECK(at.total() <= x);
    }
    return fitting;
}

} // namespace

TEST_CASE("remat.boundary.step_is_the_first_op_outside_the_forward") {
    const auto g = hourglass();
    CHECK(boundary_step(g, default_schedule(g)) == 3);
    const auto fwd = testing::diamond_graph(); // forward ops only
    CHECK(boundary_step(fwd, default_schedule(fwd)) == fwd.num_ops());
}

TEST_CASE("remat.boundary.bytes_of_store_all_split_resident_and_kept") {
    const auto g = hourglass();
    const remat_context<graph> ctx(g);
    const auto r = store_all{}.checked(ctx, {});
    REQUIRE(has_solution(r.status));
    const auto at = boundary_bytes(g, r.plan);
    CHECK(at.step == 3);
    CHECK(at.resident == 54); // w and the loss
    CHECK(at.kept == 1100);   // x and a: big died in the forward
    CHECK(at.total() == 1154);
}

TEST_CASE("remat.boundary.memory_graph_zeroes_the_backward_and_adds_the_room") {
    const auto g = hourglass();
    const auto h = boundary_memory_graph(g);
    // x, big, a and the loss, and f0's workspace, rounded up to 4096.
    CHECK(h.room == 12288);
    CHECK(h.graph.name() == g.name());
    REQUIRE(h.graph.num_tensors() == g.num_tensors() + 1);
    REQUIRE(h.graph.num_ops() == g.num_ops() + 1);
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto id = static_cast<graph::id_type>(t);
        CAPTURE(g.tensor(id).name);
        CHECK(h.graph.tensor(id).name == g.tensor(id).name);
        const bool made_later = g.tensor(id).name == "dl" || g.tensor(id).name == "da" || g.tensor(id).name == "dw";
        CHECK(h.graph.tensor(id).bytes == (made_later ? 0 : g.tensor(id).bytes));
    }
    const auto room = *h.graph.find_op(boundary_room_name);
    CHECK(room == 3);
    CHECK(h.graph.op(room).phase == phase::backward);
    CHECK(h.graph.op(room).cost == 0);
    CHECK(h.graph.op(room).inputs.empty());
    CHECK(h.graph.tensor(h.graph.op(room).outputs.at(0)).bytes == h.room);
    const auto& seed = h.graph.op(4);
    CHECK(seed.name == "loss.bwd");
    CHECK(seed.inputs.back() == h.graph.op(room).outputs.at(0));
    CHECK(h.graph.op(*h.graph.find_op("b1")).workspace == 0);
    CHECK(h.graph.op(*h.graph.find_op("f0")).workspace == 300);
    CHECK(h.graph.outputs() == g.outputs());
}

TEST_CASE("remat.boundary.memory_graph_variants_read_the_room") {
    auto g = hourglass();
    auto& seed = g.op_at(*g.find_op("loss.bwd"));
    seed.variants.push_back({"all", 0.5, 64, {}});
    seed.variants.push_back({"own", 0.4, 128, {*g.find_tensor("loss")}});
    g.op_at(*g.find_op("f1")).variants = {{"fast", 1.0, 9000, {}}, {"lean", 2.0, 0, {}}};
    const auto h = boundary_memory_graph(g);
    CHECK(h.room == 20480); // 11104 + 9000, the widest forward workspace, rounded up
    const auto room_tensor = *h.graph.find_tensor(boundary_room_name);
    const auto& s = h.graph.op(*h.graph.find_op("loss.bwd"));
    CHECK(s.variants[0].inputs.empty()); // reads all of the op's inputs, the room among them
    CHECK(s.variants[1].inputs == std::vector<graph::id_type>{*g.find_tensor("loss"), room_tensor});
    CHECK(s.variants[0].workspace == 0);
    CHECK(s.variants[1].workspace == 0);
}

TEST_CASE("remat.boundary.memory_graph_without_a_backward_adds_nothing") {
    const auto g = testing::diamond_graph();
    const auto h = boundary_memory_graph(g);
    CHECK(h.room == 0);
    CHECK(h.graph.num_ops() == g.num_ops());
    CHECK(h.graph.num_tensors() == g.num_tensors());
}

TEST_CASE("remat.boundary.memory_graph_refuses_a_graph_with_the_room_name") {
    auto g = hourglass();
    g.add_tensor(std::string(boundary_room_name), 8);
    const auto m = testing::message_of([&] { boundary_memory_graph(g); });
    CHECK(m.find("graph 'hourglass'") != std::string::npos);
    CHECK(m.find("memplan.boundary_room") != std::string::npos);
}

TEST_CASE("remat.boundary.budget_bounds_the_boundary_alone") {
    const auto g = hourglass();
    const auto h = boundary_memory_graph(g);
    // On the graph itself no plan keeps everything under 2000 bytes: the
    // backward's gradient alone is 20000.
    CHECK(remat_context<graph>(g).min_memory().first > 20000);
    // Keeping everything meets resident + kept + room exactly: every planner fits.
    std::size_t planners = 0;
    for (const auto& e : remat_registry<graph>()) planners += e.needs_solver ? 0 : 1;
    CHECK(check_within(g, h, 1154, 1) == planners);
    // Keeping only x (a graph input, never dropped): a is remade in the backward from x.
    CHECK(check_within(g, h, 154, 1) > 0);
    {
        const remat_context<graph> ctx(h.graph);
        remat_options o;
        o.budget = 154 + h.room;
        o.alignment = 1;
        o.time_limit = 1;
        const auto r = plan_remat("auto", ctx, o);
        REQUIRE(has_solution(r.status));
        const auto at = boundary_bytes(h.graph, r.plan, g);
        CHECK(at.resident == 54);
        CHECK(at.kept == 100);
    }
    // Below what the boundary must hold (x and the resident tensors), no planner fits.
    CHECK(check_within(g, h, 153, 1) == 0);
}

TEST_CASE("remat.boundary.random_graphs_hold_at_most_the_budget_there") {
    std::mt19937_64 rng(2027);
    for (int i = 0; i < 3; ++i) {
        const graph g = testing::random_remat_graph(rng);
        const auto h = boundary_memory_graph(g);
        const remat_context<graph> ctx(h.graph);
        const auto base = store_all{}.checked(ctx, {});
        REQUIRE(has_solution(base.status));
        const auto at = boundary_bytes(h.graph, base.plan, g);
        CAPTURE(i);
        CHECK(at.total() + h.room <= base.arena());
        for (double f : {0.8, 0.5}) {
            CAPTURE(f);
            const auto x = at.resident + static_cast<std::uint64_t>(f * static_cast<double>(at.kept));
            check_within(g, h, x, 0.3);
        }
    }
}
