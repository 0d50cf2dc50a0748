// The recomputation policies practitioners configure by hand against
// memplan's planner, on the zoo's decoder (docs/llm.md): for each policy its
// arena and overhead (the plan it makes, remat/policy.hpp), memplan's
// overhead at the policy's arena, and memplan's smallest arena at the
// policy's overhead (a bisection on the budget). Everything is priced by the
// same cost model and placed by the same allocator; every plan passes the
// validator.
//
// Usage: bench_llm_policies [--presets llama3-8b,llama3-70b] [--seqs 4096,8192] [--batch 1]
//                           [--seconds S] [--steps N] [--policies a,b] [--cost roofline:h100]
//   --seconds  time limit of each memplan plan (default 5)
//   --steps    bisection steps for the arena at a policy's overhead (default 5)
// Prints one markdown table per preset and sequence length. Overheads are
// against store-all with each op's fastest variant (the same as default here).
#include "args.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/io/cost_model.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/zoo/zoo.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace memplan;

double gib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

/// joint at `budget` within `seconds`, checked; throws when its plan is invalid.
remat_result memplan_at(const remat_context<graph>& ctx, std::uint64_t budget, double seconds) {
    remat_options o;
    o.budget = budget;
    o.time_limit = seconds;
    auto r = joint{}.checked(ctx, o);
    if (r.status == status::error) throw error("bench", "joint: " + r.message);
    return r;
}

} // namespace

int main(int argc, char** argv) try {
    std::vector<std::string> presets{"llama3-8b", "llama3-70b"};
    std::vector<std::string> seqs{"4096", "8192"};
    std::vector<std::string> policies;
    std::size_t batch = 1;
    double seconds = 5;
    int steps = 5;
    std::string cost = "roofline:h100";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw error("bench", "option " + a + " needs a value");
            return argv[++i];
        };
        if (a == "--presets") presets = bench::split_list(next());
        else if (a == "--seqs") seqs = bench::split_list(next());
        else if (a == "--policies") policies = bench::split_list(next());
        else if (a == "--batch") batch = std::stoul(next());
        else if (a == "--seconds") seconds = std::stod(next());
        else if (a == "--steps") steps = std::stoi(next());
        else if (a == "--cost") cost = next();
        else throw error("bench", "unknown option " + a);
    }
    std::vector<recompute_policy> chosen;
    if (policies.empty()) chosen = standard_recompute_policies();
    for (const auto& p : policies) chosen.push_back(parse_recompute_policy(p));

    for (const auto& preset : presets)
        for (const auto& seq : seqs) {
            zoo_options zo;
            zo.preset = preset;
            zo.batch = batch;
            zo.seq = std::stoul(seq);
            zo.cost = cost::make_cost_model(cost);
            const graph g = zoo_graph("llama", zo);
            const remat_context<graph> ctx(g);
            const auto store = ctx.store_all_placement(256).plan.arena_bytes;
            const auto need = ctx.min_memory().first;
            std::printf("\n%s, batch %zu x seq %s (%zu ops; %s; bf16, AdamW, fp32 master weights): store-all %.2f "
                        "GiB, any schedule needs %.2f GiB\n\n",
                        preset.c_str(), batch, seq.c_str(), g.num_ops(), cost.c_str(), gib(store), gib(need));
            std::printf("| policy | arena GiB | overhead | memplan at that arena | lower by | memplan arena at that "
                        "overhead | smaller by | seconds |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
            for (const auto& p : chosen) {
                const auto t0 = std::chrono::steady_clock::now();
                policy_planner planner;
                planner.policy = p;
                const auto pol = planner.checked(ctx, {});
                if (pol.status != status::feasible) throw error("bench", "policy " + p.name() + ": " + pol.message);
                if (!check_plan(g, pol.plan).ok()) throw error("bench", "policy " + p.name() + ": invalid plan");
                const double po = pol.overhead();
                const auto at = memplan_at(ctx, pol.arena(), seconds);
                // The smallest budget at which memplan's overhead is at most the policy's.
                std::uint64_t lo = need, hi = pol.arena(), best = has_solution(at.status) && at.overhead() <= po + 1e-12
                                                                       ? at.arena()
                                                                       : pol.arena();
                for (int s = 0; s < steps && lo + (1u << 20) < hi; ++s) {
                    const std::uint64_t mid = lo + (hi - lo) / 2;
                    const auto r = memplan_at(ctx, mid, seconds);
                    if (has_solution(r.status) && r.overhead() <= po + 1e-12) {
                        hi = mid;
                        best = std::min<std::uint64_t>(best, r.arena());
                    } else {
                        lo = mid;
                    }
                }
                const double secs =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                std::printf("| %s | %.2f | %+.2f %% | %+.2f %% | %.2f pt | %.2f GiB | %.2f GiB | %.0f |\n",
                            p.name().c_str(), gib(pol.arena()), 100 * po, 100 * at.overhead(),
                            100 * (po - at.overhead()), gib(best), gib(pol.arena() - best), secs);
                std::fflush(stdout);
            }
        }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench_llm_policies: %s\n", e.what());
    return 1;
}
