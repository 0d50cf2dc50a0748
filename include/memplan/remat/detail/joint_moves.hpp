// The moves of the `joint` planner (remat/joint.hpp): one named type per
// change it makes to a choice (remat/recompute.hpp's remat_choice), and one
// `apply` per type. A move is applied through a `choice_journal`, which
// records the value of every entry it overwrites, so that undoing a move (or
// several, for a pair tried together) restores the choice exactly, whatever
// the move: there is no hand-written inverse to keep in step with `apply`
// (tests/unit/remat_joint_test.cpp checks undo after apply on random choices).
#pragma once

#include <memplan/remat/recompute.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

namespace memplan::detail {

/// Writes to a choice that can be undone: every setter records the entry's
/// value before the write (and that a per-tensor vector was empty, when the
/// write allocates it); undo() restores them newest first.
template <class Graph>
class choice_journal {
public:
    using id_type = typename Graph::id_type;
    using choice_type = remat_choice<Graph>;

    explicit choice_journal(choice_type& c) : c_(c) {}
    choice_journal(const choice_journal&) = delete;
    choice_journal& operator=(const choice_journal&) = delete;

    const choice_type& choice() const noexcept { return c_; }

    void set_keep(std::size_t t, bool v) { write(field::keep, t, v ? 1 : 0); }
    void set_variant(std::size_t op, id_type v) { write(field::variant, op, v); }
    void set_per_use(std::size_t t, bool v) { write(field::per_use, t, v ? 1 : 0); }
    void set_checkpoint(std::size_t t, bool v) { write(field::checkpoint, t, v ? 1 : 0); }
    void set_drop_after(std::size_t t, std::size_t position) { write(field::drop_after, t, position); }

    /// Restores every entry written since the journal began (or the last
    /// undo()/keep()), newest first.
    void undo() {
        for (auto w = log_.rbegin(); w != log_.rend(); ++w) {
            if (w->index == allocated) {
                clear_vector(w->f);
                continue;
            }
            put(w->f, w->index, w->old);
        }
        log_.clear();
    }
    /// Forgets the writes: they stay.
    void keep() noexcept { log_.clear(); }
    bool empty() const noexcept { return log_.empty(); }

private:
    enum class field : std::uint8_t { keep, variant, per_use, checkpoint, drop_after };
    static constexpr std::size_t allocated = static_cast<std::size_t>(-1); ///< index of "the vector was empty"
    struct entry {
        field f;
        std::size_t index;
        std::size_t old;
    };

    void write(field f, std::size_t index, std::size_t value) {
        auto grow = [&](auto& v, auto fill) {
            if (!v.empty()) return;
            v.assign(c_.keep.size(), fill);
            log_.push_back({f, allocated, 0});
        };
        switch (f) {
        case field::per_use: grow(c_.per_use, char{0}); break;
        case field::checkpoint: grow(c_.checkpoint, char{0}); break;
        case field::drop_after: grow(c_.drop_after, choice_type::none); break;
        default: break;
        }
        log_.push_back({f, index, get(f, index)});
        put(f, index, value);
    }
    std::size_t get(field f, std::size_t i) const {
        switch (f) {
        case field::keep: return static_cast<std::size_t>(c_.keep[i]);
        case field::variant: return static_cast<std::size_t>(c_.variant[i]);
        case field::per_use: return static_cast<std::size_t>(c_.per_use[i]);
        case field::checkpoint: return static_cast<std::size_t>(c_.checkpoint[i]);
        case field::drop_after: return c_.drop_after[i];
        }
        return 0;
    }
    void put(field f, std::size_t i, std::size_t v) {
        switch (f) {
        case field::keep: c_.keep[i] = static_cast<char>(v); break;
        case field::variant: c_.variant[i] = static_cast<id_type>(v); break;
        case field::per_use: c_.per_use[i] = static_cast<char>(v); break;
        case field::checkpoint: c_.checkpoint[i] = static_cast<char>(v); break;
        case field::drop_after: c_.drop_after[i] = v; break;
        }
    }
    void clear_vector(field f) {
        switch (f) {
        case field::per_use: c_.per_use.clear(); break;
        case field::checkpoint: c_.checkpoint.clear(); break;
        case field::drop_after: c_.drop_after.clear(); break;
        default: break;
        }
    }

    choice_type& c_;
    std::vector<entry> log_;
};

namespace joint_move {

/// Drops a kept tensor: it is made again for the backward part (for each
/// later reader when `per_use`). `also`: the input its producer wrote it
/// over in place, dropped with it (or it would stay alive to remake it from).
template <class Id>
struct drop_tensor {
    Id tensor;
    bool per_use = false;
    Id also = static_cast<Id>(-1);
};

/// Keeps a dropped tensor again.
template <class Id>
struct keep_tensor {
    Id tensor;
};

/// Runs `op` as variant `to` instead of `from`.
template <class Id>
struct set_variant {
    Id op;
    Id to;
    Id from;
};

/// Makes a dropped tensor again for each reader (`to`), or once (`!to`).
template <class Id>
struct set_per_use {
    Id tensor;
    bool to;
};

/// Keeps a forward temporary as a checkpoint after the forward part (`to`),
/// or lets it go (`!to`; remat_choice::checkpoint).
template <class Id>
struct set_checkpoint {
    Id tensor;
    bool to;
};

/// Without a backward part: `tensor` and its kept ancestors `cone` each end
/// their first life with their last reader before base position `before`
/// and are made again after it (remat_choice::drop_after).
template <class Id>
struct drop_cone {
    Id tensor;
    std::vector<Id> cone;
    std::size_t before;
};

/// With a backward part: `tensor` and the kept outputs `riders` of the ops
/// that remake it are dropped and made again from a frontier of
/// checkpoints: `marks` become checkpoints, `unmarks` (checkpoints inside
/// the remade part) stop being ones.
template <class Id>
struct remake_from {
    Id tensor;
    std::vector<Id> riders;
    std::vector<Id> marks;
    std::vector<Id> unmarks;
};

/// Any move; the alternatives' order is fixed (key() names them by index).
template <class Id>
using any = std::variant<drop_tensor<Id>, keep_tensor<Id>, set_variant<Id>, set_per_use<Id>, drop_cone<Id>,
                         set_checkpoint<Id>, remake_from<Id>>;

/// A move with its estimated worth: bytes freed at the peak per cost added.
template <class Id>
struct scored {
    any<Id> move;
    double score = 0;
};

/// The tensor or op a move is about (two moves of one kind on the same
/// subject are not tried together).
template <class Id>
Id subject(const any<Id>& m) {
    return std::visit(
        [](const auto& x) -> Id {
            if constexpr (requires { x.op; }) return x.op;
            else return x.tensor;
        },
        m);
}

/// Whether the move frees bytes (drops something) rather than trading them.
template <class Id>
bool is_drop(const any<Id>& m) {
    return std::holds_alternative<drop_tensor<Id>>(m) || std::holds_alternative<drop_cone<Id>>(m) ||
           std::holds_alternative<remake_from<Id>>(m) ||
           (std::holds_alternative<set_checkpoint<Id>>(m) && !std::get<set_checkpoint<Id>>(m).to);
}

/// Whether the move changes whether `t` is kept (the descents that must not
/// drop `t` leave such moves out).
template <class Id>
bool touches(const any<Id>& m, Id t) {
    auto in = [t](const std::vector<Id>& v) { return std::find(v.begin(), v.end(), t) != v.end(); };
    return std::visit(
        [&](const auto& x) -> bool {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, drop_tensor<Id>>) return x.tensor == t || x.also == t;
            else if constexpr (std::is_same_v<T, set_per_use<Id>> || std::is_same_v<T, set_checkpoint<Id>>)
                return x.tensor == t;
            else if constexpr (std::is_same_v<T, drop_cone<Id>>) return x.tensor == t || in(x.cone);
            else if constexpr (std::is_same_v<T, remake_from<Id>>) return x.tensor == t || in(x.riders) || in(x.unmarks);
            else return false;
        },
        m);
}

/// A 64-bit name of a move, for the list of moves found useless (equal
/// moves have equal keys).
template <class Id>
std::uint64_t key(const any<Id>& m) {
    constexpr Id none = static_cast<Id>(-1);
    auto mix = [&](std::uint64_t id, std::uint64_t variant, std::uint64_t id2) {
        return (std::uint64_t(m.index()) << 60) ^ (id << 20) ^ variant ^ (id2 << 40);
    };
    return std::visit(
        [&](const auto& x) -> std::uint64_t {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, drop_tensor<Id>>) return mix(x.tensor, x.per_use ? 1 : 0, x.also);
            else if constexpr (std::is_same_v<T, keep_tensor<Id>>) return mix(x.tensor, 0, none);
            else if constexpr (std::is_same_v<T, set_variant<Id>>) return mix(x.op, x.to, none);
            else if constexpr (std::is_same_v<T, set_per_use<Id>> || std::is_same_v<T, set_checkpoint<Id>>)
                return mix(x.tensor, x.to ? 1 : 0, none);
            else if constexpr (std::is_same_v<T, drop_cone<Id>>)
                return mix(x.tensor, static_cast<Id>(x.cone.size()), static_cast<Id>(x.before));
            else return mix(x.tensor, 0, none);
        },
        m);
}

/// The last reader of `t` before base position `before`, or none.
template <class Graph>
std::size_t last_reader_before(const remat_context<Graph>& ctx, typename Graph::id_type t, std::size_t before) {
    constexpr auto none = remat_choice<Graph>::none;
    std::size_t last = none;
    for (auto r : ctx.index().consumers[t]) {
        const auto at = ctx.position(r);
        if (at < before && (last == none || at > last)) last = at;
    }
    return last;
}

/// Applies `m` to the journal's choice.
template <class Graph>
void apply(choice_journal<Graph>& j, const remat_context<Graph>& ctx, const any<typename Graph::id_type>& m) {
    using Id = typename Graph::id_type;
    const auto& c = j.choice();
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, drop_tensor<Id>>) {
                auto drop = [&](Id t) {
                    j.set_keep(t, false);
                    if (!c.drop_after.empty()) j.set_drop_after(t, remat_choice<Graph>::none);
                };
                drop(x.tensor);
                if (x.also != Graph::npos) drop(x.also);
                if (x.per_use) j.set_per_use(x.tensor, true);
            } else if constexpr (std::is_same_v<T, keep_tensor<Id>>) {
                j.set_keep(x.tensor, true);
            } else if constexpr (std::is_same_v<T, set_variant<Id>>) {
                j.set_variant(x.op, x.to);
            } else if constexpr (std::is_same_v<T, set_per_use<Id>>) {
                j.set_per_use(x.tensor, x.to);
            } else if constexpr (std::is_same_v<T, set_checkpoint<Id>>) {
                j.set_checkpoint(x.tensor, x.to);
            } else if constexpr (std::is_same_v<T, drop_cone<Id>>) {
                auto drop = [&](Id t) {
                    j.set_keep(t, false);
                    const auto last = last_reader_before(ctx, t, x.before);
                    // No reader before: its first life ends where it is made.
                    j.set_drop_after(t, last != remat_choice<Graph>::none ? last
                                                                          : ctx.position(ctx.index().producer[t]));
                };
                drop(x.tensor);
                for (auto t : x.cone) drop(t);
            } else {
                static_assert(std::is_same_v<T, remake_from<Id>>);
                j.set_keep(x.tensor, false);
                for (auto t : x.riders) j.set_keep(t, false);
                for (auto t : x.marks) j.set_checkpoint(t, true);
                for (auto t : x.unmarks) j.set_checkpoint(t, false);
            }
        },
        m);
}

} // namespace joint_move
} // namespace memplan::detail
