// The backends every solver test runs on: GLPK always, CBC when it was found.
#pragma once

#include <memplan/solver/glpk.hpp>
#ifdef MEMPLAN_HAS_CBC
#include <memplan/solver/cbc.hpp>
#endif

#include <doctest/doctest.h>

TYPE_TO_STRING(memplan::glpk_solver);
#ifdef MEMPLAN_HAS_CBC
TYPE_TO_STRING(memplan::cbc_solver);
#define MEMPLAN_SOLVERS memplan::glpk_solver, memplan::cbc_solver
#else
#define MEMPLAN_SOLVERS memplan::glpk_solver
#endif
