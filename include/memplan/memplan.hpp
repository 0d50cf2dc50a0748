// memplan: ahead-of-time memory planning for deep-network training.
//
// The umbrella header: the core model, the planners, the validators, I/O,
// layers and the model zoo. It pulls in nothing that needs a solver library
// or a GPU: the GLPK and CBC backends are <memplan/solver/glpk.hpp> and
// <memplan/solver/cbc.hpp> (targets memplan::glpk, memplan::cbc); the
// training engine's backends are <memplan/engine/cpu/backend.hpp> (memplan::cpu)
// and <memplan/engine/cuda/backend.hpp> (memplan::cuda).
#pragma once

// Core
#include <memplan/core/error.hpp>
#include <memplan/core/status.hpp>

// Graphs, layers, training graphs, the zoo
#include <memplan/graph/graph.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/zoo/zoo.hpp>

// Schedules, liveness, lower bounds, operator order
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/buffer.hpp>
#include <memplan/schedule/cut_bound.hpp>
#include <memplan/schedule/liveness.hpp>
#include <memplan/schedule/order/select.hpp>
#include <memplan/schedule/schedule.hpp>

// Rematerialization under a budget (the Checkmate MILP takes any SolverLike)
#include <memplan/remat/bound.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/remat/select.hpp>

// Plans, bounds, allocation
#include <memplan/alloc/allocators.hpp>
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/greedy.hpp>
#include <memplan/alloc/milp.hpp>
#include <memplan/alloc/no_reuse.hpp>
#include <memplan/alloc/online_best_fit.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/from_intervals.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>
#include <memplan/schedule/plan.hpp>

// Solver interface (backend-neutral)
#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

// Validators
#include <memplan/check/placement.hpp>
#include <memplan/check/validator.hpp>

// I/O
#include <memplan/io/atomic_file.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/offset_csv.hpp>
#include <memplan/io/pareto_csv.hpp>
#include <memplan/io/plan_json.hpp>
