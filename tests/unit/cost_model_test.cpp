// Cost models (cost/model.hpp): what each prices, the declared unit, the
// refusal to mix units, and that swapping the model changes the plan where
// the prices differ.
#include <doctest/doctest.h>

#include <memplan/check/validator.hpp>
#include <memplan/cost/model.hpp>
#include <memplan/io/cost_model.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/remat/portfolio.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace memplan;

namespace {

std::filesystem::path cost_temp(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("memplan_cost_test_" + name);
}

/// conv -> batch-norm -> relu, four times, then pooling and a loss: where a
/// budget forces recomputation, a planner can recompute the convolutions or
/// the point-wise ops after them.
nn::network conv_chain() {
    nn::network net("conv_chain");
    auto x = net.input("x", nn::shape{8, 8, 16, 16});
    auto labels = net.input("labels", nn::shape{8}, nn::element::i64);
    for (int i = 0; i < 4; ++i) {
        const std::string n = std::to_string(i);
        x = net.add(nn::conv2d::make(8, 8, 3, 1, 1), {x}, "conv" + n);
        x = net.add(nn::batch_norm{8}, {x}, "bn" + n);
        x = net.add(nn::relu{}, {x}, "relu" + n);
    }
    x = net.add(nn::global_avg_pool{}, {x}, "pool");
    x = net.add(nn::linear{8, 10}, {x}, "fc");
    net.add(nn::softmax_cross_entropy{}, {x, labels}, "loss");
    return net;
}

std::size_t recomputed_pointwise(const graph& g, const plan& p) {
    std::vector<int> runs(g.num_ops(), 0);
    std::size_t n = 0;
    for (const auto& st : p.steps)
        if (runs[st.op]++ > 0) {
            const auto& name = g.op(st.op).name;
            n += name.rfind("bn", 0) == 0 || name.rfind("relu", 0) == 0;
        }
    return n;
}
std::size_t recomputed_convs(const graph& g, const plan& p) {
    std::vector<int> runs(g.num_ops(), 0);
    std::size_t n = 0;
    for (const auto& st : p.steps)
        if (runs[st.op]++ > 0) n += g.op(st.op).name.rfind("conv", 0) == 0;
    return n;
}

} // namespace

TEST_CASE("cost.roofline_and_fused_price_pointwise_ops_differently") {
    cost::op_work conv{"c.fwd", "", cost::compute_kind::matmul, 1e9, 4e6, 4e6, 4e6, 1.0};
    cost::op_work relu{"r.fwd", "", cost::compute_kind::pointwise, 1e6, 4e6, 4e6, 4e6, 1.0};
    const cost::roofline r{cost::v100};
    const cost::fused f{cost::v100};
    CHECK(f.op_us(conv) == doctest::Approx(r.op_us(conv))); // a matrix product is not folded
    CHECK(r.op_us(relu) == doctest::Approx(8e6 / 0.9e12 * 1e6));
    // Fused: the producer hands the input over; only the arithmetic remains.
    CHECK(f.op_us(relu) == doctest::Approx(1e6 / 15.7e12 * 1e6));
    // An input no producer hands it (a graph input, a residual operand) is read.
    relu.producer_bytes = 0;
    CHECK(f.op_us(relu) == doctest::Approx(4e6 / 0.9e12 * 1e6));
    CHECK(r.name() == "roofline:v100");
    CHECK(f.name() == "fused:v100");
}

namespace {

// Cases both languages must price alike: python/tests/test_costs.py reads
// this table (one case a line, in this form) and checks costs.py against it.
// model, kind, precision, flops, bytes read, bytes written, producer bytes, microseconds
struct shared_case {
    std::string_view model;
    cost::compute_kind kind;
    cost::precision precision;
    double flops, bytes_read, bytes_written, producer_bytes, us;
};
constexpr shared_case shared_cases[] = {
    // shared-cost-cases-begin
    {"roofline:h100", cost::compute_kind::matmul, cost::precision::half, 1.978e12, 1e9, 1e9, 0, 2000},
    {"roofline:h100", cost::compute_kind::matmul, cost::precision::fp8, 1.979e12, 1e9, 1e9, 0, 1000},
    {"roofline:h100", cost::compute_kind::matmul, cost::precision::fp32, 4.94e11, 1e9, 1e9, 0, 1000},
    {"roofline:h100", cost::compute_kind::other, cost::precision::half, 1e9, 3e9, 0.35e9, 0, 1000},
    {"fused:h100", cost::compute_kind::pointwise, cost::precision::half, 6.7e10, 8e9, 4e9, 8e9, 1000},
    {"fused:h100", cost::compute_kind::matmul, cost::precision::half, 0.989e12, 1e6, 1e6, 1e6, 1000},
    {"roofline:h200", cost::compute_kind::matmul, cost::precision::half, 1e12, 4.8e9, 4.8e9, 0, 2000},
    {"roofline:h200", cost::compute_kind::matmul, cost::precision::fp32, 4.94e11, 0, 0, 0, 1000},
    {"roofline:v100", cost::compute_kind::matmul, cost::precision::half, 1.25e11, 1e6, 1e6, 0, 1000},
    {"roofline:v100", cost::compute_kind::matmul, cost::precision::fp8, 1.25e11, 1e6, 1e6, 0, 1000},
    {"roofline:v100", cost::compute_kind::matmul, cost::precision::fp32, 1.57e10, 1e6, 1e6, 0, 1000},
    {"fused:v100", cost::compute_kind::pointwise, cost::precision::fp32, 1e6, 0.9e9, 4e6, 0, 1000},
    // shared-cost-cases-end
};

} // namespace

TEST_CASE("cost.shared_cases_with_the_python_models") {
    for (const auto& c : shared_cases) {
        CAPTURE(c.model);
        CAPTURE(cost::to_string(c.precision));
        cost::op_work w{"op", "", c.kind, c.flops, c.bytes_read, c.bytes_written, c.producer_bytes, 1.0, c.precision};
        CHECK(cost::make_cost_model(c.model).op_us(w) == doctest::Approx(c.us).epsilon(1e-9));
    }
    CHECK(cost::make_cost_model("roofline:h100").name() == "roofline:h100");
}

TEST_CASE("cost.derived_graphs_declare_unit_and_model") {
    const auto net = conv_chain();
    training_options to;
    auto g = training_graph(net, to);
    CHECK(g.cost_unit() == "us");
    CHECK(g.cost_model() == "roofline:v100");
    to.cost = cost::make_cost_model("fused:h200");
    const auto f = training_graph(net, to);
    CHECK(f.cost_model() == "fused:h200");
    // Fused prices batch-norm and ReLU below their unfused roofline, convolutions the same.
    training_options th;
    th.device = cost::h200;
    const auto r = training_graph(net, th);
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(r.num_ops()); ++i) {
        const auto& name = r.op(i).name;
        if (name.rfind("conv", 0) == 0) CHECK(f.op(i).cost == doctest::Approx(r.op(i).cost));
        if (name == "relu1.fwd" || name == "bn2.fwd") CHECK(f.op(i).cost < r.op(i).cost);
    }
    // The unit and the model survive a round trip through the file.
    const auto path = cost_temp("unit.json");
    write_graph_json(path, f);
    const auto back = read_graph_json(path);
    CHECK(back.cost_unit() == "us");
    CHECK(back.cost_model() == "fused:h200");
    std::filesystem::remove(path);
}

TEST_CASE("cost.unknown_models_and_devices_are_named") {
    CHECK_THROWS_WITH_AS(cost::make_cost_model("roofline:tpu"), doctest::Contains("unknown device 'tpu'"), memplan::error);
    CHECK_THROWS_WITH_AS(cost::make_cost_model("guess"), doctest::Contains("unknown cost model 'guess'"), memplan::error);
    CHECK_THROWS_WITH_AS(cost::make_cost_model("measured"), doctest::Contains("measured:FILE"), memplan::error);
    CHECK_THROWS_WITH_AS(cost::make_cost_model("measured:/nonexistent/x.json"), doctest::Contains("x.json"),
                         memplan::error);
}

TEST_CASE("cost.unit_mismatch_is_refused") {
    graph a("relative"), b("micro");
    b.set_costs_from("us", "measured:cpu");
    CHECK_NOTHROW(cost::require_same_cost_unit(b, b));
    CHECK_THROWS_WITH_AS(cost::require_same_cost_unit(a, b),
                         doctest::Contains("graph 'relative' has costs in no declared unit and graph 'micro' in 'us'"),
                         memplan::error);
    // Measured costs must be microseconds: a file in milliseconds, or one
    // with no declared unit (the zoo's older relative costs), is refused.
    const auto net = conv_chain();
    auto g = training_graph(net);
    g.set_costs_from("ms", "measured:gpu");
    const auto path = cost_temp("ms.json");
    write_graph_json(path, g);
    CHECK_THROWS_WITH_AS(cost::make_cost_model("measured:" + path.string()),
                         doctest::Contains("in unit 'ms', not microseconds"), memplan::error);
    g.set_costs_from("", "");
    CHECK_THROWS_WITH_AS(cost::measured{g}, doctest::Contains("in unit '(none)'"), memplan::error);
    std::filesystem::remove(path);
    // An empty unit in a file is an error of the file, not an unnamed unit.
    {
        std::ofstream f(path);
        f << R"({"format": "memplan.graph", "version": 1, "name": "e", "cost_unit": "", "tensors": [], "ops": []})";
    }
    CHECK_THROWS_WITH_AS(read_graph_json(path), doctest::Contains("cost_unit"), memplan::error);
    std::filesystem::remove(path);
}

TEST_CASE("cost.measured_costs_are_looked_up_by_name") {
    const auto net = conv_chain();
    auto m = training_graph(net);
    // Made-up measured costs: every op 10 us, variant k (k + 1) * 10 us, workspaces 64 bytes.
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(m.num_ops()); ++i) {
        auto& op = m.op_at(i);
        op.cost = 10;
        for (std::size_t k = 0; k < op.variants.size(); ++k) {
            op.variants[k].cost = 10.0 * double(k + 1);
            op.variants[k].workspace = 64;
        }
    }
    m.set_costs_from("us", "measured:test");
    training_options to;
    to.cost = cost::measured(m);
    const auto g = training_graph(net, to);
    CHECK(g.cost_model() == "measured:test");
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        const auto& op = g.op(i);
        if (op.variants.empty()) CHECK(op.cost == 10);
        for (std::size_t k = 0; k < op.variants.size(); ++k) {
            CHECK(op.variants[k].cost == doctest::Approx(10.0 * double(k + 1)));
            CHECK(op.variants[k].workspace == 64);
        }
    }
    // A measurement that lacks an op names it.
    graph partial("partial");
    partial.set_costs_from("us", "measured:partial");
    to.cost = cost::measured(partial);
    CHECK_THROWS_WITH_AS(training_graph(net, to), doctest::Contains("have no op 'conv0.fwd'"), memplan::error);
}

TEST_CASE("cost.swapping_the_model_changes_the_plan") {
    // Two measurements of the same graph: one where convolutions are dear
    // and point-wise ops nearly free, one the other way round. At a budget
    // that forces recomputation, the planner recomputes what is cheap.
    const auto net = conv_chain();
    const auto base = training_graph(net);
    auto priced = [&](double conv_us, double pointwise_us) {
        graph m = base;
        for (graph::id_type i = 0; i < static_cast<graph::id_type>(m.num_ops()); ++i) {
            auto& op = m.op_at(i);
            const bool conv = op.name.rfind("conv", 0) == 0;
            const bool pw = op.name.rfind("bn", 0) == 0 || op.name.rfind("relu", 0) == 0;
            op.cost = conv ? conv_us : pw ? pointwise_us : 1.0;
            for (auto& v : op.variants) v.cost = op.cost * (v.name == "implicit_gemm" || v.name == "from_input" ? 1.0 : 1.5);
        }
        m.set_costs_from("us", "measured:made-up");
        training_options to;
        to.cost = cost::measured(m);
        return training_graph(net, to);
    };
    const auto dear_convs = priced(1000, 1), dear_pointwise = priced(1, 1000);
    remat_options ro;
    ro.time_limit = 5;
    ro.budget = store_all{}.plan(base, ro).arena() / 5 * 3;
    const auto a = auto_remat{}.plan(dear_convs, ro), b = auto_remat{}.plan(dear_pointwise, ro);
    REQUIRE(has_solution(a.status));
    REQUIRE(has_solution(b.status));
    CHECK(check_plan(dear_convs, a.plan).ok());
    CHECK(check_plan(dear_pointwise, b.plan).ok());
    CHECK(a.arena() <= ro.budget);
    CHECK(b.arena() <= ro.budget);
    // The plans differ the way the prices do: dear convolutions, fewer of
    // them recomputed and more point-wise ops; and each plan is the cheaper
    // of the two under the prices it was made with.
    CHECK(recomputed_convs(dear_convs, a.plan) < recomputed_convs(dear_pointwise, b.plan));
    CHECK(recomputed_pointwise(dear_convs, a.plan) > recomputed_pointwise(dear_pointwise, b.plan));
    CHECK(schedule_cost(dear_convs, a.plan.steps) < schedule_cost(dear_convs, b.plan.steps));
    CHECK(schedule_cost(dear_pointwise, b.plan.steps) < schedule_cost(dear_pointwise, a.plan.steps));
}
