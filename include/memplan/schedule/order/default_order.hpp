// The listed order as an ordering planner: what a framework runs, and the
// baseline every other planner is measured against.
#pragma once

#include <memplan/schedule/order/order.hpp>

#include <chrono>
#include <numeric>
#include <string_view>
#include <vector>

namespace memplan {

/// Keeps the ops in the order the graph lists them.
struct default_order {
    static constexpr std::string_view name = "default";

    /// The listed order, its peak and the order-independent bound. Throws
    /// `memplan::error` when the graph is malformed or has no ops.
    template <class Graph>
    order_result<Graph> order(const Graph& g) const {
        const auto start = std::chrono::steady_clock::now();
        detail::check_orderable(g);
        std::vector<typename Graph::id_type> ids(g.num_ops());
        std::iota(ids.begin(), ids.end(), typename Graph::id_type{0});
        order_result<Graph> r;
        detail::finish_order_result(g, ids, order_lower_bound(g), r);
        r.message = "listed order";
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return r;
    }
};

} // namespace memplan
