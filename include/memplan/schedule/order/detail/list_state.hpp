// The state of a list scheduler that builds an order one op at a time and
// knows, exactly as liveness.hpp counts it, the bytes live at the step an op
// would take and the bytes carried past it. Steps can be undone, which is
// what a lookahead needs.
//
// Without recomputation a tensor's buffer depends only on which ops have run,
// so the state is a set: readers left per tensor, predecessors left per op,
// and the bytes carried from one step to the next.
#pragma once

#include <memplan/graph/validate.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <unordered_set>
#include <vector>

namespace memplan::detail {

template <class Graph>
class list_state {
public:
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;

    /// Precondition: `g` passed `validate`.
    explicit list_state(const Graph& g)
        : inputs_(g.num_ops()), succ_(g.num_ops()), pairs_(g.num_ops()), out_bytes_(g.num_ops(), 0),
          dead_out_(g.num_ops(), 0), ws_(g.num_ops(), 0), preds_left_(g.num_ops(), 0),
          readers_left_(g.num_tensors(), 0), must_(g.num_tensors(), 0), bytes_(g.num_tensors(), 0),
          done_(g.num_ops(), 0) {
        const graph_index<Graph> index(g);
        for (auto t : g.outputs()) must_[t] = 1;
        for (std::size_t t = 0; t < g.num_tensors(); ++t) {
            const auto& x = g.tensor(static_cast<id_type>(t));
            bytes_[t] = x.bytes;
            if (x.persistent) must_[t] = 1;
        }
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto id = static_cast<id_type>(o);
            const auto& op = g.op(id);
            std::unordered_set<id_type> seen, preds;
            for (auto t : op.inputs)
                if (seen.insert(t).second) {
                    inputs_[o].push_back(t);
                    ++readers_left_[t];
                    const auto p = index.producer[t];
                    if (p != Graph::npos && preds.insert(p).second) succ_[p].push_back(id);
                }
            preds_left_[o] = preds.size();
            ws_[o] = g.workspace_of(id, default_variant(g, id));
        }
        for (std::size_t o = 0; o < g.num_ops(); ++o) {
            const auto& op = g.op(static_cast<id_type>(o));
            for (auto t : op.outputs) {
                out_bytes_[o] += bytes_[t];
                if (readers_left_[t] == 0 && !must_[t]) dead_out_[o] += bytes_[t];
            }
            // The sharing liveness.hpp grants when this step is x's last use;
            // pairs it can never grant are dropped here.
            for (auto [x, y] : op.inplace)
                if (!must_[x] && bytes_[x] >= bytes_[y] && x != y) pairs_[o].push_back({x, std::min(bytes_[x], bytes_[y])});
        }
        for (std::size_t t = 0; t < g.num_tensors(); ++t)
            if (index.is_graph_input(static_cast<id_type>(t))) {
                carried_ += bytes_[t];
                if (readers_left_[t] == 0 && !must_[t]) unread_inputs_ += bytes_[t];
            }
        for (std::size_t o = 0; o < g.num_ops(); ++o)
            if (preds_left_[o] == 0) ready_.push_back(static_cast<id_type>(o));
    }

    const std::vector<id_type>& ready() const noexcept { return ready_; }
    std::size_t steps() const noexcept { return log_.size(); }
    bool finished() const noexcept { return ready_.empty(); }
    /// Bytes carried into the next step (live at it whatever op runs).
    size_type carried() const noexcept { return carried_; }
    /// Largest step so far.
    size_type peak() const noexcept { return peak_; }

    /// Bytes live at the step `o` would take if it ran next.
    size_type step_bytes(id_type o) const noexcept {
        size_type share = 0;
        for (const auto& [x, b] : pairs_[o])
            if (readers_left_[x] == 1) share += b;
        return static_cast<size_type>(carried_ + out_bytes_[o] + ws_[o] - share);
    }

    /// Bytes carried past that step.
    size_type after_bytes(id_type o) const noexcept {
        size_type freed = dead_out_[o];
        for (auto t : inputs_[o])
            if (readers_left_[t] == 1 && !must_[t]) freed += bytes_[t];
        if (log_.empty()) freed += unread_inputs_;
        return static_cast<size_type>(carried_ + out_bytes_[o] - freed);
    }

    /// Runs ready op `o` next.
    void apply(id_type o) {
        const auto at = std::find(ready_.begin(), ready_.end(), o);
        undo_entry u{o, static_cast<std::size_t>(at - ready_.begin()), 0, carried_, peak_};
        peak_ = std::max(peak_, step_bytes(o));
        carried_ = after_bytes(o);
        *at = ready_.back();
        ready_.pop_back();
        for (auto t : inputs_[o]) --readers_left_[t];
        for (auto v : succ_[o])
            if (--preds_left_[v] == 0) {
                ready_.push_back(v);
                ++u.added;
            }
        done_[o] = 1;
        log_.push_back(u);
    }

    /// Takes back the last `apply`.
    void undo() {
        const undo_entry u = log_.back();
        log_.pop_back();
        done_[u.op] = 0;
        ready_.resize(ready_.size() - u.added);
        for (auto v : succ_[u.op]) ++preds_left_[v];
        for (auto t : inputs_[u.op]) ++readers_left_[t];
        if (u.index == ready_.size()) {
            ready_.push_back(u.op);
        } else {
            ready_.push_back(ready_[u.index]);
            ready_[u.index] = u.op;
        }
        carried_ = u.carried;
        peak_ = u.peak;
    }

    /// The ops run so far, in order.
    std::vector<id_type> order() const {
        std::vector<id_type> v;
        v.reserve(log_.size());
        for (const auto& u : log_) v.push_back(u.op);
        return v;
    }

private:
    struct undo_entry {
        id_type op;
        std::size_t index; ///< where op sat in ready_
        std::size_t added; ///< ops it made ready (at the back of ready_)
        size_type carried;
        size_type peak;
    };

    std::vector<std::vector<id_type>> inputs_; ///< distinct inputs per op
    std::vector<std::vector<id_type>> succ_;   ///< distinct successor ops per op
    std::vector<std::vector<std::pair<id_type, size_type>>> pairs_;
    std::vector<size_type> out_bytes_, dead_out_, ws_;
    std::vector<std::size_t> preds_left_, readers_left_;
    std::vector<char> must_;
    std::vector<size_type> bytes_;
    std::vector<char> done_;
    std::vector<id_type> ready_;
    std::vector<undo_entry> log_;
    size_type carried_ = 0, unread_inputs_ = 0, peak_ = 0;
};

} // namespace memplan::detail
