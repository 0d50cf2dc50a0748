// `make_plan` with an allocator chosen by name at run time (the registry of
// alloc/allocators.hpp), as the command line chooses one. A separate header:
// the registry names every allocator, the exact search and the MILP among
// them, which a program that passes its allocator as a type does not need.
#pragma once

#include <memplan/alloc/allocators.hpp>
#include <memplan/plan/make_plan.hpp>

#include <string_view>

namespace memplan {

/// `make_plan` with the allocator called `allocator_name` (the registry of
/// alloc/allocators.hpp). Throws `memplan::error` for an unknown name
/// (before any work) or a malformed schedule.
template <class Graph>
planned_of<Graph>
make_plan(const Graph& g, const basic_schedule<typename Graph::id_type>& s, std::string_view allocator_name,
          plan_options opt = {}, const allocator_settings& settings = {}) {
    return make_plan(g, s, named_allocator<typename Graph::size_type>(allocator_name, settings), opt);
}

} // namespace memplan
