// The exact search on MiniMalloc's "challenging" benchmark (A-F and J, capacity
// 1,048,576): decision mode at that capacity, one run per instance. The
// counters say whether a valid placement was found and how tight it is.
#include <memplan/alloc/exact.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/io/offset_csv.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace {

void bm_exact(benchmark::State& state, const std::string& instance) {
    auto p = memplan::read_offset_csv(std::string(MEMPLAN_DATA_DIR) + "/minimalloc-challenging/" + instance +
                                      ".1048576.csv")
                 .problem;
    p.capacity = 1048576;
    memplan::exact policy;
    policy.time_limit = 60;
    memplan::alloc_result r;
    for (auto _ : state) r = policy.place(p);
    state.counters["height"] = static_cast<double>(r.size);
    state.counters["lower_bound"] = static_cast<double>(r.bound);
    state.counters["capacity"] = static_cast<double>(p.capacity);
    state.counters["buffers"] = static_cast<double>(p.items.size());
    const bool valid = memplan::check_placement(p, r.offsets, p.capacity).ok();
    state.counters["solved"] = memplan::has_solution(r.status) && valid && r.size <= p.capacity ? 1 : 0;
    state.counters["seconds"] = r.seconds;
}

} // namespace

BENCHMARK_CAPTURE(bm_exact, A, std::string("A"))->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_exact, B, std::string("B"))->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_exact, C, std::string("C"))->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_exact, D, std::string("D"))->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_exact, E, std::string("E"))->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_exact, F, std::string("F"))->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_exact, J, std::string("J"))->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
