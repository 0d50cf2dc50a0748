// The profiling path without a GPU: a recorded table (recorded_profile_cnn.json,
// made-up numbers, labelled as such) applied to the cnn example's training
// graph; the plans made from it are valid and use the recorded workspaces;
// after apply_profile no variant keeps a cost that was not measured.
#include "models.hpp"
#include "plans.hpp"

#include <doctest/doctest.h>

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/engine/cuda/algorithms.hpp>
#include <memplan/engine/cuda/profile.hpp>
#include <memplan/io/cost_model.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/portfolio.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace memplan;

namespace {

const std::string table_path = std::string(MEMPLAN_CUDA_TEST_DIR) + "/recorded_profile_cnn.json";

graph cnn_graph() {
    training_options to;
    to.opt = optimizer::sgd_momentum;
    training_program prog;
    // The network the table was recorded for: cnn(8, 1, 16, 16), the two-conv cnn (batch 8, 16x16).
    return training_graph(examples::cnn(8, 1, 16, 16).net, to, prog);
}

} // namespace

TEST_CASE("cuda.profile.recorded_table_is_labelled") {
    const auto t = engine::cuda::read_profile(table_path);
    CHECK(t.source.rfind("recorded:", 0) == 0);
    CHECK(t.source.find("NOT measured") != std::string::npos);
    CHECK(!t.ops.empty());
}

TEST_CASE("cuda.profile.apply_sets_costs_and_workspaces") {
    auto g = cnn_graph();
    const auto t = engine::cuda::read_profile(table_path);
    const auto r = engine::cuda::apply_profile(g, t);
    CHECK(r.ops == g.num_ops());
    std::size_t variants = 0, removed = 0;
    for (const auto& o : t.ops) {
        const auto id = g.find_op(o.op);
        REQUIRE(id.has_value());
        const auto& op = g.op(*id);
        CHECK(op.cost == doctest::Approx(o.ms * 1000.0)); // microseconds
        for (const auto& v : o.variants) {
            const auto it = std::find_if(op.variants.begin(), op.variants.end(), [&](const auto& x) { return x.name == v.name; });
            if (!v.supported || !v.timed) {
                CHECK(it == op.variants.end());
                ++removed;
                continue;
            }
            REQUIRE(it != op.variants.end());
            CHECK(it->workspace == v.workspace_bytes);
            CHECK(it->cost == doctest::Approx(v.ms * 1000.0));
            ++variants;
            // The recorded algorithm is the one the backend runs for the variant.
            if (v.algorithm.empty()) continue; // not a convolution (ReLU, batch-norm backward)
            const auto pass = nn::parse_op_pass(std::string_view(o.op).substr(o.op.rfind('.') + 1));
            const auto kind = nn::parse_impl_kind(v.name);
            REQUIRE(pass);
            REQUIRE(kind);
            CHECK(v.algorithm == engine::cuda::cudnn_algorithm(*kind, engine::cuda::pass_of(*pass)));
        }
    }
    CHECK(r.variants == variants);
    CHECK(r.removed_variants == removed);
    CHECK(removed > 0); // the table marks Winograd filter gradients unsupported
}

TEST_CASE("cuda.profile.plans_from_measured_graph_are_valid") {
    auto g = cnn_graph();
    engine::cuda::apply_profile(g, engine::cuda::read_profile(table_path));
    // Store-all with the default variants, and with every convolution on
    // variant 1 (gemm_im2col): its workspace buffers are the recorded bytes.
    const auto base = make_plan(g, default_schedule(g), best_heuristic{});
    REQUIRE(has_solution(base.status));
    CHECK(check_plan(g, base.plan).ok());
    const auto gemm = make_plan(g, test::on_variant(g, 1), best_heuristic{});
    REQUIRE(has_solution(gemm.status));
    CHECK(check_plan(g, gemm.plan).ok());
    std::size_t workspaces = 0;
    for (const auto& b : gemm.plan.buffers)
        if (b.is_workspace()) {
            const auto& st = gemm.plan.steps[b.step];
            CHECK(b.bytes == g.workspace_of(st.op, st.variant));
            ++workspaces;
        }
    std::size_t conv_passes = 0;
    for (const auto& op : g.ops())
        for (const auto& v : op.variants) conv_passes += v.name == "gemm_im2col";
    CHECK(conv_passes == 5); // conv1 has no input gradient
    CHECK(workspaces == conv_passes);
    CHECK(gemm.plan.arena_bytes >= base.plan.arena_bytes);
    // The planners work on measured costs too.
    const auto b = test::smallest_plan(g);
    REQUIRE(has_solution(b.status));
    CHECK(check_plan(g, b.plan).ok());
    CHECK(b.plan.arena_bytes <= base.plan.arena_bytes);
}

TEST_CASE("cuda.profile.missing_op_or_variant_is_an_error") {
    auto t = engine::cuda::read_profile(table_path);
    auto g = cnn_graph();
    auto short_table = t;
    const std::string dropped = short_table.ops.back().op;
    short_table.ops.pop_back();
    CHECK_THROWS_WITH_AS(engine::cuda::apply_profile(g, short_table), doctest::Contains(dropped.c_str()), memplan::error);
    auto bad_variant = t;
    for (auto& o : bad_variant.ops)
        if (!o.variants.empty()) {
            auto extra = o.variants.front();
            extra.name = "fft";
            o.variants.push_back(extra);
            break;
        }
    CHECK_THROWS_WITH_AS(engine::cuda::apply_profile(g, bad_variant), doctest::Contains("no variant 'fft'"), memplan::error);
}

namespace {

engine::cuda::op_measurement& op_in(engine::cuda::profile_table& t, const std::string& name) {
    for (auto& o : t.ops)
        if (o.op == name) return o;
    throw std::runtime_error("the recorded table has no op " + name);
}

std::string apply_error(graph g, const engine::cuda::profile_table& t) {
    try {
        engine::cuda::apply_profile(g, t);
    } catch (const memplan::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("cuda.profile.variant_missing_from_table_is_an_error") {
    // A variant of the graph the table does not list would keep its model
    // (roofline) cost inside a graph labelled "measured": an error naming
    // the op and the variant, for a non-convolution variant and a convolution one.
    const auto t = engine::cuda::read_profile(table_path);
    for (const auto& [op, variant] : {std::pair<std::string, std::string>{"relu2.bwd", "from_mask"},
                                      {"bn1.bwd", "from_output"},
                                      {"conv2.bwd_data", "winograd"}}) {
        auto short_table = t;
        auto& vs = op_in(short_table, op).variants;
        const auto before = vs.size();
        std::erase_if(vs, [&](const auto& v) { return v.name == variant; });
        REQUIRE(vs.size() + 1 == before);
        const auto what = apply_error(cnn_graph(), short_table);
        INFO(what);
        CHECK(what.find("op '" + op + "'") != std::string::npos);
        CHECK(what.find("variant '" + variant + "'") != std::string::npos);
    }
    // An op listed without any of its variants: the same error, for its first.
    auto bare = t;
    op_in(bare, "relu1.bwd").variants.clear();
    const auto what = apply_error(cnn_graph(), bare);
    CHECK(what.find("variant 'from_output' of op 'relu1.bwd'") != std::string::npos);
}

TEST_CASE("cuda.profile.every_variant_cost_is_measured") {
    // The other direction of apply_sets_costs_and_workspaces: every variant
    // left in the graph carries the table's time and workspace, batch-norm
    // and ReLU backward variants included.
    auto g = cnn_graph();
    const auto t = engine::cuda::read_profile(table_path);
    engine::cuda::apply_profile(g, t);
    std::size_t non_conv = 0;
    for (const auto& op : g.ops())
        for (const auto& v : op.variants) {
            const auto& m = *std::find_if(t.ops.begin(), t.ops.end(), [&](const auto& o) { return o.op == op.name; });
            const auto it = std::find_if(m.variants.begin(), m.variants.end(), [&](const auto& x) { return x.name == v.name; });
            REQUIRE(it != m.variants.end());
            CHECK(it->supported);
            CHECK(it->timed);
            CHECK(v.cost == doctest::Approx(it->ms * 1000.0));
            CHECK(v.workspace == it->workspace_bytes);
            non_conv += it->algorithm.empty();
        }
    CHECK(non_conv == 8); // two variants each of relu1/2.bwd and bn1/2.bwd
}

TEST_CASE("cuda.profile.untimed_variant_keeps_its_workspace_and_is_removed") {
    // A variant whose workspace the device could not hold while measuring is
    // supported, with its bytes, not timed: the table says so (and why),
    // the JSON keeps it, and apply_profile removes it from the graph
    // (counted apart from unsupported ones) rather than keep a model cost.
    auto t = engine::cuda::read_profile(table_path);
    auto& w = op_in(t, "conv2.fwd").variants.at(2);
    REQUIRE(w.name == "winograd");
    w.timed = false;
    w.ms = 0;
    w.workspace_bytes = 300000000000ull;
    w.reason = "needs 300000000000 bytes of workspace; 140000000000 bytes of device memory were free while measuring";
    const auto path = (std::filesystem::temp_directory_path() / "memplan_untimed_profile.json").string();
    {
        std::ofstream f(path);
        f << engine::cuda::to_json(t).dump(1);
    }
    auto back = engine::cuda::read_profile(path);
    std::filesystem::remove(path);
    const auto& wb = op_in(back, "conv2.fwd").variants.at(2);
    CHECK(wb.supported);
    CHECK_FALSE(wb.timed);
    CHECK(wb.workspace_bytes == 300000000000ull);
    CHECK(wb.reason == w.reason);
    CHECK(engine::cuda::to_json(back)["ops"] == engine::cuda::to_json(t)["ops"]);

    auto g = cnn_graph();
    const auto before = engine::cuda::apply_profile(g, engine::cuda::read_profile(table_path));
    auto h = cnn_graph();
    const auto r = engine::cuda::apply_profile(h, back);
    CHECK(r.untimed_variants == 1);
    CHECK(r.removed_variants == before.removed_variants + 1);
    CHECK(r.variants + 1 == before.variants);
    const auto& op = h.op(*h.find_op("conv2.fwd"));
    CHECK(std::none_of(op.variants.begin(), op.variants.end(), [](const auto& v) { return v.name == "winograd"; }));
}

TEST_CASE("cuda.profile.op_without_a_runnable_variant_is_an_error") {
    // Every variant unsupported or untimed: nothing measured is left to run.
    auto t = engine::cuda::read_profile(table_path);
    auto& vs = op_in(t, "conv1.fwd").variants;
    for (auto& v : vs) v.supported = false;
    vs.front().supported = true;
    vs.front().timed = false;
    const auto what = apply_error(cnn_graph(), t);
    CHECK(what.find("no variant of op 'conv1.fwd'") != std::string::npos);
}

TEST_CASE("cuda.profile.json_round_trip_and_bad_files") {
    const auto t = engine::cuda::read_profile(table_path);
    const auto j = engine::cuda::to_json(t);
    CHECK(j["format"] == "memplan.cuda_profile");
    CHECK(j["ops"].size() == t.ops.size());
    CHECK_THROWS_WITH_AS(engine::cuda::read_profile(std::string(MEMPLAN_CUDA_TEST_DIR) + "/no_such.json"),
                         doctest::Contains("no_such.json"), memplan::error);
}

TEST_CASE("cuda.profile.wrongly_typed_fields_name_the_field") {
    // Written to the system's temporary folder (never to the shared data).
    const auto path = (std::filesystem::temp_directory_path() / "memplan_bad_profile.json").string();
    auto read_with = [&](const std::string& op) {
        {
            std::ofstream f(path);
            f << R"({"format": "memplan.cuda_profile", "ops": [)" << op << "]}";
        }
        return engine::cuda::read_profile(path);
    };
    CHECK_THROWS_WITH_AS(read_with(R"({"op": "conv1.fwd", "ms": 1, "variants": 5})"),
                         doctest::Contains("ops[0].variants: must be an array"), memplan::error);
    CHECK_THROWS_WITH_AS(read_with(R"({"op": "conv1.fwd", "ms": 1, "variants": [{"name": "x", "algorithm": 3}]})"),
                         doctest::Contains("algorithm: must be a string"), memplan::error);
    CHECK_THROWS_WITH_AS(read_with(R"({"op": 7})"), doctest::Contains("ops[0].op: must be a string"), memplan::error);
    CHECK_THROWS_WITH_AS(read_with(R"({"op": "conv1.fwd", "ms": 1, "variants": [{"name": "x", "timed": "no"}]})"),
                         doctest::Contains("variants[0].timed: must be a boolean"), memplan::error);
    CHECK_THROWS_WITH_AS(read_with(R"({"op": "conv1.fwd", "ms": 1, "variants": [{"name": "x", "reason": 1}]})"),
                         doctest::Contains("variants[0].reason: must be a string"), memplan::error);
    // Not timed: workspace bytes required, no time.
    CHECK_THROWS_WITH_AS(read_with(R"({"op": "conv1.fwd", "ms": 1, "variants": [{"name": "x", "timed": false}]})"),
                         doctest::Contains("variants[0].workspace_bytes"), memplan::error);
    const auto untimed =
        read_with(R"({"op": "conv1.fwd", "ms": 1, "variants": [{"name": "x", "timed": false, "workspace_bytes": 7}]})");
    CHECK_FALSE(untimed.ops.at(0).variants.at(0).timed);
    CHECK(untimed.ops.at(0).variants.at(0).workspace_bytes == 7);
    std::filesystem::remove(path);
}

TEST_CASE("cuda.profile.recorded_graph_is_a_measured_cost_model") {
    // The CUDA profile written as a graph in microseconds (what
    // memplan_profile_cuda --out writes), then read back as `measured:FILE`:
    // the derivation takes its costs and workspaces and drops the variants
    // cuDNN cannot run; plans made from it pass the validator.
    auto measured = cnn_graph();
    engine::cuda::apply_profile(measured, engine::cuda::read_profile(table_path));
    CHECK(measured.cost_unit() == "us");
    CHECK(measured.cost_model().rfind("measured:recorded:", 0) == 0);
    const auto path = (std::filesystem::temp_directory_path() / "memplan_recorded_cuda_graph.json").string();
    write_graph_json(path, measured);
    training_options to;
    to.opt = optimizer::sgd_momentum;
    to.cost = cost::make_cost_model("measured:" + path);
    training_program prog;
    const auto g = training_graph(examples::cnn(8, 1, 16, 16).net, to, prog);
    std::filesystem::remove(path);
    REQUIRE(g.num_ops() == measured.num_ops());
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        CHECK(g.op(i).cost == doctest::Approx(measured.op(i).cost));
        REQUIRE(g.op(i).variants.size() == measured.op(i).variants.size()); // the same variants dropped
        for (std::size_t k = 0; k < g.op(i).variants.size(); ++k) {
            CHECK(g.op(i).variants[k].name == measured.op(i).variants[k].name);
            CHECK(g.op(i).variants[k].workspace == measured.op(i).variants[k].workspace);
        }
    }
    remat_options ro;
    ro.time_limit = 2;
    ro.budget = store_all{}.plan(g, ro).arena() / 10 * 9; // bn1.bwd alone needs ~75 %
    const auto r = auto_remat{}.plan(g, ro);
    INFO(r.message);
    REQUIRE(has_solution(r.status));
    CHECK(check_plan(g, r.plan).ok());
    CHECK(r.arena() <= ro.budget);
}
