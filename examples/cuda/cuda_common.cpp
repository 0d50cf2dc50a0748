// run_cuda_example (cuda_common.hpp): the CPU examples' run_example with the
// CUDA backend, plus device facts in the report, and two CUDA options taken
// out before the shared parser sees the rest:
//   --measure           measure every op and convolution variant on this GPU
//                       (engine/cuda/measure.hpp) and plan with those costs
//                       and workspaces instead of the model's estimates
//                       (the same as --cost measured; --profile FILE writes
//                       the measured graph, costs in microseconds)
//   --strict-workspace  a convolution whose cuDNN algorithm needs more
//                       workspace than planned is an error (default: it runs
//                       the zero-workspace algorithm and the report counts it)
#include "cuda_common.hpp"

#include "../train/common.hpp" // options, planning helpers

#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/engine/cuda/measure.hpp>
#include <memplan/engine/cuda/profile.hpp>
#include <memplan/io/graph_json.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace memplan::examples {

int run_cuda_example(const model& m, optimizer opt_kind, int argc, char** argv, int default_steps) {
    bool measured = false, strict = false;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--measure") measured = true;
        else if (a == "--strict-workspace") strict = true;
        else rest.push_back(argv[i]);
    }
    const auto o = parse_options(static_cast<int>(rest.size()), rest.data(), default_steps);
    if (engine::cuda::device_count() == 0) {
        std::fprintf(stderr, "no CUDA device: %s not run\n", m.net.name().c_str());
        return 77;
    }
    return run_and_report([&]() -> example_result {
        auto setup = setup_example(m, opt_kind, o);
        auto& [prog, g, eo, naive_bytes, needs_profile] = setup;
        if (measured || needs_profile) { // --measure, --cost measured or --profile FILE
            const auto t0 = std::chrono::steady_clock::now();
            engine::cuda::measure_options mo;
            mo.opt = opt_kind;
            for (auto& [input, bytes] : m.batch(0)) mo.inputs.push_back({input, bytes});
            graph measured_graph = g;
            const auto r = engine::cuda::apply_profile(measured_graph, engine::cuda::measure(m.net, g, prog, mo));
            std::printf("measured %zu ops and %zu variants (%zu removed: unsupported, or %zu too large to time) in "
                        "%.1f s\n",
                        r.ops, r.variants, r.removed_variants, r.untimed_variants,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (!o.profile_out.empty()) {
                write_graph_json(o.profile_out, measured_graph);
                std::printf("wrote %s\n", o.profile_out.c_str());
            }
            if (measured || o.cost == "measured") g = std::move(measured_graph);
        }
        std::printf("costs: %s (%s)\n", g.cost_model().c_str(), g.cost_unit().c_str());
        engine::cuda::backend_options bo;
        bo.shortfall = strict ? engine::cuda::workspace_shortfall::error : engine::cuda::workspace_shortfall::fallback;
        auto [chosen, store_all, budget, predicted] = plan_example(m, g, o); // as the CPU examples plan
        using cuda_executor = engine::executor<engine::cuda::backend>;
        if (o.compare && !o.naive) {
            // Device memory as the driver sees it (cudaMemGetInfo): before, after each executor took its
            // arena, and the high-water mark after each step (library workspaces come with the first).
            const auto device_before = engine::cuda::device_bytes_in_use();
            cuda_executor base(m.net, g, prog, store_all_fastest_plan(g), engine::cuda::backend(bo), eo);
            const auto device_base = engine::cuda::device_bytes_in_use();
            cuda_executor planned(m.net, g, prog, std::move(chosen), engine::cuda::backend(bo), eo);
            const auto device_planned = engine::cuda::device_bytes_in_use();
            std::uint64_t device_peak = device_planned;
            float loss = 0;
            const auto c = compare_interleaved(std::vector<cuda_executor*>{&base, &planned}, o.pairs,
                                               [&](cuda_executor& ex, int s) {
                feed(ex, m, static_cast<std::uint64_t>(s));
                const auto t0 = std::chrono::steady_clock::now();
                const float l = ex.step(); // synchronises: the loss is downloaded
                if (&ex == &planned) loss = l;
                const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                device_peak = std::max(device_peak, engine::cuda::device_bytes_in_use());
                return ms;
            });
            std::printf("memory: store-all arena %llu bytes (device +%llu bytes when it was made), plan arena %llu "
                        "bytes (device +%llu bytes); device in use %llu bytes before the executors, peak %llu with both "
                        "(cudaMemGetInfo after each step)\n",
                        (unsigned long long)base.reserved_bytes(), (unsigned long long)(device_base > device_before ? device_base - device_before : 0),
                        (unsigned long long)planned.reserved_bytes(),
                        (unsigned long long)(device_planned > device_base ? device_planned - device_base : 0), (unsigned long long)device_before,
                        (unsigned long long)device_peak);
            const auto st = planned.backend().stats();
            std::printf("compare: %d rounds after one warm-up round; store-all (fastest variants) %.2f ms, plan %.2f "
                        "ms (medians); measured overhead %+.1f %% (spread of the per-round overheads, p75 - p25: "
                        "%.1f points), predicted %+.1f %% (%s); conv fallbacks of the plan: %llu unsupported, %llu "
                        "workspace short\n",
                        c.rounds, c.ms[0], c.ms[1], 100 * c.overhead[1], 100 * c.spread[1], 100 * predicted,
                        g.cost_model().c_str(), (unsigned long long)st.conv_fallbacks,
                        (unsigned long long)st.workspace_fallbacks);
            example_result r{loss, naive_bytes, planned.reserved_bytes(), budget, c.ms[1]};
            r.compared = true;
            r.predicted_overhead = predicted;
            r.measured_overhead = c.overhead[1];
            return r;
        }
        // Device memory as the driver sees it (arena, library handles and workspaces, context).
        const auto device_before = engine::cuda::device_bytes_in_use();
        auto ex = o.naive ? cuda_executor::naive(m.net, g, prog, engine::cuda::backend(bo), eo)
                          : cuda_executor(m.net, g, prog, std::move(chosen), engine::cuda::backend(bo), eo);
        const auto arena = ex.reserved_bytes();
        std::printf("device %s; naive footprint %llu bytes, store-all arena %llu bytes, %s %llu bytes\n",
                    engine::cuda::describe_device(0).name.c_str(), (unsigned long long)naive_bytes,
                    (unsigned long long)store_all, o.naive ? "naive allocations" : "planned arena",
                    (unsigned long long)arena);
        std::uint64_t device_peak = engine::cuda::device_bytes_in_use();
        float loss = 0;
        double ms_total = 0;
        for (int s = 0; s < o.steps; ++s) {
            feed(ex, m, static_cast<std::uint64_t>(s));
            const auto t0 = std::chrono::steady_clock::now();
            loss = ex.step(); // synchronises: the loss is downloaded
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (s > 0 || o.steps == 1) ms_total += ms; // step 0 warms cuDNN and cuBLAS up
            device_peak = std::max(device_peak, engine::cuda::device_bytes_in_use()); // after the step's sync
            if (s % o.interval == 0 || s + 1 == o.steps) std::printf("step %4d loss %.5f\n", s, double(loss));
        }
        const double ms = ms_total / std::max(1, o.steps > 1 ? o.steps - 1 : 1);
        const auto st = ex.backend().stats();
        std::printf("device bytes in use %llu; peak %llu (cudaMemGetInfo after each step), %llu before the executor; "
                    "backend peak %llu bytes in %llu allocations; conv fallbacks: %llu unsupported, %llu workspace "
                    "short\n",
                    (unsigned long long)engine::cuda::device_bytes_in_use(), (unsigned long long)device_peak,
                    (unsigned long long)device_before, (unsigned long long)st.peak_bytes,
                    (unsigned long long)st.allocations, (unsigned long long)st.conv_fallbacks,
                    (unsigned long long)st.workspace_fallbacks);
        return {loss, naive_bytes, arena, o.naive ? naive_bytes : budget, ms};
    });
}

} // namespace memplan::examples
