// The offset assignment CSV of formats.md §3, MiniMalloc's interchange format:
// a header row, then one buffer a row live on [lower, upper) with its size,
// and in solutions an `offset` column. Columns are found by name (others are
// ignored); every rejection names the file, the line and the field at fault.
#pragma once

#include <memplan/alloc/problem.hpp>
#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/io/atomic_file.hpp>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memplan {

/// A parsed offset CSV: row i is buffer `ids[i]`, item `problem.items[i]`
/// (begin = lower, end = upper, size), and `(*offsets)[i]` when the file has
/// an `offset` column.
struct offset_csv {
    std::vector<std::string> ids;
    alloc_problem problem;
    std::optional<std::vector<std::uint64_t>> offsets;
};

namespace detail {

inline std::vector<std::string_view> split_csv_row(std::string_view line) {
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = line.find(',', start);
        std::string_view f = line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
        while (!f.empty() && (f.back() == ' ' || f.back() == '\t')) f.remove_suffix(1);
        fields.push_back(f);
        if (comma == std::string_view::npos) return fields;
        start = comma + 1;
    }
}

inline std::uint64_t parse_csv_uint(std::string_view text, std::string_view where, std::string_view field) {
    auto bad = [&](const std::string& why) {
        return error("io", std::string(where) + ": field '" + std::string(field) + "': '" + std::string(text) + "' " + why);
    };
    if (text.empty()) throw error("io", std::string(where) + ": field '" + std::string(field) + "' is empty");
    if (text.front() == '-') throw bad("is negative");
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) throw bad("does not fit in 64 bits");
    if (ec != std::errc{} || ptr != text.data() + text.size()) throw bad("is not a non-negative integer");
    return v;
}

} // namespace detail

/// Parses offset CSV `text`; `source_name` (a file name) prefixes messages.
/// Throws `memplan::error` ("io") with `source:line` and the field for: an
/// empty file, a missing or repeated column, a row with the wrong number of
/// fields, an empty or repeated id, a non-integer or negative number,
/// lower > upper, or sizes that sum past 64 bits (no arena holds them). Accepts \r\n line endings and a trailing newline.
inline offset_csv parse_offset_csv(std::string_view text, std::string_view source_name) {
    const std::string src(source_name);
    auto at = [&](std::size_t line) { return src + ":" + std::to_string(line); };

    // Lines, without their \n or \r\n; trailing empty lines dropped.
    std::vector<std::string_view> lines;
    for (std::size_t start = 0; start < text.size();) {
        std::size_t nl = text.find('\n', start);
        if (nl == std::string_view::npos) nl = text.size();
        std::string_view line = text.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        start = nl + 1;
    }
    while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string_view::npos) lines.pop_back();
    if (lines.empty()) throw error("io", src + ": empty file; expected a header row 'id,lower,upper,size'");

    const auto header = detail::split_csv_row(lines[0]);
    constexpr std::size_t missing = static_cast<std::size_t>(-1);
    std::size_t col_id = missing, col_lower = missing, col_upper = missing, col_size = missing, col_offset = missing;
    for (std::size_t c = 0; c < header.size(); ++c) {
        std::size_t* slot = nullptr;
        if (header[c] == "id") slot = &col_id;
        else if (header[c] == "lower") slot = &col_lower;
        else if (header[c] == "upper") slot = &col_upper;
        else if (header[c] == "size") slot = &col_size;
        else if (header[c] == "offset") slot = &col_offset;
        if (!slot) continue;
        if (*slot != missing) throw error("io", at(1) + ": column '" + std::string(header[c]) + "' appears twice");
        *slot = c;
    }
    for (auto [col, name] : {std::pair{col_id, "id"}, {col_lower, "lower"}, {col_upper, "upper"}, {col_size, "size"}})
        if (col == missing)
            throw error("io", at(1) + ": missing column '" + std::string(name) + "' in the header row");

    offset_csv out;
    out.problem.alignment = 1;
    if (col_offset != missing) out.offsets.emplace();
    std::unordered_map<std::string_view, std::size_t> line_of_id;
    std::uint64_t total_size = 0;
    for (std::size_t l = 1; l < lines.size(); ++l) {
        const std::size_t line_no = l + 1;
        const auto where = at(line_no);
        const auto f = detail::split_csv_row(lines[l]);
        if (f.size() != header.size())
            throw error("io", where + ": expected " + std::to_string(header.size()) + " fields, found " +
                                  std::to_string(f.size()));
        const std::string_view id = f[col_id];
        if (id.empty()) throw error("io", where + ": field 'id' is empty");
        if (auto [it, fresh] = line_of_id.emplace(id, line_no); !fresh)
            throw error("io", where + ": field 'id': duplicate id '" + std::string(id) + "' (first on line " +
                                  std::to_string(it->second) + ")");
        const auto lower = detail::parse_csv_uint(f[col_lower], where, "lower");
        const auto upper = detail::parse_csv_uint(f[col_upper], where, "upper");
        const auto size = detail::parse_csv_uint(f[col_size], where, "size");
        if (lower > upper)
            throw error("io", where + ": field 'lower': " + std::to_string(lower) + " is after field 'upper': " +
                                  std::to_string(upper));
        const auto total = detail::checked_add(total_size, size);
        if (!total)
            throw error("io", where + ": field 'size': the sizes up to id '" + std::string(id) +
                                  "' sum past 2^64 bytes: no arena holds them");
        total_size = *total;
        out.ids.emplace_back(id);
        out.problem.items.push_back({size, lower, upper});
        if (out.offsets) out.offsets->push_back(detail::parse_csv_uint(f[col_offset], where, "offset"));
    }
    return out;
}

/// Reads and parses the offset CSV at `path`. Throws `memplan::error` ("io")
/// when the file cannot be read or is malformed.
inline offset_csv read_offset_csv(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error("io", "cannot open '" + path.string() + "' for reading");
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in.bad()) throw error("io", "cannot read '" + path.string() + "'");
    return parse_offset_csv(buf.view(), path.string());
}

/// The rows of `csv` with an `offset` column: `id,lower,upper,size,offset`.
/// Throws `memplan::error` ("io") when `offsets` does not have one entry per
/// row or an id cannot be written in CSV (a comma or line break in it).
inline std::string format_offset_csv(const offset_csv& csv, const std::vector<std::uint64_t>& offsets) {
    if (offsets.size() != csv.ids.size() || csv.problem.items.size() != csv.ids.size())
        throw error("io", "offset CSV: " + std::to_string(offsets.size()) + " offsets for " +
                              std::to_string(csv.ids.size()) + " rows");
    std::string out = "id,lower,upper,size,offset\n";
    out.reserve(out.size() + 48 * csv.ids.size());
    for (std::size_t i = 0; i < csv.ids.size(); ++i) {
        const auto& id = csv.ids[i];
        if (id.find_first_of(",\r\n") != std::string::npos)
            throw error("io", "offset CSV: id '" + id + "' of row " + std::to_string(i + 1) +
                                  " contains a comma or a line break");
        const auto& it = csv.problem.items[i];
        out += id;
        for (std::uint64_t v : {it.begin, it.end, it.size, offsets[i]}) {
            out += ',';
            out += std::to_string(v);
        }
        out += '\n';
    }
    return out;
}

/// Writes `format_offset_csv(csv, offsets)` to `path` atomically.
inline void write_offset_csv(const std::filesystem::path& path, const offset_csv& csv,
                             const std::vector<std::uint64_t>& offsets) {
    write_file_atomically(path, format_offset_csv(csv, offsets));
}

} // namespace memplan
