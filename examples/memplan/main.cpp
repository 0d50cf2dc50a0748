// The memplan command: plans, checks and reports on graphs and offset
// instances from the shell. One function per subcommand; the table at the
// bottom lists them with their help. Exit codes: 0 success, 1 a negative
// answer (an invalid plan, a capacity exceeded, no plan found within a
// budget in the time limit), 2 bad arguments or input (one line
// `memplan: error: ...`, nothing written), 3 an internal error (a planner
// produced something the validator rejects), 4 a budget that no schedule
// can meet (one line `memplan: infeasible: ...`, nothing written).
#include "args.hpp"
#include "format.hpp"
#include "planners.hpp"

#include <memplan/check/placement.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/core/error.hpp>
#include <memplan/io/checkmate_json.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/offset_csv.hpp>
#include <memplan/io/pareto_csv.hpp>
#include <memplan/io/plan_json.hpp>
#include <memplan/io/svg_plot.hpp>
#include <memplan/plan/alloc/allocators.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/from_intervals.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/zoo/zoo.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#ifndef MEMPLAN_VERSION
#define MEMPLAN_VERSION "unknown"
#endif

namespace {

using memplan::cli::option_spec;
using memplan::cli::parsed_args;

constexpr int exit_ok = 0;
constexpr int exit_negative = 1;
constexpr int exit_internal = 3;
constexpr int exit_infeasible = 4;

constexpr std::string_view default_allocator = "auto";
constexpr std::string_view report_allocator = "best_heuristic";
constexpr double default_time_limit = 10;
constexpr std::uint64_t default_alignment = 256;

/// A planner produced something the validator rejects: a bug, exit 3.
struct internal_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct command {
    std::string_view name;
    std::string_view synopsis; ///< "memplan plan GRAPH.json [-o PLAN.json] ..."
    std::string_view summary;  ///< one line for `memplan --help`
    std::string_view details;  ///< the rest of `memplan help NAME`
    int (*run)(const command&, const std::vector<std::string>&);
};

void print_help(const command& c) {
    std::cout << "usage: " << c.synopsis << "\n\n" << c.summary << "\n";
    if (!c.details.empty()) std::cout << "\n" << c.details;
    // The planner list grows with the library: not part of the static text.
    if (c.name == "plan" || c.name == "pareto")
        std::cout << "Rematerialization planners (--remat): " << memplan::cli::join(memplan::cli::remat_choices())
                  << "\n";
}

/// Parses the arguments of `c`; nullopt when it printed the help instead.
std::optional<parsed_args> parse_or_help(const command& c, const std::vector<std::string>& args,
                                         std::vector<option_spec> specs) {
    specs.push_back({{"--help", "-h"}, false});
    auto a = memplan::cli::parse_args("memplan " + std::string(c.name), args, specs);
    if (a.has("--help")) {
        print_help(c);
        return std::nullopt;
    }
    return a;
}

const option_spec alloc_option{{"--alloc", "--allocator"}, true};
const option_spec alignment_option{{"--alignment"}, true};
const option_spec solver_option{{"--solver"}, true};
const option_spec time_limit_option{{"--time-limit"}, true};
const option_spec order_option{{"--order"}, true};
const option_spec remat_option{{"--remat"}, true};

double time_limit_option_value(const parsed_args& a) {
    const auto v = a.value("--time-limit");
    if (!v) return default_time_limit;
    char* end = nullptr;
    const double t = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size() || !(t > 0) || t > 1e6)
        throw memplan::error("cli", "option --time-limit: expected a number of seconds > 0, got '" + *v + "'");
    return t;
}

/// Checks --alloc, --solver and --time-limit before any work, so a typo costs
/// nothing and writes nothing.
memplan::cli::chosen_allocator allocator_option(const parsed_args& a, std::string_view fallback = default_allocator) {
    return memplan::cli::allocator_from(a.value_or("--alloc", std::string(fallback)), a.value_or("--solver", ""),
                                        time_limit_option_value(a));
}

std::string order_option_value(const parsed_args& a) {
    const auto name = a.value_or("--order", "default");
    const auto names = memplan::order_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
        std::string all;
        for (auto n : names) all += (all.empty() ? "" : ", ") + std::string(n);
        throw memplan::error("cli", "option --order: unknown order '" + name + "'; expected one of: " + all);
    }
    if (name == "ilp" && memplan::cli::solver_choices().empty())
        throw memplan::error("cli", "option --order ilp: no MILP solver in this build");
    return name;
}

std::string bytes_both(std::uint64_t b) { return memplan::cli::human_bytes(b) + " (" + std::to_string(b) + " bytes)"; }

double ratio(std::uint64_t a, std::uint64_t b) {
    return b == 0 ? (a == 0 ? 1.0 : 0.0) : static_cast<double>(a) / static_cast<double>(b);
}

/// Plans schedule `s` of `g` and checks the result; a plan the validator
/// rejects is an internal error.
memplan::planned plan_checked(const memplan::graph& g, const memplan::schedule& s,
                              const memplan::cli::chosen_allocator& allocator, std::uint64_t alignment) {
    memplan::plan_options opt;
    opt.alignment = alignment;
    auto r = memplan::make_plan(g, s, allocator, opt);
    if (!memplan::has_solution(r.status))
        throw internal_error("allocator '" + allocator.which + "' found no plan for graph '" + g.name() + "' (" +
                             std::string(memplan::to_string(r.status)) + "): " + r.message);
    const auto report = memplan::check_plan(g, r.plan);
    if (!report.ok())
        throw internal_error("allocator '" + allocator.which + "' made an invalid plan for graph '" + g.name() +
                             "':\n" + report.to_string());
    return r;
}

memplan::planned plan_checked(const memplan::graph& g, const memplan::cli::chosen_allocator& allocator,
                              std::uint64_t alignment) {
    return plan_checked(g, memplan::default_schedule(g), allocator, alignment);
}

/// Prints every violation and the count; the exit code of a negative answer.
int print_invalid(const memplan::validation_report& report) {
    std::cout << report.to_string();
    std::cout << "invalid: " << report.violations.size() << (report.truncated ? "+" : "") << " violation"
              << (report.violations.size() == 1 ? "" : "s") << "\n";
    return exit_negative;
}

// --- stats -------------------------------------------------------------------

int run_stats(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "GRAPH.json");
    const auto g = memplan::read_graph_json(a->positional[0]);

    std::size_t n_phase[3] = {0, 0, 0};
    for (const auto& o : g.ops()) ++n_phase[static_cast<int>(o.phase)];
    const memplan::graph_index<memplan::graph> index(g);
    std::size_t n_persistent = 0, n_inputs = 0;
    std::uint64_t total = 0, persistent = 0, max_workspace = 0;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& x = g.tensor(static_cast<memplan::graph::id_type>(t));
        total += x.bytes; // validate() proved that the sums fit
        if (x.persistent) {
            ++n_persistent;
            persistent += x.bytes;
        } else if (index.is_graph_input(static_cast<memplan::graph::id_type>(t))) {
            ++n_inputs;
        }
    }
    for (const auto& o : g.ops()) {
        max_workspace = std::max(max_workspace, o.workspace);
        for (const auto& v : o.variants) max_workspace = std::max(max_workspace, v.workspace);
    }
    std::cout << "graph:                      " << g.name() << "\n"
              << "ops:                        " << g.num_ops() << " (forward " << n_phase[0] << ", backward "
              << n_phase[1] << ", update " << n_phase[2] << ")\n"
              << "tensors:                    " << g.num_tensors() << " (persistent " << n_persistent
              << ", other graph inputs " << n_inputs << ", outputs " << g.outputs().size() << ")\n"
              << "total tensor bytes:         " << bytes_both(total) << "\n"
              << "persistent bytes:           " << bytes_both(persistent) << "\n"
              << "largest workspace:          " << bytes_both(max_workspace) << "\n";
    if (g.num_ops() > 0)
        std::cout << "LB, default schedule:       "
                  << bytes_both(memplan::schedule_lower_bound(g, memplan::default_schedule(g))) << "\n";
    std::cout << "LB, any schedule:           " << bytes_both(memplan::schedule_free_lower_bound(g)) << "\n";
    return exit_ok;
}

// --- plan --------------------------------------------------------------------

/// The store-all plan of `g`: the arena that budgets in percent refer to.
memplan::remat_result store_all_checked(const memplan::graph& g, const memplan::remat_options& base) {
    memplan::remat_options o;
    o.alignment = base.alignment;
    o.time_limit_seconds = base.time_limit_seconds;
    auto r = memplan::store_all{}.plan(g, o);
    if (!memplan::has_solution(r.status))
        throw internal_error("store_all found no plan for graph '" + g.name() + "': " + r.message);
    return r;
}

/// A rematerialization plan the validator rejects is an internal error.
void check_remat_plan(const memplan::graph& g, const memplan::remat_result& r) {
    const auto report = memplan::check_plan(g, r.planned.plan);
    if (!report.ok())
        throw internal_error("rematerialization planner '" + r.planner + "' made an invalid plan for graph '" +
                             g.name() + "':\n" + report.to_string());
}

std::string percent(double fraction, int decimals = 2) { return memplan::cli::fixed(100.0 * fraction, decimals) + " %"; }

std::string signed_percent(double fraction) {
    if (std::abs(fraction) < 5e-5) fraction = 0; // no "-0.00"
    return (fraction >= 0 ? "+" : "") + memplan::cli::fixed(100.0 * fraction, 2) + " %";
}

/// `plan --budget`: rematerialization within a memory budget.
int run_plan_remat(const parsed_args& a) {
    for (auto key : {"--alloc", "--order"})
        if (a.has(key))
            throw memplan::error("cli", std::string("option ") + key +
                                            " cannot be combined with --budget (rematerialization planners order and "
                                            "place the buffers themselves)");
    const auto budget_spec = memplan::cli::parse_budget("--budget", a.required("--budget"));
    const auto solver = allocator_option(a).solver; // checks --solver and --time-limit
    const auto name = memplan::cli::remat_from(a.value_or("--remat", memplan::cli::default_remat_name()));
    memplan::remat_options opt;
    opt.alignment = a.integer_or("--alignment", default_alignment, 1);
    opt.time_limit_seconds = time_limit_option_value(a);
    const auto g = memplan::read_graph_json(a.positional[0]);
    if (g.num_ops() == 0) throw memplan::error("cli", a.positional[0] + ": the graph has no ops to plan");

    const auto base = store_all_checked(g, opt);
    opt.budget = budget_spec.of(base.arena());
    opt.on_progress = memplan::cli::remat_progress_printer();
    const auto r = memplan::cli::remat_with(name, g, opt, solver);
    memplan::cli::clear_progress();
    const bool fits = memplan::has_solution(r.status) && r.arena() <= opt.budget;
    if (fits) check_remat_plan(g, r);
    const auto output = a.value("--output");
    if (fits && output) memplan::write_plan_json(*output, g, r.planned.plan); // before any output: a failure is one line

    const std::string who = r.planner.empty() || r.planner == name ? name : name + " -> " + r.planner;
    std::cout << "graph:         " << g.name() << " (" << g.num_ops() << " ops)\n"
              << "planner:       " << who << "\n"
              << "status:        " << memplan::to_string(r.status) << (fits ? "" : ": no plan within the budget")
              << "\n"
              << "budget:        " << bytes_both(opt.budget) << ", "
              << percent(ratio(opt.budget, base.arena()), 1) << " of store-all\n"
              << "store-all:     " << bytes_both(base.arena()) << "\n";
    if (!fits) {
        std::cout << "any schedule:  " << bytes_both(r.min_memory)
                  << (r.min_memory_op.empty() ? "" : " (op '" + r.min_memory_op + "')") << "\n"
                  << "planning time: " << memplan::cli::human_seconds(r.seconds) << "\n";
        if (output) std::cout << "nothing written\n";
        std::cout.flush();
        const std::string reason = r.message.empty() ? "no plan within the budget" : r.message;
        if (r.status == memplan::status::infeasible) {
            std::cerr << "memplan: infeasible: " << reason << "\n";
            return exit_infeasible;
        }
        std::cerr << "memplan: no plan: " << reason << "\n";
        return exit_negative;
    }
    const std::size_t recomputed = r.planned.plan.steps.size() >= g.num_ops() ? r.planned.plan.steps.size() - g.num_ops() : 0;
    std::cout << "arena:         " << bytes_both(r.arena()) << ", " << percent(ratio(r.arena(), base.arena()), 1)
              << " of store-all\n"
              << "overhead:      " << signed_percent(r.overhead()) << " (cost " << memplan::cli::fixed(r.cost, 1)
              << " vs store-all " << memplan::cli::fixed(r.base_cost, 1) << ")\n"
              << "steps:         " << r.planned.plan.steps.size() << " (" << recomputed << " recomputed)\n"
              << "lower bound:   " << bytes_both(r.planned.lower_bound) << "\n"
              << "planning time: " << memplan::cli::human_seconds(r.seconds) << "\n";
    if (output) std::cout << "wrote " << *output << "\n";
    return exit_ok;
}

int run_plan(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args,
                                 {{{"--output", "-o"}, true}, alloc_option, alignment_option, solver_option,
                                  time_limit_option, order_option, {{"--budget"}, true}, remat_option});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "GRAPH.json");
    if (a->has("--budget")) return run_plan_remat(*a);
    if (a->has("--remat")) throw memplan::error("cli", "option --remat needs --budget");
    const auto allocator = allocator_option(*a);
    const auto order = order_option_value(*a);
    const auto alignment = a->integer_or("--alignment", default_alignment, 1);
    const auto g = memplan::read_graph_json(a->positional[0]);
    if (g.num_ops() == 0) throw memplan::error("cli", a->positional[0] + ": the graph has no ops to plan");

    const auto ordered = memplan::cli::order_with(order, g, allocator.solver, allocator.time_limit_seconds);
    const auto r = plan_checked(g, ordered.schedule, allocator, alignment);
    if (auto out = a->value("--output")) memplan::write_plan_json(*out, g, r.plan);
    const auto default_lb = memplan::schedule_lower_bound(g, memplan::default_schedule(g));
    std::cout << "graph:         " << g.name() << " (" << g.num_ops() << " ops, " << r.plan.buffers.size()
              << " buffers)\n"
              << "order:         " << order << " (" << memplan::to_string(ordered.status) << "), LB "
              << bytes_both(ordered.peak) << " vs default order " << bytes_both(default_lb) << ", "
              << memplan::cli::human_seconds(ordered.seconds) << "\n"
              << "allocator:     " << allocator.which << " (" << memplan::to_string(r.status) << "), alignment "
              << alignment << "\n"
              << "arena:         " << bytes_both(r.plan.arena_bytes) << "\n"
              << "lower bound:   " << bytes_both(r.lower_bound) << "\n"
              << "arena / LB:    " << memplan::cli::fixed(ratio(r.plan.arena_bytes, r.lower_bound), 4) << "\n"
              << "planning time: " << memplan::cli::human_seconds(r.seconds + ordered.seconds) << "\n";
    if (auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    return exit_ok;
}

// --- pareto ------------------------------------------------------------------

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
    const auto solver = allocator_option(*a).solver; // checks --solver and --time-limit
    const auto name = memplan::cli::remat_from(a->value_or("--remat", memplan::cli::default_remat_name()));
    const auto points = a->integer_or("--points", 8, 2);
    if (points > 1000) throw memplan::error("cli", "option --points: at most 1000, got " + std::to_string(points));
    memplan::remat_options opt;
    opt.alignment = a->integer_or("--alignment", default_alignment, 1);
    opt.time_limit_seconds = time_limit_option_value(*a);
    const auto g = memplan::read_graph_json(a->positional[0]);
    if (g.num_ops() == 0) throw memplan::error("cli", a->positional[0] + ": the graph has no ops to plan");

    memplan::pareto_options po;
    po.points = static_cast<std::size_t>(points);
    po.alignment = opt.alignment;
    po.store_all_time_limit = opt.time_limit_seconds;
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
    const auto curve = memplan::pareto_sweep(g, [&](std::uint64_t budget) {
        auto o = opt;
        o.budget = budget;
        return memplan::cli::remat_with(name, g, o, solver);
    }, po);
    memplan::cli::clear_progress();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& p : curve)
        if (memplan::has_solution(p.result.status)) check_remat_plan(g, p.result);
    const std::uint64_t top = curve.back().budget; // the store-all arena (pareto_sweep's last point)

    // Files before any output: a failure is one line.
    if (const auto out = a->value("--output")) memplan::write_pareto_csv(*out, curve);
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
        memplan::write_svg_plot(*svg, plot);
    }

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
              << bytes_both(top) << "\n\n"
              << t.str();
    bool carried = false;
    for (const auto& p : curve) carried = carried || p.carried;
    if (carried) std::cout << "* a cheaper plan found at a smaller budget, which fits this one too\n";
    std::cout << "sweep time: " << memplan::cli::human_seconds(secs) << "\n";
    if (const auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    if (const auto svg = a->value("--svg")) std::cout << "wrote " << *svg << "\n";
    return exit_ok;
}

// --- check -------------------------------------------------------------------

int run_check(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {});
    if (!a) return exit_ok;
    a->expect_positional(2, 2, "GRAPH.json PLAN.json");
    const auto g = memplan::read_graph_json(a->positional[0]);
    const auto p = memplan::read_plan_json(a->positional[1], g);
    const auto report = memplan::check_plan(g, p);
    if (report.ok()) {
        std::cout << "valid\n";
        return exit_ok;
    }
    return print_invalid(report);
}

// --- alloc -------------------------------------------------------------------

int run_alloc(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(
        c, args,
        {{{"--input", "-i"}, true}, {{"--output", "-o"}, true}, {{"--capacity"}, true}, alloc_option, solver_option,
         time_limit_option});
    if (!a) return exit_ok;
    a->expect_positional(0, 0, "");
    const auto input = a->required("--input");
    const auto output = a->required("--output");
    const auto allocator = allocator_option(*a);
    const auto capacity = a->integer_or("--capacity", 0, 1);
    auto csv = memplan::read_offset_csv(input);
    csv.problem.alignment = 1;
    csv.problem.capacity = capacity;

    const auto r = allocator.place(csv.problem);
    if (!memplan::has_solution(r.status)) {
        std::cout << "allocator:   " << allocator.which << "\n"
                  << "status:      " << memplan::to_string(r.status) << (r.message.empty() ? "" : ": ")
                  << r.message << "\n";
        return exit_negative;
    }
    const auto report = memplan::check_placement(csv.problem, r.offsets, std::uint64_t{0});
    if (!report.ok())
        throw internal_error("allocator '" + allocator.which + "' made an invalid placement of '" + input + "':\n" +
                             report.to_string());
    const auto height = memplan::placement_height(csv.problem, r.offsets);
    const auto lb = memplan::lower_bound(csv.problem);
    const bool fits = capacity == 0 || height <= capacity;
    if (fits) memplan::write_offset_csv(output, csv, r.offsets); // before any output: a failure is one line
    std::cout << "buffers:     " << csv.ids.size() << "\n"
              << "allocator:   " << allocator.which << " (" << memplan::to_string(r.status) << ")\n"
              << "height:      " << bytes_both(height) << "\n"
              << "lower bound: " << bytes_both(lb) << "\n"
              << "height / LB: " << memplan::cli::fixed(ratio(height, lb), 4) << "\n"
              << "time:        " << memplan::cli::human_seconds(r.seconds) << "\n";
    if (!fits) {
        std::cout << "over capacity: height " << height << " > capacity " << capacity << "; nothing written\n";
        return exit_negative;
    }
    std::cout << "wrote " << output << "\n";
    return exit_ok;
}

// --- check-csv -----------------------------------------------------------------

int run_check_csv(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {{{"--capacity"}, true}});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "OFFSETS.csv");
    const auto capacity = a->integer_or("--capacity", 0, 1);
    const auto csv = memplan::read_offset_csv(a->positional[0]);
    if (!csv.offsets) throw memplan::error("cli", a->positional[0] + ": the file has no 'offset' column to check");
    const auto report = memplan::check_placement(csv.problem, *csv.offsets, capacity);
    if (report.ok()) {
        const auto height = memplan::placement_height(csv.problem, *csv.offsets);
        const auto lb = memplan::lower_bound(csv.problem);
        std::cout << "valid: height " << height << ", lower bound " << lb << ", height / LB "
                  << memplan::cli::fixed(ratio(height, lb), 4) << "\n";
        return exit_ok;
    }
    return print_invalid(report);
}

// --- import-csv ----------------------------------------------------------------

int run_import_csv(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {{{"--output", "-o"}, true}, {{"--name"}, true}});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "IN.csv");
    const auto output = a->required("--output");
    const std::filesystem::path input = a->positional[0];
    const auto csv = memplan::read_offset_csv(input);
    const auto name = a->value_or("--name", input.stem().string());
    const auto g = memplan::graph_from_intervals(csv.problem, csv.ids, name);
    memplan::validate(g);
    const auto lb = g.num_ops() ? memplan::schedule_lower_bound(g, memplan::default_schedule(g)) : 0;
    memplan::write_graph_json(output, g);
    std::cout << "graph:                 " << g.name() << " (" << g.num_tensors() << " tensors, " << g.num_ops()
              << " ops)\n"
              << "LB, default schedule:  " << bytes_both(lb) << "\n"
              << "LB of the instance:    " << bytes_both(memplan::lower_bound(csv.problem)) << "\n"
              << "wrote " << output << "\n";
    return exit_ok;
}

// --- import-checkmate ------------------------------------------------------------

int run_import_checkmate(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {{{"--output", "-o"}, true}});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "IN.json");
    const auto g = memplan::read_checkmate_json(a->positional[0]);
    const auto lb = g.num_ops() ? memplan::schedule_lower_bound(g, memplan::default_schedule(g)) : 0;
    std::size_t backward = 0;
    for (const auto& o : g.ops()) backward += o.phase == memplan::phase::backward ? 1 : 0;
    if (const auto out = a->value("--output")) memplan::write_graph_json(*out, g);
    std::cout << "graph:                 " << g.name() << " (" << g.num_ops() << " ops, " << backward
              << " backward)\n"
              << "LB, default schedule:  " << bytes_both(lb) << "\n";
    if (const auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    return exit_ok;
}

// --- zoo -------------------------------------------------------------------------

int run_zoo(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args,
                                 {{{"--output", "-o"}, true}, {{"--list"}, false}, {{"--batch"}, true},
                                  {{"--image"}, true}, {{"--seq"}, true}, {{"--optimizer"}, true},
                                  {{"--dtype"}, true}, {{"--device"}, true}});
    if (!a) return exit_ok;
    if (a->has("--list")) {
        a->expect_positional(0, 0, "no model with --list");
        memplan::cli::text_table t;
        t.add_row({"model", "batch", "input"});
        for (auto name : memplan::zoo_names()) {
            const auto& d = memplan::zoo_default(name);
            t.add_row({std::string(name), std::to_string(d.batch),
                       d.seq ? "seq " + std::to_string(d.seq)
                             : std::to_string(d.height) + "x" + std::to_string(d.width)});
        }
        std::cout << t.str();
        return exit_ok;
    }
    a->expect_positional(1, 1, "NAME");
    const std::string name = a->positional[0];
    memplan::zoo_default(name); // rejects unknown names with the list
    memplan::zoo_options o;
    o.batch = static_cast<std::size_t>(a->integer_or("--batch", 0, 1));
    o.seq = static_cast<std::size_t>(a->integer_or("--seq", 0, 1));
    if (const auto image = a->value("--image")) {
        const auto x = image->find('x');
        auto number = [&](std::string_view s) {
            if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string_view::npos || s == "0")
                throw memplan::error("cli", "--image expects HxW with positive integers, got '" + *image + "'");
            return static_cast<std::size_t>(std::stoul(std::string(s)));
        };
        if (x == std::string::npos)
            throw memplan::error("cli", "--image expects HxW with positive integers, got '" + *image + "'");
        o.height = number(std::string_view(*image).substr(0, x));
        o.width = number(std::string_view(*image).substr(x + 1));
    }
    if (const auto v = a->value("--optimizer")) {
        const auto opt = memplan::parse_optimizer(*v);
        if (!opt) throw memplan::error("cli", "--optimizer expects sgd or adam, got '" + *v + "'");
        o.opt = *opt;
    }
    if (const auto v = a->value("--dtype")) {
        const auto dt = memplan::nn::parse_dtype(*v);
        if (!dt) throw memplan::error("cli", "--dtype expects fp32, fp16 or bf16, got '" + *v + "'");
        o.dt = *dt;
    }
    if (const auto v = a->value("--device")) {
        const auto dev = memplan::nn::find_device(*v);
        if (!dev) throw memplan::error("cli", "--device expects v100 or h200, got '" + *v + "'");
        o.device = *dev;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto net = memplan::zoo_network(name, o);
    const auto g = memplan::zoo_graph(name, o);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto lb = memplan::schedule_lower_bound(g, memplan::default_schedule(g));
    if (const auto out = a->value("--output")) memplan::write_graph_json(*out, g);
    std::cout << "graph:                 " << g.name() << " (" << g.num_tensors() << " tensors, " << g.num_ops()
              << " ops)\n"
              << "parameters:            " << memplan::nn::parameter_count(net) << "\n"
              << "LB, default schedule:  " << bytes_both(lb) << "\n"
              << "LB, schedule-free:     " << bytes_both(memplan::schedule_free_lower_bound(g)) << "\n"
              << "built in:              " << memplan::cli::human_seconds(secs) << "\n";
    if (const auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    return exit_ok;
}

// --- report --------------------------------------------------------------------

int run_report(const command& c, const std::vector<std::string>& args) {
    const auto a =
        parse_or_help(c, args, {alloc_option, alignment_option, solver_option, time_limit_option, order_option});
    if (!a) return exit_ok;
    a->expect_positional(1, static_cast<std::size_t>(-1), "GRAPH.json...");
    const auto allocator = allocator_option(*a, report_allocator);
    const auto order = order_option_value(*a);
    const auto alignment = a->integer_or("--alignment", default_alignment, 1);

    // Read everything first: a bad file fails the command before any output.
    std::vector<memplan::graph> graphs;
    for (const auto& f : a->positional) graphs.push_back(memplan::read_graph_json(f));

    // Two baselines: no reuse at all, and what a framework does (the listed
    // order, each tensor allocated at its first use and freed after its last
    // in a best-fit caching allocator: online_best_fit, simulated).
    memplan::cli::text_table t;
    t.add_row({"graph", "ops", "no reuse", "framework", "memplan", "arena bytes", "LB", "arena/LB", "saved",
               "vs framework", "time"});
    for (const auto& g : graphs) {
        if (g.num_ops() == 0) {
            t.add_row({g.name(), "0", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
            continue;
        }
        const auto none = plan_checked(g, memplan::cli::allocator_from("no_reuse", "", 1), alignment);
        const auto framework = plan_checked(g, memplan::cli::allocator_from("online_best_fit", "", 1), alignment);
        const auto ordered = memplan::cli::order_with(order, g, allocator.solver, allocator.time_limit_seconds);
        const auto r = plan_checked(g, ordered.schedule, allocator, alignment);
        const double saved = 100.0 * (1.0 - ratio(r.plan.arena_bytes, none.plan.arena_bytes));
        const double saved_fw = 100.0 * (1.0 - ratio(r.plan.arena_bytes, framework.plan.arena_bytes));
        t.add_row({g.name(), std::to_string(g.num_ops()), memplan::cli::human_bytes(none.plan.arena_bytes),
                   memplan::cli::human_bytes(framework.plan.arena_bytes), memplan::cli::human_bytes(r.plan.arena_bytes),
                   std::to_string(r.plan.arena_bytes), memplan::cli::human_bytes(r.lower_bound),
                   memplan::cli::fixed(ratio(r.plan.arena_bytes, r.lower_bound), 4), memplan::cli::fixed(saved, 1) + " %",
                   memplan::cli::fixed(saved_fw, 1) + " %", memplan::cli::human_seconds(r.seconds + ordered.seconds)});
    }
    std::cout << "order " << order << ", allocator " << allocator.which << ", alignment " << alignment
              << "; framework = listed order with a simulated best-fit caching allocator;\n"
              << "LB = largest live bytes over the steps of the planned order\n\n"
              << t.str();
    return exit_ok;
}

// --- the table of subcommands --------------------------------------------------

const std::vector<command>& commands() {
    static const std::vector<command> table{
        {"stats", "memplan stats GRAPH.json", "Tensors, ops, total bytes and the lower bounds of a graph.",
         "The lower bound of the default schedule is the largest live bytes over its steps; the schedule-free\n"
         "bound is the largest single op (inputs, outputs, workspace, persistent tensors).\n",
         run_stats},
        {"plan",
         "memplan plan GRAPH.json [-o PLAN.json] [--order NAME] [--alloc NAME] [--solver NAME] [--time-limit S]\n"
         "                        [--alignment N] [--budget BYTES|P% [--remat NAME]]",
         "Orders the ops, places every buffer in one arena, and checks the plan.",
         "  -o, --output PLAN.json  write the plan (memplan.plan JSON)\n"
         "  --order NAME            operator order: default (as listed), greedy (memory-aware list\n"
         "                          scheduler), ilp (MODeL's formulation; windowed on large graphs)\n"
         "  --alloc NAME            allocator: auto (default: the best heuristic, then the exact search\n"
         "                          until the arena meets the lower bound or the time limit), no_reuse,\n"
         "                          greedy_by_size, greedy_by_lifetime, online_best_fit, best_heuristic,\n"
         "                          exact, milp (the offset MILP on --solver)\n"
         "  --solver NAME           MILP backend for milp, --order ilp and MILP-based --remat planners:\n"
         "                          glpk (default) or cbc\n"
         "  --time-limit S          seconds for exact, milp, --order ilp and --remat (default 10)\n"
         "  --alignment N           every offset a multiple of N bytes (default 256)\n"
         "  --budget BYTES|P%       rematerialization: the arena must fit BYTES (or 7.5GiB, 8GB, ...) or\n"
         "                          P percent of the store-all arena; the planner chooses what to keep,\n"
         "                          what to recompute and each op's variant, then orders and places\n"
         "                          (not with --order/--alloc). Prints the overhead: cost / store-all\n"
         "                          cost - 1. A budget below what any schedule needs exits 4 with the\n"
         "                          reason; no plan found in the time limit exits 1\n"
         "  --remat NAME            rematerialization planner for --budget (default: auto when\n"
         "                          available, else store_all; an unknown name lists them)\n"
         "Long searches print their progress on stderr when it is a terminal.\n",
         run_plan},
        {"pareto",
         "memplan pareto GRAPH.json [--points N] [--remat NAME] [--time-limit S] [-o CURVE.csv] [--svg CURVE.svg]\n"
         "                          [--solver NAME] [--alignment N]",
         "Sweeps memory budgets from store-all down to the smallest one a planner can meet.",
         "Bisects for the smallest budget at which the planner still finds a plan, then plans at N budgets\n"
         "evenly spaced from there to the store-all arena. Each point shows the cheapest plan found that\n"
         "fits its budget (marked * when it came from a run at a smaller budget).\n"
         "  --points N              budgets on the curve, both ends included (default 8, at least 2)\n"
         "  --remat NAME            rematerialization planner (default: auto when available, else\n"
         "                          store_all; an unknown name lists them)\n"
         "  --time-limit S          seconds per planner run (default 10)\n"
         "  -o, --output CURVE.csv  budget_bytes,arena_bytes,overhead,planner,status,seconds\n"
         "  --svg CURVE.svg         the curve as a plot: overhead (%) against the arena\n"
         "  --solver NAME           MILP backend for MILP-based planners: glpk (default) or cbc\n"
         "  --alignment N           every offset a multiple of N bytes (default 256)\n",
         run_pareto},
        {"check", "memplan check GRAPH.json PLAN.json", "Checks a plan against its graph (formats.md rules 1-7).",
         "Prints \"valid\" and exits 0, or prints every violation, one a line, and exits 1.\n", run_check},
        {"alloc",
         "memplan alloc --input IN.csv --output OUT.csv [--capacity BYTES] [--alloc NAME] [--solver NAME]\n"
         "                          [--time-limit S]",
         "Assigns offsets to an offset CSV instance (id,lower,upper,size), e.g. MiniMalloc's.",
         "  -i, --input IN.csv      the instance\n"
         "  -o, --output OUT.csv    the rows with an offset column appended\n"
         "  --capacity BYTES        find a placement within it (exact/milp decide; others are checked);\n"
         "                          exit 1 and write nothing when none was found\n"
         "  --alloc NAME            allocator: auto (default: the best heuristic, then the exact search\n"
         "                          until the arena meets the lower bound or the time limit), no_reuse,\n"
         "                          greedy_by_size, greedy_by_lifetime, online_best_fit, best_heuristic,\n"
         "                          exact, milp (the offset MILP on --solver)\n"
         "  --solver NAME           MILP backend for milp and --order ilp: glpk (default) or cbc\n"
         "  --time-limit S          seconds for exact, milp and --order ilp (default 10)\n"
         "Long searches print their progress on stderr when it is a terminal.\n",
         run_alloc},
        {"check-csv", "memplan check-csv OFFSETS.csv [--capacity BYTES]",
         "Checks an offset CSV that has an offset column (ours or MiniMalloc's).",
         "Prints \"valid\" with the height and exits 0, or prints every violation and exits 1.\n",
         run_check_csv},
        {"import-csv", "memplan import-csv IN.csv -o GRAPH.json [--name NAME]",
         "Turns an offset CSV instance into a graph whose default schedule has the same lifetimes.",
         "  -o, --output GRAPH.json  the graph to write\n"
         "  --name NAME              the graph's name (default: the file's stem)\n",
         run_import_csv},
        {"import-checkmate", "memplan import-checkmate IN.json [-o GRAPH.json]",
         "Imports a Checkmate / Moccasin node-link training graph (formats.md section 4).",
         "  -o, --output GRAPH.json  the graph to write (memplan.graph JSON)\n"
         "Ops are ordered topologically, ties broken by the smaller node id.\n",
         run_import_checkmate},
        {"zoo", "memplan zoo NAME [--batch N] [--image HxW] [--seq N] [--optimizer sgd|adam] [--dtype fp32|fp16|bf16]\n"
                "           [--device v100|h200] [-o GRAPH.json]  |  memplan zoo --list",
         "Builds the training graph of a zoo model (forward, loss, backward, optimizer update).",
         "  --batch N            batch size (default: the model's; MONeT's settings for the CNNs)\n"
         "  --image HxW          input image size (CNNs)\n"
         "  --seq N              sequence length (transformers)\n"
         "  --optimizer NAME     sgd (with momentum, default) or adam\n"
         "  --dtype NAME         fp32 (default), fp16, bf16\n"
         "  --device NAME        cost profile: v100 (default) or h200\n"
         "  -o, --output FILE    write the graph (memplan.graph JSON)\n"
         "  --list               list the models and their defaults\n",
         run_zoo},
        {"report", "memplan report GRAPH.json... [--order NAME] [--alloc NAME] [--alignment N] [--time-limit S]",
         "Plans each graph and prints a table: no-reuse bytes, arena, lower bound, ratio, savings, time.", "",
         run_report},
    };
    return table;
}

const command* find_command(std::string_view name) {
    for (const auto& c : commands())
        if (c.name == name) return &c;
    return nullptr;
}

void print_usage() {
    std::cout << "usage: memplan COMMAND [ARGS...]\n\n"
                 "memplan plans the memory of deep-network training: where every tensor lives in one arena.\n\n"
                 "commands:\n";
    std::size_t w = 0;
    for (const auto& c : commands()) w = std::max(w, c.name.size());
    for (const auto& c : commands())
        std::cout << "  " << c.name << std::string(w - c.name.size() + 2, ' ') << c.summary << "\n";
    std::cout << "  help" << std::string(w - 4 + 2, ' ') << "help CMD shows the options of a command\n"
              << "\nexit codes: 0 done, 1 invalid plan, capacity exceeded or no plan found within a budget,\n"
                 "2 bad arguments or input, 3 internal error, 4 a budget no schedule can meet.\n"
                 "Options: --help, --version.\n";
}

int run(const std::vector<std::string>& args) {
    if (args.empty()) throw memplan::error("cli", "no command given; try 'memplan --help'");
    const std::string& name = args[0];
    if (name == "--help" || name == "-h") {
        print_usage();
        return exit_ok;
    }
    if (name == "--version") {
        std::cout << "memplan " MEMPLAN_VERSION "\n";
        return exit_ok;
    }
    if (name == "help") {
        if (args.size() == 1) {
            print_usage();
            return exit_ok;
        }
        if (args.size() > 2) throw memplan::error("cli", "memplan help: unexpected argument '" + args[2] + "'");
        const command* c = find_command(args[1]);
        if (!c) throw memplan::error("cli", "memplan help: unknown command '" + args[1] + "'");
        print_help(*c);
        return exit_ok;
    }
    const command* c = find_command(name);
    if (!c) {
        if (!name.empty() && name[0] == '-') throw memplan::error("cli", "unknown option '" + name + "'");
        throw memplan::error("cli", "unknown command '" + name + "'; try 'memplan --help'");
    }
    return c->run(*c, std::vector<std::string>(args.begin() + 1, args.end()));
}

/// The message of an exception as one line.
std::string one_line(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    for (auto& ch : s)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return s;
}

} // namespace

int main(int argc, char** argv) {
    try {
        std::vector<std::string> args(argv + 1, argv + argc);
        return run(args);
    } catch (const memplan::error& e) {
        std::cout.flush();
        std::cerr << "memplan: error: " << one_line(memplan::detail::bare_message(e)) << "\n";
        return 2;
    } catch (const internal_error& e) {
        std::cout.flush();
        std::cerr << "memplan: internal error: " << e.what() << "\n";
        return exit_internal;
    } catch (const std::exception& e) {
        std::cout.flush();
        std::cerr << "memplan: internal error: " << one_line(e.what()) << "\n";
        return exit_internal;
    } catch (...) {
        std::cerr << "memplan: internal error: unknown exception\n";
        return exit_internal;
    }
}
