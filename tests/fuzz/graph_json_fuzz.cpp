// libFuzzer harness for the memplan.graph reader (io/graph_json.hpp).
// Bad input must end in memplan::error; an accepted graph must validate, plan
// with greedy_by_size into a plan check_plan accepts, and round-trip exactly
// through format_graph_json (fuzz_support.hpp has the checks).
#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = memplan_fuzz::as_text(data, size);
    // Bad input ends in memplan::error, as promised; an accepted graph is checked.
    if (const auto g = memplan_fuzz::accepted([&] { return memplan::parse_graph_json(text, "fuzz.json"); }))
        memplan_fuzz::check_accepted_graph(*g);
    return 0;
}
