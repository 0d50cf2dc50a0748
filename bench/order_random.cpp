// Ordering planners on random training-like graphs (no solver): the greedy
// list scheduler against the listed order, from 100 to 10,000 ops. Counters:
// ops, the peaks, greedy / listed, and greedy / the order-independent bound.
#include "../tests/support/order_brute_force.hpp"

#include <memplan/schedule/order/default_order.hpp>
#include <memplan/schedule/order/greedy_order.hpp>

#include <benchmark/benchmark.h>

#include <random>

namespace {

memplan::graph workload(std::size_t forward, bool dag) {
    std::mt19937_64 rng(forward);
    return dag ? memplan::testing::random_order_dag(rng, forward) : memplan::testing::random_training_dag(rng, forward);
}

void run(benchmark::State& state, bool dag, std::size_t lookahead) {
    const auto g = workload(static_cast<std::size_t>(state.range(0)), dag);
    memplan::greedy_order p;
    p.lookahead = lookahead;
    memplan::order_result<memplan::graph> r;
    for (auto _ : state) {
        r = p.order(g);
        benchmark::DoNotOptimize(r.size);
    }
    const auto listed = memplan::default_order{}.order(g);
    state.counters["ops"] = static_cast<double>(g.num_ops());
    state.counters["peak_listed"] = static_cast<double>(listed.size);
    state.counters["peak_greedy"] = static_cast<double>(r.size);
    state.counters["greedy_over_listed"] = static_cast<double>(r.size) / static_cast<double>(listed.size);
    state.counters["greedy_over_bound"] = static_cast<double>(r.size) / static_cast<double>(r.bound);
}

void training(benchmark::State& state) { run(state, false, 3); }
void training_no_lookahead(benchmark::State& state) { run(state, false, 0); }
void dag(benchmark::State& state) { run(state, true, 3); }

} // namespace

BENCHMARK(training)->Arg(33)->Arg(330)->Arg(3900)->Unit(benchmark::kMillisecond);
BENCHMARK(training_no_lookahead)->Arg(33)->Arg(330)->Arg(3900)->Unit(benchmark::kMillisecond);
BENCHMARK(dag)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
