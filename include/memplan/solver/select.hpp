// Choosing a MILP backend by name at run time. The backends are opt-in
// targets: linking `memplan::glpk` defines MEMPLAN_HAS_GLPK and
// `memplan::cbc` defines MEMPLAN_HAS_CBC, and this header then offers them.
// Code that knows its backend uses the type (`milp_allocator<glpk_solver>`);
// the command line and benches call `with_solver(name, f)`, which hands `f`
// the backend object, so no caller repeats the list of backends.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/solver/solver.hpp>
#if MEMPLAN_HAS_GLPK
#include <memplan/solver/glpk.hpp>
#endif
#if MEMPLAN_HAS_CBC
#include <memplan/solver/cbc.hpp>
#endif

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace memplan {

/// One compiled-in backend: its name, what it is, and its licence (which
/// binds the program that links it).
struct solver_backend {
    std::string_view name;
    std::string_view description;
};

/// The backends compiled into this program, the default first (GLPK, then
/// CBC); empty when none is linked.
inline std::span<const solver_backend> solver_backends() noexcept {
    static constexpr solver_backend all[] = {
#if MEMPLAN_HAS_GLPK
        {"glpk", "GLPK 5 branch and cut (GPL-3)"},
#endif
#if MEMPLAN_HAS_CBC
        {"cbc", "COIN-OR CBC 2.10 branch and cut (EPL-2.0)"},
#endif
        {"", ""}, // keeps the array non-empty; not a backend
    };
    return {all, std::size(all) - 1};
}

/// "glpk, cbc", or "none".
inline std::string solver_backend_names() {
    std::string s;
    for (const auto& b : solver_backends()) s += (s.empty() ? "" : ", ") + std::string(b.name);
    return s.empty() ? "none" : s;
}

/// Checks a backend name (empty: the default) before any work. Throws
/// `memplan::error("solver")` for an unknown or absent backend.
inline std::string_view check_solver_name(std::string_view name) {
    const auto all = solver_backends();
    if (all.empty())
        throw error("solver", "no MILP solver backend in this build (link memplan::glpk or memplan::cbc)");
    if (name.empty()) return all.front().name;
    for (const auto& b : all)
        if (b.name == name) return b.name;
    throw error("solver", "unknown or unavailable solver '" + std::string(name) +
                              "'; available: " + solver_backend_names());
}

/// Calls `f(backend)` with the backend called `name` (empty: the default)
/// and returns what it returns (`R`). Throws as `check_solver_name` does.
template <class R, class F>
R with_solver(std::string_view name, [[maybe_unused]] F&& f) {
    [[maybe_unused]] const auto chosen = check_solver_name(name);
#if MEMPLAN_HAS_GLPK
    if (chosen == glpk_solver::name) return std::forward<F>(f)(glpk_solver{});
#endif
#if MEMPLAN_HAS_CBC
    if (chosen == cbc_solver::name) return std::forward<F>(f)(cbc_solver{});
#endif
    throw error("solver", "solver '" + std::string(name) + "' is not compiled in"); // unreachable after the check
}

} // namespace memplan
