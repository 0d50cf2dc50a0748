// GPU tests of the CUDA backend (need a device; main.cpp exits 77 without one).
// Every layer's forward and backward against the CPU reference: one naive
// step without the update on both backends, then every floating tensor of the
// training graph (activations, saved statistics, gradients) compared within
// float32 tolerance. Then planned training (budget, recomputation, variants,
// poison) against naive training on the GPU.
#include "models.hpp"

#include <doctest/doctest.h>

#include <memplan/check/validator.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/engine/recompute.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/alloc/best_heuristic.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

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

setup make(const std::string& name) {
    if (name == "mlp") return {examples::mlp(), optimizer::adam};
    if (name == "cnn") return {examples::cnn(), optimizer::sgd_momentum};
    if (name == "resnet") return {examples::resnet(), optimizer::sgd_momentum};
    if (name == "unet") return {examples::unet(), optimizer::sgd_momentum};
    return {examples::transformer(), optimizer::adam};
}

/// max |a - b| / max(1, max |a|).
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 1;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isfinite(a[i]) != std::isfinite(b[i])) return INFINITY; // NaN would slip through std::max
        diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::abs(double(a[i])));
    }
    return diff / scale;
}

template <class Executor>
std::vector<float> losses(Executor& ex, const examples::model& m, int steps) {
    std::vector<float> out;
    for (int s = 0; s < steps; ++s) {
        examples::feed(ex, m, static_cast<std::uint64_t>(s));
        out.push_back(ex.step());
    }
    return out;
}

} // namespace

TEST_CASE("cuda.layers.match_cpu_reference") {
    for (const std::string name : {"mlp", "cnn", "resnet", "unet", "transformer"}) {
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
        std::size_t compared = 0;
        double worst = 0;
        std::string worst_name;
        for (std::size_t t = 0; t < s.g.num_tensors(); ++t) {
            const auto& info = s.prog.tensors[t];
            if (skip[t] || (info.elem != nn::element::floating && info.elem != nn::element::f32)) continue;
            const auto& tname = s.g.tensor(static_cast<graph::id_type>(t)).name;
            CAPTURE(tname);
            const auto a = cpu.read(tname), b = gpu.read(tname);
            REQUIRE(a.size() == b.size());
            const double d = relative_difference(a, b);
            CHECK(d < 2e-3);
            if (!(d <= worst)) { // NaN and infinity count as worst
                worst = d;
                worst_name = tname;
            }
            ++compared;
        }
        CHECK(compared > 10);
        // One line per model for bench/gpu_check.sh's summary table.
        std::printf("agreement %s: %zu tensors vs the CPU, max relative difference %.2e (%s)\n", name.c_str(), compared,
                    worst, worst_name.empty() ? "-" : worst_name.c_str());
        std::fflush(stdout);
    }
}

TEST_CASE("cuda.layers.updates_match_cpu_reference") {
    for (const std::string name : {"mlp", "cnn", "transformer"}) {
        CAPTURE(name);
        auto s = make(name);
        auto cpu = engine::executor<engine::cpu::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
        auto gpu = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
        const auto lc = losses(cpu, s.m, 3), lg = losses(gpu, s.m, 3);
        for (std::size_t i = 0; i < lc.size(); ++i) CHECK(lg[i] == doctest::Approx(lc[i]).epsilon(1e-3));
        for (const auto& p : s.m.net.parameters()) {
            CAPTURE(p.name);
            CHECK(relative_difference(cpu.read(p.name), gpu.read(p.name)) < 2e-3);
        }
    }
}

TEST_CASE("cuda.train.planned_matches_naive") {
    for (const std::string name : {"mlp", "cnn", "resnet", "unet", "transformer"}) {
        CAPTURE(name);
        auto s = make(name);
        auto naive = engine::executor<engine::cuda::backend>::naive(s.m.net, s.g, s.prog, {}, s.options());
        const auto ln = losses(naive, s.m, 5);
        // The smallest arena the greedy reaches (recomputation), with poison:
        // a buffer freed too early would show as NaN.
        auto b = engine::plan_for_budget(s.g, 0);
        REQUIRE(check_plan(s.g, b.best).ok());
        engine::executor<engine::cuda::backend> planned(s.m.net, s.g, s.prog, b.best, {}, s.options(true));
        CHECK(planned.reserved_bytes() == b.best.arena_bytes);
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
            std::vector<bool> none(s.g.num_tensors(), false);
            auto made = make_plan(s.g, engine::recompute_schedule(s.g, none, variant), best_heuristic{});
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
