// Rematerialization planners by name, for the command line and benches:
// `remat_names()` lists them; `plan_remat(name, g, options)` runs one.
// Planners that need a MILP solver take it as a parameter (`plan_remat_with`).
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/remat/store_all.hpp>

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace memplan {

namespace detail {
inline constexpr std::array<std::string_view, 1> remat_name_list{"store_all"};
} // namespace detail

/// The planner names `plan_remat` accepts.
inline std::span<const std::string_view> remat_names() noexcept { return detail::remat_name_list; }

/// Runs the planner called `name`. Throws `memplan::error` for an unknown name.
template <class Graph>
basic_remat_result<typename Graph::size_type, typename Graph::id_type> plan_remat(std::string_view name, const Graph& g,
                                                                                  const remat_options& opt) {
    if (name == store_all::name) return store_all{}.plan(g, opt);
    std::string all;
    for (auto n : remat_names()) all += (all.empty() ? "" : ", ") + std::string(n);
    throw error("remat", "unknown planner '" + std::string(name) + "' (choose one of: " + all + ")");
}

} // namespace memplan
