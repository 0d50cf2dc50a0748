// Greedy best-fit offset assignment (TFLite's "greedy by size"; Pisarchyk &
// Lee, "Efficient Memory Management for Deep Neural Net Inference", 2020).
//
// Items are taken in an order given by a policy; each one goes into the
// smallest gap, among the byte ranges of already-placed items that overlap it
// in time, that fits it (lowest offset on ties), else on top of them. The
// time overlaps come from a centered interval tree, so a pass costs about
// O(n log n + total overlap) instead of O(n^2).
#pragma once

#include <memplan/core/detail/checked.hpp>
#include <memplan/plan/alloc/detail/interval_tree.hpp>
#include <memplan/plan/alloc/problem.hpp>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

namespace memplan {

/// An item ordering for `greedy`: a `name` and a strict weak order `precedes`
/// (true when `a` is placed before `b`); ties keep item order.
template <class O, class Size = std::uint64_t>
concept AllocOrderLike = requires(const basic_alloc_item<Size>& a) {
    { O::name } -> std::convertible_to<std::string_view>;
    { O::precedes(a, a) } -> std::convertible_to<bool>;
};

namespace alloc_order {

/// Larger first; ties: longer lifetime first.
struct by_size {
    static constexpr std::string_view name = "greedy_by_size";
    template <class Size>
    static bool precedes(const basic_alloc_item<Size>& a, const basic_alloc_item<Size>& b) noexcept {
        if (a.size != b.size) return a.size > b.size;
        return a.end - a.begin > b.end - b.begin;
    }
};

/// Longer lifetime first; ties: larger first.
struct by_lifetime {
    static constexpr std::string_view name = "greedy_by_lifetime";
    template <class Size>
    static bool precedes(const basic_alloc_item<Size>& a, const basic_alloc_item<Size>& b) noexcept {
        const auto la = a.end - a.begin, lb = b.end - b.begin;
        if (la != lb) return la > lb;
        return a.size > b.size;
    }
};

/// Larger size x lifetime first (the item's rectangle in the time/offset
/// plane); ties: larger first.
struct by_area {
    static constexpr std::string_view name = "greedy_by_area";
    template <class Size>
    static bool precedes(const basic_alloc_item<Size>& a, const basic_alloc_item<Size>& b) noexcept {
        // long double: the exact product may need 128 bits; an order only needs to be consistent.
        const long double aa = static_cast<long double>(a.size) * static_cast<long double>(a.end - a.begin);
        const long double ab = static_cast<long double>(b.size) * static_cast<long double>(b.end - b.begin);
        if (aa != ab) return aa > ab;
        return a.size > b.size;
    }
};

/// Earlier start first; ties: larger first. Close to what an online allocator
/// sees, but with best-fit over the whole lifetime.
struct by_begin {
    static constexpr std::string_view name = "greedy_by_begin";
    template <class Size>
    static bool precedes(const basic_alloc_item<Size>& a, const basic_alloc_item<Size>& b) noexcept {
        if (a.begin != b.begin) return a.begin < b.begin;
        return a.size > b.size;
    }
};

} // namespace alloc_order

namespace detail {

/// Whether an item takes space at all: empty lifetimes and sizes never do.
template <class Size>
constexpr bool is_live(const basic_alloc_item<Size>& it) noexcept {
    return it.size > 0 && it.begin < it.end;
}

/// The interval tree skeleton of a problem; build once, share across passes.
template <class Size>
interval_tree<Size> make_interval_tree(const basic_alloc_problem<Size>& p) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> iv(p.items.size());
    for (std::size_t i = 0; i < p.items.size(); ++i)
        iv[i] = is_live(p.items[i]) ? std::pair{p.items[i].begin, p.items[i].end} : std::pair<std::uint64_t, std::uint64_t>{0, 0};
    return interval_tree<Size>(iv);
}

/// Fills height, lower bound and status from the offsets (seconds: the caller).
template <class Size>
void finish_result(const basic_alloc_problem<Size>& p, basic_alloc_result<Size>& r, Size lb) {
    r.height = placement_height(p, r.offsets);
    r.lower_bound = lb;
    r.status = r.height == lb ? status::optimal : status::feasible;
}

template <class Size>
basic_alloc_result<Size> overflow_result(const basic_alloc_problem<Size>& p) {
    basic_alloc_result<Size> r;
    r.offsets.assign(p.items.size(), Size{0});
    r.status = status::error;
    r.message = "the arena size overflows the size type";
    return r;
}

/// One best-fit pass over the items in `order` (live items only), on a
/// cleared tree. Returns false when an offset overflows the size type.
template <class Size>
bool greedy_pass(const basic_alloc_problem<Size>& p, const std::vector<std::size_t>& order, interval_tree<Size>& tree,
                 std::vector<Size>& offsets) {
    offsets.assign(p.items.size(), Size{0});
    tree.clear();
    using run = typename interval_tree<Size>::run;
    std::vector<run> runs;
    std::vector<std::pair<Size, Size>> rest; // (offset, top) of the smaller runs
    for (const std::size_t i : order) {
        const auto& it = p.items[i];
        const Size size = *detail::checked_align_up<Size>(it.size, p.alignment); // validate() checked it
        runs.clear();
        tree.query_runs(it.begin, it.end, runs);

        // Sweep the union of the placed byte ranges in offset order; every
        // hole between them is a gap. Offsets and tops are multiples of the
        // alignment, so gap starts are too. Most overlaps sit in one node
        // (the long-lived items near the root), already sorted: merge that
        // run with the sorted rest instead of sorting everything.
        std::size_t big = 0;
        for (std::size_t k = 1; k < runs.size(); ++k)
            if (runs[k].size() > runs[big].size()) big = k;
        rest.clear();
        for (std::size_t k = 0; k < runs.size(); ++k) {
            if (k == big) continue;
            const auto& r = runs[k];
            if (r.is_union()) {
                rest.insert(rest.end(), r.pieces, r.pieces_end);
            } else {
                for (auto* x = r.first; x != r.last; ++x)
                    if (r.keeps(*x)) rest.emplace_back(x->offset, x->top);
            }
        }
        if (rest.size() > 1) std::sort(rest.begin(), rest.end());

        Size reach = 0;
        Size best_offset = 0, best_len = 0;
        bool found = false;
        // One placed range at `off`; true when an exact fit ends the search
        // (nothing smaller can follow, and nothing lower of the same size).
        auto visit = [&](Size off, Size top) {
            if (off > reach) {
                const Size len = off - reach;
                if (len >= size && (!found || len < best_len)) {
                    found = true;
                    best_offset = reach;
                    best_len = len;
                    if (len == size) return true;
                }
            }
            reach = std::max(reach, top);
            return false;
        };
        // Two-way merge of the big run (elements of either kind) with the rest.
        auto sweep = [&](auto* a, auto* a_end, auto keeps, auto offset_of, auto top_of) {
            std::size_t j = 0;
            while (true) {
                if (a != a_end && !keeps(*a)) {
                    ++a;
                    continue;
                }
                if (a != a_end && (j == rest.size() || offset_of(*a) <= rest[j].first)) {
                    if (visit(offset_of(*a), top_of(*a))) return;
                    ++a;
                } else if (j < rest.size()) {
                    if (visit(rest[j].first, rest[j].second)) return;
                    ++j;
                } else {
                    return;
                }
            }
        };
        if (runs.empty()) {
        } else if (runs[big].is_union()) {
            sweep(runs[big].pieces, runs[big].pieces_end, [](const auto&) { return true; },
                  [](const auto& x) { return x.first; }, [](const auto& x) { return x.second; });
        } else {
            // One instantiation per filter keeps the test out of the inner loop's branches.
            const run& r = runs[big];
            const auto off = [](const auto& x) { return x.offset; };
            const auto top = [](const auto& x) { return x.top; };
            const std::uint64_t bound = r.bound;
            using kind = typename run::filter_kind;
            if (r.filter == kind::begin_below)
                sweep(r.first, r.last, [bound](const auto& x) { return x.begin < bound; }, off, top);
            else if (r.filter == kind::end_above)
                sweep(r.first, r.last, [bound](const auto& x) { return x.end > bound; }, off, top);
            else
                sweep(r.first, r.last, [](const auto&) { return true; }, off, top);
        }
        const Size offset = found ? best_offset : reach;
        const auto top = detail::checked_add<Size>(offset, size);
        if (!top) return false;
        offsets[i] = offset;
        tree.insert(i, {offset, *top, it.begin, it.end});
    }
    return true;
}

/// The live items sorted by ordering `Order` (ties: item index).
template <class Order, class Size>
std::vector<std::size_t> greedy_item_order(const basic_alloc_problem<Size>& p) {
    std::vector<std::size_t> order;
    order.reserve(p.items.size());
    for (std::size_t i = 0; i < p.items.size(); ++i)
        if (is_live(p.items[i])) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return Order::precedes(p.items[a], p.items[b]); });
    return order;
}

} // namespace detail

/// Greedy best-fit with the item order as a policy: a new ordering is one
/// small struct satisfying `AllocOrderLike`.
template <class Order>
struct greedy {
    static constexpr std::string_view name = Order::name;

    /// Places every item; never fails except when offsets overflow `Size`
    /// (status `error`). Throws `memplan::error` on a malformed problem.
    template <class Size>
        requires AllocOrderLike<Order, Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        const auto t0 = std::chrono::steady_clock::now();
        validate(p);
        const Size lb = lower_bound(p);
        auto tree = detail::make_interval_tree(p);
        basic_alloc_result<Size> r;
        if (!detail::greedy_pass(p, detail::greedy_item_order<Order>(p), tree, r.offsets)) {
            r = detail::overflow_result(p);
            r.lower_bound = lb;
        } else {
            detail::finish_result(p, r, lb);
        }
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return r;
    }
};

using greedy_by_size = greedy<alloc_order::by_size>;
using greedy_by_lifetime = greedy<alloc_order::by_lifetime>;
using greedy_by_area = greedy<alloc_order::by_area>;
using greedy_by_begin = greedy<alloc_order::by_begin>;

} // namespace memplan
