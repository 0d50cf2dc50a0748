// How fast memplan plans a large language model's training step: the zoo's
// Llama presets (docs/llm.md) with the default planner (`auto`, what
// `memplan plan --budget` runs). For each preset:
//
//  - the Pareto curve `memplan pareto --time-limit 30` makes (8 points, from
//    the smallest budget the planner meets to store-all), and the time it took;
//  - at each of the curve's budgets, and at two budgets between the curve's
//    lowest and what any schedule needs: a run limited to 0.95 s (so that
//    with the validator it ends within 1 s), a run limited to 5 s and one
//    limited to 60 s, each with its overhead and the seconds it used (the
//    planner stops early once its search has converged, remat/joint.hpp).
//
// Every plan passes the validator (remat_planner::checked). Overheads are
// against store-all with each op's fastest variant.
//
// Usage: bench_llm_plan_time [--presets llama3-8b,llama3-70b] [--seq 4096] [--batch 1]
//                            [--pareto-seconds 30] [--first-seconds 0.95] [--long-seconds 60]
//                            [--cost roofline:h100]
#include "args.hpp"
#include "remat_run.hpp"

#include <memplan/io/cost_model.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/portfolio.hpp>
#include <memplan/zoo/zoo.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace memplan;

using bench::gib;

remat_result run_auto(const remat_context<graph>& ctx, std::uint64_t budget, double seconds) {
    return bench::run_checked(auto_remat{}, ctx, budget, seconds);
}

std::string overhead_of(const remat_result& r) {
    if (!has_solution(r.status) || r.arena() > r.budget) return "none";
    char b[32];
    std::snprintf(b, sizeof b, "%+.2f %%", 100 * r.overhead());
    return b;
}

} // namespace

int main(int argc, char** argv) try {
    std::vector<std::string> presets{"llama3-8b", "llama3-70b"};
    std::size_t seq = 4096, batch = 1;
    double pareto_seconds = 30, first_seconds = 0.95, long_seconds = 60;
    std::string cost = "roofline:h100";
    bench::parse_options(argc, argv, [&](const std::string& a, auto&& next) {
        if (a == "--presets") presets = bench::split_list(next());
        else if (a == "--seq") seq = std::stoul(next());
        else if (a == "--batch") batch = std::stoul(next());
        else if (a == "--pareto-seconds") pareto_seconds = std::stod(next());
        else if (a == "--long-seconds") long_seconds = std::stod(next());
        else if (a == "--first-seconds") first_seconds = std::stod(next());
        else if (a == "--cost") cost = next();
        else return false;
        return true;
    });
    for (const auto& preset : presets) {
        zoo_options zo;
        zo.preset = preset;
        zo.batch = batch;
        zo.seq = seq;
        zo.cost = cost::make_cost_model(cost);
        const graph g = zoo_graph("llama", zo);
        const remat_context<graph> ctx(g);
        const auto store = ctx.store_all_placement(256).plan.arena_bytes;
        const auto need = ctx.min_memory().first;
        std::printf("\n%s, batch %zu x seq %zu (%zu ops; %s): store-all %.2f GiB, any schedule needs %.2f GiB\n\n",
                    preset.c_str(), batch, seq, g.num_ops(), cost.c_str(), gib(store), gib(need));

        // The curve, as `memplan pareto --time-limit S` makes it.
        const stopwatch sweep_watch;
        const auto until = deadline::after(pareto_seconds);
        pareto_options po;
        po.points = 8;
        po.deadline = until;
        po.store_all_time_limit = pareto_seconds;
        const std::size_t most_runs = po.max_bisection_steps + po.points;
        std::size_t runs = 0;
        const auto curve = pareto_sweep(ctx, [&](std::uint64_t budget) {
            const std::size_t left = most_runs > runs ? most_runs - runs : 1;
            ++runs;
            remat_options o;
            o.budget = budget;
            o.time_limit = until.share(1.0 / static_cast<double>(left));
            auto r = auto_remat{}.checked(ctx, o);
            if (r.status == status::error) throw error("bench", "auto: " + r.message);
            return r;
        }, po);
        const double sweep_seconds = sweep_watch.seconds();
        std::printf("Pareto curve (8 points, --time-limit %.0f): %.1f s, %zu planner runs\n\n", pareto_seconds,
                    sweep_seconds, runs);
        std::printf("| budget GiB | curve | %.2f s run (used) | 5 s run (used) | %.0f s run (used) | 5 s - %.0f s |\n"
                    "|---:|---:|---:|---:|---:|---:|\n",
                    first_seconds, long_seconds, long_seconds);
        // Below the curve: two budgets between its lowest and what any schedule needs.
        std::vector<std::pair<std::uint64_t, std::string>> rows;
        const auto lowest = curve.front().budget;
        for (double f : {0.5, 0.9})
            if (lowest > need) rows.push_back({need + static_cast<std::uint64_t>(f * double(lowest - need)), "-"});
        for (const auto& p : curve) rows.push_back({p.budget, overhead_of(p.result)});
        for (const auto& [budget, on_curve] : rows) {
            const auto one = run_auto(ctx, budget, first_seconds);
            const auto five = run_auto(ctx, budget, 5);
            const auto slow = run_auto(ctx, budget, long_seconds);
            const bool both = overhead_of(five) != "none" && overhead_of(slow) != "none";
            char diff[32] = "-";
            if (both) std::snprintf(diff, sizeof diff, "%.2f pt", 100 * (five.overhead() - slow.overhead()));
            std::printf("| %.2f | %s | %s (%.2f s) | %s (%.1f s) | %s (%.1f s) | %s |\n", gib(budget), on_curve.c_str(),
                        overhead_of(one).c_str(), one.seconds, overhead_of(five).c_str(), five.seconds,
                        overhead_of(slow).c_str(), slow.seconds, diff);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench_llm_plan_time: %s\n", e.what());
    return 1;
}
