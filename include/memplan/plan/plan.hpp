// A plan: the steps to run, and where in one arena every buffer lives.
//
// A buffer is one materialisation of a tensor (a tensor recomputed twice has
// two buffers) or the workspace of one step. It is live on steps
// `first..last` inclusive. This is the in-memory form of `memplan.plan`
// (formats.md §2); io/plan_json.hpp reads and writes it.
#pragma once

#include <memplan/schedule/schedule.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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

template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_plan {
    using size_type = Size;
    using id_type = Id;
    using buffer_type = basic_buffer<Size, Id>;

    std::string graph;        ///< name of the graph it was made for
    Size alignment = 256;     ///< every offset is a multiple of it
    Size arena_bytes = 0;     ///< the plan's peak: one allocation of this size holds everything
    basic_schedule<Id> steps;
    std::vector<buffer_type> buffers;

    friend bool operator==(const basic_plan&, const basic_plan&) = default;
};

using buffer = basic_buffer<>;
using plan = basic_plan<>;

} // namespace memplan
