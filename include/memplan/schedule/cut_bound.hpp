// The any-order lower bound: bytes that every operator order must hold at once.
//
// Whatever the order, when op v runs its ancestors have run and its
// descendants have not. A tensor made by v or an ancestor and read by v or a
// descendant is therefore live at v's step in every order: the ancestors and
// descendants of v define a cut of the graph that no ordering can dodge. The
// bound is the heaviest such cut (for a training graph: the first backward op,
// where every activation saved for the backward pass is live).
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

namespace memplan {

namespace detail {

/// One row of bits per op, as many bits as ops: ancestor and descendant sets.
class op_bit_rows {
public:
    explicit op_bit_rows(std::size_t n) : words_((n + 63) / 64), bits_(n * words_, 0) {}

    std::size_t words() const noexcept { return words_; }
    std::uint64_t* row(std::size_t r) noexcept { return bits_.data() + r * words_; }
    const std::uint64_t* row(std::size_t r) const noexcept { return bits_.data() + r * words_; }
    void set(std::size_t r, std::size_t b) noexcept { row(r)[b / 64] |= std::uint64_t{1} << (b % 64); }
    bool test(std::size_t r, std::size_t b) const noexcept { return (row(r)[b / 64] >> (b % 64)) & 1U; }
    void or_into(std::size_t dst, std::size_t src) noexcept {
        std::uint64_t* d = row(dst);
        const std::uint64_t* s = row(src);
        for (std::size_t w = 0; w < words_; ++w) d[w] |= s[w];
    }

private:
    std::size_t words_;
    std::vector<std::uint64_t> bits_;
};

/// How many of op `o`'s variants a schedule may pick: all of them, or the
/// default (first) one only; 0 when the op has none.
template <class Graph>
std::size_t variants_considered(const Graph& g, typename Graph::id_type o, bool any_variant) {
    const std::size_t n = g.op(o).variants.size();
    return any_variant ? n : std::min<std::size_t>(n, 1);
}

/// The inputs of op `o` that it reads whichever considered variant runs (a
/// variant may read only part of the op's inputs). Sorted, deduplicated.
template <class Graph>
std::vector<typename Graph::id_type> reads_of_every_variant(const Graph& g, typename Graph::id_type o,
                                                            bool any_variant) {
    using id_type = typename Graph::id_type;
    const auto& op = g.op(o);
    std::vector<id_type> sure(op.inputs.begin(), op.inputs.end());
    std::sort(sure.begin(), sure.end());
    sure.erase(std::unique(sure.begin(), sure.end()), sure.end());
    for (std::size_t v = 0; v < variants_considered(g, o, any_variant); ++v) {
        const auto& reads = g.reads_of(o, static_cast<id_type>(v));
        std::erase_if(sure, [&](id_type t) { return std::find(reads.begin(), reads.end(), t) == reads.end(); });
    }
    return sure;
}

} // namespace detail

/// Which schedules the bound covers.
struct cut_bound_options {
    /// true: any variant on every step; false: every op with its default
    /// (first) variant, as default_schedule and the ordering planners run it.
    bool any_variant = true;
};

/// Per op, the bytes live at that op's step in EVERY topological order of `g`
/// that runs each op once, with any variants (or, `opt.any_variant` false,
/// the default ones), by schedule_lower_bound's liveness. Counted: tensors
/// made by the op or an ancestor and read by the op or a descendant (by every
/// variant of the reader), graph outputs and persistent tensors from their
/// producer on (persistent graph inputs always), the op's smallest workspace,
/// and for each reader ahead whose every variant reads something not counted
/// yet, its cheapest variant's share of those tensors; less what the op's
/// in-place pairs could share. Throws `memplan::error` (category "graph")
/// when `g` is not a valid graph. O(ops^2 / 64 + tensors * ops) time (plus
/// ops * variant reads for the choices), 2 * ops^2 bits of memory.
template <class Graph>
std::vector<typename Graph::size_type> certain_live_bytes(const Graph& g, cut_bound_options opt = {}) {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    validate(g); // the listed order is topological from here on
    const std::size_t n = g.num_ops();
    const graph_index<Graph> index(g);

    // Ancestor and descendant sets, each including the op itself, in one pass
    // each way over the listed (topological) order.
    detail::op_bit_rows anc(n), desc(n);
    std::vector<std::vector<id_type>> producers_of(n);
    for (std::size_t o = 0; o < n; ++o) {
        auto& ps = producers_of[o];
        for (auto t : g.op(static_cast<id_type>(o)).inputs)
            if (index.producer[t] != Graph::npos) ps.push_back(index.producer[t]);
        std::sort(ps.begin(), ps.end());
        ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
        anc.set(o, o);
        for (auto p : ps) anc.or_into(o, p);
    }
    for (std::size_t o = n; o-- > 0;) {
        desc.set(o, o);
        for (auto p : producers_of[o]) desc.or_into(p, o);
    }

    std::vector<std::vector<id_type>> sure_reads(n);
    std::vector<std::vector<id_type>> sure_readers(g.num_tensors());
    for (std::size_t o = 0; o < n; ++o) {
        sure_reads[o] = detail::reads_of_every_variant(g, static_cast<id_type>(o), opt.any_variant);
        for (auto t : sure_reads[o]) sure_readers[t].push_back(static_cast<id_type>(o));
    }
    std::vector<char> is_output(g.num_tensors(), 0);
    for (auto t : g.outputs()) is_output[t] = 1;

    // Reads that depend on the variant: per op whose every variant reads some
    // tensor that not every variant reads, those tensors per variant; and per
    // tensor, how many ops may read it that way.
    struct choice {
        id_type op;
        std::vector<std::vector<id_type>> per_variant;
    };
    std::vector<choice> choices;
    std::vector<std::vector<id_type>> optional_readers(g.num_tensors());
    for (std::size_t o = 0; o < n; ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        for (auto t : op.inputs)
            if (!std::binary_search(sure_reads[o].begin(), sure_reads[o].end(), t) &&
                (optional_readers[t].empty() || optional_readers[t].back() != o))
                optional_readers[t].push_back(static_cast<id_type>(o));
        if (!op.has_variants()) continue;
        choice c{static_cast<id_type>(o), {}};
        for (std::size_t v = 0; v < detail::variants_considered(g, static_cast<id_type>(o), opt.any_variant); ++v) {
            std::vector<id_type> extra;
            for (auto t : g.reads_of(static_cast<id_type>(o), static_cast<id_type>(v)))
                if (!std::binary_search(sure_reads[o].begin(), sure_reads[o].end(), t)) extra.push_back(t);
            std::sort(extra.begin(), extra.end());
            extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
            c.per_variant.push_back(std::move(extra));
        }
        if (std::none_of(c.per_variant.begin(), c.per_variant.end(), [](const auto& e) { return e.empty(); }))
            choices.push_back(std::move(c));
    }
    // The certain-live sets of the tensors those ops may read are kept.
    std::vector<std::size_t> kept_row(g.num_tensors(), static_cast<std::size_t>(-1));
    std::size_t kept = 0;
    for (const auto& c : choices)
        for (const auto& e : c.per_variant)
            for (auto t : e)
                if (kept_row[t] == static_cast<std::size_t>(-1)) kept_row[t] = kept++;
    std::vector<std::uint64_t> kept_bits(kept * anc.words(), 0);
    std::vector<char> always(g.num_tensors(), 0);

    // Per tensor, the set of ops at whose step it is certainly live.
    std::vector<size_type> live(n, 0);
    size_type everywhere = 0;
    std::vector<std::uint64_t> cut(anc.words());
    for (std::size_t ti = 0; ti < g.num_tensors(); ++ti) {
        const auto t = static_cast<id_type>(ti);
        const size_type bytes = g.tensor(t).bytes;
        if (bytes == 0) continue;
        const id_type p = index.producer[t];
        const bool to_the_end = g.tensor(t).persistent || is_output[t];
        if (to_the_end && p == Graph::npos) {
            everywhere = static_cast<size_type>(everywhere + bytes);
            always[t] = 1;
            continue;
        }
        if (to_the_end) {
            std::copy_n(desc.row(p), cut.size(), cut.begin());
        } else {
            // Live at v when a sure reader is v or a descendant of v, i.e. v is
            // an ancestor (or self) of some sure reader ...
            std::fill(cut.begin(), cut.end(), 0);
            for (auto c : sure_readers[t]) {
                const std::uint64_t* a = anc.row(c);
                for (std::size_t w = 0; w < cut.size(); ++w) cut[w] |= a[w];
            }
            // ... and, for a produced tensor, v is the producer or follows it.
            if (p != Graph::npos) {
                const std::uint64_t* d = desc.row(p);
                for (std::size_t w = 0; w < cut.size(); ++w) cut[w] &= d[w];
                cut[p / 64] |= std::uint64_t{1} << (p % 64); // an unread output still lives on its own step
            }
        }
        if (kept_row[t] != static_cast<std::size_t>(-1))
            std::copy(cut.begin(), cut.end(), kept_bits.begin() + static_cast<std::ptrdiff_t>(kept_row[t] * cut.size()));
        for (std::size_t w = 0; w < cut.size(); ++w)
            for (std::uint64_t m = cut[w]; m != 0; m &= m - 1) {
                auto& v = live[w * 64 + static_cast<std::size_t>(std::countr_zero(m))];
                v = static_cast<size_type>(v + bytes);
            }
    }

    std::vector<size_type> out(n, 0);
    for (std::size_t o = 0; o < n; ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        size_type ws = op.workspace;
        if (op.has_variants()) {
            ws = op.variants.front().workspace;
            for (std::size_t v = 0; v < detail::variants_considered(g, static_cast<id_type>(o), opt.any_variant); ++v)
                ws = std::min(ws, op.variants[v].workspace);
        }
        // An in-place output shares its input's bytes unless the input cannot
        // end here: a persistent input never does; one that a descendant surely
        // reads, or a graph output while ops remain, outlives this step. Only a
        // counted input is subtracted from (read by every variant, or a graph
        // output); bytes are shared up to the smaller tensor, as bounds.hpp does.
        const bool has_descendant = [&] {
            const std::uint64_t* d = desc.row(o);
            for (std::size_t w = 0; w < desc.words(); ++w) {
                const std::uint64_t others = w == o / 64 ? d[w] & ~(std::uint64_t{1} << (o % 64)) : d[w];
                if (others != 0) return true;
            }
            return false;
        }();
        size_type shared = 0;
        for (auto [x, y] : op.inplace) {
            if (x == y || g.tensor(x).persistent) continue;
            const bool counted =
                is_output[x] || std::binary_search(sure_reads[o].begin(), sure_reads[o].end(), x);
            if (!counted || (is_output[x] && has_descendant)) continue;
            const bool read_later = std::any_of(sure_readers[x].begin(), sure_readers[x].end(),
                                                [&](id_type c) { return c != o && desc.test(o, c); });
            if (read_later) continue;
            shared = static_cast<size_type>(shared + std::min(g.tensor(x).bytes, g.tensor(y).bytes));
        }
        // Whatever variant each later op picks, it reads one of its variants'
        // tensors; those made by now and not counted yet are live here. A
        // tensor several such ops may read is split between them, so the sum
        // over ops of their cheapest variant never counts a tensor twice
        // (split among the readers still ahead, which are all that can read it).
        // (Tensors this op could take over in place are left out.)
        size_type chosen = 0;
        for (const auto& c : choices) {
            if (!desc.test(o, c.op)) continue;
            size_type least = std::numeric_limits<size_type>::max();
            for (const auto& e : c.per_variant) {
                size_type sum = 0;
                for (auto t : e) {
                    const id_type p = index.producer[t];
                    if (always[t] || (p != Graph::npos && !anc.test(o, p))) continue; // not yet made, or counted
                    const auto* bits = kept_bits.data() + kept_row[t] * anc.words();
                    if ((bits[o / 64] >> (o % 64)) & 1U) continue; // counted in the cut already
                    if (c.op == o && std::any_of(op.inplace.begin(), op.inplace.end(),
                                                 [&](const auto& xy) { return xy.first == t; }))
                        continue;
                    const auto& readers = optional_readers[t];
                    const auto ahead = std::count_if(readers.begin(), readers.end(),
                                                     [&](id_type r) { return desc.test(o, r); });
                    sum = static_cast<size_type>(sum + g.tensor(t).bytes / static_cast<size_type>(std::max<std::ptrdiff_t>(ahead, 1)));
                }
                least = std::min(least, sum);
            }
            chosen = static_cast<size_type>(chosen + least);
        }
        const auto here = static_cast<size_type>(live[o] + everywhere + chosen);
        out[o] = static_cast<size_type>(here - std::min(shared, here) + ws);
    }
    return out;
}

/// A lower bound on the peak live bytes (schedule_lower_bound) of every
/// topological order of `g` that runs each op once, with any variants (or
/// the default ones, see cut_bound_options): the heaviest cut of
/// certain_live_bytes. No order-and-allocation plan without
/// recomputation fits `g` in fewer arena bytes. Each op's cut holds what
/// schedule_free_lower_bound counts for that op, so this bound is at least
/// that one, except where a variant reads only part of an op's inputs: the
/// schedule-free bound counts every listed input there and may overshoot,
/// this one counts only what every variant reads. Throws `memplan::error`
/// (category "graph") when `g` is not a valid graph.
template <class Graph>
typename Graph::size_type any_order_lower_bound(const Graph& g, cut_bound_options opt = {}) {
    const auto per_op = certain_live_bytes(g, opt);
    typename Graph::size_type best = 0;
    for (auto b : per_op) best = std::max(best, b);
    return best;
}

} // namespace memplan
