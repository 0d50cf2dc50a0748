// The independent validator: checks a plan against a graph under the validity
// rules 1-7 of formats.md §2 and reports every violation it finds.
//
// It shares no liveness or placement code with the planners; it re-derives
// every fact from the graph, the steps and the buffers, so that a planner bug
// cannot hide behind the same bug here. Overlaps (rule 4) are found by a sweep
// over steps with a max-end segment tree over buffer offsets: O(n log n) on a
// valid plan, plus O(log n) per overlapping pair reported on an invalid one.
#pragma once

#include <memplan/graph/graph.hpp>
#include <memplan/schedule/plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace memplan {

/// One broken rule. `rule` is 1-7 as in formats.md §2, or 0 for a structural
/// fault (unknown op or variant, malformed buffer, zero alignment, no steps,
/// a plan that names another graph).
struct violation {
    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

    int rule = 0;
    std::size_t step = npos;   ///< the step at fault (a time point for placements), or npos
    std::size_t buffer = npos; ///< the buffer (or allocation item) at fault, or npos
    std::string tensor;        ///< the tensor at fault, or empty
    std::string message;
};

/// Everything the validator found. Empty means valid.
struct validation_report {
    std::vector<violation> violations;
    /// Collection stopped at check_options::max_violations; there may be more.
    bool truncated = false;

    bool ok() const noexcept { return violations.empty() && !truncated; }

    /// Number of violations of `rule`.
    std::size_t count(int rule) const noexcept {
        return static_cast<std::size_t>(std::count_if(violations.begin(), violations.end(),
                                                      [rule](const violation& v) { return v.rule == rule; }));
    }
    bool has_rule(int rule) const noexcept { return count(rule) > 0; }

    /// One line per violation, "rule 4: step 3: buffers 5 (tensor 'x') and 9
    /// (tensor 'y') overlap in bytes [256, 512)", and a last line when truncated.
    std::string to_string() const {
        std::string s;
        for (const auto& v : violations) {
            s += "rule " + std::to_string(v.rule) + ": ";
            if (v.step != violation::npos) s += "step " + std::to_string(v.step) + ": ";
            s += v.message;
            s += '\n';
        }
        if (truncated)
            s += "stopped after " + std::to_string(violations.size()) +
                 " violations (check_options::max_violations); there may be more\n";
        return s;
    }
};

struct check_options {
    bool allow_backward_recompute = false; ///< let backward and update ops run more than once (rule 1)
    std::size_t max_violations = 1000;     ///< stop collecting after this many; the report says so
};

namespace detail {

/// Collects violations up to a limit and marks the report truncated beyond it.
class violation_sink {
public:
    violation_sink(validation_report& report, std::size_t max) : report_(report), max_(max) {}

    bool full() const noexcept { return report_.truncated; }

    void add(int rule, std::size_t step, std::size_t buffer, std::string tensor, std::string message) {
        if (report_.truncated) return;
        if (report_.violations.size() >= max_) {
            report_.truncated = true;
            return;
        }
        report_.violations.push_back({rule, step, buffer, std::move(tensor), std::move(message)});
    }

private:
    validation_report& report_;
    std::size_t max_;
};

/// Whether v[k] already appears in v[0..k).
template <class T>
bool listed_before(const std::vector<T>& v, std::size_t k) {
    const auto end = v.begin() + static_cast<std::ptrdiff_t>(k);
    return std::find(v.begin(), end, v[k]) != end;
}

template <class Size>
constexpr Size saturating_add(Size a, Size b) noexcept {
    return a > std::numeric_limits<Size>::max() - b ? std::numeric_limits<Size>::max() : static_cast<Size>(a + b);
}

/// Byte ranges active at the current time, keyed by offset. A segment tree over
/// the (known in advance) distinct offsets keeps the largest end below each
/// node, so "every active range meeting [lo, hi)" visits only subtrees that
/// hold one: the ranges need not be disjoint, as they are not on a bad plan.
template <class Size>
class active_ranges {
public:
    explicit active_ranges(std::vector<Size> keys) : keys_(std::move(keys)) {
        width_ = 1;
        while (width_ < keys_.size()) width_ *= 2;
        max_end_.assign(2 * width_, Size{0});
        leaves_.resize(keys_.size());
    }

    /// Adds item `id` occupying [offset, end); `offset` must be one of the keys
    /// and end > offset.
    void insert(std::size_t id, Size offset, Size end) {
        const std::size_t r = rank(offset);
        leaves_[r].push_back({end, id});
        refresh(r);
    }

    void erase(std::size_t id, Size offset) {
        const std::size_t r = rank(offset);
        auto& leaf = leaves_[r];
        for (std::size_t k = 0; k < leaf.size(); ++k)
            if (leaf[k].second == id) {
                leaf[k] = leaf.back();
                leaf.pop_back();
                break;
            }
        refresh(r);
    }

    /// Calls f(id, offset, end) for every active item meeting [lo, hi) until f
    /// returns false. Returns false when stopped early.
    template <class F>
    bool for_each_overlap(Size lo, Size hi, F&& f) const {
        const auto limit = static_cast<std::size_t>(std::lower_bound(keys_.begin(), keys_.end(), hi) - keys_.begin());
        return visit(1, 0, width_, limit, lo, f);
    }

private:
    std::size_t rank(Size offset) const {
        return static_cast<std::size_t>(std::lower_bound(keys_.begin(), keys_.end(), offset) - keys_.begin());
    }

    void refresh(std::size_t r) {
        Size m = 0;
        for (const auto& [end, id] : leaves_[r]) m = std::max(m, end);
        std::size_t node = width_ + r;
        max_end_[node] = m;
        for (node /= 2; node >= 1; node /= 2) max_end_[node] = std::max(max_end_[2 * node], max_end_[2 * node + 1]);
    }

    template <class F>
    bool visit(std::size_t node, std::size_t nlo, std::size_t nhi, std::size_t limit, Size lo, F& f) const {
        if (nlo >= limit || max_end_[node] <= lo) return true;
        if (node >= width_) {
            const std::size_t r = node - width_;
            for (const auto& [end, id] : leaves_[r])
                if (end > lo && !f(id, keys_[r], end)) return false;
            return true;
        }
        const std::size_t mid = nlo + (nhi - nlo) / 2;
        return visit(2 * node, nlo, mid, limit, lo, f) && visit(2 * node + 1, mid, nhi, limit, lo, f);
    }

    std::vector<Size> keys_; // sorted distinct offsets
    std::size_t width_ = 1;
    std::vector<Size> max_end_;                                    // segment tree, leaves at width_ + rank
    std::vector<std::vector<std::pair<Size, std::size_t>>> leaves_; // per offset: (end, id) of active items
};

/// A range of bytes over a half-open interval of time.
template <class Size>
struct swept_item {
    std::size_t id = 0;
    std::uint64_t begin = 0, end = 0; ///< time [begin, end)
    Size offset = 0, size = 0;        ///< bytes [offset, offset + size)
};

/// Calls on_overlap(a, b, time, lo, hi) for every pair of items live at a common
/// time whose byte ranges share [lo, hi); `a` is the one that became live
/// first, `time` is when both are live first. Stops when it returns false.
/// Items with no bytes or no time are skipped; ends saturate instead of wrapping.
template <class Size, class OnOverlap>
void sweep_overlaps(const std::vector<swept_item<Size>>& items, OnOverlap&& on_overlap) {
    std::vector<std::size_t> live;
    live.reserve(items.size());
    for (std::size_t k = 0; k < items.size(); ++k)
        if (items[k].size > 0 && items[k].begin < items[k].end) live.push_back(k);
    if (live.empty()) return;

    std::vector<Size> keys;
    keys.reserve(live.size());
    for (auto k : live) keys.push_back(items[k].offset);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    active_ranges<Size> active(std::move(keys));

    std::vector<std::size_t> by_begin = live, by_end = live;
    std::sort(by_begin.begin(), by_begin.end(), [&](auto a, auto b) { return items[a].begin < items[b].begin; });
    std::sort(by_end.begin(), by_end.end(), [&](auto a, auto b) { return items[a].end < items[b].end; });

    std::size_t next_end = 0;
    for (std::size_t k = 0; k < by_begin.size(); ++k) {
        const auto& x = items[by_begin[k]];
        // Half-open time: an item ending at t is gone before one beginning at t.
        while (next_end < by_end.size() && items[by_end[next_end]].end <= x.begin) {
            const auto& gone = items[by_end[next_end]];
            active.erase(by_end[next_end], gone.offset);
            ++next_end;
        }
        const Size x_end = saturating_add(x.offset, x.size);
        const bool go_on = active.for_each_overlap(x.offset, x_end, [&](std::size_t other, Size o_off, Size o_end) {
            return on_overlap(items[other].id, x.id, x.begin, std::max(o_off, x.offset), std::min(o_end, x_end));
        });
        if (!go_on) return;
        active.insert(by_begin[k], x.offset, x_end);
    }
}

} // namespace detail

/// Checks plan `p` against graph `g` under formats.md §2 rules 1-7 and reports
/// every violation (up to `opt.max_violations`). Never throws for a bad plan;
/// the graph is assumed to pass `validate()`. Read literally, as the format
/// says: a buffer of a graph input or persistent tensor may start at step 0
/// and then counts as present from step 0; zero-byte buffers never overlap
/// but must still be aligned and inside the arena.
template <class Graph, class Plan>
validation_report check_plan(const Graph& g, const Plan& p, check_options opt = {}) {
    using size_type = typename Plan::size_type;
    using id_type = typename Plan::id_type;
    static_assert(std::is_same_v<size_type, typename Graph::size_type> &&
                      std::is_same_v<id_type, typename Graph::id_type>,
                  "the plan and the graph must use the same size and id types");
    constexpr std::size_t npos = violation::npos;

    validation_report report;
    detail::violation_sink sink(report, opt.max_violations);
    const std::size_t n_steps = p.steps.size();
    const std::size_t n_tensors = g.num_tensors();
    const std::size_t n_ops = g.num_ops();
    const auto& bufs = p.buffers;
    auto str = [](auto v) { return std::to_string(v); };

    if (n_steps == 0) {
        sink.add(0, npos, npos, "", "the plan has no steps");
        return report;
    }
    if (p.alignment == 0) sink.add(0, npos, npos, "", "the alignment is 0; it must be at least 1");
    // Names that happen to match in another graph must not pass for a plan of this one.
    if (!p.graph.empty() && p.graph != g.name())
        sink.add(0, npos, npos, "", "the plan is for graph '" + p.graph + "', not for graph '" + g.name() + "'");

    // --- Steps: ops and variants (rule 0) ---
    std::vector<char> op_ok(n_steps, 0), step_ok(n_steps, 0);
    std::vector<size_type> step_workspace(n_steps, 0);
    auto op_name = [&](std::size_t i) { return "op '" + g.op(p.steps[i].op).name + "'"; };
    for (std::size_t i = 0; i < n_steps; ++i) {
        const auto& st = p.steps[i];
        if (st.op >= n_ops) {
            sink.add(0, i, npos, "", "names op id " + str(st.op) + " which does not exist");
            continue;
        }
        op_ok[i] = 1;
        const auto& op = g.op(st.op);
        if (op.has_variants()) {
            if (!st.has_variant()) {
                sink.add(0, i, npos, "", op_name(i) + " has " + str(op.variants.size()) +
                                             " variants but the step names none");
                continue;
            }
            if (st.variant >= op.variants.size()) {
                sink.add(0, i, npos, "", op_name(i) + " has no variant #" + str(st.variant) + " (it has " +
                                             str(op.variants.size()) + ")");
                continue;
            }
            step_workspace[i] = op.variants[st.variant].workspace;
        } else {
            if (st.has_variant()) {
                sink.add(0, i, npos, "", op_name(i) + " has no variants but the step names variant #" +
                                             str(st.variant));
                continue;
            }
            step_workspace[i] = op.workspace;
        }
        step_ok[i] = 1;
    }

    // --- Graph facts, derived here rather than borrowed ---
    std::vector<char> produced(n_tensors, 0), is_output(n_tensors, 0);
    for (const auto& op : g.ops())
        for (auto t : op.outputs) produced[t] = 1;
    for (auto t : g.outputs())
        if (t < n_tensors) is_output[t] = 1;
    auto tname = [&](id_type t) { return t < n_tensors ? g.tensor(t).name : "#" + std::to_string(t); };
    auto may_start_at_zero = [&](id_type t) { return !produced[t] || g.tensor(t).persistent; };
    auto produces = [&](std::size_t i, id_type t) {
        if (!op_ok[i]) return false;
        const auto& outs = g.op(p.steps[i].op).outputs;
        return std::find(outs.begin(), outs.end(), t) != outs.end();
    };
    auto label = [&](std::size_t b) {
        const auto& x = bufs[b];
        if (x.is_workspace()) return str(b) + " (workspace of step " + str(x.step) + ")";
        return str(b) + " (tensor '" + tname(x.tensor) + "')";
    };
    auto describe = [&](std::size_t b) { return "buffer " + label(b); };
    auto buffer_tensor = [&](std::size_t b) { return bufs[b].is_workspace() ? std::string() : tname(bufs[b].tensor); };

    // --- Buffers: structure (rule 0) ---
    std::vector<char> buf_ok(bufs.size(), 0);
    for (std::size_t b = 0; b < bufs.size(); ++b) {
        const auto& x = bufs[b];
        if (x.is_workspace()) {
            if (x.step >= n_steps) {
                sink.add(0, npos, b, "", describe(b) + " serves a step that does not exist (the plan has " +
                                             str(n_steps) + " steps)");
                continue;
            }
            if (x.first != x.step || x.last != x.step) {
                sink.add(0, x.step, b, "", describe(b) + " is live on steps " + str(x.first) + ".." + str(x.last) +
                                               "; a workspace lives on its step only");
                continue;
            }
            if (x.has_alias())
                sink.add(0, x.step, b, "", describe(b) + " claims an in-place alias; only tensor buffers may");
        } else {
            if (x.tensor >= n_tensors) {
                sink.add(0, npos, b, "", "buffer " + str(b) + " names tensor id " + str(x.tensor) +
                                             " which does not exist");
                continue;
            }
            if (x.has_alias() && x.alias >= n_tensors) {
                sink.add(0, x.first, b, tname(x.tensor), describe(b) + " claims an alias of tensor id " +
                                                             str(x.alias) + " which does not exist");
                continue;
            }
            if (x.first > x.last) {
                sink.add(0, npos, b, tname(x.tensor), describe(b) + " has first step " + str(x.first) +
                                                          " after its last step " + str(x.last));
                continue;
            }
            if (x.last >= n_steps) {
                sink.add(0, npos, b, tname(x.tensor), describe(b) + " is live until step " + str(x.last) +
                                                          " but the plan has " + str(n_steps) + " steps");
                continue;
            }
        }
        buf_ok[b] = 1;
    }

    // Sound tensor buffers of each tensor, sorted by first step, with the
    // running maximum of their last steps (answers "produced before i and
    // still live at i" by one binary search).
    std::vector<std::vector<std::size_t>> of_tensor(n_tensors);
    for (std::size_t b = 0; b < bufs.size(); ++b)
        if (buf_ok[b] && !bufs[b].is_workspace()) of_tensor[bufs[b].tensor].push_back(b);
    std::vector<std::vector<std::size_t>> max_last(n_tensors);
    for (std::size_t t = 0; t < n_tensors; ++t) {
        auto& list = of_tensor[t];
        std::stable_sort(list.begin(), list.end(), [&](auto a, auto b) { return bufs[a].first < bufs[b].first; });
        std::size_t m = 0;
        for (auto b : list) max_last[t].push_back(m = std::max(m, bufs[b].last));
    }

    // --- Rule 1: every op runs; backward and update ops exactly once ---
    {
        std::vector<std::size_t> runs(n_ops, 0), second_run(n_ops, npos);
        for (std::size_t i = 0; i < n_steps; ++i)
            if (op_ok[i] && ++runs[p.steps[i].op] == 2) second_run[p.steps[i].op] = i;
        for (std::size_t o = 0; o < n_ops; ++o) {
            const auto& op = g.op(static_cast<id_type>(o));
            if (runs[o] == 0) {
                sink.add(1, npos, npos, "", "op '" + op.name + "' never runs");
            } else if (runs[o] > 1 && op.phase != phase::forward && !opt.allow_backward_recompute) {
                sink.add(1, second_run[o], npos, "",
                         std::string(to_string(op.phase)) + " op '" + op.name + "' runs " + str(runs[o]) +
                             " times; only forward ops may be recomputed");
            }
        }
    }

    // --- Rule 2: inputs were produced earlier and are still live ---
    auto available = [&](id_type t, std::size_t i) {
        const auto& list = of_tensor[t];
        const auto produced_before = static_cast<std::size_t>(
            std::partition_point(list.begin(), list.end(), [&](auto b) { return bufs[b].first < i; }) - list.begin());
        if (produced_before > 0 && max_last[t][produced_before - 1] >= i) return true;
        // Graph inputs and persistent tensors are there before step 0.
        return i == 0 && !list.empty() && bufs[list.front()].first == 0 && may_start_at_zero(t);
    };
    for (std::size_t i = 0; i < n_steps && !sink.full(); ++i) {
        if (!op_ok[i]) continue;
        const auto& ins = g.reads_of(p.steps[i].op, p.steps[i].variant);
        for (std::size_t k = 0; k < ins.size(); ++k) {
            const id_type t = ins[k];
            if (detail::listed_before(ins, k)) continue; // read twice by one op: check once
            if (!available(t, i))
                sink.add(2, i, npos, tname(t), op_name(i) + " reads tensor '" + tname(t) +
                                                   "' but no buffer of it produced before this step is live here");
        }
    }

    // --- Rule 3: outputs get exactly one fresh buffer; buffers start where produced ---
    {
        std::vector<std::vector<std::size_t>> starts_at(n_steps);
        for (std::size_t b = 0; b < bufs.size(); ++b)
            if (buf_ok[b] && !bufs[b].is_workspace()) starts_at[bufs[b].first].push_back(b);
        std::vector<std::size_t> fresh(n_tensors, 0);
        for (std::size_t i = 0; i < n_steps && !sink.full(); ++i) {
            if (!op_ok[i]) continue;
            for (auto b : starts_at[i]) ++fresh[bufs[b].tensor];
            const auto& outs = g.op(p.steps[i].op).outputs;
            for (std::size_t k = 0; k < outs.size(); ++k) {
                const id_type t = outs[k];
                if (detail::listed_before(outs, k)) continue;
                if (fresh[t] != 1)
                    sink.add(3, i, npos, tname(t), op_name(i) + " produces tensor '" + tname(t) + "' but " +
                                                       (fresh[t] == 0 ? std::string("no") : str(fresh[t])) +
                                                       " buffers of it start at this step");
            }
            for (auto b : starts_at[i]) fresh[bufs[b].tensor] = 0;
        }
        for (std::size_t b = 0; b < bufs.size() && !sink.full(); ++b) {
            const auto& x = bufs[b];
            if (!buf_ok[b] || x.is_workspace()) continue;
            if (produces(x.first, x.tensor) || (x.first == 0 && may_start_at_zero(x.tensor))) continue;
            std::string why = op_ok[x.first] ? ", whose " + op_name(x.first) + " does not produce it"
                                             : ", which runs no valid op";
            sink.add(3, x.first, b, tname(x.tensor), describe(b) + " starts at step " + str(x.first) + why);
        }
    }

    // --- Rule 4: alias claims, then no two live buffers share a byte ---
    std::vector<std::size_t> alias_partner(bufs.size(), npos);
    for (std::size_t b = 0; b < bufs.size() && !sink.full(); ++b) {
        const auto& y = bufs[b];
        if (!buf_ok[b] || y.is_workspace() || !y.has_alias()) continue;
        const std::size_t s = y.first;
        if (!op_ok[s]) continue; // rule 0 already; the claim cannot be honoured
        const auto& op = g.op(p.steps[s].op);
        const std::pair<id_type, id_type> pair{y.alias, y.tensor};
        const std::string claim = describe(b) + " claims to take over tensor '" + tname(y.alias) + "' in place";
        if (std::find(op.inplace.begin(), op.inplace.end(), pair) == op.inplace.end()) {
            sink.add(4, s, b, tname(y.tensor), claim + ", but " + op_name(s) + " declares no such in-place pair");
            continue;
        }
        std::size_t same_offset = npos, live_here = npos;
        for (auto c : of_tensor[y.alias]) {
            const auto& x = bufs[c];
            if (x.first > s || x.last < s) continue;
            live_here = c;
            if (x.offset != y.offset) continue;
            same_offset = c;
            if (x.last == s) {
                alias_partner[b] = c;
                break;
            }
        }
        if (alias_partner[b] != npos) continue;
        if (same_offset != npos)
            sink.add(4, s, b, tname(y.tensor), claim + ", but " + describe(same_offset) +
                                                   " is still live after this step (until step " +
                                                   str(bufs[same_offset].last) + ")");
        else if (live_here != npos)
            sink.add(4, s, b, tname(y.tensor), claim + ", but " + describe(live_here) + " is at offset " +
                                                   str(bufs[live_here].offset) + ", not " + str(y.offset));
        else
            sink.add(4, s, b, tname(y.tensor), claim + ", but no buffer of it is live at this step");
    }
    if (!sink.full()) {
        std::vector<detail::swept_item<size_type>> items;
        items.reserve(bufs.size());
        for (std::size_t b = 0; b < bufs.size(); ++b)
            if (buf_ok[b])
                items.push_back({b, static_cast<std::uint64_t>(bufs[b].first),
                                 static_cast<std::uint64_t>(bufs[b].last) + 1, bufs[b].offset, bufs[b].bytes});
        detail::sweep_overlaps(items, [&](std::size_t a, std::size_t b, std::uint64_t time, size_type lo,
                                          size_type hi) {
            if (alias_partner[a] == b || alias_partner[b] == a) return true;
            if (a > b) std::swap(a, b);
            sink.add(4, static_cast<std::size_t>(time), a, buffer_tensor(a),
                     "buffers " + label(a) + " and " + label(b) + " overlap in bytes [" + str(lo) + ", " + str(hi) +
                         ")");
            return !sink.full();
        });
    }

    // --- Rule 5: alignment, size, arena bound ---
    for (std::size_t b = 0; b < bufs.size() && !sink.full(); ++b) {
        const auto& x = bufs[b];
        if (!buf_ok[b]) continue;
        const std::size_t at = x.is_workspace() ? x.step : x.first;
        if (p.alignment > 0 && x.offset % p.alignment != 0)
            sink.add(5, at, b, buffer_tensor(b), describe(b) + " is at offset " + str(x.offset) +
                                                     ", not a multiple of the alignment " + str(p.alignment));
        if (!x.is_workspace()) {
            const size_type need = g.tensor(x.tensor).bytes;
            if (x.bytes < need)
                sink.add(5, at, b, buffer_tensor(b), describe(b) + " has " + str(x.bytes) + " bytes; the tensor has " +
                                                         str(need));
        } else if (step_ok[x.step] && x.bytes < step_workspace[x.step]) {
            sink.add(5, at, b, "", describe(b) + " has " + str(x.bytes) + " bytes; " + op_name(x.step) + " needs " +
                                       str(step_workspace[x.step]));
        }
        if (x.bytes > p.arena_bytes || x.offset > p.arena_bytes - x.bytes)
            sink.add(5, at, b, buffer_tensor(b), describe(b) + " spans offset " + str(x.offset) + " + " +
                                                     str(x.bytes) + " bytes, past the arena of " +
                                                     str(p.arena_bytes) + " bytes");
    }

    // --- Rule 6: persistent tensors and graph outputs live at the last step ---
    {
        const std::size_t last = n_steps - 1;
        std::vector<char> live_at_end(n_tensors, 0);
        for (std::size_t b = 0; b < bufs.size(); ++b)
            if (buf_ok[b] && !bufs[b].is_workspace() && bufs[b].last == last) live_at_end[bufs[b].tensor] = 1;
        for (std::size_t t = 0; t < n_tensors && !sink.full(); ++t) {
            const auto& tensor = g.tensor(static_cast<id_type>(t));
            if ((!tensor.persistent && !is_output[t]) || live_at_end[t]) continue;
            sink.add(6, last, npos, tensor.name,
                     std::string(tensor.persistent ? "persistent tensor '" : "graph output '") + tensor.name +
                         "' has no buffer live at the last step");
        }
    }

    // --- Rule 7: steps that need scratch memory have a workspace buffer ---
    // Its size is rule 5's business; here only its presence counts.
    {
        std::vector<char> has_workspace(n_steps, 0);
        for (std::size_t b = 0; b < bufs.size(); ++b)
            if (buf_ok[b] && bufs[b].is_workspace()) has_workspace[bufs[b].step] = 1;
        for (std::size_t i = 0; i < n_steps && !sink.full(); ++i)
            if (step_ok[i] && step_workspace[i] > 0 && !has_workspace[i])
                sink.add(7, i, npos, "", op_name(i) + " needs " + str(step_workspace[i]) +
                                             " bytes of workspace but no workspace buffer serves this step");
    }
    return report;
}

} // namespace memplan
