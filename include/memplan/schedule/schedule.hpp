// A schedule is the sequence of op executions of one training step. An op may
// appear more than once (recomputation); each step names the implementation
// variant it runs when the op has variants.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>

#include <string>
#include <vector>

namespace memplan {

template <class Id = std::uint32_t>
struct basic_step {
    Id op = 0;
    Id variant = std::numeric_limits<Id>::max(); ///< index into the op's variants; max() when it has none

    bool has_variant() const noexcept { return variant != std::numeric_limits<Id>::max(); }
    friend bool operator==(const basic_step&, const basic_step&) = default;
};

template <class Id = std::uint32_t>
using basic_schedule = std::vector<basic_step<Id>>;

using step = basic_step<>;
using schedule = basic_schedule<>;

/// The variant a step runs when nothing chose one: the first listed.
template <class Graph>
typename Graph::id_type default_variant(const Graph& g, typename Graph::id_type op) {
    return g.op(op).variants.empty() ? Graph::npos : typename Graph::id_type{0};
}

/// Every op once, in listed order, each with its default variant.
template <class Graph>
basic_schedule<typename Graph::id_type> default_schedule(const Graph& g) {
    using id_type = typename Graph::id_type;
    basic_schedule<id_type> s;
    s.reserve(g.num_ops());
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        s.push_back({static_cast<id_type>(o), default_variant(g, static_cast<id_type>(o))});
    return s;
}

/// Every op once, in listed order, each on its cheapest variant (the first
/// of equal ones): store-all at the fastest, what a plan's overhead is
/// measured against.
template <class Graph>
basic_schedule<typename Graph::id_type> fastest_schedule(const Graph& g) {
    using id_type = typename Graph::id_type;
    auto s = default_schedule(g);
    for (auto& st : s) {
        const auto& vs = g.op(st.op).variants;
        for (std::size_t k = 1; k < vs.size(); ++k)
            if (vs[k].cost < vs[st.variant].cost) st.variant = static_cast<id_type>(k);
    }
    return s;
}

/// Schedule from a list of op ids (each with its default variant).
template <class Graph>
basic_schedule<typename Graph::id_type> schedule_from_order(const Graph& g,
                                                            const std::vector<typename Graph::id_type>& order) {
    basic_schedule<typename Graph::id_type> s;
    s.reserve(order.size());
    for (auto o : order) {
        if (o >= g.num_ops()) throw error("schedule", "op id " + std::to_string(o) + " does not exist");
        s.push_back({o, default_variant(g, o)});
    }
    return s;
}

/// Sum of step costs (each step's chosen variant), the numerator of a plan's
/// compute overhead.
template <class Graph>
double schedule_cost(const Graph& g, const basic_schedule<typename Graph::id_type>& s) {
    double c = 0;
    for (const auto& st : s) c += g.cost_of(st.op, st.variant);
    return c;
}

} // namespace memplan
