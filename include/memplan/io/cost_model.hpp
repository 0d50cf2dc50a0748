// Cost models by name, as the command line and the examples spell them
// (in io/ because "measured:FILE" reads a graph file):
// "roofline:DEVICE", "fused:DEVICE" (DEVICE: v100, h100, h200, or one the caller
// supplies, such as the measured "cpu" of engine/cpu/device.hpp) and
// "measured:FILE" (a memplan.graph whose costs were measured, cost_unit "us").
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/cost/model.hpp>
#include <memplan/io/graph_json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace memplan::cost {

/// A device the caller knows beyond v100, h100 and h200 (nullopt: unknown).
using device_lookup = std::function<std::optional<device_profile>(std::string_view)>;

/// The accepted spellings, for messages.
inline constexpr std::string_view cost_model_usage = "roofline:DEVICE, fused:DEVICE or measured:FILE";

/// The cost model `spec` names. Throws memplan::error("cost", ...) naming
/// the spec for an unknown model or device, and the reader's error for a
/// measured-costs file that cannot be read or is not in microseconds.
inline cost_model make_cost_model(std::string_view spec, const device_lookup& extra = {}) {
    const auto colon = spec.find(':');
    const std::string_view kind = spec.substr(0, colon);
    const std::string_view arg = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
    auto device = [&]() -> device_profile {
        if (arg.empty()) return v100;
        if (auto d = find_device(arg)) return *d;
        if (extra)
            if (auto d = extra(arg)) return *d;
        throw error("cost", "cost model '" + std::string(spec) + "': unknown device '" + std::string(arg) +
                                "'; expected v100, h100, h200" + (extra ? " or cpu" : ""));
    };
    if (kind == "roofline") return roofline{device()};
    if (kind == "fused") return fused{device()};
    if (kind == "measured") {
        if (arg.empty())
            throw error("cost", "cost model 'measured' needs the file of measured costs: measured:FILE");
        graph g = read_graph_json(std::string(arg));
        return measured(std::move(g));
    }
    throw error("cost", "unknown cost model '" + std::string(spec) + "'; expected " + std::string(cost_model_usage));
}

} // namespace memplan::cost
