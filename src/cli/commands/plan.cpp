// memplan plan: orders the ops, places every buffer in one arena, and checks the plan.
#include "planners.hpp"

#include <memplan/io/graph_json.hpp>
#include <memplan/io/plan_json.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/remat/bound.hpp>
#include <memplan/remat/boundary.hpp>
#include <memplan/remat/budget.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/policy.hpp>

#include <nlohmann/json.hpp>

namespace memplan::cli {

namespace {

/// Shares of --time-limit: the store-all plan that budgets in percent refer
/// to (it is fast; the share caps its exact placement), and the order phase
/// of a plan without --budget (allocation gets what is left).
constexpr double store_all_share = 0.2;
constexpr double order_share = 0.5;
/// With --budget, what the proven bound on the overhead may take of the
/// time left after store-all (the planner gets the rest first; the bound
/// also gets whatever the planner leaves).
constexpr double bound_share = 0.15;
/// fraction:F of a peak budget (F < 1): the search for the smallest peak
/// takes this share of the time left after store-all, each of its planner
/// runs this share of what is left of it, and it stops within this share of
/// store-all - the schedule-free bound, after at most this many halvings.
/// The same search finds the smallest plan after a miss, in the time left.
constexpr double floor_share = 0.5;
constexpr double floor_run_share = 0.25;
constexpr double floor_tolerance = 0.01;
constexpr std::size_t floor_max_steps = 8;
/// After a miss, the smallest plan is searched only with this much time left.
constexpr double smallest_min_seconds = 0.2;
/// With --on-infeasible smallest, the share of the time left that the plan
/// for the budget may take, and then the search for the smallest peak: what
/// is left after both plans the cheapest plan at that peak.
constexpr double smallest_first_share = 0.5;
/// The tensors the report lists at the smallest plan's peak.
constexpr std::size_t peak_tensors_listed = 12;
/// The bound's LP is not started with less time left than this: the LP
/// solvers check their clocks only now and then (Clp took 1.4 s given 0.1 s
/// on Llama-3-70B's knapsack LP), and the command must end by its limit.
constexpr double bound_min_seconds = 0.5;

/// The backend for the bound's LPs: --solver when given, else CBC when it
/// is compiled in (its simplex solves Checkmate's relaxation of a 100-op
/// graph in about 1 s where GLPK's needs over 30 s), else the default.
std::string bound_solver(const std::string& solver) {
    if (!solver.empty()) return solver;
    for (const auto& b : memplan::solver_backends())
        if (b.name == "cbc") return "cbc";
    return solver;
}

std::size_t recomputed_steps(const memplan::graph& g, const memplan::remat_result& r) {
    return r.plan.steps.size() >= g.num_ops() ? r.plan.steps.size() - g.num_ops() : 0;
}

/// What a budget was resolved to and against, for the reports.
struct budget_figures {
    memplan::budget_on on = memplan::budget_on::peak;
    std::uint64_t bound = 0;          ///< peak: the arena's bound; saved: the bound on the bytes at the boundary
    std::uint64_t planner_budget = 0; ///< what the planner ran under (saved: bound + room)
    std::uint64_t room = 0;           ///< saved: boundary_memory_graph's room
    std::uint64_t store_all = 0;      ///< the store-all arena of the graph planned
    std::uint64_t floor = 0;          ///< fraction:F: the smallest peak found (0: not searched)
    memplan::boundary_live store_all_at; ///< store-all's bytes at the boundary
    memplan::boundary_live plan_at;      ///< the plan's, when it fits

    bool saved() const noexcept { return on == memplan::budget_on::saved; }
};

/// The smallest plan found after a miss, and what holds its peak.
struct smallest_figures {
    const memplan::remat_result* plan = nullptr; ///< null: none searched or found
    memplan::peak_moment moment;
    bool used = false; ///< --on-infeasible smallest: it is the plan written
};

std::string step_op(const memplan::graph& g, const memplan::remat_result& r, std::size_t step) {
    return step < r.plan.steps.size() ? g.op(r.plan.steps[step].op).name : std::string();
}

/// The buffer's tensor name, or "workspace of '<op>'".
std::string buffer_name(const memplan::graph& g, const memplan::remat_result& r, const memplan::buffer& b) {
    if (b.is_workspace()) return "workspace of '" + step_op(g, r, b.step) + "'";
    return g.tensor(b.tensor).name;
}

/// `plan --budget`'s report for people.
void print_remat_text(const memplan::graph& g, const memplan::remat_result& r, const std::string& who, bool fits,
                      const budget_figures& b, const smallest_figures& small,
                      const std::optional<std::string>& output) {
    std::cout << "graph:         " << g.name() << " (" << g.num_ops() << " ops)\n"
              << "planner:       " << who << "\n"
              << "status:        " << memplan::to_string(r.status)
              << (fits && !small.used ? "" : ": no plan within the budget")
              << "\n";
    if (b.saved())
        std::cout << "budget:        " << bytes_both(b.bound) << " at the boundary, "
                  << percent(ratio(b.bound, b.store_all_at.total()), 1) << " of what store-all holds there\n"
                  << "room:          " << bytes_both(b.room) << "; the planner's budget: "
                  << bytes_both(b.planner_budget) << "\n";
    else
        std::cout << "budget:        " << bytes_both(b.bound) << ", " << percent(ratio(b.bound, b.store_all), 1)
                  << " of store-all\n";
    std::cout << "store-all:     " << bytes_both(b.store_all) << "\n"
              << "boundary:      resident " << bytes_both(b.store_all_at.resident) << "; store-all keeps "
              << bytes_both(b.store_all_at.kept) << "\n";
    if (b.floor) std::cout << "smallest peak: " << bytes_both(b.floor) << " (fraction:0; the smallest plan found)\n";
    if (small.plan) {
        const auto& p = *small.plan;
        std::cout << "smallest plan: " << bytes_both(p.arena()) << ", overhead " << signed_percent(p.overhead())
                  << (small.used ? " (written: --on-infeasible smallest)" : "") << "\n"
                  << "its peak:      " << bytes_both(small.moment.bytes) << " live at step " << small.moment.step
                  << " (op '" << step_op(g, p, small.moment.step) << "'):\n";
        for (std::size_t i = 0; i < small.moment.buffers.size() && i < peak_tensors_listed; ++i) {
            const auto& buf = p.plan.buffers[small.moment.buffers[i]];
            std::cout << "  " << human_bytes(buf.bytes) << "  " << buffer_name(g, p, buf) << "\n";
        }
        if (small.moment.buffers.size() > peak_tensors_listed)
            std::cout << "  ... and " << small.moment.buffers.size() - peak_tensors_listed << " more\n";
    }
    if (!fits) {
        std::cout << "any schedule:  " << bytes_both(r.bound)
                  << (r.bound_op.empty() ? "" : " (op '" + r.bound_op + "')") << "\n";
        if (!r.bound_note.empty()) std::cout << "bound:         " << r.bound_note << "\n";
        std::cout << "planning time: " << memplan::cli::human_seconds(r.seconds) << "\n";
        if (output) std::cout << "nothing written\n";
        return;
    }
    std::cout << "arena:         " << bytes_both(r.arena()) << ", " << percent(ratio(r.arena(), b.store_all), 1)
              << " of store-all\n"
              << "kept:          " << bytes_both(b.plan_at.kept) << " across the boundary, "
              << percent(ratio(b.plan_at.kept, b.store_all_at.kept), 1) << " of store-all's\n"
              << "overhead:      " << signed_percent(r.overhead()) << " (cost " << memplan::cli::fixed(r.cost, 1)
              << " vs store-all, fastest variants " << memplan::cli::fixed(r.fastest_cost, 1) << "; "
              << signed_percent(r.default_variant_overhead()) << " vs store-all, default variants "
              << memplan::cli::fixed(r.base_cost, 1) << "; costs in " << cost_label(g) << ")\n"
              << "steps:         " << r.plan.steps.size() << " (" << recomputed_steps(g, r) << " recomputed)\n";
    if (r.bound_proven)
        std::cout << "proven bound:  " << signed_percent(r.overhead_bound()) << " overhead for any plan of this space, gap "
                  << memplan::cli::fixed(100 * r.gap(), 2) << " points (" << r.bound_note << ")\n";
    else if (!r.bound_note.empty())
        std::cout << "proven bound:  none (" << r.bound_note << ")\n";
    std::cout << "lower bound:   " << bytes_both(r.schedule_bound) << "\n"
              << "planning time: " << memplan::cli::human_seconds(r.seconds) << "\n";
    if (output) std::cout << "wrote " << *output << "\n";
}

/// The same report as one JSON object (--json): bytes, seconds, overheads as fractions.
void print_remat_json(const memplan::graph& g, const memplan::remat_result& r, const std::string& who, bool fits,
                      const budget_figures& b, const smallest_figures& small,
                      const std::optional<std::string>& output) {
    nlohmann::json j{{"graph", g.name()},
                     {"ops", g.num_ops()},
                     {"planner", who},
                     {"status", memplan::to_string(r.status)},
                     {"fits", fits && !small.used},
                     {"budget_on", memplan::to_string(b.on)},
                     {"budget", b.bound},
                     {"store_all", b.store_all},
                     {"resident", b.store_all_at.resident},
                     {"store_all_kept", b.store_all_at.kept},
                     {"seconds", r.seconds},
                     {"costs", cost_label(g)}};
    if (b.saved()) j.update({{"room", b.room}, {"planner_budget", b.planner_budget}});
    if (b.floor) j["floor"] = b.floor;
    if (small.plan) {
        const auto& p = *small.plan;
        nlohmann::json live = nlohmann::json::array();
        for (auto i : small.moment.buffers) {
            const auto& buf = p.plan.buffers[i];
            live.push_back(buf.is_workspace()
                               ? nlohmann::json{{"workspace", step_op(g, p, buf.step)}, {"bytes", buf.bytes}}
                               : nlohmann::json{{"tensor", g.tensor(buf.tensor).name}, {"bytes", buf.bytes}});
        }
        j["smallest"] = {{"arena", p.arena()},
                         {"overhead", p.overhead()},
                         {"used", small.used},
                         {"peak", {{"step", small.moment.step},
                                   {"op", step_op(g, p, small.moment.step)},
                                   {"bytes", small.moment.bytes},
                                   {"live", std::move(live)}}}};
    }
    if (fits) {
        j.update({{"arena", r.arena()},
                  {"kept", b.plan_at.kept},
                  {"overhead", r.overhead()},
                  {"cost", r.cost},
                  {"fastest_cost", r.fastest_cost},
                  {"default_variant_overhead", r.default_variant_overhead()},
                  {"base_cost", r.base_cost},
                  {"steps", r.plan.steps.size()},
                  {"recomputed", recomputed_steps(g, r)},
                  {"lower_bound", r.schedule_bound}});
        if (r.bound_proven) j["overhead_bound"] = r.overhead_bound();
        if (output) j["output"] = *output;
    } else {
        j.update({{"any_schedule", r.bound}, {"bound_op", r.bound_op}, {"message", r.message}});
    }
    if (!r.bound_note.empty()) j["bound_note"] = r.bound_note;
    std::cout << j.dump(2) << "\n";
}

/// --budget-on: what the budget bounds (peak when not given).
memplan::budget_on budget_on_value(const parsed_args& a) {
    const auto v = a.value("--budget-on");
    return v ? memplan::parse_budget_on("option --budget-on", *v) : memplan::budget_on::peak;
}

/// --on-infeasible: fail (default) or write the smallest plan found.
bool on_infeasible_value(const parsed_args& a) {
    const auto v = a.value_or("--on-infeasible", "fail");
    if (v != "fail" && v != "smallest")
        throw memplan::error("cli", "option --on-infeasible: expected fail or smallest, got '" + v + "'");
    return v == "smallest";
}

int run_plan_remat(const parsed_args& a) {
    for (auto key : {"--alloc", "--order"})
        if (a.has(key))
            throw memplan::error("cli", std::string("option ") + key +
                                            " cannot be combined with --budget (rematerialization planners order and "
                                            "place the buffers themselves)");
    const auto policy = a.value("--policy");
    if (policy && a.has("--remat"))
        throw memplan::error("cli", "give --policy (a hand-written policy's plan) or --remat (a planner), not both");
    const auto budget_spec = a.has("--budget") ? memplan::parse_budget("option --budget", a.required("--budget"))
                                               : memplan::parse_budget("option --budget", "100%");
    budget_figures fig;
    fig.on = budget_on_value(a);
    const bool on_infeasible_smallest = on_infeasible_value(a);
    if (on_infeasible_smallest && fig.saved())
        throw memplan::error("cli", "option --on-infeasible smallest cannot be combined with --budget-on saved (the "
                                    "smallest plan is the smallest peak)");
    if (policy && fig.saved())
        throw memplan::error("cli", "option --budget-on saved cannot be combined with --policy (a policy's plan is "
                                    "made for the whole step; its budget bounds the arena)");
    memplan::policy_planner by_policy;
    if (policy) by_policy.policy = memplan::parse_recompute_policy(*policy);
    const auto name = policy ? std::string("policy") : remat_option_value(a); // checks --remat and --solver
    const auto solver = a.value_or("--solver", "");
    memplan::remat_options opt;
    // A budget on saved bytes counts bytes, not padding: offsets unaligned unless asked for.
    opt.alignment = a.integer_or("--alignment", fig.saved() ? 1 : default_alignment, 1);
    const auto until = command_deadline(a);
    opt.time_limit = until;
    const auto given = memplan::read_graph_json(a.positional[0]);
    if (given.num_ops() == 0) throw memplan::error("cli", a.positional[0] + ": the graph has no ops to plan");
    // Under --budget-on saved the planner plans the boundary memory graph:
    // its room makes a plan within bound + room hold at most the bound at the boundary.
    std::optional<memplan::boundary_graph<memplan::graph>> bounded;
    if (fig.saved()) bounded = memplan::boundary_memory_graph(given);
    const memplan::graph& g = bounded ? bounded->graph : given;

    // One context for store-all (what a budget refers to), the planner
    // (whose store-all member reuses that placement) and the bound.
    const memplan::remat_context<memplan::graph> ctx(g);
    const auto base = store_all_checked(ctx, opt.until(until.share(store_all_share)));
    fig.store_all = base.arena();
    fig.store_all_at = memplan::boundary_bytes(g, base.plan, given);
    auto plan_at = [&](std::uint64_t budget, memplan::deadline by, bool progress) {
        auto o = opt;
        o.budget = budget;
        o.time_limit = by;
        if (!progress) o.on_progress = nullptr;
        return policy ? by_policy.checked(ctx, o) : memplan::plan_remat(name, ctx, o, solver);
    };
    // Every plan within its budget that a search for the smallest peak met:
    // candidates for any budget at or above their arenas.
    memplan::fitting_plans<memplan::graph> found;
    auto search_smallest = [&](memplan::deadline by) {
        found.offer(base, base.arena());
        memplan::smallest_budget_search(
            ctx, fig.store_all, [&](std::uint64_t b) { return plan_at(b, by.share(floor_run_share), false); }, found,
            floor_tolerance, floor_max_steps, by);
        return found.smallest();
    };
    if (budget_spec.needs_floor(fig.on)) fig.floor = search_smallest(until.share(floor_share))->arena();
    fig.bound = budget_spec.of({fig.store_all, fig.store_all_at.resident, fig.store_all_at.kept, fig.floor}, fig.on);
    fig.room = bounded ? bounded->room : 0;
    fig.planner_budget = fig.bound > UINT64_MAX - fig.room ? UINT64_MAX : fig.bound + fig.room;
    opt.budget = policy && !a.has("--budget") ? std::numeric_limits<std::uint64_t>::max() : fig.planner_budget;
    opt.on_progress = memplan::cli::remat_progress_printer();
    // With --on-infeasible smallest, a miss leaves time to plan at the smallest peak found.
    auto r = plan_at(opt.budget, until.share(on_infeasible_smallest ? smallest_first_share : 1 - bound_share), true);
    auto fits_budget = [&](const memplan::remat_result& x) {
        return memplan::has_solution(x.status) && x.arena() <= opt.budget;
    };
    // A plan the search met may be cheaper, or the only one that fits (a heuristic's miss).
    if (const auto* c = found.cheapest_within(opt.budget); c && (!fits_budget(r) || c->cost < r.cost)) {
        r = *c;
        r.budget = opt.budget;
    }
    if (policy && !a.has("--budget")) { // the report's budget: what the policy needs
        opt.budget = fig.bound = fig.planner_budget = r.arena();
        r.budget = r.size;
    }
    memplan::cli::clear_progress();
    // A miss: the smallest plan memplan reaches, and what holds its peak.
    smallest_figures small;
    if (!fits_budget(r) && !fig.saved()) {
        if (found.empty() && until.remaining() >= smallest_min_seconds)
            search_smallest(until.share(on_infeasible_smallest ? smallest_first_share : 1 - bound_share));
        if ((small.plan = found.smallest())) {
            small.moment = memplan::peak_moment_of(small.plan->plan);
            small.used = on_infeasible_smallest;
        }
    }
    if (small.used) {
        // The smallest plan the search met, or a cheaper one at its peak planned now (as fraction:0 plans it).
        r = *small.plan;
        if (until.remaining() >= smallest_min_seconds) {
            auto again = plan_at(r.arena(), until.share(1 - bound_share), false);
            if (memplan::has_solution(again.status) && again.arena() <= r.arena() && again.cost < r.cost) r = again;
        }
    }
    if (!memplan::solver_backends().empty() && r.status != memplan::status::infeasible &&
        until.remaining() < bound_min_seconds) {
        r.bound_note = "skipped: under " + memplan::cli::fixed(bound_min_seconds, 1) + " s left of the time limit";
    } else if (!memplan::solver_backends().empty() && r.status != memplan::status::infeasible) {
        memplan::remat_bound_options bo;
        bo.deadline = until;
        memplan::with_solver<void>(bound_solver(solver),
                                   [&](const auto& backend) { memplan::attach_cost_bound(ctx, r, backend, bo); });
    }
    const bool fits = fits_budget(r) || small.used;
    reject_internal_error(g, r);
    if (fits) fig.plan_at = memplan::boundary_bytes(g, r.plan, given);
    if (fits && fig.saved() && fig.plan_at.total() > fig.bound) // the room's promise, broken: a bug
        throw internal_error("planner '" + r.planner + "' on graph '" + g.name() + "': the plan holds " +
                             std::to_string(fig.plan_at.total()) + " bytes at the boundary (step " +
                             std::to_string(fig.plan_at.step) + "), over the budget of " + std::to_string(fig.bound));
    const auto output = a.value("--output");
    if (fits && output) memplan::write_plan_json(*output, g, r.plan); // before any output: a failure is one line

    const std::string who = r.planner.empty() || r.planner == name ? name : name + " -> " + r.planner;
    if (a.has("--json")) print_remat_json(g, r, who, fits, fig, small, output);
    else print_remat_text(g, r, who, fits, fig, small, output);
    if (small.used)
        std::cerr << "memplan: warning: no plan within the budget of " << fig.bound
                  << " bytes; the smallest plan found (" << r.arena() << " bytes) was written instead\n";
    if (fits) return exit_ok;
    std::cout.flush();
    std::string reason = r.status == memplan::status::infeasible && r.bound_note.starts_with("proof")
                             ? r.bound_note
                             : r.message.empty() ? "no plan within the budget" : r.message;
    if (fig.saved())
        reason += " (with --budget-on saved the planner's budget is " + std::to_string(fig.bound) +
                  " bytes at the boundary + " + std::to_string(fig.room) + " bytes of room)";
    if (small.plan) reason += "; the smallest peak memplan reached is " + std::to_string(small.plan->arena()) + " bytes";
    if (r.status == memplan::status::infeasible) {
        std::cerr << "memplan: infeasible: " << reason << "\n";
        return exit_infeasible;
    }
    std::cerr << "memplan: no plan: " << reason << "\n";
    return exit_negative;
}

int run_plan(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args,
                                 {{{"--output", "-o"}, true}, alloc_option, alignment_option, solver_option,
                                  time_limit_option, gap_option, order_option, {{"--budget"}, true},
                                  {{"--budget-on"}, true}, {{"--on-infeasible"}, true}, remat_option,
                                  {{"--policy"}, true}, json_option});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "GRAPH.json");
    for (auto key : {"--budget-on", "--on-infeasible"})
        if (a->has(key) && !a->has("--budget")) throw memplan::error("cli", std::string("option ") + key + " needs --budget");
    on_infeasible_value(*a); // checked before any work
    budget_on_value(*a); // checked before any work
    if (a->has("--budget") || a->has("--policy")) return run_plan_remat(*a);
    if (a->has("--remat")) throw memplan::error("cli", "option --remat needs --budget");
    const auto allocator = allocator_option(*a);
    const auto order = order_option_value(*a);
    const auto alignment = a->integer_or("--alignment", default_alignment, 1);
    const auto g = memplan::read_graph_json(a->positional[0]);
    if (g.num_ops() == 0) throw memplan::error("cli", a->positional[0] + ": the graph has no ops to plan");

    // One clock for both phases: the order takes a share, allocation the rest.
    const auto ordered = order_with(order, g, *a, allocator.settings.time_limit.until().share(order_share));
    const auto r = plan_checked(g, ordered.schedule, allocator, alignment);
    if (auto out = a->value("--output")) memplan::write_plan_json(*out, g, r.plan);
    const auto default_lb = memplan::schedule_lower_bound(g, memplan::default_schedule(g));
    if (a->has("--json")) {
        nlohmann::json j{{"graph", g.name()},
                         {"ops", g.num_ops()},
                         {"buffers", r.plan.buffers.size()},
                         {"order", order},
                         {"order_status", memplan::to_string(ordered.status)},
                         {"order_lower_bound", ordered.size},
                         {"default_order_lower_bound", default_lb},
                         {"allocator", allocator.name()},
                         {"status", memplan::to_string(r.status)},
                         {"alignment", alignment},
                         {"arena", r.plan.arena_bytes},
                         {"lower_bound", r.bound},
                         {"seconds", r.seconds + ordered.seconds}};
        if (auto out = a->value("--output")) j["output"] = *out;
        std::cout << j.dump(2) << "\n";
        return exit_ok;
    }
    std::cout << "graph:         " << g.name() << " (" << g.num_ops() << " ops, " << r.plan.buffers.size()
              << " buffers)\n"
              << "order:         " << order << " (" << memplan::to_string(ordered.status) << "), LB "
              << bytes_both(ordered.size) << " vs default order " << bytes_both(default_lb) << ", "
              << memplan::cli::human_seconds(ordered.seconds) << "\n"
              << "allocator:     " << allocator.name() << " (" << memplan::to_string(r.status) << "), alignment "
              << alignment << "\n"
              << "arena:         " << bytes_both(r.plan.arena_bytes) << "\n"
              << "lower bound:   " << bytes_both(r.bound) << "\n"
              << "arena / LB:    " << memplan::cli::fixed(ratio(r.plan.arena_bytes, r.bound), 4) << "\n"
              << "planning time: " << memplan::cli::human_seconds(r.seconds + ordered.seconds) << "\n";
    if (auto out = a->value("--output")) std::cout << "wrote " << *out << "\n";
    return exit_ok;
}

} // namespace

const command plan_command{
    "plan",
    "memplan plan GRAPH.json [-o PLAN.json] [--order NAME] [--alloc NAME] [--solver NAME] [--time-limit S]\n"
    "                        [--alignment N] [--budget B [--budget-on peak|saved] [--on-infeasible fail|smallest]\n"
    "                        [--remat NAME]] [--policy NAME] [--json]",
    "Orders the ops, places every buffer in one arena, and checks the plan.",
    "  -o, --output PLAN.json  write the plan (memplan.plan JSON)\n"
    "  --order NAME            operator order: default (as listed), greedy (memory-aware list\n"
    "                          scheduler), ilp (MODeL's formulation; windowed on large graphs)\n"
    "  --alloc NAME            allocator: auto (default: the best heuristic, then the exact search\n"
    "                          until the arena meets the lower bound or the time limit), no_reuse,\n"
    "                          greedy_by_size, greedy_by_lifetime, online_best_fit, best_heuristic,\n"
    "                          exact, milp (the offset MILP on --solver)\n"
    "  --solver NAME           MILP backend for milp, --order ilp and MILP-based --remat planners:\n"
    "                          glpk (default) or cbc\n"
    "  --time-limit S          the whole command ends within about S seconds: the order takes half,\n"
    "                          allocation the rest; with --budget, store-all then the planner (default 10),\n"
    "                          which stops earlier once it has found no cheaper plan for max(2 s, half\n"
    "                          its running time) or one as cheap as store-all\n"
    "  --gap G                 auto/exact/milp and --order ilp stop within G of their lower bound\n"
    "                          (default 1e-4 for auto and the orders, 0 for exact and milp)\n"
    "  --alignment N           every offset a multiple of N bytes (default 256; 1 with --budget-on saved)\n"
    "  --budget B              rematerialization: the planner chooses what to keep, what to recompute\n"
    "                          and each op's variant, then orders and places (not with --order/--alloc).\n"
    "                          B is bytes (or 7.5GiB, 8GB, ...), P%, fraction:F (F in [0, 1]) or saved:F\n"
    "                          (F in (0, 1]), resolved against the store-all plan as --budget-on says.\n"
    "                          Prints the overhead: cost / store-all cost - 1. A budget below what any\n"
    "                          schedule needs exits 4 with the reason; no plan found in the time limit\n"
    "                          exits 1. Either prints the smallest plan found (peak budgets) and what\n"
    "                          is live at its peak\n"
    "  --budget-on peak|saved  what --budget bounds. peak (default): the arena; B bytes, P% of the\n"
    "                          store-all arena, fraction:F the smallest peak the planner reaches (a\n"
    "                          bisection on the budget, half the time left) + F of the way to the\n"
    "                          store-all arena (0: that smallest plan; 1: store-all's arena), saved:F\n"
    "                          the store-all arena less (1 - F) of what store-all keeps across the\n"
    "                          boundary (the first op that is not forward).\n"
    "                          saved: only the bytes live at the boundary (resident: persistent\n"
    "                          tensors and graph outputs; kept: what the plan saves for the backward),\n"
    "                          as PyTorch's activation_memory_budget; B bytes saved on top of the\n"
    "                          resident ones, P% of store-all's resident + kept, saved:F and\n"
    "                          fraction:F resident + F of store-all's kept. The planner plans the graph with a room op before\n"
    "                          the boundary (memplan.boundary_room; -o writes that graph's plan: check\n"
    "                          it with memplan check --budget-on saved)\n"
    "  --on-infeasible fail|smallest\n"
    "                          with no plan within a peak budget: fail (default; exit 4 or 1), or\n"
    "                          write the smallest plan found, warn on stderr and exit 0 (the report\n"
    "                          says fits: false)\n"
    "  --remat NAME            rematerialization planner for --budget (default auto; listed below)\n"
    "  --policy NAME           the plan a hand-written recomputation policy makes on a transformer's\n"
    "                          graph (blocks named model.layers.<i>.*, as memplan zoo llama's): none,\n"
    "                          full, full:K (K blocks per checkpoint), selective (Megatron's core_attn),\n"
    "                          op-sac (torchtitan's per-op selective AC), or Megatron modules\n"
    "                          core_attn,mlp,layernorm (any of them); priced and checked like a\n"
    "                          planner's. With --budget it says whether the policy fits (its arena;\n"
    "                          not with --budget-on saved)\n"
    "  --json                  the report as one JSON object on stdout (the figures in bytes and\n"
    "                          seconds, overheads as fractions); errors stay on stderr\n"
    "Long searches print their progress on stderr when it is a terminal.\n",
    run_plan, print_planner_lists};

} // namespace memplan::cli
