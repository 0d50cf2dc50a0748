// Finite-difference checks of every backward kernel of the CPU backend.
//
// Each case is a tiny network: one layer under test, fed by "sources", and a
// softmax cross-entropy loss. A source is an embedding whose ids are 0, 1,
// 2, ... so its output IS its table: the table's gradient is the gradient of
// the layer's input, and perturbing the table perturbs the input. The
// analytic gradients come from one executor step without the updates; the
// numeric ones from central differences of the loss over every parameter
// value, one executor step per evaluation.
#include <memplan/alloc/no_reuse.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

using namespace memplan;
using cpu_executor = engine::executor<engine::cpu::backend>;

namespace {

/// A tiny network under test and the host data of its inputs.
struct gc_net {
    nn::network net{"gradcheck"};
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> ids; ///< i64 inputs
    std::vector<std::pair<std::string, float>> source_spacing;           ///< source tables and their value spacing
};

std::uint64_t product(const std::vector<std::uint64_t>& d, std::size_t from, std::size_t to) {
    std::uint64_t p = 1;
    for (std::size_t i = from; i < to; ++i) p *= d[i];
    return p;
}

/// A source tensor of shape `dims`: values are a shuffled grid with step
/// `spacing`, centred on 0 and never on it, so kinks (ReLU at 0 and 6, max-pool
/// ties) stay farther than the finite-difference step from every value.
nn::value source(gc_net& c, const std::string& name, std::vector<std::uint64_t> dims, float spacing) {
    const auto rows = product(dims, 0, dims.size() - 1);
    std::vector<std::uint64_t> id_dims(dims.begin(), dims.end() - 1);
    auto ids = c.net.input(name + "_ids", nn::shape(id_dims), nn::element::i64);
    std::vector<std::int64_t> v(rows);
    std::iota(v.begin(), v.end(), std::int64_t{0});
    c.ids.push_back({name + "_ids", std::move(v)});
    c.source_spacing.push_back({name + ".w", spacing});
    return c.net.add(nn::embedding{rows, dims.back()}, {ids}, name);
}

/// The loss: softmax cross-entropy over axis 1 (or the last axis) of `h`.
void loss(gc_net& c, nn::value h, bool class_axis_last = false) {
    auto dims = c.net.info(h).shape.dims;
    const std::size_t axis = class_axis_last ? dims.size() - 1 : 1;
    const auto classes = static_cast<std::int64_t>(dims[axis]);
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
    auto labels = c.net.input("labels", nn::shape(dims), nn::element::i64);
    std::vector<std::int64_t> y(product(dims, 0, dims.size()));
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>((i * 7 + 3) % std::size_t(classes));
    c.ids.push_back({"labels", std::move(y)});
    c.net.add(nn::softmax_cross_entropy{class_axis_last}, {h, labels}, "loss");
}

/// Worst ||analytic - numeric|| / max(||analytic||, ||numeric||, 1e-3) over
/// the trainable parameters (sources included), with the analytic gradients
/// multiplied by `scale` (1: the real check; otherwise a deliberately wrong
/// gradient). Ops with variants run the one called `variant` when they have
/// it. `h`: the finite-difference step.
double gradcheck(const gc_net& c, nn::impl_kind variant = nn::impl_kind::none, double scale = 1.0, float h = 1e-2f) {
    training_program prog;
    const graph g = training_graph(c.net, {}, prog);
    // One buffer per tensor and no in-place reuse, so every gradient is still
    // there to read after the step.
    auto sched = default_schedule(g);
    bool found = variant == nn::impl_kind::none;
    for (auto& s : sched)
        for (std::size_t v = 0; v < g.op(s.op).variants.size(); ++v)
            if (nn::parse_impl_kind(g.op(s.op).variants[v].name) == variant) {
                s.variant = static_cast<graph::id_type>(v);
                found = true;
            }
    REQUIRE_MESSAGE(found, "no op offers variant " << std::string(nn::to_string(variant)));
    plan_options po;
    po.liveness.use_inplace = false;
    const auto made = make_plan(g, sched, no_reuse{}, po);
    REQUIRE(has_solution(made.status));
    cpu_executor ex(c.net, g, prog, made.plan);
    for (const auto& [name, v] : c.ids) ex.set_input(name, v);

    // Parameter values away from the initialiser's special cases (zero
    // biases and betas, unit gammas), so every term of each backward matters.
    engine::rng r(7);
    std::vector<std::pair<std::string, std::vector<float>>> params;
    for (const auto& p : c.net.parameters()) {
        if (!p.trainable) continue;
        std::vector<float> v(static_cast<std::size_t>(p.shape.numel()));
        const auto src = std::find_if(c.source_spacing.begin(), c.source_spacing.end(),
                                      [&](const auto& s) { return s.first == p.name; });
        if (src != c.source_spacing.end()) {
            std::vector<std::size_t> perm(v.size());
            std::iota(perm.begin(), perm.end(), std::size_t{0});
            for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[r.below(i)]);
            for (std::size_t i = 0; i < v.size(); ++i)
                v[i] = (float(perm[i]) - float(v.size()) / 2 + 0.5f) * src->second;
        } else if (p.name.ends_with(".gamma")) {
            for (auto& x : v) x = r.uniform(0.5f, 1.5f);
        } else {
            for (auto& x : v) x = r.uniform(-0.5f, 0.5f);
        }
        ex.write(p.name, v);
        params.push_back({p.name, std::move(v)});
    }

    ex.step(false);
    double worst = 0;
    for (auto& [name, v] : params) {
        // One step for all: a larger one on parameters was tried and made
        // the small beta gradients worse (truncation error, not rounding).
        const float step = h;
        const auto& upd = g.op(*g.find_op(name + ".update"));
        auto analytic = ex.read(g.tensor(upd.inputs[1]).name);
        REQUIRE(analytic.size() == v.size());
        double diff = 0, na = 0, nn2 = 0;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const float keep = v[i];
            v[i] = keep + step;
            ex.write(name, v);
            const double plus = ex.step(false);
            v[i] = keep - step;
            ex.write(name, v);
            const double minus = ex.step(false);
            v[i] = keep;
            ex.write(name, v);
            const double numeric = (plus - minus) / (2.0 * double(step));
            const double a = double(analytic[i]) * scale;
            diff += (a - numeric) * (a - numeric);
            na += a * a;
            nn2 += numeric * numeric;
        }
        const double rel = std::sqrt(diff) / std::max({std::sqrt(na), std::sqrt(nn2), 1e-3});
        CAPTURE(name);
        CAPTURE(rel);
        MESSAGE("gradcheck " << name
                             << (variant == nn::impl_kind::none ? "" : " [" + std::string(nn::to_string(variant)) + "]")
                             << ": " << rel);
        worst = std::max(worst, rel);
    }
    return worst;
}

constexpr double tolerance = 1e-2;

} // namespace

TEST_CASE("gradcheck.linear") {
    gc_net c;
    auto x = source(c, "x", {3, 5}, 0.1f);
    loss(c, c.net.add(nn::linear{5, 4}, {x}, "fc"));
    CHECK(gradcheck(c) < tolerance);
    // The check can fail: a gradient 10% too large is caught.
    CHECK(gradcheck(c, nn::impl_kind::none, 1.1) > tolerance);
}

TEST_CASE("gradcheck.conv2d") {
    gc_net c;
    auto x = source(c, "x", {2, 3, 5, 5}, 0.01f);
    loss(c, c.net.add(nn::conv2d::make(3, 4, 3, 2, 1), {x}, "conv"));
    for (const auto v : {nn::impl_kind::implicit_gemm, nn::impl_kind::gemm_im2col}) {
        const std::string name(nn::to_string(v));
        CAPTURE(name);
        CHECK(gradcheck(c, v) < tolerance);
    }
}

TEST_CASE("gradcheck.conv2d_dense3x3") {
    // Dense 3x3 stride 1: the winograd variant exists too (the direct kernel on the CPU).
    gc_net c;
    auto x = source(c, "x", {1, 2, 4, 4}, 0.05f);
    loss(c, c.net.add(nn::conv2d::make(2, 3, 3, 1, 1), {x}, "conv"));
    for (const auto v : {nn::impl_kind::implicit_gemm, nn::impl_kind::gemm_im2col, nn::impl_kind::winograd}) {
        const std::string name(nn::to_string(v));
        CAPTURE(name);
        CHECK(gradcheck(c, v) < tolerance);
    }
}

TEST_CASE("gradcheck.conv_transpose2d") {
    gc_net c;
    auto x = source(c, "x", {2, 3, 3, 3}, 0.03f);
    loss(c, c.net.add(nn::conv_transpose2d{3, 2}, {x}, "up"));
    CHECK(gradcheck(c) < tolerance);
}

TEST_CASE("gradcheck.batch_norm") {
    gc_net c;
    auto x = source(c, "x", {2, 3, 3, 3}, 0.05f);
    loss(c, c.net.add(nn::batch_norm{3}, {x}, "bn"));
    for (const auto v : {nn::impl_kind::from_input, nn::impl_kind::from_output}) {
        const std::string name(nn::to_string(v));
        CAPTURE(name);
        CHECK(gradcheck(c, v) < tolerance);
    }
}

TEST_CASE("gradcheck.layer_norm") {
    gc_net c;
    auto x = source(c, "x", {2, 3, 5}, 0.05f);
    loss(c, c.net.add(nn::layer_norm{5}, {x}, "ln"), true);
    CHECK(gradcheck(c) < tolerance);
}

TEST_CASE("gradcheck.relu") {
    gc_net c;
    auto x = source(c, "x", {4, 6}, 0.1f);
    loss(c, c.net.add(nn::relu{}, {x}, "relu"));
    for (const auto v : {nn::impl_kind::from_output, nn::impl_kind::from_mask}) {
        const std::string name(nn::to_string(v));
        CAPTURE(name);
        CHECK(gradcheck(c, v) < tolerance);
    }
    gc_net c6; // ReLU6: values from -8 to 8, clipped at 6
    auto y = source(c6, "x", {4, 8}, 0.5f);
    loss(c6, c6.net.add(nn::relu{6.0}, {y}, "relu6"));
    for (const auto v : {nn::impl_kind::from_output, nn::impl_kind::from_mask}) {
        const std::string name(nn::to_string(v));
        CAPTURE(name);
        CHECK(gradcheck(c6, v) < tolerance);
    }
}

TEST_CASE("gradcheck.gelu") {
    gc_net c;
    auto x = source(c, "x", {4, 6}, 0.15f);
    loss(c, c.net.add(nn::gelu{}, {x}, "gelu"));
    CHECK(gradcheck(c) < tolerance);
}

TEST_CASE("gradcheck.pooling") {
    {
        gc_net c;
        auto x = source(c, "x", {2, 2, 4, 4}, 0.05f);
        loss(c, c.net.add(nn::max_pool2d{}, {x}, "pool"));
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c; // overlapping windows with padding
        auto x = source(c, "x", {1, 2, 5, 5}, 0.05f);
        loss(c, c.net.add(nn::max_pool2d{3, 2, 1}, {x}, "pool"));
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c;
        auto x = source(c, "x", {1, 2, 5, 5}, 0.05f);
        loss(c, c.net.add(nn::avg_pool2d{3, 2, 1}, {x}, "pool"));
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c; // uneven windows
        auto x = source(c, "x", {2, 2, 5, 5}, 0.05f);
        loss(c, c.net.add(nn::adaptive_avg_pool2d{2, 3}, {x}, "pool"));
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c;
        auto x = source(c, "x", {2, 3, 3, 3}, 0.05f);
        loss(c, c.net.add(nn::global_avg_pool{}, {x}, "pool"));
        CHECK(gradcheck(c) < tolerance);
    }
}

TEST_CASE("gradcheck.add_concat_flatten") {
    {
        gc_net c;
        auto a = source(c, "a", {2, 3, 2}, 0.1f);
        auto b = source(c, "b", {2, 3, 2}, 0.1f);
        loss(c, c.net.add(nn::add{}, {a, b}, "add"));
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c;
        auto a = source(c, "a", {2, 2, 2, 2}, 0.1f);
        auto b = source(c, "b", {2, 3, 2, 2}, 0.1f);
        loss(c, c.net.add(nn::concat{}, {a, b}, "cat"));
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c;
        auto a = source(c, "a", {2, 2, 2, 3}, 0.1f);
        loss(c, c.net.add(nn::flatten{}, {a}, "flat"));
        CHECK(gradcheck(c) < tolerance);
    }
}

TEST_CASE("gradcheck.embedding") {
    // A real embedding (ids repeat, so its gradient scatter-adds) and the
    // position embedding (rows past the sequence get no gradient).
    gc_net c;
    auto ids = c.net.input("tok", {2, 4}, nn::element::i64);
    c.ids.push_back({"tok", {3, 1, 3, 0, 2, 2, 5, 3}});
    auto h = c.net.add(nn::embedding{6, 5}, {ids}, "wte");
    h = c.net.add(nn::position_embedding{6, 5}, {h}, "wpe");
    loss(c, h, true);
    CHECK(gradcheck(c) < tolerance);
}

TEST_CASE("gradcheck.attention") {
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        gc_net c;
        auto qkv = source(c, "qkv", {2, 3, 12}, 0.03f);
        loss(c, c.net.add(nn::attention{2, causal, 0.0}, {qkv}, "attn"), true);
        CHECK(gradcheck(c) < tolerance);
    }
}

TEST_CASE("gradcheck.softmax_cross_entropy") {
    {
        gc_net c;
        auto x = source(c, "x", {3, 5}, 0.2f);
        loss(c, x);
        CHECK(gradcheck(c) < tolerance);
    }
    {
        gc_net c; // per-pixel classes on axis 1
        auto x = source(c, "x", {2, 3, 2, 2}, 0.2f);
        loss(c, x);
        CHECK(gradcheck(c) < tolerance);
    }
}
