// Small hand-built graphs shaped like PyTorch's aot_autograd exports
// (memplan_torch): batch norm as one op with several outputs (its result,
// read only by the ReLU after it; the saved statistics, read by its
// backward; the new running statistics, graph outputs that nothing reads;
// a reserve tensor nothing reads), weight gradients listed as graph outputs,
// optimizer updates without outputs, persistent parameters and running
// statistics, no variants. A batch-norm op is a forward op that writes graph
// outputs: plans may run it again (for its saved statistics, or for its
// result when the ReLU's output is dropped), and its result dies after the
// ReLU's first run (a recomputed ReLU needs batch norm run again).
#pragma once

#include <memplan/graph/validate.hpp>
#include <memplan/remat/recompute.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memplan::testing {

/// Two conv -> batch norm -> ReLU blocks, a linear layer and a loss. With
/// `training`, the backward part and SGD updates follow (ResNet-18's export
/// in miniature); without, a last op reads the first block's output, the
/// linear layer's and the first saved statistics (a forward-only DAG whose
/// first block's tensors live long). `stats_bytes`: the size of each
/// running statistic (graph outputs nothing reads).
inline graph torch_like_bn_graph(bool training = true, std::uint64_t stats_bytes = 8) {
    graph g(training ? "torch-like-bn-train" : "torch-like-bn-forward");
    g.add_tensor("x", 400);
    g.add_tensor("labels", 8);
    for (auto w : {"w1", "w2", "w3", "rm1", "rm2"}) g.add_tensor(w, 16, true);
    for (auto t : {"c1", "y1", "r1", "c2", "y2", "r2"}) g.add_tensor(t, 400);
    for (auto t : {"s1", "s2", "u1", "u2"}) g.add_tensor(t, 8);
    for (auto t : {"rm1n", "rm2n"}) g.add_tensor(t, stats_bytes);
    g.add_tensor("z", 100);
    g.add_tensor("loss", 4);
    const auto F = phase::forward, B = phase::backward, U = phase::update;
    g.add_op("conv1", {"x", "w1"}, {"c1"}, 10, 0, F);
    g.add_op("bn1", {"c1", "rm1"}, {"y1", "s1", "rm1n", "u1"}, 2, 0, F);
    g.add_op("relu1", {"y1"}, {"r1"}, 1, 0, F);
    g.add_op("conv2", {"r1", "w2"}, {"c2"}, 10, 0, F);
    g.add_op("bn2", {"c2", "rm2"}, {"y2", "s2", "rm2n", "u2"}, 2, 0, F);
    g.add_op("relu2", {"y2"}, {"r2"}, 1, 0, F);
    g.add_op("fc", {"r2", "w3"}, {"z"}, 5, 0, F);
    if (!training) {
        g.add_op("head", {"z", "r1", "s1", "labels"}, {"loss"}, 1, 0, F);
        for (auto t : {"loss", "rm1n", "rm2n"}) g.add_output(*g.find_tensor(t));
        validate(g);
        return g;
    }
    g.add_op("loss", {"z", "labels"}, {"loss"}, 1, 0, F);
    for (auto t : {"dz", "dr2", "dy2", "dc2", "dr1", "dy1", "dc1"}) g.add_tensor(t, 400);
    for (auto t : {"dw1", "dw2", "dw3"}) g.add_tensor(t, 16);
    g.add_op("loss_bw", {"z", "labels"}, {"dz"}, 1, 0, B);
    g.add_op("fc_bw_data", {"dz", "w3"}, {"dr2"}, 5, 0, B);
    g.add_op("fc_bw_w", {"dz", "r2"}, {"dw3"}, 5, 0, B);
    g.add_op("upd_w3", {"w3", "dw3"}, {}, 0.1, 0, U);
    g.add_op("relu2_bw", {"dr2", "r2"}, {"dy2"}, 1, 0, B);
    g.add_op("bn2_bw", {"dy2", "c2", "s2"}, {"dc2"}, 3, 0, B);
    g.add_op("conv2_bw_data", {"dc2", "w2"}, {"dr1"}, 10, 0, B);
    g.add_op("conv2_bw_w", {"dc2", "r1"}, {"dw2"}, 10, 0, B);
    g.add_op("upd_w2", {"w2", "dw2"}, {}, 0.1, 0, U);
    g.add_op("relu1_bw", {"dr1", "r1"}, {"dy1"}, 1, 0, B);
    g.add_op("bn1_bw", {"dy1", "c1", "s1"}, {"dc1"}, 3, 0, B);
    g.add_op("conv1_bw_w", {"dc1", "x"}, {"dw1"}, 10, 0, B);
    g.add_op("upd_w1", {"w1", "dw1"}, {}, 0.1, 0, U);
    for (auto t : {"loss", "rm1n", "rm2n", "dw1", "dw2", "dw3"}) g.add_output(*g.find_tensor(t));
    validate(g);
    return g;
}

/// Every schedule of remat_context's rule (what its planners make): each
/// droppable tensor kept, dropped, or (training graphs) dropped and
/// recomputed per use; and (training graphs) each tensor that only the
/// forward part reads kept as a checkpoint or not (when `checkpoints`).
inline std::vector<schedule> every_choice_schedule(const remat_context<graph>& ctx, bool checkpoints = true) {
    const graph& g = ctx.graph();
    std::vector<std::size_t> drop, kept;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        if (ctx.droppable(static_cast<graph::id_type>(t))) drop.push_back(t);
        if (checkpoints && ctx.checkpointable(static_cast<graph::id_type>(t))) kept.push_back(t);
    }
    const std::size_t ways = ctx.general() ? 2 : 3;
    std::size_t count = 1;
    for (std::size_t i = 0; i < drop.size(); ++i) count *= ways;
    for (std::size_t i = 0; i < kept.size(); ++i) count *= 2;
    REQUIRE(count <= 40000);
    std::vector<schedule> out;
    for (std::size_t code = 0; code < count; ++code) {
        auto c = ctx.keep_all();
        c.per_use.assign(g.num_tensors(), 0);
        c.checkpoint.assign(g.num_tensors(), 0);
        std::size_t k = code;
        for (auto t : drop) {
            const auto d = k % ways;
            k /= ways;
            c.keep[t] = d == 0;
            c.per_use[t] = d == 2;
        }
        for (auto t : kept) {
            c.checkpoint[t] = k % 2;
            k /= 2;
        }
        out.push_back(ctx.schedule_of(c));
    }
    return out;
}

} // namespace memplan::testing
