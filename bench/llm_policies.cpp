// The recomputation policies practitioners configure by hand against
// memplan's planner, on the zoo's decoder (docs/llm.md): for each policy its
// arena and overhead (the plan it makes, remat/policy.hpp), memplan's
// overhead at the policy's arena, and memplan's smallest arena at the
// policy's overhead (a bisection on the budget). Everything is priced by the
// same cost model and placed by the same allocator; every plan passes the
// validator.
//
// Then, per preset, the largest batch x sequence that fits one GPU's memory
// (--fit-gib, default 80) under each policy and under memplan at no more
// than the policy's overhead, with the trained state sharded over the
// preset's data-parallel ranks (--fit-shards, ZeRO-3/FSDP as
// training_options::shard models it: Llama-3-8B's 112 GB of weights and
// AdamW state, 70B's 988 GB, fit no single GPU). The sizes tried: sequences
// 4096 to 32768, batches 1 to 16 (--fit-seqs, --fit-batches).
//
// Usage: bench_llm_policies [--presets llama3-8b,llama3-70b] [--seqs 4096,8192] [--batch 1]
//                           [--seconds S] [--steps N] [--policies a,b] [--cost roofline:h100]
//                           [--fit-gib 80] [--fit-shards 8,64] [--fit-seqs ...] [--fit-batches ...]
//                           [--no-fit] [--no-table]
//   --seconds  time limit of each memplan plan (default 5)
//   --steps    bisection steps for the arena at a policy's overhead (default 5)
// Prints one markdown table per preset and sequence length. Overheads are
// against store-all with each op's fastest variant (the same as default here).
#include "args.hpp"
#include "remat_run.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/io/cost_model.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/zoo/zoo.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace memplan;

using bench::gib;

/// joint at `budget` within `seconds`, checked; throws when its plan is invalid.
remat_result memplan_at(const remat_context<graph>& ctx, std::uint64_t budget, double seconds) {
    return bench::run_checked(joint{}, ctx, budget, seconds);
}

/// The largest batch x sequence within `gib` GiB per policy and per memplan
/// at no more than the policy's overhead, the state sharded `shard` ways.
void fit_table(const std::string& preset, std::size_t shard, double gib_limit, const std::vector<std::string>& seqs,
               const std::vector<std::string>& batches, const std::vector<recompute_policy>& policies,
               double seconds, const std::string& cost) {
    const auto limit = static_cast<std::uint64_t>(gib_limit * 1024 * 1024 * 1024);
    struct size_outcome {
        std::size_t batch, seq;
        std::vector<std::pair<bool, double>> policy; ///< fits, overhead
        bool memplan_found = false;
        double memplan_overhead = 0;
    };
    std::vector<size_outcome> sizes;
    std::printf("\n%s, trained state sharded over %zu ranks, one GPU of %.0f GiB:\n\n", preset.c_str(), shard,
                gib_limit);
    std::printf("| batch x seq | tokens | store-all GiB | any schedule GiB | memplan overhead at %.0f GiB | seconds |\n"
                "|---|---:|---:|---:|---:|---:|\n",
                gib_limit);
    for (const auto& seq : seqs)
        for (const auto& batch : batches) {
            zoo_options zo;
            zo.preset = preset;
            zo.batch = std::stoul(batch);
            zo.seq = std::stoul(seq);
            zo.shard = shard;
            zo.cost = cost::make_cost_model(cost);
            const graph g = zoo_graph("llama", zo);
            const remat_context<graph> ctx(g);
            size_outcome out{zo.batch, zo.seq, {}, false, 0};
            const auto need = ctx.min_memory().first;
            const auto store = ctx.store_all_placement(256).plan.arena_bytes;
            for (const auto& p : policies) {
                policy_planner planner;
                planner.policy = p;
                remat_options o;
                o.budget = limit;
                const auto r = planner.checked(ctx, o);
                if (r.status == status::error) throw error("bench", "policy " + p.name() + ": " + r.message);
                out.policy.push_back({has_solution(r.status) && r.arena() <= limit, r.overhead()});
            }
            const auto t0 = std::chrono::steady_clock::now();
            if (need <= limit) {
                const auto r = memplan_at(ctx, limit, seconds);
                out.memplan_found = has_solution(r.status) && r.arena() <= limit;
                out.memplan_overhead = r.overhead();
            }
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            char over[32] = "none";
            if (out.memplan_found) std::snprintf(over, sizeof over, "%+.2f %%", 100 * out.memplan_overhead);
            std::printf("| %zu x %zu | %zu | %.2f | %.2f | %s | %.1f |\n", out.batch, out.seq, out.batch * out.seq,
                        gib(store), gib(need), over, secs);
            std::fflush(stdout);
            sizes.push_back(std::move(out));
        }
    auto largest = [&](auto&& fits) {
        const size_outcome* best = nullptr;
        for (const auto& z : sizes)
            if (fits(z) && (!best || z.batch * z.seq > best->batch * best->seq ||
                            (z.batch * z.seq == best->batch * best->seq && z.seq > best->seq)))
                best = &z;
        if (!best) return std::string("none");
        return std::to_string(best->batch) + " x " + std::to_string(best->seq) + " (" +
               std::to_string(best->batch * best->seq) + ")";
    };
    std::printf("\n| policy | largest batch x seq (tokens) within %.0f GiB | memplan at <= the policy's overhead |\n"
                "|---|---:|---:|\n",
                gib_limit);
    for (std::size_t k = 0; k < policies.size(); ++k) {
        // memplan at the size must fit and cost no more than the policy there
        // (when the policy does not fit at that size, than the policy's
        // overhead at the largest size it fits).
        double at_most = -1;
        std::size_t tokens = 0;
        for (const auto& z : sizes)
            if (z.policy[k].first && z.batch * z.seq >= tokens) {
                tokens = z.batch * z.seq;
                at_most = z.policy[k].second;
            }
        const auto mine = largest([&](const size_outcome& z) {
            const double bar = z.policy[k].first ? z.policy[k].second : at_most;
            return z.memplan_found && bar >= 0 && z.memplan_overhead <= bar + 1e-12;
        });
        std::printf("| %s | %s | %s |\n", policies[k].name().c_str(),
                    largest([&](const size_outcome& z) { return z.policy[k].first; }).c_str(), mine.c_str());
    }
    std::fflush(stdout);
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
    double fit_gib = 80;
    std::vector<std::string> fit_shards{"8", "64"}, fit_seqs{"4096", "8192", "16384", "32768"},
        fit_batches{"1", "2", "4", "8", "16"};
    bool fit = true, table = true;
    bench::parse_options(argc, argv, [&](const std::string& a, auto&& next) {
        if (a == "--presets") presets = bench::split_list(next());
        else if (a == "--seqs") seqs = bench::split_list(next());
        else if (a == "--policies") policies = bench::split_list(next());
        else if (a == "--batch") batch = std::stoul(next());
        else if (a == "--seconds") seconds = std::stod(next());
        else if (a == "--steps") steps = std::stoi(next());
        else if (a == "--cost") cost = next();
        else if (a == "--fit-gib") fit_gib = std::stod(next());
        else if (a == "--fit-shards") fit_shards = bench::split_list(next());
        else if (a == "--fit-seqs") fit_seqs = bench::split_list(next());
        else if (a == "--fit-batches") fit_batches = bench::split_list(next());
        else if (a == "--no-fit") fit = false;
        else if (a == "--no-table") table = false;
        else return false;
        return true;
    });
    std::vector<recompute_policy> chosen;
    if (policies.empty()) chosen = standard_recompute_policies();
    for (const auto& p : policies) chosen.push_back(parse_recompute_policy(p));

    for (const auto& preset : presets)
        for (const auto& seq : table ? seqs : std::vector<std::string>{}) {
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
    if (fit)
        for (std::size_t k = 0; k < presets.size(); ++k)
            fit_table(presets[k], std::stoul(fit_shards.at(std::min(k, fit_shards.size() - 1))), fit_gib, fit_seqs,
                      fit_batches, chosen, seconds, cost);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench_llm_policies: %s\n", e.what());
    return 1;
}
