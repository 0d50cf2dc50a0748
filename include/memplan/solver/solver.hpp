// The solver policy: planners are written against `SolverLike`, never against
// a backend, so GLPK, CBC or a test double can be swapped in as a template
// argument. Backends live in their own opt-in headers (solver/glpk.hpp,
// solver/cbc.hpp) and CMake targets (memplan::glpk, memplan::cbc).
#pragma once

#include <memplan/solver/model.hpp>

#include <concepts>
#include <string_view>

namespace memplan {

/// A MILP backend: a static `name` and a const `solve` that returns the
/// outcome as a value. `solve` never throws for solver outcomes and never
/// aborts; a malformed model yields `status::error` with the fault named.
template <class S>
concept SolverLike = requires(const S& s, const milp_model& m, const solve_options& o) {
    { S::name } -> std::convertible_to<std::string_view>;
    { s.solve(m, o) } -> std::same_as<milp_result>;
};

} // namespace memplan
