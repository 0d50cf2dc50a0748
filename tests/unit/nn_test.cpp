// Layer descriptions: shape inference and its errors, parameters, FLOPs,
// the roofline cost, data-type sizes and the memory-relevant variants.
#include <memplan/nn/device.hpp>
#include <memplan/nn/network.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace memplan;
// Scoped to this file (the unit tests build as a unity build).
namespace nn_test {
using namespace memplan::nn;

namespace {

std::string nn_error(auto&& f) {
    try {
        f();
    } catch (const error& e) {
        CHECK(e.category() == "nn");
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

layer_ops lower_one(const layer& l, std::vector<tensor_info> in) {
    const tensor_info out = infer(l, in, "l");
    return lower(l, {in, out});
}

} // namespace

TEST_CASE("nn.conv2d.shape_params_and_flops") {
    const auto conv = conv2d::make(3, 64, 7, 2, 3);
    const std::vector<tensor_info> in{{{2, 3, 224, 224}}};
    const auto out = conv.infer(in, "conv1");
    CHECK(out.shape == shape{2, 64, 112, 112});
    const auto params = conv.params(in);
    REQUIRE(params.size() == 2);
    CHECK(params[0].shape == shape{64, 3, 7, 7});
    CHECK(params[1].shape == shape{64});

    // By hand: 2 FLOPs per multiply-add, 2*64*112*112 outputs, 3*7*7 taps
    // each, plus one add per output for the bias.
    const double macs = 2.0 * 64 * 112 * 112 * (3 * 7 * 7);
    const auto ops = conv.lower({in, out});
    REQUIRE(ops.forward.size() == 1);
    CHECK(ops.forward[0].flops == doctest::Approx(2 * macs + 2.0 * 64 * 112 * 112));
    CHECK(ops.forward[0].kind == compute_kind::matmul);
    REQUIRE(ops.backward.size() == 2);
    CHECK(ops.backward[0].pass == op_pass::bwd_data);
    CHECK(ops.backward[0].suffix() == "bwd_data");
    CHECK(ops.backward[0].flops == doctest::Approx(2 * macs));
    // Backward-data reads the weight and the incoming gradient, not the input.
    CHECK(ops.backward[0].inputs == std::vector<slot>{slot::grad_output(), slot::param(0)});
    CHECK(ops.backward[1].inputs == std::vector<slot>{slot::input(0), slot::grad_output()});
}

TEST_CASE("nn.conv2d.strides_dilation_groups") {
    const std::vector<tensor_info> in{{{1, 32, 17, 17}}};
    // (17 + 2*2 - 2*(3-1) - 1) / 1 + 1 = 17 with dilation 2, padding 2.
    CHECK(conv2d::make(32, 32, 3, 1, 2, 1, true, 2).infer(in, "d").shape == shape{1, 32, 17, 17});
    // (17 + 2 - 3) / 2 + 1 = 9.
    CHECK(conv2d::make(32, 64, 3, 2, 1).infer(in, "s").shape == shape{1, 64, 9, 9});
    // Depthwise: weight (32, 1, 3, 3), no algorithm variants.
    const auto dw = conv2d::make(32, 32, 3, 1, 1, 32, false);
    CHECK(dw.params(in)[0].shape == shape{32, 1, 3, 3});
    CHECK(lower_one(dw, in).forward[0].variants.empty());
    // Dense 3x3 stride 1: implicit GEMM (no workspace) first, then im2col and Winograd.
    const auto dense = lower_one(conv2d::make(32, 32, 3, 1, 1), in);
    REQUIRE(dense.forward[0].variants.size() == 3);
    CHECK(dense.forward[0].variants[0].kind == impl_kind::implicit_gemm);
    CHECK(dense.forward[0].variants[0].name() == "implicit_gemm");
    CHECK(dense.forward[0].variants[0].workspace_values == 0);
    CHECK(dense.forward[0].variants[1].workspace_values == 1ull * 32 * 3 * 3 * 17 * 17);
    CHECK(dense.forward[0].variants[2].time_factor < 1.0);
    // 1x1 stride 1 is a plain GEMM.
    CHECK(lower_one(conv2d::make(32, 8, 1), in).forward[0].variants.empty());
}

TEST_CASE("nn.shape_errors_name_the_layer") {
    network net("t");
    auto x = net.input("x", {2, 4, 8, 8});
    auto msg = nn_error([&] { net.add(conv2d::make(3, 8, 3), {x}, "stem.conv"); });
    CHECK(contains(msg, "layer 'stem.conv' (conv2d)"));
    CHECK(contains(msg, "(2, 4, 8, 8)"));
    CHECK(contains(msg, "expects 3"));

    msg = nn_error([&] { net.add(conv2d::make(4, 8, 11), {x}, "big"); });
    CHECK(contains(msg, "layer 'big' (conv2d)"));
    CHECK(contains(msg, "smaller than the window"));

    auto y = net.add(conv2d::make(4, 6, 3, 1, 1), {x}, "c");
    msg = nn_error([&] { net.add(add{}, {x, y}, "res"); });
    CHECK(contains(msg, "layer 'res' (add)"));
    CHECK(contains(msg, "(2, 4, 8, 8) and (2, 6, 8, 8)"));

    msg = nn_error([&] { net.add(linear{10, 3}, {x}, "fc"); });
    CHECK(contains(msg, "layer 'fc' (linear)"));

    msg = nn_error([&] { net.add(concat{1}, {x, net.add(max_pool2d{}, {x}, "p")}, "cat"); });
    CHECK(contains(msg, "layer 'cat' (concat)"));

    msg = nn_error([&] { net.add(attention{5, false, 0}, {net.input("q", {1, 4, 768})}, "attn"); });
    CHECK(contains(msg, "layer 'attn' (attention)"));

    auto logits = net.add(global_avg_pool{}, {y}, "gap");
    msg = nn_error([&] { net.add(softmax_cross_entropy{}, {logits, net.input("labels", {3}, element::i64)}, "loss"); });
    CHECK(contains(msg, "layer 'loss' (softmax_cross_entropy)"));

    msg = nn_error([&] { net.add(batch_norm{7}, {x}, "bn"); });
    CHECK(contains(msg, "layer 'bn' (batch_norm)"));

    msg = nn_error([&] { net.add(relu{}, {x}, "c"); });
    CHECK(contains(msg, "'c' is already taken"));
}

TEST_CASE("nn.pooling_shapes") {
    const std::vector<tensor_info> in{{{1, 64, 112, 112}}};
    CHECK(max_pool2d{3, 2, 1, false}.infer(in, "p").shape == shape{1, 64, 56, 56});
    // GoogLeNet's pools use ceil mode: ceil((112 - 3) / 2) + 1 = 56, floor gives 55.
    CHECK(max_pool2d{3, 2, 0, true}.infer(in, "p").shape == shape{1, 64, 56, 56});
    CHECK(max_pool2d{3, 2, 0, false}.infer(in, "p").shape == shape{1, 64, 55, 55});
    CHECK(global_avg_pool{}.infer(in, "g").shape == shape{1, 64});
    CHECK(adaptive_avg_pool2d{7, 7}.infer(in, "a").shape == shape{1, 64, 7, 7});
    // Max-pool backward reads a one-byte argmax, not x or y.
    const auto ops = lower_one(max_pool2d{3, 2, 1, false}, in);
    REQUIRE(ops.internals.size() == 1);
    CHECK(ops.internals[0].info.elem == element::u8);
    CHECK(ops.backward[0].inputs == std::vector<slot>{slot::internal(0), slot::grad_output()});
    CHECK(conv_transpose2d{64, 32, 2, 2, 0, true}.infer(in, "up").shape == shape{1, 32, 224, 224});
}

TEST_CASE("nn.relu_and_batch_norm_saved_tensors") {
    const std::vector<tensor_info> in{{{2, 8, 4, 4}}};
    const auto from_out = lower_one(relu{0, saved_tensor::output}, in);
    CHECK(from_out.forward[0].inplace.size() == 1);
    CHECK(from_out.backward[0].inputs[0] == slot::output());
    const auto from_in = lower_one(relu{0, saved_tensor::input}, in);
    CHECK(from_in.forward[0].inplace.empty()); // the input must survive
    CHECK(from_in.backward[0].inputs[0] == slot::input(0));
    const auto mask = lower_one(relu{0, saved_tensor::mask}, in);
    REQUIRE(mask.internals.size() == 1);
    CHECK(mask.internals[0].info.elem == element::bit);
    CHECK(mask.internals[0].info.bytes(dtype::fp32) == 2 * 8 * 4 * 4 / 8);
    CHECK(mask.backward[0].inputs[0] == slot::internal(0));

    const auto bn_in = lower_one(batch_norm{8}, in);
    CHECK(bn_in.backward[0].inputs[0] == slot::input(0));
    const auto bn_out = lower_one(batch_norm{8, 1e-5, saved_tensor::output}, in);
    CHECK(bn_out.backward[0].inputs[0] == slot::output());
    REQUIRE(bn_in.internals.size() == 1);
    CHECK(bn_in.internals[0].info.bytes(dtype::fp16) == 2 * 8 * 4); // statistics stay fp32
}

TEST_CASE("nn.linear_and_attention") {
    const std::vector<tensor_info> in{{{4, 16, 32}}};
    const linear fc{32, 10};
    CHECK(fc.infer(in, "fc").shape == shape{4, 16, 10});
    const auto ops = lower_one(fc, in);
    CHECK(ops.forward[0].flops == doctest::Approx(2.0 * 64 * 32 * 10 + 64 * 10));

    const attention attn{4, true, 0.1};
    const std::vector<tensor_info> qkv{{{2, 16, 32}}, {{2, 16, 32}}, {{2, 16, 32}}};
    CHECK(attn.infer(qkv, "a").shape == shape{2, 16, 32});
    const auto a = lower_one(attn, qkv);
    // scores, probs, drop_mask, dropped + three backward intermediates; (N, heads, S, S) each.
    REQUIRE(a.internals.size() == 7);
    CHECK(a.internals[0].info.shape == shape{2, 4, 16, 16});
    CHECK(a.forward.size() == 4);
    CHECK(a.backward.size() == 4);
    const std::vector<tensor_info> packed{{{2, 16, 96}}};
    CHECK(attn.infer(packed, "a").shape == shape{2, 16, 32});
}

TEST_CASE("nn.roofline_cost") {
    // Compute-bound: 15.7 TFLOP on a V100 takes one second.
    CHECK(roofline_us(v100, compute_kind::matmul, 15.7e12, 1e6) == doctest::Approx(1e6));
    // Memory-bound: 0.9 GB at 0.9 TB/s takes 1 ms whatever the FLOPs.
    CHECK(roofline_us(v100, compute_kind::other, 1e6, 0.9e9) == doctest::Approx(1000.0));
    // H200: fp32 matrix products at 494 TFLOP/s (TF32), the rest at 67 TFLOP/s, 4.8 TB/s.
    CHECK(roofline_us(h200, compute_kind::matmul, 494e12, 0) == doctest::Approx(1e6));
    CHECK(roofline_us(h200, compute_kind::other, 67e12, 0) == doctest::Approx(1e6));
    CHECK(roofline_us(h200, compute_kind::other, 0, 4.8e12) == doctest::Approx(1e6));
    CHECK(find_device("h200")->matmul_flops_per_s == 494e12);
    // Matrix products run at the rate of their precision; element-wise work does not.
    CHECK(roofline_us(h100, compute_kind::matmul, 989e12, 0, precision::half) == doctest::Approx(1e6));
    CHECK(roofline_us(h100, compute_kind::matmul, 1979e12, 0, precision::fp8) == doctest::Approx(1e6));
    CHECK(roofline_us(h100, compute_kind::other, 67e12, 0, precision::half) == doctest::Approx(1e6));
    CHECK(roofline_us(v100, compute_kind::matmul, 125e12, 0, precision::half) == doctest::Approx(1e6));
    CHECK(v100.matmul_rate(precision::fp8) == 125e12); // no fp8 units: the half rate
    CHECK(find_device("h100")->bytes_per_s == 3.35e12);
    CHECK(!find_device("tpu"));
}

TEST_CASE("nn.dtype_sizes") {
    CHECK(size_of(dtype::fp32) == 4);
    CHECK(size_of(dtype::fp16) == 2);
    CHECK(size_of(dtype::bf16) == 2);
    CHECK(parse_dtype("bf16") == dtype::bf16);
    CHECK(!parse_dtype("fp8"));
    const tensor_info t{{3, 3}};
    CHECK(t.bytes(dtype::fp32) == 36);
    CHECK(t.bytes(dtype::fp16) == 18);
    CHECK(bytes_of(element::bit, dtype::fp32, 9) == 2);
    CHECK(bytes_of(element::i64, dtype::fp16, 5) == 40);
    CHECK(nn_error([] { (void)bytes_of(element::i64, dtype::fp32, UINT64_MAX / 4); }).find("overflows") !=
          std::string::npos);
}

TEST_CASE("nn.network.parameters_and_ties") {
    network net("tied");
    auto ids = net.input("ids", {2, 5}, element::i64);
    auto e = net.add(embedding{100, 16}, {ids}, "wte");
    auto h = net.add(layer_norm{16}, {e}, "ln");
    net.add(linear{16, 100, false}, {h}, "head", {{"w", "wte.w"}});
    // The tied head adds no parameter: 100*16 + 2*16.
    CHECK(parameter_count(net) == 100 * 16 + 2 * 16);
    CHECK(net.parameters().size() == 3);
    auto msg = nn_error([&] { net.add(linear{16, 50, false}, {h}, "bad", {{"w", "wte.w"}}); });
    CHECK(contains(msg, "does not match"));
    CHECK(!net.find_parameter("bad.w")); // a failed add leaves no trace
    msg = nn_error([&] { net.add(linear{16, 100, false}, {h}, "bad2", {{"w", "nope.w"}}); });
    CHECK(contains(msg, "'nope.w' which does not exist"));

    // Running statistics are state, not parameters.
    network bn("bn");
    bn.add(batch_norm{8}, {bn.input("x", {1, 8, 2, 2})}, "bn");
    CHECK(parameter_count(bn) == 16);
    CHECK(bn.nodes()[0].state.size() == 2);
}

} // namespace nn_test
