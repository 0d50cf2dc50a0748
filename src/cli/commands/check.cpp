// memplan check: checks a plan against its graph (formats.md rules 1-7).
#include "common.hpp"

#include <memplan/io/graph_json.hpp>
#include <memplan/io/plan_json.hpp>
#include <memplan/remat/boundary.hpp>
#include <memplan/remat/budget.hpp>

#include <optional>

namespace memplan::cli {

namespace {

int run_check(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {{{"--budget-on"}, true}});
    if (!a) return exit_ok;
    a->expect_positional(2, 2, "GRAPH.json PLAN.json");
    const auto on = memplan::parse_budget_on("option --budget-on", a->value_or("--budget-on", "peak"));
    const auto given = memplan::read_graph_json(a->positional[0]);
    // A plan made under --budget-on saved is a plan of the boundary memory graph.
    std::optional<memplan::boundary_graph<memplan::graph>> bounded;
    if (on == memplan::budget_on::saved) bounded = memplan::boundary_memory_graph(given);
    const memplan::graph& g = bounded ? bounded->graph : given;
    const auto p = memplan::read_plan_json(a->positional[1], g);
    const auto report = memplan::check_plan(g, p);
    if (report.ok()) {
        std::cout << "valid\n";
        return exit_ok;
    }
    return print_invalid(report);
}

} // namespace

const command check_command{
    "check", "memplan check GRAPH.json PLAN.json [--budget-on peak|saved]",
    "Checks a plan against its graph (formats.md rules 1-7).",
    "Prints \"valid\" and exits 0, or prints every violation, one a line, and exits 1.\n"
    "  --budget-on saved  check a plan that memplan plan --budget-on saved wrote: against the graph\n"
    "                     with the room op it planned (GRAPH.json's boundary memory graph)\n", run_check};

} // namespace memplan::cli
