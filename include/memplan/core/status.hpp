// Outcomes of planners and solvers are values, never exceptions.
#pragma once

#include <optional>
#include <string_view>

namespace memplan {

/// How a planner or solver run ended.
///  - optimal:     the result is proven best (e.g. arena == lower bound).
///  - feasible:    a valid result, not proven best (heuristic, or time limit hit).
///  - infeasible:  proven that no result exists (e.g. capacity below the bound); see the reason.
///  - unbounded:   the objective is unbounded (MILP only).
///  - no_solution: a limit was reached before any result was found.
///  - error:       the backend failed; see the message.
enum class status { optimal, feasible, infeasible, unbounded, no_solution, error };

constexpr std::string_view to_string(status s) noexcept {
    switch (s) {
    case status::optimal: return "optimal";
    case status::feasible: return "feasible";
    case status::infeasible: return "infeasible";
    case status::unbounded: return "unbounded";
    case status::no_solution: return "no_solution";
    case status::error: return "error";
    }
    return "error";
}

/// True when the outcome carries a usable result.
constexpr bool has_solution(status s) noexcept { return s == status::optimal || s == status::feasible; }

} // namespace memplan
