// Where a training graph's bytes go, by role, read off its structure alone:
// the weights (persistent tensors a forward op reads), the optimizer state
// (persistent tensors only updates read: moments, master copies), the
// activations saved for the backward pass (tensors a forward op writes and a
// backward op reads) and the weight gradients (tensors a backward op writes
// and an update reads). The same census of two graphs of one model (the zoo's
// and a framework's export) says whether they keep the same bytes, whatever
// their op granularity.
#pragma once

#include <memplan/graph/graph.hpp>
#include <memplan/graph/validate.hpp>

#include <cstdint>

namespace memplan {

struct memory_census {
    std::uint64_t weights = 0;          ///< persistent, read by a forward op
    std::uint64_t optimizer_state = 0;  ///< persistent, read by no forward or backward op
    std::uint64_t other_persistent = 0; ///< persistent, read by a backward op but no forward op, or by nothing
    std::uint64_t saved = 0;            ///< written by a forward op, read by a backward op
    std::uint64_t weight_gradients = 0; ///< written by a backward op, read by an update
};

/// The census of `g` (sums of tensor bytes; each tensor counted once).
template <class Graph>
memory_census census(const Graph& g) {
    const graph_index<Graph> index(g);
    memory_census c;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto id = static_cast<typename Graph::id_type>(t);
        bool read_fwd = false, read_bwd = false, read_update = false;
        for (auto o : index.consumers[t]) {
            const auto ph = g.op(o).phase;
            read_fwd = read_fwd || ph == phase::forward;
            read_bwd = read_bwd || ph == phase::backward;
            read_update = read_update || ph == phase::update;
        }
        const auto& x = g.tensor(id);
        if (x.persistent) {
            if (read_fwd) c.weights += x.bytes;
            else if (!read_bwd && read_update) c.optimizer_state += x.bytes;
            else c.other_persistent += x.bytes;
            continue;
        }
        if (index.is_graph_input(id)) continue;
        const auto made = g.op(index.producer[t]).phase;
        if (made == phase::forward && read_bwd) c.saved += x.bytes;
        if (made == phase::backward && read_update) c.weight_gradients += x.bytes;
    }
    return c;
}

} // namespace memplan
