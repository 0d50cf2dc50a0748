// A buffer: one materialisation of a tensor, or the workspace of one step,
// with the steps on which it is live and, once placed, its arena offset.
//
// Liveness (schedule/liveness.hpp) makes buffers from a schedule; a plan
// (plan/plan.hpp) is a schedule plus its placed buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace memplan {

template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_buffer {
    static constexpr Id no_tensor = std::numeric_limits<Id>::max();
    static constexpr std::size_t no_step = std::numeric_limits<std::size_t>::max();

    Id tensor = no_tensor;        ///< tensor id; no_tensor for a workspace
    std::size_t step = no_step;   ///< for a workspace: the step it serves
    Size offset = 0;
    Size bytes = 0;
    std::size_t first = 0;        ///< first step live (inclusive)
    std::size_t last = 0;         ///< last step live (inclusive)
    Id alias = no_tensor;         ///< in-place: the input tensor whose buffer this one took over

    bool is_workspace() const noexcept { return tensor == no_tensor; }
    bool has_alias() const noexcept { return alias != no_tensor; }
    /// Whether the step ranges of two buffers intersect.
    bool overlaps_in_time(const basic_buffer& o) const noexcept { return first <= o.last && o.first <= last; }

    friend bool operator==(const basic_buffer&, const basic_buffer&) = default;
};

using buffer = basic_buffer<>;

} // namespace memplan
