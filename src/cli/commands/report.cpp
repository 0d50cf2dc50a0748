// memplan report: plans each graph and prints a table: no-reuse bytes, arena, lower bound, ratio, savings, time.
#include "planners.hpp"

#include <memplan/io/graph_json.hpp>

namespace memplan::cli {

namespace {

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
        const auto none = plan_checked(g, allocator_named("no_reuse"), alignment);
        const auto framework = plan_checked(g, allocator_named("online_best_fit"), alignment);
        // --time-limit applies per graph here: each gets a fresh clock.
        auto per_graph = allocator;
        const auto until = command_deadline(*a);
        per_graph.settings.time_limit = until;
        const auto ordered = order_with(order, g, *a, until.share(0.5));
        const auto r = plan_checked(g, ordered.schedule, per_graph, alignment);
        const double saved = 100.0 * (1.0 - ratio(r.plan.arena_bytes, none.plan.arena_bytes));
        const double saved_fw = 100.0 * (1.0 - ratio(r.plan.arena_bytes, framework.plan.arena_bytes));
        t.add_row({g.name(), std::to_string(g.num_ops()), memplan::cli::human_bytes(none.plan.arena_bytes),
                   memplan::cli::human_bytes(framework.plan.arena_bytes), memplan::cli::human_bytes(r.plan.arena_bytes),
                   std::to_string(r.plan.arena_bytes), memplan::cli::human_bytes(r.bound),
                   memplan::cli::fixed(ratio(r.plan.arena_bytes, r.bound), 4), memplan::cli::fixed(saved, 1) + " %",
                   memplan::cli::fixed(saved_fw, 1) + " %", memplan::cli::human_seconds(r.seconds + ordered.seconds)});
    }
    std::cout << "order " << order << ", allocator " << allocator.name() << ", alignment " << alignment
              << "; framework = listed order with a simulated best-fit caching allocator;\n"
              << "LB = largest live bytes over the steps of the planned order\n\n"
              << t.str();
    return exit_ok;
}

} // namespace

const command report_command{
    "report", "memplan report GRAPH.json... [--order NAME] [--alloc NAME] [--alignment N] [--time-limit S]",
    "Plans each graph and prints a table: no-reuse bytes, arena, lower bound, ratio, savings, time.", "",
    run_report, print_planner_lists};

} // namespace memplan::cli
