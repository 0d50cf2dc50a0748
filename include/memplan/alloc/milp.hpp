// Offset assignment as a MILP (the OLLA / MODeL formulation), solved through
// any `SolverLike` backend.
//
// One offset per live item, one ordering binary per pair of items that
// overlap in time with a big-M disjunction ("i below j" or "j below i"), and
// a peak column bounded below by the load lower bound (the tightening that
// lets GLPK prove optima at all, measured on this project's machines) and above by a greedy height,
// which is also handed over as the warm start. Offsets are continuous: with
// the order fixed the constraints are difference constraints with integral
// data, whose tightest solution (a longest path) is integral and aligned, so
// the placement is rebuilt from the ordering binaries and stays exact.
#pragma once

#include <memplan/alloc/problem.hpp>
#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/core/status.hpp>
#include <memplan/solver/model.hpp>
#include <memplan/solver/solver.hpp>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan {

namespace detail {

template <class Size>
bool milp_is_live(const basic_alloc_item<Size>& it) noexcept {
    return it.size > 0 && it.begin < it.end;
}

/// Pairs of live items that overlap in time: the offset MILP's binaries.
/// O(n log n), without listing them.
template <class Size>
std::uint64_t milp_overlapping_pairs(const basic_alloc_problem<Size>& p) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> live; // (begin, end)
    for (const auto& it : p.items)
        if (milp_is_live(it)) live.push_back({it.begin, it.end});
    std::sort(live.begin(), live.end());
    std::uint64_t pairs = 0;
    for (std::size_t i = 0; i < live.size(); ++i) {
        // Items sorted after i begin at or after it; those beginning before it ends overlap it.
        const auto past = std::lower_bound(live.begin() + static_cast<std::ptrdiff_t>(i) + 1, live.end(),
                                           std::pair<std::uint64_t, std::uint64_t>{live[i].second, 0});
        pairs += static_cast<std::uint64_t>(past - live.begin()) - i - 1;
    }
    return pairs;
}

/// Refuses, before any memory is spent, an offset MILP with more than
/// `max_pairs` binaries: its rows alone would take gigabytes, and no MILP
/// solver closes such a model (the exact search is the tool for it).
template <class Size>
void check_offset_model_size(const basic_alloc_problem<Size>& p, std::uint64_t max_pairs) {
    const auto pairs = milp_overlapping_pairs(p);
    if (pairs <= max_pairs) return;
    const double mb = static_cast<double>(pairs) * 2.0 * 3.0 * 16.0 / 1e6; // two rows of three coefficients a pair
    char est[64];
    std::snprintf(est, sizeof est, "%.0f", mb);
    throw error("alloc", "the offset MILP of " + std::to_string(p.items.size()) + " items would have " +
                             std::to_string(pairs) + " binaries (one per pair overlapping in time) and " +
                             std::to_string(2 * pairs) + " rows, at least " + est +
                             " MB; the limit is " + std::to_string(max_pairs) +
                             " binaries: use the exact search (allocator 'exact' or 'auto') instead");
}

/// Stacking first fit in decreasing size: each item takes the lowest aligned
/// offset free among the placed items that overlap it in time. O(n^2 log n);
/// only a warm start, the real heuristics are in alloc/greedy.hpp.
template <class Size>
std::vector<Size> first_fit_by_size(const basic_alloc_problem<Size>& p) {
    const Size align = p.alignment > 1 ? p.alignment : Size{1};
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < p.items.size(); ++i)
        if (milp_is_live(p.items[i])) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return p.items[a].size > p.items[b].size;
    });
    std::vector<Size> offsets(p.items.size(), 0);
    std::vector<std::size_t> placed;
    std::vector<std::pair<Size, Size>> busy; // [offset, offset + size)
    for (std::size_t i : order) {
        const auto& it = p.items[i];
        busy.clear();
        for (std::size_t j : placed)
            if (it.overlaps_in_time(p.items[j])) busy.push_back({offsets[j], offsets[j] + p.items[j].size});
        std::sort(busy.begin(), busy.end());
        Size at = 0;
        for (const auto& [lo, hi] : busy) {
            if (hi <= at) continue;
            const auto top = checked_add<Size>(at, it.size);
            if (!top) throw error("alloc", "offsets overflow the size type placing item " + std::to_string(i));
            if (*top <= lo) break;
            const auto next = checked_align_up<Size>(hi, align);
            if (!next) throw error("alloc", "offsets overflow the size type placing item " + std::to_string(i));
            at = *next;
        }
        if (!checked_add<Size>(at, it.size))
            throw error("alloc", "offsets overflow the size type placing item " + std::to_string(i));
        offsets[i] = at;
        placed.push_back(i);
    }
    return offsets;
}

/// The load bound with alignment taken into account: the items live at one
/// time sit at distinct aligned offsets, so all but the topmost use their
/// aligned size. Max over time of (sum of aligned sizes - the largest
/// rounding waste among them); equals the load bound without alignment.
template <class Size>
Size aligned_lower_bound(const basic_alloc_problem<Size>& p) {
    const Size align = p.alignment > 1 ? p.alignment : Size{1};
    if (align == 1) return lower_bound(p);
    Size best = 0;
    for (const auto& at : p.items) {
        if (!milp_is_live(at)) continue;
        Size sum = 0, waste = 0; // at at.begin, where the live set is largest locally
        for (const auto& it : p.items)
            if (milp_is_live(it) && it.begin <= at.begin && at.begin < it.end) {
                const Size up = *checked_align_up<Size>(it.size, align);
                const auto s = checked_add<Size>(sum, up);
                if (!s) throw error("alloc", "aligned live sizes overflow the size type at time " + std::to_string(at.begin));
                sum = *s;
                waste = std::max<Size>(waste, static_cast<Size>(up - it.size));
            }
        best = std::max<Size>(best, static_cast<Size>(sum - waste));
    }
    return best;
}

template <class Size>
std::string size_text(Size s) {
    return std::to_string(static_cast<std::uint64_t>(s));
}

} // namespace detail

/// The offset MILP of a problem and how to read a placement back from it.
/// Columns: y[k] (offset of live item items[k] in units of `unit` bytes),
/// then `peak` (in units), then one binary per overlapping pair (1: first
/// item below the second).
template <class Size>
struct offset_milp {
    milp_model model;
    std::vector<std::size_t> items;                       ///< live items, by model position
    std::vector<std::pair<std::size_t, std::size_t>> pairs; ///< positions in `items`, per binary
    std::size_t peak_column = 0;
    std::size_t first_pair_column = 0;
    double unit = 1; ///< bytes per model unit (alignment x gcd of aligned sizes)
};

/// Most binaries (pairs of items overlapping in time) an offset MILP may
/// have: a few hundred MB of model. GLPK and CBC stall far below it already.
inline constexpr std::uint64_t offset_milp_max_pairs = 500'000;

/// Builds the offset MILP of `p` with the peak in [lower, upper] bytes
/// (`upper` >= every live item size). Throws `memplan::error` on a malformed
/// problem, one whose numbers are too large to be exact in doubles, or one
/// with more than `max_pairs` binaries (before building anything).
template <class Size>
offset_milp<Size> make_offset_model(const basic_alloc_problem<Size>& p, Size lower, Size upper,
                                    std::uint64_t max_pairs = offset_milp_max_pairs) {
    validate(p);
    detail::check_offset_model_size(p, max_pairs);
    offset_milp<Size> out;
    const Size align = p.alignment > 1 ? p.alignment : Size{1};
    for (std::size_t i = 0; i < p.items.size(); ++i)
        if (detail::milp_is_live(p.items[i])) out.items.push_back(i);

    // Aligned sizes in units of the alignment; their gcd divides every offset
    // of the longest-path placement, so it can scale the model down too.
    std::vector<Size> rounded(out.items.size());
    Size g = 0;
    for (std::size_t k = 0; k < out.items.size(); ++k) {
        const Size s = p.items[out.items[k]].size;
        rounded[k] = static_cast<Size>(s / align + (s % align != 0 ? 1 : 0));
        g = std::gcd(g, rounded[k]);
    }
    if (g == 0) g = 1;
    constexpr double exact = 9007199254740992.0; // 2^53
    if (static_cast<double>(upper) >= exact)
        throw error("alloc", "heights up to " + detail::size_text(upper) + " bytes are too large for an exact MILP");
    const double unit = static_cast<double>(align) * static_cast<double>(g);
    out.unit = unit;

    auto& m = out.model;
    m.sense = objective_sense::minimize;
    std::vector<double> ub(out.items.size()), q(out.items.size());
    for (std::size_t k = 0; k < out.items.size(); ++k) {
        const Size s = p.items[out.items[k]].size;
        if (s > upper)
            throw error("alloc", "item " + std::to_string(out.items[k]) + " of " + detail::size_text(s) +
                                     " bytes exceeds the height limit " + detail::size_text(upper));
        ub[k] = std::floor(static_cast<double>(upper - s) / unit);
        q[k] = static_cast<double>(rounded[k] / g);
        std::string column_name = "y"; // appended, not `"y" + ...`: GCC 12 warns falsely (-Wrestrict) on that
        column_name += std::to_string(out.items[k]);
        m.add_column(std::move(column_name), column_kind::continuous, 0, ub[k]);
    }
    out.peak_column = m.add_column("peak", column_kind::continuous, static_cast<double>(lower) / unit,
                                   static_cast<double>(upper) / unit, 1.0);
    for (std::size_t k = 0; k < out.items.size(); ++k) {
        const double s = static_cast<double>(p.items[out.items[k]].size) / unit;
        // y + size <= peak
        m.add_le("top" + std::to_string(out.items[k]), {{k, 1.0}, {out.peak_column, -1.0}}, -s);
    }
    out.first_pair_column = m.columns.size();
    for (std::size_t a = 0; a < out.items.size(); ++a)
        for (std::size_t b = a + 1; b < out.items.size(); ++b) {
            if (!p.items[out.items[a]].overlaps_in_time(p.items[out.items[b]])) continue;
            const std::string tag = std::to_string(out.items[a]) + "_" + std::to_string(out.items[b]);
            const std::size_t z = m.add_binary("below" + tag);
            out.pairs.push_back({a, b});
            // z = 1: y_a + q_a <= y_b;  z = 0: y_b + q_b <= y_a. Each M is the
            // largest its left side can be, so the relaxation is as tight as
            // big-M allows.
            const double m1 = ub[a] + q[a], m2 = ub[b] + q[b];
            m.add_le("a" + tag, {{a, 1.0}, {b, -1.0}, {z, m1}}, m1 - q[a]);
            m.add_le("b" + tag, {{b, 1.0}, {a, -1.0}, {z, -m2}}, -q[b]);
        }
    return out;
}

/// The model's column vector for a placement (for a warm start).
template <class Size>
std::vector<double> offset_model_point(const basic_alloc_problem<Size>& p, const offset_milp<Size>& om,
                                       const std::vector<Size>& offsets) {
    std::vector<double> x(om.model.columns.size(), 0.0);
    double peak = 0;
    for (std::size_t k = 0; k < om.items.size(); ++k) {
        const auto i = om.items[k];
        x[k] = static_cast<double>(offsets[i]) / om.unit;
        peak = std::max(peak, static_cast<double>(offsets[i] + p.items[i].size) / om.unit);
    }
    x[om.peak_column] = std::max(peak, om.model.columns[om.peak_column].lower);
    for (std::size_t e = 0; e < om.pairs.size(); ++e)
        x[om.first_pair_column + e] = offsets[om.items[om.pairs[e].first]] < offsets[om.items[om.pairs[e].second]];
    return x;
}

/// The tightest aligned placement that keeps the order the binaries of `x`
/// choose (longest paths); nullopt if that order has a cycle.
template <class Size>
std::optional<std::vector<Size>> offset_model_placement(const basic_alloc_problem<Size>& p, const offset_milp<Size>& om,
                                                        const std::vector<double>& x) {
    const Size align = p.alignment > 1 ? p.alignment : Size{1};
    const std::size_t n = om.items.size();
    std::vector<std::vector<std::size_t>> below(n); // edges lower -> upper
    std::vector<std::size_t> indegree(n, 0);
    for (std::size_t e = 0; e < om.pairs.size(); ++e) {
        auto [a, b] = om.pairs[e];
        if (x[om.first_pair_column + e] < 0.5) std::swap(a, b);
        below[a].push_back(b);
        ++indegree[b];
    }
    std::vector<Size> offsets(p.items.size(), 0);
    std::vector<std::size_t> ready;
    for (std::size_t k = 0; k < n; ++k)
        if (indegree[k] == 0) ready.push_back(k);
    std::size_t done = 0;
    while (!ready.empty()) {
        const std::size_t k = ready.back();
        ready.pop_back();
        ++done;
        const auto i = om.items[k];
        const auto top = detail::checked_align_up<Size>(offsets[i] + p.items[i].size, align);
        if (!top) return std::nullopt;
        for (std::size_t kk : below[k]) {
            auto& o = offsets[om.items[kk]];
            o = std::max(o, *top);
            if (--indegree[kk] == 0) ready.push_back(kk);
        }
    }
    if (done != n) return std::nullopt;
    return offsets;
}

/// What `milp_allocator::solve` reports beyond the allocation result.
template <class Size>
struct milp_alloc_outcome : basic_alloc_result<Size> {
    Size proven_bound = 0;                              ///< best lower bound proven (also in `bound`)
    memplan::status solver_status = memplan::status::error; ///< the backend's own outcome
    std::int64_t nodes = 0;                             ///< branch-and-bound nodes
    double solver_seconds = 0;                          ///< time inside the backend
    bool solver_ran = false;                            ///< false when greedy already met the bound

    double gap() const noexcept {
        return this->size == 0 ? 0.0
                                 : static_cast<double>(this->size - std::min(this->size, proven_bound)) /
                                       static_cast<double>(this->size);
    }
};

/// Exact offset assignment through a MILP backend. Minimises the height;
/// with `problem.capacity > 0` no placement above the capacity is accepted
/// (decision mode). Status: optimal (height proven minimal), feasible (limit
/// hit; the bound is in `solve().proven_bound`), infeasible (with the reason),
/// no_solution, or error (the backend failed; `offsets` then hold the greedy
/// placement when it fits). `lower_bound` is the load bound, as for every
/// allocator.
template <SolverLike S>
struct milp_allocator {
    static constexpr std::string_view name = "milp";
    S solver{};
    solve_options options{};
    /// Larger models are refused with `memplan::error` before anything is built.
    std::uint64_t max_pairs = offset_milp_max_pairs;

    template <class Size>
    basic_alloc_result<Size> place(const basic_alloc_problem<Size>& p) const {
        return static_cast<basic_alloc_result<Size>&&>(solve(p));
    }

    /// As `place`, with the proven bound and the backend's figures.
    template <class Size>
    milp_alloc_outcome<Size> solve(const basic_alloc_problem<Size>& p) const {
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        const memplan::deadline until = options.time_limit.from_now();
        milp_alloc_outcome<Size> r;
        auto finish = [&](memplan::status s, std::string message = {}) {
            r.status = s;
            r.message = std::move(message);
            if (has_solution(s)) r.size = placement_height(p, r.offsets);
            r.bound = r.proven_bound; // the one bound a result reports is the best proven
            r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
            return std::move(r);
        };
        validate(p);
        detail::check_offset_model_size(p, max_pairs);
        const Size lb = lower_bound(p);
        r.bound = r.proven_bound = lb;
        const bool decision = p.capacity > 0;
        if (decision && lb > p.capacity)
            return finish(status::infeasible, "capacity " + detail::size_text(p.capacity) +
                                                  " is below the lower bound " + detail::size_text(lb) +
                                                  " (bytes live at one time)");

        // Alignment can lift the bound well above the load (measured here: the
        // bound on the peak is what lets the search prove anything).
        r.proven_bound = std::max(lb, detail::aligned_lower_bound(p));
        if (decision && r.proven_bound > p.capacity)
            return finish(status::infeasible, "capacity " + detail::size_text(p.capacity) +
                                                  " is below the aligned lower bound " +
                                                  detail::size_text(r.proven_bound) + " (bytes live at one time)");

        std::vector<Size> greedy = detail::first_fit_by_size(p);
        const Size greedy_height = placement_height(p, greedy);
        const bool greedy_fits = !decision || greedy_height <= p.capacity;
        if (greedy_fits && greedy_height <= r.proven_bound) {
            r.offsets = std::move(greedy);
            return finish(status::optimal);
        }
        const Size upper = greedy_fits ? greedy_height : p.capacity;

        auto model = make_offset_model(p, r.proven_bound, upper, max_pairs);
        if (greedy_fits) model.model.incumbent = offset_model_point(p, model, greedy);
        solve_options o = options;
        o.time_limit = until;
        const milp_result res = solver.solve(model.model, o);
        r.solver_ran = true;
        r.solver_status = res.status;
        r.nodes = res.nodes;
        r.solver_seconds = res.seconds;
        if (!std::isnan(res.bound) && (has_solution(res.status) || res.status == status::no_solution)) {
            // Heights are whole bytes: round the bound up, less a hair for floating point.
            const double b = std::ceil(res.bound * model.unit - 1e-6 * std::max(1.0, res.bound * model.unit));
            if (b > static_cast<double>(r.proven_bound)) r.proven_bound = static_cast<Size>(std::min(b, static_cast<double>(upper)));
        }

        std::string note;
        if (has_solution(res.status)) {
            if (auto placed = offset_model_placement(p, model, res.values)) {
                if (!greedy_fits || placement_height(p, *placed) <= greedy_height) r.offsets = std::move(*placed);
            } else {
                note = "the backend's ordering has a cycle; ";
            }
        }
        if (r.offsets.empty() && greedy_fits) r.offsets = std::move(greedy);
        if (!r.offsets.empty()) {
            const Size h = placement_height(p, r.offsets);
            if (decision && h > p.capacity) r.offsets.clear();
            else if (res.status == status::optimal) r.proven_bound = std::max(r.proven_bound, h);
        }
        switch (res.status) {
        case status::optimal:
        case status::feasible:
        case status::no_solution:
            if (r.offsets.empty())
                return finish(status::no_solution, note + "no placement within capacity " +
                                                       detail::size_text(p.capacity) + " found in the time limit");
            return finish(placement_height(p, r.offsets) <= r.proven_bound ? status::optimal : status::feasible, note);
        case status::infeasible:
            if (decision)
                return finish(status::infeasible, "no placement fits in capacity " + detail::size_text(p.capacity) +
                                                      " (" + std::string(S::name) + " proved it; lower bound " +
                                                      detail::size_text(lb) + ")");
            [[fallthrough]];
        default:
            return finish(status::error, std::string(S::name) + ": " + std::string(to_string(res.status)) + ": " + res.message);
        }
    }
};

} // namespace memplan
