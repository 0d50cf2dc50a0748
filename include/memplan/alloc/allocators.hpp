// Choosing an allocation policy by name at run time (the command line's
// --alloc, benches): one registry table of AllocatorLike policies, each row
// {name, what it is, needs a solver, how to run it}. Adding a policy is one
// row. Code that knows its policy uses the type (`greedy_by_size{}`).
#pragma once

#include <memplan/alloc/auto.hpp>
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/exact.hpp>
#include <memplan/alloc/greedy.hpp>
#include <memplan/alloc/milp.hpp>
#include <memplan/alloc/no_reuse.hpp>
#include <memplan/alloc/online_best_fit.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/deadline.hpp>
#include <memplan/core/error.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/solver/select.hpp>

#include <array>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace memplan {

/// What the searching allocators of the registry take; the heuristics
/// ignore it.
struct allocator_settings {
    memplan::time_limit time_limit = 10.0; ///< auto, exact, milp: seconds from the call, or the caller's deadline
    std::optional<double> gap;      ///< auto, exact, milp: stop within it of the bound; unset: the policy's default
    std::string solver;             ///< milp: the backend (solver/select.hpp); empty: the default
    std::function<void(const exact_progress&)> on_progress; ///< auto, exact
};

template <class Size = std::uint64_t>
using allocator_entry =
    registry_entry<basic_alloc_result<Size> (*)(const basic_alloc_problem<Size>&, const allocator_settings&)>;

namespace detail {

template <class A, class Size>
    requires AllocatorLike<A, Size>
constexpr allocator_entry<Size> heuristic_entry(std::string_view description) {
    return {A::name, description, false,
            [](const basic_alloc_problem<Size>& p, const allocator_settings&) { return A{}.place(p); }};
}

template <class A, class Size>
constexpr allocator_entry<Size> searching_entry(std::string_view description) {
    return {A::name, description, false, [](const basic_alloc_problem<Size>& p, const allocator_settings& s) {
                A a;
                a.time_limit = s.time_limit;
                if (s.gap) a.gap = *s.gap;
                a.on_progress = s.on_progress;
                return a.place(p);
            }};
}

template <class Size>
basic_alloc_result<Size> place_milp(const basic_alloc_problem<Size>& p, const allocator_settings& s) {
    solve_options o;
    o.time_limit = s.time_limit;
    o.relative_gap = s.gap.value_or(0);
    return with_solver<basic_alloc_result<Size>>(
        s.solver, [&](const auto& backend) { return milp_allocator<std::decay_t<decltype(backend)>>{backend, o}.place(p); });
}

} // namespace detail

/// Every allocator selectable by name: the heuristics first (no time limit),
/// then the searches. `auto` is the default.
template <class Size = std::uint64_t>
std::span<const allocator_entry<Size>> allocator_registry() {
    static constexpr std::array<allocator_entry<Size>, 8> table{
        detail::heuristic_entry<no_reuse, Size>("every buffer its own range (the sum of all sizes)"),
        detail::heuristic_entry<greedy_by_size, Size>("largest first, each in the smallest gap (TFLite)"),
        detail::heuristic_entry<greedy_by_lifetime, Size>("longest-lived first, each in the smallest gap"),
        detail::heuristic_entry<online_best_fit, Size>("allocate and free in step order, best fit (a caching allocator)"),
        detail::heuristic_entry<best_heuristic, Size>("the best of the greedy passes and the online simulation"),
        detail::searching_entry<auto_allocator, Size>(
            "the best heuristic, then the exact search until the lower bound or the time limit (default)"),
        detail::searching_entry<exact, Size>("exact search from the best heuristic (MiniMalloc-style, anytime)"),
        allocator_entry<Size>{"milp", "the offset MILP on a solver backend (OLLA/MODeL's big-M model)", true,
                              detail::place_milp<Size>},
    };
    return table;
}

/// The heuristic allocators (no time limit, no solver): the first five rows.
template <class Size = std::uint64_t>
std::span<const allocator_entry<Size>> heuristic_allocators() {
    return allocator_registry<Size>().first(5);
}

/// Names of the heuristic allocators: no_reuse, greedy_by_size,
/// greedy_by_lifetime, online_best_fit, best_heuristic.
inline std::span<const std::string_view> heuristic_allocator_names() {
    static constexpr std::array<std::string_view, 5> names{no_reuse::name, greedy_by_size::name,
                                                            greedy_by_lifetime::name, online_best_fit::name,
                                                            best_heuristic::name};
    return names;
}

/// The registry row called `name`; throws `memplan::error("alloc")` naming
/// the unknown allocator and listing the known ones.
template <class Size = std::uint64_t>
const allocator_entry<Size>& find_allocator(std::string_view name) {
    return registry_lookup<typename allocator_entry<Size>::run_type>(allocator_registry<Size>(), "alloc", "allocator",
                                                                     name);
}

/// Places `p` with the allocator called `name`.
template <class Size>
basic_alloc_result<Size> allocate(std::string_view name, const basic_alloc_problem<Size>& p,
                                  const allocator_settings& s = {}) {
    return find_allocator<Size>(name).run(p, s);
}

/// An AllocatorLike that forwards to the registry row chosen at run time
/// (checked when it is made).
template <class Size = std::uint64_t>
struct named_allocator {
    static constexpr std::string_view name = "named";
    const allocator_entry<Size>* entry = nullptr;
    allocator_settings settings{};

    named_allocator(std::string_view which, allocator_settings s = {})
        : entry(&find_allocator<Size>(which)), settings(std::move(s)) {}

    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const { return entry->run(p, settings); }
};

} // namespace memplan
