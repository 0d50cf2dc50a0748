// The graph facts every rematerialization planner needs (remat_context),
// computed once, and the rule that turns a choice (remat/choice.hpp) into a
// schedule with recomputation. Every planner shares them; they differ only
// in how they choose.
//
// The base order runs the forward ops as listed, then the backward ops as
// listed with each optimizer update moved to right after its gradient is
// complete (its gradient dies at once instead of surviving the backward).
// A tensor that is not kept dies after its last forward read (as does every
// forward tensor no later op reads, unless the choice keeps it as a
// checkpoint for recomputations to start from); when an op of the backward part needs
// it, its producer runs again just before, after the
// producers of any of its own inputs that are gone too (Chen et al. 2016's
// segment recomputation, on any DAG). A recomputed tensor then lives until
// its last read, unless the choice marks it "per use": then it dies right
// after the backward op it was recomputed for and runs again for the next
// reader (the multi-level recomputation of Rotor and Checkmate, which trades
// compute for a shorter life of large tensors).
//
// A graph with no backward part (inference, any forward-only DAG) uses the
// general form of the same rule (Checkmate's space: any tensor recomputed
// for any later reader): every forward tensor may be dropped. Dropped, it
// dies after its first reader (or after the reader the choice names in
// `drop_after`: its first life may serve the readers before a peak) and
// runs again (after its own gone inputs) before each later reader, as a
// backward reader's tensor does; kept, it stays until its last read, a
// recomputation's included, so that kept tensors are the checkpoints
// recomputations start from.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/remat/choice.hpp>
#include <memplan/remat/place.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace memplan {

/// The graph facts every rematerialization planner needs, computed once.
template <class Graph>
class remat_context {
public:
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    using schedule_type = basic_schedule<id_type>;

    explicit remat_context(const Graph& g) : g_(g), index_(g) {
        validate(g);
        if (g.num_ops() == 0) throw error("remat", "graph '" + g.name() + "' has no ops");
        const std::size_t n = g.num_ops();
        // Forward ops as listed, then the rest with updates as early as possible.
        std::vector<char> placed(n, 0);
        std::vector<char> ready_tensor(g.num_tensors(), 0);
        for (std::size_t t = 0; t < g.num_tensors(); ++t) ready_tensor[t] = index_.is_graph_input(static_cast<id_type>(t));
        auto place = [&](std::size_t o) {
            placed[o] = 1;
            order_.push_back(static_cast<id_type>(o));
            for (auto t : g.op(static_cast<id_type>(o)).outputs) ready_tensor[t] = 1;
        };
        // An update overwrites its persistent inputs (the parameter and its
        // optimizer state) where they are, so it waits for every other op
        // that reads them: a layer's data gradient reads the weight too.
        auto ready = [&](std::size_t o) {
            const auto& op = g.op(static_cast<id_type>(o));
            for (auto t : op.inputs) {
                if (!ready_tensor[t]) return false;
                if (op.phase == phase::update && g.tensor(t).persistent)
                    for (auto c : index_.consumers[t])
                        if (!placed[c] && g.op(c).phase != phase::update) return false;
            }
            return true;
        };
        for (std::size_t o = 0; o < n; ++o)
            if (g.op(static_cast<id_type>(o)).phase == phase::forward && ready(o)) place(o);
        boundary_ = order_.size();
        std::vector<std::size_t> updates;
        for (std::size_t o = 0; o < n; ++o)
            if (!placed[o] && g.op(static_cast<id_type>(o)).phase == phase::update) updates.push_back(o);
        auto flush_updates = [&] {
            for (auto u : updates)
                if (!placed[u] && ready(u)) place(u);
        };
        // Ops whose every output feeds only updates (weight gradients: a
        // convolution's backward-filter, say) run as soon as they are ready:
        // they are often the last reader of a forward activation, which then
        // dies before the data gradient of the same layer is allocated.
        std::vector<char> feeds_updates(n, 0), graph_output(g.num_tensors(), 0);
        for (auto t : g.outputs()) graph_output[t] = 1;
        for (std::size_t o = 0; o < n; ++o) {
            const auto& op = g.op(static_cast<id_type>(o));
            if (op.phase == phase::forward || op.phase == phase::update || op.outputs.empty()) continue;
            bool only = true;
            for (auto t : op.outputs) {
                const auto& cs = index_.consumers[t];
                only = only && !cs.empty() && !graph_output[t];
                for (auto c : cs) only = only && g.op(c).phase == phase::update;
            }
            feeds_updates[o] = only;
        }
        auto flush_weight_gradients = [&] {
            for (std::size_t o = 0; o < n; ++o)
                if (feeds_updates[o] && !placed[o] && ready(o)) place(o);
        };
        flush_updates();
        for (std::size_t o = 0; o < n; ++o) {
            if (placed[o] || g.op(static_cast<id_type>(o)).phase == phase::update) continue;
            place(o);
            flush_weight_gradients();
            flush_updates();
        }
        for (std::size_t o = 0; o < n; ++o)
            if (!placed[o]) place(o); // listed order is topological: nothing is left unready
        // Droppable: made by a forward op, neither persistent nor a graph
        // output, and read by some op after the forward part.
        droppable_.assign(g.num_tensors(), 0);
        std::vector<char> is_output(g.num_tensors(), 0);
        for (auto t : g.outputs()) is_output[t] = 1;
        pos_.assign(n, 0);
        auto& pos = pos_;
        for (std::size_t i = 0; i < n; ++i) pos[order_[i]] = i;
        forward_temp_.assign(g.num_tensors(), 0);
        first_read_.assign(g.num_tensors(), n);
        for (std::size_t t = 0; t < g.num_tensors(); ++t) {
            const auto p = index_.producer[t];
            if (p == Graph::npos || g.op(p).phase != phase::forward || g.tensor(static_cast<id_type>(t)).persistent ||
                is_output[t])
                continue;
            forward_temp_[t] = 1;
            for (auto c : index_.consumers[t]) first_read_[t] = std::min(first_read_[t], pos[c]);
            if (general()) {
                // No backward part: every forward temporary. Kept, it stays
                // until its last read, recomputations' reads included (a
                // checkpoint they start from); dropped, it dies after its
                // first reader, and whatever reads it later makes it again.
                droppable_[t] = 1;
            } else {
                for (auto c : index_.consumers[t])
                    if (pos[c] >= boundary_) droppable_[t] = 1;
            }
        }
        base_cost_ = schedule_cost(g, default_schedule(g));
        for (std::size_t o = 0; o < n; ++o) {
            const auto& op = g.op(static_cast<id_type>(o));
            double c = op.variants.empty() ? op.cost : op.variants.front().cost;
            for (const auto& v : op.variants) c = std::min(c, v.cost);
            fastest_cost_ += c;
        }
        const auto [bytes, op] = schedule_free_lower_bound_and_op(g_, index_);
        min_memory_ = {bytes, op == Graph::npos ? std::string() : g_.op(op).name};
    }

    const Graph& graph() const noexcept { return g_; }
    const graph_index<Graph>& index() const noexcept { return index_; }
    /// Every op once: the forward part, then backward with early updates.
    const std::vector<id_type>& base_order() const noexcept { return order_; }
    /// Position in base_order() of the first op after the forward part.
    std::size_t boundary() const noexcept { return boundary_; }
    /// The graph has no backward part (inference, or any forward-only DAG):
    /// a dropped tensor dies after its first reader and runs again for each
    /// later one (see the file comment).
    bool general() const noexcept { return boundary_ == order_.size(); }
    bool droppable(id_type t) const { return droppable_[t] != 0; }
    /// A forward temporary that no backward op reads, on a graph with a
    /// backward part: it may be kept as a checkpoint (remat_choice::checkpoint).
    bool checkpointable(id_type t) const { return !general() && forward_temp_[t] && !droppable_[t]; }
    /// Cost of the store-all schedule: every op once, default variants.
    double base_cost() const noexcept { return base_cost_; }
    /// Every op once, each as its fastest variant: no plan costs less.
    double fastest_cost() const noexcept { return fastest_cost_; }

    /// Keep everything; default variants.
    remat_choice<Graph> keep_all() const {
        remat_choice<Graph> c;
        c.keep.assign(g_.num_tensors(), 1);
        c.variant.resize(g_.num_ops());
        for (std::size_t o = 0; o < g_.num_ops(); ++o) c.variant[o] = default_variant(g_, static_cast<id_type>(o));
        return c;
    }

    /// The schedule of a choice (see the file comment). Throws when a
    /// dropped tensor would need a non-forward op to run again (only
    /// droppable tensors may be dropped).
    schedule_type schedule_of(const remat_choice<Graph>& c) const {
        check_choice(c);
        schedule_type s;
        s.reserve(order_.size() + order_.size() / 2);
        std::vector<char> avail(g_.num_tensors(), 0);
        for (std::size_t t = 0; t < g_.num_tensors(); ++t) avail[t] = index_.is_graph_input(static_cast<id_type>(t));
        // Per-use tensors, and what was recomputed only to make them, are
        // gone once the backward op they were made for has run.
        std::vector<id_type> expire;
        auto emit = [&](id_type o) {
            s.push_back({o, c.variant[o]});
            for (auto t : g_.op(o).outputs) avail[t] = 1;
        };
        struct frame {
            id_type op;
            std::size_t next; ///< next read to check
            bool per_use;     ///< runs to make a per-use tensor (directly or through its inputs)
        };
        // Explicit stack: chains of dropped tensors can be thousands long.
        std::vector<frame> stack;
        auto ensure_reads = [&](id_type root) {
            stack.clear();
            stack.push_back({root, 0, false});
            while (!stack.empty()) {
                auto& f = stack.back();
                const auto& reads = g_.reads_of(f.op, c.variant[f.op]);
                if (f.next < reads.size()) {
                    const auto t = reads[f.next++];
                    if (c.is_per_use(t)) expire.push_back(t);
                    if (avail[t]) continue;
                    const auto p = index_.producer[t];
                    if (p == Graph::npos || g_.op(p).phase != phase::forward)
                        throw error("remat", "tensor '" + g_.tensor(t).name + "' is gone when op '" +
                                                 g_.op(f.op).name + "' reads it, and only forward ops may run again");
                    const bool chain = f.per_use || c.is_per_use(t);
                    stack.push_back({p, 0, chain});
                    continue;
                }
                const frame done = f;
                stack.pop_back();
                if (stack.empty()) break; // the root is emitted by the caller
                emit(done.op);
                if (done.per_use)
                    for (auto t : g_.op(done.op).outputs)
                        if (forward_temp_[t] && !(droppable_[t] && c.keep[t]) && !c.is_checkpoint(t))
                            expire.push_back(t);
            }
        };
        const bool any_dag = general();
        for (std::size_t i = 0; i < order_.size(); ++i) {
            if (i == boundary_)
                for (std::size_t t = 0; t < g_.num_tensors(); ++t)
                    if (forward_temp_[t] && (droppable_[t] ? !c.keep[t] : !c.is_checkpoint(t))) avail[t] = 0;
            const auto o = order_[i];
            if (i >= boundary_ || any_dag) ensure_reads(o);
            emit(o);
            if (any_dag) { // a dropped tensor's first life ends with its first reader, or where named
                for (auto t : g_.reads_of(o, c.variant[o]))
                    if (droppable_[t] && !c.keep[t] && first_life_end(c, t) == i) avail[t] = 0;
                for (auto t : g_.op(o).outputs)
                    if (droppable_[t] && !c.keep[t] && first_life_end(c, t) == i) avail[t] = 0;
            }
            for (auto t : expire) avail[t] = 0;
            expire.clear();
        }
        return s;
    }

    /// The store-all schedule (everything kept, default variants) placed by
    /// the best heuristic with `alignment`: what store_all and budgets in
    /// percent of its arena start from. Made once per alignment and kept
    /// with the context (and its copies).
    const planned_of<Graph>& store_all_placement(std::uint64_t alignment) const {
        const std::lock_guard lock(cache_->mutex);
        for (const auto& [a, p] : cache_->store_all)
            if (a == alignment) return *p;
        auto p = std::make_unique<planned_of<Graph>>(
            place_within(g_, schedule_of(keep_all()), std::numeric_limits<std::uint64_t>::max(), alignment,
                         memplan::deadline::passed()));
        cache_->store_all.emplace_back(alignment, std::move(p));
        return *cache_->store_all.back().second;
    }

    /// The smallest memory any schedule needs (schedule_free_lower_bound) and
    /// the name of the op that needs it (empty when the graph has no ops),
    /// computed with the context.
    const std::pair<size_type, std::string>& min_memory() const noexcept { return min_memory_; }

    /// Position in base_order() of each op.
    std::size_t position(id_type o) const { return pos_[o]; }
    /// Position in base_order() of a forward temporary's first reader
    /// (base_order().size() when nothing reads it).
    std::size_t first_read(id_type t) const { return first_read_[t]; }

private:
    /// Where a dropped tensor's first life ends (general graphs): at the
    /// base position named (its producer's: made and gone, for readers that
    /// all come later), else after its first reader.
    std::size_t first_life_end(const remat_choice<Graph>& c, id_type t) const {
        const auto named = c.drop_after_of(t);
        return named != remat_choice<Graph>::none && named >= pos_[index_.producer[t]] && named < order_.size()
                   ? named
                   : first_read_[t];
    }

    void check_choice(const remat_choice<Graph>& c) const {
        if (c.keep.size() != g_.num_tensors() || c.variant.size() != g_.num_ops() ||
            (!c.per_use.empty() && c.per_use.size() != g_.num_tensors()) ||
            (!c.drop_after.empty() && c.drop_after.size() != g_.num_tensors()) ||
            (!c.checkpoint.empty() && c.checkpoint.size() != g_.num_tensors()))
            throw error("remat", "a choice for graph '" + g_.name() + "' must have one keep flag per tensor, "
                                 "one variant per op and no or one per-use, drop-after and checkpoint flag "
                                 "per tensor");
        for (std::size_t t = 0; t < c.checkpoint.size(); ++t)
            if (c.checkpoint[t] && !checkpointable(static_cast<id_type>(t)))
                throw error("remat", "tensor '" + g_.tensor(static_cast<id_type>(t)).name +
                                         "' cannot be a checkpoint (not a forward temporary that only the forward "
                                         "part reads, on a graph with a backward part)");
        for (std::size_t t = 0; t < g_.num_tensors(); ++t)
            if (!c.keep[t] && !droppable_[t])
                throw error("remat", "tensor '" + g_.tensor(static_cast<id_type>(t)).name +
                                         "' cannot be dropped (not made by a forward op and read later, or "
                                         "persistent, or a graph output)");
        for (std::size_t o = 0; o < g_.num_ops(); ++o) {
            const auto& op = g_.op(static_cast<id_type>(o));
            const bool ok = op.variants.empty() ? c.variant[o] == Graph::npos : c.variant[o] < op.variants.size();
            if (!ok) throw error("remat", "op '" + op.name + "': the chosen variant does not exist");
        }
    }

    const Graph& g_;
    graph_index<Graph> index_;
    std::vector<id_type> order_;
    std::size_t boundary_ = 0;
    std::vector<char> droppable_;
    std::vector<char> forward_temp_; ///< made by a forward op, neither persistent nor a graph output
    std::vector<std::size_t> first_read_; ///< per forward temporary: base position of its first reader
    std::vector<std::size_t> pos_;        ///< per op: its position in order_
    double base_cost_ = 0;
    double fastest_cost_ = 0;
    std::pair<size_type, std::string> min_memory_;
    struct cache {
        std::mutex mutex;
        std::vector<std::pair<std::uint64_t, std::unique_ptr<planned_of<Graph>>>> store_all;
    };
    std::shared_ptr<cache> cache_ = std::make_shared<cache>();
};

} // namespace memplan
