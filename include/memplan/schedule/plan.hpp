// A plan: the steps to run, and where in one arena every buffer lives. It
// sits with the schedule it extends, below the validator (check/) and the
// planners (plan/), so that planners can check what they return.
//
// A buffer (schedule/buffer.hpp) is one materialisation of a tensor (a
// tensor recomputed twice has two buffers) or the workspace of one step. It
// is live on steps `first..last` inclusive. This is the in-memory form of
// `memplan.plan` (formats.md §2); io/plan_json.hpp reads and writes it.
#pragma once

#include <memplan/schedule/buffer.hpp>
#include <memplan/schedule/schedule.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace memplan {

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

using plan = basic_plan<>;

} // namespace memplan
