// Liveness: which buffers a schedule needs and on which steps each is live.
//
// Each execution of an op materialises its outputs in fresh buffers; a buffer
// lives from the step that produced it (0 for graph inputs and persistent
// tensors) to its last read before the tensor is produced again, or to the
// last step for graph outputs and persistent tensors. Steps whose op (variant)
// needs scratch memory get a workspace buffer. When an op declares an
// in-place pair (x, y) and the step is x's last use, y takes over x's buffer
// (`alias_of`), as frameworks do for in-place ReLU.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/schedule/buffer.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace memplan {

struct liveness_options {
    bool use_inplace = true; ///< let outputs take over inputs' buffers where the graph allows it
};

/// The buffers of a schedule, without offsets.
template <class Size = std::uint64_t, class Id = std::uint32_t>
struct basic_liveness {
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    std::vector<basic_buffer<Size, Id>> buffers;
    /// Per buffer: index of the buffer it takes over in place, or `none`.
    std::vector<std::size_t> alias_of;
    std::size_t num_steps = 0;
};

/// Computes the buffers of schedule `s` on graph `g`. Throws `memplan::error`
/// (category "schedule") when a step names an unknown op or variant, leaves
/// out a variant the op needs, or reads a tensor that has not been computed.
template <class Graph>
basic_liveness<typename Graph::size_type, typename Graph::id_type>
compute_liveness(const Graph& g, const basic_schedule<typename Graph::id_type>& s, liveness_options opt = {}) {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    using buffer_type = basic_buffer<size_type, id_type>;
    constexpr std::size_t none = basic_liveness<size_type, id_type>::none;

    basic_liveness<size_type, id_type> live;
    live.num_steps = s.size();
    if (s.empty()) throw error("schedule", "the schedule of graph '" + g.name() + "' has no steps");
    const std::size_t last_step = s.size() - 1;

    const graph_index<Graph> index(g);
    std::vector<std::size_t> current(g.num_tensors(), none); // buffer of each tensor's latest materialisation
    std::vector<char> is_output(g.num_tensors(), 0);
    for (auto t : g.outputs()) is_output[t] = 1;

    auto new_buffer = [&](buffer_type b) {
        live.buffers.push_back(b);
        live.alias_of.push_back(none);
        return live.buffers.size() - 1;
    };

    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (index.is_graph_input(static_cast<id_type>(t))) {
            buffer_type b;
            b.tensor = static_cast<id_type>(t);
            b.bytes = g.tensor(static_cast<id_type>(t)).bytes;
            b.first = b.last = 0;
            current[t] = new_buffer(b);
        }

    // reads[i]: buffers read at step i (for in-place decisions below).
    std::vector<std::vector<std::size_t>> reads(s.size());
    std::vector<std::vector<std::size_t>> writes(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto& st = s[i];
        if (st.op >= g.num_ops())
            throw error("schedule", "step " + std::to_string(i) + " names op id " + std::to_string(st.op) +
                                        " which does not exist");
        const auto& op = g.op(st.op);
        if (op.has_variants() && (!st.has_variant() || st.variant >= op.variants.size()))
            throw error("schedule", "step " + std::to_string(i) + " (op '" + op.name +
                                        "') must name one of the op's variants");
        if (!op.has_variants() && st.has_variant())
            throw error("schedule", "step " + std::to_string(i) + " (op '" + op.name +
                                        "') names a variant but the op has none");
        for (auto t : g.reads_of(st.op, st.variant)) {
            if (current[t] == none)
                throw error("schedule", "step " + std::to_string(i) + " (op '" + op.name + "') reads tensor '" +
                                            g.tensor(t).name + "' before any step computes it");
            live.buffers[current[t]].last = i;
            reads[i].push_back(current[t]);
        }
        for (auto t : op.outputs) {
            buffer_type b;
            b.tensor = t;
            b.bytes = g.tensor(t).bytes;
            b.first = b.last = i;
            current[t] = new_buffer(b);
            writes[i].push_back(current[t]);
        }
        if (const size_type ws = g.workspace_of(st.op, st.variant); ws > 0) {
            buffer_type b;
            b.step = i;
            b.bytes = ws;
            b.first = b.last = i;
            new_buffer(b);
        }
    }
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        if (current[t] == none) continue;
        if (g.tensor(static_cast<id_type>(t)).persistent) {
            live.buffers[current[t]].last = last_step;
        } else if (is_output[t]) {
            live.buffers[current[t]].last = last_step;
        }
    }
    // Persistent tensors live over every step, from 0 when they are inputs.
    for (auto& b : live.buffers)
        if (!b.is_workspace() && g.tensor(b.tensor).persistent) b.last = last_step;

    if (opt.use_inplace) {
        for (std::size_t i = 0; i < s.size(); ++i) {
            const auto& op = g.op(s[i].op);
            std::vector<std::size_t> taken; // sources already taken over at this step
            for (auto [x, y] : op.inplace) {
                std::size_t bx = none, by = none;
                for (auto b : reads[i])
                    if (live.buffers[b].tensor == x) bx = b;
                for (auto b : writes[i])
                    if (live.buffers[b].tensor == y) by = b;
                if (bx == none || by == none || std::find(taken.begin(), taken.end(), bx) != taken.end()) continue;
                const auto& src = live.buffers[bx];
                if (src.last != i || g.tensor(x).persistent || src.bytes < live.buffers[by].bytes) continue;
                if (is_output[x] && src.last == last_step) continue; // must outlive the last step
                taken.push_back(bx);
                live.buffers[by].alias = x;
                live.alias_of[by] = bx;
            }
        }
    }
    return live;
}

} // namespace memplan
