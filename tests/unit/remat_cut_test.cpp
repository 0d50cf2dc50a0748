// The minimum cut behind `joint`'s cut start (remat/detail/min_cut.hpp,
// cut_start.hpp): the cut's value is the smallest over every partition of
// small networks, and the cut start's choice at a price lambda is the
// cheapest of every keep / checkpoint choice on the same variants, scored as
// recomputation cost + lambda * bytes kept after the forward part (brute
// force over all of them on small training graphs).
#include "support/remat_graphs.hpp"
#include "support/torch_like_graphs.hpp"

#include <memplan/remat/detail/cut_start.hpp>
#include <memplan/remat/detail/min_cut.hpp>
#include <memplan/schedule/schedule.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace memplan;

namespace {

struct edge {
    std::size_t from, to;
    double cap;
};

/// The capacity of the cut whose source side is `side` (bit v: node v).
double cut_capacity(const std::vector<edge>& edges, std::uint32_t side) {
    double c = 0;
    for (const auto& e : edges)
        if ((side >> e.from & 1) && !(side >> e.to & 1)) c += e.cap;
    return c;
}

/// A choice's recomputation cost and the bytes it keeps after the forward
/// part (kept droppable tensors and checkpoints).
struct price_terms {
    double cost = 0, bytes = 0;
    double at(double lambda) const { return cost + lambda * bytes; }
};

price_terms terms_of(const remat_context<graph>& ctx, const remat_choice<graph>& c) {
    const graph& g = ctx.graph();
    price_terms p;
    for (std::size_t o = 0; o < g.num_ops(); ++o) p.cost -= g.cost_of(static_cast<graph::id_type>(o), c.variant[o]);
    p.cost += schedule_cost(g, ctx.schedule_of(c)); // what runs more than once
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto id = static_cast<graph::id_type>(t);
        if ((ctx.droppable(id) && c.keep[t]) || c.is_checkpoint(t)) p.bytes += double(g.tensor(id).bytes);
    }
    return p;
}

/// The terms of every keep flag of the droppable tensors and checkpoint flag
/// of the others, on the variants of `base`.
std::vector<price_terms> every_choice_terms(const remat_context<graph>& ctx, const remat_choice<graph>& base) {
    const graph& g = ctx.graph();
    std::vector<std::size_t> flags;
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
        const auto id = static_cast<graph::id_type>(t);
        if (ctx.droppable(id) || ctx.checkpointable(id)) flags.push_back(t);
    }
    REQUIRE(flags.size() <= 16);
    std::vector<price_terms> out;
    for (std::uint32_t code = 0; code < (1u << flags.size()); ++code) {
        auto c = base;
        c.checkpoint.assign(g.num_tensors(), 0);
        for (std::size_t i = 0; i < flags.size(); ++i) {
            const auto t = flags[i];
            const bool on = code >> i & 1;
            if (ctx.droppable(static_cast<graph::id_type>(t))) c.keep[t] = on;
            else c.checkpoint[t] = on;
        }
        out.push_back(terms_of(ctx, c));
    }
    return out;
}

void expect_cut_start_is_cheapest(const graph& g) {
    const remat_context<graph> ctx(g);
    const auto base = ctx.keep_all();
    const detail::keep_cut<graph> cut(ctx, base);
    const auto all = every_choice_terms(ctx, base);
    for (double f : {1e-4, 0.01, 0.3, 1.0, 3.0, 100.0, 1e4}) {
        const double lambda = f * cut.scale();
        CAPTURE(lambda);
        double best = std::numeric_limits<double>::infinity();
        for (const auto& p : all) best = std::min(best, p.at(lambda));
        CHECK(terms_of(ctx, cut.at(lambda)).at(lambda) == doctest::Approx(best).epsilon(1e-9));
    }
}

} // namespace

TEST_CASE("remat.min_cut.value_is_the_smallest_cut_of_small_networks") {
    std::mt19937_64 rng(11);
    for (int round = 0; round < 300; ++round) {
        const std::size_t n = std::uniform_int_distribution<std::size_t>(2, 9)(rng);
        std::vector<edge> edges;
        const std::size_t m = std::uniform_int_distribution<std::size_t>(0, 3 * n)(rng);
        for (std::size_t k = 0; k < m; ++k) {
            const auto a = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
            const auto b = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
            double cap = std::uniform_real_distribution<double>(0, 10)(rng);
            // Some constraints: infinite arcs, never into the sink (so some cut is finite).
            if (b != 1 && std::bernoulli_distribution(0.15)(rng)) cap = detail::min_cut_network::infinite;
            edges.push_back({a, b, cap});
        }
        detail::min_cut_network net(n);
        for (const auto& e : edges) net.add_edge(e.from, e.to, e.cap);
        const double flow = net.solve(0, 1);
        double best = std::numeric_limits<double>::infinity();
        for (std::uint32_t side = 0; side < (1u << n); ++side)
            if ((side & 1) && !(side & 2)) best = std::min(best, cut_capacity(edges, side));
        CAPTURE(round);
        CHECK(flow == doctest::Approx(best).epsilon(1e-9));
        std::uint32_t side = 0;
        for (std::size_t v = 0; v < n; ++v) side |= std::uint32_t(net.source_side(v)) << v;
        CHECK(net.source_side(0));
        CHECK_FALSE(net.source_side(1));
        CHECK(cut_capacity(edges, side) == doctest::Approx(best).epsilon(1e-9));
    }
}

TEST_CASE("remat.cut_start.is_the_cheapest_choice_at_its_price") {
    SUBCASE("torch-like batch-norm blocks") { expect_cut_start_is_cheapest(testing::torch_like_bn_graph()); }
    SUBCASE("a checkpoint candidate") { expect_cut_start_is_cheapest(testing::skip_reader_graph("skip", 1000, 5.0)); }
    SUBCASE("random training graphs") {
        std::mt19937_64 rng(5);
        testing::remat_graph_options opt;
        opt.blocks = 4;
        for (int round = 0; round < 12; ++round) expect_cut_start_is_cheapest(testing::random_remat_graph(rng, opt));
    }
}
