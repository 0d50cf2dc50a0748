// memplan alloc: assigns offsets to an offset CSV instance (id,lower,upper,size), e.g. MiniMalloc's.
#include "planners.hpp"

#include <memplan/alloc/problem.hpp>
#include <memplan/io/offset_csv.hpp>

namespace memplan::cli {

namespace {

int run_alloc(const command& c, const std::vector<std::string>& args) {
    const auto a = parse_or_help(
        c, args,
        {{{"--input", "-i"}, true}, {{"--output", "-o"}, true}, {{"--capacity"}, true}, alloc_option, solver_option,
         time_limit_option, gap_option});
    if (!a) return exit_ok;
    a->expect_positional(0, 0, "");
    const auto input = a->required("--input");
    const auto output = a->required("--output");
    auto allocator = allocator_option(*a);
    // Offsets are this command's only result: it searches to the bound or to
    // its time limit (plan, where allocation is one step of several, stops
    // within auto's default gap).
    if (!allocator.settings.gap) allocator.settings.gap = 0.0;
    const auto capacity = a->integer_or("--capacity", 0, 1);
    auto csv = memplan::read_offset_csv(input);
    csv.problem.alignment = 1;
    csv.problem.capacity = capacity;

    const auto r = allocator.entry->run(csv.problem, allocator.settings);
    clear_progress();
    if (!memplan::has_solution(r.status)) {
        std::cout << "allocator:   " << allocator.name() << "\n"
                  << "status:      " << memplan::to_string(r.status) << (r.message.empty() ? "" : ": ")
                  << r.message << "\n";
        return exit_negative;
    }
    const auto report = memplan::check_placement(csv.problem, r.offsets, std::uint64_t{0}, {}, csv.ids);
    if (!report.ok())
        throw internal_error("allocator '" + allocator.name() + "' made an invalid placement of '" + input + "':\n" +
                             report.to_string());
    const auto height = memplan::placement_height(csv.problem, r.offsets);
    const auto lb = memplan::lower_bound(csv.problem);
    const bool fits = capacity == 0 || height <= capacity;
    if (fits) memplan::write_offset_csv(output, csv, r.offsets); // before any output: a failure is one line
    std::cout << "buffers:     " << csv.ids.size() << "\n"
              << "allocator:   " << allocator.name() << " (" << memplan::to_string(r.status) << ")\n"
              << "height:      " << bytes_both(height) << "\n"
              << "lower bound: " << bytes_both(lb) << "\n"
              << "height / LB: " << memplan::cli::fixed(ratio(height, lb), 4) << "\n"
              << "time:        " << memplan::cli::human_seconds(r.seconds) << "\n";
    if (!r.message.empty()) std::cout << "note:        " << r.message << "\n";
    if (!fits) {
        std::cout << "over capacity: height " << height << " > capacity " << capacity << "; nothing written\n";
        return exit_negative;
    }
    std::cout << "wrote " << output << "\n";
    return exit_ok;
}

} // namespace

const command alloc_command{
    "alloc",
    "memplan alloc --input IN.csv --output OUT.csv [--capacity BYTES] [--alloc NAME] [--solver NAME]\n"
    "                          [--time-limit S]",
    "Assigns offsets to an offset CSV instance (id,lower,upper,size), e.g. MiniMalloc's.",
    "  -i, --input IN.csv      the instance\n"
    "  -o, --output OUT.csv    the rows with an offset column appended\n"
    "  --capacity BYTES        find a placement within it (exact/milp decide; others are checked);\n"
    "                          exit 1 and write nothing when none was found\n"
    "  --alloc NAME            allocator: auto (default: the best heuristic, then the exact search\n"
    "                          until the arena meets the lower bound or the time limit), no_reuse,\n"
    "                          greedy_by_size, greedy_by_lifetime, online_best_fit, best_heuristic,\n"
    "                          exact, milp (the offset MILP on --solver)\n"
    "  --solver NAME           MILP backend for milp and --order ilp: glpk (default) or cbc\n"
    "  --time-limit S          the whole command ends within about S seconds (default 10)\n"
    "  --gap G                 auto, exact, milp stop within G of the lower bound (default 0: at the\n"
    "                          bound, or at the time limit)\n"
    "Long searches print their progress on stderr when it is a terminal.\n",
    run_alloc, print_planner_lists};

} // namespace memplan::cli
