// Reading and writing `memplan.plan` version 1 (formats.md §2).
//
// A plan names ops, variants and tensors; they are resolved against the graph
// it was made for, and an unknown name is rejected with the line and item at
// fault. Whether the plan is *valid* (rules 1-7) is not the reader's business:
// that is check/validator.hpp's, so a broken plan still loads and can be
// reported violation by violation. Round trips are exact.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/io/atomic_file.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/schedule/plan.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// Parses a `memplan.plan` document for graph `g`. Throws `memplan::error`
/// naming `source_name`, the line and the item for malformed JSON, bad fields,
/// and op, variant or tensor names that `g` does not have.
inline plan parse_plan_json(std::string_view text, const graph& g, std::string_view source_name) try {
    using detail::json;
    constexpr std::string_view cat = "io";
    const auto doc = detail::parse_json_document(text, source_name, cat);
    detail::check_header(doc, "memplan.plan", cat);
    const json& root = doc.root;
    const std::string top = doc.source + ": ";

    plan p;
    p.graph = detail::get_string(detail::require_field(root, "graph", top, cat), "graph", top, cat);
    p.alignment = detail::get_u64(detail::require_field(root, "alignment", top, cat), "alignment", top, cat);
    p.arena_bytes = detail::get_u64(detail::require_field(root, "arena_bytes", top, cat), "arena_bytes", top, cat);

    auto get_index = [&](const json& v, std::string_view key, const std::string& at) -> std::size_t {
        const std::uint64_t x = detail::get_u64(v, key, at, cat);
        if (x > std::numeric_limits<std::size_t>::max())
            throw error(cat, at + "field '" + std::string(key) + "' is too large for a step index");
        return static_cast<std::size_t>(x);
    };

    const json& steps = detail::get_array(detail::require_field(root, "steps", top, cat), "steps", top, cat);
    p.steps.reserve(steps.size());
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const json& s = steps[i];
        std::string at = doc.where("steps", i, "steps[" + std::to_string(i) + "]");
        if (!s.is_object()) throw error(cat, at + "must be an object, got " + detail::show_json(s));
        const auto name = detail::get_string(detail::require_field(s, "op", at, cat), "op", at, cat);
        const auto o = g.find_op(name);
        if (!o) throw error(cat, at + "op '" + detail::clip(name) + "' is not an op of graph '" + g.name() + "'");
        step st;
        st.op = *o;
        if (const json* v = detail::find_field(s, "variant")) {
            const auto vname = detail::get_string(*v, "variant", at, cat);
            const auto k = g.find_variant(*o, vname);
            if (!k)
                throw error(cat, at + "variant '" + detail::clip(vname) + "' is not one of op '" + detail::clip(name) + "''s variants" +
                                     (g.op(*o).has_variants() ? "" : " (it has none)"));
            st.variant = *k;
        }
        p.steps.push_back(st);
    }

    const json& buffers = detail::get_array(detail::require_field(root, "buffers", top, cat), "buffers", top, cat);
    p.buffers.reserve(buffers.size());
    for (std::size_t i = 0; i < buffers.size(); ++i) {
        const json& b = buffers[i];
        std::string at = doc.where("buffers", i, "buffers[" + std::to_string(i) + "]");
        if (!b.is_object()) throw error(cat, at + "must be an object, got " + detail::show_json(b));
        buffer x;
        const json* t = detail::find_field(b, "tensor");
        const json* w = detail::find_field(b, "workspace");
        if ((t != nullptr) == (w != nullptr))
            throw error(cat, at + "needs exactly one of the fields 'tensor' and 'workspace'");
        if (t) {
            const auto name = detail::get_string(*t, "tensor", at, cat);
            const auto id = g.find_tensor(name);
            if (!id) throw error(cat, at + "tensor '" + detail::clip(name) + "' is not a tensor of graph '" + g.name() + "'");
            x.tensor = *id;
            at = doc.where("buffers", i, "buffers[" + std::to_string(i) + "] (tensor '" + detail::clip(name) + "')");
        } else {
            x.step = get_index(*w, "workspace", at);
            at = doc.where("buffers", i, "buffers[" + std::to_string(i) + "] (workspace of step " +
                                             std::to_string(x.step) + ")");
        }
        x.offset = detail::get_u64(detail::require_field(b, "offset", at, cat), "offset", at, cat);
        x.bytes = detail::get_u64(detail::require_field(b, "bytes", at, cat), "bytes", at, cat);
        x.first = get_index(detail::require_field(b, "first", at, cat), "first", at);
        x.last = get_index(detail::require_field(b, "last", at, cat), "last", at);
        if (const json* a = detail::find_field(b, "alias")) {
            const auto name = detail::get_string(*a, "alias", at, cat);
            const auto id = g.find_tensor(name);
            if (!id) throw error(cat, at + "alias '" + detail::clip(name) + "' is not a tensor of graph '" + g.name() + "'");
            x.alias = *id;
        }
        p.buffers.push_back(x);
    }
    return p;
} catch (const nlohmann::json::exception& e) {
    throw detail::json_failure(source_name, e);
}

/// Reads a `memplan.plan` file for graph `g` (see `parse_plan_json`).
inline plan read_plan_json(const std::filesystem::path& path, const graph& g) {
    return parse_plan_json(detail::read_text_file(path), g, path.string());
}

/// The `memplan.plan` text of `p`, one step or buffer a line. Throws
/// `memplan::error` when `p` names an op, variant or tensor id that `g` lacks.
inline std::string format_plan_json(const graph& g, const plan& p) {
    using detail::json;
    using detail::ordered_json;
    auto tensor_name = [&](graph::id_type t, std::string_view what) -> const std::string& {
        if (t >= g.num_tensors())
            throw error("io", "cannot write the plan: " + std::string(what) + " names tensor id " + std::to_string(t) +
                                  " which graph '" + g.name() + "' lacks");
        return g.tensor(t).name;
    };
    std::string out = "{\n  \"format\": \"memplan.plan\",\n  \"version\": 1,\n  \"graph\": " + detail::dump_scalar(json(p.graph)) +
                      ",\n  \"alignment\": " + std::to_string(p.alignment) +
                      ",\n  \"arena_bytes\": " + std::to_string(p.arena_bytes) + ",\n";
    std::vector<ordered_json> items;
    items.reserve(p.steps.size());
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
        const auto& st = p.steps[i];
        if (st.op >= g.num_ops())
            throw error("io", "cannot write the plan: step " + std::to_string(i) + " names op id " +
                                  std::to_string(st.op) + " which graph '" + g.name() + "' lacks");
        ordered_json j;
        j["op"] = g.op(st.op).name;
        if (st.has_variant()) {
            const auto& vs = g.op(st.op).variants;
            if (st.variant >= vs.size())
                throw error("io", "cannot write the plan: step " + std::to_string(i) + " (op '" + g.op(st.op).name +
                                      "') names variant #" + std::to_string(st.variant) + " which it lacks");
            j["variant"] = vs[st.variant].name;
        }
        items.push_back(std::move(j));
    }
    detail::dump_item_array("steps", items, out);
    out += ",\n";
    items.clear();
    items.reserve(p.buffers.size());
    for (std::size_t i = 0; i < p.buffers.size(); ++i) {
        const auto& b = p.buffers[i];
        const std::string what = "buffer " + std::to_string(i);
        ordered_json j;
        if (b.is_workspace()) j["workspace"] = static_cast<std::uint64_t>(b.step);
        else j["tensor"] = tensor_name(b.tensor, what);
        j["offset"] = b.offset;
        j["bytes"] = b.bytes;
        j["first"] = static_cast<std::uint64_t>(b.first);
        j["last"] = static_cast<std::uint64_t>(b.last);
        if (b.has_alias()) j["alias"] = tensor_name(b.alias, what + " alias");
        items.push_back(std::move(j));
    }
    detail::dump_item_array("buffers", items, out);
    out += "\n}\n";
    return out;
}

/// Writes plan `p` of graph `g` to `path` atomically.
inline void write_plan_json(const std::filesystem::path& path, const graph& g, const plan& p) {
    write_file_atomically(path, format_plan_json(g, p));
}

} // namespace memplan
