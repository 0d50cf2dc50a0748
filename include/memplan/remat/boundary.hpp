// The boundary of a training step: the first step that is not a forward op
// (in an exported step, the backward's seed). What a plan holds across it is
// what any plan holds there (`resident`) plus what it saves for the backward
// (`kept`, PyTorch's saved activations); `boundary_memory_graph` is the graph
// on which a budget bounds those bytes alone, the rest of the step free.
#pragma once

#include <memplan/core/detail/checked.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/schedule/plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

/// The index of the first step of `steps` whose op's phase is not
/// `forward` (backward or update); `steps.size()` when there is none.
/// Precondition: every step names an op of `g`.
template <class Graph>
std::size_t boundary_step(const Graph& g, const basic_schedule<typename Graph::id_type>& steps) {
    for (std::size_t i = 0; i < steps.size(); ++i)
        if (g.op(steps[i].op).phase != phase::forward) return i;
    return steps.size();
}

/// The bytes of the tensors a plan holds across its boundary.
template <class Size = std::uint64_t>
struct basic_boundary_live {
    std::size_t step = 0; ///< the boundary (`boundary_step`)
    /// Persistent tensors (weights, inputs: live the whole step) and the
    /// graph's required outputs live across the boundary: what any plan holds there.
    Size resident = 0;
    /// Every other tensor live across the boundary: what the plan saves for the backward.
    Size kept = 0;

    Size total() const noexcept { return resident + kept; }
};

using boundary_live = basic_boundary_live<>;

/// What plan `p` of graph `g` holds across its boundary: the tensors with a
/// buffer that starts before the boundary and ends at or after it, and every
/// persistent tensor present from the first step or made before the
/// boundary. Each tensor counts once, with its bytes in `sizes` (`g` itself,
/// or the graph `g` was derived from when `g` is its
/// `boundary_memory_graph`: tensor ids are equal, and a tensor `sizes` does
/// not have, the room, counts nothing). Workspaces do not count.
/// Precondition: `p` is a plan of `g` (check_plan).
template <class Graph>
basic_boundary_live<typename Graph::size_type>
boundary_bytes(const Graph& g, const basic_plan<typename Graph::size_type, typename Graph::id_type>& p,
               const Graph& sizes) {
    using size_type = typename Graph::size_type;
    basic_boundary_live<size_type> out;
    out.step = boundary_step(g, p.steps);
    std::vector<char> output(sizes.num_tensors(), 0), counted(sizes.num_tensors(), 0);
    for (auto t : sizes.outputs()) output[t] = 1;
    for (const auto& b : p.buffers) {
        if (b.is_workspace() || b.tensor >= sizes.num_tensors() || counted[b.tensor]) continue;
        const auto& t = sizes.tensor(b.tensor);
        const bool across = b.first < out.step && out.step <= b.last;
        if (!across && !(t.persistent && (b.first == 0 || b.first < out.step))) continue;
        counted[b.tensor] = 1;
        (t.persistent || output[b.tensor] ? out.resident : out.kept) += t.bytes;
    }
    return out;
}

/// `boundary_bytes(g, p, g)`.
template <class Graph>
basic_boundary_live<typename Graph::size_type>
boundary_bytes(const Graph& g, const basic_plan<typename Graph::size_type, typename Graph::id_type>& p) {
    return boundary_bytes(g, p, g);
}

/// The name of the op `boundary_memory_graph` inserts, and of its tensor.
inline constexpr std::string_view boundary_room_name = "memplan.boundary_room";

/// A graph on which a budget bounds only the bytes at the boundary, and the
/// bytes a budget on it must be raised by (`room`).
template <class Graph>
struct boundary_graph {
    Graph graph;
    typename Graph::size_type room = 0;
};

/// The graph a budget on what is saved for the backward plans on. A copy of
/// `g` where
/// - every tensor an op outside the forward phase produces has 0 bytes, and
///   every such op (each variant too) has no workspace;
/// - an op `memplan.boundary_room` (phase backward, cost 0, no inputs) is
///   listed just before the first op outside the forward phase, making a
///   tensor of the same name of `room` bytes that this op (and each of its
///   variants that lists its own inputs) also reads.
/// `room` is the bytes of every non-persistent tensor that no op outside
/// the forward produces (what the forward makes, the non-persistent graph
/// inputs) plus the largest forward workspace, rounded up to a multiple of
/// 4096. A plan of it within a budget of X + room therefore holds at most X
/// at its boundary (resident + kept, `boundary_bytes(result, plan, g)`),
/// and elsewhere, where at most room plus the persistent tensors is live,
/// the budget binds nothing. Without an op outside the forward, or with
/// room 0, no op is added (room is then 0). Tensor ids are `g`'s (the room
/// tensor comes last); op ids after the inserted op are one higher.
/// Throws `memplan::error("graph")` naming `g` when it already has a tensor
/// or an op of that name, or when the room overflows the size type.
template <class Graph>
boundary_graph<Graph> boundary_memory_graph(const Graph& g) {
    using id_type = typename Graph::id_type;
    using size_type = typename Graph::size_type;
    const std::string room_name(boundary_room_name);
    if (g.find_tensor(room_name) || g.find_op(room_name))
        throw error("graph", "graph '" + g.name() + "' already has a tensor or op named '" + room_name + "'");

    std::vector<char> later(g.num_tensors(), 0); // made by an op outside the forward
    std::size_t first_later = g.num_ops();
    size_type widest = 0; // the largest forward workspace
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto& op = g.op(static_cast<id_type>(o));
        if (op.phase != phase::forward) {
            first_later = std::min(first_later, o);
            for (auto t : op.outputs) later[t] = 1;
            continue;
        }
        widest = std::max(widest, op.workspace);
        for (const auto& v : op.variants) widest = std::max(widest, v.workspace);
    }
    size_type room = widest;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& x = g.tensor(static_cast<id_type>(t));
        if (later[t] || x.persistent) continue;
        const auto s = detail::checked_add<size_type>(room, x.bytes);
        if (!s)
            throw error("graph", "graph '" + g.name() + "': the room at the boundary overflows at tensor '" + x.name +
                                     "'");
        room = *s;
    }
    const auto rounded = detail::checked_align_up<size_type>(room, 4096);
    if (!rounded) throw error("graph", "graph '" + g.name() + "': the room at the boundary overflows");
    room = first_later == g.num_ops() ? 0 : *rounded;

    boundary_graph<Graph> out{Graph(g.name()), room};
    Graph& h = out.graph;
    h.set_costs_from(g.cost_unit(), g.cost_model());
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto& x = g.tensor(static_cast<id_type>(t));
        h.add_tensor(x.name, later[t] ? size_type{0} : x.bytes, x.persistent);
    }
    const id_type room_tensor = room > 0 ? h.add_tensor(room_name, room) : Graph::npos;
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        auto op = g.op(static_cast<id_type>(o));
        if (op.phase != phase::forward) {
            op.workspace = 0;
            for (auto& v : op.variants) v.workspace = 0;
        }
        if (o == first_later && room > 0) {
            typename Graph::op_type maker;
            maker.name = room_name;
            maker.outputs = {room_tensor};
            maker.cost = 0;
            maker.phase = phase::backward;
            h.add_op(std::move(maker));
            op.inputs.push_back(room_tensor);
            for (auto& v : op.variants)
                if (!v.inputs.empty()) v.inputs.push_back(room_tensor);
        }
        h.add_op(std::move(op));
    }
    for (auto t : g.outputs()) h.add_output(t);
    return out;
}

} // namespace memplan
