// The exact search on instances it has never seen: generated offset problems
// with a known perfect packing at height H = 1,048,576 (so capacity = H = the
// load bound is feasible), in families shaped like MiniMalloc's challenging
// set. Each family: N seeded instances, decision mode at capacity H, counters
// for how many were solved and how fast, next to the best heuristic's H/LB.
//
// Every instance is a tiling of the rectangle [0, H) bytes x [0, T) time by
// rectangles, each rectangle one buffer; "holes" then delete rectangles that
// miss one chosen time t*, so the load at t* stays H and the bound stays
// tight while the rest gets the slack MiniMalloc's instances have.
//
// Extra flags (before Google Benchmark's own): --instances=N (default 8),
// --limit=SECONDS (default 5), --verbose (one line per instance),
// --dump=DIR (each unsolved instance as DIR/<family>-<seed>.1048576.csv, the
// known packing in its offset column). The default run stays under about
// five minutes even when every instance times out; the full study is
// --instances=20 --limit=10.
#include "../tests/support/perfect_packing.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/exact.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/io/offset_csv.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace memplan;
using namespace memplan::testing::packing;

// ---- generators --------------------------------------------------------------

const std::vector<family>& families() {
    static const std::vector<family> all = {
        {"guillotine", "random guillotine cuts, perfect tiling", 150, 300,
         [](rng& r) { return guillotine(r, r.uniform(150, 300), 1024); }},
        {"guillotine_holes", "guillotine, 25% of the tiles off t* deleted", 120, 300,
         [](rng& r) {
             auto rs = guillotine(r, r.uniform(170, 380), 1024);
             punch_holes(r, rs, 0.25, 1024);
             return rs;
         }},
        {"strips", "10-24 byte stripes cut in time, same-lifetime neighbours merged", 120, 350,
         [](rng& r) { return strips(r, r.uniform(10, 24), r.uniform(14, 36), 1024); }},
        {"strips_holes", "strips, 20% of the tiles off t* deleted", 120, 350,
         [](rng& r) {
             auto rs = strips(r, r.uniform(10, 24), r.uniform(18, 40), 1024);
             punch_holes(r, rs, 0.2, 1024);
             return rs;
         }},
        {"skyline", "gravity tiling, sizes 4-384 KiB, lifetimes 16-1024 steps", 100, 400,
         [](rng& r) { return skyline(r, {{{1, 4, 384, 16, 1024}}}, 1024); }},
        {"minimalloc_like", "skyline mix: 4% huge long-lived, 30% thin long, mid rest; 10% holes", 150, 320,
         [](rng& r) {
             auto rs = skyline(r, {{{0.04, 200, 700, 500, 1024}, {0.3, 2, 24, 200, 1024}, {0.66, 16, 200, 16, 400}}},
                               1024);
             punch_holes(r, rs, 0.1, 1024);
             return rs;
         }},
        {"short_lived", "F-like: sizes 32-108 KiB, lifetimes 17-56 steps, 30% holes", 150, 400,
         [](rng& r) {
             auto rs = skyline(r, {{{1, 32, 108, 17, 56}}}, 640);
             punch_holes(r, rs, 0.3, 640);
             return rs;
         }},
    };
    return all;
}

// ---- the run -------------------------------------------------------------------

struct options {
    std::size_t instances = 8;
    double limit = 5;
    bool verbose = false;
    std::string dump; // folder for unsolved instances; empty: none
};
options opts;

struct family_summary {
    std::string name, what;
    std::size_t count = 0, solved = 0, infeasible = 0, timed_out = 0, invalid = 0, bad_generator = 0;
    std::size_t min_buffers = 0, max_buffers = 0;
    std::vector<double> seconds; // solved instances only
    double heur_sum = 0, heur_max = 0;
    std::size_t heur_at_lb = 0;
    std::vector<std::string> unsolved; // "seed (status)"
};
std::vector<family_summary> summaries;

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void bm_family(benchmark::State& state, std::size_t which) {
    const family& f = families()[which];
    family_summary sum;
    sum.name = f.name;
    sum.what = f.what;
    for (auto _ : state) {
        for (std::uint64_t seed = 0; seed < opts.instances; ++seed) {
            const instance in = generate(f, seed);
            const alloc_problem& p = in.problem;
            const std::uint64_t cap = p.capacity;
            ++sum.count;
            sum.min_buffers = sum.count == 1 ? p.items.size() : std::min(sum.min_buffers, p.items.size());
            sum.max_buffers = std::max(sum.max_buffers, p.items.size());
            // The generator's own promise: the witness fits and the bound is H.
            if (!check_placement(p, in.witness, p.capacity).ok() || lower_bound(p) != cap) ++sum.bad_generator;

            const auto h = best_heuristic{}.place(p);
            const double ratio = h.ratio();
            sum.heur_sum += ratio;
            sum.heur_max = std::max(sum.heur_max, ratio);
            sum.heur_at_lb += h.size == h.bound;

            exact policy;
            policy.time_limit = opts.limit;
            const auto r = policy.place(p);
            const bool valid = has_solution(r.status) && check_placement(p, r.offsets, p.capacity).ok() &&
                               r.size <= cap;
            if (valid) {
                ++sum.solved;
                sum.seconds.push_back(r.seconds);
            } else {
                if (r.status == status::infeasible) ++sum.infeasible; // a bug: a packing is known
                else if (r.status == status::no_solution) ++sum.timed_out;
                else ++sum.invalid;
                sum.unsolved.push_back(std::to_string(seed) + " (" + std::string(to_string(r.status)) + ")");
                if (!opts.dump.empty()) {
                    offset_csv csv;
                    csv.problem = p;
                    for (std::size_t i = 0; i < p.items.size(); ++i) csv.ids.push_back(std::to_string(i));
                    write_offset_csv(opts.dump + "/" + f.name + "-" + std::to_string(seed) + ".1048576.csv", csv,
                                     in.witness);
                }
            }
            if (opts.verbose)
                std::printf("%-17s seed %2llu  buffers %3zu  exact %-11s %8.3f s  heuristic %.4f x LB\n", f.name,
                            static_cast<unsigned long long>(seed), p.items.size(),
                            std::string(to_string(r.status)).c_str(), r.seconds, ratio);
        }
    }
    const auto n = static_cast<double>(std::max<std::size_t>(sum.count, 1));
    state.counters["instances"] = static_cast<double>(sum.count);
    state.counters["solved"] = static_cast<double>(sum.solved);
    state.counters["infeasible"] = static_cast<double>(sum.infeasible);
    state.counters["timed_out"] = static_cast<double>(sum.timed_out);
    state.counters["median_s"] = median(sum.seconds);
    state.counters["max_s"] = sum.seconds.empty() ? 0 : *std::max_element(sum.seconds.begin(), sum.seconds.end());
    state.counters["heur_ratio_mean"] = sum.heur_sum / n;
    state.counters["heur_ratio_max"] = sum.heur_max;
    summaries.push_back(std::move(sum));
}

void print_table() {
    std::printf("\nexact (decision at capacity = H = LB = 1,048,576, limit %.0f s) on generated instances\n", opts.limit);
    std::printf("%-17s %5s %9s %7s %6s %7s %9s %9s %9s %9s %6s\n", "family", "inst", "buffers", "solved", "infeas",
                "timeout", "median_s", "max_s", "heur_mean", "heur_max", "heurLB");
    std::size_t total = 0, solved = 0;
    for (const auto& s : summaries) {
        total += s.count;
        solved += s.solved;
        const std::string range = std::to_string(s.min_buffers) + "-" + std::to_string(s.max_buffers);
        std::printf("%-17s %5zu %9s %7zu %6zu %7zu %9.4f %9.4f %9.4f %9.4f %6zu\n", s.name.c_str(), s.count,
                    range.c_str(), s.solved, s.infeasible, s.timed_out, median(s.seconds),
                    s.seconds.empty() ? 0.0 : *std::max_element(s.seconds.begin(), s.seconds.end()),
                    s.heur_sum / static_cast<double>(std::max<std::size_t>(s.count, 1)), s.heur_max, s.heur_at_lb);
    }
    std::printf("total: %zu of %zu solved\n", solved, total);
    for (const auto& s : summaries) {
        if (s.bad_generator) std::printf("GENERATOR BUG in %s: %zu witnesses fail\n", s.name.c_str(), s.bad_generator);
        if (s.invalid) std::printf("INVALID results in %s: %zu\n", s.name.c_str(), s.invalid);
        if (!s.unsolved.empty()) {
            std::printf("unsolved %s seeds:", s.name.c_str());
            for (const auto& u : s.unsolved) std::printf(" %s", u.c_str());
            std::printf("\n");
        }
    }
    std::printf("families:\n");
    for (const auto& s : summaries) std::printf("  %-17s %s\n", s.name.c_str(), s.what.c_str());
}

} // namespace

int main(int argc, char** argv) {
    // Our flags first; the rest goes to Google Benchmark.
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--instances=", 12) == 0) opts.instances = std::strtoull(argv[i] + 12, nullptr, 10);
        else if (std::strncmp(argv[i], "--limit=", 8) == 0) opts.limit = std::strtod(argv[i] + 8, nullptr);
        else if (std::strcmp(argv[i], "--verbose") == 0) opts.verbose = true;
        else if (std::strncmp(argv[i], "--dump=", 7) == 0) opts.dump = argv[i] + 7;
        else rest.push_back(argv[i]);
    }
    for (std::size_t k = 0; k < families().size(); ++k)
        benchmark::RegisterBenchmark(families()[k].name, bm_family, k)->Iterations(1)->Unit(benchmark::kSecond);
    int n = static_cast<int>(rest.size());
    benchmark::Initialize(&n, rest.data());
    if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    print_table();
    return 0;
}
