// Allocation cost per training step on the GPU, three ways, replaying the
// buffers of ResNet-50's store-all plan (no kernels run: the figures are the
// allocator's alone). A plain program (no Google Benchmark), one line per mode:
//   naive_malloc  cudaMalloc at each buffer's first step, cudaFree after its last
//   stream_pool   the same with cudaMallocAsync / cudaFreeAsync (the stream-ordered
//                 pool, freed memory cached)
//   arena         memplan's plan: one cudaMalloc up front, base + offset per buffer
// Parameters and optimizer state are one allocation made before the steps in
// the two baselines (the arena holds them too). Every step ends with one
// synchronisation. Time: the median of the timed steps after two warm-up steps.
// Peak device bytes, the same way in all three modes: cudaMemGetInfo after
// every allocation event (each allocate(), the arena's one included) during one
// extra step after the timed ones (sampling costs time, so the timed steps do
// not sample), minus the bytes in use before the mode's first allocation.
// Live at peak: the bytes of live tensors (persistent ones included) when that
// peak was seen; the arena's device bytes never change, so there it is the
// most bytes live at any point of the step.
//   bench_cuda_alloc [--batch N] [--steps N] [--max-seconds S]
// Exits 77 without a CUDA device.
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/zoo/resnet.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

using namespace memplan;
using clock_type = std::chrono::steady_clock;

struct workload {
    plan p;
    std::vector<std::vector<std::size_t>> born, dies; // per plan step: buffers
    std::uint64_t persistent_bytes = 0;
};

workload resnet50(std::uint64_t batch) {
    workload w;
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
    return w;
}

enum class mode { naive_malloc, stream_pool, arena };
const char* name_of(mode m) {
    switch (m) {
    case mode::naive_malloc: return "naive_malloc";
    case mode::stream_pool: return "stream_pool";
    case mode::arena: return "arena";
    }
    return "?";
}

struct result {
    double ms_per_step = 0;
    int timed_steps = 0;
    std::uint64_t allocations = 0, peak_device = 0, live_at_peak = 0;
};

/// Replays warm-up, timed steps (until `steps` or `deadline`) and one sampled step in mode `m`.
result replay(const workload& w, mode m, int steps, clock_type::time_point deadline) {
    engine::cuda::backend b(engine::cuda::backend_options{
        0, m == mode::stream_pool ? engine::cuda::allocation::stream_pool : engine::cuda::allocation::device_malloc,
        false});
    b.synchronize(); // creates the stream and the library handles before the baseline
    const std::uint64_t base = engine::cuda::device_bytes_in_use();
    result r;
    bool sampling = false;
    std::uint64_t live = 0;
    auto sample = [&] {
        if (!sampling) return;
        const std::uint64_t used = engine::cuda::device_bytes_in_use();
        const std::uint64_t above = used > base ? used - base : 0;
        if (above > r.peak_device) {
            r.peak_device = above;
            r.live_at_peak = live;
        }
    };
    std::vector<std::byte*> ptr(w.p.buffers.size(), nullptr);
    std::byte* whole = nullptr;      // the arena, or the persistent tensors of the baselines
    std::uint64_t whole_bytes = 0;
    auto step = [&] {
        std::uint64_t allocations = 0;
        for (std::size_t s = 0; s < w.born.size(); ++s) {
            for (auto i : w.born[s]) {
                const auto& x = w.p.buffers[i];
                live += x.bytes;
                if (m == mode::arena) {
                    ptr[i] = whole + x.offset;
                    if (sampling) r.live_at_peak = std::max(r.live_at_peak, live);
                } else {
                    ptr[i] = b.allocate(x.bytes);
                    ++allocations;
                    sample();
                }
            }
            for (auto i : w.dies[s]) {
                if (m != mode::arena) b.deallocate(ptr[i], w.p.buffers[i].bytes);
                live -= w.p.buffers[i].bytes;
            }
        }
        b.synchronize();
        return allocations;
    };
    sampling = true; // the one allocation before the steps counts in every mode
    whole_bytes = m == mode::arena ? w.p.arena_bytes : w.persistent_bytes;
    whole = b.allocate(whole_bytes);
    live = w.persistent_bytes; // in the arena too
    sample();
    sampling = false;
    for (int i = 0; i < 2; ++i) step();
    std::vector<double> ms;
    while (static_cast<int>(ms.size()) < steps && (ms.empty() || clock_type::now() < deadline)) {
        const auto t0 = clock_type::now();
        r.allocations = step();
        ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    }
    sampling = true;
    step();
    sampling = false;
    b.deallocate(whole, whole_bytes);
    b.synchronize();
    std::sort(ms.begin(), ms.end());
    r.ms_per_step = ms[ms.size() / 2];
    r.timed_steps = static_cast<int>(ms.size());
    return r;
}

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "bench_cuda_alloc: %s\nusage: bench_cuda_alloc [--batch N] [--steps N] [--max-seconds S]\n",
                 why);
    std::exit(2);
}

long positive(const char* flag, const char* text) {
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (!end || *end != '\0' || v <= 0) usage((std::string(flag) + " needs a positive integer, not '" + text + "'").c_str());
    return v;
}

} // namespace

int main(int argc, char** argv) {
    std::uint64_t batch = 184; // ResNet-50 at the batch the GPU checks use
    int steps = 20;
    double max_seconds = 0; // 0: no limit
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") usage("allocation cost per step of ResNet-50's store-all plan");
        if (i + 1 >= argc) usage(("missing the value of " + a).c_str());
        if (a == "--batch") batch = static_cast<std::uint64_t>(positive("--batch", argv[++i]));
        else if (a == "--steps") steps = static_cast<int>(positive("--steps", argv[++i]));
        else if (a == "--max-seconds") max_seconds = double(positive("--max-seconds", argv[++i]));
        else usage(("unknown option " + a).c_str());
    }
    if (engine::cuda::device_count() == 0) {
        std::printf("no CUDA device: bench_cuda_alloc skipped\n");
        return 77;
    }
    try {
        const auto start = clock_type::now();
        const auto w = resnet50(batch);
        const auto d = engine::cuda::describe_device(0);
        std::printf("device %s; resnet50 batch %llu: %zu buffers, arena %llu bytes, persistent %llu bytes\n",
                    d.name.c_str(), (unsigned long long)batch, w.p.buffers.size(), (unsigned long long)w.p.arena_bytes,
                    (unsigned long long)w.persistent_bytes);
        const mode modes[] = {mode::naive_malloc, mode::stream_pool, mode::arena};
        for (int k = 0; k < 3; ++k) {
            // Each mode may use up to its share of the time still left (at least one timed step).
            auto deadline = clock_type::time_point::max();
            if (max_seconds > 0) {
                const double used = std::chrono::duration<double>(clock_type::now() - start).count();
                const double share = std::max(0.0, max_seconds - used) / double(3 - k);
                deadline = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                                   std::chrono::duration<double>(share));
            }
            const auto r = replay(w, modes[k], steps, deadline);
            std::printf("alloc %s: %.3f ms/step, %llu allocations/step, peak device %llu bytes (cudaMemGetInfo after "
                        "every allocation), live at peak %llu, arena %llu (median of %d steps)\n",
                        name_of(modes[k]), r.ms_per_step, (unsigned long long)r.allocations,
                        (unsigned long long)r.peak_device, (unsigned long long)r.live_at_peak,
                        (unsigned long long)w.p.arena_bytes, r.timed_steps);
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cuda_alloc: %s\n", e.what());
        return 1;
    }
    return 0;
}
