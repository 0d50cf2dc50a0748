// Rematerialization against MONeT's published operating points (Shah et al.,
// ICLR 2021): for each of its five models at its batch size, the
// store-all arena, the budget = store-all / MONeT's memory factor, and for
// every planner select.hpp offers (plus Checkmate on GLPK once
// `plan_remat_with` exists): status, arena, overhead, time, whether it
// beats MONeT (fits the budget at a lower overhead than MONeT's), and the
// proven bound on the overhead of any plan of the space with the gap.
// A second table compares memory at equal overhead (5/10/15 %) from Pareto
// sweeps of joint, checkmate, sqrt_n and chen_greedy, whichever exist.
//
// Where the factor asks for less than any schedule needs (VGG-16), a third
// table bisects for the smallest budget the first planner fits, with its
// overhead and proven gap.
//
// Usage: bench_solver_remat_monet [--models a,b] [--planners x,y] [--time-limit S]
//                                 [--sweep-time-limit S] [--points N] [--levels 5,10,15] [--no-sweep]
//                                 [--smallest-steps N]
// Prints markdown tables. Every plan is checked with check_plan; an invalid
// one ends the program with exit 1.
#include "args.hpp"
#include "bound.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/solver/glpk.hpp>
#include <memplan/zoo/zoo.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct monet_point {
    std::string_view model;
    std::string_view label;
    double factor;       ///< store-all memory / MONeT's memory
    double max_overhead; ///< MONeT's overhead at that memory, as a fraction
};

// MONeT (Shah et al., ICLR 2021), its results table: PyTorch vs MONeT memory and MONeT's GPU-time overhead.
constexpr monet_point monet_points[] = {
    {"resnet50", "ResNet-50 (184)", 3.02, 0.1195},     {"googlenet", "GoogLeNet (320)", 2.99, 0.1577},
    {"unet", "U-Net (11, 416x608)", 2.86, 0.1151},     {"mobilenet_v2", "MobileNet-V2 (272)", 2.89, 0.0872},
    {"vgg16", "VGG-16 (176)", 2.56, 0.0911},
};

double gib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

/// Runs the planner called `name`; those that need a solver run on GLPK.
memplan::remat_result run_planner(std::string_view name, const memplan::graph& g, const memplan::remat_options& o) {
    return memplan::plan_remat(name, g, o, memplan::glpk_solver::name);
}

std::vector<std::string> available_planners() {
    std::vector<std::string> v;
    for (auto n : memplan::remat_names()) v.emplace_back(n);
    return v;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

} // namespace

int main(int argc, char** argv) {
    double time_limit = 60;
    double sweep_time_limit = 10;
    std::size_t points = 6;
    bool sweep = true;
    std::size_t smallest_steps = 8;
    std::vector<double> levels{0.05, 0.10, 0.15};
    std::vector<std::string> models;
    for (const auto& p : monet_points) models.emplace_back(p.model);
    const auto available = available_planners();
    std::vector<std::string> planners = available;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const bool has_value = i + 1 < argc;
            if (a == "--time-limit" && has_value) time_limit = std::stod(argv[++i]);
            else if (a == "--sweep-time-limit" && has_value) sweep_time_limit = std::stod(argv[++i]);
            else if (a == "--points" && has_value) points = std::stoul(argv[++i]);
            else if (a == "--smallest-steps" && has_value) smallest_steps = std::stoul(argv[++i]);
            else if (a == "--models" && has_value) models = memplan::bench::split_list(argv[++i]);
            else if (a == "--planners" && has_value) planners = memplan::bench::split_list(argv[++i]);
            else if (a == "--levels" && has_value) {
                levels.clear();
                for (const auto& l : memplan::bench::split_list(argv[++i])) levels.push_back(std::stod(l) / 100.0);
            } else if (a == "--no-sweep") sweep = false;
            else throw std::invalid_argument(a);
        }
    } catch (const std::exception&) {
        std::fprintf(stderr,
                     "usage: %s [--models a,b] [--planners x,y] [--time-limit S] [--sweep-time-limit S] [--points N]\n"
                     "          [--levels 5,10,15] [--no-sweep] [--smallest-steps N]\n",
                     argv[0]);
        return 2;
    }
    for (const auto& m : models)
        if (std::none_of(std::begin(monet_points), std::end(monet_points), [&](auto& p) { return p.model == m; })) {
            std::fprintf(stderr, "unknown model '%s' (MONeT's: resnet50, googlenet, unet, mobilenet_v2, vgg16)\n",
                         m.c_str());
            return 2;
        }
    try {
        for (const auto& p : planners) memplan::find_remat_planner(p); // one message for an unknown name
    } catch (const memplan::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    }

    std::printf("## Rematerialization at MONeT's memory budgets\n\n"
                "budget = store-all arena / MONeT's memory factor; overhead = cost / (cost of store-all with every "
                "op's fastest variant) - 1, as MONeT measures it; time limit %.0f s per plan.\n\"beats\" = fits the "
                "budget at an overhead below MONeT's. \"bound\" = the schedule-free lower bound (no schedule fits "
                "less). \"vs default variants\" = cost / (cost of store-all with the default variants) - 1 (negative "
                "when the defaults are not the fastest: implicit-GEMM convolutions). \"proven\" = no plan of the "
                "space (MONeT's stages, any variants) within the budget has a lower overhead (remat/bound.hpp, "
                "computed after the plan, at most %.0f s); gap = overhead - proven.\n\n",
                time_limit, time_limit);
    std::printf("| model | store-all | factor | budget | bound | planner | status | arena | memory factor | overhead | "
                "vs default variants | MONeT | time s | beats MONeT | proven | gap | bound s |\n");
    std::printf("|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");
    std::fflush(stdout);

    struct model_data {
        const monet_point* monet;
        memplan::graph g;
        std::uint64_t store_all = 0;
    };
    std::vector<model_data> data;
    for (const auto& m : models) {
        const auto* mp = &*std::find_if(std::begin(monet_points), std::end(monet_points),
                                        [&](auto& p) { return p.model == m; });
        auto g = memplan::zoo_graph(m); // MONeT's batch sizes are the zoo defaults
        const memplan::remat_context<memplan::graph> ctx(g);
        const auto [bound, bound_op] = ctx.min_memory();
        memplan::remat_options top;
        top.time_limit = time_limit;
        const auto base = memplan::store_all{}.plan(ctx, top);
        if (!memplan::has_solution(base.status)) {
            std::printf("| %s | store-all failed: %s |\n", mp->label.data(), base.message.c_str());
            return 1;
        }
        const std::uint64_t store_all = base.arena();
        const auto budget = static_cast<std::uint64_t>(static_cast<double>(store_all) / mp->factor);
        for (const auto& name : planners) {
            memplan::remat_options o;
            o.budget = budget;
            o.time_limit = time_limit;
            const auto t0 = std::chrono::steady_clock::now();
            auto r = run_planner(name, g, o);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const auto b0 = std::chrono::steady_clock::now();
            memplan::bench::attach_bound(g, r, time_limit);
            const double bound_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
            const bool has = memplan::has_solution(r.status);
            if (has && !memplan::check_plan(g, r.plan).ok()) {
                std::printf("| %s | %s | INVALID PLAN |\n", mp->label.data(), name.c_str());
                return 1;
            }
            const bool fits = has && r.arena() <= budget;
            std::string verdict;
            if (budget < bound) verdict = "no: below the bound (provably infeasible)";
            else if (!fits) verdict = "no: does not fit";
            else if (r.overhead() < mp->max_overhead) verdict = "**yes**";
            else verdict = "no: overhead";
            const std::string who = r.planner.empty() || r.planner == name ? name : name + " (" + r.planner + ")";
            const std::string proven = r.status == memplan::status::infeasible ? "proof" : memplan::bench::bound_cell(r);
            const std::string gap = fits && r.bound_proven ? fmt("%.2f", 100 * r.gap()) : "-";
            std::printf("| %s | %.2f GiB | %.2f | %.2f GiB | %.2f GiB | %s | %s | %s | %s | %s | %s | %.2f %% | %.1f | %s "
                        "| %s | %s | %.1f |\n",
                        mp->label.data(), gib(store_all), mp->factor, gib(budget), gib(bound), who.c_str(),
                        std::string(memplan::to_string(r.status)).c_str(),
                        has ? fmt("%.2f GiB", gib(r.arena())).c_str() : "-",
                        has ? fmt("%.2fx", static_cast<double>(store_all) / static_cast<double>(r.arena())).c_str()
                            : "-",
                        has ? fmt("%+.2f %%", 100 * r.overhead()).c_str() : "-",
                        has ? fmt("%+.2f %%", 100 * r.default_variant_overhead()).c_str() : "-", 100 * mp->max_overhead, secs,
                        verdict.c_str(), proven.c_str(), gap.c_str(), bound_secs);
            std::fflush(stdout);
        }
        data.push_back({mp, std::move(g), store_all});
    }

    // --- below the bound: the smallest budget a plan reaches ------------------
    // Where MONeT's factor asks for less than any schedule needs (VGG-16), the
    // question becomes how close to that bound a plan gets: bisection on the
    // budget between the bound and the store-all arena, first planner.
    bool header = false;
    for (const auto& d : data) {
        const memplan::remat_context<memplan::graph> ctx(d.g);
        const auto bound = ctx.min_memory().first;
        const auto budget = static_cast<std::uint64_t>(static_cast<double>(d.store_all) / d.monet->factor);
        if (budget >= bound) continue;
        if (!header) {
            std::printf("\n## Below the bound: the smallest budget with a plan\n\n"
                        "bisection on the budget between the schedule-free bound (no plan can be smaller) and the "
                        "store-all arena, %zu steps of %.0f s, planner %s\n\n"
                        "| model | bound | smallest budget with a plan | x bound | overhead | proven | gap | largest "
                        "budget without one |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
                        smallest_steps, time_limit, planners.front().c_str());
            header = true;
        }
        memplan::remat_result best;
        bool have = false;
        auto attempt = [&](std::uint64_t b) {
            memplan::remat_options o;
            o.budget = b;
            o.time_limit = time_limit;
            auto r = run_planner(planners.front(), d.g, o);
            if (!memplan::has_solution(r.status) || r.arena() > b) return false;
            if (!memplan::check_plan(d.g, r.plan).ok()) {
                std::printf("| %s | INVALID PLAN |\n", d.monet->label.data());
                std::exit(1);
            }
            best = std::move(r);
            have = true;
            return true;
        };
        // a plan at store-all, none known at the bound
        const auto [lo, hi] = memplan::smallest_fitting(bound, d.store_all, 1, smallest_steps, {}, attempt);
        if (!have) attempt(hi);
        if (have) memplan::bench::attach_bound(d.g, best, time_limit);
        std::printf("| %s | %.3f GiB | %s | %s | %s | %s | %s | %s |\n", d.monet->label.data(), gib(bound),
                    have ? fmt("%.3f GiB", gib(best.arena())).c_str() : "-",
                    have ? fmt("%.4f", static_cast<double>(best.arena()) / static_cast<double>(bound)).c_str() : "-",
                    have ? fmt("%+.2f %%", 100 * best.overhead()).c_str() : "-",
                    have ? memplan::bench::bound_cell(best).c_str() : "-",
                    have && best.bound_proven ? fmt("%.2f", 100 * best.gap()).c_str() : "-",
                    hi == lo ? "-" : fmt("%.3f GiB", gib(lo)).c_str());
        std::fflush(stdout);
    }

    // --- memory at equal overhead, from Pareto sweeps -------------------------
    if (!sweep) return 0;
    std::vector<std::string> compared;
    for (const char* n : {"joint", "checkmate", "sqrt_n", "chen_greedy"})
        if (std::find(planners.begin(), planners.end(), n) != planners.end()) compared.emplace_back(n);
    std::printf("\n## Memory at equal overhead\n\n");
    if (compared.empty()) {
        std::printf("No planner to compare yet (needs joint, checkmate, sqrt_n or chen_greedy among: ");
        for (std::size_t i = 0; i < planners.size(); ++i) std::printf("%s%s", i ? ", " : "", planners[i].c_str());
        std::printf(").\n");
        return 0;
    }
    const std::string& reference = compared.front();
    std::printf("Smallest arena (GiB) whose overhead is at most the level, from a %zu-point Pareto sweep per planner "
                "(%.0f s per run); ratio = planner / %s (MONeT reports 1.2-1.8x less memory than Checkmate at equal "
                "compute).\n\n",
                points, sweep_time_limit, reference.c_str());
    std::printf("| model | overhead <= |");
    for (const auto& n : compared) std::printf(" %s |", n.c_str());
    for (std::size_t i = 1; i < compared.size(); ++i) std::printf(" %s / %s |", compared[i].c_str(), reference.c_str());
    std::printf(" sweep s |\n|---|---:|");
    for (std::size_t i = 0; i < 2 * compared.size() - 1; ++i) std::printf("---:|");
    std::printf("---:|\n");
    std::fflush(stdout);
    for (const auto& d : data) {
        std::map<std::string, std::vector<memplan::pareto_point>> curves;
        double sweep_secs = 0;
        for (const auto& name : compared) {
            memplan::pareto_options po;
            po.points = std::max<std::size_t>(points, 2);
            po.store_all_time_limit = sweep_time_limit;
            const auto t0 = std::chrono::steady_clock::now();
            curves[name] = memplan::pareto_sweep(
                d.g,
                [&](std::uint64_t budget) {
                    memplan::remat_options o;
                    o.budget = budget;
                    o.time_limit = sweep_time_limit;
                    return run_planner(name, d.g, o);
                },
                po);
            sweep_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            for (const auto& p : curves[name])
                if (memplan::has_solution(p.result.status) && !memplan::check_plan(d.g, p.result.plan).ok()) {
                    std::printf("| %s | %s sweep: INVALID PLAN |\n", d.monet->label.data(), name.c_str());
                    return 1;
                }
        }
        for (double level : levels) {
            std::printf("| %s | %.0f %% |", d.monet->label.data(), 100 * level);
            std::vector<std::optional<std::uint64_t>> mem;
            for (const auto& n : compared) {
                mem.push_back(memplan::memory_at_overhead(curves[n], level));
                if (mem.back()) std::printf(" %.2f |", gib(*mem.back()));
                else std::printf(" - |");
            }
            for (std::size_t i = 1; i < compared.size(); ++i) {
                if (mem[i] && mem[0]) std::printf(" %.2f |", static_cast<double>(*mem[i]) / static_cast<double>(*mem[0]));
                else std::printf(" - |");
            }
            std::printf(" %.0f |\n", sweep_secs);
        }
        std::fflush(stdout);
    }
    return 0;
}
