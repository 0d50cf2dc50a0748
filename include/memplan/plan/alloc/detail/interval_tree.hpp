// Which already-placed items overlap a new one in time, without an all-pairs
// scan. A centered interval tree (Edelsbrunner 1980) is built once over every
// item's live interval; items are then "placed" in any order and each node
// keeps its placed items sorted by offset, so a query yields a few
// offset-sorted runs that the greedy allocators merge while sweeping for gaps.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

namespace memplan::detail {

/// A placed item as the gap sweep sees it: its byte range and live interval.
template <class Size>
struct placed_range {
    Size offset = 0;
    Size top = 0;             ///< offset + aligned size
    std::uint64_t begin = 0;  ///< live on [begin, end)
    std::uint64_t end = 0;
};

/// Static centered interval tree over half-open intervals [begin, end) with
/// begin < end. Every interval lives at the unique node whose center it
/// contains, highest in the tree; insertion only fills in that node's
/// offset-sorted list, so the same skeleton serves several placement passes
/// (`clear` empties it).
template <class Size>
class interval_tree {
public:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    interval_tree() = default;

    /// Builds the skeleton over `intervals` (pairs begin, end). Empty
    /// intervals (begin >= end) get no node and must not be inserted.
    explicit interval_tree(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& intervals) {
        node_of_.assign(intervals.size(), none);
        std::vector<std::size_t> ids;
        ids.reserve(intervals.size());
        for (std::size_t i = 0; i < intervals.size(); ++i)
            if (intervals[i].first < intervals[i].second) ids.push_back(i);
        if (ids.empty()) return;
        std::vector<std::uint64_t> scratch;
        root_ = build(intervals, ids, 0, ids.size(), none, scratch);
    }

    /// Records item `id` as placed at `r`.
    void insert(std::size_t id, const placed_range<Size>& r) {
        std::size_t n = node_of_[id];
        auto& list = nodes_[n].placed;
        auto pos = std::upper_bound(list.begin(), list.end(), r.offset,
                                    [](Size off, const placed_range<Size>& x) { return off < x.offset; });
        list.insert(pos, r);
        for (; n != none; n = nodes_[n].parent) {
            ++nodes_[n].placed_below;
            add_to_union(nodes_[n].subtree_union, r.offset, r.top);
        }
    }

    /// Forgets every placed item, keeping the skeleton.
    void clear() {
        for (auto& n : nodes_) {
            n.placed.clear();
            n.subtree_union.clear();
            n.placed_below = 0;
        }
    }

    /// The placed items of one node that overlap a query: a slice of its
    /// offset-sorted list and the filter that picks the overlapping ones.
    struct run {
        enum class filter_kind { all, begin_below, end_above };
        const placed_range<Size>* first = nullptr;
        const placed_range<Size>* last = nullptr;
        filter_kind filter = filter_kind::all;
        std::uint64_t bound = 0;
        /// When set, the run is instead the union of a whole subtree, every
        /// item of which overlaps the query: [pieces, pieces_end).
        const std::pair<Size, Size>* pieces = nullptr;
        const std::pair<Size, Size>* pieces_end = nullptr;

        bool keeps(const placed_range<Size>& r) const noexcept {
            switch (filter) {
            case filter_kind::begin_below: return r.begin < bound;
            case filter_kind::end_above: return r.end > bound;
            default: return true;
            }
        }
        bool is_union() const noexcept { return pieces != nullptr; }
        std::size_t size() const noexcept {
            return is_union() ? static_cast<std::size_t>(pieces_end - pieces) : static_cast<std::size_t>(last - first);
        }
    };

    /// Appends to `out` one run per node holding placed items live somewhere
    /// in [begin, end). Nothing is copied: a run is valid until the next insert.
    void query_runs(std::uint64_t begin, std::uint64_t end, std::vector<run>& out) const {
        if (root_ == none || begin >= end) return;
        // Explicit stack: queries are the inner loop of every greedy pass.
        // Pending nodes never exceed the height, which is logarithmic.
        std::size_t stack[160];
        std::size_t depth = 0;
        stack[depth++] = root_;
        while (depth > 0) {
            const node& n = nodes_[stack[--depth]];
            if (n.placed_below == 0 || n.span_begin >= end || n.span_end <= begin) continue;
            if (n.max_begin < end && n.min_end > begin) { // the whole subtree overlaps: its union will do
                run u;
                u.pieces = n.subtree_union.data();
                u.pieces_end = n.subtree_union.data() + n.subtree_union.size();
                out.push_back(u);
                continue;
            }
            run r{n.placed.data(), n.placed.data() + n.placed.size(), run::filter_kind::all, 0, nullptr, nullptr};
            if (end <= n.center) { // query left of the center: only items starting before it ends
                r.filter = run::filter_kind::begin_below;
                r.bound = end;
                if (n.left != none) stack[depth++] = n.left;
            } else if (begin > n.center) { // right of the center: only items ending after it starts
                r.filter = run::filter_kind::end_above;
                r.bound = begin;
                if (n.right != none) stack[depth++] = n.right;
            } else { // the query contains the center, as does every item here
                if (n.left != none) stack[depth++] = n.left;
                if (n.right != none) stack[depth++] = n.right;
            }
            if (r.first != r.last) out.push_back(r);
        }
    }

    /// Appends to `out` the byte ranges of the placed items live somewhere in
    /// [begin, end), as runs each sorted by offset (whole subtrees as the
    /// union of their ranges, begin = end = 0); `run_ends` receives the end
    /// index of each run. For tests and diagnostics; the allocators use runs.
    void query(std::uint64_t begin, std::uint64_t end, std::vector<placed_range<Size>>& out,
               std::vector<std::size_t>& run_ends) const {
        std::vector<run> runs;
        query_runs(begin, end, runs);
        for (const auto& r : runs) {
            const std::size_t start = out.size();
            if (r.is_union()) {
                for (auto* x = r.pieces; x != r.pieces_end; ++x) out.push_back({x->first, x->second, 0, 0});
                run_ends.push_back(out.size());
                continue;
            }
            for (auto* x = r.first; x != r.last; ++x)
                if (r.keeps(*x)) out.push_back(*x);
            if (out.size() > start) run_ends.push_back(out.size());
        }
    }

    /// Height of the skeleton (1 for a single node, 0 when empty).
    std::size_t height() const { return height_; }

private:
    struct node {
        std::uint64_t center = 0;
        std::uint64_t span_begin = 0; ///< smallest begin in the subtree
        std::uint64_t span_end = 0;   ///< largest end in the subtree
        std::uint64_t max_begin = 0;  ///< largest begin in the subtree
        std::uint64_t min_end = 0;    ///< smallest end in the subtree
        std::size_t left = none, right = none, parent = none;
        std::size_t placed_below = 0; ///< placed items in the subtree
        std::vector<placed_range<Size>> placed;
        /// Union of the byte ranges placed anywhere in the subtree, as sorted
        /// disjoint [lo, hi) pieces: items at different times reuse the same
        /// bytes, so this stays short where the item lists are long.
        std::vector<std::pair<Size, Size>> subtree_union;
    };

    static void add_to_union(std::vector<std::pair<Size, Size>>& u, Size lo, Size hi) {
        // First piece that could touch [lo, hi): the last one starting at or before lo.
        auto it = std::upper_bound(u.begin(), u.end(), lo, [](Size v, const auto& x) { return v < x.first; });
        if (it != u.begin() && std::prev(it)->second >= lo) --it;
        auto last = it;
        while (last != u.end() && last->first <= hi) {
            lo = std::min(lo, last->first);
            hi = std::max(hi, last->second);
            ++last;
        }
        if (it == last) {
            u.insert(it, {lo, hi});
        } else {
            *it = {lo, hi};
            u.erase(it + 1, last);
        }
    }

    // ids[lo, hi) are the intervals of this subtree. The center is the median
    // of their first and last live points, so it lies inside some interval
    // (every node is non-empty) and at most half of them fall on either side:
    // the depth stays logarithmic.
    std::size_t build(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& iv, std::vector<std::size_t>& ids,
                      std::size_t lo, std::size_t hi, std::size_t parent, std::vector<std::uint64_t>& scratch,
                      std::size_t level = 1) {
        height_ = std::max(height_, level);
        scratch.clear();
        std::uint64_t span_begin = std::numeric_limits<std::uint64_t>::max(), span_end = 0;
        std::uint64_t max_begin = 0, min_end = std::numeric_limits<std::uint64_t>::max();
        for (std::size_t k = lo; k < hi; ++k) {
            const auto [b, e] = iv[ids[k]];
            scratch.push_back(b);
            scratch.push_back(e - 1);
            span_begin = std::min(span_begin, b);
            span_end = std::max(span_end, e);
            max_begin = std::max(max_begin, b);
            min_end = std::min(min_end, e);
        }
        auto mid = scratch.begin() + static_cast<std::ptrdiff_t>(scratch.size() / 2);
        std::nth_element(scratch.begin(), mid, scratch.end());
        const std::uint64_t c = *mid;

        const std::size_t me = nodes_.size();
        nodes_.push_back(node{});
        nodes_[me].center = c;
        nodes_[me].span_begin = span_begin;
        nodes_[me].span_end = span_end;
        nodes_[me].max_begin = max_begin;
        nodes_[me].min_end = min_end;
        nodes_[me].parent = parent;

        // Three-way partition: [lo, l) left of c, [l, r) containing c, [r, hi) right of c.
        auto first = ids.begin() + static_cast<std::ptrdiff_t>(lo);
        auto last = ids.begin() + static_cast<std::ptrdiff_t>(hi);
        auto left_end = std::partition(first, last, [&](std::size_t i) { return iv[i].second <= c; });
        auto mid_end = std::partition(left_end, last, [&](std::size_t i) { return iv[i].first <= c; });
        const auto l = static_cast<std::size_t>(left_end - ids.begin());
        const auto r = static_cast<std::size_t>(mid_end - ids.begin());
        for (std::size_t k = l; k < r; ++k) node_of_[ids[k]] = me;
        if (lo < l) {
            const std::size_t child = build(iv, ids, lo, l, me, scratch, level + 1);
            nodes_[me].left = child;
        }
        if (r < hi) {
            const std::size_t child = build(iv, ids, r, hi, me, scratch, level + 1);
            nodes_[me].right = child;
        }
        return me;
    }

    std::vector<node> nodes_;
    std::vector<std::size_t> node_of_;
    std::size_t root_ = none;
    std::size_t height_ = 0;
};

} // namespace memplan::detail
