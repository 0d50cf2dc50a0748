// An offset-assignment instance (buffers with live intervals) as a graph, so
// that CSV instances such as MiniMalloc's can go through the graph and plan
// path (planning, the plan validator, the report).
//
// The time points that matter, {lower} ∪ {upper - 1} of every non-empty
// interval, are compressed into steps; the op of step k produces the buffers
// whose interval starts at that point and reads those whose interval ends
// there. The default schedule then has exactly the instance's time-overlap
// structure, and so the same lower bound.
#pragma once

#include <memplan/alloc/problem.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

namespace memplan {

/// Builds the graph of an offset-assignment instance: tensor `ids[i]` of
/// `problem.items[i].size` bytes, and one op per compressed time point, named
/// `t<time>` after the original point. An item with an empty interval
/// (begin == end) is never live in the instance; it becomes an output of the
/// op at the first time point at or after its begin (the last op if there is
/// none) that nothing reads, so it is live on that one step only. Such items
/// can raise the graph's bound above the instance's; MiniMalloc's instances
/// have none. Throws `memplan::error` when `ids` and the items differ in
/// number, an id is repeated or empty, or an interval is reversed.
inline graph graph_from_intervals(const alloc_problem& problem, const std::vector<std::string>& ids,
                                  std::string name) {
    const auto& items = problem.items;
    if (ids.size() != items.size())
        throw error("graph", "graph_from_intervals: " + std::to_string(ids.size()) + " ids for " +
                                 std::to_string(items.size()) + " items");
    validate(problem);

    std::vector<std::uint64_t> points;
    points.reserve(2 * items.size());
    for (const auto& it : items)
        if (it.begin < it.end) {
            points.push_back(it.begin);
            points.push_back(it.end - 1);
        }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    const bool any_empty = std::any_of(items.begin(), items.end(), [](const auto& it) { return it.begin >= it.end; });
    if (points.empty() && any_empty) points.push_back(0); // one op to produce the never-live items

    auto step_of = [&](std::uint64_t t) {
        // First compressed point >= t; past the end: the last point.
        const auto pos = std::lower_bound(points.begin(), points.end(), t);
        return static_cast<std::size_t>(pos == points.end() ? points.size() - 1 : pos - points.begin());
    };

    graph g(std::move(name));
    std::vector<op> ops(points.size());
    for (std::size_t k = 0; k < points.size(); ++k) {
        // Built in a buffer: GCC 12 warns falsely (-Wrestrict) on "t" + std::to_string(...).
        char buf[24] = {'t'};
        const auto end = std::to_chars(buf + 1, buf + sizeof buf, points[k]).ptr;
        ops[k].name.assign(buf, end);
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
        const auto& it = items[i];
        if (ids[i].empty()) throw error("graph", "graph_from_intervals: item " + std::to_string(i) + " has an empty id");
        if (g.find_tensor(ids[i]))
            throw error("graph", "graph_from_intervals: item " + std::to_string(i) + " repeats the id '" + ids[i] + "'");
        g.add_tensor(ids[i], it.size);
        const auto id = static_cast<graph::id_type>(i);
        if (it.begin >= it.end) {
            ops[step_of(it.begin)].outputs.push_back(id);
            continue;
        }
        const std::size_t first = step_of(it.begin);
        const std::size_t last = step_of(it.end - 1);
        ops[first].outputs.push_back(id);
        if (last > first) ops[last].inputs.push_back(id);
    }
    for (auto& o : ops) g.add_op(std::move(o));
    return g;
}

} // namespace memplan
