// What every train_*_cuda example shares: the CPU examples' options and
// planning (examples/train/common.hpp: --steps N, --budget P% | min, --remat
// NAME, --time-limit S, --naive, --poison, --interval K), training on the
// CUDA backend, and the same last line
// "loss L naive_bytes N arena_bytes A budget_bytes B ms_per_step T".
// Exits 77 (CTest's "skipped") with one line when there is no CUDA device.
// Defined once in cuda_common.cpp (a small static library), so each example
// compiles only its model: CI builds these on two cores.
#pragma once

#include "../train/models.hpp"

namespace memplan::examples {

/// Plans `m` at the budget (or runs it naively) on the GPU, trains it, prints the report.
int run_cuda_example(const model& m, optimizer opt_kind, int argc, char** argv, int default_steps);

} // namespace memplan::examples
