// JSON reading helpers shared by memplan's readers (graph, plan, Checkmate
// import): parsing with line/column positions, per-item line numbers for
// messages, and typed field getters that reject wrong types with the item
// and field at fault.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/io/atomic_file.hpp>

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

namespace detail {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

/// 1-based line and column of byte `pos` of `text` (clamped to the end).
inline std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t pos) {
    pos = std::min(pos, text.size());
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i < pos; ++i)
        if (text[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    return {line, pos - line_start + 1};
}

// A char iterator that remembers the furthest byte the parser has looked at.
// nlohmann 3.11 reports no positions for values, so the SAX scanner below
// reads this counter to learn on which line each array item starts.
class tracking_iterator {
public:
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    tracking_iterator() = default;
    tracking_iterator(const char* begin, const char* p, std::size_t* seen) : begin_(begin), p_(p), seen_(seen) {}

    reference operator*() const {
        if (seen_) *seen_ = static_cast<std::size_t>(p_ - begin_);
        return *p_;
    }
    tracking_iterator& operator++() {
        ++p_;
        return *this;
    }
    tracking_iterator operator++(int) {
        auto old = *this;
        ++p_;
        return old;
    }
    friend bool operator==(const tracking_iterator& a, const tracking_iterator& b) { return a.p_ == b.p_; }

private:
    const char* begin_ = nullptr;
    const char* p_ = nullptr;
    std::size_t* seen_ = nullptr;
};

/// A parsed JSON file and where the items of its top-level arrays start:
/// `item_lines["ops"][3]` is the line of `ops[3]`.
struct json_document {
    json root;
    std::string source;
    std::unordered_map<std::string, std::vector<std::size_t>> item_lines;

    /// "source:line: item: " (the line only when known).
    std::string where(std::string_view array, std::size_t index, std::string_view item) const {
        std::string s = source;
        if (auto it = item_lines.find(std::string(array)); it != item_lines.end() && index < it->second.size())
            s += ":" + std::to_string(it->second[index]);
        return s + ": " + std::string(item) + ": ";
    }
    /// "source: field: " for top-level fields.
    std::string where(std::string_view field) const { return source + ": " + std::string(field) + ": "; }
};

/// What a reader throws when nlohmann throws after all (it should not: the
/// readers check types before they convert): the library's promise is that
/// bad input raises `memplan::error` and nothing else.
inline error json_failure(std::string_view source, const nlohmann::json::exception& e) {
    return error("io", std::string(source) + ": JSON error: " + e.what());
}

/// Strips the "[memplan.category] " prefix from an error's text.
inline std::string bare_message(const error& e) {
    std::string_view w = e.what();
    const std::string prefix = "[memplan." + e.category() + "] ";
    if (w.substr(0, prefix.size()) == prefix) w.remove_prefix(prefix.size());
    return std::string(w);
}

/// Deepest nesting of arrays and objects a memplan document may have. The
/// formats need 4 levels; the limit keeps hostile input (a file of 100,000
/// `[`) from exhausting the stack of anything that walks the value
/// recursively (printing it, comparing it, freeing it).
inline constexpr std::size_t max_json_depth = 256;

// A SAX handler that builds nothing: it checks the nesting depth, notes on
// which line each item of a top-level array starts, and keeps the position
// and reason of the first error (nlohmann's DOM parser throws errors without
// a position for some of them, such as a number beyond double range). Its
// callback parser would note lines in one pass, but it rescans the parent
// array at every object end: quadratic.
struct item_line_scanner {
    using json_t = json;
    std::string_view text;
    const std::size_t* seen = nullptr; ///< furthest byte read, from tracking_iterator
    std::unordered_map<std::string, std::vector<std::size_t>>* item_lines = nullptr;

    enum class kind : char { object, array };
    std::vector<kind> stack;
    std::string top_key;
    std::size_t counted = 0, line = 1; // the parser only moves forward: count lines incrementally

    std::size_t error_byte = 0; ///< where the first error is (0-based)
    std::string error_reason;   ///< empty while there is none

    void note_item() {
        if (stack.size() != 2 || stack[0] != kind::object || stack[1] != kind::array) return;
        for (const std::size_t end = std::min(*seen, text.size()); counted < end; ++counted)
            if (text[counted] == '\n') ++line;
        (*item_lines)[top_key].push_back(line);
    }
    bool scalar() {
        note_item();
        return true;
    }
    bool open(kind k) {
        note_item();
        if (stack.size() >= max_json_depth) {
            error_byte = *seen;
            error_reason = "arrays and objects nested deeper than " + std::to_string(max_json_depth) +
                           " levels (no memplan document needs more)";
            return false;
        }
        stack.push_back(k);
        return true;
    }
    bool null() { return scalar(); }
    bool boolean(bool) { return scalar(); }
    bool number_integer(json::number_integer_t) { return scalar(); }
    bool number_unsigned(json::number_unsigned_t) { return scalar(); }
    bool number_float(json::number_float_t, const json::string_t&) { return scalar(); }
    bool string(json::string_t&) { return scalar(); }
    bool binary(json::binary_t&) { return scalar(); }
    bool start_object(std::size_t) { return open(kind::object); }
    bool start_array(std::size_t) { return open(kind::array); }
    bool end_object() {
        stack.pop_back();
        return true;
    }
    bool end_array() {
        stack.pop_back();
        return true;
    }
    bool key(json::string_t& k) {
        if (stack.size() == 1) top_key = k;
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
        error_byte = position == 0 ? 0 : position - 1;
        // nlohmann: "[json.exception.parse_error.101] parse error at line 3, column 5: <reason>" or
        // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
        std::string reason = e.what();
        const bool syntax = reason.rfind("[json.exception.parse_error", 0) == 0;
        if (auto colon = reason.find(": "); syntax && colon != std::string::npos) reason = reason.substr(colon + 2);
        else if (auto close = reason.find("] "); close != std::string::npos) reason = reason.substr(close + 2);
        error_reason = (syntax ? "JSON syntax error: " : "JSON error: ") + reason;
        return false;
    }
};

/// Parses `text`; a syntax error, a number beyond the range of a double or
/// nesting deeper than `max_json_depth` throws `error(category)` naming the
/// source, line and column.
inline json_document parse_json_document(std::string_view text, std::string_view source,
                                         std::string_view category) {
    json_document doc;
    doc.source = std::string(source);
    const char* b = text.data();
    const char* e = b + text.size();
    // First pass, SAX, building nothing: depth, positions of errors, lines of the items.
    std::size_t seen = 0;
    item_line_scanner scanner;
    scanner.text = text;
    scanner.seen = &seen;
    scanner.item_lines = &doc.item_lines;
    if (!json::sax_parse(tracking_iterator(b, b, &seen), tracking_iterator(b, e, &seen), &scanner)) {
        const auto [line, column] = line_column(text, scanner.error_byte);
        throw error(category, std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                                  (scanner.error_reason.empty() ? "JSON syntax error" : scanner.error_reason));
    }
    // Second pass builds the value; the text is known good.
    try {
        doc.root = json::parse(b, e);
    } catch (const json::exception& err) { // not expected after the first pass; translated all the same
        throw error(category, std::string(source) + ": JSON error: " + err.what());
    }
    return doc;
}

namespace json_excerpt {

/// Appends a rendering of `v` to `out`, stopping once `out` holds more than
/// `limit` characters: work and output stay bounded whatever the value's size.
inline void append(const json& v, std::string& out, std::size_t limit) {
    if (out.size() > limit) return;
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        out += json(s.substr(0, std::min<std::size_t>(s.size(), limit + 1))).dump(
            -1, ' ', false, json::error_handler_t::replace);
    } else if (v.is_array()) {
        out += '[';
        bool first = true;
        for (const auto& x : v) {
            if (out.size() > limit) return;
            if (!first) out += ',';
            first = false;
            append(x, out, limit);
        }
        out += ']';
    } else if (v.is_object()) {
        out += '{';
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (out.size() > limit) return;
            if (!first) out += ',';
            first = false;
            append(json(it.key()), out, limit);
            out += ':';
            append(it.value(), out, limit);
        }
        out += '}';
    } else {
        out += v.dump();
    }
}

} // namespace json_excerpt

/// A short rendering of a JSON value for messages.
/// At most 60 characters of it, however large or deep the value is.
inline std::string show_json(const json& v) {
    constexpr std::size_t limit = 60;
    std::string s;
    json_excerpt::append(v, s, limit);
    if (s.size() > limit) s = s.substr(0, limit - 3) + "...";
    return v.is_string() ? "the string " + s : s;
}

/// A name for a message: at most 60 characters of it (a hostile file may
/// hold a name of megabytes).
inline std::string clip(std::string_view name) {
    constexpr std::size_t limit = 60;
    return name.size() <= limit ? std::string(name) : std::string(name.substr(0, limit - 3)) + "...";
}

/// Field access with messages that name the place: `at` is the prefix made
/// by `json_document::where`.
inline const json* find_field(const json& obj, std::string_view key) {
    auto it = obj.find(std::string(key));
    return it == obj.end() ? nullptr : &*it;
}

inline const json& require_field(const json& obj, std::string_view key, const std::string& at,
                                 std::string_view category) {
    if (const json* v = find_field(obj, key)) return *v;
    throw error(category, at + "missing field '" + std::string(key) + "'");
}

inline std::string get_string(const json& v, std::string_view key, const std::string& at, std::string_view category) {
    if (!v.is_string())
        throw error(category, at + "field '" + std::string(key) + "' must be a string, got " + show_json(v));
    return v.get<std::string>();
}

inline std::uint64_t get_u64(const json& v, std::string_view key, const std::string& at, std::string_view category) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    std::string why;
    if (v.is_number_integer()) why = "it is negative";
    else if (v.is_number_float()) {
        const double d = v.get<double>();
        if (d < 0) why = "it is negative";
        else if (std::floor(d) != d) why = "it is not an integer";
        else if (d >= 18446744073709551616.0) why = "it does not fit 64 bits";
        else why = "write it as an integer, without a fraction or an exponent";
    }
    else why = "it is not a number";
    throw error(category, at + "field '" + std::string(key) + "' must be an integer >= 0, got " + show_json(v) +
                              " (" + why + ")");
}

inline double get_double(const json& v, std::string_view key, const std::string& at, std::string_view category) {
    if (!v.is_number())
        throw error(category, at + "field '" + std::string(key) + "' must be a number, got " + show_json(v));
    return v.get<double>();
}

inline bool get_bool(const json& v, std::string_view key, const std::string& at, std::string_view category) {
    if (!v.is_boolean())
        throw error(category, at + "field '" + std::string(key) + "' must be true or false, got " + show_json(v));
    return v.get<bool>();
}

inline const json& get_array(const json& v, std::string_view key, const std::string& at, std::string_view category) {
    if (!v.is_array())
        throw error(category, at + "field '" + std::string(key) + "' must be an array, got " + show_json(v));
    return v;
}

/// Checks `"format"` and `"version"` of a document's top-level object.
inline void check_header(const json_document& doc, std::string_view format, std::string_view category) {
    if (!doc.root.is_object())
        throw error(category, doc.source + ": the top level must be a JSON object, got " + show_json(doc.root));
    const auto& f = require_field(doc.root, "format", doc.source + ": ", category);
    if (!f.is_string() || f.get<std::string>() != format)
        throw error(category, doc.where("format") + "must be \"" + std::string(format) + "\", got " + show_json(f));
    const auto& v = require_field(doc.root, "version", doc.source + ": ", category);
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() != 1)
        throw error(category, doc.where("version") + "version " + show_json(v) + " is not supported (only 1 is)");
}

/// Reads a whole file; throws `error("io")` naming it when it cannot.
inline std::string read_text_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw error("io", "cannot read '" + path.string() + "': it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error("io", "cannot open '" + path.string() + "' for reading");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw error("io", "cannot read '" + path.string() + "'");
    return std::move(ss).str();
}

/// The JSON text of scalar `v`; a string that is not valid UTF-8 (a name a
/// program made) throws `error("io")` instead of nlohmann's type_error.
template <class Json>
std::string dump_scalar(const Json& v) {
    try {
        return v.dump();
    } catch (const nlohmann::json::exception&) {
        throw error("io", "cannot write " + v.dump(-1, ' ', false, Json::error_handler_t::replace) +
                              ": it is not valid UTF-8");
    }
}

// One JSON value on one line with ", " and ": " separators (nlohmann's
// compact dump has none); strings and numbers go through nlohmann, so
// escaping and the shortest round-trip form of doubles are its.
inline void dump_line(const ordered_json& v, std::string& out) {
    if (v.is_object()) {
        out += '{';
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!first) out += ", ";
            first = false;
            out += dump_scalar(json(it.key()));
            out += ": ";
            dump_line(it.value(), out);
        }
        out += '}';
    } else if (v.is_array()) {
        out += '[';
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (i) out += ", ";
            dump_line(v[i], out);
        }
        out += ']';
    } else {
        out += dump_scalar(v);
    }
}

/// Writes `"key": [` + one item a line + `]`.
inline void dump_item_array(std::string_view key, const std::vector<ordered_json>& items, std::string& out) {
    out += "  " + dump_scalar(json(std::string(key))) + ": [";
    for (std::size_t i = 0; i < items.size(); ++i) {
        out += i ? ",\n    " : "\n    ";
        dump_line(items[i], out);
    }
    out += items.empty() ? "]" : "\n  ]";
}

} // namespace detail

} // namespace memplan
