// Measured costs and variants for a training graph.
//
// A profile is a table, per graph op, of its time (ms) and, for an op with
// variants (convolution algorithms, batch-norm and ReLU backward), of each
// variant's time, workspace bytes and, for convolutions, cuDNN algorithm.
// `apply_profile` writes it into the graph (op.cost, every variant's cost and
// workspace; variants cuDNN cannot run, or that could not be timed, are
// removed), so the planners trade memory against measured time; a variant of
// the graph the table does not list is an error, so no model cost survives in
// a graph labelled "measured". On a GPU `measure` (engine/cuda/measure.hpp)
// fills the table; without one the same apply path runs on a recorded table
// read from JSON. Header-only, pure C++ (nlohmann JSON): it needs no GPU and
// no CUDA library.
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
    std::string name;      ///< the variant's name (nn/op_spec.hpp's impl_kind)
    std::string algorithm; ///< convolutions: cuDNN's algorithm (engine/cuda/algorithms.hpp); else empty
    bool supported = true; ///< false: cuDNN cannot run it for this shape
    std::uint64_t workspace_bytes = 0; ///< supported: what the backend asks cuDNN for (timed or not)
    double ms = 0;                     ///< supported and timed: the median time
    /// Supported but not timed (e.g. its workspace exceeded the free device
    /// memory while measuring): `reason` says why; ms is meaningless.
    bool timed = true;
    std::string reason;
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
                if (v.contains("timed") && !v["timed"].is_boolean()) fail(vw + ".timed: must be a boolean");
                if (v.contains("reason") && !v["reason"].is_string()) fail(vw + ".reason: must be a string");
                variant_measurement x;
                x.name = v["name"].get<std::string>();
                x.algorithm = v.value("algorithm", "");
                x.supported = v.value("supported", true);
                x.timed = x.supported && v.value("timed", true);
                x.reason = v.value("reason", "");
                if (x.supported) {
                    if (!v.contains("workspace_bytes") || !v["workspace_bytes"].is_number_unsigned())
                        fail(vw + ".workspace_bytes: must be a non-negative integer");
                    x.workspace_bytes = v["workspace_bytes"].get<std::uint64_t>();
                }
                if (x.timed) {
                    if (!v.contains("ms") || !v["ms"].is_number() || v["ms"].get<double>() < 0)
                        fail(vw + ".ms: must be a number >= 0");
                    x.ms = v["ms"].get<double>();
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
            if (x.supported) e["workspace_bytes"] = x.workspace_bytes;
            if (x.supported && x.timed) e["ms"] = x.ms;
            if (x.supported && !x.timed) e["timed"] = false;
            if (!x.reason.empty()) e["reason"] = x.reason;
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
    std::size_t removed_variants = 0; ///< variants taken out: unsupported, or not timed
    std::size_t untimed_variants = 0; ///< of those, supported ones that could not be timed
};

/// Writes table `t` into graph `g`: every op's cost becomes its measured
/// time in microseconds (the table's ms x 1000), each variant its measured
/// time and workspace, and the graph declares cost_unit "us" and
/// cost_model "measured:<source>" (a graph cost::measured reads). A variant
/// cuDNN cannot run, or one the table marks not timed, is removed: the
/// planners must not trade a time nobody measured. Throws memplan::error
/// naming the op when an op of `g` is missing from the table (costs in
/// mixed units would mislead the planners), and naming the op and variant
/// when a variant of `g` is missing from the table (it would keep its model
/// cost), when the table lists a variant `g` does not have, or when no
/// variant of an op is left. Call before planning: removing a variant
/// renumbers the op's variants.
template <class Size, class Id>
apply_report apply_profile(basic_graph<Size, Id>& g, const profile_table& t) {
    std::unordered_map<std::string, const op_measurement*> by_name;
    for (const auto& o : t.ops) by_name[o.op] = &o;
    const std::string where = "profile '" + t.source + "'";
    apply_report r;
    for (Id i = 0; i < static_cast<Id>(g.num_ops()); ++i) {
        auto& op = g.op_at(i);
        const auto it = by_name.find(op.name);
        if (it == by_name.end()) throw error("cuda", where + " has no measurement of op '" + op.name + "'");
        const op_measurement& m = *it->second;
        for (const auto& v : op.variants)
            if (std::none_of(m.variants.begin(), m.variants.end(), [&](const auto& x) { return x.name == v.name; }))
                throw error("cuda", where + " has no measurement of variant '" + v.name + "' of op '" + op.name +
                                        "' (it would keep its model cost)");
        op.cost = m.ms * 1000.0;
        ++r.ops;
        const bool had_variants = !op.variants.empty();
        for (const auto& v : m.variants) {
            auto found = std::find_if(op.variants.begin(), op.variants.end(), [&](const auto& x) { return x.name == v.name; });
            if (found == op.variants.end())
                throw error("cuda", where + ": op '" + op.name + "' has no variant '" + v.name + "'");
            if (!v.supported || !v.timed) {
                op.variants.erase(found);
                ++r.removed_variants;
                r.untimed_variants += v.supported;
                continue;
            }
            found->cost = v.ms * 1000.0;
            found->workspace = static_cast<Size>(v.workspace_bytes);
            ++r.variants;
        }
        if (had_variants && op.variants.empty())
            throw error("cuda", where + ": no variant of op '" + op.name + "' is both supported and timed");
    }
    g.set_costs_from("us", "measured:" + (t.source.empty() ? std::string("cuda") : t.source));
    return r;
}

} // namespace memplan::engine::cuda
