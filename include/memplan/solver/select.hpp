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
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace memplan {

/// One compiled-in backend, a row of the registry: its name and what it is,
/// with its licence (which binds the program that links it). It runs
/// through `with_solver`, which hands the caller the backend's type: a
/// solver is a type (`SolverLike`), not a function.
using solver_entry = registry_entry<std::nullptr_t>;

/// The backends compiled into this program, the default first (GLPK, then
/// CBC); empty when none is linked.
inline std::span<const solver_entry> solver_backends() noexcept {
    static constexpr solver_entry all[] = {
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
    const auto all = solver_backends();
    return all.empty() ? "none" : registry_names(all);
}

/// Checks a backend name (empty: the default) before any work. Throws
/// `memplan::error("solver")` for an unknown or absent backend (the
/// registry's message, listing those compiled in).
inline std::string_view check_solver_name(std::string_view name) {
    const auto all = solver_backends();
    if (all.empty())
        throw error("solver", "no MILP solver backend in this build (link memplan::glpk or memplan::cbc)");
    if (name.empty()) return all.front().name;
    return registry_lookup(all, "solver", "solver", name).name;
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
