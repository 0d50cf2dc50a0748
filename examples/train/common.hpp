// What every train_* example shares: options (--steps N, --budget P% | min,
// --remat NAME, --time-limit S, --naive, --poison, --interval K, --cost MODEL,
// --profile FILE, --compare, --pairs N), planning at a budget with memplan's
// rematerialization planners (remat/select.hpp), the training loop and the
// report, ending with one line
// "loss L naive_bytes N arena_bytes A budget_bytes B ms_per_step T"
// (with --compare: "... predicted_overhead P measured_overhead M").
// Declarations only: the definitions (the planners and the CPU engine, all
// templates) are compiled once, in common.cpp (library memplan_train_common).
#pragma once

#include "models.hpp"

#include <memplan/cost/model.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/schedule/plan.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::examples {

struct train_options {
    int steps = 200;
    double budget_percent = 100; ///< of the store-all arena; 0: the smallest budget the planner reaches
    std::string remat = "auto";
    double time_limit = 2; ///< seconds per planner call
    bool naive = false;
    bool poison = false;
    int interval = 50;
    /// How the planner prices ops: roofline:DEVICE, fused:DEVICE (DEVICE v100, h100,
    /// h200 or cpu: this machine), measured (profile on this machine's
    /// backend now) or measured:FILE (a graph with measured costs).
    std::string cost = "roofline:v100";
    std::string profile_out; ///< --profile FILE: write the measured graph here (profiles when needed)
    bool compare = false;    ///< run store-all and the plan interleaved, report measured overhead
    int pairs = 7;           ///< --pairs N: timed (store-all, plan) pairs of --compare, at least 5
    /// --against MODEL (with --compare): also plan at the same budget with
    /// this cost model and run that plan in the same interleaving.
    std::string against;
    std::uint64_t budget_bytes = 0; ///< when set: the budget in bytes (overrides budget_percent)
};

/// Parses the options; exits 2 with one line on stderr on a bad one (examples, not library code).
train_options parse_options(int argc, char** argv, int default_steps);

/// A line "<key> N kB" of /proc/self/status, in bytes; 0 when unknown (not Linux).
std::uint64_t proc_status_bytes(std::string_view key);
/// Peak resident memory of this process (VmHWM), in bytes.
inline std::uint64_t peak_rss_bytes() { return proc_status_bytes("VmHWM:"); }
/// Resident memory now (VmRSS), in bytes.
inline std::uint64_t current_rss_bytes() { return proc_status_bytes("VmRSS:"); }
/// Restarts VmHWM from the current resident size (Linux >= 4.0: "5" to clear_refs); no-op elsewhere.
void reset_peak_rss();

/// What an example runs with: the plan for `o` (empty in naive mode), the
/// store-all arena, the budget it was planned for and the planner's
/// predicted overhead.
struct example_plan {
    memplan::plan plan;
    std::uint64_t store_all = 0;
    std::uint64_t budget = 0;
    double predicted_overhead = 0;
};

/// Plans `g` as the examples' options say: `--budget P%` with planner
/// `--remat` (falling back, with a message, to the smallest budget the
/// planner reaches when P% is out of its reach), or `--budget min`. Prints
/// what the plan does; throws when no plan is found or it fails check_plan.
example_plan plan_example(const model& m, const graph& g, const train_options& o);

/// What the line every example ends with reports (CPU and CUDA alike),
/// "loss L naive_bytes N arena_bytes A budget_bytes B ms_per_step T", which scripts parse.
struct example_result {
    float loss = 0;
    std::uint64_t naive_bytes = 0;
    std::uint64_t arena_bytes = 0;
    std::uint64_t budget_bytes = 0;
    double ms_per_step = 0;
    bool compared = false;         ///< --compare ran: the two overheads below are set
    double predicted_overhead = 0; ///< the planner's, against store-all with each op's fastest variant
    double measured_overhead = 0;  ///< median step time of the plan / of that store-all plan - 1
};

/// The cost model an option names (roofline:cpu and fused:cpu measure this machine).
cost::cost_model example_cost_model(const std::string& spec);

/// What every example trains: the training graph of `m` and its program,
/// the executor's options for the flags (`--poison`, Adam's step size), and
/// the naive footprint (one allocation per tensor, no reuse).
struct example_setup {
    training_program prog;
    graph g;
    engine::executor_options eo;
    std::uint64_t naive_bytes = 0;
    /// `--cost measured` (or `--profile`): the backend must measure `g`
    /// before planning; `g` has roofline costs until then.
    bool needs_profile = false;
};
/// The graph priced by `o.cost` (roofline, fused, or measured:FILE; for a
/// bare `measured` the caller profiles, see `needs_profile`).
example_setup setup_example(const model& m, optimizer opt_kind, const train_options& o);

/// The store-all plan every overhead is measured against: each op once, in
/// the default order, each with its fastest variant by `g`'s costs.
memplan::plan store_all_fastest_plan(const graph& g);

/// Medians and spreads of the interleaved step times of --compare.
struct compare_result {
    int rounds = 0;
    std::vector<double> ms;       ///< per run: median step time; run 0 is the store-all plan
    std::vector<double> overhead; ///< per run: ms / ms[0] - 1 (0 for run 0)
    std::vector<double> spread;   ///< per run: p75 - p25 of its per-round overheads, the noise of `overhead`
};

/// Runs `runs` interleaved (A B A B ..., or A B C A B C ...): one untimed
/// round, then `rounds` timed ones; `step(ex, s)` runs one training step of
/// `ex` and returns its milliseconds. Overheads are against `runs[0]`.
template <class Executor, class Step>
compare_result compare_interleaved(const std::vector<Executor*>& runs, int rounds, Step&& step) {
    std::vector<std::vector<double>> t(runs.size()), ratio(runs.size());
    for (int s = 0; s <= rounds; ++s) {
        std::vector<double> now;
        for (auto* ex : runs) now.push_back(step(*ex, s));
        if (s == 0) continue; // warm-up
        for (std::size_t k = 0; k < runs.size(); ++k) {
            t[k].push_back(now[k]);
            ratio[k].push_back(now[k] / now[0] - 1);
        }
    }
    auto q = [](std::vector<double> v, double p) {
        std::sort(v.begin(), v.end());
        const double pos = p * double(v.size() - 1);
        const auto lo = static_cast<std::size_t>(pos);
        const auto hi = std::min(lo + 1, v.size() - 1);
        return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
    };
    compare_result r;
    r.rounds = rounds;
    for (std::size_t k = 0; k < runs.size(); ++k) {
        r.ms.push_back(q(t[k], 0.5));
        r.overhead.push_back(r.ms[k] / r.ms[0] - 1);
        r.spread.push_back(q(ratio[k], 0.75) - q(ratio[k], 0.25));
    }
    return r;
}

/// Runs an example's `body`: prints its result line and returns 0, or the
/// error on stderr and returns 1.
int run_and_report(const std::function<example_result()>& body);

/// Plans `m` at the budget (or runs it naively), trains it, prints the report.
int run_example(const model& m, optimizer opt_kind, int argc, char** argv, int default_steps);

} // namespace memplan::examples
