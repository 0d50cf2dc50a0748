// libFuzzer harness for the memplan.plan reader (io/plan_json.hpp), against a
// fixed graph (examples/graphs/mlp-train.json, embedded: no file I/O while
// fuzzing). Bad input must end in memplan::error; an accepted plan is judged
// by check_plan (a report, never a throw) and round-trips exactly.
#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

// A copy of examples/graphs/mlp-train.json: persistent tensors, a variant
// and in-place pairs, so that every plan field can name something real.
constexpr std::string_view graph_text = R"memplan(
{
  "format": "memplan.graph",
  "version": 1,
  "name": "mlp-train",
  "tensors": [
    {"name": "x", "bytes": 200704},
    {"name": "labels", "bytes": 512},
    {"name": "fc1.w", "bytes": 1605632, "persistent": true},
    {"name": "fc1.b", "bytes": 2048, "persistent": true},
    {"name": "fc2.w", "bytes": 524288, "persistent": true},
    {"name": "fc2.b", "bytes": 1024, "persistent": true},
    {"name": "fc3.w", "bytes": 10240, "persistent": true},
    {"name": "fc3.b", "bytes": 40, "persistent": true},
    {"name": "h1", "bytes": 131072},
    {"name": "a1", "bytes": 131072},
    {"name": "h2", "bytes": 65536},
    {"name": "a2", "bytes": 65536},
    {"name": "logits", "bytes": 2560},
    {"name": "loss", "bytes": 4},
    {"name": "dlogits", "bytes": 2560},
    {"name": "da2", "bytes": 65536},
    {"name": "dh2", "bytes": 65536},
    {"name": "da1", "bytes": 131072},
    {"name": "dh1", "bytes": 131072},
    {"name": "fc1.dw", "bytes": 1605632},
    {"name": "fc1.db", "bytes": 2048},
    {"name": "fc2.dw", "bytes": 524288},
    {"name": "fc2.db", "bytes": 1024},
    {"name": "fc3.dw", "bytes": 10240},
    {"name": "fc3.db", "bytes": 40}
  ],
  "ops": [
    {"name": "fc1", "inputs": ["x", "fc1.w", "fc1.b"], "outputs": ["h1"], "cost": 0.01028, "workspace": 0, "phase": "forward", "variants": [{"name": "gemm_splitk", "cost": 0.008221, "workspace": 1048576}, {"name": "gemm", "cost": 0.01028, "workspace": 0}]},
    {"name": "relu1", "inputs": ["h1"], "outputs": ["a1"], "cost": 0.002, "workspace": 0, "phase": "forward", "inplace": [["h1", "a1"]]},
    {"name": "fc2", "inputs": ["a1", "fc2.w", "fc2.b"], "outputs": ["h2"], "cost": 0.003355, "workspace": 0, "phase": "forward"},
    {"name": "relu2", "inputs": ["h2"], "outputs": ["a2"], "cost": 0.002, "workspace": 0, "phase": "forward", "inplace": [["h2", "a2"]]},
    {"name": "fc3", "inputs": ["a2", "fc3.w", "fc3.b"], "outputs": ["logits"], "cost": 6.554e-05, "workspace": 0, "phase": "forward"},
    {"name": "loss", "inputs": ["logits", "labels"], "outputs": ["loss"], "cost": 0.003, "workspace": 0, "phase": "forward"},
    {"name": "loss_bwd", "inputs": ["logits", "labels"], "outputs": ["dlogits"], "cost": 0.003, "workspace": 0, "phase": "backward"},
    {"name": "fc3_bwd", "inputs": ["dlogits", "a2", "fc3.w"], "outputs": ["da2", "fc3.dw", "fc3.db"], "cost": 0.0001311, "workspace": 0, "phase": "backward"},
    {"name": "relu2_bwd", "inputs": ["da2", "a2"], "outputs": ["dh2"], "cost": 0.002, "workspace": 0, "phase": "backward", "inplace": [["da2", "dh2"]]},
    {"name": "fc2_bwd", "inputs": ["dh2", "a1", "fc2.w"], "outputs": ["da1", "fc2.dw", "fc2.db"], "cost": 0.006711, "workspace": 0, "phase": "backward"},
    {"name": "relu1_bwd", "inputs": ["da1", "a1"], "outputs": ["dh1"], "cost": 0.002, "workspace": 0, "phase": "backward", "inplace": [["da1", "dh1"]]},
    {"name": "fc1_bwd", "inputs": ["dh1", "x", "fc1.w"], "outputs": ["fc1.dw", "fc1.db"], "cost": 0.01028, "workspace": 0, "phase": "backward"},
    {"name": "sgd.fc1", "inputs": ["fc1.w", "fc1.b", "fc1.dw", "fc1.db"], "outputs": [], "cost": 0.009634, "workspace": 0, "phase": "update"},
    {"name": "sgd.fc2", "inputs": ["fc2.w", "fc2.b", "fc2.dw", "fc2.db"], "outputs": [], "cost": 0.003146, "workspace": 0, "phase": "update"},
    {"name": "sgd.fc3", "inputs": ["fc3.w", "fc3.b", "fc3.dw", "fc3.db"], "outputs": [], "cost": 6.144e-05, "workspace": 0, "phase": "update"}
  ],
  "outputs": ["loss"]
}
)memplan";

const memplan::graph& fixed_graph() {
    static const memplan::graph g = memplan::parse_graph_json(graph_text, "mlp-train.json");
    return g;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const memplan::graph& g = fixed_graph();
    const std::string_view text = memplan_fuzz::as_text(data, size);
    const auto p_read = memplan_fuzz::accepted([&] { return memplan::parse_plan_json(text, g, "fuzz.plan.json"); });
    if (!p_read) return 0; // bad input ended in memplan::error, as promised
    const auto& p = *p_read;

    // Valid or not, the validator reports and never throws.
    (void)memplan::check_plan(g, p);

    // Every plan the reader accepted names only what g has, so it can be written.
    const std::string out = memplan::format_plan_json(g, p);
    memplan::plan back;
    try {
        back = memplan::parse_plan_json(out, g, "roundtrip.plan.json");
    } catch (const memplan::error& e) {
        memplan_fuzz::fail("parse_plan_json rejects what format_plan_json wrote", std::string(e.what()) + "\n" + out);
    }
    if (!(back == p)) memplan_fuzz::fail("plan round trip differs", out);
    return 0;
}
