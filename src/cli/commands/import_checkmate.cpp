// memplan import-checkmate: imports a Checkmate / Moccasin node-link training graph (formats.md section 4).
#include "common.hpp"

#include <memplan/io/checkmate_json.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/plan/bounds.hpp>

namespace memplan::cli {

namespace {

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

} // namespace

const command import_checkmate_command{
    "import-checkmate", "memplan import-checkmate IN.json [-o GRAPH.json]",
    "Imports a Checkmate / Moccasin node-link training graph (formats.md section 4).",
    "  -o, --output GRAPH.json  the graph to write (memplan.graph JSON)\n"
    "Ops are ordered topologically, ties broken by the smaller node id.\n",
    run_import_checkmate};

} // namespace memplan::cli
