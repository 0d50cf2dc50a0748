// A covering 0-1 knapsack: of items with a weight (bytes) and a value
// (cost), the cheapest set whose weights sum to at least `need`. The `joint`
// planner's exchange (remat/detail/joint_search.hpp) asks which tensors to
// remake so that the peak drops by `need` bytes at the least added cost.
//
// Ordered by value per unit of weight, the items taken in that order meet
// `need` at the break item. Far from it the answer is clear (the cheap items
// taken, the dear ones left); the knapsack is solved exactly, by dynamic
// programming over the weight still needed, on a core of `core` items on
// each side of the break item (Balas and Zemel's core for 0-1 knapsacks).
// The table counts weight in units of the core's common divisor, or in
// coarser units when it would pass `max_cells` cells: weights are then
// rounded down and `need` up, so that no set covers less than it seems to.
// With a core at least as large as the items and the table exact, the
// answer is optimal (tests/unit/remat_joint_test.cpp checks it against
// enumeration).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

namespace memplan::detail {

struct cover_item {
    std::uint64_t weight = 0;
    double value = 0;
};

/// Per item, whether the cheapest cover found takes it; nothing when no set
/// of the items weighs `need`.
inline std::optional<std::vector<char>> cheapest_cover(std::span<const cover_item> items, std::uint64_t need,
                                                       std::size_t core = 48,
                                                       std::uint64_t max_cells = std::uint64_t{1} << 27) {
    std::vector<char> take(items.size(), 0);
    if (need == 0) return take;
    std::vector<std::size_t> order(items.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        return items[x].value * double(items[y].weight) < items[y].value * double(items[x].weight);
    });
    // The break item: the first at which the cheapest-first order covers `need`.
    std::size_t k = 0;
    for (std::uint64_t covered = 0; k < order.size(); ++k) {
        covered += items[order[k]].weight;
        if (covered >= need) break;
    }
    if (k == order.size()) return std::nullopt; // all of them together weigh less
    const std::size_t lo = k > core ? k - core : 0;
    const std::size_t hi = std::min(order.size(), k + core + 1);
    for (std::size_t r = 0; r < lo; ++r) {
        take[order[r]] = 1;
        need -= items[order[r]].weight;
    }
    std::uint64_t unit = 0;
    for (std::size_t r = lo; r < hi; ++r) unit = std::gcd(unit, items[order[r]].weight);
    if (unit == 0) return std::nullopt; // the core weighs nothing and `need` is left
    const std::size_t n = hi - lo;
    if ((need / unit + 1) * n > max_cells) unit = need * n / max_cells + 1;
    const auto cells = static_cast<std::size_t>((need + unit - 1) / unit);
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> cheapest(cells + 1, inf); // to cover at least b units
    cheapest[0] = 0;
    std::vector<std::vector<bool>> taken(n, std::vector<bool>(cells + 1, false));
    for (std::size_t i = 0; i < n; ++i) {
        const auto& it = items[order[lo + i]];
        const auto w = static_cast<std::size_t>(it.weight / unit);
        if (w == 0) continue;
        for (std::size_t b = cells; b > 0; --b) {
            const double with = cheapest[b > w ? b - w : 0] + it.value;
            if (with < cheapest[b]) {
                cheapest[b] = with;
                taken[i][b] = true;
            }
        }
    }
    if (cheapest[cells] == inf) return std::nullopt;
    std::size_t b = cells;
    for (std::size_t i = n; i-- > 0 && b > 0;) {
        if (!taken[i][b]) continue;
        take[order[lo + i]] = 1;
        const auto w = static_cast<std::size_t>(items[order[lo + i]].weight / unit);
        b = b > w ? b - w : 0;
    }
    return take;
}

} // namespace memplan::detail
