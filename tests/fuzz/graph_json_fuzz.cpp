// libFuzzer harness for the memplan.graph reader (io/graph_json.hpp).
// Bad input must end in memplan::error; an accepted graph must validate, plan
// with greedy_by_size into a plan check_plan accepts, and round-trip exactly
// through format_graph_json (fuzz_support.hpp has the checks).
#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    memplan::graph g;
    try {
        g = memplan::parse_graph_json(text, "fuzz.json");
    } catch (const memplan::error&) {
        return 0; // the promised outcome for bad input; anything else escapes
    }
    memplan_fuzz::check_accepted_graph(g);
    return 0;
}
