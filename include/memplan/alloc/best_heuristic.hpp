// Several cheap placements, keep the lowest: greedy best-fit by size (ties:
// longer first), by lifetime, by area, by start time and by size again
// (ties: earlier first), then the online best-fit simulation.
// XLA's global decreasing best-fit does the same with two orders; no single
// order wins on every instance. The passes are independent, so they run on
// up to two threads (each with its own copy of the one interval tree
// skeleton); the pick does not depend on which thread ran what.
#pragma once

#include <memplan/alloc/greedy.hpp>
#include <memplan/alloc/online_best_fit.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/deadline.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <exception>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace memplan {

struct best_heuristic {
    static constexpr std::string_view name = "best_heuristic";

    /// No pass starts after it, and a pass still running gives up, except
    /// the first (by size), which always finishes: the result.
    memplan::deadline deadline{};

    /// The lowest of the six placements (ties: the first in the order above).
    /// Status `error` only when every pass overflows `Size`.
    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        const stopwatch watch;
        validate(p);
        const Size lb = lower_bound(p);
        const auto skeleton = detail::make_interval_tree(p);

        constexpr std::size_t passes = 6;
        struct outcome {
            bool ok = false;
            Size size = 0;
            std::vector<Size> offsets;
        };
        std::array<outcome, passes> out;
        // A pass that reaches the lower bound cannot be beaten, and ties go
        // to the earlier pass: passes after the earliest such one are skipped.
        std::atomic<std::size_t> first_optimal{passes};
        std::atomic<std::size_t> next{0};

        auto finish_pass = [&](std::size_t k) {
            outcome& o = out[k];
            if (!o.ok) return;
            o.size = placement_height(p, o.offsets);
            if (o.size == lb) {
                std::size_t seen = first_optimal.load();
                while (k < seen && !first_optimal.compare_exchange_weak(seen, k)) {
                }
            }
        };
        auto run_pass = [&](std::size_t k, detail::interval_tree<Size>& tree) {
            outcome& o = out[k];
            switch (k) {
            case 0: { // both size orders: the second continues from the first's common prefix
                const auto by_size = detail::greedy_item_order<alloc_order::by_size>(p);
                o.ok = detail::greedy_pass(p, by_size, tree, o.offsets);
                finish_pass(0);
                if (!o.ok || first_optimal.load() <= 4 || deadline.expired()) return;
                const auto by_begin = detail::greedy_item_order<alloc_order::by_size_begin>(p);
                // Until the orders first differ both passes place the same items
                // the same way: pinning those, the second pass places the rest.
                std::size_t same = 0;
                while (same < by_size.size() && by_size[same] == by_begin[same]) ++same;
                std::vector<char> pinned(p.items.size(), 0);
                for (std::size_t i = 0; i < same; ++i) pinned[by_size[i]] = 1;
                out[4].offsets = o.offsets;
                out[4].ok = detail::greedy_pass(p, by_begin, tree, out[4].offsets, &pinned, deadline);
                finish_pass(4);
                return;
            }
            case 1: o.ok = detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_lifetime>(p), tree, o.offsets, nullptr, deadline); break;
            case 2: o.ok = detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_area>(p), tree, o.offsets, nullptr, deadline); break;
            case 3: o.ok = detail::greedy_pass(p, detail::greedy_item_order<alloc_order::by_begin>(p), tree, o.offsets, nullptr, deadline); break;
            default: {
                auto online = online_best_fit{}.place(p);
                o.ok = has_solution(online.status);
                o.offsets = std::move(online.offsets);
            }
            }
            finish_pass(k);
        };
        // Each worker takes the next pass not yet taken, in list order (pass
        // 4 runs inside pass 0).
        auto worker = [&](detail::interval_tree<Size>& tree) {
            for (std::size_t k; (k = next.fetch_add(1)) < passes;)
                if (k != 4 && k < first_optimal.load() && (k == 0 || !deadline.expired())) run_pass(k, tree);
        };

        std::exception_ptr helper_error;
        std::thread helper;
        detail::interval_tree<Size> helper_tree;
        if (std::thread::hardware_concurrency() > 1 && p.items.size() >= parallel_threshold) {
            helper_tree = skeleton;
            try {
                helper = std::thread([&] {
                    try {
                        worker(helper_tree);
                    } catch (...) {
                        helper_error = std::current_exception();
                        next.store(passes); // the main thread stops taking passes too
                    }
                });
            } catch (const std::system_error&) {
                // No thread to be had: the main thread runs every pass.
            }
        }
        auto tree = skeleton;
        try {
            worker(tree);
        } catch (...) {
            next.store(passes);
            if (helper.joinable()) helper.join();
            throw;
        }
        if (helper.joinable()) helper.join();
        if (helper_error) std::rethrow_exception(helper_error);

        basic_alloc_result<Size> best;
        bool have = false;
        for (std::size_t k = 0; k < passes && k <= first_optimal.load(); ++k) {
            if (!out[k].ok || (have && out[k].size >= best.size)) continue;
            have = true;
            best.size = out[k].size;
            best.offsets = std::move(out[k].offsets);
        }
        if (have) {
            detail::finish_result(p, best, lb);
        } else {
            best = detail::overflow_result(p);
            best.bound = lb;
        }
        best.seconds = watch.seconds();
        return best;
    }

private:
    // Below this many items a pass takes microseconds, less than starting a thread.
    static constexpr std::size_t parallel_threshold = 2000;
};

} // namespace memplan
