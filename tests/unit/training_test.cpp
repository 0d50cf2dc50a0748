// Derivation of training graphs: gradient accumulation on branching
// networks, phases, persistence, optimizer state, data types and costs.
#include <memplan/nn/training.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/plan/bounds.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace memplan;

namespace {

// x -> conv a -> relu r -> {conv b, conv c} -> add -> pool -> fc -> loss:
// r feeds two layers, so its gradient has two contributions.
nn::network branching() {
    nn::network net("branch");
    auto x = net.input("x", {2, 3, 8, 8});
    auto labels = net.input("labels", {2}, nn::element::i64);
    auto a = net.add(nn::conv2d::make(3, 4, 3, 1, 1), {x}, "a");
    auto r = net.add(nn::relu{}, {a}, "r");
    auto b = net.add(nn::conv2d::make(4, 4, 3, 1, 1), {r}, "b");
    auto c = net.add(nn::conv2d::make(4, 4, 1), {r}, "c");
    auto s = net.add(nn::add{}, {b, c}, "sum");
    auto p = net.add(nn::global_avg_pool{}, {s}, "pool");
    auto f = net.add(nn::linear{4, 5}, {p}, "fc");
    net.add(nn::softmax_cross_entropy{}, {f, labels}, "loss");
    return net;
}

std::size_t op_index(const graph& g, std::string_view name) {
    auto id = g.find_op(name);
    REQUIRE_MESSAGE(id.has_value(), "missing op ", name);
    return *id;
}

std::vector<std::string> names_of(const graph& g, const std::vector<graph::id_type>& ts) {
    std::vector<std::string> v;
    for (auto t : ts) v.push_back(g.tensor(t).name);
    return v;
}

} // namespace

TEST_CASE("training.branching.gradient_accumulation") {
    const graph g = training_graph(branching());
    validate(g);
    const auto acc = op_index(g, "r.grad_acc2");
    const auto& op = g.op(static_cast<graph::id_type>(acc));
    // The two contributions (each conv's input gradient) are summed into r.dy, in place.
    auto in = names_of(g, op.inputs);
    std::sort(in.begin(), in.end());
    CHECK(in == std::vector<std::string>{"b.dx", "c.dx"});
    CHECK(names_of(g, op.outputs) == std::vector<std::string>{"r.dy"});
    CHECK(op.inplace.size() == 1);
    CHECK(op.phase == phase::backward);
    // ... after both contributions exist and before r's backward, which reads the sum.
    CHECK(acc > op_index(g, "b.bwd_data"));
    CHECK(acc > op_index(g, "c.bwd_data"));
    CHECK(acc < op_index(g, "r.bwd"));
    // ReLU's backward reads the output (default variant) or only the 1-bit mask.
    const auto& relu_bwd = g.op(static_cast<graph::id_type>(op_index(g, "r.bwd")));
    CHECK(names_of(g, relu_bwd.inputs) == std::vector<std::string>{"r.y", "r.mask", "r.dy"});
    REQUIRE(relu_bwd.variants.size() == 2);
    CHECK(names_of(g, relu_bwd.variants[0].inputs) == std::vector<std::string>{"r.y", "r.dy"});
    CHECK(names_of(g, relu_bwd.variants[1].inputs) == std::vector<std::string>{"r.mask", "r.dy"});
    CHECK(relu_bwd.variants[1].cost < relu_bwd.variants[0].cost); // reads 1/32 of the bytes
    // The add passes its gradient through: both convs read the pool's input gradient.
    CHECK(names_of(g, g.op(static_cast<graph::id_type>(op_index(g, "b.bwd_data"))).inputs)[0] == "pool.dx");
    CHECK(names_of(g, g.op(static_cast<graph::id_type>(op_index(g, "c.bwd_data"))).inputs)[0] == "pool.dx");
    // Only r needs a sum; nothing else is read twice on the way back.
    std::size_t sums = 0;
    for (const auto& o : g.ops()) sums += o.name.find("grad_acc") != std::string::npos;
    CHECK(sums == 1);
    // a's input is data: no backward-data for a.
    CHECK(!g.find_op("a.bwd_data"));
    CHECK(g.find_op("a.bwd_filter"));
}

TEST_CASE("training.three_way_accumulation_is_incremental") {
    nn::network net("three");
    auto x = net.input("x", {1, 4});
    auto labels = net.input("labels", {1}, nn::element::i64);
    auto h = net.add(nn::linear{4, 4}, {x}, "h");
    auto p = net.add(nn::linear{4, 4}, {h}, "p");
    auto q = net.add(nn::linear{4, 4}, {h}, "q");
    auto s = net.add(nn::add{}, {p, q}, "s");
    auto t = net.add(nn::add{}, {s, h}, "t");
    net.add(nn::softmax_cross_entropy{}, {t, labels}, "loss");
    const graph g = training_graph(net);
    validate(g);
    // Three contributions: a partial sum h.dy2, then the final h.dy.
    CHECK(g.find_tensor("h.dy2"));
    CHECK(g.find_tensor("h.dy"));
    CHECK(op_index(g, "h.grad_acc2") < op_index(g, "h.grad_acc3"));
    CHECK(op_index(g, "h.grad_acc3") < op_index(g, "h.bwd_weight"));
    CHECK(names_of(g, g.op(static_cast<graph::id_type>(op_index(g, "h.bwd_weight"))).inputs)[1] == "h.dy");
}

TEST_CASE("training.phases_persistence_and_outputs") {
    const auto net = branching();
    const graph g = training_graph(net);
    std::size_t forward = 0, backward = 0, update = 0;
    phase last = phase::forward;
    for (const auto& o : g.ops()) {
        CHECK(static_cast<int>(o.phase) >= static_cast<int>(last)); // forward, then backward, then update
        last = o.phase;
        const bool is_update = o.name.ends_with(".update");
        CHECK((o.phase == phase::update) == is_update);
        CHECK((o.phase == phase::forward) == o.name.ends_with(".fwd"));
        forward += o.phase == phase::forward;
        backward += o.phase == phase::backward;
        update += o.phase == phase::update;
    }
    CHECK(forward == net.nodes().size());
    CHECK(update == 8); // a, b, c, fc: weight and bias each
    CHECK(backward > 0);
    for (const auto& p : net.parameters()) CHECK(g.tensor(*g.find_tensor(p.name)).persistent);
    for (const auto& t : g.tensors()) {
        const bool state = t.name.ends_with(".momentum");
        const bool weight = t.name.ends_with(".w") || t.name.ends_with(".b");
        CHECK(t.persistent == (state || weight));
    }
    REQUIRE(g.outputs().size() == 1);
    CHECK(g.tensor(g.outputs()[0]).name == "loss.y");
    CHECK(g.tensor(g.outputs()[0]).bytes == 4);
    // Each update reads its weight, its gradient and its momentum.
    CHECK(names_of(g, g.op(static_cast<graph::id_type>(op_index(g, "a.w.update"))).inputs) ==
          std::vector<std::string>{"a.w", "a.dw", "a.w.momentum"});
}

TEST_CASE("training.optimizers_and_dtypes") {
    const auto net = branching();
    auto persistent_bytes = [](const graph& g) {
        std::uint64_t b = 0;
        for (const auto& t : g.tensors()) b += t.persistent ? t.bytes : 0;
        return b;
    };
    const std::uint64_t params = nn::parameter_count(net);
    training_options o;
    o.opt = optimizer::sgd;
    CHECK(persistent_bytes(training_graph(net, o)) == 4 * params);
    o.opt = optimizer::sgd_momentum;
    CHECK(persistent_bytes(training_graph(net, o)) == 8 * params);
    o.opt = optimizer::adam;
    const graph adam = training_graph(net, o);
    CHECK(persistent_bytes(adam) == 12 * params);
    CHECK(adam.find_tensor("fc.w.adam_m"));
    CHECK(adam.find_tensor("fc.w.adam_v"));
    CHECK(parse_optimizer("sgd") == optimizer::sgd_momentum);
    CHECK(parse_optimizer("adam") == optimizer::adam);
    CHECK(!parse_optimizer("lamb"));

    training_options half;
    half.dt = nn::dtype::fp16;
    const graph g16 = training_graph(net, half);
    const graph g32 = training_graph(net);
    auto bytes = [](const graph& g, std::string_view t) { return g.tensor(*g.find_tensor(t)).bytes; };
    CHECK(bytes(g32, "r.y") == 2 * 4 * 8 * 8 * 4);
    CHECK(bytes(g16, "r.y") == 2 * 4 * 8 * 8 * 2);
    CHECK(bytes(g16, "labels") == 2 * 8); // int64 whatever the dtype
    CHECK(bytes(g16, "loss.y") == 4);
}

TEST_CASE("training.costs_are_rooflines") {
    const auto net = branching();
    training_options o;
    o.device = nn::h200;
    const graph g = training_graph(net, o);
    // fc.fwd: (2, 4) x (4, 5)^T + bias, matrix units; bytes = x + w + b + y.
    const auto& fc = g.op(static_cast<graph::id_type>(op_index(g, "fc.fwd")));
    const double flops = 2.0 * 2 * 4 * 5 + 2 * 5;
    const double bytes = 4.0 * (2 * 4 + 5 * 4 + 5 + 2 * 5);
    CHECK(fc.cost == doctest::Approx(std::max(flops / nn::h200.matmul_flops_per_s, bytes / nn::h200.bytes_per_s) * 1e6));
    // In bf16 the matrix product runs at the half rate and moves half the bytes.
    training_options half = o;
    half.dt = nn::dtype::bf16;
    const graph g16 = training_graph(net, half);
    const auto& fc16 = g16.op(static_cast<graph::id_type>(op_index(g16, "fc.fwd")));
    CHECK(fc16.cost ==
          doctest::Approx(std::max(flops / nn::h200.half_matmul_flops_per_s, bytes / 2 / nn::h200.bytes_per_s) * 1e6));
    // Convolution variants scale the roofline time; the first (default) needs no workspace.
    const auto& b = g.op(static_cast<graph::id_type>(op_index(g, "b.fwd")));
    REQUIRE(b.variants.size() == 3);
    CHECK(b.variants[0].workspace == 0);
    CHECK(b.variants[1].workspace == 4ull * 2 * 4 * 9 * 8 * 8); // im2col columns, fp32
    CHECK(b.variants[2].cost < b.variants[1].cost);
    CHECK(b.variants[1].cost < b.variants[0].cost);
    for (const auto& op : g.ops()) CHECK(op.cost > 0);
}

TEST_CASE("training.default_schedule_has_a_lower_bound") {
    const graph g = training_graph(branching());
    const auto lb = schedule_lower_bound(g, default_schedule(g));
    std::uint64_t persistent = 0, total = 0;
    for (const auto& t : g.tensors()) {
        persistent += t.persistent ? t.bytes : 0;
        total += t.bytes;
    }
    CHECK(lb > persistent);
    CHECK(lb <= total);
    CHECK(lb >= schedule_free_lower_bound(g));
}

TEST_CASE("training.tied_parameters_sum_their_gradients") {
    nn::network net("tied");
    auto ids = net.input("ids", {2, 3}, nn::element::i64);
    auto labels = net.input("labels", {2, 3}, nn::element::i64);
    auto e = net.add(nn::embedding{11, 6}, {ids}, "wte");
    auto h = net.add(nn::layer_norm{6}, {e}, "ln");
    auto y = net.add(nn::linear{6, 11, false}, {h}, "head", {{"w", "wte.w"}});
    net.add(nn::softmax_cross_entropy{true}, {y, labels}, "loss");
    const graph g = training_graph(net);
    validate(g);
    const auto& acc = g.op(static_cast<graph::id_type>(op_index(g, "wte.w.grad_acc2")));
    auto in = names_of(g, acc.inputs);
    std::sort(in.begin(), in.end());
    CHECK(in == std::vector<std::string>{"head.dw", "wte.dw"});
    CHECK(names_of(g, g.op(static_cast<graph::id_type>(op_index(g, "wte.w.update"))).inputs)[1] == "wte.w.grad");
    CHECK(!g.find_op("head.w.update"));
}

TEST_CASE("training.loss_must_be_a_layer_output") {
    nn::network net("empty");
    net.input("x", {1});
    CHECK_THROWS_AS(training_graph(net), error);
}
