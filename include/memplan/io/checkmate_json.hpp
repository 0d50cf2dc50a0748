// Import of the published rematerialization benchmark graphs (Checkmate,
// MLSys 2020; Moccasin, ICML 2023): networkx `node_link_data` JSON, one op a
// node producing one tensor, links as data dependencies (formats.md §4).
//
// Two variants exist. Checkmate's: `nodes[].id`, `cost_cpu` (cost),
// `cost_ram` (bytes), `backward`, links `{"source", "target"}`. Moccasin's
// random layered graphs: `nodes[].name` as the id, `duration`, `out_cost`,
// links `{"0": src, "1": dst}`. Node ids are not always a topological order:
// ops are ordered topologically, ties broken by the smaller id, and that
// order becomes the default schedule.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/io/detail/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memplan {

namespace detail {

/// A node key as text (ids may be integers or strings), plus its integer
/// value when it has one, for the "smaller id first" tie-break.
struct checkmate_key {
    std::string text;
    bool numeric = false;
    std::int64_t value = 0;
};

inline checkmate_key checkmate_key_of(const json& v, const std::string& at, std::string_view field) {
    if (v.is_number_integer()) return {std::to_string(v.get<std::int64_t>()), true, v.get<std::int64_t>()};
    if (v.is_string()) {
        checkmate_key k{v.get<std::string>(), false, 0};
        // "12" and 12 name the same node in files written by different tools.
        if (!k.text.empty() && k.text.find_first_not_of("0123456789") == std::string::npos && k.text.size() < 18) {
            k.numeric = true;
            k.value = std::stoll(k.text);
            k.text = std::to_string(k.value);
        }
        return k;
    }
    throw error("io", at + "field '" + std::string(field) + "' must be an integer or a string, got " + show_json(v));
}

/// A non-negative number; integral-valued floats are accepted (some tools
/// write sizes as 1234.0), fractions are rounded up for bytes.
inline double checkmate_number(const json& v, std::string_view field, const std::string& at) {
    if (!v.is_number())
        throw error("io", at + "field '" + std::string(field) + "' must be a number, got " + show_json(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0)
        throw error("io", at + "field '" + std::string(field) + "' must be a finite number >= 0, got " + show_json(v));
    return d;
}

inline std::uint64_t checkmate_bytes(const json& v, std::string_view field, const std::string& at) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    const double d = std::ceil(checkmate_number(v, field, at));
    if (d >= 18446744073709551616.0)
        throw error("io", at + "field '" + std::string(field) + "' does not fit 64 bits");
    return static_cast<std::uint64_t>(d);
}

} // namespace detail

/// Parses a Checkmate / Moccasin `node_link_data` document into a graph.
/// `source_name` prefixes every message; malformed input throws
/// `memplan::error` naming the node or link at fault.
inline graph parse_checkmate_json(std::string_view text, std::string_view source_name) try {
    using detail::json;
    constexpr std::string_view cat = "io";
    const auto doc = detail::parse_json_document(text, source_name, cat);
    const json& root = doc.root;
    if (!root.is_object()) throw error(cat, doc.source + ": the document must be a JSON object");
    const json& nodes = detail::get_array(detail::require_field(root, "nodes", doc.source + ": ", cat), "nodes",
                                          doc.source + ": ", cat);
    const json* links_field = detail::find_field(root, "links");
    if (!links_field) links_field = detail::find_field(root, "edges"); // networkx >= 3.4 writes "edges"
    if (!links_field) throw error(cat, doc.source + ": missing field 'links'");
    const json& links = detail::get_array(*links_field, "links", doc.source + ": ", cat);

    struct node_info {
        detail::checkmate_key key;
        std::string name;
        double cost = 1.0;
        std::uint64_t bytes = 0;
        bool backward = false;
    };
    std::vector<node_info> info;
    std::unordered_map<std::string, std::size_t> index_of;
    info.reserve(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const json& n = nodes[i];
        std::string at = doc.where("nodes", i, "nodes[" + std::to_string(i) + "]");
        if (!n.is_object()) throw error(cat, at + "must be an object, got " + detail::show_json(n));
        node_info x;
        const bool moccasin = !detail::find_field(n, "cost_ram") && detail::find_field(n, "out_cost");
        if (moccasin) {
            x.key = detail::checkmate_key_of(detail::require_field(n, "name", at, cat), at, "name");
            x.name = x.key.text;
            x.bytes = detail::checkmate_bytes(n["out_cost"], "out_cost", at);
            if (const json* d = detail::find_field(n, "duration")) x.cost = detail::checkmate_number(*d, "duration", at);
        } else {
            x.key = detail::checkmate_key_of(detail::require_field(n, "id", at, cat), at, "id");
            x.name = x.key.text;
            if (const json* nm = detail::find_field(n, "name"); nm && nm->is_string() && !nm->get<std::string>().empty())
                x.name = nm->get<std::string>();
            x.bytes = detail::checkmate_bytes(detail::require_field(n, "cost_ram", at, cat), "cost_ram", at);
            if (const json* c = detail::find_field(n, "cost_cpu")) x.cost = detail::checkmate_number(*c, "cost_cpu", at);
        }
        if (const json* b = detail::find_field(n, "backward")) x.backward = detail::get_bool(*b, "backward", at, cat);
        if (!index_of.emplace(x.key.text, i).second)
            throw error(cat, at + "node id '" + detail::clip(x.key.text) + "' is used by an earlier node");
        info.push_back(std::move(x));
    }
    // Names must be unique; layers of different passes often share one.
    {
        std::unordered_map<std::string, std::size_t> seen;
        for (const auto& x : info) ++seen[x.name];
        for (auto& x : info)
            if (seen[x.name] > 1 || (x.name != x.key.text && index_of.contains(x.name)))
                x.name += "#" + x.key.text;
    }

    const std::size_t n = info.size();
    std::vector<std::vector<std::size_t>> preds(n), succs(n);
    for (std::size_t i = 0; i < links.size(); ++i) {
        const json& l = links[i];
        std::string at = doc.where("links", i, "links[" + std::to_string(i) + "]");
        if (!l.is_object()) throw error(cat, at + "must be an object, got " + detail::show_json(l));
        const bool named = detail::find_field(l, "source") != nullptr;
        const char* src_key = named ? "source" : "0";
        const char* dst_key = named ? "target" : "1";
        auto endpoint = [&](const char* key) {
            const auto k = detail::checkmate_key_of(detail::require_field(l, key, at, cat), at, key);
            auto it = index_of.find(k.text);
            if (it == index_of.end())
                throw error(cat, at + "field '" + std::string(key) + "' names node '" + k.text + "' which does not exist");
            return it->second;
        };
        const std::size_t s = endpoint(src_key), d = endpoint(dst_key);
        if (s == d) throw error(cat, at + "node '" + detail::clip(info[s].name) + "' depends on itself");
        if (std::find(preds[d].begin(), preds[d].end(), s) == preds[d].end()) {
            preds[d].push_back(s);
            succs[s].push_back(d);
        }
    }

    // Topological order, ties by the smaller id (numeric ids compare as
    // numbers; other ids by their place in the file).
    auto rank = [&](std::size_t i) {
        return info[i].key.numeric ? info[i].key.value : static_cast<std::int64_t>(i);
    };
    auto later = [&](std::size_t a, std::size_t b) { return rank(a) > rank(b) || (rank(a) == rank(b) && a > b); };
    std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> ready(later);
    std::vector<std::size_t> indegree(n);
    for (std::size_t i = 0; i < n; ++i)
        if ((indegree[i] = preds[i].size()) == 0) ready.push(i);
    std::vector<std::size_t> order;
    order.reserve(n);
    while (!ready.empty()) {
        const std::size_t i = ready.top();
        ready.pop();
        order.push_back(i);
        for (auto s : succs[i])
            if (--indegree[s] == 0) ready.push(s);
    }
    if (order.size() != n) {
        for (std::size_t i = 0; i < n; ++i)
            if (indegree[i] != 0)
                throw error(cat, doc.source + ": the links form a cycle through node '" + detail::clip(info[i].name) + "'");
    }

    std::string name = std::filesystem::path(std::string(source_name)).stem().string();
    if (const json* gr = detail::find_field(root, "graph"); gr && gr->is_object())
        if (const json* nm = detail::find_field(*gr, "name"); nm && nm->is_string() && !nm->get<std::string>().empty())
            name = nm->get<std::string>();
    graph g(name);
    std::vector<graph::id_type> tensor_of(n);
    for (std::size_t i = 0; i < n; ++i) tensor_of[i] = g.add_tensor(info[i].name, info[i].bytes);
    for (const std::size_t i : order) {
        op o;
        o.name = info[i].name;
        o.cost = info[i].cost;
        o.phase = info[i].backward ? phase::backward : phase::forward;
        auto p = preds[i];
        std::sort(p.begin(), p.end(), [&](std::size_t a, std::size_t b) { return later(b, a); });
        for (auto s : p) o.inputs.push_back(tensor_of[s]);
        o.outputs.push_back(tensor_of[i]);
        g.add_op(std::move(o));
    }
    try {
        validate(g);
    } catch (const error& e) {
        throw error(cat, doc.source + ": " + detail::bare_message(e));
    }
    return g;
} catch (const nlohmann::json::exception& e) {
    throw detail::json_failure(source_name, e);
}

/// Reads a Checkmate / Moccasin graph file (see `parse_checkmate_json`).
inline graph read_checkmate_json(const std::filesystem::path& path) {
    return parse_checkmate_json(detail::read_text_file(path), path.string());
}

} // namespace memplan
