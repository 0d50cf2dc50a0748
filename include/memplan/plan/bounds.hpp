// The lower bound of a placed plan: the per-schedule bound (see
// schedule/bounds.hpp, which this header also brings in) of the plan's own
// buffers, with in-place aliases matched by tensor, step and offset.
#pragma once

#include <memplan/schedule/plan.hpp>
#include <memplan/schedule/bounds.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace memplan {

/// The lower bound of a plan's own buffers (aliases matched by tensor and step).
template <class Size, class Id>
Size lower_bound(const basic_plan<Size, Id>& p) {
    constexpr std::size_t none = basic_liveness<Size, Id>::none;
    std::vector<std::size_t> alias_of(p.buffers.size(), none);
    for (std::size_t b = 0; b < p.buffers.size(); ++b) {
        const auto& x = p.buffers[b];
        if (!x.has_alias()) continue;
        for (std::size_t c = 0; c < p.buffers.size(); ++c) {
            const auto& y = p.buffers[c];
            if (c != b && !y.is_workspace() && y.tensor == x.alias && y.last == x.first && y.offset == x.offset) {
                alias_of[b] = c;
                break;
            }
        }
    }
    const auto v = live_bytes(p.buffers, alias_of, p.steps.size());
    return v.empty() ? Size{0} : *std::max_element(v.begin(), v.end());
}

} // namespace memplan
