// The Checkmate planner (remat/checkmate.hpp) on every backend: the exact
// MILP against enumeration of every keep decision per stage in the same
// stage structure (memory by the library's liveness, not by the model),
// budgets below what any schedule needs, and the LP relaxation with
// rounding on a zoo network.
#include "backends.hpp"

#include "support/random_graph.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/remat/checkmate.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/zoo/zoo.hpp>

#include <limits>
#include <set>
#include <random>
#include <vector>

using namespace memplan;

namespace {

struct brute_result {
    double best_cost = std::numeric_limits<double>::infinity(); ///< cheapest schedule with peak <= budget
    std::set<std::uint64_t> peaks;                              ///< of every enumerated schedule
};

// Every stage after the forward part is one backward op with the updates
// that follow it; a forward op may run again when none of its outputs is
// persistent or a graph output. For every choice of which of its tensors
// each stage finds in memory, run what the stage needs (the producers of
// missing tensors, recursively, in listed order) and take the liveness peak.
brute_result brute_force(const graph& g, std::uint64_t budget) {
    const remat_context<graph> ctx(g);
    const auto& base = ctx.base_order();
    std::vector<std::vector<graph::id_type>> stages(1);
    for (std::size_t i = 0; i < ctx.boundary(); ++i) stages[0].push_back(base[i]);
    for (std::size_t i = ctx.boundary(); i < base.size(); ++i) {
        if (stages.size() == 1 || g.op(base[i]).phase != phase::update) stages.emplace_back();
        stages.back().push_back(base[i]);
    }
    std::vector<char> is_output(g.num_tensors(), 0);
    for (auto t : g.outputs()) is_output[t] = 1;
    std::vector<graph::id_type> producer(g.num_tensors(), graph::npos);
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        for (auto t : g.op(static_cast<graph::id_type>(o)).outputs) producer[t] = static_cast<graph::id_type>(o);
    std::vector<char> again(g.num_ops(), 0);
    for (auto o : stages[0]) {
        bool ok = g.op(o).phase == phase::forward;
        for (auto t : g.op(o).outputs) ok = ok && !g.tensor(t).persistent && !is_output[t];
        again[o] = ok;
    }
    std::vector<graph::id_type> cand;
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (producer[t] != graph::npos && again[producer[t]]) cand.push_back(static_cast<graph::id_type>(t));
    const std::size_t T = stages.size(), bits = cand.size() * (T - 1);
    REQUIRE(bits <= 20);
    brute_result out;
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << bits); ++mask) {
        auto kept = [&](std::size_t t, std::size_t c) { return t < T && ((mask >> ((t - 1) * cand.size() + c)) & 1); };
        schedule s;
        for (auto o : stages[0]) s.push_back({o, default_variant(g, o)});
        for (std::size_t t = 1; t < T; ++t) {
            std::vector<char> avail(g.num_tensors(), 1), run(g.num_ops(), 0);
            for (std::size_t c = 0; c < cand.size(); ++c) avail[cand[c]] = kept(t, c);
            std::vector<graph::id_type> todo;
            auto need = [&](graph::id_type x) {
                if (!avail[x]) todo.push_back(producer[x]);
                while (!todo.empty()) {
                    const auto p = todo.back();
                    todo.pop_back();
                    if (run[p]) continue;
                    run[p] = 1;
                    for (auto y : g.op(p).outputs) avail[y] = 1;
                    for (auto r : g.reads_of(p, default_variant(g, p)))
                        if (!avail[r]) todo.push_back(producer[r]);
                }
            };
            for (auto o : stages[t])
                for (auto x : g.reads_of(o, default_variant(g, o))) need(x);
            for (std::size_t c = 0; c < cand.size(); ++c)
                if (kept(t + 1, c)) need(cand[c]);
            for (std::size_t o = 0; o < g.num_ops(); ++o)
                if (run[o]) s.push_back({static_cast<graph::id_type>(o), default_variant(g, static_cast<graph::id_type>(o))});
            for (auto o : stages[t]) s.push_back({o, default_variant(g, o)});
        }
        const auto peak = schedule_lower_bound(g, s, liveness_options{false});
        out.peaks.insert(peak);
        if (peak <= budget) out.best_cost = std::min(out.best_cost, schedule_cost(g, s));
    }
    return out;
}

std::vector<graph> small_graphs(std::uint64_t seed, std::size_t count) {
    std::mt19937_64 rng(seed);
    std::vector<graph> out;
    testing::random_graph_options o;
    o.forward_ops = 3;
    o.p_inplace = 0; // the model ignores in-place sharing; liveness would count it
    while (out.size() < count) out.push_back(testing::random_training_graph(rng, o));
    return out;
}

template <class R>
void check_valid(const graph& g, const R& r, std::uint64_t budget) {
    REQUIRE(has_solution(r.status));
    const auto report = check_plan(g, r.plan);
    CHECK(report.ok());
    CHECK(r.arena() <= budget);
    CHECK(r.cost == doctest::Approx(schedule_cost(g, r.plan.steps)));
}

} // namespace

TEST_CASE_TEMPLATE("remat.checkmate.matches_brute_force", S, MEMPLAN_SOLVERS) {
    static_assert(RematPlannerLike<checkmate<S>, graph>);
    std::size_t optimal = 0, cases = 0, below_store_all = 0;
    for (const auto& g : small_graphs(20250, 12)) {
        const auto all = brute_force(g, 0);
        const std::vector<std::uint64_t> peaks(all.peaks.begin(), all.peaks.end());
        if (peaks.size() < 2) continue;
        for (std::size_t k = 0; k < 3; ++k) {
            // Midway between two peaks that schedules reach, from the least
            // any stage schedule needs towards what keeping everything needs:
            // the model's memory rows carry a slack of a few bytes per
            // million (checkmate_model.hpp), so budgets on a peak are avoided.
            // Narrow gaps are skipped: the brute force compares peaks, the
            // planner arenas, and placement may need a few bytes more.
            std::size_t i = (peaks.size() - 1) * k / 3;
            while (i + 1 < peaks.size() && peaks[i + 1] - peaks[i] < peaks[i] / 50) ++i;
            if (i + 1 >= peaks.size()) continue;
            const std::uint64_t budget = peaks[i] + (peaks[i + 1] - peaks[i]) / 2;
            const auto best = brute_force(g, budget);
            remat_options opt;
            opt.budget = budget;
            opt.alignment = 1;
            opt.time_limit = 20;
            const auto r = checkmate<S>{}.plan(g, opt);
            INFO("budget " << budget << ": " << to_string(r.status) << " " << r.message);
            ++cases;
            if (!has_solution(r.status)) { // fragmentation may leave nothing within the budget
                CHECK(r.status == status::no_solution);
                continue;
            }
            check_valid(g, r, budget);
            CHECK(r.cost >= best.best_cost - 1e-9); // nothing beats enumeration
            if (r.status == status::optimal) {
                ++optimal;
                CHECK(r.cost == doctest::Approx(best.best_cost));
            }
            if (r.cost > r.base_cost + 1e-9) ++below_store_all;
        }
    }
    MESSAGE(optimal << " of " << cases << " proven optimal, " << below_store_all << " needed recomputation");
    CHECK(optimal * 10 >= cases * 8);
    CHECK(below_store_all > 0);
}

TEST_CASE_TEMPLATE("remat.checkmate.below_minimum_is_infeasible", S, MEMPLAN_SOLVERS) {
    for (const auto& g : small_graphs(777, 3)) {
        const remat_context<graph> ctx(g);
        const auto [need, op] = ctx.min_memory();
        REQUIRE(need > 0);
        remat_options opt;
        opt.budget = need - 1;
        opt.alignment = 1;
        const auto r = checkmate<S>{}.plan(g, opt);
        CHECK(r.status == status::infeasible);
        CHECK(r.bound == need);
        CHECK(r.bound_op == op);
        CHECK(r.message.find(op) != std::string::npos);
    }
}

TEST_CASE_TEMPLATE("remat.checkmate.store_all_when_it_fits", S, MEMPLAN_SOLVERS) {
    const auto g = small_graphs(99, 1).front();
    remat_options opt;
    opt.alignment = 1;
    const auto r = checkmate<S>{}.plan(g, opt); // no budget
    check_valid(g, r, opt.budget);
    CHECK(r.status == status::optimal);
    CHECK(r.default_variant_overhead() == doctest::Approx(0.0)); // the store-all plan itself
}

TEST_CASE_TEMPLATE("remat.checkmate.lp_rounding_resnet18", S, MEMPLAN_SOLVERS) {
    zoo_options zo;
    zo.batch = 2;
    const graph g = zoo_graph("resnet18", zo);
    remat_options opt;
    opt.time_limit = 30;
    const auto base = store_all{}.plan(g, opt);
    REQUIRE(has_solution(base.status));
    // Halfway between what any schedule needs (weights and optimizer state
    // dominate at batch 2) and what keeping everything needs.
    const auto need = remat_context<graph>(g).min_memory().first;
    opt.budget = need + (base.arena() - need) / 2;
    opt.time_limit = 8; // GLPK's simplex may not finish the relaxation in it: then it must say so
    const auto r = checkmate<S>{}.plan(g, opt);
    INFO(to_string(r.status) << ": " << r.message);
    MESSAGE(S::name << ": store-all " << base.arena() << " B, budget " << opt.budget << " B, arena " << r.arena()
                    << " B, overhead " << r.overhead() << ", " << r.seconds << " s: " << r.message);
    if (has_solution(r.status)) {
        check_valid(g, r, opt.budget);
        CHECK(r.overhead() > 0);
    } else {
        CHECK_FALSE(r.message.empty());
    }
}

TEST_CASE("remat.checkmate.zoo_plans_with_glpk_interior_point") {
    // The zoo's training graphs at a small batch: the LP relaxation (stages
    // merged to fit lp_max_columns, GLPK's interior point) and rounding give
    // a valid plan within the budget, with recomputation, inside the limit.
    for (const std::string model : {"resnet18"}) {
        zoo_options zo;
        zo.batch = 4;
        zo.height = zo.width = 64;
        const graph g = zoo_graph(model, zo);
        remat_options opt;
        const auto base = store_all{}.plan(g, opt);
        REQUIRE(has_solution(base.status));
        const auto need = remat_context<graph>(g).min_memory().first;
        opt.budget = need + (base.arena() - need) * 6 / 10;
        opt.time_limit = 20;
        const auto r = plan_remat_with("checkmate", g, opt, glpk_solver{});
        INFO(model << ": " << to_string(r.status) << ": " << r.message);
        MESSAGE(model << ": store-all " << base.arena() << " B, budget " << opt.budget << " B, arena " << r.arena()
                      << " B, overhead " << r.overhead() << ", " << r.seconds << " s");
        check_valid(g, r, opt.budget);
        CHECK(r.overhead() > 0);
        CHECK(r.message.find("LP at") != std::string::npos); // the relaxation, not the MILP
    }
}
