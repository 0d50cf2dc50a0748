// The lower bound of a placed plan: the per-schedule bound (see
// schedule/bounds.hpp, which this header also brings in) of the plan's own
// buffers, with in-place aliases matched by tensor, step and offset.
#pragma once

#include <memplan/schedule/plan.hpp>
#include <memplan/schedule/bounds.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memplan {

namespace detail {

/// For each buffer of `p`, the buffer it takes over in place (matched by
/// tensor, step and offset), or `none`.
template <class Size, class Id>
std::vector<std::size_t> plan_alias_of(const basic_plan<Size, Id>& p) {
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
    return alias_of;
}

} // namespace detail

/// The lower bound of a plan's own buffers (aliases matched by tensor and step).
template <class Size, class Id>
Size lower_bound(const basic_plan<Size, Id>& p) {
    const auto v = live_bytes(p.buffers, detail::plan_alias_of(p), p.steps.size());
    return v.empty() ? Size{0} : *std::max_element(v.begin(), v.end());
}

/// The step at which a plan's own buffers hold the most bytes, and the
/// buffers live there: what holds its peak.
template <class Size>
struct basic_peak_moment {
    std::size_t step = 0;             ///< the first step with the most live bytes
    Size bytes = 0;                   ///< live there (`lower_bound`)
    std::vector<std::size_t> buffers; ///< indices into the plan's buffers live there, largest first
};

using peak_moment = basic_peak_moment<std::uint64_t>;

/// `p`'s peak moment; a buffer that takes over another in place at the step
/// is listed once (the one taken over).
template <class Size, class Id>
basic_peak_moment<Size> peak_moment_of(const basic_plan<Size, Id>& p) {
    constexpr std::size_t none = basic_liveness<Size, Id>::none;
    basic_peak_moment<Size> out;
    const auto alias_of = detail::plan_alias_of(p);
    const auto v = live_bytes(p.buffers, alias_of, p.steps.size());
    if (v.empty()) return out;
    out.step = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    out.bytes = v[out.step];
    for (std::size_t b = 0; b < p.buffers.size(); ++b) {
        const auto& x = p.buffers[b];
        if (x.first > out.step || out.step > x.last) continue;
        if (alias_of[b] != none && x.first == out.step) continue; // shares its source's bytes here
        out.buffers.push_back(b);
    }
    std::stable_sort(out.buffers.begin(), out.buffers.end(),
                     [&](std::size_t a, std::size_t b) { return p.buffers[a].bytes > p.buffers[b].bytes; });
    return out;
}

} // namespace memplan
