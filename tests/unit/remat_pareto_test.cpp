// The Pareto sweep over budgets: points by increasing budget ending at the
// store-all arena, overhead never lower at a lower budget, every plan valid
// and within its budget, the CSV written atomically. A small planner defined
// here (drop the k largest droppable tensors, smallest k that fits) gives the
// sweep a real trade-off whatever planners select.hpp has today.
#include "support/random_graph.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/core/error.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/pareto_csv.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/recompute.hpp>
#include <memplan/remat/select.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// Drops the k largest droppable tensors for the smallest k whose plan fits
/// the budget (a crude planner: more memory saved costs more recomputation).
struct drop_largest {
    const memplan::graph& g;
    memplan::remat_context<memplan::graph> ctx{g};
    std::vector<memplan::graph::id_type> by_size;
    int* calls = nullptr;

    explicit drop_largest(const memplan::graph& graph, int* call_count = nullptr) : g(graph), calls(call_count) {
        for (std::size_t t = 0; t < g.num_tensors(); ++t)
            if (ctx.droppable(static_cast<memplan::graph::id_type>(t)))
                by_size.push_back(static_cast<memplan::graph::id_type>(t));
        std::stable_sort(by_size.begin(), by_size.end(),
                         [&](auto a, auto b) { return g.tensor(a).bytes > g.tensor(b).bytes; });
    }

    memplan::remat_result operator()(std::uint64_t budget) const {
        if (calls) ++*calls;
        memplan::remat_options opt;
        opt.budget = budget;
        auto choice = ctx.keep_all();
        for (std::size_t k = 0; k <= by_size.size(); ++k) {
            if (k > 0) choice.keep[by_size[k - 1]] = 0;
            auto placed = memplan::place_within(g, ctx.schedule_of(choice), budget, opt.alignment, memplan::deadline::passed());
            if (memplan::has_solution(placed.status) && placed.plan.arena_bytes <= budget) {
                memplan::remat_result r;
                r.planner = "drop_largest";
                memplan::detail::finish_remat_result(ctx, opt, std::move(placed), r);
                r.status = memplan::status::feasible;
                return r;
            }
        }
        memplan::remat_result r;
        r.planner = "drop_largest";
        r.base_cost = ctx.base_cost();
        memplan::detail::no_plan_within_budget(ctx, opt, r, "drop_largest");
        return r;
    }
};

memplan::graph example_graph(const char* name) {
    return memplan::read_graph_json(std::string(MEMPLAN_SOURCE_DIR) + "/examples/graphs/" + name);
}

/// The properties every sweep must have.
void check_curve(const memplan::graph& g, const std::vector<memplan::pareto_point>& curve) {
    REQUIRE(!curve.empty());
    const auto top = memplan::store_all{}.plan(g, {}).arena();
    CHECK(curve.back().budget == top);
    const auto [need, op] = memplan::remat_context<memplan::graph>(g).min_memory();
    for (std::size_t i = 0; i < curve.size(); ++i) {
        const auto& p = curve[i];
        CAPTURE(i);
        CAPTURE(p.budget);
        if (i > 0) CHECK(curve[i - 1].budget < p.budget);
        CHECK(p.budget >= std::min<std::uint64_t>(need, top));
        REQUIRE(memplan::has_solution(p.result.status));
        CHECK(p.result.arena() <= p.budget);
        CHECK(p.result.arena() >= p.result.schedule_bound);
        const auto report = memplan::check_plan(g, p.result.plan);
        CHECK_MESSAGE(report.ok(), report.to_string());
        // Lower budget -> overhead not lower.
        if (i > 0) CHECK(curve[i - 1].result.overhead() >= p.result.overhead() - 1e-12);
    }
}

std::string read_all(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// A fresh scratch directory under the system temp directory.
std::filesystem::path scratch_dir(const std::string& name) {
    std::string leaf = "memplan-"; // piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&
    leaf += name;
    leaf += '-';
    leaf += std::to_string(std::random_device{}());
    auto d = std::filesystem::temp_directory_path() / leaf;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

} // namespace

TEST_CASE("remat.pareto.resnet_block") {
    const auto g = example_graph("resnet-block-train.json");
    const drop_largest planner(g);
    memplan::pareto_options po;
    po.points = 6;
    const auto curve = memplan::pareto_sweep(g, planner, po);
    check_curve(g, curve);
    CHECK(curve.size() == 6);
    // The trade-off is real: the smallest budget needs recomputation.
    CHECK(curve.front().budget < curve.back().budget);
    CHECK(curve.front().result.overhead() > 0);
    CHECK(curve.back().result.default_variant_overhead() == doctest::Approx(0.0)); // the store-all plan itself
    // Bisection: the planner finds nothing clearly below the curve's start.
    const auto top = curve.back().budget;
    const auto tol = static_cast<std::uint64_t>(po.tolerance * static_cast<double>(top));
    if (curve.front().budget > tol + 1)
        CHECK_FALSE(memplan::has_solution(planner(curve.front().budget - tol - 1).status));
}

TEST_CASE("remat.pareto.smallest_budget_search") {
    const auto g = example_graph("resnet-block-train.json");
    const drop_largest planner(g);
    const memplan::remat_context<memplan::graph> ctx(g);
    const auto top = memplan::store_all{}.plan(g, {}).arena();
    memplan::fitting_plans<memplan::graph> found;
    CHECK(found.empty());
    CHECK(found.smallest() == nullptr);
    const auto bracket = memplan::smallest_budget_search(ctx, top, planner, found, 0.01, 12, memplan::deadline{});
    REQUIRE(!found.empty());
    const auto* smallest = found.smallest();
    REQUIRE(smallest);
    // The smallest plan fits the bracket's top, which the bisection narrowed below store-all.
    CHECK(smallest->arena() <= bracket.hi);
    CHECK(bracket.hi < top);
    CHECK(bracket.lo <= bracket.hi);
    CHECK(memplan::check_plan(g, smallest->plan).ok());
    // For any budget at or above the smallest arena there is a kept plan, the cheapest within it.
    for (std::uint64_t b : {smallest->arena(), (smallest->arena() + top) / 2, top}) {
        const auto* c = found.cheapest_within(b);
        REQUIRE(c);
        CHECK(c->arena() <= b);
        CHECK(c->cost <= smallest->cost);
    }
    CHECK(found.cheapest_within(smallest->arena() - 1) == nullptr);
    // A plan over its own budget is not kept.
    auto over = *smallest;
    CHECK_FALSE(found.offer(over, over.arena() - 1));
    CHECK_THROWS_AS(memplan::smallest_budget_search(ctx, top, planner, found, 1.5, 12, memplan::deadline{}),
                    memplan::error);
}

TEST_CASE("remat.pareto.random_graphs") {
    std::mt19937_64 rng(20240605);
    for (int rep = 0; rep < 6; ++rep) {
        CAPTURE(rep);
        memplan::testing::random_graph_options ro;
        ro.forward_ops = 8 + static_cast<std::size_t>(rep) * 3;
        const auto g = memplan::testing::random_training_graph(rng, ro);
        int calls = 0;
        const drop_largest planner(g, &calls);
        memplan::pareto_options po;
        po.points = 5;
        std::size_t progress_runs = 0;
        po.on_progress = [&](const memplan::pareto_progress& p) { progress_runs = p.runs; };
        const auto curve = memplan::pareto_sweep(g, planner, po);
        check_curve(g, curve);
        CHECK(progress_runs == static_cast<std::size_t>(calls) + 1); // + the store-all run
        // memory_at_overhead: the cheapest point's overhead is met by at most its arena.
        const auto& last = curve.back();
        const auto m = memplan::memory_at_overhead(curve, last.result.overhead());
        REQUIRE(m.has_value());
        CHECK(*m <= last.result.arena());
        CHECK_FALSE(memplan::memory_at_overhead(curve, -1.0).has_value());
    }
}

TEST_CASE("remat.pareto.selected_planners") {
    // Every planner select.hpp offers sweeps to a valid, monotone curve.
    const auto g = example_graph("resnet-block-train.json");
    for (auto name : memplan::remat_names()) {
        CAPTURE(name);
        if (name == "checkmate") continue; // needs a MILP solver: tests/solver
        memplan::pareto_options po;
        po.points = 3;
        po.tolerance = 0.05;
        const auto curve = memplan::pareto_sweep(
            g,
            [&](std::uint64_t budget) {
                memplan::remat_options o;
                o.budget = budget;
                o.time_limit = 0.5;
                return memplan::plan_remat(name, g, o);
            },
            po);
        check_curve(g, curve);
    }
}

TEST_CASE("remat.pareto.carries_cheaper_plans") {
    // A planner that finds nothing at the inner budgets of the curve: those
    // points carry the plan of the tightest budget, which fits them too.
    const auto g = example_graph("resnet-block-train.json");
    const drop_largest good(g);
    memplan::pareto_options po;
    po.points = 4;
    const auto reference = memplan::pareto_sweep(g, good, po);
    REQUIRE(reference.size() == 4);
    const auto b1 = reference[1].budget, b2 = reference[2].budget;
    auto erratic = [&](std::uint64_t budget) {
        if (budget == b1 || budget == b2) {
            memplan::remat_result none;
            none.planner = "erratic";
            none.status = memplan::status::no_solution;
            none.budget = budget;
            return none;
        }
        return good(budget);
    };
    const auto curve = memplan::pareto_sweep(g, erratic, po);
    check_curve(g, curve);
    REQUIRE(curve.size() == 4);
    CHECK(curve[1].budget == b1);
    CHECK(curve[1].carried);
    CHECK(curve[2].carried);
    CHECK_FALSE(curve[0].carried);
    CHECK(curve[1].result.arena() <= b1);
}

TEST_CASE("remat.pareto.csv_atomic") {
    const auto g = example_graph("resnet-block-train.json");
    memplan::pareto_options po;
    po.points = 4;
    const auto curve = memplan::pareto_sweep(g, drop_largest(g), po);
    const auto dir = scratch_dir("pareto-csv");
    const auto path = dir / "curve.csv";
    {
        std::ofstream old(path);
        old << "old content\n";
    }
    memplan::write_pareto_csv(path, curve);
    const auto text = read_all(path);
    CHECK(text == memplan::pareto_csv(curve));
    // Only the target remains: no temporary left behind.
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
    CHECK(files == 1);
    // Header, one row per point, each row with six fields whose budget and arena match.
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);
    CHECK(line == "budget_bytes,arena_bytes,overhead,planner,status,seconds");
    std::size_t rows = 0;
    while (std::getline(lines, line)) {
        REQUIRE(rows < curve.size());
        std::vector<std::string> f;
        std::stringstream ls(line);
        for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
        REQUIRE(f.size() == 6);
        CHECK(f[0] == std::to_string(curve[rows].budget));
        CHECK(f[1] == std::to_string(curve[rows].result.arena()));
        CHECK(std::stod(f[2]) == doctest::Approx(curve[rows].result.overhead()).epsilon(1e-5));
        CHECK(f[3] == "drop_largest");
        CHECK(f[4] == "feasible");
        ++rows;
    }
    CHECK(rows == curve.size());
    // A failed write throws naming the path and leaves the old file as it was.
    CHECK_THROWS_AS(memplan::write_pareto_csv(dir / "missing" / "curve.csv", curve), memplan::error);
    CHECK_FALSE(std::filesystem::exists(dir / "missing"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("remat.pareto.bad_options") {
    const auto g = example_graph("diamond.json");
    memplan::pareto_options po;
    po.points = 1;
    auto plan_at = [&](std::uint64_t budget) {
        memplan::remat_options o;
        o.budget = budget;
        return memplan::plan_remat("store_all", g, o);
    };
    CHECK_THROWS_AS(memplan::pareto_sweep(g, plan_at, po), memplan::error);
    po.points = 3;
    po.tolerance = 0;
    CHECK_THROWS_AS(memplan::pareto_sweep(g, plan_at, po), memplan::error);
}
