// memplan check: checks a plan against its graph (formats.md rules 1-7).
#include "common.hpp"

#include <memplan/io/graph_json.hpp>
#include <memplan/io/plan_json.hpp>

namespace memplan::cli {

namespace {

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

} // namespace

const command check_command{
    "check", "memplan check GRAPH.json PLAN.json", "Checks a plan against its graph (formats.md rules 1-7).",
    "Prints \"valid\" and exits 0, or prints every violation, one a line, and exits 1.\n", run_check};

} // namespace memplan::cli
