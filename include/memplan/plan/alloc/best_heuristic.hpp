// Several cheap placements, keep the lowest: greedy best-fit by size, by
// lifetime, by area and by start time, then the online best-fit simulation.
// XLA's global decreasing best-fit does the same with two orders; no single
// order wins on every instance. The greedy passes share one interval tree.
#pragma once

#include <memplan/plan/alloc/greedy.hpp>
#include <memplan/plan/alloc/online_best_fit.hpp>
#include <memplan/plan/alloc/problem.hpp>

#include <chrono>
#include <string_view>
#include <vector>

namespace memplan {

struct best_heuristic {
    static constexpr std::string_view name = "best_heuristic";

    /// The lowest of the five placements (ties: the first in the order above).
    /// Status `error` only when every pass overflows `Size`.
    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        const auto t0 = std::chrono::steady_clock::now();
        validate(p);
        const Size lb = lower_bound(p);
        auto tree = detail::make_interval_tree(p);
        basic_alloc_result<Size> best;
        bool have = false;
        std::vector<Size> offsets;
        auto keep = [&](bool ok) {
            if (!ok) return;
            const Size h = placement_height(p, offsets);
            if (!have || h < best.height) {
                have = true;
                best.offsets = offsets;
                best.height = h;
            }
        };
        // A pass that reaches the lower bound cannot be beaten: stop there.
        auto done = [&] { return have && best.height == lb; };
        keep(detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_size>(p), tree, offsets));
        if (!done()) keep(detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_lifetime>(p), tree, offsets));
        if (!done()) keep(detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_area>(p), tree, offsets));
        if (!done()) keep(detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_begin>(p), tree, offsets));
        if (!done()) {
            const auto online = online_best_fit{}.place(p);
            offsets = online.offsets;
            keep(has_solution(online.status));
        }
        if (have) {
            detail::finish_result(p, best, lb);
        } else {
            best = detail::overflow_result(p);
            best.lower_bound = lb;
        }
        best.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return best;
    }
};

} // namespace memplan
