// Cost models by name, as the command line and the examples spell them, in a
// registry like the planners' (in io/ because "measured:FILE" reads a graph
// file):
// "roofline:DEVICE", "fused:DEVICE" (DEVICE: v100, h100, h200, or one the caller
// supplies, such as the measured "cpu" of engine/cpu/device.hpp) and
// "measured:FILE" (a memplan.graph whose costs were measured, cost_unit "us").
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/cost/model.hpp>
#include <memplan/io/graph_json.hpp>

#include <array>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace memplan::cost {

/// A device the caller knows beyond v100, h100 and h200 (nullopt: unknown).
using device_lookup = std::function<std::optional<device_profile>(std::string_view)>;

/// The accepted spellings, for messages.
inline constexpr std::string_view cost_model_usage = "roofline:DEVICE, fused:DEVICE or measured:FILE";

/// One kind of cost model: made from the text after the colon of its spec
/// (`spec` whole, for messages).
using cost_model_entry = registry_entry<cost_model (*)(std::string_view spec, std::string_view arg,
                                                       const device_lookup& extra)>;

namespace detail {

/// The device `arg` names (empty: v100), among the built-in ones and `extra`'s.
inline device_profile device_named(std::string_view spec, std::string_view arg, const device_lookup& extra) {
    if (arg.empty()) return v100;
    if (auto d = find_device(arg)) return *d;
    if (extra)
        if (auto d = extra(arg)) return *d;
    throw error("cost", "cost model '" + std::string(spec) + "': unknown device '" + std::string(arg) +
                            "'; expected v100, h100, h200" + (extra ? " or cpu" : ""));
}

} // namespace detail

/// The cost models by kind, the part of a spec before its colon.
inline std::span<const cost_model_entry> cost_model_registry() {
    static constexpr std::array<cost_model_entry, 3> table{
        cost_model_entry{"roofline", "per op, the slower of its FLOPs and its bytes on a device (roofline:DEVICE)",
                         false,
                         [](std::string_view spec, std::string_view arg, const device_lookup& extra) -> cost_model {
                             return roofline{detail::device_named(spec, arg, extra)};
                         }},
        cost_model_entry{"fused", "the roofline, point-wise chains fused as a compiler would (fused:DEVICE)", false,
                         [](std::string_view spec, std::string_view arg, const device_lookup& extra) -> cost_model {
                             return fused{detail::device_named(spec, arg, extra)};
                         }},
        cost_model_entry{"measured", "microseconds measured per op and variant, from a graph file (measured:FILE)",
                         false,
                         [](std::string_view, std::string_view arg, const device_lookup&) -> cost_model {
                             if (arg.empty())
                                 throw error("cost",
                                             "cost model 'measured' needs the file of measured costs: measured:FILE");
                             return measured(read_graph_json(std::string(arg)));
                         }},
    };
    return table;
}

/// The cost model `spec` ("KIND" or "KIND:ARG") names. Throws
/// memplan::error("cost", ...) naming the spec for an unknown model or
/// device, and the reader's error for a measured-costs file that cannot be
/// read or is not in microseconds.
inline cost_model make_cost_model(std::string_view spec, const device_lookup& extra = {}) {
    const auto colon = spec.find(':');
    const std::string_view kind = spec.substr(0, colon);
    const std::string_view arg = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
    return registry_lookup(cost_model_registry(), "cost", "cost model", kind).run(spec, arg, extra);
}

} // namespace memplan::cost
