// What every subcommand of the memplan command shares: exit codes, the
// command descriptor, help, the options that need no planner (planners.hpp
// has those that choose one), and the printing of figures.
#pragma once

#include "args.hpp"
#include "format.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/core/deadline.hpp>
#include <memplan/core/error.hpp>
#include <memplan/core/registry.hpp>
#include <memplan/io/atomic_file.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/select.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/schedule/order/select.hpp>
#include <memplan/solver/select.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_negative = 1;
inline constexpr int exit_internal = 3;
inline constexpr int exit_infeasible = 4;

inline constexpr std::string_view default_allocator = "auto";
inline constexpr std::string_view report_allocator = "best_heuristic";
inline constexpr double default_time_limit = 10;
inline constexpr std::uint64_t default_alignment = 256;

/// A planner produced something the validator rejects: a bug, exit 3.
struct internal_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct command {
    std::string_view name;
    std::string_view synopsis; ///< "memplan plan GRAPH.json [-o PLAN.json] ..."
    std::string_view summary;  ///< one line for `memplan --help`
    std::string_view details;  ///< the rest of `memplan help NAME`
    int (*run)(const command&, const std::vector<std::string>&);
    void (*more_help)() = nullptr; ///< help text that depends on the build (planner lists)
};

inline void print_help(const command& c) {
    std::cout << "usage: " << c.synopsis << "\n\n" << c.summary << "\n";
    if (!c.details.empty()) std::cout << "\n" << c.details;
    if (c.more_help) c.more_help();
}

/// Parses the arguments of `c`; nullopt when it printed the help instead.
inline std::optional<parsed_args> parse_or_help(const command& c, const std::vector<std::string>& args,
                                         std::vector<option_spec> specs) {
    specs.push_back({{"--help", "-h"}, false});
    auto a = parse_args("memplan " + std::string(c.name), args, specs);
    if (a.has("--help")) {
        print_help(c);
        return std::nullopt;
    }
    // Output names are checked before any work: a typo costs no planning time.
    for (const auto* out : {"--output", "--svg"})
        if (const auto v = a.value(out)) memplan::check_output_path(*v);
    return a;
}

inline const option_spec alloc_option{{"--alloc", "--allocator"}, true};
inline const option_spec alignment_option{{"--alignment"}, true};
inline const option_spec solver_option{{"--solver"}, true};
inline const option_spec time_limit_option{{"--time-limit"}, true};
inline const option_spec json_option{{"--json"}, false};
inline const option_spec gap_option{{"--gap"}, true};
inline const option_spec order_option{{"--order"}, true};
inline const option_spec remat_option{{"--remat"}, true};

inline double time_limit_option_value(const parsed_args& a) {
    const auto v = a.value("--time-limit");
    if (!v) return default_time_limit;
    char* end = nullptr;
    const double t = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size() || !(t > 0) || t > 1e6)
        throw memplan::error("cli", "option --time-limit: expected a number of seconds > 0, got '" + *v + "'");
    return t;
}

/// The whole command's clock: --time-limit S from now (the command starts
/// by parsing its arguments). Every phase takes a share of what is left, so
/// the command ends within about S, whatever it runs.
inline memplan::deadline command_deadline(const parsed_args& a) {
    return memplan::deadline::after(time_limit_option_value(a));
}

/// --gap G: stop a search once within G (relative) of its lower bound;
/// unset: the planner's default (1e-4 for auto allocation and the orders).
inline std::optional<double> gap_option_value(const parsed_args& a) {
    const auto v = a.value("--gap");
    if (!v) return std::nullopt;
    char* end = nullptr;
    const double g = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size() || !(g >= 0) || g >= 1)
        throw memplan::error("cli", "option --gap: expected a fraction in [0, 1), got '" + *v + "'");
    return g;
}

/// The unit and model of a graph's costs, printed with every overhead: "us, roofline:v100".
inline std::string cost_label(const memplan::graph& g) {
    std::string s = g.cost_unit().empty() ? "no declared unit" : g.cost_unit();
    if (!g.cost_model().empty()) s += ", " + g.cost_model();
    return s;
}

inline std::string bytes_both(std::uint64_t b) { return human_bytes(b) + " (" + std::to_string(b) + " bytes)"; }

inline double ratio(std::uint64_t a, std::uint64_t b) {
    return b == 0 ? (a == 0 ? 1.0 : 0.0) : static_cast<double>(a) / static_cast<double>(b);
}

/// Prints every violation and the count; the exit code of a negative answer.
inline int print_invalid(const memplan::validation_report& report) {
    std::cout << report.to_string();
    std::cout << "invalid: " << report.violations.size() << (report.truncated ? "+" : "") << " violation"
              << (report.violations.size() == 1 ? "" : "s") << "\n";
    return exit_negative;
}

inline std::string percent(double fraction, int decimals = 2) { return fixed(100.0 * fraction, decimals) + " %"; }

inline std::string signed_percent(double fraction) {
    if (std::abs(fraction) < 5e-5) fraction = 0; // no "-0.00"
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    std::string s = fraction >= 0 ? "+" : "";
    s += fixed(100.0 * fraction, 2);
    s += " %";
    return s;
}

// The subcommands, one file each under commands/.
extern const command stats_command;
extern const command plan_command;
extern const command pareto_command;
extern const command check_command;
extern const command alloc_command;
extern const command check_csv_command;
extern const command import_csv_command;
extern const command import_checkmate_command;
extern const command zoo_command;
extern const command report_command;

} // namespace memplan::cli
