// What a rematerialization planner decides: which forward tensors to keep
// and which variant each op runs, with the finer choices some planners make
// (recompute per use, end a first life early, keep a checkpoint).
// remat/context.hpp turns a choice into a schedule with recomputation.
#pragma once

#include <cstddef>
#include <limits>
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

} // namespace memplan
