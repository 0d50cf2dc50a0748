// Shared by the rematerialization benches: byte units and a planner run on a
// context, checked by the validator.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/remat/context.hpp>
#include <memplan/remat/remat.hpp>

#include <cstdint>
#include <string>

namespace memplan::bench {

inline double gib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

/// `planner` at `budget` within `seconds`, its plan checked by the
/// validator (remat_planner::checked); throws when the planner errs.
template <class Planner>
remat_result run_checked(const Planner& planner, const remat_context<graph>& ctx, std::uint64_t budget,
                         double seconds) {
    remat_options o;
    o.budget = budget;
    o.time_limit = seconds;
    auto r = planner.checked(ctx, o);
    if (r.status == status::error) throw error("bench", std::string(Planner::name) + ": " + r.message);
    return r;
}

} // namespace memplan::bench
