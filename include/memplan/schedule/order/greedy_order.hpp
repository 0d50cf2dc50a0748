// A memory-aware list scheduler. At each step it runs, among the ready ops,
// the one that keeps memory lowest, under a few rules (least bytes carried
// past the step, smallest step, smallest running peak, and that last rule
// with a short lookahead), and keeps the order of whichever rule - or the
// listed order - peaks lowest. Ties go to the op listed first, so on a graph
// whose listing is already good the listed order survives.
//
// Each rule costs O(steps x ready ops x in-degree); the lookahead multiplies
// that by beam x depth, so it is skipped on graphs above `lookahead_max_ops`.
#pragma once

#include <memplan/core/deadline.hpp>
#include <memplan/schedule/order/detail/list_state.hpp>
#include <memplan/schedule/order/order.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <numeric>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace memplan {

/// The rules greedy_order tries.
enum class greedy_rule {
    carried, ///< least bytes carried past the step, then smallest step
    step,    ///< smallest step, then least carried
    peak,    ///< smallest running peak, then least carried
};

constexpr std::string_view to_string(greedy_rule r) noexcept {
    switch (r) {
    case greedy_rule::carried: return "carried";
    case greedy_rule::step: return "step";
    case greedy_rule::peak: return "peak";
    }
    return "peak";
}

namespace detail {

template <class Graph>
auto greedy_key(const list_state<Graph>& s, greedy_rule rule, typename Graph::id_type o) {
    using size_type = typename Graph::size_type;
    const size_type step = s.step_bytes(o), after = s.after_bytes(o);
    switch (rule) {
    case greedy_rule::carried: return std::tuple(after, step, o);
    case greedy_rule::step: return std::tuple(step, after, o);
    case greedy_rule::peak: break;
    }
    return std::tuple(std::max(step, s.peak()), after, o);
}

template <class Graph>
typename Graph::id_type greedy_pick(const list_state<Graph>& s, greedy_rule rule) {
    const auto& ready = s.ready();
    auto best = ready.front();
    auto best_key = greedy_key(s, rule, best);
    for (std::size_t i = 1; i < ready.size(); ++i)
        if (auto k = greedy_key(s, rule, ready[i]); k < best_key) {
            best_key = k;
            best = ready[i];
        }
    return best;
}

/// One list-scheduling pass. With `depth` > 1, each step tries the `beam`
/// best ready ops under `rule`, follows each with depth-1 greedy steps, and
/// runs the one whose path ends with the smallest (peak, carried bytes).
template <class Graph>
std::vector<typename Graph::id_type> greedy_list_order(const Graph& g, greedy_rule rule, std::size_t depth = 1,
                                                        std::size_t beam = 1) {
    using id_type = typename Graph::id_type;
    list_state<Graph> s(g);
    std::vector<id_type> candidates;
    while (!s.finished()) {
        if (depth <= 1 || beam <= 1 || s.ready().size() == 1) {
            s.apply(greedy_pick(s, rule));
            continue;
        }
        candidates = s.ready();
        if (candidates.size() > beam) {
            std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(beam),
                              candidates.end(),
                              [&](id_type a, id_type b) { return greedy_key(s, rule, a) < greedy_key(s, rule, b); });
            candidates.resize(beam);
        }
        id_type best = candidates.front();
        auto best_key = std::tuple(s.peak(), s.carried(), best);
        bool first = true;
        for (auto c : candidates) {
            s.apply(c);
            std::size_t went = 1;
            for (; went < depth && !s.finished(); ++went) s.apply(greedy_pick(s, rule));
            const auto key = std::tuple(s.peak(), s.carried(), c);
            for (; went > 0; --went) s.undo();
            if (first || key < best_key) {
                best_key = key;
                best = c;
                first = false;
            }
        }
        s.apply(best);
    }
    return s.order();
}

} // namespace detail

/// Memory-aware list scheduling (see the file comment).
struct greedy_order {
    static constexpr std::string_view name = "greedy";

    std::size_t lookahead = 3;               ///< steps the lookahead rule follows (<= 1: rule off)
    std::size_t beam = 4;                    ///< ready ops the lookahead rule tries per step
    std::size_t lookahead_max_ops = 20000;   ///< skip the lookahead rule on larger graphs
    memplan::deadline deadline{};            ///< no rule starts after it (the first always runs)

    /// The lowest-peak order among the rules and the listed order, its peak
    /// and the order-independent bound. Throws `memplan::error` when the graph
    /// is malformed or has no ops.
    template <class Graph>
    order_result<Graph> order(const Graph& g) const {
        using id_type = typename Graph::id_type;
        using size_type = typename Graph::size_type;
        const auto start = std::chrono::steady_clock::now();
        detail::check_orderable(g);

        std::vector<id_type> best(g.num_ops());
        std::iota(best.begin(), best.end(), id_type{0});
        size_type best_peak = schedule_lower_bound(g, schedule_from_order(g, best));
        std::string kept = "listed order";
        auto consider = [&](std::vector<id_type> order, std::string what) {
            const size_type p = schedule_lower_bound(g, schedule_from_order(g, order));
            if (p < best_peak) {
                best_peak = p;
                best = std::move(order);
                kept = std::move(what);
            }
        };
        bool first = true;
        for (auto rule : {greedy_rule::peak, greedy_rule::carried, greedy_rule::step}) {
            if (!first && deadline.expired()) break;
            first = false;
            consider(detail::greedy_list_order(g, rule), "rule " + std::string(to_string(rule)));
        }
        if (lookahead > 1 && beam > 1 && g.num_ops() <= lookahead_max_ops && !deadline.expired())
            consider(detail::greedy_list_order(g, greedy_rule::peak, lookahead, beam),
                     "rule peak with lookahead " + std::to_string(lookahead));

        order_result<Graph> r;
        detail::finish_order_result(g, best, order_lower_bound(g), r);
        r.message = "kept " + kept;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return r;
    }
};

} // namespace memplan
