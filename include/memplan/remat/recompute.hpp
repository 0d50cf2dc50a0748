// Everything a rematerialization planner is built from, one header per
// concern:
//
//   remat/choice.hpp    remat_choice: what to keep, which variant each op runs
//   remat/context.hpp   remat_context: the graph facts, computed once, and the
//                       rule from a choice to a schedule with recomputation
//   remat/place.hpp     place_within: from a schedule to a plan under a budget
//   remat/planner.hpp   remat_planner: plan(graph, options), the check of what
//                       a planner returns, and the shared result helpers
//   remat/remat.hpp     options, results, RematPlannerLike
#pragma once

#include <memplan/remat/choice.hpp>
#include <memplan/remat/context.hpp>
#include <memplan/remat/place.hpp>
#include <memplan/remat/planner.hpp>
#include <memplan/remat/remat.hpp>
