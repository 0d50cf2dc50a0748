// memplan_profile_cuda: measured costs and convolution variants for one of the
// example networks (mlp, cnn, resnet, unet, transformer; default cnn).
// On a GPU it measures every op and each convolution variant's cuDNN
// algorithm (engine/cuda/measure.hpp), writes the measured graph to --out
// FILE (memplan.graph, costs in microseconds, cost_model "measured:<GPU>":
// the profile format the CPU's train_X --profile writes, read by --cost
// measured:FILE) and the raw cuDNN table to --table FILE;
// without one it reads a recorded table (--recorded FILE, by default
// tests/cuda/recorded_profile_cnn.json: made-up numbers, clearly labelled,
// for the two-conv cnn(8, 1, 16, 16)).
// Either way the table is applied to the training graph and the planned
// arena and time at store-all are printed with the model costs and the
// measured ones.
#include "cuda_common.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/engine/cuda/measure.hpp>
#include <memplan/engine/cuda/profile.hpp>
#include <memplan/io/atomic_file.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>

#include <cstdio>
#include <fstream>

#ifndef MEMPLAN_SOURCE_DIR
#define MEMPLAN_SOURCE_DIR "."
#endif

int main(int argc, char** argv) {
    using namespace memplan;
    std::string name = "cnn", out, table_out, recorded = std::string(MEMPLAN_SOURCE_DIR) + "/tests/cuda/recorded_profile_cnn.json";
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if ((a == "--out" || a == "--table" || a == "--recorded" || a == "--net") && i + 1 < argc) {
            (a == "--out" ? out : a == "--table" ? table_out : a == "--recorded" ? recorded : name) = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--net NAME] [--out GRAPH.json] [--table TABLE.json] [--recorded TABLE.json]\n",
                         argv[0]);
            return 2;
        }
    }
    try {
        const bool device = engine::cuda::device_count() > 0;
        // Without a device the recorded table is applied: it was recorded for cnn(8, 1, 16, 16).
        const examples::model m = name == "mlp" ? examples::mlp() : name == "resnet" ? examples::resnet()
                                 : name == "unet" ? examples::unet() : name == "transformer" ? examples::transformer()
                                 : device ? examples::cnn() : examples::cnn(8, 1, 16, 16);
        training_options to;
        to.opt = (name == "mlp" || name == "transformer") ? optimizer::adam : optimizer::sgd_momentum;
        training_program prog;
        graph g = training_graph(m.net, to, prog);
        const auto before = make_plan(g, default_schedule(g), best_heuristic{});
        engine::cuda::profile_table table;
        if (device) {
            engine::cuda::measure_options mo;
            mo.opt = to.opt;
            for (auto& [input, bytes] : m.batch(0)) mo.inputs.push_back({input, bytes});
            table = engine::cuda::measure(m.net, g, prog, mo);
            if (!table_out.empty()) write_file_atomically(table_out, engine::cuda::to_json(table).dump(2) + "\n");
        } else {
            std::printf("no CUDA device: applying the recorded table %s\n", recorded.c_str());
            table = engine::cuda::read_profile(recorded);
        }
        const auto r = engine::cuda::apply_profile(g, table);
        if (!out.empty()) {
            write_graph_json(out, g);
            std::printf("wrote the measured graph %s (%s, %s)\n", out.c_str(), g.cost_model().c_str(),
                        g.cost_unit().c_str());
        }
        const auto after = make_plan(g, default_schedule(g), best_heuristic{});
        double total = 0;
        for (const auto& op : g.ops()) total += op.cost;
        std::printf("profile source: %s\n%zu ops costed, %zu variants set, %zu removed (%zu of them supported but "
                    "not timed)\n",
                    table.source.c_str(), r.ops, r.variants, r.removed_variants, r.untimed_variants);
        std::printf("store-all arena %llu bytes (model costs) / %llu bytes (measured variants); step %.3f ms\n",
                    (unsigned long long)before.plan.arena_bytes, (unsigned long long)after.plan.arena_bytes,
                    total / 1000.0);
        for (const auto& o : table.ops)
            for (const auto& v : o.variants) {
                if (v.supported && !v.timed)
                    std::printf("  %-28s %-14s %-18s not timed: %s\n", o.op.c_str(), v.name.c_str(),
                                v.algorithm.c_str(), v.reason.c_str());
                else
                    std::printf("  %-28s %-14s %-18s %s ws %12llu B  %8.3f ms\n", o.op.c_str(), v.name.c_str(),
                                v.algorithm.c_str(), v.supported ? "ok " : "n/a",
                                (unsigned long long)v.workspace_bytes, v.ms);
            }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
