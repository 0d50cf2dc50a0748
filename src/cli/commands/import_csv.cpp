// memplan import-csv: turns an offset CSV instance into a graph whose default schedule has the same lifetimes.
#include "common.hpp"

#include <memplan/plan/from_intervals.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/offset_csv.hpp>
#include <memplan/plan/bounds.hpp>

namespace memplan::cli {

namespace {

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

} // namespace

const command import_csv_command{
    "import-csv", "memplan import-csv IN.csv -o GRAPH.json [--name NAME]",
    "Turns an offset CSV instance into a graph whose default schedule has the same lifetimes.",
    "  -o, --output GRAPH.json  the graph to write\n"
    "  --name NAME              the graph's name (default: the file's stem)\n",
    run_import_csv};

} // namespace memplan::cli
