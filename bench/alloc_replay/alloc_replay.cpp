// Replays each zoo model's training-step allocation trace through a general
// purpose allocator (glibc malloc, jemalloc or mimalloc: one executable each,
// chosen by MEMPLAN_REPLAY_ALLOCATOR, since linking jemalloc or mimalloc
// replaces malloc for the whole process) and, in the glibc executable,
// through memplan's planned arena (one reservation, then base + offset).
//
// The trace: the default schedule's transient buffers (in-place chains as one
// block), allocated at their first step, freed after their last step.
// Persistent tensors (weights, optimizer state) are left out everywhere: out
// of the timed trace, the footprint and the arena. The time is one step's
// allocations and frees, no touching; the footprint comes from a separate
// untimed run of three steps that writes one byte per 4 KiB page of every
// allocation, so that reserved memory is also resident.
//
//   bench_alloc_replay_<allocator> [--batch=N] [benchmark flags]
//   (default batch 8, U-Net 4, GPT-2 2: see batch_for)
//
// Run one model per process (--benchmark_filter='^replay/resnet50/'): the
// allocators keep state between benchmarks (glibc raises its mmap threshold
// to the largest chunk freed so far), so a model's figures would otherwise
// depend on the models run before it. docs/planners.md has the loop.
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/liveness.hpp>
#include <memplan/schedule/schedule.hpp>
#include <memplan/zoo/zoo.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#define MEMPLAN_REPLAY_GLIBC 1
#define MEMPLAN_REPLAY_JEMALLOC 2
#define MEMPLAN_REPLAY_MIMALLOC 3

#ifndef MEMPLAN_REPLAY_ALLOCATOR
#define MEMPLAN_REPLAY_ALLOCATOR MEMPLAN_REPLAY_GLIBC
#endif

#if MEMPLAN_REPLAY_ALLOCATOR == MEMPLAN_REPLAY_GLIBC
#include <malloc.h>
#elif MEMPLAN_REPLAY_ALLOCATOR == MEMPLAN_REPLAY_JEMALLOC
#include <jemalloc/jemalloc.h>
#elif MEMPLAN_REPLAY_ALLOCATOR == MEMPLAN_REPLAY_MIMALLOC
#include <mimalloc.h>
#else
#error "MEMPLAN_REPLAY_ALLOCATOR must be 1 (glibc), 2 (jemalloc) or 3 (mimalloc)"
#endif

namespace {

using namespace memplan;

// --- the process's allocator ---------------------------------------------------

/// The allocator this executable measures, through its own API.
struct system_allocator {
#if MEMPLAN_REPLAY_ALLOCATOR == MEMPLAN_REPLAY_GLIBC
    static constexpr std::string_view name = "glibc";
    static void* allocate(std::size_t n) noexcept { return std::malloc(n); }
    static void deallocate(void* p, std::size_t) noexcept { std::free(p); }
    /// Bytes taken from the system: the sbrk heaps plus the mmapped chunks.
    static std::uint64_t reserved() noexcept {
        const struct mallinfo2 mi = mallinfo2();
        return mi.arena + mi.hblkhd;
    }
    /// Hands free memory back to the system, so that runs start alike.
    static void release_free_memory() noexcept { malloc_trim(0); }
#elif MEMPLAN_REPLAY_ALLOCATOR == MEMPLAN_REPLAY_JEMALLOC
    static constexpr std::string_view name = "jemalloc";
    static void* allocate(std::size_t n) noexcept { return mallocx(n, 0); }
    static void deallocate(void* p, std::size_t n) noexcept { sdallocx(p, n, 0); }
    /// stats.mapped: bytes in extents jemalloc has mapped, dirty pages
    /// included (they stay until decay purges them).
    static std::uint64_t reserved() noexcept {
        std::uint64_t epoch = 1;
        std::size_t len = sizeof(epoch);
        mallctl("epoch", &epoch, &len, &epoch, len);
        std::size_t mapped = 0;
        len = sizeof(mapped);
        if (mallctl("stats.mapped", &mapped, &len, nullptr, 0) != 0) return 0;
        return mapped;
    }
    static void release_free_memory() {
        mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
        static const std::string purge = "arena." + std::to_string(MALLCTL_ARENAS_ALL) + ".purge";
        mallctl(purge.c_str(), nullptr, nullptr, nullptr, 0);
    }
#else
    static constexpr std::string_view name = "mimalloc";
    static void* allocate(std::size_t n) noexcept { return mi_malloc(n); }
    static void deallocate(void* p, std::size_t) noexcept { mi_free(p); }
    /// Bytes mimalloc has committed (its own process-wide statistic).
    static std::uint64_t reserved() noexcept {
        std::size_t elapsed, user, sys, rss, peak_rss, commit = 0, peak_commit, faults;
        mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
        return commit;
    }
    static void release_free_memory() noexcept { mi_collect(true); }
#endif
};

// --- resident memory from /proc --------------------------------------------------

/// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); 0 when unreadable.
std::uint64_t proc_status_bytes(std::string_view field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with(field) && line.size() > field.size() && line[field.size()] == ':')
            return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10) * 1024;
    return 0;
}

/// Resets VmHWM to the current RSS (Linux >= 4.0); false when not allowed.
bool reset_peak_rss() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    out.flush();
    return static_cast<bool>(out);
}

// --- the trace -------------------------------------------------------------------

/// One training step's transient blocks and when they come and go.
struct trace {
    std::vector<std::uint64_t> bytes;                 // per block
    std::vector<std::uint64_t> offset;                // per block, in the planned arena
    std::vector<std::vector<std::uint32_t>> alloc_at; // per step: blocks that start there
    std::vector<std::vector<std::uint32_t>> free_at;  // per step: blocks whose last step it is
    std::uint64_t arena_bytes = 0;      // best_heuristic on the transient blocks
    std::uint64_t plan_arena_bytes = 0; // make_plan's arena, persistent tensors included
    std::uint64_t peak_live = 0;        // largest sum of live transient bytes (the arena's lower bound)
    std::uint64_t persistent_bytes = 0; // left out of the trace
    std::size_t allocs = 0;
};

std::size_t batch_option = 0; // 0: batch_for()'s defaults

/// Batch 8, except where that would pass ~5 GiB of live activations (U-Net's
/// 416x608 images, GPT-2's 1024 tokens): the three allocators each run in
/// their own process on a shared 24 GiB machine.
std::size_t batch_for(std::string_view model) {
    if (batch_option != 0) return batch_option;
    if (model == "unet") return 4;
    if (model == "gpt2") return 2;
    return 8;
}

trace make_trace(std::string_view model) {
    zoo_options zo;
    zo.batch = batch_for(model);
    const graph g = zoo_graph(model, zo);
    const schedule s = default_schedule(g);
    const auto live = compute_liveness(g, s);
    std::vector<std::size_t> block_of;
    const alloc_problem all = allocation_problem(live, std::uint64_t{256}, block_of);

    // A block is persistent when any of its buffers holds a persistent tensor.
    std::vector<char> persistent(all.items.size(), 0);
    for (std::size_t b = 0; b < live.buffers.size(); ++b) {
        const auto& x = live.buffers[b];
        if (!x.is_workspace() && g.tensor(x.tensor).persistent) persistent[block_of[b]] = 1;
    }
    trace t;
    alloc_problem transient;
    transient.alignment = all.alignment;
    for (std::size_t i = 0; i < all.items.size(); ++i) {
        const auto& it = all.items[i];
        if (persistent[i]) {
            t.persistent_bytes += it.size;
            continue;
        }
        if (it.size == 0 || it.begin >= it.end) continue;
        transient.items.push_back(it);
    }
    const auto placed = best_heuristic{}.place(transient);
    if (!has_solution(placed.status)) throw error("bench", "best_heuristic failed on " + std::string(model));
    t.arena_bytes = placed.size;
    t.plan_arena_bytes = make_plan(g, s, best_heuristic{}).plan.arena_bytes;

    t.alloc_at.resize(s.size());
    t.free_at.resize(s.size());
    std::vector<std::int64_t> delta(s.size() + 1, 0);
    for (std::size_t i = 0; i < transient.items.size(); ++i) {
        const auto& it = transient.items[i];
        t.bytes.push_back(it.size);
        t.offset.push_back(placed.offsets[i]);
        t.alloc_at[it.begin].push_back(static_cast<std::uint32_t>(i));
        t.free_at[it.end - 1].push_back(static_cast<std::uint32_t>(i));
        delta[it.begin] += static_cast<std::int64_t>(it.size);
        delta[it.end] -= static_cast<std::int64_t>(it.size);
    }
    std::int64_t live_now = 0;
    for (auto d : delta) t.peak_live = std::max(t.peak_live, static_cast<std::uint64_t>(live_now += d));
    t.allocs = transient.items.size();
    return t;
}

const trace& trace_of(std::string_view model) {
    static std::map<std::string, trace, std::less<>> cache;
    auto it = cache.find(model);
    if (it == cache.end()) it = cache.emplace(std::string(model), make_trace(model)).first;
    return it->second;
}

// --- the two ways of serving the trace ---------------------------------------------

/// Every block from the process's allocator.
struct malloc_replay {
    static constexpr std::string_view name = system_allocator::name;
    const trace* t = nullptr;
    bool open() noexcept { return true; }
    void close() noexcept {}
    char* acquire(std::uint32_t b) noexcept { return static_cast<char*>(system_allocator::allocate(t->bytes[b])); }
    void release(std::uint32_t b, char* p) noexcept { system_allocator::deallocate(p, t->bytes[b]); }
};

/// One reservation of the planned arena (from the process's allocator, so it
/// shows in the same statistics); a block is base + its planned offset.
struct arena_replay {
    static constexpr std::string_view name = "arena";
    const trace* t = nullptr;
    char* base = nullptr;
    bool open() noexcept {
        base = static_cast<char*>(system_allocator::allocate(t->arena_bytes));
        return base != nullptr;
    }
    void close() noexcept {
        if (base) system_allocator::deallocate(base, t->arena_bytes);
        base = nullptr;
    }
    char* acquire(std::uint32_t b) noexcept { return base + t->offset[b]; }
    void release(std::uint32_t, char*) noexcept {}
};

struct footprint {
    std::uint64_t reserved = 0; // peak of the allocator's statistic above its value before the run
    std::uint64_t resident = 0; // peak RSS above the RSS before the run (0 when VmHWM cannot be reset)
    double touch_ns = 0;        // writing the new blocks' pages in the last step (page faults)
    bool ok = true;
};

/// Three steps from a trimmed heap, each new block written once per page;
/// the statistic is sampled after every step's allocations (the step's peak).
template <class Replay>
footprint measure_footprint(Replay r, const trace& t) {
    constexpr int steps = 3;
    constexpr std::size_t page = 4096;
    footprint f;
    system_allocator::release_free_memory();
    const std::uint64_t reserved0 = system_allocator::reserved();
    const std::uint64_t rss0 = proc_status_bytes("VmRSS");
    const bool hwm = reset_peak_rss();
    std::uint64_t reserved_peak = reserved0;
    std::vector<char*> ptr(t.bytes.size(), nullptr);
    if (!r.open()) return {0, 0, 0, false};
    for (int k = 0; k < steps; ++k) {
        double touch = 0;
        for (std::size_t s = 0; s < t.alloc_at.size(); ++s) {
            for (auto b : t.alloc_at[s])
                if (!(ptr[b] = r.acquire(b))) f.ok = false;
            if (!f.ok) break;
            const auto t0 = std::chrono::steady_clock::now();
            for (auto b : t.alloc_at[s]) {
                for (std::size_t o = 0; o < t.bytes[b]; o += page) ptr[b][o] = 1;
                ptr[b][t.bytes[b] - 1] = 1;
            }
            touch += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
            reserved_peak = std::max(reserved_peak, system_allocator::reserved());
            for (auto b : t.free_at[s]) r.release(b, ptr[b]);
        }
        f.touch_ns = touch;
    }
    r.close();
    f.reserved = reserved_peak - reserved0;
    const std::uint64_t hwm_bytes = proc_status_bytes("VmHWM");
    f.resident = hwm && hwm_bytes > rss0 ? hwm_bytes - rss0 : 0;
    return f;
}

template <class Replay>
void run(benchmark::State& state, std::string_view model) {
    const trace* t = nullptr;
    try {
        t = &trace_of(model);
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    // The footprint is measured once per (model, allocator); the benchmark
    // function runs several times while Google Benchmark sizes its loop.
    static std::map<std::string, footprint, std::less<>> footprints;
    auto fp = footprints.find(model);
    if (fp == footprints.end()) fp = footprints.emplace(std::string(model), measure_footprint(Replay{t}, *t)).first;
    if (!fp->second.ok) {
        state.SkipWithError("allocation failed");
        return;
    }

    Replay r{t};
    if (!r.open()) {
        state.SkipWithError("arena allocation failed");
        return;
    }
    std::vector<char*> ptr(t->bytes.size(), nullptr);
    for (auto _ : state) {
        for (std::size_t s = 0; s < t->alloc_at.size(); ++s) {
            for (auto b : t->alloc_at[s]) ptr[b] = r.acquire(b);
            benchmark::DoNotOptimize(ptr.data());
            for (auto b : t->free_at[s]) r.release(b, ptr[b]);
        }
        benchmark::ClobberMemory();
    }
    r.close();

    const auto allocs = static_cast<double>(t->allocs);
    state.counters["allocs"] = allocs;
    state.counters["ns_per_alloc"] =
        benchmark::Counter(allocs, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    state.counters["touch_ms"] = fp->second.touch_ns * 1e-6;
    state.counters["peak_live"] = benchmark::Counter(static_cast<double>(t->peak_live), {}, benchmark::Counter::kIs1024);
    state.counters["peak_reserved"] =
        benchmark::Counter(static_cast<double>(fp->second.reserved), {}, benchmark::Counter::kIs1024);
    state.counters["peak_resident"] =
        benchmark::Counter(static_cast<double>(fp->second.resident), {}, benchmark::Counter::kIs1024);
    state.counters["arena_bytes"] =
        benchmark::Counter(static_cast<double>(t->arena_bytes), {}, benchmark::Counter::kIs1024);
    state.counters["persistent"] =
        benchmark::Counter(static_cast<double>(t->persistent_bytes), {}, benchmark::Counter::kIs1024);
}

void register_all() {
    for (auto model : zoo_names()) {
        const std::string prefix = "replay/" + std::string(model) + "/b" + std::to_string(batch_for(model)) + "/";
        benchmark::RegisterBenchmark((prefix + std::string(system_allocator::name)).c_str(),
                                     [model](benchmark::State& s) { run<malloc_replay>(s, model); })
            ->Unit(benchmark::kMicrosecond);
#if MEMPLAN_REPLAY_ALLOCATOR == MEMPLAN_REPLAY_GLIBC
        benchmark::RegisterBenchmark((prefix + "arena").c_str(),
                                     [model](benchmark::State& s) { run<arena_replay>(s, model); })
            ->Unit(benchmark::kMicrosecond);
#endif
    }
}

} // namespace

int main(int argc, char** argv) {
    // Our one flag goes before Google Benchmark sees the command line.
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a.starts_with("--batch=")) {
            char* end = nullptr;
            const unsigned long long b = std::strtoull(argv[i] + 8, &end, 10);
            if (b == 0 || *end != '\0') {
                std::cerr << "bench_alloc_replay: --batch needs a positive integer, got '" << a.substr(8) << "'\n";
                return 2;
            }
            batch_option = static_cast<std::size_t>(b);
        } else {
            argv[kept++] = argv[i];
        }
    }
    argc = kept;
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("allocator", std::string(system_allocator::name));
    benchmark::AddCustomContext("batch", batch_option == 0 ? "8 (U-Net 4, GPT-2 2)" : std::to_string(batch_option));
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
