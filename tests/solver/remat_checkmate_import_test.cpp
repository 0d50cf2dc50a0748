// Graphs in the published Checkmate / Moccasin format (formats.md §4),
// imported and planned at 80% and 90% of the store-all topological-order
// peak, as Moccasin's benchmarks do: every plan is valid, and `auto` (with
// the solver, so the Checkmate MILP is one of its members) is never worse
// than the `checkmate` planner alone.
#include "backends.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/io/checkmate_json.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/remat/select.hpp>

#include <random>
#include <string>

using namespace memplan;

namespace {

// A forward chain with skip connections and its mirrored backward pass, as
// Checkmate's exporter writes it: node k of the forward part feeds k+1 (and
// sometimes k+2); backward node b_k reads the gradient from b_{k+1} and the
// forward node(s) its forward op read. Ids are shuffled (the importer orders
// topologically, ties by smaller id).
std::string random_checkmate_json(std::mt19937_64& rng, int n) {
    std::uniform_int_distribution<int> ram(10, 200), cpu(1, 20);
    std::bernoulli_distribution skip(0.3);
    std::vector<int> id(static_cast<std::size_t>(2 * n));
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<int>(i);
    std::shuffle(id.begin(), id.end(), rng);
    std::string nodes, links;
    auto node = [&](int k, bool backward) {
        if (!nodes.empty()) nodes += ",";
        nodes += "{\"id\":" + std::to_string(id[static_cast<std::size_t>(k)]) + ",\"name\":\"n" + std::to_string(k) +
                 "\",\"backward\":" + (backward ? "true" : "false") + ",\"cost_cpu\":" + std::to_string(cpu(rng)) +
                 ",\"cost_ram\":" + std::to_string(ram(rng)) + "}";
    };
    auto link = [&](int a, int b) {
        if (!links.empty()) links += ",";
        links += "{\"source\":" + std::to_string(id[static_cast<std::size_t>(a)]) +
                 ",\"target\":" + std::to_string(id[static_cast<std::size_t>(b)]) + "}";
    };
    for (int k = 0; k < n; ++k) node(k, false);
    for (int k = 0; k < n; ++k) node(n + k, true); // n + k: backward of forward node n-1-k
    for (int k = 0; k + 1 < n; ++k) {
        link(k, k + 1);
        if (k + 2 < n && skip(rng)) {
            link(k, k + 2);
            link(k, 2 * n - 1 - (k + 2)); // the backward of k+2 reads k too
        }
    }
    link(n - 1, n); // the loss's gradient
    for (int k = 0; k < n; ++k) {
        const int b = n + k, f = n - 1 - k; // b is the backward of f
        if (k > 0) link(b - 1, b);
        if (f > 0) link(f - 1, b); // reads the input of its forward op
        link(f, b);                // and its output
    }
    return "{\"directed\":true,\"multigraph\":false,\"graph\":{\"name\":\"random\"},\"nodes\":[" + nodes +
           "],\"links\":[" + links + "]}";
}

} // namespace

TEST_CASE_TEMPLATE("remat.checkmate_format.80_and_90_percent_of_the_peak", S, MEMPLAN_SOLVERS) {
    std::mt19937_64 rng(42);
    int compared = 0;
    for (int round = 0; round < 6; ++round) {
        const graph g = parse_checkmate_json(random_checkmate_json(rng, 6 + round % 3), "random.json");
        const auto peak = schedule_lower_bound(g, default_schedule(g));
        for (double f : {0.9, 0.8}) {
            remat_options o;
            o.budget = static_cast<std::uint64_t>(double(peak) * f);
            o.alignment = 1; // Checkmate's sizes are not aligned; memory is the live-bytes profile
            o.time_limit = 5;
            const auto cm = plan_remat_with("checkmate", g, o, S{});
            const auto a = plan_remat_with("auto", g, o, S{});
            CAPTURE(round);
            CAPTURE(f);
            if (has_solution(a.status)) {
                const auto report = check_plan(g, a.plan);
                INFO(report.to_string());
                CHECK(report.ok());
                CHECK(a.arena() <= o.budget);
            }
            if (has_solution(cm.status)) {
                CHECK(check_plan(g, cm.plan).ok());
                REQUIRE(has_solution(a.status));
                CHECK(a.cost <= cm.cost + 1e-9);
                ++compared;
            } else if (cm.status == status::infeasible) {
                CHECK(a.status == status::infeasible);
            }
        }
    }
    CHECK(compared >= 6);
}
