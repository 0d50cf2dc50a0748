// Exact offset assignment: a depth-first search that fills the skyline from
// its lowest points (after MiniMalloc, Moffitt ASPLOS 2023; see
// detail/exact_search.hpp), restarted on Luby budgets over fixed then randomised strategies,
// on an equivalent smaller instance where full sections force merges
// (detail/exact_reduce.hpp).
// With a capacity it decides whether every buffer fits under it; without one
// it minimises the height anytime: a greedy upper bound first, then decision
// searches at the lower bound and by bisection until the time runs out.
#pragma once

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/detail/exact_reduce.hpp>
#include <memplan/alloc/detail/exact_search.hpp>
#include <memplan/alloc/problem.hpp>
#include <memplan/core/deadline.hpp>
#include <memplan/core/error.hpp>
#include <memplan/core/status.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace memplan {

/// What `exact` reports while it runs (about once a second).
struct exact_progress {
    std::uint64_t best_height = 0; ///< best height found so far; 0 while none
    std::uint64_t lower_bound = 0; ///< proven lower bound on the height
    double elapsed_seconds = 0;
    std::uint64_t nodes = 0; ///< search nodes so far
};

namespace detail {

// Units of alignment and the lifetimes of the buffers that matter (non-empty
// size and lifetime); `index` maps them back to the problem's items.
template <class Size>
struct exact_prepared {
    std::vector<std::size_t> index;
    exact_instance instance;
    std::uint64_t align = 1;
};

template <class Size>
exact_prepared<Size> exact_prepare(const basic_alloc_problem<Size>& p) {
    exact_prepared<Size> r;
    r.align = p.alignment <= 1 ? 1 : static_cast<std::uint64_t>(p.alignment);
    std::vector<std::uint64_t> units, bytes, begin, end;
    for (std::size_t i = 0; i < p.items.size(); ++i) {
        const auto& it = p.items[i];
        if (it.size == 0 || it.begin >= it.end) continue;
        r.index.push_back(i);
        const auto sz = static_cast<std::uint64_t>(it.size);
        units.push_back(sz / r.align + (sz % r.align != 0));
        bytes.push_back(sz);
        begin.push_back(it.begin);
        end.push_back(it.end);
    }
    // Some packing of minimum height is canonical (every offset a sum of
    // rounded sizes), so offsets can move in steps of the sizes' common
    // divisor: a coarser unit, the same answers, and small enough numbers
    // for the search's per-section subset sums.
    std::uint64_t g = 0;
    for (auto u : units) g = std::gcd(g, u);
    if (g > 1 && r.align <= std::numeric_limits<std::uint64_t>::max() / g) {
        for (auto& u : units) u /= g;
        r.align *= g;
    }
    r.instance = exact_instance::build(units, bytes, begin, end);
    return r;
}

// Greedy by size, lowest fitting gap among the time-overlapping placed
// buffers (Pisarchyk & Lee 2020): the minimiser's first upper bound.
inline std::vector<std::uint64_t> exact_greedy(const exact_instance& in) {
    const std::size_t n = in.num_buffers();
    std::vector<std::uint32_t> order(n);
    for (std::uint32_t b = 0; b < n; ++b) order[b] = b;
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
        if (in.size[a] != in.size[b]) return in.size[a] > in.size[b];
        return in.width[a] > in.width[b];
    });
    std::vector<std::uint64_t> off(n, 0);
    std::vector<std::uint8_t> done(n, 0);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> busy;
    for (auto b : order) {
        busy.clear();
        for (auto c : in.nbrs[b])
            if (done[c]) busy.push_back({off[c], off[c] + in.size[c]});
        std::sort(busy.begin(), busy.end());
        std::uint64_t at = 0;
        for (const auto& [lo, hi] : busy) {
            if (lo >= at + in.size[b]) break;
            at = std::max(at, hi);
        }
        off[b] = at;
        done[b] = 1;
    }
    return off;
}

// Height in bytes of a placement in units.
inline std::uint64_t exact_height(const exact_instance& in, const std::vector<std::uint64_t>& off, std::uint64_t align) {
    std::uint64_t h = 0;
    for (std::size_t b = 0; b < in.num_buffers(); ++b) h = std::max(h, off[b] * align + in.bytes[b]);
    return h;
}

// Decision search with restarts: MiniMalloc's static tie-breaking orders first,
// then randomised ones, each under a Luby node budget, so
// an unlucky order cannot stall the search. A search that ends without
// hitting its budget is complete, so its "not found" proves infeasibility.
class exact_decider {
public:
    using clock = std::chrono::steady_clock;

    explicit exact_decider(const exact_instance& in, bool reduce = true) : in_(in), searcher_(in), reduce_(reduce) {
        // Strategies: a tie-breaking order among the buffers that could fill
        // a point, and which valley to fill first. Each fails on instances
        // where another is quick (heavy tails), hence the round robin.
        for (const char* keys : {"WAT", "TAW"}) ranks_.push_back(exact_preorder_rank(in, keys));
        strategies_ = {{0, false}, {1, false}, {0, true}, {1, true}};
    }

    void set_tick(std::function<void()> tick) {
        tick_ = tick;
        searcher_.set_tick(std::move(tick));
    }
    /// Nodes so far, counting the search in flight (for progress reports).
    std::uint64_t nodes() const noexcept {
        return nodes_ + searcher_.nodes() + (reduced_ ? reduced_->nodes() : 0);
    }

    /// found / not_found (proven) / timed_out; offsets (units) in `out` when found.
    exact_outcome decide(std::uint64_t cap_bytes, std::uint64_t align, clock::time_point deadline,
                         std::vector<std::uint64_t>& out) {
        const std::uint64_t cap_units = cap_bytes / align + (cap_bytes % align != 0);
        // A perfect packing's forced merges (detail/exact_reduce.hpp) give an
        // equivalent, smaller instance: search that one, for proofs too.
        if (reduce_ && cap_units != reduced_cap_) {
            reduced_cap_ = cap_units;
            if (reduced_) nodes_ += reduced_->nodes();
            reduced_.reset();
            reduction_ = exact_reduce(in_, cap_units);
            if (reduction_) {
                reduced_ = std::make_unique<exact_decider>(reduction_->instance, false);
                if (tick_) reduced_->set_tick(tick_);
            }
        }
        if (reduced_) {
            std::vector<std::uint64_t> merged;
            const auto r = reduced_->decide(cap_bytes, align, deadline, merged);
            if (r == exact_outcome::found) {
                out.assign(in_.num_buffers(), 0);
                for (std::size_t b = 0; b < out.size(); ++b) out[b] = merged[reduction_->rep[b]];
            }
            return r;
        }
        searcher_.set_capacity(cap_bytes / align + (cap_bytes % align != 0), align, cap_bytes);
        searcher_.set_deadline(deadline);
        const std::uint64_t base = 2 * std::max<std::uint64_t>(in_.num_buffers(), 16);
        for (std::uint64_t i = 1;; ++i) {
            const std::size_t k = static_cast<std::size_t>(i - 1);
            if (k < strategies_.size()) {
                searcher_.set_rank(ranks_[strategies_[k].first]);
                searcher_.set_lowest_first(strategies_[k].second);
                searcher_.set_section_keys({});
            } else {
                randomise();
            }
            // In perfect packings every other randomised run prunes with
            // subset sums: slower nodes, but it solves more byte-stripe
            // packings (with slack it only cost time).
            searcher_.set_subset_sums(searcher_.zero_slack() && k >= strategies_.size() && i % 2 == 0);
            searcher_.set_node_limit(base * luby(i));
            const auto r = searcher_.solve();
            nodes_ += searcher_.nodes();
            searcher_.reset_nodes();
            if (r == exact_outcome::found) {
                out = searcher_.solution();
                return r;
            }
            if (r != exact_outcome::aborted) return r;
        }
    }

private:
    // The Luby sequence 1 1 2 1 1 2 4 1 1 2 ... (Luby, Sinclair & Zuckerman
    // 1993): within a log factor of the best fixed budget for any run-time
    // distribution, which is what heavy tails call for.
    static std::uint64_t luby(std::uint64_t i) {
        for (;;) {
            std::uint64_t k = 1;
            while ((std::uint64_t{1} << k) - 1 < i) ++k;
            if (i == (std::uint64_t{1} << k) - 1) return std::uint64_t{1} << (k - 1);
            i -= (std::uint64_t{1} << (k - 1)) - 1;
        }
    }

    std::uint64_t next_random() {
        std::uint64_t x = (seed_ += 0x9e3779b97f4a7c15ULL);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }

    // A randomised strategy: one of the static orders with its ranks
    // perturbed, a random valley tie-break, and either valley rule.
    void randomise() {
        const std::size_t n = in_.num_buffers();
        const auto& base = ranks_[next_random() % ranks_.size()];
        const std::uint64_t spread = 1 + (next_random() % 4) * n / 8;
        std::vector<std::uint64_t> key(n);
        for (std::size_t b = 0; b < n; ++b) key[b] = (base[b] + next_random() % spread) * (n + 1) + base[b];
        std::vector<std::uint32_t> order(n), rank(n);
        for (std::uint32_t b = 0; b < n; ++b) order[b] = b;
        std::sort(order.begin(), order.end(), [&](auto a, auto b) { return key[a] < key[b]; });
        for (std::uint32_t i = 0; i < n; ++i) rank[order[i]] = i;
        searcher_.set_rank(std::move(rank));
        std::vector<std::uint32_t> sk(in_.num_sections);
        for (auto& x : sk) x = static_cast<std::uint32_t>(next_random());
        searcher_.set_section_keys(std::move(sk));
        searcher_.set_lowest_first(next_random() % 4 == 0);
    }

    const exact_instance& in_;
    exact_searcher searcher_;
    bool reduce_ = true;
    std::uint64_t reduced_cap_ = 0;
    std::optional<exact_reduction> reduction_;
    std::unique_ptr<exact_decider> reduced_; // searches reduction_'s instance
    std::function<void()> tick_;
    std::uint64_t seed_ = 0x5eed;
    std::vector<std::vector<std::uint32_t>> ranks_;
    std::vector<std::pair<std::size_t, bool>> strategies_;
    std::uint64_t nodes_ = 0;
};

} // namespace detail

/// Exact offset assignment by depth-first search (complete: an exhausted
/// search proves infeasibility).
///  - Decision mode (capacity > 0, from this policy or else from the problem):
///    `optimal` / `feasible` with a placement of height <= capacity,
///    `infeasible` with the reason when none exists, `no_solution` when the
///    time limit hits first.
///  - Minimisation (no capacity): anytime; `optimal` when the height meets the
///    lower bound or every lower height is proven impossible, else `feasible`
///    with the best height found in the time limit.
/// Sizes are rounded up to the alignment; offsets are multiples of it.
namespace detail {

/// First time point at which the live total is largest (where the lower
/// bound is attained).
template <class Size>
std::uint64_t peak_time(const basic_alloc_problem<Size>& p) {
    std::vector<std::pair<std::uint64_t, long double>> ev;
    ev.reserve(2 * p.items.size());
    for (const auto& it : p.items)
        if (it.size > 0 && it.begin < it.end) {
            ev.push_back({it.begin, static_cast<long double>(it.size)});
            ev.push_back({it.end, -static_cast<long double>(it.size)});
        }
    std::sort(ev.begin(), ev.end());
    long double cur = 0, best = -1;
    std::uint64_t at = 0;
    for (std::size_t k = 0; k < ev.size();) {
        const auto t = ev[k].first;
        for (; k < ev.size() && ev[k].first == t; ++k) cur += ev[k].second;
        if (cur > best) {
            best = cur;
            at = t;
        }
    }
    return at;
}

/// Windows of time around one point: [begin, end) grown one event time at a
/// time on alternate sides until at least so many live items intersect it.
template <class Size>
class time_windows {
public:
    explicit time_windows(const basic_alloc_problem<Size>& p) {
        for (const auto& it : p.items)
            if (it.size > 0 && it.begin < it.end) {
                begins_.push_back(it.begin);
                ends_.push_back(it.end);
            }
        std::sort(begins_.begin(), begins_.end());
        std::sort(ends_.begin(), ends_.end());
        times_ = begins_;
        times_.insert(times_.end(), ends_.begin(), ends_.end());
        std::sort(times_.begin(), times_.end());
        times_.erase(std::unique(times_.begin(), times_.end()), times_.end());
    }
    std::size_t live_items() const noexcept { return begins_.size(); }
    /// How many pairs of live items overlap in time (the edges of the
    /// search's overlap graph): each item meets the ones live when it starts.
    std::uint64_t overlapping_pairs() const {
        std::uint64_t pairs = 0;
        std::size_t ended = 0;
        for (std::size_t i = 0; i < begins_.size(); ++i) {
            while (ended < ends_.size() && ends_[ended] <= begins_[i]) ++ended;
            pairs += i - ended; // started before, not yet ended
        }
        return pairs;
    }
    /// Live items whose lifetime meets [a, b).
    std::size_t count(std::uint64_t a, std::uint64_t b) const {
        const auto starting_late = static_cast<std::size_t>(begins_.end() - std::lower_bound(begins_.begin(), begins_.end(), b));
        const auto ended = static_cast<std::size_t>(std::upper_bound(ends_.begin(), ends_.end(), a) - ends_.begin());
        return begins_.size() - starting_late - ended;
    }
    /// The smallest window around `center` (grown alternately) that at least
    /// `items` live items meet.
    std::pair<std::uint64_t, std::uint64_t> around(std::uint64_t center, std::size_t items) const {
        if (times_.empty()) return {center, center + 1};
        auto lo = static_cast<std::size_t>(std::upper_bound(times_.begin(), times_.end(), center) - times_.begin());
        lo = lo > 0 ? lo - 1 : 0; // times_[lo] <= center
        std::size_t hi = std::min(lo + 1, times_.size() - 1);
        std::uint64_t a = times_[lo], b = std::max(times_[hi], a + 1);
        for (bool left = true; count(a, b) < items && (lo > 0 || hi + 1 < times_.size()); left = !left) {
            if ((left && lo > 0) || hi + 1 >= times_.size()) a = times_[--lo];
            else b = times_[++hi];
        }
        return {a, b};
    }

private:
    std::vector<std::uint64_t> begins_, ends_, times_;
};

/// Greedy passes over one problem, keeping the lowest placement: `offsets`
/// (a valid placement on entry, or empty: none yet) is replaced by each
/// lower one. A pass is not started when the longest so far would not end
/// by `until`.
template <class Size>
class lowest_pass {
public:
    lowest_pass(const basic_alloc_problem<Size>& p, std::vector<Size>& offsets, memplan::deadline until)
        : p_(p), offsets_(offsets), until_(until), tree_(make_interval_tree(p)),
          best_(offsets.size() == p.items.size() ? placement_height(p, offsets) : std::numeric_limits<Size>::max()) {}

    /// Whether another pass may start; its time counts from here.
    bool may_start() {
        start_ = clock::now();
        return !until_.expired() && (until_.unlimited() || start_ + longest_ <= until_.end());
    }
    /// One pass over `order` (see `greedy_pass`; pinned items keep their
    /// current offsets), kept when lower.
    void run(const std::vector<std::size_t>& order, const std::vector<char>* pinned = nullptr, bool first_fit = false) {
        std::vector<Size> trial = offsets_;
        const bool ok = greedy_pass(p_, order, tree_, trial, pinned, until_, first_fit);
        longest_ = std::max(longest_, clock::now() - start_);
        if (!ok) return;
        const Size h = placement_height(p_, trial);
        if (h >= best_) return;
        best_ = h;
        offsets_ = std::move(trial);
        improved_ = true;
    }
    Size best() const noexcept { return best_; }
    bool improved() const noexcept { return improved_; }

private:
    using clock = std::chrono::steady_clock;
    const basic_alloc_problem<Size>& p_;
    std::vector<Size>& offsets_;
    memplan::deadline until_;
    interval_tree<Size> tree_;
    Size best_;
    bool improved_ = false;
    clock::time_point start_{};
    clock::duration longest_{0};
};

} // namespace detail

struct exact {
    static constexpr std::string_view name = "exact";

    memplan::time_limit time_limit = 10.0; ///< seconds from the call, or the caller's deadline
    /// Minimisation stops once the height is within this fraction of the
    /// proven lower bound (status `feasible` unless they meet): 0 searches
    /// until proven or out of time; "auto" allocation uses `auto_gap`.
    double gap = 0;
    std::uint64_t capacity = 0; ///< overrides the problem's capacity when nonzero
    /// Called about once a second while searching (e.g. by the CLI).
    std::function<void(const exact_progress&)> on_progress;

    /// Throws `memplan::error` for malformed problems (see `validate`).
    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& problem) const {
        static_assert(std::is_unsigned_v<Size> && sizeof(Size) <= sizeof(std::uint64_t),
                      "exact works on unsigned sizes of at most 64 bits");
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        const memplan::deadline until = time_limit.from_now();
        const auto deadline = until.end();
        validate(problem);
        basic_alloc_result<Size> res;
        res.offsets.assign(problem.items.size(), 0);
        res.bound = lower_bound(problem);
        if (!aligned_sizes_fit(problem)) { // the search's heights are in the size type
            res.status = memplan::status::error;
            res.message = "exact: the aligned sizes sum past the size type; the search needs every height it "
                          "may try to fit it (a smaller alignment, or a heuristic allocator)";
            return res;
        }
        const std::uint64_t cap = capacity ? capacity : static_cast<std::uint64_t>(problem.capacity);
        auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
        // Minimisation: the heuristics first. At the bound nothing is left to
        // search; and an instance whose overlaps are too many to build the
        // search's graph in seconds gets exact windows (each a small instance
        // of its own) instead of the whole search.
        std::optional<basic_alloc_result<Size>> heuristic;
        if (cap == 0) {
            // First-fit passes in omnimalloc's orders, the one most often
            // lowest before the best-fit orders (which on dense traces of
            // tens of thousands of buffers can take seconds), the others after.
            std::vector<double> degree;
            std::vector<Size> first_fit;
            if (restarts) {
                degree = conflict_degrees(problem);
                first_fit_passes(problem, first_fit, degree, until, 0, 1);
            }
            best_heuristic bh;
            bh.deadline = until;
            heuristic = bh.place(problem);
            auto lower = [&] {
                heuristic->size = placement_height(problem, heuristic->offsets);
                heuristic->status = heuristic->size <= res.bound ? memplan::status::optimal : memplan::status::feasible;
                heuristic->message.clear();
            };
            if (first_fit.size() == problem.items.size() &&
                (!has_solution(heuristic->status) || placement_height(problem, first_fit) < heuristic->size)) {
                heuristic->offsets = std::move(first_fit);
                lower();
            }
            if (has_solution(heuristic->status) && heuristic->size > res.bound && restarts &&
                first_fit_passes(problem, heuristic->offsets, degree, until, 1, 3))
                lower();
            if (has_solution(heuristic->status) && heuristic->size <= res.bound) {
                heuristic->seconds = elapsed();
                return *heuristic;
            }
            const std::uint64_t pairs = detail::time_windows<Size>(problem).overlapping_pairs();
            if (has_solution(heuristic->status) && pairs > max_search_pairs) {
                res.offsets = heuristic->offsets;
                std::vector<char> pinned;
                if (windows) improve_by_windows(problem, res.offsets, until, &pinned);
                // The time left goes to greedy passes in randomised orders
                // around the best window: stopping here would leave it unused.
                if (restarts) improve_by_restarts(problem, res.offsets, pinned, until, gap);
                res.size = placement_height(problem, res.offsets);
                res.status = res.size <= res.bound ? memplan::status::optimal : memplan::status::feasible;
                res.message = std::to_string(pairs) + " buffer pairs overlap in time, too many for the whole "
                              "search: the heuristics, first-fit passes, exact windows around the peak and "
                              "randomised passes";
                res.seconds = elapsed();
                return res;
            }
        }
        const auto prep = detail::exact_prepare(problem);
        const auto& in = prep.instance;
        const std::uint64_t align = prep.align;

        std::uint64_t best_height = 0, proven_lb = res.bound;
        std::vector<std::uint64_t> best; // units
        bool have_best = false;
        detail::exact_decider decider(in);
        auto last_report = start;
        if (on_progress)
            decider.set_tick([&] {
                const auto now = clock::now();
                if (now - last_report < std::chrono::seconds(1)) return;
                last_report = now;
                on_progress({have_best ? best_height : 0, proven_lb, elapsed(), decider.nodes()});
            });
        auto finish = [&](memplan::status st, std::string message) {
            if (have_best)
                for (std::size_t k = 0; k < prep.index.size(); ++k)
                    res.offsets[prep.index[k]] = static_cast<Size>(best[k] * align);
            res.size = have_best || in.num_buffers() == 0 ? placement_height(problem, res.offsets) : 0;
            res.status = st;
            res.message = std::move(message);
            res.seconds = elapsed();
            return res;
        };
        if (in.num_buffers() == 0) {
            have_best = true;
            return finish(cap && res.bound > cap ? memplan::status::infeasible : memplan::status::optimal, "");
        }

        if (cap > 0) { // decision
            if (res.bound > cap)
                return finish(memplan::status::infeasible,
                              "lower bound " + std::to_string(res.bound) + " exceeds capacity " +
                                  std::to_string(cap));
            std::vector<std::uint64_t> off;
            const auto r = decider.decide(cap, align, deadline, off);
            if (r == detail::exact_outcome::found) {
                best = std::move(off);
                have_best = true;
                best_height = detail::exact_height(in, best, align);
                return finish(best_height == res.bound ? memplan::status::optimal : memplan::status::feasible,
                              "");
            }
            if (r == detail::exact_outcome::not_found)
                return finish(memplan::status::infeasible,
                              "search exhausted: no placement fits capacity " + std::to_string(cap));
            return finish(memplan::status::no_solution, "time limit reached");
        }

        // Minimisation: greedy upper bound, then decisions at the lower bound
        // and by bisection on [proven lower bound, best height).
        // The project's best heuristic (above) usually starts lower than the
        // search's own greedy, which needs the overlap graph: that one only
        // where the graph is small, or when the heuristic's offsets do not
        // fit the search's units.
        const auto& h = *heuristic;
        const bool aligned = std::all_of(h.offsets.begin(), h.offsets.end(),
                                         [&](Size o) { return static_cast<std::uint64_t>(o) % align == 0; });
        const bool usable = has_solution(h.status) && aligned && h.offsets.size() == problem.items.size();
        if (!usable || in.num_buffers() <= small_instance) {
            best = detail::exact_greedy(in);
            have_best = true;
            best_height = detail::exact_height(in, best, align);
        }
        if (usable && (!have_best || static_cast<std::uint64_t>(h.size) < best_height)) {
            best.assign(in.num_buffers(), 0);
            for (std::size_t k = 0; k < prep.index.size(); ++k)
                best[k] = static_cast<std::uint64_t>(h.offsets[prep.index[k]]) / align;
            have_best = true;
            best_height = detail::exact_height(in, best, align);
        }
        // Large instances: exact windows around the peak, the rest placed
        // around them (see `improve_by_windows`).
        if (windows && best_height > proven_lb && in.num_buffers() >= 2 * first_window_items) {
            std::vector<Size> off(problem.items.size(), Size{0});
            for (std::size_t k = 0; k < prep.index.size(); ++k) off[prep.index[k]] = static_cast<Size>(best[k] * align);
            if (improve_by_windows(problem, off, until.share(windows_share))) {
                for (std::size_t k = 0; k < prep.index.size(); ++k)
                    best[k] = static_cast<std::uint64_t>(off[prep.index[k]]) / align;
                best_height = detail::exact_height(in, best, align);
            }
        }
        std::uint64_t lo = proven_lb, hi = best_height; // the answer lies in [lo, hi] unless a probe timed out
        bool first = true;
        auto within_gap = [&] {
            return static_cast<double>(hi - std::min(hi, proven_lb)) <= gap * static_cast<double>(hi);
        };
        while (lo < hi && clock::now() < deadline && !within_gap()) {
            const std::uint64_t h = first ? lo : lo + (hi - lo) / 2;
            first = false;
            // Each probe gets half of what is left, so a hard height cannot eat it all.
            const auto now = clock::now();
            std::vector<std::uint64_t> off;
            const auto r = decider.decide(h, align, now + (deadline - now) / 2, off);
            if (r == detail::exact_outcome::found) {
                best = std::move(off);
                best_height = detail::exact_height(in, best, align);
                hi = best_height;
            } else if (r == detail::exact_outcome::not_found) {
                lo = proven_lb = h + 1;
            } else {
                lo = h + 1; // unsettled: look higher, without a proof
            }
        }
        const bool proven = best_height <= proven_lb;
        res.bound = static_cast<Size>(std::min(best_height, proven_lb));
        return finish(proven ? memplan::status::optimal : memplan::status::feasible,
                      !proven && within_gap() ? "within the relative gap of the lower bound" : "");
    }

    /// On instances of at least twice `first_window_items` buffers, the
    /// minimisation first improves the heuristics' placement by exact
    /// windows around the peak (below), with `windows_share` of its time.
    bool windows = true;
    static constexpr std::size_t first_window_items = 512;
    /// Minimisation builds the whole search (its overlap graph) only below
    /// this many overlapping pairs (about 8 bytes each, and seconds to build
    /// at 10^7); above, the heuristics and exact windows decide.
    static constexpr std::uint64_t max_search_pairs = 8'000'000;
    /// Up to this many buffers the search's own greedy runs beside the heuristics.
    static constexpr std::size_t small_instance = 5000;
    static constexpr double windows_share = 0.6;
    /// Above `max_search_pairs`, the time the windows leave goes to greedy
    /// passes in randomised orders (`improve_by_restarts`).
    bool restarts = true;
    std::uint64_t restart_seed = 1; ///< the passes' random orders (deterministic for a seed)

    /// First-fit greedy passes (each item at the lowest gap that fits, not
    /// the tightest) in the orders of omnimalloc's greedy allocators, kinds
    /// [`from`, `to`) of: 0 by conflicts other than itself times size, 1 by
    /// size, 2 by conflicts; larger first, ties by size, then by index. On
    /// dense traces the first is often lower than every best-fit order. The
    /// lowest placement replaces `offsets` (true when one was lower; an
    /// empty `offsets` is no placement yet); a pass is not started when the
    /// longest so far would not end by `until`.
    template <class Size>
    bool first_fit_passes(const basic_alloc_problem<Size>& p, std::vector<Size>& offsets,
                          const std::vector<double>& degree, memplan::deadline until, int from = 0,
                          int to = 3) const {
        const Size lb = lower_bound(p);
        detail::lowest_pass<Size> passes(p, offsets, until);
        std::vector<std::size_t> live;
        for (std::size_t i = 0; i < p.items.size(); ++i)
            if (detail::is_live(p.items[i])) live.push_back(i);
        for (int kind = from; kind < to && passes.best() > lb && passes.may_start(); ++kind) {
            auto primary = [&](std::size_t i) {
                const double others = degree[i] - 1;
                const double size = static_cast<double>(p.items[i].size);
                return kind == 0 ? others * size : kind == 1 ? size : others;
            };
            std::vector<std::size_t> order = live;
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                const double ka = primary(a), kb = primary(b);
                if (ka != kb) return ka > kb;
                return p.items[a].size > p.items[b].size;
            });
            passes.run(order, nullptr, true);
        }
        return passes.improved();
    }

    /// Conflict degrees by a sweep: per live item, the live items that
    /// overlap it in time, itself included.
    template <class Size>
    static std::vector<double> conflict_degrees(const basic_alloc_problem<Size>& p) {
        std::vector<std::uint64_t> begins, ends;
        for (const auto& it : p.items)
            if (detail::is_live(it)) {
                begins.push_back(it.begin);
                ends.push_back(it.end);
            }
        std::sort(begins.begin(), begins.end());
        std::sort(ends.begin(), ends.end());
        std::vector<double> degree(p.items.size(), 0.0);
        for (std::size_t i = 0; i < p.items.size(); ++i) {
            const auto& it = p.items[i];
            if (!detail::is_live(it)) continue;
            // The items that begin before i ends, less those that end by the time i begins.
            const auto started = std::lower_bound(begins.begin(), begins.end(), it.end) - begins.begin();
            const auto ended = std::upper_bound(ends.begin(), ends.end(), it.begin) - ends.begin();
            degree[i] = static_cast<double>(started - ended);
        }
        return degree;
    }

    /// Passes that use what time is left, until the height is within `gap`
    /// of the lower bound or too little of `until` is left for another pass
    /// (as long as the longest so far); the lowest placement replaces
    /// `offsets` (true when one was lower). They cycle through:
    ///  - a top-slab repack: every item whose top lies within a fraction
    ///    (1 %, 2 %, 5 %, 10 %, 20 %, 40 %, in turn) of the current height
    ///    is lifted out and placed again by decreasing size (ties at random)
    ///    around the others, which stay where they are. A long-lived item
    ///    stacked high far from the load's peak comes down when what sits
    ///    under it moves;
    ///  - a whole pass by decreasing size, ties in random order;
    ///  - a whole pass by decreasing size times conflict degree (how many
    ///    items overlap it in time: the crowded ones first), with and
    ///    without a 5 % jitter of the key.
    /// The whole passes keep the items of `pinned` (the best exact window,
    /// when one helped) in place.
    template <class Size>
    bool improve_by_restarts(const basic_alloc_problem<Size>& p, std::vector<Size>& offsets,
                             const std::vector<char>& pinned, memplan::deadline until, double rel_gap) const {
        const Size lb = lower_bound(p);
        detail::lowest_pass<Size> passes(p, offsets, until);
        auto close_enough = [&] {
            const Size best = passes.best();
            return static_cast<double>(best - std::min(best, lb)) <= rel_gap * static_cast<double>(best);
        };
        if (passes.best() <= lb || close_enough()) return false;
        const std::vector<std::size_t> by_size = detail::greedy_item_order<alloc_order::by_size_begin>(p);
        const std::vector<double> degree = conflict_degrees(p);
        std::mt19937_64 rng(restart_seed);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        std::vector<double> key(p.items.size(), 0.0);
        std::vector<std::size_t> order;
        std::vector<char> fixed(p.items.size(), 0);
        constexpr std::array<double, 6> slabs{0.01, 0.02, 0.05, 0.1, 0.2, 0.4};
        for (std::uint64_t pass = 0; !close_enough() && passes.may_start(); ++pass) {
            const int kind = static_cast<int>(pass % 4);
            const std::vector<char>* pin = nullptr;
            order.clear();
            if (kind == 0) {
                const double share = slabs[(pass / 4) % slabs.size()];
                const auto floor = static_cast<double>(passes.best()) * (1.0 - share);
                for (std::size_t i = 0; i < p.items.size(); ++i)
                    fixed[i] = !(detail::is_live(p.items[i]) &&
                                 static_cast<double>(offsets[i]) + static_cast<double>(p.items[i].size) > floor);
                for (auto i : by_size)
                    if (!fixed[i]) order.push_back(i);
                pin = &fixed;
            } else {
                order = by_size;
                if (pinned.size() == p.items.size()) pin = &pinned;
            }
            const double jitter = kind == 3 ? 0.05 : 0.0;
            for (auto i : order) {
                const double weight = kind >= 2 ? degree[i] : 1.0;
                key[i] = static_cast<double>(p.items[i].size) * weight * (1.0 + jitter * unit(rng)) * (1.0 + 1e-9 * unit(rng));
            }
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key[a] > key[b]; });
            passes.run(order, pin);
        }
        return passes.improved();
    }

    /// Exact windows (ours, after the "solve windows around the peak and
    /// stitch" idea of the offset-assignment issue): the items live in a
    /// window of time around the peak of the live total, where the lower
    /// bound is attained and a greedy pass loses most, are placed by the
    /// search on the window alone (lifetimes clipped to it); then they are
    /// pinned and greedy passes (by size, ties by start and by length) place
    /// every other item around them. Two items that both meet the window and
    /// overlap in time overlap inside it too, so the pinned items never
    /// collide. Windows double their item count while the search keeps
    /// finishing in its share of the time and while they hold at most half
    /// the items. `offsets` (a valid placement) is replaced by a lower one
    /// found; true when it was.
    /// `best_window` (when given) receives the flags of the items the best
    /// window pinned (empty when no window helped).
    template <class Size>
    bool improve_by_windows(const basic_alloc_problem<Size>& p, std::vector<Size>& offsets,
                            memplan::deadline until, std::vector<char>* best_window = nullptr) const {
        const Size lb = lower_bound(p);
        Size best = placement_height(p, offsets);
        if (best <= lb) return false;
        const detail::time_windows<Size> tw(p);
        const std::uint64_t center = detail::peak_time(p);
        auto tree = detail::make_interval_tree(p);
        std::vector<std::size_t> by_begin = detail::greedy_item_order<alloc_order::by_size_begin>(p);
        std::vector<std::size_t> by_length = detail::greedy_item_order<alloc_order::by_size>(p);
        bool improved = false;
        std::uint64_t last_count = 0;
        for (std::size_t items = first_window_items; 2 * items <= tw.live_items() && !until.expired(); items *= 2) {
            const auto [a, b] = tw.around(center, items);
            const std::size_t count = tw.count(a, b);
            if (count == last_count) continue;
            last_count = count;
            basic_alloc_problem<Size> w;
            w.alignment = p.alignment;
            std::vector<std::size_t> index;
            for (std::size_t i = 0; i < p.items.size(); ++i) {
                auto it = p.items[i];
                if (it.size == 0 || it.begin >= it.end || it.begin >= b || it.end <= a) continue;
                it.begin = std::max(it.begin, a);
                it.end = std::min(it.end, b);
                w.items.push_back(it);
                index.push_back(i);
            }
            // The larger windows that follow get more: this one a third of what is left.
            exact inner;
            inner.windows = false;
            inner.time_limit = until.share(1.0 / 3.0);
            const auto r = inner.place(w);
            if (!has_solution(r.status)) break; // the search ran out of time: larger windows will too
            std::vector<char> pinned(p.items.size(), 0);
            std::vector<Size> trial(p.items.size(), Size{0});
            for (std::size_t k = 0; k < index.size(); ++k) {
                pinned[index[k]] = 1;
                trial[index[k]] = r.offsets[k];
            }
            for (const auto* order : {&by_begin, &by_length}) {
                auto t = trial;
                if (!detail::greedy_pass(p, *order, tree, t, &pinned, until)) continue;
                const Size h = placement_height(p, t);
                if (h < best) {
                    best = h;
                    offsets = std::move(t);
                    improved = true;
                    if (best_window) *best_window = pinned;
                }
            }
            if (best <= lb || r.status != memplan::status::optimal) break;
        }
        return improved;
    }
};

/// The relative gap at which "auto" allocation (the best heuristic, then the
/// exact search) stops: closing the last 0.01 % rarely pays for its time.
inline constexpr double auto_gap = 1e-4;

static_assert(AllocatorLike<exact>);

} // namespace memplan
