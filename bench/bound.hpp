// The proven bound of a rematerialization plan for the table printers:
// remat/bound.hpp on CBC when it is linked (its simplex solves the bound's
// LPs many times faster than GLPK's), else on GLPK.
#pragma once

#include <memplan/remat/bound.hpp>
#include <memplan/solver/glpk.hpp>
#if MEMPLAN_HAS_CBC
#include <memplan/solver/cbc.hpp>
#endif

#include <string>

namespace memplan::bench {

#if MEMPLAN_HAS_CBC
using bound_solver = cbc_solver;
#else
using bound_solver = glpk_solver;
#endif

/// Attaches the bound of `r`'s space within `seconds` (remat_result's
/// cost_bound, bound_proven, bound_note).
inline void attach_bound(const graph& g, remat_result& r, double seconds) {
    remat_bound_options o;
    o.deadline = memplan::deadline{}.within(seconds);
    attach_cost_bound(g, r, bound_solver{}, o);
}

/// "+1.23 %" for a proven bound, "-" without one.
inline std::string bound_cell(const remat_result& r) {
    if (!r.bound_proven) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.2f %%", 100 * r.overhead_bound());
    return buf;
}

} // namespace memplan::bench
