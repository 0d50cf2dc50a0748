// The chain dynamic program: its optimum equals an exhaustive search over
// every sequence of segment runs under the same memory model; its sequences
// keep within the memory they were solved for; and the planner's plans on
// random and zoo graphs are valid and fit their budget.
#include "support/remat_graphs.hpp"

#include <memplan/check/validator.hpp>
#include <memplan/remat/chain_dp.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/zoo/zoo.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <queue>
#include <random>
#include <tuple>

using namespace memplan;
using detail::chain_model;
using detail::chain_solver;
using detail::chain_step_kind;

namespace {

chain_model random_chain(std::mt19937_64& rng, std::size_t L, bool with_options = false) {
    auto u = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
    chain_model m;
    m.resize(L);
    for (std::size_t i = 1; i <= L; ++i) {
        m.f[i] = static_cast<double>(u(1, 9));
        m.f_n[i] = m.f[i] - static_cast<double>(u(0, 1)) * 0.5;
        m.f_b[i] = m.f[i] - static_cast<double>(u(0, 2)) * 0.5;
        m.a[i] = i == L ? 0 : u(1, 4);
        m.abar[i] = m.a[i] + u(0, 5);
        m.abar_b[i] = m.abar[i] - std::min(m.abar[i], u(0, 2));
        m.ovf_n[i] = m.a[i] + u(0, 2);
        m.ovf_all[i] = m.abar[i] + u(0, 2);
        m.ovf_b[i] = m.abar_b[i] + u(0, 2);
        m.d[i] = i == L ? 0 : u(1, 3);
        m.ovb[i] = m.d[i] + u(0, 4);
        // Block plans: keep less than Rotor's keep-all for more compute, or
        // more for less (a faster variant), with their own peaks.
        for (std::size_t k = with_options ? u(0, 2) : 0; k > 0; --k) {
            detail::chain_option w;
            w.abar = m.a[i] + u(0, 5);
            w.cost = static_cast<double>(u(1, 12));
            w.ovf = w.abar + u(0, 3);
            w.ovb = m.d[i] + u(0, 5);
            m.options[i].push_back(w);
        }
    }
    return m;
}

// Exhaustive search (Dijkstra) over all sequences of: forward a segment
// keeping only its output, keeping everything (Rotor's way or one of the
// segment's options), keeping what its backward needs (right before the
// backward), run the next backward, drop an output (not the input of a
// segment whose kept tensors wait for its backward).
double brute_force(const chain_model& m, std::size_t M) {
    const std::size_t L = m.length();
    // outputs, keep-all, keep-back, next backward, per segment the way it
    // keeps all (0: Rotor's, j + 1: option j), 2 bits each
    using state = std::tuple<unsigned, unsigned, unsigned, std::size_t, unsigned>;
    std::map<state, double> dist;
    using item = std::pair<double, state>;
    std::priority_queue<item, std::vector<item>, std::greater<>> q;
    auto push = [&](state s, double c) {
        auto it = dist.find(s);
        if (it != dist.end() && it->second <= c) return;
        dist[s] = c;
        q.push({c, s});
    };
    auto way = [](unsigned O, std::size_t k) { return O >> (2 * k) & 3u; };
    auto option = [&](unsigned O, std::size_t k) -> const detail::chain_option* {
        return way(O, k) == 0 ? nullptr : &m.options[k][way(O, k) - 1];
    };
    push({0u, 0u, 0u, L, 0u}, 0.0);
    while (!q.empty()) {
        auto [c, s] = q.top();
        q.pop();
        if (dist[s] < c) continue;
        auto [A, F, Bk, j, O] = s;
        if (j == 0) return c;
        std::size_t stored = 0;
        for (std::size_t k = 1; k <= L; ++k) {
            if (A >> k & 1u) stored += m.a[k];
            if (F >> k & 1u) stored += option(O, k) ? option(O, k)->abar : m.abar[k];
            if (Bk >> k & 1u) stored += m.abar_b[k];
        }
        auto avail = [&](std::size_t k) { return k == 0 || (A >> k & 1u) || (F >> k & 1u); };
        for (std::size_t i = 1; i <= j; ++i) {
            if (!avail(i - 1)) continue;
            const unsigned bit = 1u << i;
            const unsigned clear = O & ~(3u << (2 * i));
            if (stored + m.d[j] + m.ovf_n[i] <= M && !(A & bit) && !(F & bit))
                push({A | bit, F, Bk, j, O}, c + m.f_n[i]);
            if (stored + m.d[j] + m.ovf_all[i] <= M && !(F & bit))
                push({A & ~bit, F | bit, Bk, j, clear}, c + m.f[i]);
            for (std::size_t w = 0; w < m.options[i].size(); ++w)
                if (stored + m.d[j] + m.options[i][w].ovf <= M && !(F & bit))
                    push({A & ~bit, F | bit, Bk, j, clear | static_cast<unsigned>(w + 1) << (2 * i)},
                         c + m.options[i][w].cost);
            if (i == j && stored + m.d[j] + m.ovf_b[i] <= M && !(Bk & bit) && !(F & bit))
                push({A, F, Bk | bit, j, O}, c + m.f_b[i]);
        }
        const unsigned jb = 1u << j;
        const std::size_t ovb = (F & jb) && option(O, j) ? option(O, j)->ovb : m.ovb[j];
        if (((F & jb) || (Bk & jb)) && avail(j - 1) && stored + ovb <= M)
            push({A & ~jb, F & ~jb, Bk & ~jb, j - 1, O & ~(3u << (2 * j))}, c);
        // Rotor's model: a segment's input stays until the segment's backward
        // once what that backward reads is kept. (Dropping it and running the
        // segment before again later can be cheaper: outside the model.)
        for (std::size_t k = 1; k <= L; ++k)
            if ((A >> k & 1u) && !(F >> (k + 1) & 1u) && !(Bk >> (k + 1) & 1u))
                push({A & ~(1u << k), F, Bk, j, O}, c);
    }
    return chain_solver::infinity;
}

// Replays a sequence: every item lives from its run to its last use; returns
// the peak and the cost, and checks the order of backward steps.
std::pair<std::size_t, double> replay(const chain_model& m, const std::vector<detail::chain_step>& seq) {
    const std::size_t L = m.length();
    struct item {
        std::size_t bytes, made, last;
    };
    std::vector<item> items;
    std::vector<std::size_t> provider(L + 1, SIZE_MAX), back(L + 1, SIZE_MAX); // current item of a^k / abar^k
    std::vector<std::size_t> transient(seq.size(), 0);
    double cost = 0;
    std::size_t next = L;
    auto use = [&](std::size_t it, std::size_t step) {
        if (it != SIZE_MAX) items[it].last = step;
    };
    for (std::size_t s = 0; s < seq.size(); ++s) {
        const auto [kind, i, option] = seq[s];
        const detail::chain_option* w = option == detail::chain_step::builtin ? nullptr : &m.options[i][option];
        if (kind == chain_step_kind::backward) {
            REQUIRE(i == next);
            --next;
            REQUIRE(back[i] != SIZE_MAX);
            use(back[i], s);
            if (i > 1) REQUIRE(provider[i - 1] != SIZE_MAX);
            if (i > 1) use(provider[i - 1], s);
            transient[s] = w ? w->ovb : m.ovb[i];
            back[i] = SIZE_MAX;
            continue;
        }
        if (i > 1) REQUIRE(provider[i - 1] != SIZE_MAX);
        if (i > 1) use(provider[i - 1], s);
        const std::size_t d = m.d[next];
        if (kind == chain_step_kind::forward_none) {
            cost += m.f_n[i];
            transient[s] = d + m.ovf_n[i];
            items.push_back({m.a[i], s, s});
            provider[i] = items.size() - 1;
        } else if (kind == chain_step_kind::forward_all) {
            cost += w ? w->cost : m.f[i];
            transient[s] = d + (w ? w->ovf : m.ovf_all[i]);
            items.push_back({w ? w->abar : m.abar[i], s, s});
            provider[i] = back[i] = items.size() - 1;
        } else {
            cost += m.f_b[i];
            transient[s] = d + m.ovf_b[i];
            items.push_back({m.abar_b[i], s, s});
            back[i] = items.size() - 1;
        }
    }
    REQUIRE(next == 0);
    std::size_t peak = 0;
    for (std::size_t s = 0; s < seq.size(); ++s) {
        std::size_t mem = transient[s];
        for (const auto& x : items)
            if (x.made < s && x.last >= s) mem += x.bytes;
        peak = std::max(peak, mem);
    }
    return {peak, cost};
}

} // namespace

namespace {

void check_dp_against_brute_force(std::uint64_t seed, bool with_options) {
    std::mt19937_64 rng(seed);
    int compared = 0, matched = 0, used_options = 0;
    for (int trial = 0; trial < 60; ++trial) {
        const std::size_t L = 3 + static_cast<std::size_t>(trial) % 6;
        const auto m = random_chain(rng, L, with_options);
        const std::size_t top = 40;
        const chain_solver dp(m, top);
        for (std::size_t M = 0; M <= top; M += 3) {
            CAPTURE(trial);
            CAPTURE(M);
            const double want = brute_force(m, M);
            const double got = dp.cost(M);
            if (want == chain_solver::infinity) {
                CHECK(got == chain_solver::infinity);
                continue;
            }
            REQUIRE(got != chain_solver::infinity);
            // Every sequence of the program is one the search sees, so it can
            // never beat the search; it matches it on nearly every instance
            // (a few rare interleavings the recursion does not express remain).
            CHECK(got >= want - 1e-9);
            if (got <= want + 1e-9) ++matched;
            const auto seq = dp.sequence(M);
            for (const auto& st : seq) used_options += st.option != detail::chain_step::builtin;
            const auto [peak, cost] = replay(m, seq);
            CHECK(peak <= M);
            CHECK(cost == doctest::Approx(got));
            ++compared;
        }
    }
    CHECK(compared > 100);
    CHECK(matched * 100 >= compared * 97);
    if (with_options) CHECK(used_options > 100); // the optima do run block plans
    MESSAGE(compared, " budgets compared, ", matched, " optimal, ", used_options, " option runs");
}

} // namespace

TEST_CASE("remat.chain.dp_matches_brute_force") { check_dp_against_brute_force(7, false); }

// With block plans as further ways to run a segment (block_dp), the program
// still finds the exhaustive search's optimum and keeps within its memory.
TEST_CASE("remat.chain.dp_with_options_matches_brute_force") { check_dp_against_brute_force(8, true); }

namespace {

void check_chain_plans(const graph& g, const remat_result& base) {
    const auto [need, op] = remat_context<graph>(g).min_memory();
    for (double frac : {1.0, 0.75, 0.5, 0.3}) {
        CAPTURE(frac);
        remat_options o;
        o.budget = std::max<std::uint64_t>(static_cast<std::uint64_t>(static_cast<double>(base.arena()) * frac), 1);
        o.time_limit = 2;
        const auto r = chain_dp{}.plan(g, o);
        CHECK(r.planner == "chain_dp");
        if (has_solution(r.status)) {
            CHECK(r.arena() <= o.budget);
            CHECK(r.overhead() >= -1e-9); // default variants: never cheaper than store-all
        }
        if (o.budget < need) {
            CHECK(r.status == status::infeasible);
            CHECK(r.bound_op == op);
        }
        if (!r.plan.steps.empty()) {
            const auto report = check_plan(g, r.plan);
            CHECK_MESSAGE(report.ok(), report.to_string());
        }
        if (frac == 1.0) {
            CHECK(r.status == status::feasible);
            CHECK(r.cost == doctest::Approx(base.cost)); // keeping everything fits: no recomputation
        }
    }
}

} // namespace

TEST_CASE("remat.chain.random_graphs_valid") {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 25; ++trial) {
        CAPTURE(trial);
        testing::remat_graph_options go;
        go.blocks = 4 + static_cast<std::size_t>(trial) % 10;
        const graph g = testing::random_remat_graph(rng, go);
        check_chain_plans(g, store_all{}.plan(g, {}));
    }
}

TEST_CASE("remat.chain.zoo_small_batch") {
    for (const char* name : {"resnet18", "mobilenet_v2"}) {
        CAPTURE(name);
        zoo_options zo;
        zo.batch = 16;
        const graph g = zoo_graph(name, zo);
        const auto base = store_all{}.plan(g, {});
        check_chain_plans(g, base);
        remat_options o;
        o.budget = base.arena() * 3 / 5;
        const auto r = chain_dp{}.plan(g, o);
        CHECK(r.status == status::feasible); // 60% of store-all is reachable by checkpointing these chains
    }
}

TEST_CASE("remat.chain.below_min_memory_is_infeasible") {
    zoo_options zo;
    zo.batch = 2;
    const graph g = zoo_graph("resnet18", zo);
    const auto [need, op] = remat_context<graph>(g).min_memory();
    remat_options o;
    o.budget = need - 1;
    const auto r = chain_dp{}.plan(g, o);
    CHECK(r.status == status::infeasible);
    CHECK(r.bound == need);
    CHECK(r.bound_op == op);
    CHECK(r.message.find(op) != std::string::npos);
}
