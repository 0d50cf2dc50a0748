// Rematerialization on random layered DAGs (Moccasin's benchmark family,
// zoo/random_layered.hpp): graphs of 100, 250, 500 and 1,000 forward-only
// ops, budgets at 80 % and 90 % of the peak of the listed (topological)
// order, as Moccasin (ICML 2023) measures. For each: the order planner
// alone (greedy order, no recomputation, best heuristic placement), and each
// rematerialization planner asked for (checkmate on GLPK): status, arena,
// overhead (cost / cost of the graph run once - 1) and time, and the proven
// bound on the overhead of any plan of the same space (remat/bound.hpp; its
// own time, after the planner's) with the gap. Every plan found is checked
// with check_plan; an invalid one ends the program with exit 1.
//
// Usage: bench_solver_remat_random_dag [--nodes 100,250] [--fractions 80,90] [--seed S]
//                                      [--planners auto,joint] [--time-limit S]
#include "args.hpp"
#include "bound.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/order/greedy_order.hpp>
#include <memplan/solver/glpk.hpp>
#include <memplan/zoo/random_layered.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

double mib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

bool valid(const memplan::graph& g, const memplan::plan& p, const std::string& what) {
    const auto r = memplan::check_plan(g, p);
    if (r.ok()) return true;
    std::fprintf(stderr, "INVALID plan from %s: %s\n", what.c_str(), r.to_string().c_str());
    return false;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::size_t> nodes{100, 250, 500, 1000};
    std::vector<double> fractions{0.8, 0.9};
    std::vector<std::string> planners{"auto"};
    std::uint64_t seed = 1;
    double time_limit = 60;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const bool has_value = i + 1 < argc;
            if (a == "--nodes" && has_value) {
                nodes.clear();
                for (const auto& n : memplan::bench::split_list(argv[++i])) nodes.push_back(std::stoul(n));
            } else if (a == "--fractions" && has_value) {
                fractions.clear();
                for (const auto& f : memplan::bench::split_list(argv[++i])) fractions.push_back(std::stod(f) / 100.0);
            } else if (a == "--planners" && has_value) planners = memplan::bench::split_list(argv[++i]);
            else if (a == "--seed" && has_value) seed = std::stoull(argv[++i]);
            else if (a == "--time-limit" && has_value) time_limit = std::stod(argv[++i]);
            else throw std::invalid_argument(a);
        }
        for (const auto& p : planners) memplan::find_remat_planner(p);
    } catch (const memplan::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    } catch (const std::exception&) {
        std::fprintf(stderr,
                     "usage: %s [--nodes 100,250] [--fractions 80,90] [--seed S] [--planners auto,joint] "
                     "[--time-limit S]\n",
                     argv[0]);
        return 2;
    }

    std::printf("## Rematerialization on random layered DAGs\n\n"
                "zoo/random_layered.hpp, seed %llu + nodes; budget = fraction x the peak of the listed order (live "
                "bytes, no recomputation); overhead = cost / cost of every op once - 1; time limit %.0f s per "
                "planner. \"order only\": greedy order, no recomputation, best heuristic placement. \"bound\": no plan of "
                "the space (the plan's order of first runs, any recomputation) has a lower overhead (remat/bound.hpp, "
                "at most %.0f s); \"proof\": no plan of the space fits.\n\n",
                static_cast<unsigned long long>(seed), time_limit, time_limit);
    std::printf("| nodes | listed peak MiB | fraction | budget MiB | order only: arena MiB | fits | planner | status | "
                "arena MiB | overhead | time s | bound | gap | bound s |\n");
    std::printf("|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);
    bool all_valid = true;
    for (const auto n : nodes) {
        const auto g = memplan::random_layered_dag(n, seed + n);
        const auto peak = memplan::schedule_lower_bound(g, memplan::default_schedule(g));
        memplan::greedy_order go;
        const auto ordered = go.order(g);
        auto placed = memplan::make_plan(g, ordered.schedule, memplan::best_heuristic{});
        all_valid = valid(g, placed.plan, "greedy order") && all_valid;
        for (const auto f : fractions) {
            const auto budget = static_cast<std::uint64_t>(f * static_cast<double>(peak));
            for (const auto& name : planners) {
                memplan::remat_options o;
                o.budget = budget;
                o.time_limit = time_limit;
                auto r = memplan::plan_remat(name, g, o, memplan::glpk_solver::name);
                const bool found = memplan::has_solution(r.status) && r.arena() <= budget;
                if (found) all_valid = valid(g, r.plan, name) && all_valid;
                const auto b0 = std::chrono::steady_clock::now();
                memplan::bench::attach_bound(g, r, time_limit);
                const double bound_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
                const std::string bound = r.status == memplan::status::infeasible ? "proof" : memplan::bench::bound_cell(r);
                const std::string gap = found && r.bound_proven ? std::to_string(100 * r.gap()).substr(0, 5) + " %" : "-";
                std::printf("| %zu | %.2f | %.0f %% | %.2f | %.2f | %s | %s | %s | %s | %s | %.1f | %s | %s | %.1f |\n", n, mib(peak),
                            100 * f, mib(budget), mib(placed.plan.arena_bytes),
                            placed.plan.arena_bytes <= budget ? "yes" : "no",
                            (r.planner == name ? name : name + " (" + r.planner + ")").c_str(),
                            std::string(memplan::to_string(r.status)).c_str(),
                            found ? std::to_string(mib(r.arena())).substr(0, 6).c_str() : "-",
                            found ? (std::to_string(100 * r.overhead()).substr(0, 5) + " %").c_str() : "-", r.seconds,
                            bound.c_str(), gap.c_str(), bound_s);
                std::fflush(stdout);
            }
        }
    }
    return all_valid ? 0 : 1;
}
