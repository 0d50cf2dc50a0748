// The definitions behind common.hpp, compiled once into memplan_train_common:
// planning instantiates every rematerialization planner (remat/select.hpp)
// and training the CPU engine's executor, which is the cost of a train_*
// program; each train_*.cpp is then only its model and main().
#include "common.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/remat/select.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string>
#include <string_view>

namespace memplan::examples {

train_options parse_options(int argc, char** argv, int default_steps) {
    train_options o;
    o.steps = default_steps;
    o.interval = std::max(1, default_steps / 4);
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "option %s needs a value\n", argv[i]);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--steps") o.steps = std::atoi(value().c_str());
        else if (a == "--interval") o.interval = std::max(1, std::atoi(value().c_str()));
        else if (a == "--budget") {
            auto v = value();
            if (!v.empty() && v.back() == '%') v.pop_back();
            o.budget_percent = v == "min" ? 0.0 : std::atof(v.c_str());
            if (!(o.budget_percent > 0) && v != "min") {
                std::fprintf(stderr, "option --budget wants a percentage > 0, got '%s'\n", argv[i]);
                std::exit(2);
            }
        } else if (a == "--remat") o.remat = value();
        else if (a == "--time-limit") {
            o.time_limit = std::atof(value().c_str());
            if (!(o.time_limit > 0)) {
                std::fprintf(stderr, "option --time-limit wants seconds > 0, got '%s'\n", argv[i]);
                std::exit(2);
            }
        } else if (a == "--naive") o.naive = true;
        else if (a == "--poison") o.poison = true;
        else if (a == "--help" || a == "-h") {
            std::printf("usage: %s [--steps N] [--budget P%% | --budget min] [--remat NAME] [--time-limit S] [--naive] "
                        "[--poison] [--interval K]\n", argv[0]);
            std::exit(0);
        } else {
            std::fprintf(stderr, "unknown option '%s'\n", argv[i]);
            std::exit(2);
        }
    }
    return o;
}

remat_result min_budget_plan(const graph& g, const std::string& name, std::uint64_t store_all_bytes,
                                    double time_limit, int rounds) {
    remat_options ro;
    ro.time_limit_seconds = time_limit;
    ro.budget = store_all_bytes;
    remat_result best = plan_remat(name, g, ro);
    if (!has_solution(best.status)) return best;
    std::uint64_t lo = 0, hi = best.arena();
    int r = 0;
    for (; r < rounds; ++r) {
        ro.budget = hi / 5 * 4;
        auto got = plan_remat(name, g, ro);
        if (!has_solution(got.status) || got.arena() > ro.budget) {
            lo = got.status == status::infeasible ? std::max<std::uint64_t>(ro.budget, got.bound) : ro.budget;
            break;
        }
        hi = got.arena();
        best = std::move(got);
    }
    for (; r < rounds && hi > lo && hi - lo > store_all_bytes / 100; ++r) {
        ro.budget = lo + (hi - lo) / 2;
        auto got = plan_remat(name, g, ro);
        if (has_solution(got.status) && got.arena() <= ro.budget) {
            hi = got.arena();
            best = std::move(got);
        } else {
            lo = got.status == status::infeasible ? std::max<std::uint64_t>(ro.budget, got.bound) : ro.budget;
        }
    }
    return best;
}

std::uint64_t proc_status_bytes(std::string_view key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + key.size(), nullptr, 10) * 1024;
    return 0;
}
void reset_peak_rss() {
    std::ofstream f("/proc/self/clear_refs");
    if (f) f << "5";
}

example_plan plan_example(const model& m, const graph& g, const train_options& o) {
    example_plan out;
    const auto t_plan = std::chrono::steady_clock::now();
    remat_options ro;
    ro.time_limit_seconds = o.time_limit;
    out.store_all = plan_remat("store_all", g, ro).arena();
    out.budget = static_cast<std::uint64_t>(double(out.store_all) * o.budget_percent / 100.0);
    if (o.naive) return out;
    ro.budget = out.budget;
    auto r = o.budget_percent > 0 ? plan_remat(o.remat, g, ro) : min_budget_plan(g, o.remat, out.store_all, o.time_limit);
    if (o.budget_percent > 0 && !has_solution(r.status)) {
        std::printf("budget %.0f%% (%llu bytes) not reached by planner '%s' (%s); using the smallest budget "
                    "it reaches\n",
                    o.budget_percent, (unsigned long long)out.budget, o.remat.c_str(), r.message.c_str());
        r = min_budget_plan(g, o.remat, out.store_all, o.time_limit);
        if (has_solution(r.status)) out.budget = r.arena();
    }
    if (!has_solution(r.status))
        throw error("engine", "planner '" + o.remat + "' found no plan within " + std::to_string(out.budget) +
                                  " bytes: " + std::string(to_string(r.status)) +
                                  (r.message.empty() ? "" : " (" + r.message + ")"));
    if (o.budget_percent <= 0) out.budget = r.arena();
    out.plan = r.plan;
    const auto report = check_plan(g, out.plan);
    if (!report.ok()) throw error("engine", "the plan fails check_plan: " + report.violations.front().message);
    std::size_t non_default = 0;
    for (const auto& st : out.plan.steps) non_default += st.has_variant() && st.variant != 0;
    out.predicted_overhead = r.overhead();
    std::printf("%s: %zu ops, %zu steps (%zu recomputed, %zu with a non-default variant); planner %s, "
                "predicted overhead %+.1f %%, planned in %.1f s\n",
                m.net.name().c_str(), g.num_ops(), out.plan.steps.size(), out.plan.steps.size() - g.num_ops(),
                non_default, r.planner.c_str(), 100 * out.predicted_overhead,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_plan).count());
    return out;
}

int run_and_report(const std::function<example_result()>& body) {
    try {
        const auto r = body();
        std::printf("loss %.6f naive_bytes %llu arena_bytes %llu budget_bytes %llu ms_per_step %.3f\n",
                    double(r.loss), (unsigned long long)r.naive_bytes, (unsigned long long)r.arena_bytes,
                    (unsigned long long)r.budget_bytes, r.ms_per_step);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}

example_setup setup_example(const model& m, optimizer opt_kind, const train_options& o) {
    example_setup s;
    training_options to;
    to.opt = opt_kind;
    s.g = training_graph(m.net, to, s.prog);
    s.eo.poison = o.poison;
    s.eo.opt.kind = opt_kind;
    if (opt_kind == optimizer::adam) s.eo.opt.lr = 1e-3f;
    for (const auto& t : s.g.tensors()) s.naive_bytes += t.bytes;
    return s;
}

int run_example(const model& m, optimizer opt_kind, int argc, char** argv, int default_steps) {
    return run_and_report([&]() -> example_result {
        const auto o = parse_options(argc, argv, default_steps);
        const auto [prog, g, eo, naive_bytes] = setup_example(m, opt_kind, o);
        auto [chosen, store_all, budget, predicted] = plan_example(m, g, o);
        std::uint64_t arena = 0;
        // The planners' own peak is not the engine's: restart the high-water mark here.
#ifdef __GLIBC__
        malloc_trim(0); // hand the planners' freed heap back, so the RSS below is the engine's
#endif
        reset_peak_rss();
        const auto rss_before = current_rss_bytes();
        auto ex = o.naive ? engine::executor<engine::cpu::backend>::naive(m.net, g, prog, {}, eo)
                          : engine::executor<engine::cpu::backend>(m.net, g, prog, std::move(chosen), {}, eo);
        arena = ex.reserved_bytes();
        std::printf("naive footprint %llu bytes, store-all arena %llu bytes, %s %llu bytes\n",
                    (unsigned long long)naive_bytes, (unsigned long long)store_all,
                    o.naive ? "naive allocations" : "planned arena", (unsigned long long)arena);
        float loss = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < o.steps; ++s) {
            feed(ex, m, static_cast<std::uint64_t>(s));
            loss = ex.step();
            if (s % o.interval == 0 || s + 1 == o.steps) std::printf("step %4d loss %.5f\n", s, double(loss));
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                          std::max(1, o.steps);
        std::uint64_t param_bytes = 0;
        for (const auto& t : g.tensors()) param_bytes += t.persistent ? t.bytes : 0;
        const auto peak = peak_rss_bytes();
        std::printf("RSS before the executor (VmRSS) %llu bytes, peak while training (VmHWM) %llu bytes: +%lld bytes "
                    "for %s %llu bytes (of which persistent %llu bytes)\n",
                    (unsigned long long)rss_before, (unsigned long long)peak, (long long)peak - (long long)rss_before,
                    o.naive ? "allocations" : "an arena", (unsigned long long)arena, (unsigned long long)param_bytes);
        if (!o.naive)
            std::printf("memory saved: %llu of %llu bytes (%.1f %%) against one allocation per tensor\n",
                        (unsigned long long)(naive_bytes - std::min(naive_bytes, arena)), (unsigned long long)naive_bytes,
                        100.0 * double(naive_bytes - std::min(naive_bytes, arena)) / double(naive_bytes));
        return {loss, naive_bytes, arena, o.naive ? naive_bytes : budget, ms};
    });
}

} // namespace memplan::examples
