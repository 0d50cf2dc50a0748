// Which already-placed items overlap a new one in time, without an all-pairs
// scan. A centered interval tree (Edelsbrunner 1980) is built once over every
// item's live interval; items are then "placed" in any order and each node
// keeps its placed items sorted by offset, so a query yields a few
// offset-sorted runs that the greedy allocators merge while sweeping for gaps.
// Large nodes also keep prefix unions by start / end time (below), so a query
// beside the center reads only items that really overlap it, merged.
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
/// offset-sorted lists, so the same skeleton serves several placement passes
/// (`clear` empties it; a copy is an independent tree for another thread).
///
/// The items of one node all contain its center, so they are live together:
/// the allocators never give two of them the same byte, and a node's
/// offset-sorted list is then also sorted by top. A query left of the center
/// overlaps only the node's items starting before the query ends (a prefix
/// by start time), one right of it only those ending after it starts (a
/// prefix by descending end). Scanning the whole list and filtering costs the
/// node's size on every query, which dominates on training steps (thousands of
/// saved activations share the root). So a large node splits each of the two
/// time orders into blocks and keeps, for every k, the union of the byte
/// ranges of the first k blocks (the sweep needs no more than the union, and
/// items packed edge to edge make one piece of it): a query reads one such
/// prefix union, unfiltered, plus one partial block, filtered. At the other
/// end, a subtree of at most `leaf_items` items is a single leaf whose items
/// share no center; queries filter them on both ends.
template <class Size>
class interval_tree {
public:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    using range = std::pair<Size, Size>; ///< [offset, top)

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
        rank_[0].assign(intervals.size(), 0);
        rank_[1].assign(intervals.size(), 0);
        std::size_t budget = copies_per_item * ids.size() + copies_extra;
        for (std::size_t n = 0; n < nodes_.size(); ++n) make_families(n, intervals, ids, budget); // root first
        items_first_ = {};
    }

    /// Records item `id` as placed at `r`.
    void insert(std::size_t id, const placed_range<Size>& r) {
        std::size_t n = node_of_[id];
        node& nd = nodes_[n];
        if (!nd.large) {
            const auto at = upper_offset(nd.ranges, r.offset);
            const auto count = static_cast<std::ptrdiff_t>(nd.ranges.size());
            nd.ranges.insert(nd.ranges.begin() + at, range{r.offset, r.top});
            nd.keys.insert(nd.keys.begin() + count + at, r.end); // the end first: the begins stay put
            nd.keys.insert(nd.keys.begin() + at, r.begin);
        } else {
            add_to_union(nd.ranges, r.offset, r.top);
            for (int f = 0; f < 2; ++f) {
                family& fam = nd.fam[f];
                const std::size_t q = rank_[f][id] / fam.block;
                auto& b = fam.blocks[q];
                const auto at = upper_offset(b.ranges, r.offset);
                b.ranges.insert(b.ranges.begin() + at, range{r.offset, r.top});
                b.keys.insert(b.keys.begin() + at, f == 0 ? r.begin : r.end);
                for (std::size_t k = q; k < fam.prefix.size(); ++k) add_to_union(fam.prefix[k], r.offset, r.top);
            }
        }
        for (; n != none; n = nodes_[n].parent) {
            shape_[n].occupied = true;
            auto& pending = nodes_[n].pending;
            pending.push_back(range{r.offset, r.top});
            // Bounded so that memory stays linear; merging then costs about
            // one pass over the union per as many inserts.
            if (pending.size() > nodes_[n].subtree_union.size() + 64) refresh(n);
        }
    }

    /// Forgets every placed item, keeping the skeleton.
    void clear() {
        for (auto& s : shape_) s.occupied = false;
        for (auto& n : nodes_) {
            n.ranges.clear();
            n.keys.clear();
            n.subtree_union.clear();
            n.pending.clear();
            for (auto& fam : n.fam) {
                for (auto& l : fam.prefix) l.clear();
                for (auto& b : fam.blocks) {
                    b.ranges.clear();
                    b.keys.clear();
                }
            }
        }
    }

    /// Placed items overlapping a query: an offset-sorted slice of byte
    /// ranges, all of which overlap unless filtered: element k overlaps when
    /// begins[k] < begin_bound (if `begins` is set) and ends[k] > end_bound
    /// (if `ends` is set). The ranges of an unfiltered run are pairwise
    /// disjoint (whole-subtree unions, and a node's items when no two
    /// time-overlapping items were given the same byte).
    struct run {
        const range* first = nullptr;
        const range* last = nullptr;
        const std::uint64_t* begins = nullptr;
        std::uint64_t begin_bound = 0;
        const std::uint64_t* ends = nullptr;
        std::uint64_t end_bound = 0;

        bool filtered() const noexcept { return begins != nullptr || ends != nullptr; }
        bool keeps(std::size_t k) const noexcept {
            return (begins == nullptr || begins[k] < begin_bound) && (ends == nullptr || ends[k] > end_bound);
        }
        std::size_t size() const noexcept { return static_cast<std::size_t>(last - first); }
    };

    /// Appends to `out` the runs of placed items live somewhere in
    /// [begin, end), at most two per node plus whole-subtree unions. Nothing
    /// is copied: a run is valid until the next insert.
    void query_runs(std::uint64_t begin, std::uint64_t end, std::vector<run>& out) const {
        if (root_ == none || begin >= end) return;
        // Explicit stack: queries are the inner loop of every greedy pass.
        // Pending nodes never exceed the height, which is logarithmic.
        std::size_t stack[160];
        std::size_t depth = 0;
        stack[depth++] = root_;
        while (depth > 0) {
            const std::size_t id = stack[--depth];
            const shape& n = shape_[id];
            if (!n.occupied || n.span_begin >= end || n.span_end <= begin) continue;
            if (n.max_begin < end && n.min_end > begin) { // the whole subtree overlaps: its union will do
                refresh(id);
                push(out, nodes_[id].subtree_union);
                continue;
            }
            if (n.leaf) { // a few items with no center in common: filter on both ends
                const node& nd = nodes_[id];
                if (!nd.ranges.empty()) {
                    prefetch(nd.ranges.data());
                    prefetch(nd.keys.data());
                    out.push_back(run{nd.ranges.data(), nd.ranges.data() + nd.ranges.size(), nd.keys.data(), end,
                                      nd.keys.data() + nd.ranges.size(), begin});
                }
                continue;
            }
            if (end <= n.center) { // query left of the center: only items starting before it ends
                if (n.left != none) stack[depth++] = n.left;
                side_runs(nodes_[id], 0, end, out);
            } else if (begin > n.center) { // right of the center: only items ending after it starts
                if (n.right != none) stack[depth++] = n.right;
                side_runs(nodes_[id], 1, begin, out);
            } else { // the query contains the center, as does every item here
                if (n.left != none) stack[depth++] = n.left;
                if (n.right != none) stack[depth++] = n.right;
                push(out, nodes_[id].ranges);
            }
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
            for (std::size_t k = 0; k < r.size(); ++k)
                if (r.keeps(k)) out.push_back({r.first[k].first, r.first[k].second, 0, 0});
            if (out.size() > start) run_ends.push_back(out.size());
        }
    }

    /// Height of the skeleton (1 for a single node, 0 when empty).
    std::size_t height() const { return height_; }

private:
    // A node with fewer than 2 * min_block items scans its whole list:
    // prefix unions would cost more to keep than they save. Otherwise blocks
    // hold at least `min_block` items, and a node has at most `max_blocks`.
    // An item can reach one prefix union per block, so the blocks of all
    // nodes together are capped (nodes nearer the root served first) at
    // copies_per_item per item plus `copies_extra`: that bounds the memory
    // and the cost of an insert; a node left without blocks only scans more.
    // 64 blocks leave a query on the 100k training step about 20 items to
    // filter at the root instead of ~1,300.
    static constexpr std::size_t min_block = 32;
    static constexpr std::size_t max_blocks = 64;
    static constexpr std::size_t copies_per_item = 8;
    static constexpr std::size_t copies_extra = std::size_t{1} << 18;
    static constexpr std::size_t leaf_items = 16;

    /// One time order of a node's items (0: by begin, 1: by descending end)
    /// cut into blocks of `block` items; empty when the node is small.
    struct family {
        std::size_t block = 0;
        /// The node's keys in ascending order: the query's bound finds how
        /// many items overlap it with one binary search.
        std::vector<std::uint64_t> sorted_keys;
        /// prefix[k]: union of the byte ranges placed in blocks 0..k, as
        /// sorted disjoint pieces (the last block's prefix is the node's
        /// whole union and is not repeated).
        std::vector<std::vector<range>> prefix;
        struct block_list {
            std::vector<range> ranges; ///< placed items of the block, offset-sorted
            std::vector<std::uint64_t> keys;
        };
        std::vector<block_list> blocks;
    };

    /// What a query reads to decide where to go, one cache line per node,
    /// apart from the item lists.
    struct alignas(64) shape {
        std::uint64_t center = 0;
        std::uint64_t span_begin = 0; ///< smallest begin in the subtree
        std::uint64_t span_end = 0;   ///< largest end in the subtree
        std::uint64_t max_begin = 0;  ///< largest begin in the subtree
        std::uint64_t min_end = 0;    ///< smallest end in the subtree
        std::size_t left = none, right = none;
        bool occupied = false; ///< whether anything is placed in the subtree
        bool leaf = false;     ///< holds every item of its subtree, centered or not
    };

    // Fields in the order of use, so an insert's walk up the tree touches
    // one line per node and a query's look at a small node another.
    struct alignas(64) node {
        std::size_t parent = none;
        /// Union of the byte ranges placed anywhere in the subtree, as sorted
        /// disjoint [lo, hi) pieces: items at different times reuse the same
        /// bytes, so this stays short where the item lists are long. Few
        /// queries read it (only those covering the whole subtree) while
        /// every insert below would change it, so inserts only append to
        /// `pending` and a read merges them in first (hence mutable: a query
        /// brings it up to date, it never changes what the tree holds).
        mutable std::vector<range> subtree_union;
        mutable std::vector<range> pending;

        std::size_t items = 0; ///< items of the node, placed or not
        bool large = false;    ///< whether it has families
        // A small node's placed items in offset order, and their keys for the
        // filters: the begins, then the ends (the sweep reads only the byte
        // ranges, a filter one key). A large node keeps in `ranges` the union
        // of its items' ranges instead: items packed edge to edge make one
        // piece, so the sweep reads a third as many.
        std::vector<range> ranges;
        std::vector<std::uint64_t> keys;
        family fam[2];
    };

    /// Where a range at `offset` goes in an offset-sorted list.
    static std::ptrdiff_t upper_offset(const std::vector<range>& list, Size offset) {
        return std::upper_bound(list.begin(), list.end(), offset, [](Size off, const range& x) { return off < x.first; }) -
               list.begin();
    }

    static void prefetch([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
        if (p != nullptr) __builtin_prefetch(p);
#endif
    }

    /// Appends the run of `list`, unfiltered or filtered by one of its keys.
    static void push(std::vector<run>& out, const std::vector<range>& list, const std::uint64_t* keys = nullptr,
                     std::uint64_t bound = 0, bool keep_below = false) {
        if (list.empty()) return;
        // The runs are read only once the walk is over: fetch their first
        // lines meanwhile (cold lists cost a cache miss each otherwise).
        prefetch(list.data());
        prefetch(keys);
        run r{list.data(), list.data() + list.size()};
        if (keys != nullptr && keep_below) {
            r.begins = keys;
            r.begin_bound = bound;
        } else if (keys != nullptr) {
            r.ends = keys;
            r.end_bound = bound;
        }
        out.push_back(r);
    }

    // Runs of the node's items that overlap a query on one side of its center:
    // f = 0 keeps begin < bound, f = 1 keeps end > bound.
    void side_runs(const node& n, int f, std::uint64_t bound, std::vector<run>& out) const {
        const family& fam = n.fam[f];
        const bool below = f == 0;
        if (!n.large) {
            push(out, n.ranges, n.keys.data() + (below ? 0 : n.ranges.size()), bound, below);
            return;
        }
        const auto& keys = fam.sorted_keys;
        // m: how many of the node's items overlap; they are the first m in the family's order.
        const std::size_t m =
            below ? static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), bound) - keys.begin())
                  : static_cast<std::size_t>(keys.end() - std::upper_bound(keys.begin(), keys.end(), bound));
        if (m == 0) return;
        if (m == n.items) {
            push(out, n.ranges);
            return;
        }
        const std::size_t q = m / fam.block;
        if (q > 0) push(out, fam.prefix[q - 1]);
        if (m % fam.block != 0) push(out, fam.blocks[q].ranges, fam.blocks[q].keys.data(), bound, below);
    }

    /// Brings a node's subtree union up to date: merges in what was placed
    /// below it since the last time.
    void refresh(std::size_t id) const {
        auto& p = nodes_[id].pending;
        if (p.empty()) return;
        auto& u = nodes_[id].subtree_union;
        if (p.size() <= 4) {
            for (const auto& x : p) add_to_union(u, x.first, x.second);
        } else {
            std::sort(p.begin(), p.end(), [](const range& a, const range& b) { return a.first < b.first; });
            merge_union(u, p, merged_);
            u.swap(merged_);
        }
        p.clear();
    }

    /// out = the union of two offset-sorted lists, as sorted disjoint pieces
    /// (touching pieces join: a gap of length 0 fits nothing).
    static void merge_union(const std::vector<range>& a, const std::vector<range>& b, std::vector<range>& out) {
        out.clear();
        auto i = a.begin(), j = b.begin();
        while (i != a.end() || j != b.end()) {
            const range x = (j == b.end() || (i != a.end() && i->first <= j->first)) ? *i++ : *j++;
            if (!out.empty() && x.first <= out.back().second)
                out.back().second = std::max(out.back().second, x.second);
            else
                out.push_back(x);
        }
    }

    static void add_to_union(std::vector<range>& u, Size lo, Size hi) {
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

    // Cuts the node's items into blocks along both time orders when it is
    // large enough to be worth it. ids holds, after build, every node's items
    // as one contiguous slice (items_first_[n], nodes_[n].items).
    void make_families(std::size_t n, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& iv,
                       const std::vector<std::size_t>& ids, std::size_t& budget) {
        node& nd = nodes_[n];
        if (nd.items < 2 * min_block) return;
        const std::size_t most_blocks = std::min(max_blocks, budget / nd.items);
        if (most_blocks < 2) return;
        nd.large = true;
        const std::size_t block = std::max(min_block, (nd.items + most_blocks - 1) / most_blocks);
        const std::size_t blocks = (nd.items + block - 1) / block;
        budget -= blocks * nd.items;
        std::vector<std::size_t> mine(ids.begin() + static_cast<std::ptrdiff_t>(items_first_[n]),
                                      ids.begin() + static_cast<std::ptrdiff_t>(items_first_[n] + nd.items));
        for (int f = 0; f < 2; ++f) {
            // f = 0: ascending begin; f = 1: descending end. Ties in any fixed order.
            auto key = [&](std::size_t i) { return f == 0 ? iv[i].first : iv[i].second; };
            std::sort(mine.begin(), mine.end(), [&](std::size_t a, std::size_t b) {
                return f == 0 ? key(a) < key(b) : key(a) > key(b);
            });
            family& fam = nd.fam[f];
            fam.block = block;
            fam.prefix.resize(blocks - 1);
            fam.blocks.resize(blocks);
            fam.sorted_keys.resize(mine.size());
            for (std::size_t r = 0; r < mine.size(); ++r) {
                rank_[f][mine[r]] = r;
                fam.sorted_keys[r] = key(mine[r]);
            }
            if (f == 1) std::reverse(fam.sorted_keys.begin(), fam.sorted_keys.end());
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
        shape_.push_back(shape{});
        items_first_.push_back(0);
        shape_[me].center = c;
        shape_[me].span_begin = span_begin;
        shape_[me].span_end = span_end;
        shape_[me].max_begin = max_begin;
        shape_[me].min_end = min_end;
        nodes_[me].parent = parent;

        if (hi - lo <= leaf_items) {
            // A few items: one leaf, filtered on both ends by queries, saves
            // the nodes (and their cache misses) of two or three more levels.
            shape_[me].leaf = true;
            for (std::size_t k = lo; k < hi; ++k) node_of_[ids[k]] = me;
            items_first_[me] = lo;
            nodes_[me].items = hi - lo;
            return me;
        }
        // Three-way partition: [lo, l) left of c, [l, r) containing c, [r, hi) right of c.
        auto first = ids.begin() + static_cast<std::ptrdiff_t>(lo);
        auto last = ids.begin() + static_cast<std::ptrdiff_t>(hi);
        auto left_end = std::partition(first, last, [&](std::size_t i) { return iv[i].second <= c; });
        auto mid_end = std::partition(left_end, last, [&](std::size_t i) { return iv[i].first <= c; });
        const auto l = static_cast<std::size_t>(left_end - ids.begin());
        const auto r = static_cast<std::size_t>(mid_end - ids.begin());
        for (std::size_t k = l; k < r; ++k) node_of_[ids[k]] = me;
        items_first_[me] = l; // the children only permute their own slices, so [l, r) stays ours
        nodes_[me].items = r - l;
        if (lo < l) {
            const std::size_t child = build(iv, ids, lo, l, me, scratch, level + 1);
            shape_[me].left = child;
        }
        if (r < hi) {
            const std::size_t child = build(iv, ids, r, hi, me, scratch, level + 1);
            shape_[me].right = child;
        }
        return me;
    }

    std::vector<shape> shape_;
    mutable std::vector<range> merged_; ///< scratch for `refresh`
    std::vector<node> nodes_;
    std::vector<std::size_t> node_of_;
    std::vector<std::size_t> items_first_; ///< per node, while building: where its items start in the id list
    std::vector<std::size_t> rank_[2];   ///< per item: its place in the node's two time orders
    std::size_t root_ = none;
    std::size_t height_ = 0;
};

} // namespace memplan::detail
