// memplan stats: tensors, ops, total bytes and the lower bounds of a graph.
#include "common.hpp"

#include <memplan/graph/census.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/plan/bounds.hpp>

#include <nlohmann/json.hpp>

namespace memplan::cli {

namespace {

int run_stats(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {json_option});
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
    const std::uint64_t lb_any = memplan::schedule_free_lower_bound(g);
    const auto roles = memplan::census(g);
    if (a->has("--json")) {
        nlohmann::json j{{"graph", g.name()},
                         {"ops", g.num_ops()},
                         {"forward_ops", n_phase[0]},
                         {"backward_ops", n_phase[1]},
                         {"update_ops", n_phase[2]},
                         {"tensors", g.num_tensors()},
                         {"persistent_tensors", n_persistent},
                         {"other_inputs", n_inputs},
                         {"outputs", g.outputs().size()},
                         {"total_bytes", total},
                         {"persistent_bytes", persistent},
                         {"largest_workspace", max_workspace},
                         {"weight_bytes", roles.weights},
                         {"optimizer_state_bytes", roles.optimizer_state},
                         {"saved_activation_bytes", roles.saved},
                         {"weight_gradient_bytes", roles.weight_gradients},
                         {"lb_any", lb_any}};
        if (g.num_ops() > 0) j["lb_default"] = memplan::schedule_lower_bound(g, memplan::default_schedule(g));
        std::cout << j.dump(2) << "\n";
        return exit_ok;
    }
    std::cout << "graph:                      " << g.name() << "\n"
              << "ops:                        " << g.num_ops() << " (forward " << n_phase[0] << ", backward "
              << n_phase[1] << ", update " << n_phase[2] << ")\n"
              << "tensors:                    " << g.num_tensors() << " (persistent " << n_persistent
              << ", other graph inputs " << n_inputs << ", outputs " << g.outputs().size() << ")\n"
              << "total tensor bytes:         " << bytes_both(total) << "\n"
              << "persistent bytes:           " << bytes_both(persistent) << "\n"
              << "  weights:                  " << bytes_both(roles.weights) << "\n"
              << "  optimizer state:          " << bytes_both(roles.optimizer_state) << "\n"
              << "saved for backward:         " << bytes_both(roles.saved) << "\n"
              << "weight gradients:           " << bytes_both(roles.weight_gradients) << "\n"
              << "largest workspace:          " << bytes_both(max_workspace) << "\n";
    if (g.num_ops() > 0)
        std::cout << "LB, default schedule:       "
                  << bytes_both(memplan::schedule_lower_bound(g, memplan::default_schedule(g))) << "\n";
    std::cout << "LB, any schedule:           " << bytes_both(lb_any) << "\n";
    return exit_ok;
}

} // namespace

const command stats_command{
    "stats", "memplan stats GRAPH.json [--json]", "Tensors, ops, total bytes and the lower bounds of a graph.",
    "The lower bound of the default schedule is the largest live bytes over its steps; the schedule-free\n"
    "bound is the largest single op (inputs, outputs, workspace, persistent tensors). Weights are the\n"
    "persistent tensors a forward op reads, optimizer state those only updates read; saved for backward\n"
    "are tensors a forward op writes and a backward op reads; weight gradients those a backward op\n"
    "writes and an update reads (graph/census.hpp).\n"
    "  --json   the figures as one JSON object (bytes; lb_default, lb_any: the two bounds; weight_bytes,\n"
    "           optimizer_state_bytes, saved_activation_bytes, weight_gradient_bytes)\n",
    run_stats};

} // namespace memplan::cli
