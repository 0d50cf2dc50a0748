// Small graphs and helpers shared by the unit tests.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <string>

namespace memplan::testing {

/// The diamond ordering case (after MODeL/OLLA, Steiner et al., ICML 2023): edges A->B 10, B->C 20, B->D 30, D->E 40,
/// E->F 50, C->F 60, F->G 10 (the tensor on each edge). The listed order
/// A B C D E F G peaks at 150; A B D E C F G at 130.
inline graph diamond_graph() {
    graph g("diamond");
    g.add_tensor("a", 10);
    g.add_tensor("bc", 20);
    g.add_tensor("bd", 30);
    g.add_tensor("de", 40);
    g.add_tensor("ef", 50);
    g.add_tensor("cf", 60);
    g.add_tensor("g", 10);
    g.add_op("A", {}, {"a"});
    g.add_op("B", {"a"}, {"bc", "bd"});
    g.add_op("C", {"bc"}, {"cf"});
    g.add_op("D", {"bd"}, {"de"});
    g.add_op("E", {"de"}, {"ef"});
    g.add_op("F", {"cf", "ef"}, {"g"});
    g.add_op("G", {"g"}, {});
    return g;
}

/// The message of the `memplan::error` that `f` throws, or "" when it throws none.
template <class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const error& e) {
        return e.what();
    }
    return "";
}

/// How many steps of `s` run the op called `op`.
inline std::size_t runs_of(const graph& g, const schedule& s, const std::string& op) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [&](const auto& st) { return g.op(st.op).name == op; }));
}

} // namespace memplan::testing
