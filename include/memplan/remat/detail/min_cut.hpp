// A minimum s-t cut (Dinic's maximum-flow algorithm) on real capacities, for
// the cut start of `joint` (remat/detail/cut_start.hpp). Capacities may be
// +infinity (a constraint); the source side of the cut is what the residual
// network still reaches from the source after the flow is maximal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace memplan::detail {

class min_cut_network {
public:
    static constexpr double infinite = std::numeric_limits<double>::infinity();

    explicit min_cut_network(std::size_t nodes) : first_(nodes, none) {}

    std::size_t num_nodes() const noexcept { return first_.size(); }

    /// An arc from `from` to `to` of capacity `cap` (>= 0; +infinity allowed).
    void add_edge(std::size_t from, std::size_t to, double cap) {
        if (cap <= 0 || from == to) return;
        arcs_.push_back({to, first_[from], cap});
        first_[from] = arcs_.size() - 1;
        arcs_.push_back({from, first_[to], 0});
        first_[to] = arcs_.size() - 1;
    }

    /// The maximum flow from `s` to `t` (the capacity of a minimum cut).
    /// Residual capacities below `eps` times the largest finite capacity
    /// count as zero.
    double solve(std::size_t s, std::size_t t, double eps = 1e-12) {
        double largest = 0;
        for (const auto& a : arcs_)
            if (a.cap < infinite) largest = std::max(largest, a.cap);
        tiny_ = eps * std::max(largest, 1e-300);
        double flow = 0;
        while (levels(s, t)) {
            next_.assign(first_.begin(), first_.end());
            while (true) {
                const double f = push(s, t, infinite);
                if (f <= tiny_) break;
                flow += f;
                if (flow == infinite) return flow; // an infinite cut: every cut breaks a constraint
            }
        }
        levels(s, t); // the source side: reachable in the residual network
        return flow;
    }

    /// After solve(): whether `v` is on the source's side of the minimum cut
    /// (the smallest such side).
    bool source_side(std::size_t v) const { return level_[v] >= 0; }

private:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    struct arc {
        std::size_t to;
        std::size_t next; ///< next arc out of the same node
        double cap;       ///< residual capacity
    };

    bool levels(std::size_t s, std::size_t t) {
        level_.assign(first_.size(), -1);
        queue_.clear();
        queue_.push_back(s);
        level_[s] = 0;
        for (std::size_t head = 0; head < queue_.size(); ++head) {
            const auto v = queue_[head];
            for (auto a = first_[v]; a != none; a = arcs_[a].next)
                if (arcs_[a].cap > tiny_ && level_[arcs_[a].to] < 0) {
                    level_[arcs_[a].to] = level_[v] + 1;
                    queue_.push_back(arcs_[a].to);
                }
        }
        return level_[t] >= 0;
    }

    /// One augmenting path in the level graph, depth first with an explicit
    /// stack (paths can be thousands of arcs long).
    double push(std::size_t s, std::size_t t, double limit) {
        path_.clear();
        std::size_t v = s;
        while (true) {
            if (v == t) {
                double f = limit;
                for (auto a : path_) f = std::min(f, arcs_[a].cap);
                for (auto a : path_) {
                    if (arcs_[a].cap < infinite) arcs_[a].cap -= f;
                    if (arcs_[a ^ 1].cap < infinite) arcs_[a ^ 1].cap += f;
                }
                return f;
            }
            auto& a = next_[v];
            while (a != none && (arcs_[a].cap <= tiny_ || level_[arcs_[a].to] != level_[v] + 1)) a = arcs_[a].next;
            if (a != none) {
                path_.push_back(a);
                v = arcs_[a].to;
                continue;
            }
            // Dead end: nothing more passes through v in this level graph.
            level_[v] = -2;
            if (path_.empty()) return 0;
            v = arcs_[path_.back() ^ 1].to;
            path_.pop_back();
            next_[v] = arcs_[next_[v]].next;
        }
    }

    std::vector<std::size_t> first_; ///< first arc out of each node
    std::vector<arc> arcs_;          ///< arc 2k and its reverse 2k+1
    std::vector<int> level_;
    std::vector<std::size_t> queue_, next_, path_;
    double tiny_ = 0;
};

} // namespace memplan::detail
