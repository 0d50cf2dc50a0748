// GPU tests of the CUDA backend (need a device; main.cpp exits 77 without one).
// Every layer's forward and backward against the CPU reference: one naive
// step without the update on both backends, then every floating tensor of the
// training graph (activations, saved statistics, gradients) compared within
// float32 tolerance (compare.hpp), one test case per model and per layer
// family, each printing one "agreement" line; batch-norm's variants one by
// one, timed at ResNet-50's first batch-norm ("variant_time" lines). Then
// planned training (budget, recomputation, variants, poison) against naive
// training on the GPU. Each case runs alone too (--first=K --last=K).
#include "compare.hpp"
#include "models.hpp"
#include "plans.hpp"

#include <doctest/doctest.h>

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/nn/training.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <span>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

using namespace memplan;

namespace {

struct setup {
    examples::model m;
    optimizer opt;
    training_program prog;
    graph g;
    setup(examples::model mm, optimizer o) : m(std::move(mm)), opt(o) {
        training_options to;
        to.opt = opt;
        g = training_graph(m.net, to, prog);
    }
    engine::executor_options options(bool poison = false) const {
        engine::executor_options eo;
        eo.opt.kind = opt;
        if (opt == optimizer::adam) eo.opt.lr = 1e-3f;
        eo.poison = poison;
        return eo;
    }
};

/// Inputs "x" of `shape` (uniform in [-1, 1)) and `labels` (N) in [0, 10): four batches cycle.
examples::model with_images(nn::network net, std::uint64_t image_values, std::uint64_t batch) {
    return {std::move(net), examples::detail::images_and_labels(image_values, batch, 10)};
}

// Small networks for the layer options the example models leave out.

/// Max pooling with padding, average pooling (PyTorch's include-pad divisor),
/// adaptive average pooling to a size that does not divide the input.
examples::model pool_family() {
    constexpr std::uint64_t N = 4;
    nn::network net("pool_family");
    auto x = net.input("x", {N, 3, 15, 15});
    auto labels = net.input("labels", {N}, nn::element::i64);
    auto h = net.add(nn::conv2d::make(3, 6, 3, 1, 1), {x}, "conv");
    h = net.add(nn::max_pool2d{3, 2, 1, false}, {h}, "max"); // 8 x 8
    h = net.add(nn::avg_pool2d{3, 2, 1, false}, {h}, "avg"); // 4 x 4
    h = net.add(nn::adaptive_avg_pool2d{3, 2}, {h}, "adaptive");
    h = net.add(nn::flatten{}, {h}, "flatten");
    h = net.add(nn::linear{6 * 3 * 2, 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return with_images(std::move(net), N * 3 * 15 * 15, N);
}

/// Concatenation, addition, dropout (the CPU's hash on both devices), flatten, ReLU6 and GELU.
examples::model elementwise_family() {
    constexpr std::uint64_t N = 4;
    nn::network net("elementwise_family");
    auto x = net.input("x", {N, 3, 8, 8});
    auto labels = net.input("labels", {N}, nn::element::i64);
    auto a = net.add(nn::conv2d::make(3, 4, 3, 1, 1), {x}, "conv_a");
    auto b = net.add(nn::conv2d::make(3, 4, 1), {x}, "conv_b");
    auto c = net.add(nn::conv2d::make(3, 8, 1), {x}, "conv_c");
    auto h = net.add(nn::concat{}, {a, b}, "cat");
    h = net.add(nn::add{}, {h, c}, "add");
    h = net.add(nn::relu{6.0}, {h}, "relu6");
    h = net.add(nn::dropout{0.3}, {h}, "drop");
    h = net.add(nn::gelu{}, {h}, "gelu");
    h = net.add(nn::flatten{}, {h}, "flatten");
    h = net.add(nn::linear{8 * 8 * 8, 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return with_images(std::move(net), N * 3 * 8 * 8, N);
}

/// Batch-norm split in chunks that cross planes (31 x 31 planes), batch-norm
/// over (N, C) with more channels than the split's scratch holds (one block
/// per channel) and layer-norm.
examples::model norm_family() {
    constexpr std::uint64_t N = 8;
    nn::network net("norm_family");
    auto x = net.input("x", {N, 3, 31, 31});
    auto labels = net.input("labels", {N}, nn::element::i64);
    auto h = net.add(nn::conv2d::make(3, 5, 3, 1, 1), {x}, "conv");
    h = net.add(nn::batch_norm{5}, {h}, "bn_split");
    h = net.add(nn::relu{}, {h}, "relu");
    h = net.add(nn::global_avg_pool{}, {h}, "gap");
    h = net.add(nn::linear{5, 7000}, {h}, "wide");
    h = net.add(nn::batch_norm{7000}, {h}, "bn_wide");
    h = net.add(nn::linear{7000, 48}, {h}, "narrow");
    h = net.add(nn::layer_norm{48}, {h}, "ln");
    h = net.add(nn::linear{48, 10}, {h}, "fc");
    net.add(nn::softmax_cross_entropy{}, {h, labels}, "loss");
    return with_images(std::move(net), N * 3 * 31 * 31, N);
}

setup make(const std::string& name) {
    if (name == "pool_family") return {pool_family(), optimizer::sgd_momentum};
    if (name == "elementwise_family") return {elementwise_family(), optimizer::sgd_momentum};
    if (name == "norm_family") return {norm_family(), optimizer::sgd_momentum};
    if (name == "mlp") return {examples::mlp(), optimizer::adam};
    if (name == "cnn") return {examples::cnn(), optimizer::sgd_momentum};
    if (name == "resnet") return {examples::resnet(), optimizer::sgd_momentum};
    if (name == "unet") return {examples::unet(), optimizer::sgd_momentum};
    return {examples::transformer(), optimizer::adam};
}

/// Tensors compared with the CPU for one model or layer family, and the worst of them.
struct agreement {
    explicit agreement(std::string label) : what(std::move(label)) {}

    std::string what;
    std::size_t compared = 0;
    double worst = 0;
    std::string worst_name;

    /// Checks `gpu` against the reference `cpu` within `tolerance` (compare.hpp).
    void add(const std::string& name, const std::vector<float>& cpu, const std::vector<float>& gpu,
             double tolerance = 2e-3) {
        CAPTURE(name);
        const auto r = test::compare(cpu, gpu);
        INFO("non-finite mismatches: " << r.mismatched << ", the first at " << r.first_mismatch);
        CHECK(r.agrees(tolerance));
        if (!(r.relative <= worst)) { // NaN and infinity count as worst
            worst = r.relative;
            worst_name = name;
        }
        ++compared;
    }
    /// One line per model or family, for bench/gpu_check.sh's summary table.
    void print() const {
        std::printf("agreement %s: %zu tensors vs the CPU, max relative difference %.2e (%s)\n", what.c_str(), compared,
                    worst, worst_name.empty() ? "-" : worst_name.c_str());
        std::fflush(stdout);
    }
};

template <class Executor>
std::vector<float> losses(Executor& ex, const examples::model& m, int steps) {
    std::vector<float> out;
    for (int s = 0; s < steps; ++s) {
        examples::feed(ex, m, static_cast<std::uint64_t>(s));
        out.push_back(ex.step());
    }
    return out;
}

/// One naive step without the update on both backends; every floating tensor compared.
void check_layers(const std::string& name, const std::string& label) {
    CAPTURE(name);
    auto s = make(name);
    auto cpu = engine::executor<engine::cpu::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
    auto gpu = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
    examples::feed(cpu, s.m, 0);
    examples::feed(gpu, s.m, 0);
    const float lc = cpu.step(false), lg = gpu.step(false);
    CHECK(lg == doctest::Approx(lc).epsilon(1e-4));
    // The update ops did not run: what they would write holds no value.
    std::vector<char> skip(s.g.num_tensors(), 0);
    for (const auto& op : s.g.ops())
        if (op.phase == phase::update)
            for (auto t : op.outputs) skip[t] = 1;
    agreement a{label};
    for (std::size_t t = 0; t < s.g.num_tensors(); ++t) {
        const auto& info = s.prog.tensors[t];
        if (skip[t] || (info.elem != nn::element::floating && info.elem != nn::element::f32)) continue;
        const auto& tname = s.g.tensor(static_cast<graph::id_type>(t)).name;
        const auto c = cpu.read(tname), g = gpu.read(tname);
        a.add(tname, c, g);
    }
    CHECK(a.compared > 10);
    a.print();
}

/// Three training steps with updates on both backends; parameters and optimizer state compared.
void check_updates(const std::string& name, const std::string& label, std::optional<optimizer> opt = {}) {
    CAPTURE(name);
    setup s = opt ? setup(make(name).m, *opt) : make(name);
    auto cpu = engine::executor<engine::cpu::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
    auto gpu = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
    const auto lc = losses(cpu, s.m, 3), lg = losses(gpu, s.m, 3);
    for (std::size_t i = 0; i < lc.size(); ++i) CHECK(lg[i] == doctest::Approx(lc[i]).epsilon(1e-3));
    agreement a{label};
    // Every persistent floating tensor: parameters, running statistics, momentum and moments.
    for (std::size_t t = 0; t < s.g.num_tensors(); ++t) {
        const auto& x = s.g.tensor(static_cast<graph::id_type>(t));
        const auto& info = s.prog.tensors[t];
        if (!x.persistent || (info.elem != nn::element::floating && info.elem != nn::element::f32)) continue;
        a.add(x.name, cpu.read(x.name), gpu.read(x.name));
    }
    CHECK(a.compared >= s.m.net.parameters().size());
    a.print();
}

/// One batch-norm layer of (N, C, H, W) run op by op on a backend, bound the way
/// the executor binds it: the forward out of place or over its input, the
/// backward from the input or the output, with or without dx.
template <class Backend>
class bn_rig {
public:
    enum buffer : std::size_t { x, y, dy, dx, gamma, beta, rm, rv, stats, dg, db, count };

    bn_rig(std::uint64_t N, std::uint64_t C, std::uint64_t H, std::uint64_t W)
        : layer_{C}, data_{nn::shape{N, C, H, W}, nn::element::f32}, param_{nn::shape{C}, nn::element::f32},
          stats_{nn::shape{2, C}, nn::element::f32} {
        node_.name = "bn";
        node_.layer = layer_;
        ops_ = layer_.lower({std::span<const nn::tensor_info>(&data_, 1), data_});
        for (std::size_t b = 0; b < count; ++b) ptr_[b] = backend_.allocate(bytes(b));
    }
    bn_rig(const bn_rig&) = delete;
    bn_rig& operator=(const bn_rig&) = delete;
    ~bn_rig() {
        for (std::size_t b = 0; b < count; ++b) backend_.deallocate(ptr_[b], bytes(b));
    }

    void set(buffer b, const std::vector<float>& v) {
        REQUIRE(v.size() * sizeof(float) == bytes(b));
        backend_.upload(ptr_[b], reinterpret_cast<const std::byte*>(v.data()), bytes(b));
    }
    std::vector<float> get(buffer b) {
        std::vector<float> v(bytes(b) / sizeof(float));
        backend_.download(reinterpret_cast<std::byte*>(v.data()), ptr_[b], bytes(b));
        return v;
    }
    /// The forward; in place: y over x (the plan's choice when the backward starts from y).
    void forward(bool in_place) {
        using nn::slot;
        y_at_ = in_place ? x : y;
        run(ops_.forward.at(0), nn::impl_kind::none,
            {{slot::input(0), ref(x)}, {slot::param(0), ref(gamma)}, {slot::param(1), ref(beta)},
             {slot::state(0), ref(rm)}, {slot::state(1), ref(rv)}, {slot::output(), ref(y_at_)},
             {slot::internal(0), ref(stats)}});
    }
    /// The backward (variant from_input or from_output); without dx, as for a network's first layer.
    void backward(nn::impl_kind variant, bool with_dx) {
        using nn::slot;
        run(ops_.backward.at(0), variant,
            {{slot::input(0), ref(x)}, {slot::output(), ref(y_at_)}, {slot::grad_output(), ref(dy)},
             {slot::param(0), ref(gamma)}, {slot::param(1), ref(beta)}, {slot::internal(0), ref(stats)},
             {slot::grad_input(0), with_dx ? ref(dx) : tensor_ref{}}, {slot::grad_param(0), ref(dg)},
             {slot::grad_param(1), ref(db)}});
    }
    /// Where the forward left y.
    buffer output() const { return y_at_; }
    void synchronize() { backend_.synchronize(); }

private:
    using tensor_ref = engine::tensor_ref;

    std::uint64_t bytes(std::size_t b) const { return info(b).numel() * sizeof(float); }
    const nn::tensor_info& info(std::size_t b) const { return b <= dx ? data_ : b == stats ? stats_ : param_; }
    tensor_ref ref(std::size_t b) const { return {ptr_[b], &info(b)}; }
    void run(const nn::op_spec& spec, nn::impl_kind variant, std::vector<std::pair<nn::slot, tensor_ref>> slots) {
        engine::kernel_call c;
        c.node = &node_;
        c.spec = &spec;
        c.variant = variant;
        c.slots = slots;
        c.node_inputs = std::span<const nn::tensor_info>(&data_, 1);
        c.node_output = &data_;
        backend_.run(c);
    }

    nn::batch_norm layer_;
    nn::tensor_info data_, param_, stats_;
    nn::node node_;
    nn::layer_ops ops_;
    Backend backend_;
    std::byte* ptr_[count] = {};
    buffer y_at_ = y;
};

/// Uniform values in [lo, hi).
std::vector<float> uniform_values(std::uint64_t n, float lo, float hi, std::uint64_t seed) {
    engine::rng r(seed);
    std::vector<float> v(n);
    for (auto& e : v) e = r.uniform(lo, hi);
    return v;
}

/// The batch-norm variants a plan can pick, in the order they are run.
struct bn_variant {
    const char* name;
    bool in_place;         // the forward writes y over x
    nn::impl_kind backward; // from_input or from_output
    bool with_dx;
};
constexpr bn_variant bn_variants[] = {
    {"out_of_place.from_input", false, nn::impl_kind::from_input, true}, // cuDNN both ways
    {"in_place.from_output", true, nn::impl_kind::from_output, true},    // own kernels both ways
    {"out_of_place.from_input_no_dx", false, nn::impl_kind::from_input, false},
};

/// Every variant on both backends, every output compared; with `timed`, each
/// pass timed on the GPU as well (median over rounds of `per_round` runs).
void check_bn_variants(std::uint64_t N, std::uint64_t C, std::uint64_t H, std::uint64_t W, const std::string& label,
                       bool timed) {
    const std::uint64_t n = N * C * H * W;
    const auto x = uniform_values(n, 2.0f, 4.0f, 11); // a mean far from 0: the split's shift at work
    const auto dy = uniform_values(n, -1.0f, 1.0f, 12);
    const auto gamma = uniform_values(C, 0.5f, 1.5f, 13), beta = uniform_values(C, -0.5f, 0.5f, 14);
    const std::vector<float> zeros(C, 0.0f), ones(C, 1.0f);
    bn_rig<engine::cpu::backend> cpu(N, C, H, W);
    bn_rig<engine::cuda::backend> gpu(N, C, H, W);
    auto reset = [&](auto& rig) {
        using b = std::remove_reference_t<decltype(rig)>;
        rig.set(b::x, x);
        rig.set(b::dy, dy);
        rig.set(b::gamma, gamma);
        rig.set(b::beta, beta);
        rig.set(b::rm, zeros);
        rig.set(b::rv, ones);
    };
    agreement a{label};
    for (const auto& v : bn_variants) {
        CAPTURE(v.name);
        using cb = bn_rig<engine::cpu::backend>;
        using gb = bn_rig<engine::cuda::backend>;
        reset(cpu);
        reset(gpu);
        cpu.forward(v.in_place);
        gpu.forward(v.in_place);
        const std::string p = std::string(v.name) + ".";
        a.add(p + "y", cpu.get(cpu.output()), gpu.get(gpu.output()));
        a.add(p + "stats", cpu.get(cb::stats), gpu.get(gb::stats));
        a.add(p + "running_mean", cpu.get(cb::rm), gpu.get(gb::rm));
        a.add(p + "running_var", cpu.get(cb::rv), gpu.get(gb::rv));
        cpu.backward(v.backward, v.with_dx);
        gpu.backward(v.backward, v.with_dx);
        if (v.with_dx) a.add(p + "dx", cpu.get(cb::dx), gpu.get(gb::dx));
        a.add(p + "dgamma", cpu.get(cb::dg), gpu.get(gb::dg));
        a.add(p + "dbeta", cpu.get(cb::db), gpu.get(gb::db));
        if (!timed) continue;
        // The backend's stream is private: wall time around synchronize(), per_round runs
        // back to back, so the launch gaps count as they would in a step.
        constexpr int rounds = 5, per_round = 10;
        auto time = [&](auto&& once) {
            once();
            gpu.synchronize();
            std::vector<double> ms;
            for (int r = 0; r < rounds; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < per_round; ++i) once();
                gpu.synchronize();
                ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                             per_round);
            }
            std::sort(ms.begin(), ms.end());
            return ms[ms.size() / 2];
        };
        // Repeated runs only rewrite their outputs (an in-place forward renormalises y): the times hold.
        const double fwd = time([&] { gpu.forward(v.in_place); });
        const double bwd = time([&] { gpu.backward(v.backward, v.with_dx); });
        std::printf("variant_time %s %s fwd %.4f\n", label.c_str(), v.name, fwd);
        std::printf("variant_time %s %s bwd %.4f\n", label.c_str(), v.name, bwd);
        std::fflush(stdout);
    }
    a.print();
}

} // namespace

// One case per model and per layer family (stable names; each prints its agreement line).
TEST_CASE("cuda.layers.match_cpu_reference.mlp") { check_layers("mlp", "mlp"); }
TEST_CASE("cuda.layers.match_cpu_reference.cnn") { check_layers("cnn", "cnn"); }
TEST_CASE("cuda.layers.match_cpu_reference.resnet") { check_layers("resnet", "resnet"); }
TEST_CASE("cuda.layers.match_cpu_reference.unet") { check_layers("unet", "unet"); }
TEST_CASE("cuda.layers.match_cpu_reference.transformer") { check_layers("transformer", "transformer"); }
TEST_CASE("cuda.layers.match_cpu_reference.pool") { check_layers("pool_family", "pool"); }
TEST_CASE("cuda.layers.match_cpu_reference.elementwise") { check_layers("elementwise_family", "elementwise"); }
TEST_CASE("cuda.layers.match_cpu_reference.norm") { check_layers("norm_family", "norm"); }

// Batch-norm's variants op by op: chunks across planes, one chunk per channel, the
// one-block-per-channel fallback (more channels than the scratch holds).
TEST_CASE("cuda.batch_norm.variants_match_cpu") {
    check_bn_variants(8, 24, 31, 31, "batch_norm.8x24x31x31", false);
    check_bn_variants(3, 40, 5, 7, "batch_norm.3x40x5x7", false);
    check_bn_variants(4, 7000, 2, 1, "batch_norm.4x7000x2x1", false);
}

// ResNet-50's first batch-norm at batch 184 (147.7 M values, 64 channels): the
// variants a low budget picks, timed; checked against the CPU as well.
TEST_CASE("cuda.batch_norm.variants_time_resnet50_bn1") {
    check_bn_variants(184, 64, 112, 112, "resnet50.bn1", true);
}

TEST_CASE("cuda.layers.updates_match_cpu_reference.adam") { check_updates("mlp", "optimizer.adam (mlp)"); }
TEST_CASE("cuda.layers.updates_match_cpu_reference.sgd_momentum") {
    check_updates("cnn", "optimizer.sgd_momentum (cnn)");
}
TEST_CASE("cuda.layers.updates_match_cpu_reference.transformer") {
    check_updates("transformer", "optimizer.adam (transformer)");
}
TEST_CASE("cuda.layers.updates_match_cpu_reference.sgd") {
    check_updates("cnn", "optimizer.sgd (cnn)", optimizer::sgd);
}

TEST_CASE("cuda.train.planned_matches_naive") {
    for (const std::string name : {"mlp", "cnn", "resnet", "unet", "transformer"}) {
        CAPTURE(name);
        auto s = make(name);
        auto naive = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
        const auto ln = losses(naive, s.m, 5);
        // The smallest arena the default planner reaches (recomputation), with
        // poison: a buffer freed too early would show as NaN.
        const auto b = test::smallest_plan(s.g);
        REQUIRE(has_solution(b.status));
        REQUIRE(check_plan(s.g, b.plan).ok());
        engine::executor<engine::cuda::backend> planned(s.m.net, s.g, s.prog, b.plan, {}, s.options(true));
        CHECK(planned.reserved_bytes() == b.plan.arena_bytes);
        CHECK(planned.reserved_bytes() < naive.reserved_bytes());
        const auto lp = losses(planned, s.m, 5);
        for (std::size_t i = 0; i < ln.size(); ++i) {
            CHECK(std::isfinite(lp[i]));
            CHECK(lp[i] == doctest::Approx(ln[i]).epsilon(1e-4));
        }
        CHECK(planned.backend().stats().allocations == 1); // the arena is one cudaMalloc
    }
}

TEST_CASE("cuda.train.variants_use_planned_workspace") {
    // Variant 1 everywhere: gemm_im2col convolutions (cuDNN GEMM / ALGO_1 in
    // the planned workspace), batch-norm from its output, ReLU from its mask.
    // Variant 2: Winograd where offered; when cuDNN needs more workspace than
    // the model planned, the error names the op and both sizes.
    for (std::uint32_t variant : {1u, 2u}) {
        for (const std::string name : {"cnn", "resnet", "unet"}) {
            CAPTURE(name);
            CAPTURE(variant);
            auto s = make(name);
            auto naive = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
            const auto ln = losses(naive, s.m, 3);
            auto made = make_plan(s.g, test::on_variant(s.g, variant), best_heuristic{});
            REQUIRE(check_plan(s.g, made.plan).ok());
            engine::executor<engine::cuda::backend> planned(s.m.net, s.g, s.prog, made.plan, {}, s.options(true));
            try {
                const auto lp = losses(planned, s.m, 3);
                for (std::size_t i = 0; i < ln.size(); ++i) CHECK(lp[i] == doctest::Approx(ln[i]).epsilon(1e-3));
            } catch (const memplan::error& e) {
                const std::string what = e.what();
                INFO(what);
                CHECK(variant == 2);
                CHECK(what.find("op '") != std::string::npos);
                CHECK(what.find("workspace") != std::string::npos);
            }
        }
    }
}

TEST_CASE("cuda.backend.errors_name_the_op") {
    auto s = make("mlp");
    auto gpu = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
    auto batch = s.m.batch(0);
    for (auto& [n, bytes] : batch)
        if (n == "labels") reinterpret_cast<std::int64_t*>(bytes.data())[3] = 99; // 10 classes
    for (const auto& [n, bytes] : batch) gpu.set_input(n, bytes);
    CHECK_THROWS_WITH_AS(gpu.step(), doctest::Contains("op 'loss.fwd': label 99 at position 3"), memplan::error);
}

TEST_CASE("cuda.backend.allocation_modes") {
    for (auto mode : {engine::cuda::allocation::device_malloc, engine::cuda::allocation::stream_pool}) {
        engine::cuda::backend b(engine::cuda::backend_options{0, mode, false});
        auto* p = b.allocate(1 << 20);
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
        std::vector<std::byte> host(1 << 20, std::byte{7}), back(1 << 20);
        b.upload(p, host.data(), host.size());
        b.download(back.data(), p, back.size());
        CHECK(host == back);
        b.poison(p, 16);
        b.download(back.data(), p, 16);
        CHECK(back[0] == std::byte{0xFF});
        CHECK(b.stats().peak_bytes == (1u << 20));
        b.deallocate(p, 1 << 20);
        CHECK(b.stats().allocated_bytes == 0);
    }
}
