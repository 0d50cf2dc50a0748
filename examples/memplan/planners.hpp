// The command line's choice of planners by name: allocators (the heuristics,
// the exact search, the offset MILP on a chosen solver backend) and operator
// orders. The solver backends are compiled in when their CMake targets exist
// (MEMPLAN_HAS_GLPK, MEMPLAN_HAS_CBC). Rematerialization planners come from
// remat/select.hpp; those that take a MILP solver get the chosen backend.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/plan/alloc/allocators.hpp>
#include <memplan/plan/alloc/exact.hpp>
#include <memplan/plan/alloc/milp.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/schedule/order/select.hpp>
#if MEMPLAN_HAS_GLPK
#include <memplan/solver/glpk.hpp>
#endif
#if MEMPLAN_HAS_CBC
#include <memplan/solver/cbc.hpp>
#endif

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::cli {

/// "auto" is the default: the best heuristic, then the exact search until the
/// arena meets the lower bound or the time limit.
inline std::vector<std::string> allocator_choices() {
    std::vector<std::string> v{"auto"};
    for (auto n : heuristic_allocator_names()) v.emplace_back(n);
    v.emplace_back("exact");
#if MEMPLAN_HAS_GLPK || MEMPLAN_HAS_CBC
    v.emplace_back("milp");
#endif
    return v;
}

inline std::vector<std::string> solver_choices() {
    std::vector<std::string> v;
#if MEMPLAN_HAS_GLPK
    v.emplace_back("glpk");
#endif
#if MEMPLAN_HAS_CBC
    v.emplace_back("cbc");
#endif
    return v;
}

inline std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

/// Progress of a long search on stderr, only when it is a terminal (the exact
/// search calls at most about once a second).
inline void print_progress(const exact_progress& p) {
    if (!isatty(2)) return;
    std::fprintf(stderr, "\r  best %llu, bound %llu, %.1f s   ", static_cast<unsigned long long>(p.best_height),
                 static_cast<unsigned long long>(p.lower_bound), p.elapsed_seconds);
    std::fflush(stderr);
}

/// An allocation policy chosen by name on the command line.
struct chosen_allocator {
    static constexpr std::string_view name = "cli";
    std::string which = "auto";
    std::string solver; ///< for milp
    double time_limit_seconds = 10;

    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        if (which == "auto" || which == "exact") {
            exact ex;
            ex.time_limit_seconds = time_limit_seconds;
            if (which == "auto") ex.gap = auto_gap;
            ex.on_progress = print_progress;
            auto r = ex.place(p);
            if (isatty(2)) std::fprintf(stderr, "\r%60s\r", "");
            return r;
        }
        if (which == "milp") {
            solve_options o;
            o.time_limit_seconds = time_limit_seconds;
#if MEMPLAN_HAS_GLPK
            if (solver == "glpk") return milp_allocator<glpk_solver>{glpk_solver{}, o}.place(p);
#endif
#if MEMPLAN_HAS_CBC
            if (solver == "cbc") return milp_allocator<cbc_solver>{cbc_solver{}, o}.place(p);
#endif
            throw error("cli", "no MILP solver backend '" + solver + "' in this build");
        }
        return allocate(which, p);
    }
};

/// Reads --alloc, --solver and --time-limit (checked before any work).
inline chosen_allocator allocator_from(const std::string& which, const std::string& solver, double time_limit) {
    chosen_allocator a;
    const auto names = allocator_choices();
    if (std::find(names.begin(), names.end(), which) == names.end())
        throw error("cli", "option --alloc: unknown allocator '" + which + "'; expected one of: " + join(names));
    const auto solvers = solver_choices();
    if (!solver.empty() && std::find(solvers.begin(), solvers.end(), solver) == solvers.end())
        throw error("cli", "option --solver: unknown or unavailable solver '" + solver + "'; available: " +
                               (solvers.empty() ? std::string("none") : join(solvers)));
    if (which == "milp" && solvers.empty()) throw error("cli", "option --alloc milp: no MILP solver in this build");
    a.which = which;
    a.solver = solver.empty() && !solvers.empty() ? solvers.front() : solver;
    a.time_limit_seconds = time_limit;
    return a;
}

/// The operator order planner `name` on `g` ("ilp" uses the solver backend).
template <class Graph>
order_result<Graph> order_with(std::string_view name, const Graph& g, const std::string& solver, double time_limit) {
    order_options o;
    o.time_limit_seconds = time_limit;
#if MEMPLAN_HAS_GLPK
    if (solver.empty() || solver == "glpk") return order_by_name(name, g, glpk_solver{}, o);
#endif
#if MEMPLAN_HAS_CBC
    if (solver.empty() || solver == "cbc") return order_by_name(name, g, cbc_solver{}, o);
#endif
    (void)solver;
    return order_by_name(name, g, o);
}

/// The rematerialization planners `--remat` accepts.
inline std::vector<std::string> remat_choices() {
    std::vector<std::string> v;
    for (auto n : remat_names()) v.emplace_back(n);
    return v;
}

/// The default planner: the portfolio ("auto") once the library has it, else store_all.
inline std::string default_remat_name() {
    const auto v = remat_choices();
    return std::find(v.begin(), v.end(), "auto") != v.end() ? std::string("auto") : std::string("store_all");
}

/// Checks a --remat value before any work.
inline std::string remat_from(const std::string& name) {
    const auto v = remat_choices();
    if (std::find(v.begin(), v.end(), name) == v.end())
        throw error("cli", "option --remat: unknown planner '" + name + "'; expected one of: " + join(v));
    return name;
}

namespace detail {

/// plan_remat_with(name, g, options, solver) when the library offers it
/// (found by argument-dependent lookup at instantiation, so this compiles
/// before and after it lands), else plan_remat.
template <class Graph, class Solver>
basic_remat_result<typename Graph::size_type, typename Graph::id_type>
remat_on(std::string_view name, const Graph& g, const remat_options& o, const Solver& solver) {
    if constexpr (requires { plan_remat_with(name, g, o, solver); }) return plan_remat_with(name, g, o, solver);
    else return plan_remat(name, g, o);
}

} // namespace detail

/// Runs the rematerialization planner `name`; planners that take a MILP
/// solver get backend `solver` (empty: the first one compiled in).
template <class Graph>
basic_remat_result<typename Graph::size_type, typename Graph::id_type>
remat_with(std::string_view name, const Graph& g, const remat_options& o, const std::string& solver) {
#if MEMPLAN_HAS_GLPK
    if (solver.empty() || solver == "glpk") return detail::remat_on(name, g, o, glpk_solver{});
#endif
#if MEMPLAN_HAS_CBC
    if (solver.empty() || solver == "cbc") return detail::remat_on(name, g, o, cbc_solver{});
#endif
    (void)solver;
    return plan_remat(name, g, o);
}

/// Progress of a rematerialization planner on stderr, only when it is a
/// terminal, at most once a second whatever the planner's own pace.
inline std::function<void(const remat_progress&)> remat_progress_printer() {
    if (!isatty(2)) return {};
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    return [last](const remat_progress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (now - *last < std::chrono::seconds(1)) return;
        *last = now;
        if (p.best_arena)
            std::fprintf(stderr, "\r  %.*s: best arena %llu, overhead %+.2f %%, %.1f s   ",
                         static_cast<int>(p.planner.size()), p.planner.data(),
                         static_cast<unsigned long long>(p.best_arena), 100 * p.best_overhead, p.elapsed_seconds);
        else
            std::fprintf(stderr, "\r  %.*s: no plan yet, %.1f s   ", static_cast<int>(p.planner.size()),
                         p.planner.data(), p.elapsed_seconds);
        std::fflush(stderr);
    };
}

/// Erases a progress line (terminal only).
inline void clear_progress() {
    if (isatty(2)) std::fprintf(stderr, "\r%70s\r", "");
}

} // namespace memplan::cli
