// Reading and writing `memplan.graph` version 1 (formats.md §1).
//
// The reader checks every field by hand instead of using nlohmann's
// conversions, so that a bad file is rejected with its name, the line and
// item at fault (`model.json:12: ops[3] 'conv1': ...`) and the reason; then
// `validate()` checks the structure. The writer prints one tensor or op per
// line in a fixed field order, so files diff well and round trips are exact.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/io/atomic_file.hpp>
#include <memplan/io/detail/json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace memplan {

/// Parses a `memplan.graph` document. `source_name` (a file name) prefixes
/// every message. Throws `memplan::error` naming the line, item and reason
/// for malformed JSON, bad fields or unknown names, then checks the graph
/// with `validate()`.
inline graph parse_graph_json(std::string_view text, std::string_view source_name) try {
    using detail::json;
    constexpr std::string_view cat = "io";
    const auto doc = detail::parse_json_document(text, source_name, cat);
    detail::check_header(doc, "memplan.graph", cat);
    const json& root = doc.root;

    graph g;
    if (const json* n = detail::find_field(root, "name")) g.set_name(detail::get_string(*n, "name", doc.where("name"), cat));
    {
        std::string unit, model;
        if (const json* u = detail::find_field(root, "cost_unit")) {
            unit = detail::get_string(*u, "cost_unit", doc.where("cost_unit"), cat);
            if (unit.empty()) throw error(cat, doc.where("cost_unit") + "must not be empty (omit the field for an unnamed unit)");
        }
        if (const json* m = detail::find_field(root, "cost_model"))
            model = detail::get_string(*m, "cost_model", doc.where("cost_model"), cat);
        g.set_costs_from(std::move(unit), std::move(model));
    }

    // Tensors.
    const json& tensors = detail::get_array(detail::require_field(root, "tensors", doc.source + ": ", cat), "tensors",
                                            doc.source + ": ", cat);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const json& t = tensors[i];
        std::string item = "tensors[" + std::to_string(i) + "]";
        std::string at = doc.where("tensors", i, item);
        if (!t.is_object()) throw error(cat, at + "must be an object, got " + detail::show_json(t));
        std::string name = detail::get_string(detail::require_field(t, "name", at, cat), "name", at, cat);
        if (name.empty()) throw error(cat, at + "field 'name' is empty");
        at = doc.where("tensors", i, item + " '" + detail::clip(name) + "'");
        if (g.find_tensor(name)) throw error(cat, at + "the name is already taken by an earlier tensor");
        const std::uint64_t bytes = detail::get_u64(detail::require_field(t, "bytes", at, cat), "bytes", at, cat);
        bool persistent = false;
        if (const json* p = detail::find_field(t, "persistent")) persistent = detail::get_bool(*p, "persistent", at, cat);
        g.add_tensor(std::move(name), bytes, persistent);
    }

    // Ops.
    const json& ops =
        detail::get_array(detail::require_field(root, "ops", doc.source + ": ", cat), "ops", doc.source + ": ", cat);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const json& o = ops[i];
        std::string item = "ops[" + std::to_string(i) + "]";
        std::string at = doc.where("ops", i, item);
        if (!o.is_object()) throw error(cat, at + "must be an object, got " + detail::show_json(o));
        op x;
        x.name = detail::get_string(detail::require_field(o, "name", at, cat), "name", at, cat);
        if (x.name.empty()) throw error(cat, at + "field 'name' is empty");
        at = doc.where("ops", i, item + " '" + detail::clip(x.name) + "'");
        if (g.find_op(x.name)) throw error(cat, at + "the name is already taken by an earlier op");

        auto tensor_id = [&](const json& v, std::string_view role) -> graph::id_type {
            if (!v.is_string())
                throw error(cat, at + std::string(role) + " must be a tensor name, got " + detail::show_json(v));
            const auto name = v.get<std::string>();
            if (auto id = g.find_tensor(name)) return *id;
            throw error(cat, at + std::string(role) + " '" + detail::clip(name) + "' is not a declared tensor");
        };
        auto tensor_list = [&](std::string_view key, std::vector<graph::id_type>& out) {
            const json& a = detail::get_array(detail::require_field(o, key, at, cat), key, at, cat);
            for (const auto& v : a) out.push_back(tensor_id(v, key == "inputs" ? "input" : "output"));
        };
        tensor_list("inputs", x.inputs);
        tensor_list("outputs", x.outputs);
        if (const json* c = detail::find_field(o, "cost")) x.cost = detail::get_double(*c, "cost", at, cat);
        if (const json* w = detail::find_field(o, "workspace")) x.workspace = detail::get_u64(*w, "workspace", at, cat);
        if (const json* p = detail::find_field(o, "phase")) {
            const auto s = detail::get_string(*p, "phase", at, cat);
            const auto ph = parse_phase(s);
            if (!ph) throw error(cat, at + "phase '" + s + "' is not one of forward, backward, update");
            x.phase = *ph;
        }
        if (const json* vs = detail::find_field(o, "variants")) {
            detail::get_array(*vs, "variants", at, cat);
            for (std::size_t k = 0; k < vs->size(); ++k) {
                const json& v = (*vs)[k];
                std::string vat = at + "variants[" + std::to_string(k) + "]: ";
                if (!v.is_object()) throw error(cat, vat + "must be an object, got " + detail::show_json(v));
                variant var;
                var.name = detail::get_string(detail::require_field(v, "name", vat, cat), "name", vat, cat);
                if (var.name.empty()) throw error(cat, vat + "field 'name' is empty");
                vat = at + "variant '" + detail::clip(var.name) + "': ";
                if (const json* c = detail::find_field(v, "cost")) var.cost = detail::get_double(*c, "cost", vat, cat);
                if (const json* w = detail::find_field(v, "workspace"))
                    var.workspace = detail::get_u64(*w, "workspace", vat, cat);
                if (const json* in = detail::find_field(v, "inputs")) {
                    detail::get_array(*in, "inputs", vat, cat);
                    for (const auto& name : *in) {
                        const auto t = tensor_id(name, "variant '" + detail::clip(var.name) + "' input");
                        if (std::find(x.inputs.begin(), x.inputs.end(), t) == x.inputs.end())
                            throw error(cat, vat + "input '" + g.tensor(t).name +
                                                 "' is not one of the op's inputs (an op lists every tensor any "
                                                 "variant reads)");
                        var.inputs.push_back(t);
                    }
                }
                x.variants.push_back(std::move(var));
            }
        }
        if (const json* ip = detail::find_field(o, "inplace")) {
            detail::get_array(*ip, "inplace", at, cat);
            for (std::size_t k = 0; k < ip->size(); ++k) {
                const json& pair = (*ip)[k];
                if (!pair.is_array() || pair.size() != 2)
                    throw error(cat, at + "inplace[" + std::to_string(k) +
                                         "] must be a pair [input, output] of tensor names, got " +
                                         detail::show_json(pair));
                x.inplace.emplace_back(tensor_id(pair[0], "in-place input"), tensor_id(pair[1], "in-place output"));
            }
        }
        g.add_op(std::move(x));
    }

    // Required outputs.
    if (const json* outs = detail::find_field(root, "outputs")) {
        const std::string at = doc.where("outputs");
        detail::get_array(*outs, "outputs", doc.source + ": ", cat);
        std::unordered_set<graph::id_type> seen;
        for (std::size_t k = 0; k < outs->size(); ++k) {
            const json& v = (*outs)[k];
            const std::string kat = doc.source + ": outputs[" + std::to_string(k) + "]: ";
            if (!v.is_string()) throw error(cat, kat + "must be a tensor name, got " + detail::show_json(v));
            const auto name = v.get<std::string>();
            const auto id = g.find_tensor(name);
            if (!id) throw error(cat, kat + "'" + detail::clip(name) + "' is not a declared tensor");
            if (!seen.insert(*id).second) throw error(cat, kat + "tensor '" + detail::clip(name) + "' is listed twice");
            g.add_output(*id);
        }
    }

    try {
        validate(g);
    } catch (const error& e) {
        throw error(e.category(), doc.source + ": " + detail::bare_message(e));
    }
    return g;
} catch (const nlohmann::json::exception& e) {
    throw detail::json_failure(source_name, e);
}

/// Reads and checks a `memplan.graph` file (see `parse_graph_json`).
inline graph read_graph_json(const std::filesystem::path& path) {
    return parse_graph_json(detail::read_text_file(path), path.string());
}

/// The `memplan.graph` text of `g`: fixed field order, one tensor or op a
/// line; optional fields are written only when they differ from the default
/// (`persistent`, `variants`, `inplace`) so that files stay small.
inline std::string format_graph_json(const graph& g) {
    using detail::json;
    using detail::ordered_json;
    std::string out = "{\n  \"format\": \"memplan.graph\",\n  \"version\": 1,\n  \"name\": " + detail::dump_scalar(json(g.name())) +
                      ",\n";
    if (!g.cost_unit().empty()) out += "  \"cost_unit\": " + detail::dump_scalar(json(g.cost_unit())) + ",\n";
    if (!g.cost_model().empty()) out += "  \"cost_model\": " + detail::dump_scalar(json(g.cost_model())) + ",\n";
    std::vector<ordered_json> items;
    items.reserve(g.num_tensors());
    for (const auto& t : g.tensors()) {
        ordered_json j;
        j["name"] = t.name;
        j["bytes"] = t.bytes;
        if (t.persistent) j["persistent"] = true;
        items.push_back(std::move(j));
    }
    detail::dump_item_array("tensors", items, out);
    out += ",\n";

    auto names = [&](const std::vector<graph::id_type>& ids) {
        ordered_json a = ordered_json::array();
        for (auto t : ids) a.push_back(g.tensor(t).name);
        return a;
    };
    items.clear();
    items.reserve(g.num_ops());
    for (const auto& o : g.ops()) {
        ordered_json j;
        j["name"] = o.name;
        j["inputs"] = names(o.inputs);
        j["outputs"] = names(o.outputs);
        j["cost"] = o.cost;
        j["workspace"] = o.workspace;
        j["phase"] = std::string(to_string(o.phase));
        if (!o.variants.empty()) {
            ordered_json vs = ordered_json::array();
            for (const auto& v : o.variants) {
                ordered_json vj;
                vj["name"] = v.name;
                vj["cost"] = v.cost;
                vj["workspace"] = v.workspace;
                if (!v.inputs.empty()) vj["inputs"] = names(v.inputs);
                vs.push_back(std::move(vj));
            }
            j["variants"] = std::move(vs);
        }
        if (!o.inplace.empty()) {
            ordered_json ps = ordered_json::array();
            for (auto [x, y] : o.inplace) ps.push_back(ordered_json::array({g.tensor(x).name, g.tensor(y).name}));
            j["inplace"] = std::move(ps);
        }
        items.push_back(std::move(j));
    }
    detail::dump_item_array("ops", items, out);
    out += ",\n  \"outputs\": ";
    detail::dump_line(names(g.outputs()), out);
    out += "\n}\n";
    return out;
}

/// Writes `g` to `path` atomically: on any error no file is left behind.
inline void write_graph_json(const std::filesystem::path& path, const graph& g) {
    write_file_atomically(path, format_graph_json(g));
}

} // namespace memplan
