// The Pareto curve of remat/pareto.hpp as CSV, one row per point:
// `budget_bytes,arena_bytes,overhead,planner,status,seconds`, and its atomic
// write to a file (what `memplan pareto --output` writes).
#pragma once

#include <memplan/io/atomic_file.hpp>
#include <memplan/remat/pareto.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace memplan {

/// The curve as CSV: `budget_bytes,arena_bytes,overhead,planner,status,seconds`
/// (overhead as a fraction; arena 0 and overhead empty where no plan).
template <class Size, class Id>
std::string pareto_csv(const std::vector<basic_pareto_point<Size, Id>>& points) {
    std::string s = "budget_bytes,arena_bytes,overhead,planner,status,seconds\n";
    char buf[64];
    for (const auto& p : points) {
        const bool ok = has_solution(p.result.status);
        s += std::to_string(p.budget);
        s += ',';
        s += ok ? std::to_string(p.result.arena()) : std::string("0");
        s += ',';
        if (ok) {
            const double o = p.result.overhead();
            std::snprintf(buf, sizeof buf, "%.6f", std::abs(o) < 5e-7 ? 0.0 : o); // no "-0.000000" from rounding
            s += buf;
        }
        s += ',';
        // Planner names are identifiers; keep the CSV unquoted.
        for (char c : p.result.planner) s += (c == ',' || c == '\n' || c == '"') ? '_' : c;
        s += ',';
        s += to_string(p.result.status);
        s += ',';
        std::snprintf(buf, sizeof buf, "%.3f", p.seconds);
        s += buf;
        s += '\n';
    }
    return s;
}

/// Writes `pareto_csv(points)` to `path` atomically; throws `memplan::error`
/// ("io") naming the path on failure, leaving any existing file as it was.
template <class Size, class Id>
void write_pareto_csv(const std::filesystem::path& path, const std::vector<basic_pareto_point<Size, Id>>& points) {
    write_file_atomically(path, pareto_csv(points));
}

} // namespace memplan
