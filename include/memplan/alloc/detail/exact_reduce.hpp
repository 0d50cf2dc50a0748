// Perfect-packing reduction for the exact search: where the load equals the
// capacity on both sides of a section boundary, the bytes freed there are
// exactly the bytes taken there (the buffers living across it cover the
// rest on both sides). So when just one buffer ends and one starts at such
// a boundary, the two occupy the same bytes: they are one longer buffer.
// Merging them removes a choice the search would otherwise get wrong.
#pragma once

#include <memplan/alloc/detail/exact_search.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace memplan::detail {

/// A merged instance and, per original buffer, the merged buffer it became.
struct exact_reduction {
    exact_instance instance;
    std::vector<std::uint32_t> rep;
};

/// Chains buffers across every full boundary (capacity `cap_units`) where one
/// buffer ends and one starts; nothing when no boundary qualifies. The merged
/// instance has the same placements: each original buffer at its chain's offset.
inline std::optional<exact_reduction> exact_reduce(const exact_instance& in, std::uint64_t cap_units) {
    const std::size_t n = in.num_buffers();
    const std::uint32_t m = in.num_sections;
    std::vector<std::uint64_t> total(m, 0);
    for (std::uint32_t s = 0; s < m; ++s)
        for (auto b : in.sec_bufs[s]) total[s] += in.size[b];
    // Per boundary s (between sections s - 1 and s): how many end and start there.
    std::vector<std::uint32_t> ends(m + 1, 0), starts(m + 1, 0), ender(m + 1, 0), starter(m + 1, 0);
    for (std::uint32_t b = 0; b < n; ++b) {
        ++ends[in.hi[b]];
        ender[in.hi[b]] = b;
        ++starts[in.lo[b]];
        starter[in.lo[b]] = b;
    }
    constexpr std::uint32_t none = ~std::uint32_t{0};
    std::vector<std::uint32_t> next(n, none);
    std::vector<std::uint8_t> has_prev(n, 0);
    bool any = false;
    for (std::uint32_t s = 1; s < m; ++s) {
        if (ends[s] != 1 || starts[s] != 1 || total[s - 1] != cap_units || total[s] != cap_units) continue;
        const std::uint32_t x = ender[s], y = starter[s];
        if (in.size[x] != in.size[y]) continue; // cannot happen with both sides full; kept as a guard
        next[x] = y;
        has_prev[y] = 1;
        any = true;
    }
    if (!any) return std::nullopt;
    exact_reduction r;
    r.rep.assign(n, 0);
    std::vector<std::uint64_t> units, bytes, begin, end;
    for (std::uint32_t b = 0; b < n; ++b) {
        if (has_prev[b]) continue;
        const auto id = static_cast<std::uint32_t>(units.size());
        std::uint64_t by = 0;
        std::uint32_t last = b;
        for (std::uint32_t c = b; c != none; c = next[c]) {
            r.rep[c] = id;
            by = std::max(by, in.bytes[c]);
            last = c;
        }
        units.push_back(in.size[b]);
        bytes.push_back(by);
        begin.push_back(in.begin[b]);
        end.push_back(in.end[last]);
    }
    r.instance = exact_instance::build(units, bytes, begin, end);
    return r;
}

} // namespace memplan::detail
