// The depth-first search behind `memplan::exact`: decides whether buffers
// (sizes in alignment units, lifetimes as ranges of "sections") fit under a
// capacity. After MiniMalloc (Moffitt, ASPLOS 2023): per-section inference
// (lowest possible start + unplaced total <= capacity), buffers resting on the
// skyline, and splitting whenever the problem falls apart in time. Different
// branching: fill the lowest free point of the most constrained "valley"
// (which buffer starts there, or nothing does), plus a memo of failed states
// and round-robin restarts over a few orders (the caller's loop). Where
// sections are full, buffers are confined inside the single buffer they
// replace at a time boundary (containment).
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace memplan::detail {

/// A decision instance in alignment units. Sections are the distinct maximal
/// sets of buffers live together (one per time a buffer ends after another
/// began); buffer b lives in sections [lo[b], hi[b]).
struct exact_instance {
    std::vector<std::uint64_t> size; // units
    std::vector<std::uint64_t> bytes; // the unaligned size, for the real capacity check
    std::vector<std::uint32_t> lo, hi;
    std::vector<std::uint64_t> width; // lifetime length, for tie-breaking orders
    std::vector<std::uint64_t> begin, end; // the lifetimes given to `build`
    std::vector<std::vector<std::uint32_t>> nbrs;     // buffers overlapping in time
    std::vector<std::vector<std::uint32_t>> sec_bufs; // buffers live in each section
    std::uint32_t num_sections = 0;

    std::size_t num_buffers() const noexcept { return size.size(); }

    /// `begin`/`end` are half-open lifetimes; every buffer must have begin < end.
    static exact_instance build(const std::vector<std::uint64_t>& units, const std::vector<std::uint64_t>& bytes,
                                const std::vector<std::uint64_t>& begin, const std::vector<std::uint64_t>& end) {
        exact_instance in;
        const std::size_t n = units.size();
        in.size = units;
        in.bytes = bytes;
        in.lo.assign(n, 0);
        in.hi.assign(n, 0);
        in.width.resize(n);
        in.begin = begin;
        in.end = end;
        // Ends sort before starts at equal times: half-open lifetimes do not meet there.
        std::vector<std::pair<std::pair<std::uint64_t, int>, std::uint32_t>> ev;
        ev.reserve(2 * n);
        for (std::uint32_t b = 0; b < n; ++b) {
            ev.push_back({{begin[b], 1}, b});
            ev.push_back({{end[b], 0}, b});
            in.width[b] = end[b] - begin[b];
        }
        std::sort(ev.begin(), ev.end());
        std::vector<std::uint32_t> active;
        std::vector<std::uint32_t> pos(n, 0);
        bool grown = false; // a buffer began since the last section was cut
        for (const auto& [key, b] : ev) {
            if (key.second == 1) {
                in.lo[b] = in.num_sections;
                pos[b] = static_cast<std::uint32_t>(active.size());
                active.push_back(b);
                grown = true;
            } else {
                if (grown) {
                    in.sec_bufs.push_back(active);
                    ++in.num_sections;
                    grown = false;
                }
                in.hi[b] = in.num_sections;
                const std::uint32_t p = pos[b];
                active[p] = active.back();
                pos[active[p]] = p;
                active.pop_back();
            }
        }
        // Overlapping pairs share a section; in order of first section, the
        // partners of a are the later buffers that start before a ends.
        std::vector<std::uint32_t> by_lo(n);
        for (std::uint32_t b = 0; b < n; ++b) by_lo[b] = b;
        std::sort(by_lo.begin(), by_lo.end(), [&](auto a, auto b) { return in.lo[a] < in.lo[b]; });
        in.nbrs.assign(n, {});
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = i + 1; j < n && in.lo[by_lo[j]] < in.hi[by_lo[i]]; ++j) {
                in.nbrs[by_lo[i]].push_back(by_lo[j]);
                in.nbrs[by_lo[j]].push_back(by_lo[i]);
            }
        return in;
    }
};

/// Static tie-breaking orders among buffers that could sit at the same offset
/// (MiniMalloc's preorderings): W = lifetime width, A = area, T = the largest
/// section total the buffer lives in, Z = size; all descending.
inline std::vector<std::uint32_t> exact_preorder_rank(const exact_instance& in, const char* keys) {
    const std::size_t n = in.num_buffers();
    std::vector<std::uint64_t> sec_total(in.num_sections, 0), total(n, 0);
    for (std::uint32_t s = 0; s < in.num_sections; ++s)
        for (auto b : in.sec_bufs[s]) sec_total[s] += in.size[b];
    for (std::uint32_t b = 0; b < n; ++b)
        for (std::uint32_t s = in.lo[b]; s < in.hi[b]; ++s) total[b] = std::max(total[b], sec_total[s]);
    std::vector<std::uint32_t> order(n);
    for (std::uint32_t b = 0; b < n; ++b) order[b] = b;
    auto key = [&](char c, std::uint32_t b) -> long double {
        switch (c) {
        case 'W': return static_cast<long double>(in.width[b]);
        case 'A': return static_cast<long double>(in.width[b]) * static_cast<long double>(in.size[b]);
        case 'T': return static_cast<long double>(total[b]);
        case 'Z': return static_cast<long double>(in.size[b]);
        case 'C': return static_cast<long double>(in.hi[b] - in.lo[b]);
        default: return 0;
        }
    };
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        for (const char* k = keys; *k; ++k) {
            const auto x = key(*k, a), y = key(*k, b);
            if (x != y) return x > y;
        }
        return a < b;
    });
    std::vector<std::uint32_t> rank(n);
    for (std::uint32_t i = 0; i < n; ++i) rank[order[i]] = i;
    return rank;
}

enum class exact_outcome { found, not_found, aborted, timed_out };

/// One decision search over an `exact_instance` at a capacity. Reusable: each
/// `solve` starts from scratch.
class exact_searcher {
public:
    using clock = std::chrono::steady_clock;

    explicit exact_searcher(const exact_instance& in) : in_(in) {
        const std::size_t n = in.num_buffers();
        solution_.assign(n, 0);
        placed_.assign(n, 0);
        minoff_.assign(n, 0);
        maxoff_.assign(n, 0);
        open_nbrs_.assign(n, 0);
        total_.assign(in.num_sections, 0);
        cut_.assign(in.num_sections, 0);
        is_dup_of_.assign(n, none);
        // Identical buffers (same lifetime and size) are interchangeable: of
        // two twins, the later in index order goes above the earlier.
        std::vector<std::uint32_t> ord(n);
        for (std::uint32_t b = 0; b < n; ++b) ord[b] = b;
        auto key = [&](std::uint32_t b) { return std::tuple(in.lo[b], in.hi[b], in.size[b], in.bytes[b], in.width[b]); };
        std::sort(ord.begin(), ord.end(), [&](auto a, auto b) { return std::pair(key(a), a) < std::pair(key(b), b); });
        for (std::size_t i = 1; i < n; ++i)
            if (key(ord[i - 1]) == key(ord[i])) is_dup_of_[ord[i]] = ord[i - 1];
    }

    /// Capacity in units for the section bounds, and per buffer the largest
    /// offset (units) at which it still ends under the real byte capacity.
    void set_capacity(std::uint64_t cap_units, std::uint64_t align, std::uint64_t cap_bytes) {
        cap_ = cap_units;
        // A new capacity changes every outcome: forget the failed states.
        const std::size_t want = std::size_t{1} << 19;
        memo_.assign(want, memo_entry{});
        memo_mask_ = want - 1;
        for (std::size_t b = 0; b < in_.num_buffers(); ++b)
            maxoff_[b] = in_.bytes[b] > cap_bytes ? 0 : (cap_bytes - in_.bytes[b]) / align;
        base_maxoff_ = maxoff_;
        find_containment();
        feasible_sizes_ = true;
        for (std::size_t b = 0; b < in_.num_buffers(); ++b)
            if (in_.bytes[b] > cap_bytes) feasible_sizes_ = false;
        sums_possible_ = cap_ <= max_sum_units && in_.num_sections > 0;
        if (sums_possible_) {
            words_ = static_cast<std::size_t>(cap_ / 64 + 1);
            const std::uint64_t bits = cap_ % 64 + 1;
            top_mask_ = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
            sum_lo_.assign(words_ * in_.num_sections, 0);
            sum_hi_.assign(words_ * in_.num_sections, 0);
            acc_.assign(words_, 0);
            mark_.assign(in_.num_buffers(), 0);
        }
    }

    /// The order in which the buffers that could fill a point are tried.
    void set_rank(std::vector<std::uint32_t> rank) { rank_ = std::move(rank); }
    /// Which valley a node fills: the one with the fewest options (default),
    /// or the lowest one.
    void set_lowest_first(bool on) noexcept { lowest_first_ = on; }
    /// Whether to prune with per-section subset sums (off by default: on the
    /// generated and MiniMalloc sets it cost 2-6x the time per node for about
    /// the same solved count alone; the restarts alternate). Takes effect at
    /// the next `solve`.
    void set_subset_sums(bool on) noexcept { sums_enabled_ = on; }
    /// Tie-break among equally constrained valleys: the least key wins
    /// (empty: the earliest section).
    void set_section_keys(std::vector<std::uint32_t> keys) { sec_key_ = std::move(keys); }
    /// Whether every section's load equals the capacity (a perfect packing).
    bool zero_slack() const noexcept { return zero_slack_; }
    /// Nodes cut because their state was already known to fail.
    std::uint64_t memo_hits() const noexcept { return memo_hits_; }
    void set_deadline(clock::time_point d) { deadline_ = d; }
    void set_node_limit(std::uint64_t limit) { node_limit_ = limit; }
    void set_tick(std::function<void()> tick) { tick_ = std::move(tick); }

    std::uint64_t nodes() const noexcept { return nodes_; }
    void reset_nodes() noexcept { nodes_ = 0; }
    const std::vector<std::uint64_t>& solution() const noexcept { return solution_; }

    exact_outcome solve() {
        const std::size_t n = in_.num_buffers();
        nodes_ = 0;
        if (!feasible_sizes_) return exact_outcome::not_found;
        sums_on_ = sums_enabled_ && sums_possible_;
        std::fill(placed_.begin(), placed_.end(), 0);
        std::fill(minoff_.begin(), minoff_.end(), 0);
        maxoff_ = base_maxoff_;
        std::fill(total_.begin(), total_.end(), 0);
        std::fill(cut_.begin(), cut_.end(), 0);
        for (std::size_t b = 0; b < n; ++b) {
            open_nbrs_[b] = static_cast<std::uint32_t>(in_.nbrs[b].size());
            for (std::uint32_t s = in_.lo[b]; s < in_.hi[b]; ++s) total_[s] += in_.size[b];
            for (std::uint32_t s = in_.lo[b]; s + 1 < in_.hi[b]; ++s) ++cut_[s];
        }
        log_.clear();
        placed_list_.clear();
        if (sums_on_) dirty_.assign(in_.num_sections, 1);
        seen_.assign(in_.num_sections, 0);
        count_.assign(in_.num_sections, 0);
        level_.assign(in_.num_sections, 0);
        for (std::uint32_t s = 0; s < in_.num_sections; ++s)
            if (section_exceeds(s)) return exact_outcome::not_found;
        std::vector<std::uint32_t> all;
        for (std::uint32_t b = 0; b < n; ++b) {
            if (open_nbrs_[b] == 0) { // alone in time: straight to its floor
                if (!place(b, 0)) return exact_outcome::not_found;
            } else {
                all.push_back(b);
            }
        }
        return solve_set(all, 0);
    }

private:
    static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
    static constexpr std::size_t max_depth = 6000;

    struct log_entry {
        std::uint64_t* where;
        std::uint64_t old;
    };

    void set_logged(std::uint64_t& x, std::uint64_t v) {
        log_.push_back({&x, x});
        x = v;
        touch_at(&x);
    }

    // The buffer whose min or max offset lives at `x`.
    void touch_at(const std::uint64_t* x) {
        if (!sums_on_) return;
        const std::size_t n = in_.num_buffers();
        if (x >= minoff_.data() && x < minoff_.data() + n) touch(static_cast<std::uint32_t>(x - minoff_.data()));
        else if (x >= maxoff_.data() && x < maxoff_.data() + n) touch(static_cast<std::uint32_t>(x - maxoff_.data()));
    }

    // Containment where sections are full: if the load before a boundary
    // equals the capacity, the buffers living across it and those ending
    // there cover every byte, so the buffers starting there can only use the
    // bytes of those ending there; when a single buffer x ends there, each
    // starter lies inside x. Mirrored: a full section after the boundary and
    // a single starter y hold every buffer ending there. Pairs (inner, outer).
    void find_containment() {
        inner_of_.assign(in_.num_buffers(), {});
        outer_of_.assign(in_.num_buffers(), {});
        const std::uint32_t m = in_.num_sections;
        std::vector<std::uint64_t> total(m, 0);
        for (std::uint32_t s = 0; s < m; ++s)
            for (auto b : in_.sec_bufs[s]) total[s] += in_.size[b];
        zero_slack_ = std::all_of(total.begin(), total.end(), [&](std::uint64_t t) { return t == cap_; });
        std::vector<std::vector<std::uint32_t>> ends(m + 1), starts(m + 1);
        for (std::uint32_t b = 0; b < in_.num_buffers(); ++b) {
            ends[in_.hi[b]].push_back(b);
            starts[in_.lo[b]].push_back(b);
        }
        for (std::uint32_t s = 1; s < m; ++s) {
            auto link = [&](std::uint32_t outer, const std::vector<std::uint32_t>& inners) {
                for (auto a : inners) {
                    inner_of_[outer].push_back(a);
                    outer_of_[a].push_back(outer);
                }
            };
            if (ends[s].size() == 1 && total[s - 1] == cap_) link(ends[s][0], starts[s]);
            else if (starts[s].size() == 1 && total[s] == cap_) link(starts[s][0], ends[s]);
        }
    }

    // Narrows c's offsets to [lo, hi]; false when nothing is left.
    bool narrow(std::uint32_t c, std::uint64_t lo, std::uint64_t hi, std::uint32_t& alo, std::uint32_t& ahi) {
        if (lo > minoff_[c]) {
            set_logged(minoff_[c], lo);
            alo = std::min(alo, in_.lo[c]);
            ahi = std::max(ahi, in_.hi[c]);
        }
        if (hi < maxoff_[c]) set_logged(maxoff_[c], hi);
        return minoff_[c] <= maxoff_[c];
    }

    // The section sums of b's sections are stale.
    void touch(std::uint32_t b) {
        if (!sums_on_) return;
        for (std::uint32_t s = in_.lo[b]; s < in_.hi[b]; ++s) dirty_[s] = 1;
    }

    // Per-section subset sums (zero slack is where they bite: perfect
    // packings). In section s the unplaced buffers U and at most sigma units
    // of waste fill [L, cap) exactly, L the lowest min offset there, so a
    // buffer of s can start only at L + (a subset sum of U) + (up to sigma),
    // and end only at cap - (the same). `lo` holds the possible starts,
    // `hi` the possible tops, as bitsets over [0, cap] in units.
    void refresh_sums(std::uint32_t s) {
        dirty_[s] = 0;
        std::uint64_t* lo = &sum_lo_[static_cast<std::size_t>(s) * words_];
        std::uint64_t* hi = &sum_hi_[static_cast<std::size_t>(s) * words_];
        std::fill(lo, lo + words_, 0);
        std::fill(hi, hi + words_, 0);
        std::uint64_t m = std::numeric_limits<std::uint64_t>::max(), t = 0;
        for (auto c : in_.sec_bufs[s]) {
            if (placed_[c]) continue;
            m = std::min(m, minoff_[c]);
            t += in_.size[c];
        }
        if (t == 0 || m + t > cap_) { // nothing to place, or already dead: no filter
            std::fill(lo, lo + words_, ~std::uint64_t{0});
            std::fill(hi, hi + words_, ~std::uint64_t{0});
            return;
        }
        lo[m >> 6] |= std::uint64_t{1} << (m & 63);
        hi[cap_ >> 6] |= std::uint64_t{1} << (cap_ & 63);
        for (auto c : in_.sec_bufs[s]) {
            if (placed_[c]) continue;
            shift_or_up(lo, in_.size[c]);
            shift_or_down(hi, in_.size[c]);
        }
        const std::uint64_t slack = cap_ - m - t;
        for (std::uint64_t r = 1; r <= slack;) { // widen by [0, slack]
            const std::uint64_t step = std::min(r, slack + 1 - r);
            shift_or_up(lo, step);
            shift_or_down(hi, step);
            r += step;
        }
    }

    // x |= x << k, and x |= x >> k, over [0, cap].
    void shift_or_up(std::uint64_t* x, std::uint64_t k) const {
        if (k > cap_) return;
        const std::size_t ws = static_cast<std::size_t>(k >> 6), bs = static_cast<std::size_t>(k & 63);
        for (std::size_t i = words_; i-- > ws;) {
            std::uint64_t v = x[i - ws] << bs;
            if (bs && i - ws > 0) v |= x[i - ws - 1] >> (64 - bs);
            x[i] |= v;
        }
        x[words_ - 1] &= top_mask_;
    }
    void shift_or_down(std::uint64_t* x, std::uint64_t k) const {
        if (k > cap_) return;
        const std::size_t ws = static_cast<std::size_t>(k >> 6), bs = static_cast<std::size_t>(k & 63);
        for (std::size_t i = 0; i + ws < words_; ++i) {
            std::uint64_t v = x[i + ws] >> bs;
            if (bs && i + ws + 1 < words_) v |= x[i + ws + 1] << (64 - bs);
            x[i] |= v;
        }
    }

    // Lifts the min offset of every unplaced buffer live in sections
    // [alo, ahi) to its lowest start allowed by the sums of all its
    // sections (start allowed below, top allowed above, in each); false when
    // a buffer has none left under its max offset. Repeats while lifts widen
    // the affected range, a few rounds at most.
    bool propagate_sums(std::uint32_t alo, std::uint32_t ahi) {
        if (!sums_on_) return true;
        for (int round = 0; round < 3 && alo < ahi; ++round) {
            ++stamp_;
            std::uint32_t nlo = std::numeric_limits<std::uint32_t>::max(), nhi = 0;
            for (std::uint32_t s = alo; s < ahi; ++s) {
                for (auto c : in_.sec_bufs[s]) {
                    if (placed_[c] || mark_[c] == stamp_) continue;
                    mark_[c] = stamp_;
                    for (std::uint32_t q = in_.lo[c]; q < in_.hi[c]; ++q)
                        if (dirty_[q]) refresh_sums(q);
                    // start y is allowed when every section allows y as a
                    // start and y + size as a top
                    std::fill(acc_.begin(), acc_.end(), ~std::uint64_t{0});
                    const std::uint64_t z = in_.size[c];
                    const std::size_t ws = static_cast<std::size_t>(z >> 6), bs = static_cast<std::size_t>(z & 63);
                    for (std::uint32_t q = in_.lo[c]; q < in_.hi[c]; ++q) {
                        const std::uint64_t* lo = &sum_lo_[static_cast<std::size_t>(q) * words_];
                        const std::uint64_t* hi = &sum_hi_[static_cast<std::size_t>(q) * words_];
                        for (std::size_t i = 0; i < words_; ++i) {
                            std::uint64_t v = 0;
                            if (i + ws < words_) {
                                v = hi[i + ws] >> bs;
                                if (bs && i + ws + 1 < words_) v |= hi[i + ws + 1] << (64 - bs);
                            }
                            acc_[i] &= lo[i] & v;
                        }
                    }
                    const std::uint64_t from = minoff_[c];
                    std::uint64_t y = std::numeric_limits<std::uint64_t>::max();
                    for (std::size_t i = static_cast<std::size_t>(from >> 6); i < words_; ++i) {
                        std::uint64_t v = acc_[i];
                        if (i == (from >> 6)) v &= ~std::uint64_t{0} << (from & 63);
                        if (v) {
                            y = i * 64 + static_cast<std::uint64_t>(std::countr_zero(v));
                            break;
                        }
                    }
                    if (y > maxoff_[c]) return false;
                    if (y > from) {
                        set_logged(minoff_[c], y);
                        nlo = std::min(nlo, in_.lo[c]);
                        nhi = std::max(nhi, in_.hi[c]);
                    }
                }
            }
            for (std::uint32_t s = nlo; s < nhi; ++s)
                if (section_exceeds(s)) return false;
            alo = nlo;
            ahi = nhi;
        }
        return true;
    }

    // Smallest height the unplaced buffers of section s can stack to, each
    // at or above its min offset: stacking them by min offset (earliest
    // release first, optimal for one machine with release dates) adds the
    // gaps where nothing can start yet. A section without slack allows none.
    // Only whether it exceeds the capacity matters, and the release order is
    // needed only when the lowest and highest min offsets disagree about it:
    // the height lies between (lowest + total) and (highest + total).
    bool section_exceeds(std::uint32_t s) {
        std::uint64_t m = std::numeric_limits<std::uint64_t>::max(), mx = 0, t = 0;
        for (auto c : in_.sec_bufs[s]) {
            if (placed_[c]) continue;
            m = std::min(m, minoff_[c]);
            mx = std::max(mx, minoff_[c]);
            t += in_.size[c];
        }
        if (t == 0) return false;
        if (m + t > cap_) return true;
        if (mx + t <= cap_) return false;
        // The height is the largest (min offset r + total of those at or
        // above r) over the buffers (release dates on one machine), which
        // can pass the capacity only for r > capacity - total: sort just those.
        const std::uint64_t theta = cap_ - t;
        auto& v = release_;
        v.clear();
        for (auto c : in_.sec_bufs[s])
            if (!placed_[c] && minoff_[c] > theta) v.push_back({minoff_[c], in_.size[c]});
        std::sort(v.begin(), v.end(), std::greater<>());
        std::uint64_t above = 0;
        for (const auto& [r, z] : v) {
            above += z;
            if (r + above > cap_) return true;
        }
        return false;
    }

    // Places b at offset o; lifts the neighbours' min offsets, places any
    // neighbour left with no unplaced neighbour (it interacts with nothing
    // any more, so its floor is its best spot), and refreshes the section
    // bounds over the affected range. False when that proves a dead end.
    // Every change is undone by `undo` back to the mark taken before.
    bool place(std::uint32_t b, std::uint64_t o) {
        bool ok = true;
        std::uint32_t alo = in_.lo[b], ahi = in_.hi[b];
        std::size_t first_new = placed_list_.size();
        place_one(b, o, ok, alo, ahi);
        // Neighbours that became hatless are placed right here, out of order.
        for (std::size_t i = first_new; i < placed_list_.size() && ok; ++i) {
            const std::uint32_t p = placed_list_[i];
            for (auto c : in_.nbrs[p]) {
                if (!placed_[c] && open_nbrs_[c] == 0) {
                    if (minoff_[c] > maxoff_[c]) {
                        ok = false;
                        break;
                    }
                    place_one(c, minoff_[c], ok, alo, ahi);
                }
            }
        }
        if (!ok) return false;
        for (std::uint32_t s = alo; s < ahi; ++s)
            if (section_exceeds(s)) return false;
        if (!propagate_sums(alo, ahi)) return false;
        aff_lo_ = alo;
        aff_hi_ = ahi;
        return true;
    }

    void place_one(std::uint32_t b, std::uint64_t o, bool& ok, std::uint32_t& alo, std::uint32_t& ahi) {
        placed_[b] = 1;
        touch(b);
        solution_[b] = o;
        placed_list_.push_back(b);
        const std::uint64_t top = o + in_.size[b];
        for (auto c : in_.nbrs[b]) {
            if (placed_[c]) continue;
            --open_nbrs_[c];
            if (minoff_[c] < top) {
                set_logged(minoff_[c], top);
                if (top > maxoff_[c]) ok = false;
                alo = std::min(alo, in_.lo[c]);
                ahi = std::max(ahi, in_.hi[c]);
            }
        }
        for (std::uint32_t s = in_.lo[b]; s < in_.hi[b]; ++s) total_[s] -= in_.size[b];
        for (std::uint32_t s = in_.lo[b]; s + 1 < in_.hi[b]; ++s) --cut_[s];
        const std::uint64_t z = in_.size[b];
        for (auto a : inner_of_[b]) // a lies in [o, o + z)
            if (!placed_[a] && !narrow(a, o, o + z - in_.size[a], alo, ahi)) ok = false;
        for (auto x : outer_of_[b]) // b lies inside x
            if (!placed_[x] && !narrow(x, o + z > in_.size[x] ? o + z - in_.size[x] : 0, o, alo, ahi)) ok = false;
    }

    void undo(std::size_t log_mark, std::size_t placed_mark) {
        while (placed_list_.size() > placed_mark) {
            const std::uint32_t b = placed_list_.back();
            placed_list_.pop_back();
            placed_[b] = 0;
            touch(b);
            for (auto c : in_.nbrs[b])
                if (!placed_[c]) ++open_nbrs_[c];
            for (std::uint32_t s = in_.lo[b]; s < in_.hi[b]; ++s) total_[s] += in_.size[b];
            for (std::uint32_t s = in_.lo[b]; s + 1 < in_.hi[b]; ++s) ++cut_[s];
        }
        while (log_.size() > log_mark) {
            *log_.back().where = log_.back().old;
            touch_at(log_.back().where);
            log_.pop_back();
        }
    }

    // Splits the unplaced buffers `set` into groups connected in time and
    // solves each on its own: a failure of any one fails them all.
    exact_outcome solve_set(const std::vector<std::uint32_t>& set, std::size_t depth) {
        if (set.empty()) return exact_outcome::found;
        std::vector<std::uint32_t> sorted = set;
        std::sort(sorted.begin(), sorted.end(), [&](auto a, auto b) { return in_.lo[a] < in_.lo[b]; });
        std::vector<std::vector<std::uint32_t>> groups;
        std::uint32_t reach = 0;
        for (auto b : sorted) {
            if (groups.empty() || in_.lo[b] >= reach) {
                groups.emplace_back();
                reach = 0;
            }
            groups.back().push_back(b);
            reach = std::max(reach, in_.hi[b]);
        }
        if (groups.size() > 1) // hardest first: a failure there saves the rest
            std::stable_sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
        for (auto& g : groups) {
            std::uint32_t slo = in_.lo[g.front()], shi = 0;
            for (auto b : g) shi = std::max(shi, in_.hi[b]);
            const auto r = search(g, slo, shi, depth);
            if (r != exact_outcome::found) return r;
        }
        return exact_outcome::found;
    }

    // One node. Let f be the lowest min offset of any unplaced buffer. No
    // unplaced buffer can go below f, so in any section p whose lowest free
    // point is at f, either some buffer starts exactly at f or that point
    // stays empty ("waste"). The node picks the section p with the fewest such
    // options (fail first) and branches on them; in a section without slack
    // the waste branch is cut at once. Placed buffers therefore always sit on
    // the skyline, and every branch splits the solutions: no order symmetry.
    exact_outcome search(const std::vector<std::uint32_t>& part, std::uint32_t slo, std::uint32_t shi,
                         std::size_t depth) {
        ++nodes_;
        // A node costs time linear in its part: on large parts the clock is
        // read at every node, so a deadline is never overshot by much.
        if ((nodes_ & 255) == 0 || part.size() > 512) {
            if (clock::now() >= deadline_) return exact_outcome::timed_out;
            if (tick_) tick_();
        }
        // The depth guard keeps the call stack bounded (long chains of waste
        // branches); hitting it only ends this attempt, never proves anything.
        if ((node_limit_ && nodes_ > node_limit_) || depth > max_depth) return exact_outcome::aborted;
        if (frames_.size() <= depth) frames_.resize(depth + 1);
        auto& live = frames_[depth].live; // the unplaced buffers of the part, handed down
        auto& cands = frames_[depth].cands;
        live.clear();
        // The subtree depends only on the unplaced buffers and their min
        // offsets: a state seen to fail before fails again.
        std::uint64_t k1 = 0x243f6a8885a308d3ULL, k2 = 0x13198a2e03707344ULL;
        for (auto c : part) {
            if (placed_[c]) continue;
            live.push_back(c);
            const std::uint64_t h = mix(mix(c + 0x9e3779b97f4a7c15ULL) ^ minoff_[c]);
            k1 ^= h;
            k2 += mix(h ^ 0xd1b54a32d192ed03ULL);
        }
        if (live.empty()) return exact_outcome::found;
        memo_entry& slot = memo_[k1 & memo_mask_];
        if (slot.k1 == k1 && slot.k2 == k2) {
            ++memo_hits_;
            return exact_outcome::not_found;
        }
        // The lowest free point of each section: the least min offset there.
        for (std::uint32_t s = slo; s < shi; ++s) {
            level_[s] = std::numeric_limits<std::uint64_t>::max();
            count_[s] = 0;
            seen_[s] = 0; // 1: some buffer that could start at the level there is not flat
        }
        for (auto c : live) {
            const std::uint64_t m = minoff_[c];
            for (std::uint32_t s = in_.lo[c]; s < in_.hi[c]; ++s) level_[s] = std::min(level_[s], m);
        }
        // A section is a valley when every buffer that could start at its level
        // lies flat there (its whole lifetime at that level): then nothing can
        // end up below such a buffer, so branching there is sound. The section
        // with the lowest level always qualifies.
        for (auto c : live) {
            const std::uint64_t m = minoff_[c];
            bool flat = true, any = false;
            for (std::uint32_t s = in_.lo[c]; s < in_.hi[c]; ++s) {
                flat &= level_[s] == m;
                any |= level_[s] == m;
            }
            if (!any) continue;
            for (std::uint32_t s = in_.lo[c]; s < in_.hi[c]; ++s)
                if (level_[s] == m) {
                    ++count_[s];
                    seen_[s] |= flat ? 0u : 1u;
                }
        }
        // Fail first: the valley with the fewest ways to fill its lowest point
        // (the buffers that could start there, plus waste when it has slack).
        std::uint32_t p = none;
        std::uint64_t best_score = std::numeric_limits<std::uint64_t>::max(), best_slack = 0;
        std::uint32_t best_key = none;
        for (std::uint32_t s = slo; s < shi; ++s) {
            if (seen_[s] || count_[s] == 0) continue;
            const std::uint64_t used = level_[s] + total_[s];
            const std::uint64_t slack = used >= cap_ ? 0 : cap_ - used;
            const std::uint64_t score =
                lowest_first_ ? level_[s] : static_cast<std::uint64_t>(count_[s]) + (slack > 0 ? 1 : 0);
            const std::uint32_t key = sec_key_.empty() ? s : sec_key_[s];
            if (score < best_score || (score == best_score && (slack < best_slack ||
                                                               (slack == best_slack && key < best_key)))) {
                best_score = score;
                best_slack = slack;
                best_key = key;
                p = s;
            }
        }
        const std::uint64_t f = level_[p];
        cands.clear();
        for (auto c : live)
            if (minoff_[c] == f && in_.lo[c] <= p && p < in_.hi[c]) cands.push_back(c);
        // Value order: first the buffers whose top meets the skyline beside
        // them (or the capacity): they close steps instead of opening new
        // ones, which is how perfect packings are made; then the static rank.
        // (Counting the edge contact with placed buffers back to back in
        // time as well made the generated skylines and mixes worse.)
        auto wall = [&](std::uint32_t s) {
            return level_[s] == std::numeric_limits<std::uint64_t>::max() ? cap_ : level_[s];
        };
        contact_.clear();
        for (auto c : cands) {
            const std::uint64_t top = f + in_.size[c];
            std::uint64_t touch = 0;
            if (in_.lo[c] > slo && top == wall(in_.lo[c] - 1)) ++touch;
            if (in_.hi[c] < shi && top == wall(in_.hi[c])) ++touch;
            if (top == cap_) ++touch;
            contact_.push_back(((3 - touch) << 32) | rank_[c]);
        }
        {
            std::vector<std::uint32_t>& o = order_;
            o.resize(cands.size());
            for (std::uint32_t i = 0; i < o.size(); ++i) o[i] = i;
            std::sort(o.begin(), o.end(), [&](auto a, auto b) { return contact_[a] < contact_[b]; });
            sorted_.clear();
            for (auto i : o) sorted_.push_back(cands[i]);
            cands.swap(sorted_);
        }
        for (std::size_t i = 0; i < cands.size(); ++i) {
            const std::uint32_t c = cands[i];
            // Of two identical buffers the earlier one in index order goes lower.
            if (is_dup_of_[c] != none && !placed_[is_dup_of_[c]]) continue;
            const std::size_t log_mark = log_.size(), placed_mark = placed_list_.size();
            exact_outcome r = exact_outcome::not_found;
            if (place(c, f)) r = next(live, slo, shi, depth);
            undo(log_mark, placed_mark);
            if (r != exact_outcome::not_found) return r;
        }
        if (best_slack > 0) { // waste: nothing starts at f in section p
            const std::size_t log_mark = log_.size(), placed_mark = placed_list_.size();
            exact_outcome r = exact_outcome::not_found;
            if (raise(cands)) r = search(live, slo, shi, depth + 1);
            undo(log_mark, placed_mark);
            if (r != exact_outcome::not_found) return r;
        }
        memo_entry& fill = memo_[k1 & memo_mask_];
        fill = {k1, k2};
        return exact_outcome::not_found;
    }

    // The waste branch: none of `cands` starts at f. Each must then rest on
    // some unplaced neighbour (a gravity-packed solution exists whenever any
    // does), so it starts no lower than the lowest top such a neighbour can have.
    bool raise(const std::vector<std::uint32_t>& cands) {
        std::uint32_t alo = std::numeric_limits<std::uint32_t>::max(), ahi = 0;
        lifted_.clear();
        for (auto c : cands) {
            std::uint64_t v = std::numeric_limits<std::uint64_t>::max();
            for (auto d : in_.nbrs[c])
                if (!placed_[d]) v = std::min(v, minoff_[d] + in_.size[d]);
            lifted_.push_back(v);
        }
        for (std::size_t i = 0; i < cands.size(); ++i) {
            const auto c = cands[i];
            if (lifted_[i] > maxoff_[c]) return false;
            set_logged(minoff_[c], lifted_[i]);
            alo = std::min(alo, in_.lo[c]);
            ahi = std::max(ahi, in_.hi[c]);
        }
        for (std::uint32_t s = alo; s < ahi; ++s)
            if (section_exceeds(s)) return false;
        return alo >= ahi || propagate_sums(alo, ahi);
    }

    // After a placement: recurse, or split when the placement cut the part in two.
    exact_outcome next(const std::vector<std::uint32_t>& part, std::uint32_t slo, std::uint32_t shi,
                       std::size_t depth) {
        const std::uint32_t lo = std::max(aff_lo_, slo), hi = std::min(aff_hi_, shi);
        bool split = false;
        for (std::uint32_t s = lo; s + 1 < hi; ++s)
            if (cut_[s] == 0) {
                split = true;
                break;
            }
        if (!split) return search(part, slo, shi, depth + 1);
        std::vector<std::uint32_t> rest;
        for (auto c : part)
            if (!placed_[c]) rest.push_back(c);
        return solve_set(rest, depth + 1);
    }

    static std::uint64_t mix(std::uint64_t x) noexcept { // splitmix64's finaliser
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }

    // A lossy table of failed states, keyed by two independent 64-bit hashes
    // of (unplaced buffer, min offset) pairs. Failure is a property of the
    // state, not of the order that explored it, so it holds across restarts.
    struct memo_entry {
        std::uint64_t k1 = 0, k2 = 0;
    };
    std::vector<std::uint32_t> seen_, count_;
    std::vector<std::uint64_t> level_;
    std::vector<std::uint64_t> lifted_, contact_;
    // subset sums per section (only while cap_ is small enough to afford them)
    static constexpr std::uint64_t max_sum_units = 1u << 14;
    bool sums_on_ = false;
    std::size_t words_ = 0;
    std::uint64_t top_mask_ = 0, stamp_ = 0;
    std::vector<std::uint64_t> sum_lo_, sum_hi_, acc_, mark_;
    std::vector<std::uint8_t> dirty_;
    std::vector<std::uint32_t> order_, sorted_;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> release_;
    std::vector<memo_entry> memo_;
    std::uint64_t memo_mask_ = 0, memo_hits_ = 0;

    const exact_instance& in_;
    std::vector<std::uint64_t> solution_, minoff_, maxoff_, base_maxoff_;
    std::vector<std::vector<std::uint32_t>> inner_of_, outer_of_; // containment (find_containment)
    std::vector<std::uint8_t> placed_;
    std::vector<std::uint32_t> open_nbrs_, rank_, is_dup_of_, sec_key_;
    std::vector<std::uint64_t> total_, cut_;
    std::vector<log_entry> log_;
    std::vector<std::uint32_t> placed_list_;
    struct frame {
        std::vector<std::uint32_t> live, cands;
    };
    std::deque<frame> frames_; // one per depth; a deque keeps references stable
    std::uint64_t cap_ = 0;
    bool feasible_sizes_ = true, lowest_first_ = false, sums_enabled_ = false, sums_possible_ = false,
         zero_slack_ = false;
    std::uint32_t aff_lo_ = 0, aff_hi_ = 0;
    std::uint64_t nodes_ = 0, node_limit_ = 0;
    clock::time_point deadline_ = clock::time_point::max();
    std::function<void()> tick_;
};

} // namespace memplan::detail
