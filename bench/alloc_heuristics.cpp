// The heuristic allocators on the shared MiniMalloc "challenging" instances
// (A-F) and on synthetic training steps of 1,000 and 100,000 buffers.
// Counters: height, lower_bound, ratio (height / LB) and buffers; the time is
// one placement.
#include <memplan/alloc/allocators.hpp>
#include <memplan/io/offset_csv.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace memplan;

/// A training step of `layers` forward and `layers` backward steps, in the
/// shape real nets have: each forward step makes a few short-lived
/// temporaries (live 1-3 steps) and, one time in `1 / saved_share`, an
/// activation kept until the mirrored backward step; backward steps make
/// short-lived gradients; a handful of buffers (weights, optimizer state)
/// live throughout. Sizes are log-uniform over 256 B .. 64 MiB (saved
/// activations 64 KiB .. 64 MiB). Fixed seed: the same instance every run.
alloc_problem training_step(std::size_t buffers, double saved_share = 0.05, std::uint64_t seed = 42) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    auto log_size = [&](double lo, double hi) {
        return static_cast<std::uint64_t>(std::exp2(lo + (hi - lo) * unit(rng)));
    };
    constexpr std::size_t per_step = 5;
    const std::uint64_t layers = std::max<std::uint64_t>(1, buffers / (2 * per_step));
    const std::uint64_t horizon = 2 * layers + 1;
    alloc_problem p;
    p.alignment = 256;
    p.items.reserve(buffers);
    for (std::size_t i = 0; i < buffers / 1000 + 1 && p.items.size() < buffers; ++i)
        p.items.push_back({log_size(12, 24), 0, horizon});
    for (std::uint64_t t = 0; p.items.size() < buffers; t = (t + 1) % (2 * layers)) {
        const bool forward = t < layers;
        for (std::size_t k = 0; k < per_step && p.items.size() < buffers; ++k) {
            if (forward && unit(rng) < saved_share) {
                p.items.push_back({log_size(16, 26), t, 2 * layers - t + 1});
            } else {
                const std::uint64_t len = 1 + rng() % 3;
                p.items.push_back({log_size(8, 24), t, std::min(horizon, t + len)});
            }
        }
    }
    return p;
}

const alloc_problem& minimalloc(const std::string& name) {
    static std::map<std::string, alloc_problem> cache;
    auto it = cache.find(name);
    if (it == cache.end()) {
        auto csv = read_offset_csv(std::string(MEMPLAN_DATA_DIR "/minimalloc-challenging/") + name + ".1048576.csv");
        it = cache.emplace(name, std::move(csv.problem)).first;
    }
    return it->second;
}

const alloc_problem& synthetic(std::size_t n) {
    static std::map<std::size_t, alloc_problem> cache;
    auto it = cache.find(n);
    if (it == cache.end()) it = cache.emplace(n, training_step(n)).first;
    return it->second;
}

void run(benchmark::State& state, const alloc_problem& p, std::string_view allocator) {
    alloc_result r;
    for (auto _ : state) {
        r = allocate(allocator, p);
        benchmark::DoNotOptimize(r.size);
    }
    if (!has_solution(r.status)) state.SkipWithError(r.message.c_str());
    state.counters["height"] = static_cast<double>(r.size);
    state.counters["lower_bound"] = static_cast<double>(r.bound);
    state.counters["ratio"] = r.ratio();
    state.counters["buffers"] = static_cast<double>(p.items.size());
}

int register_all() {
    for (auto alloc : heuristic_allocator_names()) {
        for (const char* inst : {"A", "B", "C", "D", "E", "F"})
            benchmark::RegisterBenchmark(("minimalloc/" + std::string(inst) + "/" + std::string(alloc)).c_str(),
                                         [inst, alloc](benchmark::State& s) { run(s, minimalloc(inst), alloc); })
                ->Unit(benchmark::kMillisecond);
        for (std::size_t n : {std::size_t{1000}, std::size_t{100000}})
            benchmark::RegisterBenchmark(("training_step/" + std::to_string(n) + "/" + std::string(alloc)).c_str(),
                                         [n, alloc](benchmark::State& s) { run(s, synthetic(n), alloc); })
                ->Unit(benchmark::kMillisecond);
    }
    return 0;
}

const int registered = register_all();

} // namespace

BENCHMARK_MAIN();
