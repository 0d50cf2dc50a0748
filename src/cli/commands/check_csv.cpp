// memplan check-csv: checks an offset CSV that has an offset column (ours or MiniMalloc's).
#include "common.hpp"

#include <memplan/alloc/problem.hpp>
#include <memplan/io/offset_csv.hpp>

namespace memplan::cli {

namespace {

int run_check_csv(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(c, args, {{{"--capacity"}, true}});
    if (!a) return exit_ok;
    a->expect_positional(1, 1, "OFFSETS.csv");
    const auto capacity = a->integer_or("--capacity", 0, 1);
    const auto csv = memplan::read_offset_csv(a->positional[0]);
    if (!csv.offsets) throw memplan::error("cli", a->positional[0] + ": the file has no 'offset' column to check");
    const auto report = memplan::check_placement(csv.problem, *csv.offsets, capacity, {}, csv.ids);
    if (report.ok()) {
        const auto height = memplan::placement_height(csv.problem, *csv.offsets);
        const auto lb = memplan::lower_bound(csv.problem);
        std::cout << "valid: height " << height << ", lower bound " << lb << ", height / LB "
                  << memplan::cli::fixed(ratio(height, lb), 4) << "\n";
        return exit_ok;
    }
    return print_invalid(report);
}

} // namespace

const command check_csv_command{
    "check-csv", "memplan check-csv OFFSETS.csv [--capacity BYTES]",
    "Checks an offset CSV that has an offset column (ours or MiniMalloc's).",
    "Prints \"valid\" with the height and exits 0, or prints every violation and exits 1.\n",
    run_check_csv};

} // namespace memplan::cli
