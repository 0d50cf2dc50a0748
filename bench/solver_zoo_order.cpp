// Plan quality on the model zoo's training graphs (the table of docs/planners.md): operator
// order + allocation against what a framework does — the default order
// (forward, backward, then every optimizer step) with online best-fit
// allocation in execution order, simulated.
//
// Usage: bench_solver_zoo_order [--time-limit S] [--batches 1,32,0] [--models a,b] [--markdown]
//   (batch 0 = the model's default, MONeT's settings for the CNNs)
// Prints one row per model and batch, then the average saving per batch and
// the median planning time. "any-order" is any_order_lower_bound with the
// default variants: no order (each op once) with any allocation needs less,
// so "most" = 1 - that / baseline is the most reordering could ever save.
// "+variants" and "most +var" are the same when every step may also pick
// any variant of its op.
#include "args.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/alloc/exact.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/cut_bound.hpp>
#include <memplan/schedule/order/select.hpp>
#include <memplan/solver/glpk.hpp>
#include <memplan/zoo/zoo.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

double gib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

} // namespace

int main(int argc, char** argv) {
    double time_limit = 5;
    std::vector<std::string> batches{"1", "32", "0"};
    std::vector<std::string> models(memplan::zoo_names().begin(), memplan::zoo_names().end());
    bool markdown = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--time-limit" && i + 1 < argc) time_limit = std::stod(argv[++i]);
        else if (a == "--batches" && i + 1 < argc) batches = memplan::bench::split_list(argv[++i]);
        else if (a == "--models" && i + 1 < argc) models = memplan::bench::split_list(argv[++i]);
        else if (a == "--markdown") markdown = true;
        else {
            std::fprintf(stderr, "usage: %s [--time-limit S] [--batches 1,32,0] [--models a,b] [--markdown]\n", argv[0]);
            return 2;
        }
    }
    const char* sep = markdown ? " | " : "  ";
    std::printf("%s%-12s%s%5s%s%7s%s%5s%s%10s%s%10s%s%10s%s%10s%s%10s%s%10s%s%7s%s%7s%s%10s%s%7s%s\n",
                markdown ? "| " : "", "model", sep, "batch", sep, "tensors", sep, "ops", sep, "LB dflt", sep, "LB order",
                sep, "any-order", sep, "+variants", sep, "baseline", sep, "memplan", sep, "saved", sep, "most", sep,
                "most +var", sep, "time s", markdown ? " |" : "");
    if (markdown) std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::map<std::string, std::vector<double>> savings, most_savings, most_variant_savings;
    double max_bound_secs = 0;
    std::vector<double> times;
    for (const auto& model : models) {
        for (const auto& b : batches) {
            memplan::zoo_options o;
            o.batch = static_cast<std::size_t>(std::stoul(b));
            const auto g = memplan::zoo_graph(model, o);
            const auto dflt = memplan::default_schedule(g);
            const auto lb_default = memplan::schedule_lower_bound(g, dflt);
            const auto baseline = memplan::make_plan(g, dflt, memplan::online_best_fit{}, {});
            // The two any-order bounds: every order with the default variants
            // (what the baseline and the ordering planners run), and every
            // order with any variants (MONeT-style choices included).
            const auto tb = std::chrono::steady_clock::now();
            const auto any_order = memplan::any_order_lower_bound(g, {.any_variant = false});
            const auto any_variant = memplan::any_order_lower_bound(g);
            max_bound_secs = std::max(
                max_bound_secs, std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count() / 2);

            const auto t0 = std::chrono::steady_clock::now();
            memplan::order_options oo;
            oo.time_limit = time_limit;
            const auto ordered = memplan::order_by_name("ilp", g, memplan::glpk_solver{}, oo);
            auto planned = memplan::make_plan(g, ordered.schedule, memplan::best_heuristic{}, {});
            if (planned.plan.arena_bytes > planned.bound) {
                memplan::exact ex;
                ex.time_limit = 1.0;
                auto better = memplan::make_plan(g, ordered.schedule, ex, {});
                if (memplan::has_solution(better.status) && better.plan.arena_bytes < planned.plan.arena_bytes)
                    planned = std::move(better);
            }
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            // No plan without recomputation may beat the bounds that cover it.
            const bool default_variants =
                std::all_of(ordered.schedule.begin(), ordered.schedule.end(),
                            [&](const auto& st) { return st.variant == memplan::default_variant(g, st.op); });
            const auto covering = default_variants ? any_order : any_variant;
            const bool ok = memplan::check_plan(g, planned.plan).ok() && memplan::check_plan(g, baseline.plan).ok() &&
                            any_order >= any_variant && ordered.size >= covering &&
                            planned.plan.arena_bytes >= covering && lb_default >= any_order &&
                            baseline.plan.arena_bytes >= any_order;
            const auto base = static_cast<double>(baseline.plan.arena_bytes);
            const double saved = 1.0 - static_cast<double>(planned.plan.arena_bytes) / base;
            const double most = 1.0 - static_cast<double>(any_order) / base;
            const double most_variant = 1.0 - static_cast<double>(any_variant) / base;
            savings[b].push_back(saved);
            most_savings[b].push_back(most);
            most_variant_savings[b].push_back(most_variant);
            times.push_back(secs);
            std::printf("%s%-12s%s%5zu%s%7zu%s%5zu%s%9.3fG%s%9.3fG%s%9.3fG%s%9.3fG%s%9.3fG%s%9.3fG%s%6.1f%%%s%6.1f%%%s"
                        "%9.1f%%%s%7.2f%s%s\n",
                        markdown ? "| " : "", model.c_str(), sep, memplan::resolve_zoo_options(model, o).batch, sep,
                        g.num_tensors(), sep, g.num_ops(), sep, gib(lb_default), sep, gib(ordered.size), sep,
                        gib(any_order), sep, gib(any_variant), sep, gib(baseline.plan.arena_bytes), sep,
                        gib(planned.plan.arena_bytes), sep, 100 * saved, sep, 100 * most, sep, 100 * most_variant, sep,
                        secs, markdown ? " |" : "", ok ? "" : "  INVALID PLAN OR BOUND");
            std::fflush(stdout);
            if (!ok) return 1;
        }
    }
    std::printf("\n");
    auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return v.empty() ? 0.0 : s / static_cast<double>(v.size());
    };
    for (const auto& b : batches) {
        const auto& v = savings[b];
        const double worst = v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
        std::printf("batch %-4s average saving %5.1f%%, smallest %5.1f%%; most any order could save: %5.1f%% on "
                    "average (%5.1f%% with any variants)\n",
                    b == "0" ? "dflt" : b.c_str(), 100 * mean(v), 100 * worst, 100 * mean(most_savings[b]),
                    100 * mean(most_variant_savings[b]));
    }
    std::sort(times.begin(), times.end());
    std::printf("median planning time %.2f s, max %.2f s; any-order bound at most %.3f s\n", times[times.size() / 2],
                times.back(), max_bound_secs);
    return 0;
}
