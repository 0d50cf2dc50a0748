// The command line's choice of planners by name: allocators (the heuristics,
// the exact search, the offset MILP on a chosen solver backend) and operator
// orders. The solver backends are compiled in when their CMake targets exist
// (MEMPLAN_HAS_GLPK, MEMPLAN_HAS_CBC).
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/plan/alloc/allocators.hpp>
#include <memplan/plan/alloc/exact.hpp>
#include <memplan/plan/alloc/milp.hpp>
#include <memplan/schedule/order/select.hpp>
#if MEMPLAN_HAS_GLPK
#include <memplan/solver/glpk.hpp>
#endif
#if MEMPLAN_HAS_CBC
#include <memplan/solver/cbc.hpp>
#endif

#include <unistd.h>

#include <cstdio>
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

} // namespace memplan::cli
