// From "which forward tensors to keep, which variant each op runs" to a
// schedule with recomputation, and from a schedule to a placed plan under a
// budget. Every rematerialization planner shares this machinery; they differ
// only in how they choose what to keep.
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

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/alloc/exact.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/remat.hpp>
#include <memplan/schedule/bounds.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace memplan {

/// What a planner decides: per tensor whether it is kept from its forward
/// computation to its last use, and per op which variant every execution of
/// it runs (Graph::npos for ops without variants).
template <class Graph>
struct remat_choice {
    std::vector<char> keep;                        ///< per tensor; only droppable tensors may be 0
    std::vector<typename Graph::id_type> variant;  ///< per op
    /// Per tensor, or empty for none: a dropped tensor recomputed for each
    /// backward op that reads it and freed right after that op.
    std::vector<char> per_use;
    /// Per tensor, or empty for none (graphs without a backward part): the
    /// position in the base order after which a dropped tensor's first life
    /// ends (its producer's: right where it is made; a reader's: after that
    /// reader); `none`, or a position before its producer's: right after its
    /// first reader.
    std::vector<std::size_t> drop_after;
    /// Per tensor, or empty for none (graphs with a backward part): a forward
    /// temporary that no backward op reads, kept after the forward part as a
    /// checkpoint that recomputations start from (it lives to its last read,
    /// a recomputation's included). Without it such a tensor is gone after
    /// the forward part, and a recomputation that needs it runs its producer
    /// again. PyTorch's min-cut partitioner saves such tensors (a projection
    /// whose dropout and residual sum the backward remakes from it).
    std::vector<char> checkpoint;
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    bool is_per_use(std::size_t t) const { return t < per_use.size() && per_use[t] && !keep[t]; }
    bool is_checkpoint(std::size_t t) const { return t < checkpoint.size() && checkpoint[t]; }
    std::size_t drop_after_of(std::size_t t) const { return t < drop_after.size() ? drop_after[t] : none; }
};

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

    /// The smallest memory any schedule needs (schedule_free_lower_bound) and
    /// the name of the op that needs it (empty when the graph has no ops).
    std::pair<size_type, std::string> min_memory() const {
        const auto [bytes, op] = schedule_free_lower_bound_and_op(g_, index_);
        return {bytes, op == Graph::npos ? std::string() : g_.op(op).name};
    }

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
};

/// Base of the planners that work on a `remat_context`: gives each of them
/// `plan(graph, options)`, which resolves the options' time limit, builds the
/// context and calls the planner's own `plan(context, options)` (so the
/// deadline and the reported seconds count the context's construction, and a
/// portfolio can share one context among its members).
template <class Planner>
struct remat_planner {
    template <class Graph>
    basic_remat_result<typename Graph::size_type, typename Graph::id_type> plan(const Graph& g,
                                                                               const remat_options& opt) const {
        const stopwatch watch;
        const remat_options o = opt.until(opt.time_limit.from_now());
        const remat_context<Graph> ctx(g);
        auto r = static_cast<const Planner&>(*this).plan(ctx, o);
        if (r.bound == 0 && g.num_ops() > 0) {
            const auto need = ctx.min_memory();
            r.bound = need.first;
            r.bound_op = need.second;
        }
        // What the library returns is checked by the independent validator.
        if (has_solution(r.status)) {
            if (r.size > opt.budget) {
                r.status = status::error;
                r.message = "internal error (please report it): planner '" + r.planner + "' returned an arena of " +
                            std::to_string(r.size) + " bytes over the budget of " + std::to_string(opt.budget);
            } else {
                detail::reject_invalid_plan(g, r.plan, r.status, r.message);
            }
        }
        r.seconds = watch.seconds();
        return r;
    }
};

/// `s` with every in-place optimizer update (an update-phase op without
/// outputs, formats.md) moved, when needed, to right after the last later
/// step that reads one of its persistent inputs. Such an update overwrites
/// the parameter (and its optimizer state) where it is, so a
/// forward op recomputed after it — for a backward reader that comes later,
/// as with a tied embedding whose gradient completes early — would read the
/// new value (the executor refuses such a plan). These updates write
/// nothing another op reads, so moving one later changes no other step; its
/// gradient lives longer. Steps that need no move keep their order.
template <class Graph>
basic_schedule<typename Graph::id_type> updates_after_their_readers(const Graph& g,
                                                                    const basic_schedule<typename Graph::id_type>& s) {
    using id_type = typename Graph::id_type;
    // Per persistent tensor: the last step that reads it, updates aside.
    std::vector<std::size_t> last_read(g.num_tensors(), 0);
    std::vector<char> read(g.num_tensors(), 0);
    for (std::size_t k = 0; k < s.size(); ++k) {
        const auto& op = g.op(s[k].op);
        if (op.phase == phase::update && op.outputs.empty()) continue;
        for (id_type t : g.reads_of(s[k].op, s[k].variant))
            if (g.tensor(t).persistent) {
                last_read[t] = k;
                read[t] = 1;
            }
    }
    std::vector<std::vector<std::size_t>> after(s.size());
    std::vector<char> moved(s.size(), 0);
    bool any = false;
    for (std::size_t k = 0; k < s.size(); ++k) {
        const auto& op = g.op(s[k].op);
        if (op.phase != phase::update || !op.outputs.empty()) continue;
        std::size_t need = k;
        for (id_type t : op.inputs)
            if (g.tensor(t).persistent && read[t]) need = std::max(need, last_read[t]);
        if (need > k) {
            after[need].push_back(k);
            moved[k] = 1;
            any = true;
        }
    }
    if (!any) return s;
    basic_schedule<id_type> out;
    out.reserve(s.size());
    for (std::size_t k = 0; k < s.size(); ++k) {
        if (!moved[k]) out.push_back(s[k]);
        for (auto u : after[k]) out.push_back(s[u]);
    }
    return out;
}

/// Places the buffers of schedule `s`: the best heuristic, then, when that
/// misses `budget` although the per-schedule bound fits, the exact search
/// in decision mode until `exact_until` (`deadline::passed()`: no search).
template <class Graph>
basic_planned<typename Graph::size_type, typename Graph::id_type>
place_within(const Graph& g, const basic_schedule<typename Graph::id_type>& s_in, std::uint64_t budget,
             std::uint64_t alignment, memplan::deadline exact_until) {
    plan_options po;
    po.alignment = alignment;
    po.validate = false; // one of many candidates: the planner's entry checks the plan it returns
    const auto ordered = updates_after_their_readers(g, s_in);
    const auto& s = ordered;
    auto planned = make_plan(g, s, best_heuristic{}, po);
    if (has_solution(planned.status) && planned.plan.arena_bytes > budget && planned.bound <= budget &&
        !exact_until.expired()) {
        exact e;
        e.time_limit = exact_until;
        e.capacity = budget;
        auto tight = make_plan(g, s, e, po);
        if (has_solution(tight.status) && tight.plan.arena_bytes <= budget) {
            tight.seconds += planned.seconds;
            return tight;
        }
    }
    return planned;
}

namespace detail {

/// Fills the common fields of a result from a placed plan.
template <class Graph>
void finish_remat_result(const remat_context<Graph>& ctx, const remat_options& opt,
                         basic_planned<typename Graph::size_type, typename Graph::id_type> planned,
                         basic_remat_result<typename Graph::size_type, typename Graph::id_type>& out) {
    out.cost = schedule_cost(ctx.graph(), planned.plan.steps);
    out.base_cost = ctx.base_cost();
    out.fastest_cost = ctx.fastest_cost();
    out.budget = static_cast<typename Graph::size_type>(opt.budget);
    out.size = planned.plan.arena_bytes;
    out.schedule_bound = planned.bound;
    out.plan = std::move(planned.plan);
}

/// The outcome when no plan within the budget was found: infeasible with
/// the reason when the budget is below what any schedule needs.
template <class Graph>
void no_plan_within_budget(const remat_context<Graph>& ctx, const remat_options& opt,
                           basic_remat_result<typename Graph::size_type, typename Graph::id_type>& out,
                           std::string_view planner) {
    const auto [need, op] = ctx.min_memory();
    out.bound = need;
    out.bound_op = op;
    out.budget = static_cast<typename Graph::size_type>(opt.budget);
    if (opt.budget < need) {
        out.status = status::infeasible;
        out.message = "budget " + std::to_string(opt.budget) + " bytes is below " + std::to_string(need) +
                      " bytes, which op '" + op + "' needs in any schedule";
    } else {
        out.status = status::no_solution;
        out.message = std::string(planner) + " found no plan within " + std::to_string(opt.budget) +
                      " bytes (any schedule needs at least " + std::to_string(need) + " bytes, for op '" + op + "')";
    }
}

} // namespace detail

} // namespace memplan
