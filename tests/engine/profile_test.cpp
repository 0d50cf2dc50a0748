// Profiling on the CPU backend (engine/profile.hpp) and planning with the
// measured costs: the profile's structure, its round trip through a file and
// `measured:FILE`, and plans made from it that the validator accepts and the
// engine trains as the naive run does. No timing is asserted: only that
// every (op, variant) was measured and the numbers travel intact.
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/cpu/device.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/engine/profile.hpp>
#include <memplan/io/cost_model.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/select.hpp>

#include <models.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

using namespace memplan;

namespace {

struct profiled {
    examples::model m;
    training_program prog;
    graph g;
    engine::profile_result r;
};

profiled profile_small_cnn() {
    profiled p{examples::cnn(4), {}, {}, {}}; // the engine tests' cnn: auto reaches half of store-all
    p.g = training_graph(p.m.net, {}, p.prog);
    engine::profile_options po;
    po.min_steps = 3;
    po.min_seconds = 0;
    po.max_steps = 5;
    for (auto& in : p.m.batch(0)) po.inputs.push_back(in);
    p.r = engine::profile_graph<engine::cpu::backend>(p.m.net, p.g, p.prog, po);
    return p;
}

} // namespace

TEST_CASE("engine.profile.measures_every_op_and_variant") {
    const auto p = profile_small_cnn();
    const auto& m = p.r.measured;
    CHECK(m.cost_unit() == "us");
    CHECK(m.cost_model() == "measured:cpu");
    REQUIRE(m.num_ops() == p.g.num_ops());
    CHECK(p.r.stats.passes == 3); // convolutions have three variants
    REQUIRE(p.r.stats.steps.size() == 3);
    for (int s : p.r.stats.steps) CHECK(s >= 3);
    double sum = 0;
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(m.num_ops()); ++i) {
        const auto& op = m.op(i);
        CHECK(op.name == p.g.op(i).name);
        CHECK(std::isfinite(op.cost));
        CHECK(op.cost > 0); // every kernel takes some time on the host clock
        REQUIRE(op.variants.size() == p.g.op(i).variants.size());
        for (std::size_t k = 0; k < op.variants.size(); ++k) {
            CHECK(op.variants[k].cost > 0);
            CHECK(op.variants[k].workspace == p.g.op(i).variants[k].workspace); // the CPU kernels' own
        }
        if (!op.variants.empty()) CHECK(op.cost == op.variants.front().cost);
        sum += op.cost;
    }
    CHECK(p.r.stats.step_us > 0); // pass 0's medians; the costs pool every pass
    CHECK(sum > 0);
    CHECK(p.r.stats.spread >= 0);
}

TEST_CASE("engine.profile.round_trip_plans_and_trains") {
    const auto p = profile_small_cnn();
    const auto path = std::filesystem::temp_directory_path() / "memplan_profile_round_trip.json";
    write_graph_json(path, p.r.measured);
    // Derive the graph again with the file as the cost model: the costs are the profile's.
    training_options to;
    to.cost = cost::make_cost_model("measured:" + path.string());
    training_program prog;
    const auto g = training_graph(p.m.net, to, prog);
    std::filesystem::remove(path);
    CHECK(g.cost_model() == "measured:cpu");
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        CHECK(g.op(i).cost == doctest::Approx(p.r.measured.op(i).cost));
        for (std::size_t k = 0; k < g.op(i).variants.size(); ++k)
            CHECK(g.op(i).variants[k].cost == doctest::Approx(p.r.measured.op(i).variants[k].cost));
    }
    // Plan with it at half of store-all; the plan is valid and trains as the naive run.
    remat_options ro;
    ro.time_limit = 2;
    ro.budget = plan_remat("store_all", g, ro).arena() / 2;
    const auto r = plan_remat("auto", g, ro);
    INFO(r.message);
    REQUIRE(has_solution(r.status));
    CHECK(check_plan(g, r.plan).ok());
    CHECK(r.overhead() >= 0);
    CHECK(r.cost == doctest::Approx(schedule_cost(g, r.plan.steps)));
    // Store-all with every op's fastest measured variant costs what the planner calls fastest.
    const auto fastest = make_plan(g, fastest_schedule(g), best_heuristic{}).plan;
    CHECK(check_plan(g, fastest).ok());
    CHECK(schedule_cost(g, fastest.steps) == doctest::Approx(r.fastest_cost));
    engine::executor_options eo;
    eo.poison = true;
    using cpu_executor = engine::executor<engine::cpu::backend>;
    auto naive = cpu_executor::naive(p.m.net, g, prog, {}, eo);
    cpu_executor planned(p.m.net, g, prog, r.plan, {}, eo);
    for (int s = 0; s < 2; ++s) {
        examples::feed(naive, p.m, static_cast<std::uint64_t>(s));
        examples::feed(planned, p.m, static_cast<std::uint64_t>(s));
        const float a = naive.step(), b = planned.step();
        CHECK(std::isfinite(b));
        CHECK(b == doctest::Approx(a).epsilon(5e-3));
    }
}

TEST_CASE("engine.profile.cpu_device_is_measured") {
    const auto& d = engine::cpu::cpu_device();
    CHECK(d.name == "cpu");
    CHECK(d.matmul_flops_per_s > 0);
    CHECK(d.other_flops_per_s > 0);
    CHECK(d.bytes_per_s > 0);
}
