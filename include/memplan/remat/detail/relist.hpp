// A graph with its ops listed in another topological order, and the way back:
// the rematerialization planners take the listed order as their base order,
// so planning on a relisted graph plans in that order.
#pragma once

#include <memplan/schedule/schedule.hpp>

#include <cstddef>
#include <vector>

namespace memplan::detail {

/// `g` with its ops listed as `order` (a topological order of all of them,
/// each once); tensors, outputs and costs unchanged, so tensor ids carry
/// over. Op i of the result is op `order[i]` of `g`.
template <class Graph>
Graph relisted(const Graph& g, const std::vector<typename Graph::id_type>& order) {
    Graph h(g.name());
    h.set_costs_from(g.cost_unit(), g.cost_model());
    for (const auto& t : g.tensors()) h.add_tensor(t.name, t.bytes, t.persistent);
    for (auto o : order) h.add_op(g.op(o));
    for (auto t : g.outputs()) h.add_output(t);
    return h;
}

/// Steps of a schedule of `relisted(g, order)` as steps of `g`.
template <class Id>
void relist_back(basic_schedule<Id>& s, const std::vector<Id>& order) {
    for (auto& st : s) st.op = order[st.op];
}

} // namespace memplan::detail
