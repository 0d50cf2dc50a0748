// memplan pareto: sweeps memory budgets from store-all down to the smallest one a planner can meet.
#include "planners.hpp"

#include <memplan/io/graph_json.hpp>
#include <memplan/io/pareto_csv.hpp>
#include <memplan/io/svg_plot.hpp>
#include <memplan/remat/pareto.hpp>

#include <limits>

namespace memplan::cli {

namespace {

/// The unit for a plot axis of byte counts up to `top`.
std::pair<double, std::string> byte_unit(std::uint64_t top) {
    if (top >= (1ULL << 30)) return {double(1ULL << 30), "GiB"};
    if (top >= (1ULL << 20)) return {double(1ULL << 20), "MiB"};
    if (top >= (1ULL << 10)) return {double(1ULL << 10), "KiB"};
    return {1.0, "bytes"};
}

int run_pareto(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args,
                                 {{{"--output", "-o"}, true}, {{"--svg"}, true}, {{"--points"}, true}, remat_option,
                                  solver_option, time_limit_option, alignment_option});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "GRAPH.json");
    const auto name = remat_option_value(*a); // checks --remat and --solver
    const auto solver = a->value_or("--solver", "");
    const auto points = a->integer_or("--points", 8, 2);
    if (points > 1000) throw memplan::error("cli", "option --points: at most 1000, got " + std::to_string(points));
    memplan::remat_options opt;
    opt.alignment = a->integer_or("--alignment", default_alignment, 1);
    // --time-limit bounds the whole sweep: one clock, and each planner run
    // takes an equal share of what is left for the runs that may follow.
    const auto until = command_deadline(*a);
    opt.time_limit = until;
    const auto g = memplan::read_graph_json(a->positional[0]);
    if (g.num_ops() == 0) throw memplan::error("cli", a->positional[0] + ": the graph has no ops to plan");

    memplan::pareto_options po;
    po.points = static_cast<std::size_t>(points);
    po.alignment = opt.alignment;
    po.deadline = until;
    po.store_all_time_limit = std::numeric_limits<double>::infinity(); // the sweep's deadline alone
    if (isatty(2)) // at most once a second, like every progress line
        po.on_progress = [last = std::chrono::steady_clock::time_point{}](const memplan::pareto_progress& p) mutable {
            const auto now = std::chrono::steady_clock::now();
            if (now - last < std::chrono::seconds(1)) return;
            last = now;
            std::fprintf(stderr, "\r  run %zu (%.*s): budget %llu %s   ", p.runs, static_cast<int>(p.stage.size()),
                         p.stage.data(), static_cast<unsigned long long>(p.budget), p.found ? "found" : "none");
            std::fflush(stderr);
        };
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t most_runs = po.max_bisection_steps + po.points; // after the store-all run
    std::size_t runs = 0;
    const memplan::remat_context<memplan::graph> ctx(g); // shared by every point's run
    const auto curve = memplan::pareto_sweep(ctx, [&](std::uint64_t budget) {
        const std::size_t left = most_runs > runs ? most_runs - runs : 1;
        ++runs;
        auto o = opt.until(until.share(1.0 / static_cast<double>(left)));
        o.budget = budget;
        return memplan::plan_remat(name, ctx, o, solver);
    }, po);
    memplan::cli::clear_progress();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& p : curve)
        reject_internal_error(g, p.result);
    const std::uint64_t top = curve.back().budget; // the store-all arena (pareto_sweep's last point)

    // Files before any output, all or none: a failure is one line and leaves nothing.
    std::vector<std::pair<std::filesystem::path, std::string>> files;
    if (const auto out = a->value("--output")) files.emplace_back(*out, memplan::pareto_csv(curve));
    if (const auto svg = a->value("--svg")) {
        const auto [unit, unit_name] = byte_unit(top);
        memplan::svg_plot plot;
        plot.title = g.name() + ": compute overhead vs memory (" + name + ")";
        plot.x_label = "arena (" + unit_name + "); store-all " + memplan::cli::human_bytes(top);
        plot.y_label = "overhead (%)";
        memplan::svg_series series;
        series.name = name;
        for (const auto& p : curve)
            if (memplan::has_solution(p.result.status))
                series.points.push_back({static_cast<double>(p.result.arena()) / unit, 100.0 * p.result.overhead()});
        plot.series.push_back(std::move(series));
        // The reference point: no rematerialization at all.
        plot.series.push_back({"store-all", {{static_cast<double>(top) / unit, 0.0}}, "#777777"});
        files.emplace_back(*svg, memplan::svg_plot_string(plot));
    }
    memplan::write_files_atomically(files);

    memplan::cli::text_table t;
    t.add_row({"budget", "of store-all", "arena", "arena bytes", "overhead", "planner", "status", "time"});
    for (const auto& p : curve) {
        const bool ok = memplan::has_solution(p.result.status);
        t.add_row({memplan::cli::human_bytes(p.budget), percent(ratio(p.budget, top), 1),
                   ok ? memplan::cli::human_bytes(p.result.arena()) : "-",
                   ok ? std::to_string(p.result.arena()) : "-", ok ? signed_percent(p.result.overhead()) : "-",
                   p.result.planner + (p.carried ? " *" : ""), std::string(memplan::to_string(p.result.status)),
                   memplan::cli::human_seconds(p.seconds)});
    }
    std::cout << "graph: " << g.name() << " (" << g.num_ops() << " ops), planner " << name << ", store-all arena "
              << bytes_both(top) << "; overheads against store-all with the fastest variants, costs in "
              << cost_label(g) << "\n\n"
              << t.str();
    bool carried = false;
    for (const auto& p : curve) carried = carried || p.carried;
    if (carried) std::cout << "* a cheaper plan found at a smaller budget, which fits this one too\n";
    std::cout << "sweep time: " << memplan::cli::human_seconds(secs) << "\n";
    if (const auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    if (const auto svg = a->value("--svg")) std::cout << "wrote " << *svg << "\n";
    return exit_ok;
}

} // namespace

const command pareto_command{
    "pareto",
    "memplan pareto GRAPH.json [--points N] [--remat NAME] [--time-limit S] [-o CURVE.csv] [--svg CURVE.svg]\n"
    "                          [--solver NAME] [--alignment N]",
    "Sweeps memory budgets from store-all down to the smallest one a planner can meet.",
    "Bisects for the smallest budget at which the planner still finds a plan, then plans at N budgets\n"
    "evenly spaced from there to the store-all arena. Each point shows the cheapest plan found that\n"
    "fits its budget (marked * when it came from a run at a smaller budget).\n"
    "  --points N              budgets on the curve, both ends included (default 8, at least 2)\n"
    "  --remat NAME            rematerialization planner (default auto; listed below)\n"
    "  --time-limit S          the whole sweep ends within about S seconds, each run taking an\n"
    "                          equal share of what is left (default 10)\n"
    "  -o, --output CURVE.csv  budget_bytes,arena_bytes,overhead,planner,status,seconds\n"
    "  --svg CURVE.svg         the curve as a plot: overhead (%) against the arena\n"
    "  --solver NAME           MILP backend for MILP-based planners: glpk (default) or cbc\n"
    "  --alignment N           every offset a multiple of N bytes (default 256)\n",
    run_pareto, print_planner_lists};

} // namespace memplan::cli
