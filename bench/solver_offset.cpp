// Offset assignment, exact methods: the MILP on GLPK and on CBC against
// memplan's own exact search, on random instances of 20, 40 and 80 buffers
// (fixed seeds, 10 s limit each). Counters: status (0 optimal,
// 1 feasible, 2 infeasible, 3 unbounded, 4 no_solution, 5 error), objective
// (arena bytes), bound (proven lower bound), gap, seconds, lb (load bound),
// warm (the warm start's height), nodes.
#include <memplan/alloc/exact.hpp>
#include <memplan/alloc/milp.hpp>
#include <memplan/solver/glpk.hpp>
#ifdef MEMPLAN_HAS_CBC
#include <memplan/solver/cbc.hpp>
#endif

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

namespace {

// Buffers of 16 B .. 1 KiB (multiples of 16) living 1..n steps out of ~3n.
memplan::alloc_problem random_instance(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::uint64_t> begin(0, 2 * n), length(1, n), size(1, 64);
    memplan::alloc_problem p;
    for (std::size_t i = 0; i < n; ++i) {
        const auto b = begin(rng);
        p.items.push_back({size(rng) * 16, b, b + length(rng)});
    }
    return p;
}

template <class Solver>
void offset_milp(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto p = random_instance(n, 1000 + n);
    memplan::milp_allocator<Solver> alloc;
    alloc.options.time_limit = 10;
    memplan::milp_alloc_outcome<std::uint64_t> r;
    for (auto _ : state) {
        r = alloc.solve(p);
        benchmark::DoNotOptimize(r.size);
    }
    state.counters["status"] = static_cast<double>(static_cast<int>(r.status));
    state.counters["objective"] = static_cast<double>(r.size);
    state.counters["bound"] = static_cast<double>(r.proven_bound);
    state.counters["gap"] = r.gap();
    state.counters["seconds"] = r.seconds;
    state.counters["lb"] = static_cast<double>(r.bound);
    state.counters["warm"] = static_cast<double>(
        memplan::placement_height(p, memplan::detail::first_fit_by_size(p)));
    state.counters["nodes"] = static_cast<double>(r.nodes);
}

// The exact search on the same instances: its `lower_bound` is the proven
// bound (the load bound, or more when the search refuted it).
void offset_exact(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto p = random_instance(n, 1000 + n);
    memplan::exact alloc;
    alloc.time_limit = 10;
    memplan::alloc_result r;
    for (auto _ : state) {
        r = alloc.place(p);
        benchmark::DoNotOptimize(r.size);
    }
    state.counters["status"] = static_cast<double>(static_cast<int>(r.status));
    state.counters["objective"] = static_cast<double>(r.size);
    state.counters["bound"] = static_cast<double>(r.bound);
    state.counters["gap"] = r.size == 0 ? 0.0
                                          : static_cast<double>(r.size - std::min(r.size, r.bound)) /
                                                static_cast<double>(r.size);
    state.counters["seconds"] = r.seconds;
    state.counters["lb"] = static_cast<double>(memplan::lower_bound(p));
}

} // namespace

BENCHMARK(offset_exact)->Arg(20)->Arg(40)->Arg(80)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(offset_milp<memplan::glpk_solver>)->Arg(20)->Arg(40)->Arg(80)->Iterations(1)->Unit(benchmark::kSecond);
#ifdef MEMPLAN_HAS_CBC
BENCHMARK(offset_milp<memplan::cbc_solver>)->Arg(20)->Arg(40)->Arg(80)->Iterations(1)->Unit(benchmark::kSecond);
#endif

BENCHMARK_MAIN();
