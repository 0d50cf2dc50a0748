// Profiling: the measured cost of every op and variant of a training graph on
// the backend that runs it.
//
// `profile_graph` runs the graph's ops on `Backend` as the executor runs a
// plan — one arena, the real shapes, store-all with every op once — and
// times each `run` call on the host. One pass per variant index: pass k runs
// every op that has variants with its k-th (the last when it has fewer), so
// each (op, variant) is timed in the company of a whole training step, not in
// a loop of its own that would keep its operands in cache. The passes run
// interleaved, one step of each in turn, each on its own arena (memory: the
// sum of their store-all arenas). Each pass first runs `warmup` untimed
// steps, then timed steps until the sum of the per-op medians moves by less
// than `tolerance` between two consecutive steps (at least `min_steps` and
// `min_seconds` of its own steps, at most `max_steps` or `max_seconds`). The result is the
// graph with every cost replaced by the median in microseconds (cost_unit
// "us", cost_model "measured:<source>"), ready for `cost::measured`.
//
// The backend's kernels must be synchronous or `synchronize()` must wait
// for them (the wrapper synchronises around each run). The CPU backend is
// single-threaded, as it runs in training.
#pragma once

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/core/error.hpp>
#include <memplan/cost/model.hpp>
#include <memplan/engine/backend.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace memplan::engine {

struct profile_options {
    int warmup = 2;          ///< untimed steps per pass
    int min_steps = 10;      ///< timed steps per pass, at least
    int max_steps = 100;     ///< and at most
    double tolerance = 0.005; ///< stop when the step's sum of medians moves less than this (relative)
    double min_seconds = 1;  ///< per pass: time for at least this long (small graphs: many steps)
    double max_seconds = 30; ///< per pass: stop timing after this long (at least min_steps)
    std::string source = "cpu"; ///< the cost model's name becomes "measured:<source>"
    executor_options exec{}; ///< the optimizer and seed of the run (poison is off while profiling)
    /// Data of each graph input (name, raw bytes), set before every step; inputs not listed get zeros.
    std::vector<std::pair<std::string, std::vector<std::byte>>> inputs;
    /// Progress, one line per pass (may be empty).
    std::function<void(const std::string&)> progress;
};

/// How steady the measurement was.
struct profile_stats {
    int passes = 0;
    std::vector<int> steps;       ///< timed steps of each pass
    double spread = 0;            ///< time-weighted mean over ops of (p75 - p25) / median
    double worst_spread = 0;      ///< the largest (p75 - p25) / median of an op costing >= 1 % of the step
    std::string worst_op;         ///< that op
    double step_us = 0;           ///< pass 0: sum of the per-op medians (default variants)
    double seconds = 0;           ///< wall time of the whole profile
};

struct profile_result {
    graph measured;
    profile_stats stats;
};

namespace detail {

/// `Backend` with every run timed on the host between two synchronisations.
template <BackendLike Backend>
class timed_backend {
public:
    timed_backend() = default;
    explicit timed_backend(Backend b) : inner_(std::move(b)) {}
    std::byte* allocate(std::uint64_t n) { return inner_.allocate(n); }
    void deallocate(std::byte* p, std::uint64_t n) noexcept { inner_.deallocate(p, n); }
    void upload(std::byte* d, const std::byte* h, std::uint64_t n) { inner_.upload(d, h, n); }
    void download(std::byte* h, const std::byte* d, std::uint64_t n) { inner_.download(h, d, n); }
    void poison(std::byte* p, std::uint64_t n) { inner_.poison(p, n); }
    void synchronize() { inner_.synchronize(); }
    void run(const kernel_call& c) {
        inner_.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        inner_.run(c);
        inner_.synchronize();
        times_->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<double>& times() { return *times_; }

private:
    Backend inner_{};
    std::shared_ptr<std::vector<double>> times_ = std::make_shared<std::vector<double>>();
};

/// Sets every graph input of `ex` (a tensor no op produces, not persistent)
/// to its bytes in `inputs` (name, raw bytes), or zeros when it is not listed.
template <class Executor>
void feed_inputs_or_zeros(Executor& ex, const graph& g,
                          const std::vector<std::pair<std::string, std::vector<std::byte>>>& inputs) {
    std::vector<char> produced(g.num_tensors(), 0);
    for (const auto& op : g.ops())
        for (auto t : op.outputs) produced[t] = 1;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& x = g.tensor(static_cast<graph::id_type>(t));
        if (produced[t] || x.persistent) continue;
        std::vector<std::byte> bytes(x.bytes, std::byte{0});
        for (const auto& [name, data] : inputs)
            if (name == x.name) bytes = data;
        ex.set_input(x.name, bytes);
    }
}

inline double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = q * double(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

} // namespace detail

/// Measures every op and variant of `g` (from `training_graph(net, ..., prog)`)
/// on `Backend`. Throws memplan::error when the graph and program disagree or
/// a kernel fails (naming the op).
template <BackendLike Backend>
profile_result profile_graph(const nn::network& net, const graph& g, const training_program& prog,
                             const profile_options& o = {}, Backend backend = {}) {
    const auto t_start = std::chrono::steady_clock::now();
    std::size_t passes = 1;
    for (const auto& op : g.ops()) passes = std::max(passes, op.variants.size());
    std::vector<std::vector<std::vector<double>>> samples(passes, std::vector<std::vector<double>>(g.num_ops()));
    profile_result out;
    out.stats.passes = static_cast<int>(passes);

    // One executor per pass, stepped in turn (pass 0, 1, ..., 0, 1, ...):
    // a change of the machine's load while profiling then shifts every
    // variant's times alike rather than those of one pass, and the choice
    // between variants, which compares passes, stays fair.
    using timed_executor = executor<detail::timed_backend<Backend>>;
    struct pass_state {
        std::unique_ptr<timed_executor> ex;
        int rounds = 0;       ///< steps run, warm-up included
        int timed = 0;        ///< timed steps
        double seconds = 0;   ///< time in its timed steps
        double last_sum = -1; ///< sum of the per-op medians after its last timed step
        bool done = false;
    };
    std::vector<pass_state> state(passes);
    for (std::size_t k = 0; k < passes; ++k) {
        schedule s;
        for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
            const auto nv = g.op(i).variants.size();
            s.push_back({i, nv == 0 ? graph::npos : static_cast<graph::id_type>(std::min(k, nv - 1))});
        }
        auto made = make_plan(g, s, best_heuristic{});
        executor_options eo = o.exec;
        eo.poison = false;
        state[k].ex = std::make_unique<timed_executor>(net, g, prog, std::move(made.plan),
                                                       detail::timed_backend<Backend>(backend), eo);
        detail::feed_inputs_or_zeros(*state[k].ex, g, o.inputs);
    }
    for (std::size_t left = passes; left > 0;) {
        for (std::size_t k = 0; k < passes; ++k) {
            auto& p = state[k];
            if (p.done) continue;
            auto& ex = *p.ex;
            ex.backend().times().clear();
            const auto t0 = std::chrono::steady_clock::now();
            ex.step();
            if (p.rounds++ < o.warmup) continue;
            p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const auto& steps = ex.plan().steps;
            const auto& t = ex.backend().times();
            if (t.size() != steps.size())
                throw error("engine", "profile: the backend ran " + std::to_string(t.size()) + " kernels for " +
                                          std::to_string(steps.size()) + " steps");
            auto& per_op = samples[k];
            for (std::size_t i = 0; i < steps.size(); ++i) per_op[steps[i].op].push_back(t[i]);
            ++p.timed;
            double sum = 0;
            for (const auto& v : per_op) sum += detail::quantile(v, 0.5);
            const bool steady = p.last_sum > 0 && std::abs(sum - p.last_sum) <= o.tolerance * p.last_sum;
            p.last_sum = sum;
            const bool enough = p.timed >= o.min_steps && p.seconds >= o.min_seconds;
            if (p.timed >= o.min_steps && ((enough && steady) || p.timed >= o.max_steps || p.seconds >= o.max_seconds)) {
                p.done = true;
                --left;
                if (o.progress)
                    o.progress("profile pass " + std::to_string(k + 1) + "/" + std::to_string(passes) + ": " +
                               std::to_string(p.timed) + " timed steps, " + std::to_string(int(p.last_sum)) +
                               " us per step");
            }
        }
    }
    for (const auto& p : state) out.stats.steps.push_back(p.timed);

    // Costs: an op without variants pools the samples of every pass (it ran
    // the same kernel in each); variant k takes pass k's.
    graph m = g;
    auto pooled = [&](graph::id_type i) {
        std::vector<double> all;
        for (std::size_t k = 0; k < passes; ++k) all.insert(all.end(), samples[k][i].begin(), samples[k][i].end());
        return all;
    };
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        auto& op = m.op_at(i);
        if (op.variants.empty()) {
            op.cost = detail::quantile(pooled(i), 0.5);
            out.stats.step_us += detail::quantile(samples[0][i], 0.5);
        } else {
            for (std::size_t k = 0; k < op.variants.size(); ++k) op.variants[k].cost = detail::quantile(samples[k][i], 0.5);
            op.cost = op.variants.front().cost;
            out.stats.step_us += op.cost;
        }
    }
    // Spread: (p75 - p25) / median per (op, variant), weighted by the median.
    double weighted = 0, total = 0;
    auto note = [&](const std::vector<double>& v, double med, const std::string& what) {
        if (!(med > 0)) return;
        const double sp = (detail::quantile(v, 0.75) - detail::quantile(v, 0.25)) / med;
        weighted += sp * med;
        total += med;
        if (sp > out.stats.worst_spread && med >= 0.01 * out.stats.step_us) {
            out.stats.worst_spread = sp;
            out.stats.worst_op = what;
        }
    };
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        const auto& op = m.op(i);
        if (op.variants.empty()) note(pooled(i), op.cost, op.name);
        for (std::size_t k = 0; k < op.variants.size(); ++k)
            note(samples[k][i], op.variants[k].cost, op.name + " (" + op.variants[k].name + ")");
    }
    out.stats.spread = total > 0 ? weighted / total : 0;
    m.set_costs_from(std::string(cost::microseconds), "measured:" + o.source);
    out.measured = std::move(m);
    out.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return out;
}

} // namespace memplan::engine
