// Small text helpers of the memplan command: human-readable sizes and times,
// and a plain-text table whose columns size themselves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace memplan::cli {

/// "512 B", "1.50 KiB", "24.50 MiB", "1.20 GiB".
inline std::string human_bytes(std::uint64_t bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double v = static_cast<double>(bytes);
    std::size_t u = 0;
    while (v >= 1024.0 && u + 1 < std::size(units)) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

/// "0.042 ms", "12.3 ms", "4.21 s" (plain ASCII, three significant digits).
inline std::string human_seconds(double s) {
    char buf[32];
    if (s < 1.0) std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
    else std::snprintf(buf, sizeof buf, "%.3g s", s);
    return buf;
}

/// A number with a fixed count of decimals.
inline std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

/// A text table: the first row is the header; columns after the first are
/// right-aligned (numbers).
class text_table {
public:
    void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

    std::string str() const {
        std::vector<std::size_t> width;
        for (const auto& r : rows_) {
            if (width.size() < r.size()) width.resize(r.size(), 0);
            for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
        }
        std::string out;
        for (std::size_t i = 0; i < rows_.size(); ++i) {
            const auto& r = rows_[i];
            std::string line;
            for (std::size_t c = 0; c < r.size(); ++c) {
                if (c) line += "  ";
                const std::string pad(width[c] - r[c].size(), ' ');
                line += c == 0 ? r[c] + pad : pad + r[c];
            }
            while (!line.empty() && line.back() == ' ') line.pop_back();
            out += line + "\n";
            if (i == 0) {
                std::size_t total = 0;
                for (auto w : width) total += w;
                out += std::string(total + 2 * (width.empty() ? 0 : width.size() - 1), '-') + "\n";
            }
        }
        return out;
    }

private:
    std::vector<std::vector<std::string>> rows_;
};

} // namespace memplan::cli
