// The any-order lower bound (schedule/cut_bound.hpp): never above the
// best order found by enumeration or by any planner, exact where the order is
// forced, and on training graphs at least every activation saved for the
// backward pass.
#include "support/fixtures.hpp"
#include "support/order_brute_force.hpp"
#include "support/random_graph.hpp"

#include <memplan/nn/training.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/schedule/cut_bound.hpp>
#include <memplan/schedule/order/select.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace memplan;
using memplan::testing::numbered;

namespace {

/// A random topological order of `g` (Kahn's algorithm, random pick among ready ops).
std::vector<graph::id_type> random_topological_order(const graph& g, std::mt19937_64& rng) {
    const graph_index<graph> index(g);
    std::vector<std::size_t> waiting(g.num_ops(), 0);
    std::vector<std::vector<graph::id_type>> succ(g.num_ops());
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        for (auto t : g.op(static_cast<graph::id_type>(o)).inputs)
            if (index.producer[t] != graph::npos) {
                ++waiting[o];
                succ[index.producer[t]].push_back(static_cast<graph::id_type>(o));
            }
    std::vector<graph::id_type> ready, order;
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        if (waiting[o] == 0) ready.push_back(static_cast<graph::id_type>(o));
    while (!ready.empty()) {
        const std::size_t k = std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng);
        const auto o = ready[k];
        ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(k));
        order.push_back(o);
        for (auto s : succ[o])
            if (--waiting[s] == 0) ready.push_back(s);
    }
    return order;
}

/// The order with a random variant on every step that has variants.
schedule with_random_variants(const graph& g, const std::vector<graph::id_type>& order, std::mt19937_64& rng) {
    schedule s = schedule_from_order(g, order);
    for (auto& st : s)
        if (g.op(st.op).has_variants())
            st.variant = static_cast<graph::id_type>(
                std::uniform_int_distribution<std::size_t>(0, g.op(st.op).variants.size() - 1)(rng));
    return s;
}

/// Ops of `g` that read two or more tensors get variants (up to `max_ops` of
/// them with variants in all) that each read a random non-empty subset of the
/// op's inputs, as a backward op that reads its layer's input or its output.
graph with_partial_variant_reads(graph g, std::mt19937_64& rng, std::size_t max_ops = 4) {
    std::size_t with = 0;
    for (const auto& o : g.ops()) with += o.has_variants();
    auto subset = [&](const std::vector<graph::id_type>& in) {
        std::vector<graph::id_type> keep;
        for (auto t : in)
            if (std::bernoulli_distribution(0.5)(rng)) keep.push_back(t);
        if (keep.empty()) keep = {in[std::uniform_int_distribution<std::size_t>(0, in.size() - 1)(rng)]};
        return keep;
    };
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        auto& op = g.op_at(static_cast<graph::id_type>(o));
        if (op.inputs.size() < 2) continue;
        if (!op.has_variants()) {
            if (with >= max_ops || std::bernoulli_distribution(0.5)(rng)) continue;
            op.variants.push_back({"p", 1.0, op.workspace, {}});
            op.variants.push_back({"q", 1.0, 0, {}});
            ++with;
        }
        for (auto& v : op.variants) v.inputs = subset(op.inputs);
    }
    validate(g);
    return g;
}

/// The smallest schedule_lower_bound over every topological order and every
/// choice of variants (graphs with at most a few variant ops).
std::uint64_t brute_force_over_variants(const graph& g) {
    std::vector<graph::id_type> with_variants;
    for (std::size_t o = 0; o < g.num_ops(); ++o)
        if (g.op(static_cast<graph::id_type>(o)).has_variants()) with_variants.push_back(static_cast<graph::id_type>(o));
    REQUIRE(with_variants.size() <= 6);
    const auto pred = memplan::testing::predecessor_masks(g);
    const std::size_t n = g.num_ops();
    std::uint64_t best = UINT64_MAX;
    std::vector<graph::id_type> order;
    auto rec = [&](auto&& self, std::uint32_t done) -> void {
        if (order.size() == n) {
            for (std::uint32_t pick = 0; pick < (1U << with_variants.size()); ++pick) {
                schedule s = schedule_from_order(g, order);
                for (auto& st : s)
                    for (std::size_t k = 0; k < with_variants.size(); ++k)
                        if (st.op == with_variants[k]) st.variant = static_cast<graph::id_type>((pick >> k) & 1U);
                best = std::min(best, schedule_lower_bound(g, s));
            }
            return;
        }
        for (std::size_t o = 0; o < n; ++o)
            if (!(done >> o & 1) && (pred[o] & ~done) == 0) {
                order.push_back(static_cast<graph::id_type>(o));
                self(self, done | (std::uint32_t{1} << o));
                order.pop_back();
            }
    };
    rec(rec, 0);
    return best;
}

nn::network mlp() {
    nn::network net("mlp");
    auto x = net.input("x", {8, 32});
    auto labels = net.input("labels", {8}, nn::element::i64);
    auto h1 = net.add(nn::linear{32, 64}, {x}, "fc1");
    auto r1 = net.add(nn::relu{}, {h1}, "relu1");
    auto h2 = net.add(nn::linear{64, 64}, {r1}, "fc2");
    auto r2 = net.add(nn::relu{}, {h2}, "relu2");
    auto y = net.add(nn::linear{64, 10}, {r2}, "fc3");
    net.add(nn::softmax_cross_entropy{}, {y, labels}, "loss");
    return net;
}

} // namespace

TEST_CASE("order.cut_bound.diamond") {
    const graph g = memplan::testing::diamond_graph();
    // Independently: at F, cf (60) and ef (50) are read and g (10) is made,
    // whatever ran before; every other op's cut is lighter (E: 40 + 50).
    const auto per_op = certain_live_bytes(g);
    CHECK(per_op == std::vector<std::uint64_t>{10, 60, 80, 70, 90, 120, 10});
    CHECK(any_order_lower_bound(g) == 120);
    CHECK(any_order_lower_bound(g) <= 130); // the best order peaks at 130 (brute force)
    CHECK(memplan::testing::brute_force_best_peak(g) == 130);

    // The same with 32-bit sizes and 16-bit ids.
    basic_graph<std::uint32_t, std::uint16_t> small("diamond16");
    for (const auto& t : g.tensors()) small.add_tensor(t.name, static_cast<std::uint32_t>(t.bytes));
    for (const auto& o : g.ops()) {
        basic_op<std::uint32_t, std::uint16_t> x;
        x.name = o.name;
        for (auto t : o.inputs) x.inputs.push_back(static_cast<std::uint16_t>(t));
        for (auto t : o.outputs) x.outputs.push_back(static_cast<std::uint16_t>(t));
        small.add_op(std::move(x));
    }
    CHECK(any_order_lower_bound(small) == 120U);
}

TEST_CASE("order.cut_bound.chain_is_exact") {
    // A chain has one order, so the bound must be its peak: at op i, its
    // input and output, its smallest workspace, the weights; in-place ops
    // hold only the larger of input and output (kept >= so liveness shares).
    std::mt19937_64 rng(7);
    for (int round = 0; round < 30; ++round) {
        graph g("chain");
        const std::uint64_t weights = std::uniform_int_distribution<std::uint64_t>(0, 50)(rng);
        g.add_tensor("w", weights, true);
        std::vector<std::uint64_t> sizes;
        for (std::size_t i = 0; i <= 12; ++i) {
            sizes.push_back(std::uniform_int_distribution<std::uint64_t>(1, 1000)(rng));
            g.add_tensor(numbered("t", i), sizes.back());
        }
        std::uint64_t expected = weights;
        for (std::size_t i = 1; i <= 12; ++i) {
            op o;
            o.name = numbered("op", i);
            o.inputs = {static_cast<graph::id_type>(i), 0}; // t(i-1) and the weights
            o.outputs = {static_cast<graph::id_type>(i + 1)};
            std::uint64_t ws = 0;
            if (std::bernoulli_distribution(0.3)(rng)) {
                o.variants.push_back({"a", 1.0, std::uniform_int_distribution<std::uint64_t>(0, 300)(rng), {}});
                o.variants.push_back({"b", 1.0, std::uniform_int_distribution<std::uint64_t>(0, 300)(rng), {}});
                ws = std::min(o.variants[0].workspace, o.variants[1].workspace);
            } else {
                o.workspace = ws = std::uniform_int_distribution<std::uint64_t>(0, 300)(rng);
            }
            std::uint64_t here = sizes[i - 1] + sizes[i];
            if (sizes[i - 1] >= sizes[i] && std::bernoulli_distribution(0.4)(rng)) {
                o.inplace.push_back({static_cast<graph::id_type>(i), static_cast<graph::id_type>(i + 1)});
                here = sizes[i - 1];
            }
            expected = std::max(expected, weights + here + ws);
            g.add_op(std::move(o));
        }
        g.add_output(static_cast<graph::id_type>(13));
        CAPTURE(round);
        CHECK(any_order_lower_bound(g) == expected);
        // The only order, with every variant at its smallest workspace.
        schedule s = default_schedule(g);
        for (auto& st : s) {
            const auto& vs = g.op(st.op).variants;
            if (!vs.empty()) st.variant = vs[0].workspace <= vs[1].workspace ? 0 : 1;
        }
        CHECK(schedule_lower_bound(g, s) == expected);
    }
}

TEST_CASE("order.cut_bound.inplace_only_where_the_input_ends") {
    // relu takes over x unless a later op still reads x.
    graph g("relu");
    g.add_tensor("x", 100);
    g.add_tensor("y", 100);
    g.add_tensor("z", 10);
    g.add_op("A", {}, {"x"});
    op r;
    r.name = "relu";
    r.inputs = {0};
    r.outputs = {1};
    r.inplace = {{0, 1}};
    g.add_op(r);
    g.add_op("C", {"y"}, {"z"});
    CHECK(any_order_lower_bound(g) == 110); // C: y + z
    CHECK(certain_live_bytes(g)[1] == 100);
    CHECK(schedule_lower_bound(g, default_schedule(g)) == 110);

    graph h("relu_reread");
    h.add_tensor("x", 100);
    h.add_tensor("y", 100);
    h.add_tensor("z", 10);
    h.add_op("A", {}, {"x"});
    h.add_op(r);
    h.add_op("C", {"x", "y"}, {"z"});
    CHECK(certain_live_bytes(h)[1] == 200); // x is read by C later: no sharing at relu
    CHECK(any_order_lower_bound(h) == 210);
    CHECK(schedule_lower_bound(h, default_schedule(h)) == 210);
}

TEST_CASE("order.cut_bound.variant_reads_count_only_when_every_variant_reads") {
    // C reads x or y depending on its variant (like a backward from the
    // output): x need not survive B, so the cut at C holds only z.
    graph g("variant_reads");
    g.add_tensor("x", 100);
    g.add_tensor("y", 10);
    g.add_tensor("z", 1);
    g.add_op("A", {}, {"x"});
    g.add_op("B", {"x"}, {"y"});
    op c;
    c.name = "C";
    c.inputs = {0, 1};
    c.outputs = {2};
    c.variants.push_back({"from_x", 1.0, 0, {0}});
    c.variants.push_back({"from_y", 1.0, 0, {1}});
    g.add_op(c);
    validate(g);
    // At C, x (100) or y (10) is still live, whichever variant runs: 10 + z.
    CHECK(certain_live_bytes(g) == std::vector<std::uint64_t>{100, 110, 11});
    CHECK(any_order_lower_bound(g) == 110);
    // (schedule_free_lower_bound counts every input C lists, 111: too much
    // for the order A B C with C reading only y, which peaks at 110 on B.)

    // With its default variant, C reads x: x survives until C.
    CHECK(certain_live_bytes(g, {.any_variant = false}) == std::vector<std::uint64_t>{100, 110, 101});
    CHECK(any_order_lower_bound(g, {.any_variant = false}) == 110);

    // A variant that reads everything keeps both in the cut at C.
    g.op_at(2).variants[1].inputs.clear();
    CHECK(certain_live_bytes(g) == std::vector<std::uint64_t>{100, 110, 101});
}

TEST_CASE("order.cut_bound.variant_reads_shared_between_readers") {
    // t (100) and u (30) may each be read by C and by D, whichever variants
    // run; a tensor both read must count once, so each counts half for each
    // reader still ahead.
    graph g("shared_choice");
    g.add_tensor("t", 100);
    g.add_tensor("u", 30);
    g.add_tensor("c", 0);
    g.add_tensor("d", 0);
    g.add_op("A", {}, {"t"});
    g.add_op("B", {"t"}, {"u"});
    for (const char* name : {"C", "D"}) {
        op x;
        x.name = name;
        x.inputs = {0, 1};
        x.outputs = {static_cast<graph::id_type>(name[0] == 'C' ? 2 : 3)};
        x.variants.push_back({"from_t", 1.0, 0, {0}});
        x.variants.push_back({"from_u", 1.0, 0, {1}});
        g.add_op(std::move(x));
    }
    validate(g);
    // At C: D is no descendant of C, so only C's choice counts, and only C
    // of the two readers is ahead: min(100, 30).
    CHECK(certain_live_bytes(g) == std::vector<std::uint64_t>{100, 130, 30, 30});
    CHECK(any_order_lower_bound(g) <= brute_force_over_variants(g));
    CHECK(brute_force_over_variants(g) == 130);

    // With D after C (D reads C's output), at C both choices are ahead:
    // min(50, 30) + min(50, 30) = 60 when u and t are each split two ways.
    graph h("shared_choice_chain");
    h.add_tensor("t", 100);
    h.add_tensor("u", 30);
    h.add_tensor("c", 0);
    h.add_tensor("d", 0);
    h.add_op("A", {}, {"t"});
    h.add_op("B", {"t"}, {"u"});
    op c;
    c.name = "C";
    c.inputs = {0, 1};
    c.outputs = {2};
    c.variants.push_back({"from_t", 1.0, 0, {0}});
    c.variants.push_back({"from_u", 1.0, 0, {1}});
    h.add_op(c);
    c.name = "D";
    c.inputs = {0, 1, 2};
    c.outputs = {3};
    h.add_op(c);
    validate(h);
    CHECK(certain_live_bytes(h)[2] == 30); // u / 2 from C, u / 2 from D
    CHECK(any_order_lower_bound(h) <= brute_force_over_variants(h));
}

TEST_CASE("order.cut_bound.never_above_the_best_order") {
    const auto graphs = memplan::testing::small_order_graphs(2024, 80);
    std::mt19937_64 rng(11);
    std::size_t tight = 0, above_free = 0;
    for (std::size_t i = 0; i < graphs.size(); ++i) {
        const auto& g = graphs[i];
        CAPTURE(i);
        const auto lb = any_order_lower_bound(g);
        const auto best = memplan::testing::brute_force_best_peak(g); // default variants
        CHECK(lb <= best);
        CHECK(any_order_lower_bound(g, {.any_variant = false}) <= best);
        CHECK(any_order_lower_bound(g, {.any_variant = false}) >= lb);
        CHECK(lb >= schedule_free_lower_bound(g));
        tight += lb == best;
        above_free += lb > schedule_free_lower_bound(g);
        // Variants that read only part of the op's inputs: still below every
        // order with every choice of variants.
        const graph p = with_partial_variant_reads(g, rng);
        CHECK(any_order_lower_bound(p) <= brute_force_over_variants(p));
        CHECK(any_order_lower_bound(p, {.any_variant = false}) <= memplan::testing::brute_force_best_peak(p));
    }
    MESSAGE("bound equals the best order on ", tight, " of ", graphs.size(), " graphs; above the schedule-free bound on ",
            above_free);
    CHECK(tight > graphs.size() / 2); // the cut is usually tight on small graphs
}

TEST_CASE("order.cut_bound.training_graphs_below_every_order_tried") {
    // Larger training-like graphs (variants, in-place pairs, weights): below
    // the default order, the planners' orders and random orders with random variants.
    std::mt19937_64 rng(5);
    for (int round = 0; round < 12; ++round) {
        memplan::testing::random_graph_options ro;
        ro.forward_ops = 6 + static_cast<std::size_t>(round);
        const graph g = with_partial_variant_reads(memplan::testing::random_training_graph(rng, ro), rng, 1000);
        CAPTURE(round);
        const auto lb = any_order_lower_bound(g);
        const auto lb_default = any_order_lower_bound(g, {.any_variant = false});
        CHECK(lb_default >= lb);
        CHECK(lb_default <= schedule_lower_bound(g, default_schedule(g)));
        CHECK(lb_default <= order_by_name("greedy", g).size);
        for (int k = 0; k < 40; ++k) {
            const auto order = random_topological_order(g, rng);
            REQUIRE(order.size() == g.num_ops());
            CHECK(lb <= schedule_lower_bound(g, with_random_variants(g, order, rng)));
            CHECK(lb_default <= schedule_lower_bound(g, schedule_from_order(g, order)));
        }
    }
}

TEST_CASE("order.cut_bound.training_mlp_holds_every_saved_activation") {
    const graph g = training_graph(mlp());
    validate(g);
    const graph_index<graph> index(g);
    // Saved activations, computed independently: non-persistent tensors made
    // by a forward op (or fed in, like the data) and read by every variant of
    // some backward op.
    std::set<graph::id_type> saved;
    std::size_t first_backward = g.num_ops();
    for (std::size_t o = 0; o < g.num_ops(); ++o) {
        const auto& op = g.op(static_cast<graph::id_type>(o));
        if (op.phase != phase::backward) continue;
        first_backward = std::min(first_backward, o);
        for (auto t : op.inputs) {
            const auto p = index.producer[t];
            if ((p != graph::npos && g.op(p).phase != phase::forward) || g.tensor(t).persistent) continue;
            const bool every = std::all_of(op.variants.begin(), op.variants.end(), [&](const auto& v) {
                return v.inputs.empty() || std::find(v.inputs.begin(), v.inputs.end(), t) != v.inputs.end();
            });
            if (every) saved.insert(t);
        }
    }
    REQUIRE(first_backward < g.num_ops());
    REQUIRE(saved.size() >= 3);
    std::uint64_t saved_bytes = 0, weights = 0;
    for (auto t : saved) saved_bytes += g.tensor(t).bytes;
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (g.tensor(static_cast<graph::id_type>(t)).persistent && index.is_graph_input(static_cast<graph::id_type>(t)))
            weights += g.tensor(static_cast<graph::id_type>(t)).bytes;
    const auto per_op = certain_live_bytes(g);
    CHECK(per_op[first_backward] >= saved_bytes + weights);
    const auto lb = any_order_lower_bound(g);
    CHECK(lb >= saved_bytes + weights);
    CHECK(lb > schedule_free_lower_bound(g)); // the cut sees what one op alone cannot
    CHECK(lb <= schedule_lower_bound(g, default_schedule(g)));
    CHECK(lb <= order_by_name("greedy", g).size);
}

TEST_CASE("order.cut_bound.rejects_invalid_graphs") {
    graph g("cycle");
    g.add_tensor("a", 1);
    g.add_tensor("b", 1);
    g.add_op("P", {"b"}, {"a"});
    g.add_op("Q", {"a"}, {"b"});
    const auto msg = memplan::testing::message_of([&] { (void)any_order_lower_bound(g); });
    CHECK(msg.find("cycle") != std::string::npos);
    CHECK(msg.find("'P'") != std::string::npos);
}
