// Allocation cost per training step on the GPU, three ways, replaying the
// buffers of a training graph's store-all plan (no kernels run: the figures
// are the allocator's alone):
//   naive_malloc  cudaMalloc at each buffer's first step, cudaFree after its last
//   stream_pool   the same with cudaMallocAsync / cudaFreeAsync (the stream-ordered
//                 pool, freed memory cached), one synchronisation per step
//   arena         memplan's plan: one cudaMalloc up front, base + offset per buffer
// Counters: allocations per step, peak device bytes (cudaMemGetInfo high-water
// mark, sampled every 16 steps, relative to before; parameters and optimizer
// state included in all three), live bytes at the peak, and the arena. Without a device every benchmark reports an error and skips.
#include <benchmark/benchmark.h>

#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/alloc/best_heuristic.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/zoo/resnet.hpp>

#include <algorithm>
#include <map>
#include <vector>

namespace {

using namespace memplan;

struct workload {
    plan p;
    std::vector<std::vector<std::size_t>> born, dies; // per step: buffers
    std::uint64_t persistent_bytes = 0;
};

const workload& resnet50(std::uint64_t batch) {
    static std::map<std::uint64_t, workload> cache;
    auto& w = cache[batch];
    if (w.born.empty()) {
        const auto net = zoo::resnet(50, batch);
        training_program prog;
        const auto g = training_graph(net, {}, prog);
        w.p = make_plan(g, default_schedule(g), best_heuristic{}).plan;
        w.born.resize(w.p.steps.size());
        w.dies.resize(w.p.steps.size());
        for (std::size_t b = 0; b < w.p.buffers.size(); ++b) {
            const auto& x = w.p.buffers[b];
            if (x.bytes == 0) continue;
            if (!x.is_workspace() && g.tensor(x.tensor).persistent) {
                w.persistent_bytes += x.bytes;
                continue;
            }
            w.born[x.first].push_back(b);
            w.dies[x.last].push_back(b);
        }
    }
    return w;
}

void replay(benchmark::State& state, engine::cuda::allocation mode) {
    if (engine::cuda::device_count() == 0) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const auto& w = resnet50(static_cast<std::uint64_t>(state.range(0)));
    engine::cuda::backend b(engine::cuda::backend_options{0, mode, false});
    b.synchronize();
    const auto base = engine::cuda::device_bytes_in_use();
    // Parameters and optimizer state live for the whole run: one allocation up
    // front, so every mode's peak counts them (the arena holds them too).
    std::byte* persistent = b.allocate(w.persistent_bytes);
    std::vector<std::byte*> ptr(w.p.buffers.size(), nullptr);
    std::uint64_t peak = 0, allocations = 0, live = 0, live_peak = 0;
    for (auto _ : state) {
        allocations = 0;
        for (std::size_t s = 0; s < w.born.size(); ++s) {
            for (auto i : w.born[s]) {
                ptr[i] = b.allocate(w.p.buffers[i].bytes);
                live += w.p.buffers[i].bytes;
                ++allocations;
            }
            live_peak = std::max(live_peak, live);
            if (s % 16 == 0) peak = std::max(peak, engine::cuda::device_bytes_in_use() - base);
            for (auto i : w.dies[s]) {
                b.deallocate(ptr[i], w.p.buffers[i].bytes);
                live -= w.p.buffers[i].bytes;
            }
        }
        b.synchronize();
    }
    state.counters["allocations_per_step"] = double(allocations);
    state.counters["peak_device_bytes"] = double(std::max(peak, engine::cuda::device_bytes_in_use() - base));
    state.counters["peak_live_bytes"] = double(live_peak);
    state.counters["persistent_bytes"] = double(w.persistent_bytes);
    b.deallocate(persistent, w.persistent_bytes);
}

void naive_malloc(benchmark::State& state) { replay(state, engine::cuda::allocation::device_malloc); }
void stream_pool(benchmark::State& state) { replay(state, engine::cuda::allocation::stream_pool); }

void arena(benchmark::State& state) {
    if (engine::cuda::device_count() == 0) {
        state.SkipWithError("no CUDA device");
        return;
    }
    const auto& w = resnet50(static_cast<std::uint64_t>(state.range(0)));
    engine::cuda::backend b;
    b.synchronize();
    const auto base = engine::cuda::device_bytes_in_use();
    std::byte* a = b.allocate(w.p.arena_bytes);
    std::vector<std::byte*> ptr(w.p.buffers.size(), nullptr);
    for (auto _ : state) {
        for (std::size_t s = 0; s < w.born.size(); ++s)
            for (auto i : w.born[s]) ptr[i] = a + w.p.buffers[i].offset;
        benchmark::DoNotOptimize(ptr.data());
        b.synchronize();
    }
    state.counters["allocations_per_step"] = 0;
    state.counters["peak_device_bytes"] = double(engine::cuda::device_bytes_in_use() - base);
    state.counters["arena_bytes_incl_persistent"] = double(w.p.arena_bytes);
    b.deallocate(a, w.p.arena_bytes);
}

} // namespace

BENCHMARK(naive_malloc)->Arg(32)->Arg(184)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(stream_pool)->Arg(32)->Arg(184)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(arena)->Arg(32)->Arg(184)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
