// The definitions behind common.hpp, compiled once into memplan_train_common:
// planning instantiates every rematerialization planner (remat/select.hpp)
// and training the CPU engine's executor, which is the cost of a train_*
// program; each train_*.cpp is then only its model and main().
#include "common.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/cpu/device.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/engine/profile.hpp>
#include <memplan/io/cost_model.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/select.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
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
        } else if (a == "--cost") {
            o.cost = value();
        } else if (a == "--against") {
            o.against = value();
        } else if (a == "--profile") {
            o.profile_out = value();
        } else if (a == "--compare") {
            o.compare = true;
        } else if (a == "--pairs") {
            o.pairs = std::atoi(value().c_str());
            if (o.pairs < 5) {
                std::fprintf(stderr, "option --pairs wants at least 5 pairs, got '%s'\n", argv[i]);
                std::exit(2);
            }
        } else if (a == "--naive") o.naive = true;
        else if (a == "--poison") o.poison = true;
        else if (a == "--help" || a == "-h") {
            std::printf("usage: %s [--steps N] [--budget P%% | --budget min] [--remat NAME] [--time-limit S] [--naive] "
                        "[--poison] [--interval K]\n"
                        "       [--cost roofline:DEVICE | fused:DEVICE | measured | measured:FILE] [--profile FILE] "
                        "[--compare [--pairs N]]\n"
                        "  --cost MODEL   how the planner prices ops (default roofline:v100; DEVICE: v100, h100, h200, cpu);\n"
                        "                 measured: profile every op and variant on this machine's backend first\n"
                        "  --profile FILE write the measured graph (memplan.graph, costs in us) to FILE\n"
                        "  --compare      run the store-all plan (each op's fastest variant) and the plan interleaved,\n"
                        "                 N timed pairs (default 7) after one warm-up pair; report predicted and\n"
                        "                 measured overhead\n"
                        "  --against M    with --compare: also plan at the same budget with cost model M and run\n"
                        "                 that plan in the same interleaving (A B C A B C ...)\n", argv[0]);
            std::exit(0);
        } else {
            std::fprintf(stderr, "unknown option '%s'\n", argv[i]);
            std::exit(2);
        }
    }
    return o;
}

/// The plan of planner `name` at the smallest budget it reaches (remat/pareto.hpp's bisection).
static remat_result smallest_plan(const graph& g, const std::string& name, std::uint64_t store_all_bytes,
                                  double time_limit) {
    remat_options ro;
    ro.time_limit = time_limit;
    return smallest_budget_plan(g, store_all_bytes, [&](std::uint64_t b) {
        ro.budget = b;
        return plan_remat(name, g, ro);
    });
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
    ro.time_limit = o.time_limit;
    out.store_all = plan_remat("store_all", g, ro).arena();
    out.budget = o.budget_bytes ? o.budget_bytes
                                : static_cast<std::uint64_t>(double(out.store_all) * o.budget_percent / 100.0);
    if (o.naive) return out;
    ro.budget = out.budget;
    auto r = o.budget_percent > 0 || o.budget_bytes ? plan_remat(o.remat, g, ro) : smallest_plan(g, o.remat, out.store_all, o.time_limit);
    if ((o.budget_percent > 0 || o.budget_bytes) && !has_solution(r.status)) {
        std::printf("budget %.1f%% (%llu bytes) not reached by planner '%s' with %s costs (%s); using the smallest "
                    "budget it reaches\n",
                    100.0 * double(out.budget) / double(out.store_all), (unsigned long long)out.budget,
                    o.remat.c_str(), g.cost_model().c_str(), r.message.c_str());
        r = smallest_plan(g, o.remat, out.store_all, o.time_limit);
        if (has_solution(r.status)) out.budget = r.arena();
    }
    if (!has_solution(r.status))
        throw error("engine", "planner '" + o.remat + "' found no plan within " + std::to_string(out.budget) +
                                  " bytes: " + std::string(to_string(r.status)) +
                                  (r.message.empty() ? "" : " (" + r.message + ")"));
    if (o.budget_percent <= 0 && !o.budget_bytes) out.budget = r.arena();
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
        std::printf("loss %.6f naive_bytes %llu arena_bytes %llu budget_bytes %llu ms_per_step %.3f",
                    double(r.loss), (unsigned long long)r.naive_bytes, (unsigned long long)r.arena_bytes,
                    (unsigned long long)r.budget_bytes, r.ms_per_step);
        if (r.compared)
            std::printf(" predicted_overhead %.4f measured_overhead %.4f", r.predicted_overhead, r.measured_overhead);
        std::printf("\n");
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
    if (o.cost == "measured") {
        s.needs_profile = true;
    } else {
        to.cost = example_cost_model(o.cost);
    }
    s.needs_profile = s.needs_profile || !o.profile_out.empty();
    s.g = training_graph(m.net, to, s.prog);
    s.eo.poison = o.poison;
    s.eo.opt.kind = opt_kind;
    if (opt_kind == optimizer::adam) s.eo.opt.lr = 1e-3f;
    for (const auto& t : s.g.tensors()) s.naive_bytes += t.bytes;
    return s;
}

cost::cost_model example_cost_model(const std::string& spec) {
    return cost::make_cost_model(spec, [](std::string_view name) -> std::optional<cost::device_profile> {
        if (name == "cpu") return engine::cpu::cpu_device();
        return std::nullopt;
    });
}

memplan::plan store_all_fastest_plan(const graph& g) {
    return make_plan(g, fastest_schedule(g), best_heuristic{}).plan;
}

namespace {

/// `--cost measured` / `--profile FILE`: every op and variant of `s.g` timed
/// on the CPU backend; `s.g` takes the measured costs (when the planner is to
/// use them) and FILE the measured graph.
void profile_on_cpu(const model& m, example_setup& s, const train_options& o) {
    engine::profile_options po;
    po.exec = s.eo;
    po.source = "cpu";
    for (auto& in : m.batch(0)) po.inputs.push_back(in);
    po.progress = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
    auto r = engine::profile_graph<engine::cpu::backend>(m.net, s.g, s.prog, po);
    std::printf("profiled %zu ops in %d passes (%.1f s): %.0f us per step with the default variants; spread "
                "(p75 - p25) / median: %.1f %% time-weighted, worst %.1f %% (%s)\n",
                s.g.num_ops(), r.stats.passes, r.stats.seconds, r.stats.step_us, 100 * r.stats.spread,
                100 * r.stats.worst_spread, r.stats.worst_op.c_str());
    if (!o.profile_out.empty()) {
        write_graph_json(o.profile_out, r.measured);
        std::printf("wrote %s\n", o.profile_out.c_str());
    }
    if (o.cost == "measured") s.g = std::move(r.measured);
}

} // namespace

int run_example(const model& m, optimizer opt_kind, int argc, char** argv, int default_steps) {
    return run_and_report([&]() -> example_result {
        const auto o = parse_options(argc, argv, default_steps);
        auto setup = setup_example(m, opt_kind, o);
        if (setup.needs_profile) profile_on_cpu(m, setup, o);
        const auto& [prog, g, eo, naive_bytes, needs_profile] = setup;
        std::printf("costs: %s (%s)\n", g.cost_model().c_str(), g.cost_unit().c_str());
        auto [chosen, store_all, budget, predicted] = plan_example(m, g, o);
        if (o.compare && !o.naive) {
            using cpu_executor = engine::executor<engine::cpu::backend>;
            cpu_executor base(m.net, g, prog, store_all_fastest_plan(g), {}, eo);
            const double fastest = schedule_cost(g, base.plan().steps);
            cpu_executor planned(m.net, g, prog, std::move(chosen), {}, eo);
            std::vector<cpu_executor*> runs{&base, &planned};
            std::optional<cpu_executor> other;
            double other_own = 0, other_here = 0;
            if (!o.against.empty()) {
                // The same network priced by another model, planned at the same budget.
                training_options to;
                to.opt = opt_kind;
                to.cost = example_cost_model(o.against);
                training_program prog2;
                const graph g2 = training_graph(m.net, to, prog2);
                cost::require_same_cost_unit(g, g2);
                for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i)
                    if (g.op(i).name != g2.op(i).name || g.op(i).variants.size() != g2.op(i).variants.size())
                        throw error("engine", "--against " + o.against + ": op '" + g2.op(i).name +
                                                  "' differs from the planned graph's");
                train_options o2 = o;
                o2.cost = o.against;
                o2.budget_bytes = budget;
                auto p2 = plan_example(m, g2, o2);
                other_own = p2.predicted_overhead;
                other_here = schedule_cost(g, p2.plan.steps) / fastest - 1;
                other.emplace(m.net, g, prog, std::move(p2.plan), engine::cpu::backend{}, eo);
                runs.push_back(&*other);
            }
            float loss = 0;
            const auto c = compare_interleaved(runs, o.pairs, [&](cpu_executor& ex, int s) {
                feed(ex, m, static_cast<std::uint64_t>(s));
                const auto t0 = std::chrono::steady_clock::now();
                const float l = ex.step();
                if (&ex == &planned) loss = l;
                return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            });
            std::printf("compare: %d rounds after one warm-up round; store-all (fastest variants) %.2f ms, plan %.2f "
                        "ms (medians); measured overhead %+.1f %% (spread of the per-round overheads, p75 - p25: "
                        "%.1f points), predicted %+.1f %% (%s)\n",
                        c.rounds, c.ms[0], c.ms[1], 100 * c.overhead[1], 100 * c.spread[1], 100 * predicted,
                        g.cost_model().c_str());
            if (other)
                std::printf("against: the plan made with %s (arena %llu bytes): %.2f ms, measured overhead %+.1f %% "
                            "(spread %.1f points); predicted %+.1f %% by %s, %+.1f %% by %s\n",
                            o.against.c_str(), (unsigned long long)other->reserved_bytes(), c.ms[2],
                            100 * c.overhead[2], 100 * c.spread[2], 100 * other_own, o.against.c_str(),
                            100 * other_here, g.cost_model().c_str());
            example_result r{loss, naive_bytes, planned.reserved_bytes(), budget, c.ms[1]};
            r.compared = true;
            r.predicted_overhead = predicted;
            r.measured_overhead = c.overhead[1];
            return r;
        }
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
