// Measured costs and convolution variants for a training graph.
//
// A profile is a table, per graph op, of its time (ms) and, for convolutions,
// of each variant's cuDNN algorithm, workspace bytes and time. `apply_profile`
// writes it into the graph (op.cost, variant cost and workspace; variants
// cuDNN does not support are removed), so the planners trade memory against
// measured time. On a GPU `measure` (engine/cuda/measure.hpp) fills the table
// (cuDNN's Find for the algorithms, timed steps for every op); without one the
// same apply path runs on a recorded table read from JSON. Header-only, pure
// C++ (nlohmann JSON): it needs no GPU and no CUDA library.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace memplan::engine::cuda {

/// One variant of one op as measured (or recorded).
struct variant_measurement {
    std::string name;      ///< nn/conv.hpp's variant name
    std::string algorithm; ///< cuDNN's algorithm (engine/cuda/algorithms.hpp)
    bool supported = true; ///< false: cuDNN cannot run it for this shape
    std::uint64_t workspace_bytes = 0;
    double ms = 0;
};

struct op_measurement {
    std::string op; ///< graph op name "<layer>.<suffix>", or "<param>.update", ...
    double ms = 0;
    std::vector<variant_measurement> variants;
};

struct profile_table {
    std::string source; ///< the device's name, or "recorded: ..." for a table not measured here
    std::vector<op_measurement> ops;
};

/// Reads a "memplan.cuda_profile" JSON table. Throws memplan::error naming the file and field.
inline profile_table read_profile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw error("io", "cannot read profile '" + path + "'");
    nlohmann::json j;
    try {
        in >> j;
    } catch (const nlohmann::json::exception& e) {
        throw error("io", "profile '" + path + "': JSON syntax error: " + e.what());
    }
    auto fail = [&](const std::string& what) -> void { throw error("io", "profile '" + path + "': " + what); };
    if (!j.is_object() || j.value("format", "") != "memplan.cuda_profile") fail("format: must be \"memplan.cuda_profile\"");
    if (!j.contains("ops") || !j["ops"].is_array()) fail("ops: must be an array");
    profile_table t;
    t.source = j.value("source", "");
    for (std::size_t i = 0; i < j["ops"].size(); ++i) {
        const auto& o = j["ops"][i];
        const std::string where = "ops[" + std::to_string(i) + "]";
        if (!o.is_object() || !o.contains("op") || !o["op"].is_string()) fail(where + ".op: must be a string");
        if (!o.contains("ms") || !o["ms"].is_number() || o["ms"].get<double>() < 0)
            fail(where + ".ms: must be a number >= 0");
        op_measurement m{o["op"].get<std::string>(), o["ms"].get<double>(), {}};
        if (o.contains("variants")) {
            if (!o["variants"].is_array()) fail(where + ".variants: must be an array");
            for (std::size_t k = 0; k < o["variants"].size(); ++k) {
                const auto& v = o["variants"][k];
                const std::string vw = where + ".variants[" + std::to_string(k) + "]";
                if (!v.contains("name") || !v["name"].is_string()) fail(vw + ".name: must be a string");
                if (v.contains("algorithm") && !v["algorithm"].is_string()) fail(vw + ".algorithm: must be a string");
                if (v.contains("supported") && !v["supported"].is_boolean()) fail(vw + ".supported: must be a boolean");
                variant_measurement x;
                x.name = v["name"].get<std::string>();
                x.algorithm = v.value("algorithm", "");
                x.supported = v.value("supported", true);
                if (x.supported) {
                    if (!v.contains("ms") || !v["ms"].is_number() || v["ms"].get<double>() < 0)
                        fail(vw + ".ms: must be a number >= 0");
                    if (!v.contains("workspace_bytes") || !v["workspace_bytes"].is_number_unsigned())
                        fail(vw + ".workspace_bytes: must be a non-negative integer");
                    x.ms = v["ms"].get<double>();
                    x.workspace_bytes = v["workspace_bytes"].get<std::uint64_t>();
                }
                m.variants.push_back(std::move(x));
            }
        }
        t.ops.push_back(std::move(m));
    }
    return t;
}

/// Writes a table as "memplan.cuda_profile" JSON.
inline nlohmann::json to_json(const profile_table& t) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& o : t.ops) {
        nlohmann::json v = nlohmann::json::array();
        for (const auto& x : o.variants) {
            nlohmann::json e{{"name", x.name}, {"algorithm", x.algorithm}, {"supported", x.supported}};
            if (x.supported) {
                e["workspace_bytes"] = x.workspace_bytes;
                e["ms"] = x.ms;
            }
            v.push_back(std::move(e));
        }
        nlohmann::json e{{"op", o.op}, {"ms", o.ms}};
        if (!v.empty()) e["variants"] = std::move(v);
        ops.push_back(std::move(e));
    }
    return {{"format", "memplan.cuda_profile"}, {"version", 1}, {"source", t.source}, {"unit", "ms"}, {"ops", ops}};
}

struct apply_report {
    std::size_t ops = 0;              ///< ops whose cost was set
    std::size_t variants = 0;         ///< variants whose cost and workspace were set
    std::size_t removed_variants = 0; ///< unsupported variants taken out
};

/// Writes table `t` into graph `g`: every op's cost becomes its measured
/// time in microseconds (the table's ms x 1000), each listed variant its
/// measured time and workspace, and the graph declares cost_unit "us" and
/// cost_model "measured:<source>" (a graph cost::measured reads); an unsupported variant
/// is removed (it keeps at least one). Throws memplan::error naming the op
/// when an op of `g` is missing from the table (costs in mixed units would
/// mislead the planners) or a variant is unknown. Call before planning:
/// removing a variant renumbers the op's variants.
template <class Size, class Id>
apply_report apply_profile(basic_graph<Size, Id>& g, const profile_table& t) {
    std::unordered_map<std::string, const op_measurement*> by_name;
    for (const auto& o : t.ops) by_name[o.op] = &o;
    apply_report r;
    for (Id i = 0; i < static_cast<Id>(g.num_ops()); ++i) {
        auto& op = g.op_at(i);
        const auto it = by_name.find(op.name);
        if (it == by_name.end())
            throw error("cuda", "profile '" + t.source + "' has no measurement of op '" + op.name + "'");
        op.cost = it->second->ms * 1000.0;
        ++r.ops;
        for (const auto& v : it->second->variants) {
            auto found = std::find_if(op.variants.begin(), op.variants.end(), [&](const auto& x) { return x.name == v.name; });
            if (found == op.variants.end())
                throw error("cuda", "profile '" + t.source + "': op '" + op.name + "' has no variant '" + v.name + "'");
            if (!v.supported) {
                if (op.variants.size() > 1) {
                    op.variants.erase(found);
                    ++r.removed_variants;
                }
                continue;
            }
            found->cost = v.ms * 1000.0;
            found->workspace = static_cast<Size>(v.workspace_bytes);
            ++r.variants;
        }
    }
    g.set_costs_from("us", "measured:" + (t.source.empty() ? std::string("cuda") : t.source));
    return r;
}

} // namespace memplan::engine::cuda
