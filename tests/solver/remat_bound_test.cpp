// Proven bounds (remat/bound.hpp) and Checkmate's MILP on graphs without a
// backward part (one stage per op), on every backend: against enumeration of
// every schedule of small random layered DAGs (each op once in listed order,
// before it any subset of the earlier ops still read later run again, memory
// by the library's liveness), and against the plans of every planner on
// larger graphs.
#include "backends.hpp"

#include "support/random_graph.hpp"
#include "support/torch_like_graphs.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/remat/bound.hpp>
#include <memplan/remat/checkmate.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/zoo/random_layered.hpp>
#include <memplan/zoo/zoo.hpp>

#include <limits>
#include <utility>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace memplan;

namespace {

struct general_schedule_stats {
    std::uint64_t peak = 0;
    double cost = 0;
};

/// Every schedule of the general space of `g` with recomputations in listed
/// order, less those that run an op again when nothing at or after that
/// stage reads it, directly or through other recomputations of the stage
/// (they only add cost and memory, so the cheapest schedule within any
/// budget is among the rest).
std::vector<general_schedule_stats> every_general_schedule(const graph& g) {
    const remat_context<graph> ctx(g);
    const std::size_t n = g.num_ops();
    std::vector<std::vector<graph::id_type>> candidates(n); // per stage
    for (std::size_t t = 1; t < n; ++t) {
        // Useful in stage t: read by an op at or after t, or by a useful
        // recomputation of the same stage (consumers come later in the list).
        std::vector<char> useful(t, 0);
        for (std::size_t k = t; k-- > 0;) {
            bool again = true, read = false;
            for (auto y : g.op(static_cast<graph::id_type>(k)).outputs) {
                again = again && ctx.droppable(y);
                for (auto r : ctx.index().consumers[y]) {
                    const auto at = ctx.position(r);
                    read = read || at >= t || useful[at];
                }
            }
            useful[k] = again && read;
        }
        for (std::size_t k = 0; k < t; ++k)
            if (useful[k]) candidates[t].push_back(static_cast<graph::id_type>(k));
    }
    std::size_t bits = 0;
    for (const auto& c : candidates) bits += c.size();
    REQUIRE(bits <= 16);
    std::vector<general_schedule_stats> out;
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << bits); ++mask) {
        schedule s;
        std::size_t b = 0;
        for (std::size_t t = 0; t < n; ++t) {
            for (auto k : candidates[t])
                if ((mask >> b++) & 1) s.push_back({k, graph::npos});
            s.push_back({static_cast<graph::id_type>(t), graph::npos});
        }
        out.push_back({schedule_lower_bound(g, s), schedule_cost(g, s)});
    }
    return out;
}

// The smallest and the largest peak of the schedules.
std::pair<std::uint64_t, std::uint64_t> peak_range(const std::vector<general_schedule_stats>& all) {
    std::uint64_t lo = std::numeric_limits<std::uint64_t>::max(), hi = 0;
    for (const auto& s : all) {
        lo = std::min(lo, s.peak);
        hi = std::max(hi, s.peak);
    }
    return {lo, hi};
}

// A bound for a budget that the cheapest schedule `best` meets: proven, at most `best`; counts the
// budgets that need recomputation (`nontrivial`) and those whose bound says so (`tight`).
void require_bound_below(const remat_cost_bound& b, double best, double fastest, std::size_t& nontrivial,
                         std::size_t& tight) {
    REQUIRE(b.status != status::infeasible); // a proof that no plan fits, yet one does
    REQUIRE(b.proven());
    CHECK(b.cost <= best + 1e-9 * best);
    if (best > fastest + 1e-9) {
        ++nontrivial;
        if (b.cost > fastest + 1e-9) ++tight;
    }
}

double cheapest_within(const std::vector<general_schedule_stats>& all, std::uint64_t budget) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& s : all)
        if (s.peak <= budget) best = std::min(best, s.cost);
    return best;
}

std::vector<graph> small_forward_dags(std::uint64_t seed, std::size_t count) {
    std::vector<graph> out;
    random_layered_options o;
    o.max_width = 2;
    o.skip_probability = 0.6; // long lives: recomputation pays
    for (std::size_t i = 0; i < count; ++i) out.push_back(random_layered_dag(6, seed + i, o));
    return out;
}

} // namespace

TEST_CASE_TEMPLATE("remat.bound.general_space_against_brute_force", S, MEMPLAN_SOLVERS) {
    std::size_t cases = 0, tight = 0, nontrivial = 0, proofs = 0;
    for (const auto& g : small_forward_dags(500, 60)) {
        const remat_context<graph> ctx(g);
        const auto all = every_general_schedule(g);
        const auto [lo, hi] = peak_range(all);
        for (std::uint64_t k = 0; k <= 6; ++k) {
            // From below what any schedule of the space reaches towards store-all.
            const std::uint64_t budget = lo - lo / 20 + (hi - lo + lo / 20) * k / 8;
            const double best = cheapest_within(all, budget);
            const auto b = cost_lower_bound(ctx, budget, S{});
            INFO(g.name() << " budget " << budget << ": " << b.message);
            ++cases;
            if (best == std::numeric_limits<double>::infinity()) {
                if (b.status == status::infeasible) ++proofs;
                continue;
            }
            require_bound_below(b, best, ctx.fastest_cost(), nontrivial, tight);
        }
    }
    MESSAGE(cases << " budgets; " << nontrivial << " need recomputation, of which " << tight
                  << " get a bound above the trivial one; " << proofs << " proofs that nothing fits");
    CHECK(nontrivial >= 10);
    CHECK(tight * 2 >= nontrivial); // the bound has teeth
    CHECK(proofs > 0);
}

TEST_CASE_TEMPLATE("remat.checkmate.general_milp_matches_brute_force", S, MEMPLAN_SOLVERS) {
    std::size_t optimal = 0, cases = 0, recomputed = 0;
    for (const auto& g : small_forward_dags(900, 16)) {
        const auto all = every_general_schedule(g);
        std::vector<std::uint64_t> peaks;
        for (const auto& s : all) peaks.push_back(s.peak);
        std::sort(peaks.begin(), peaks.end());
        peaks.erase(std::unique(peaks.begin(), peaks.end()), peaks.end());
        for (std::size_t k = 0; k + 1 < peaks.size() && k < 3; ++k) {
            // Midway between two peaks schedules reach (the MILP's memory
            // rows carry a slack of a few bytes per million).
            if (peaks[k + 1] - peaks[k] < peaks[k] / 50) continue;
            const std::uint64_t budget = peaks[k] + (peaks[k + 1] - peaks[k]) / 2;
            const double best = cheapest_within(all, budget);
            remat_options opt;
            opt.budget = budget;
            opt.alignment = 1;
            opt.time_limit = 20;
            const auto r = checkmate<S>{}.plan(g, opt);
            INFO(g.name() << " budget " << budget << ": " << to_string(r.status) << " " << r.message);
            ++cases;
            if (!has_solution(r.status)) { // placement may need a few bytes more than the peak
                CHECK(r.status == status::no_solution);
                continue;
            }
            CHECK(check_plan(g, r.plan).ok());
            CHECK(r.arena() <= budget);
            CHECK(r.cost >= best - 1e-9);
            if (r.cost > r.fastest_cost + 1e-9) ++recomputed;
            if (r.status == status::optimal) {
                ++optimal;
                CHECK(r.cost == doctest::Approx(best));
            }
        }
    }
    MESSAGE(optimal << " of " << cases << " proven optimal, " << recomputed << " recompute");
    CHECK(cases >= 8);
    CHECK(optimal * 10 >= cases * 7);
    CHECK(recomputed > 0);
}

TEST_CASE_TEMPLATE("remat.bound.never_above_any_planners_plan", S, MEMPLAN_SOLVERS) {
    // Training graphs (MONeT's stages) and forward-only ones (Checkmate's),
    // at budgets where plans must recompute; every planner of the registry.
    std::vector<graph> graphs;
    graphs.push_back(random_layered_dag(60, 7));
    graphs.push_back(random_layered_dag(120, 8));
    {
        std::mt19937_64 rng(77);
        testing::random_graph_options o;
        o.forward_ops = 12;
        graphs.push_back(testing::random_training_graph(rng, o));
    }
    zoo_options zo;
    zo.batch = 2;
    zo.height = zo.width = 32;
    graphs.push_back(zoo_graph("resnet18", zo));
    std::size_t checked = 0, above_trivial = 0;
    for (const auto& g : graphs) {
        remat_options base;
        base.time_limit = 5;
        const auto all = plan_remat("store_all", g, base);
        REQUIRE(has_solution(all.status));
        for (double f : {0.75, 0.9}) {
            remat_options opt;
            opt.budget = static_cast<std::uint64_t>(static_cast<double>(all.arena()) * f);
            opt.time_limit = 1;
            for (auto name : remat_names()) {
                auto r = plan_remat_with(name, g, opt, S{});
                if (!has_solution(r.status) || r.arena() > opt.budget) continue;
                remat_bound_options bo;
                bo.deadline = memplan::deadline{}.within(2); // GLPK's simplex is slow on the larger LPs
                attach_cost_bound(g, r, S{}, bo);
                INFO(g.name() << " at " << f << ", " << name << " (" << r.planner << "): " << r.bound_note);
                REQUIRE(r.bound_proven);
                CHECK(r.cost_bound <= r.cost * (1 + 1e-9));
                CHECK(r.overhead_bound() <= r.overhead() + 1e-12);
                ++checked;
                if (r.overhead_bound() > 0) ++above_trivial;
            }
        }
    }
    MESSAGE(checked << " plans checked, " << above_trivial << " with a bound above the trivial one");
    CHECK(checked >= 12);
    CHECK(above_trivial > 0);
}

TEST_CASE_TEMPLATE("remat.bound.below_what_any_op_needs_is_a_proof", S, MEMPLAN_SOLVERS) {
    const auto g = random_layered_dag(40, 3);
    const remat_context<graph> ctx(g);
    const auto b = cost_lower_bound(ctx, ctx.min_memory().first - 1, S{});
    CHECK(b.status == status::infeasible);
    CHECK_FALSE(b.proven());
    CHECK(b.overhead() == 0);
}

TEST_CASE_TEMPLATE("remat.bound.torch_like_graphs_against_brute_force", S, MEMPLAN_SOLVERS) {
    // PyTorch's batch norm writes graph outputs (the running statistics)
    // beside its result and saved statistics: plans run it again, so a
    // bound that could not (and held its result through the backward, or
    // its statistics from the first run) rose above plans that were found,
    // or claimed that nothing fits (tests/support/torch_like_graphs.hpp;
    // tests/unit/remat_bound_model_test.cpp checks the LP without a solver).
    std::size_t cases = 0, nontrivial = 0, tight = 0, plans = 0;
    const std::vector<std::pair<bool, std::uint64_t>> graphs{{true, 8}, {true, 300}, {false, 8}, {false, 300}};
    for (const auto& [training, stats] : graphs) {
        const auto g = testing::torch_like_bn_graph(training, stats);
        const remat_context<graph> ctx(g);
        std::vector<general_schedule_stats> all;
        for (const auto& s : testing::every_choice_schedule(ctx))
            all.push_back({schedule_lower_bound(g, s), schedule_cost(g, s)});
        const auto [lo, hi] = peak_range(all);
        for (std::uint64_t k = 0; k <= 10; ++k) {
            const std::uint64_t budget = lo - lo / 50 + (hi - lo + lo / 50) * k / 10;
            const double best = cheapest_within(all, budget);
            const auto b = cost_lower_bound(ctx, budget, S{});
            INFO(g.name() << " (statistics of " << stats << " bytes), budget " << budget << ": " << b.message);
            if (best == std::numeric_limits<double>::infinity()) continue;
            ++cases;
            require_bound_below(b, best, ctx.fastest_cost(), nontrivial, tight);
        }
        // And below the plans each planner finds.
        const auto store = plan_remat("store_all", g, remat_options{});
        REQUIRE(has_solution(store.status));
        for (double f : {0.75, 0.85, 0.95}) {
            remat_options opt;
            opt.budget = static_cast<std::uint64_t>(static_cast<double>(store.arena()) * f);
            opt.alignment = 1;
            opt.time_limit = 1;
            for (auto name : remat_names()) {
                auto r = plan_remat_with(name, g, opt, S{});
                if (!has_solution(r.status)) continue;
                attach_cost_bound(g, r, S{});
                INFO(g.name() << " at " << f << ", " << name << " (" << r.planner << "): " << r.bound_note);
                REQUIRE(r.bound_proven);
                CHECK(r.cost_bound <= r.cost * (1 + 1e-9));
                ++plans;
            }
        }
    }
    MESSAGE(cases << " budgets with a plan, " << nontrivial << " need recomputation, " << tight
                  << " of them bounded above the trivial bound; " << plans << " planners' plans");
    CHECK(nontrivial >= 10);
    CHECK(tight * 2 >= nontrivial);
    CHECK(plans >= 20);
}
