// The independent validator: a hand-made valid training plan, one broken copy
// per rule, structural faults, exhaustive overlap reporting, plans made by
// make_plan on random graphs, and offset assignments checked against a
// brute-force pairwise oracle.
#include <memplan/check/placement.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace memplan;

namespace {

using id = graph::id_type;

// "t" + std::to_string(k), spelled so that GCC 12's -Wrestrict false positive
// on operator+(const char*, std::string&&) stays quiet.
std::string numbered(std::string prefix, std::size_t k) {
    prefix += std::to_string(k);
    return prefix;
}
constexpr id no_variant = std::numeric_limits<id>::max();

// A small training step: fc (two variants, one with workspace) -> relu (in
// place) -> loss, then backward with fc recomputed to get h back, and an SGD
// update writing a new persistent weight.
graph training_graph() {
    graph g("tiny-train");
    g.add_tensor("x", 1024);
    g.add_tensor("w", 512, true);
    g.add_tensor("h", 1024);
    g.add_tensor("a", 1024);
    g.add_tensor("loss", 256);
    g.add_tensor("da", 1024);
    g.add_tensor("dh", 1024);
    g.add_tensor("dw", 512);
    g.add_tensor("w_new", 512, true);
    const auto fc = g.add_op("fc", {"x", "w"}, {"h"});
    g.op_at(fc).variants = {{"gemm", 1.0, 256}, {"direct", 2.0, 0}};
    const auto relu = g.add_op("relu", {"h"}, {"a"});
    g.op_at(relu).inplace.push_back({*g.find_tensor("h"), *g.find_tensor("a")});
    g.add_op("loss", {"a"}, {"loss"});
    g.add_op("loss_bw", {"loss", "a"}, {"da"}, 1.0, 0, phase::backward);
    g.add_op("relu_bw", {"da", "h"}, {"dh"}, 1.0, 0, phase::backward);
    g.add_op("fc_bw", {"dh", "x"}, {"dw"}, 1.0, 128, phase::backward);
    g.add_op("sgd", {"w", "dw"}, {"w_new"}, 1.0, 0, phase::update);
    g.add_output(*g.find_tensor("loss"));
    validate(g);
    return g;
}

// Buffer indices of the hand-made plan, for the tests that break it.
enum : std::size_t { B_X, B_W, B_H0, B_WS0, B_A, B_LOSS, B_DA, B_H1, B_DH, B_WS6, B_DW, B_WNEW };

buffer tensor_buffer(const graph& g, const char* name, std::uint64_t offset, std::size_t first, std::size_t last) {
    buffer b;
    b.tensor = *g.find_tensor(name);
    b.bytes = g.tensor(b.tensor).bytes;
    b.offset = offset;
    b.first = first;
    b.last = last;
    return b;
}

buffer workspace_buffer(std::size_t step, std::uint64_t bytes, std::uint64_t offset) {
    buffer b;
    b.step = step;
    b.bytes = bytes;
    b.offset = offset;
    b.first = b.last = step;
    return b;
}

// Worked out by hand; see the comment on each buffer for its bytes.
plan training_plan(const graph& g) {
    plan p;
    p.graph = g.name();
    p.alignment = 64;
    p.arena_bytes = 4864;
    auto op = [&](const char* n) { return *g.find_op(n); };
    p.steps = {
        {op("fc"), 0},             // 0: gemm, 256 bytes of workspace
        {op("relu"), no_variant},  // 1: a over h
        {op("loss"), no_variant},  // 2
        {op("loss_bw"), no_variant}, // 3
        {op("fc"), 1},             // 4: recompute h, direct: no workspace
        {op("relu_bw"), no_variant}, // 5
        {op("fc_bw"), no_variant}, // 6: 128 bytes of workspace
        {op("sgd"), no_variant},   // 7
    };
    p.buffers = {
        tensor_buffer(g, "x", 0, 0, 6),        // [0, 1024)
        tensor_buffer(g, "w", 1024, 0, 7),     // [1024, 1536)
        tensor_buffer(g, "h", 1536, 0, 1),     // [1536, 2560)
        workspace_buffer(0, 256, 2560),        // [2560, 2816)
        tensor_buffer(g, "a", 1536, 1, 3),     // over h
        tensor_buffer(g, "loss", 2560, 2, 7),  // [2560, 2816), after the workspace
        tensor_buffer(g, "da", 2816, 3, 5),    // [2816, 3840)
        tensor_buffer(g, "h", 1536, 4, 5),     // recomputed, where a was
        tensor_buffer(g, "dh", 3840, 5, 6),    // [3840, 4864)
        workspace_buffer(6, 128, 1536),        // where h was
        tensor_buffer(g, "dw", 2816, 6, 7),    // where da was
        tensor_buffer(g, "w_new", 0, 7, 7),    // where x was
    };
    p.buffers[B_A].alias = *g.find_tensor("h");
    return p;
}

// The report has violations of `rule` and of no other rule.
bool only_rule(const validation_report& r, int rule) {
    if (!r.has_rule(rule)) return false;
    for (const auto& v : r.violations)
        if (v.rule != rule) return false;
    return true;
}

// ---- A simple allocator of our own: every block stacked on the last ----
struct stacking_allocator {
    static constexpr std::string_view name = "test_stacking";
    alloc_result place(const alloc_problem& p) const {
        alloc_result r;
        std::uint64_t top = 0;
        for (const auto& it : p.items) {
            const std::uint64_t at = *detail::checked_align_up<std::uint64_t>(top, p.alignment);
            r.offsets.push_back(it.size == 0 ? 0 : at); // empty blocks at 0: never past the arena
            if (it.size > 0) top = at + it.size;
            r.size = std::max(r.size, it.size == 0 ? 0 : at + it.size);
        }
        r.status = status::feasible;
        return r;
    }
};

// ---- And a first-fit one, so that plans really reuse memory ----
struct first_fit_allocator {
    static constexpr std::string_view name = "test_first_fit";
    alloc_result place(const alloc_problem& p) const {
        alloc_result r;
        const std::uint64_t align = std::max<std::uint64_t>(p.alignment, 1);
        for (std::size_t k = 0; k < p.items.size(); ++k) {
            const auto& it = p.items[k];
            std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;
            for (std::size_t j = 0; j < k; ++j)
                if (p.items[j].size > 0 && p.items[j].overlaps_in_time(it))
                    taken.push_back({r.offsets[j], r.offsets[j] + p.items[j].size});
            std::sort(taken.begin(), taken.end());
            std::uint64_t at = 0;
            for (auto [lo, hi] : taken) {
                if (at + it.size <= lo) break;
                at = std::max(at, (hi + align - 1) / align * align);
            }
            r.offsets.push_back(it.size == 0 ? 0 : at);
        }
        r.status = status::feasible;
        return r;
    }
};

// Random training-like graph: a forward DAG over persistent weights and one
// input, a backward op per forward op, an update per weight. Some ops have
// variants with workspaces, some outputs may take over an input in place.
graph random_graph(std::mt19937_64& rng, std::size_t n_forward) {
    auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
    auto bytes = [&]() -> std::uint64_t { return pick(5) == 0 ? 0 : 1 + pick(5000); };
    auto chance = [&](int pct) { return static_cast<int>(pick(100)) < pct; };
    graph g("random");
    std::vector<id> acts{g.add_tensor("x", 1 + pick(5000))};
    std::vector<id> weights, grads;
    for (std::size_t k = 0; k < n_forward; ++k) {
        op o;
        o.name = numbered("f", k);
        const std::size_t n_in = 1 + pick(std::min<std::size_t>(acts.size(), 3));
        for (std::size_t j = 0; j < n_in; ++j) {
            const id t = acts[acts.size() - 1 - pick(std::min<std::size_t>(acts.size(), 4))];
            if (std::find(o.inputs.begin(), o.inputs.end(), t) == o.inputs.end()) o.inputs.push_back(t);
        }
        if (chance(50)) {
            weights.push_back(g.add_tensor(numbered("w", k), 1 + pick(3000), true));
            o.inputs.push_back(weights.back());
        }
        const std::size_t n_out = 1 + pick(2);
        for (std::size_t j = 0; j < n_out; ++j)
            o.outputs.push_back(g.add_tensor(numbered("t", k) + numbered("_", j), bytes()));
        o.workspace = chance(30) ? 1 + pick(2000) : 0;
        if (chance(30)) o.variants = {{"v0", 1.0, pick(3) == 0 ? 0 : 1 + pick(3000)}, {"v1", 2.0, 0}};
        if (chance(40) && !g.tensor(o.inputs.front()).persistent)
            o.inplace.push_back({o.inputs.front(), o.outputs.front()});
        o.cost = 1.0 + static_cast<double>(pick(10));
        for (auto t : o.outputs) acts.push_back(t);
        g.add_op(std::move(o));
    }
    const id loss = acts.back();
    g.add_output(loss);
    // Backward: each reads the loss-side gradient so far and its forward inputs.
    id grad = g.add_tensor("dloss", 1 + pick(5000));
    g.add_op("loss_grad", {g.tensor(loss).name}, {"dloss"}, 1.0, 0, phase::backward);
    for (std::size_t k = n_forward; k-- > 0;) {
        const auto fo = *g.find_op(numbered("f", k));
        op b;
        b.name = numbered("b", k);
        b.phase = phase::backward;
        b.inputs.push_back(grad);
        for (auto t : g.op(fo).inputs)
            if (std::find(b.inputs.begin(), b.inputs.end(), t) == b.inputs.end() && chance(60)) b.inputs.push_back(t);
        const id next = g.add_tensor(numbered("g", k), bytes());
        b.outputs.push_back(next);
        for (auto t : g.op(fo).inputs)
            if (g.tensor(t).persistent) {
                grads.push_back(g.add_tensor("d" + g.tensor(t).name, g.tensor(t).bytes));
                b.outputs.push_back(grads.back());
            }
        b.workspace = chance(30) ? 1 + pick(2000) : 0;
        if (chance(30)) b.inplace.push_back({grad, next});
        g.add_op(std::move(b));
        grad = next;
    }
    for (std::size_t k = 0; k < weights.size(); ++k) {
        const std::string w = g.tensor(weights[k]).name; // a copy: add_tensor may move the tensors
        g.add_tensor(w + "_new", g.tensor(weights[k]).bytes, true);
        g.add_op(numbered("u", k), {w, "d" + w}, {w + "_new"}, 1.0, 0, phase::update);
    }
    validate(g);
    return g;
}

// The default schedule with a random variant per step and a few forward ops
// run again later (recomputation).
schedule random_schedule(std::mt19937_64& rng, const graph& g) {
    auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
    schedule s = default_schedule(g);
    const std::size_t extra = pick(4);
    for (std::size_t e = 0; e < extra; ++e) {
        const std::size_t at = pick(s.size());
        if (g.op(s[at].op).phase != phase::forward) continue;
        const std::size_t to = at + 1 + pick(s.size() - at);
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(to), s[at]);
    }
    for (auto& st : s)
        if (g.op(st.op).has_variants()) st.variant = static_cast<id>(pick(g.op(st.op).variants.size()));
    return s;
}

// Brute-force oracle for rule 4 on a plan: every pair, alias partners found by
// the rule's own words (declared pair, same offset, source ends at that step).
std::set<std::pair<std::size_t, std::size_t>> overlapping_pairs(const graph& g, const plan& p) {
    std::set<std::pair<std::size_t, std::size_t>> out;
    auto partner = [&](std::size_t y, std::size_t x) {
        const auto& by = p.buffers[y];
        const auto& bx = p.buffers[x];
        if (!by.has_alias() || bx.is_workspace() || bx.tensor != by.alias) return false;
        const auto& op = g.op(p.steps[by.first].op);
        const bool declared = std::find(op.inplace.begin(), op.inplace.end(), std::pair{by.alias, by.tensor}) !=
                              op.inplace.end();
        return declared && bx.last == by.first && bx.first <= by.first && bx.offset == by.offset;
    };
    for (std::size_t a = 0; a < p.buffers.size(); ++a)
        for (std::size_t b = a + 1; b < p.buffers.size(); ++b) {
            const auto& x = p.buffers[a];
            const auto& y = p.buffers[b];
            if (x.bytes == 0 || y.bytes == 0 || !x.overlaps_in_time(y)) continue;
            if (x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes && !partner(a, b) && !partner(b, a))
                out.insert({a, b});
        }
    return out;
}

std::set<std::pair<std::size_t, std::size_t>> reported_pairs(const validation_report& r, const plan& p) {
    // The report names the lower buffer; find the other in the message.
    std::set<std::pair<std::size_t, std::size_t>> out;
    for (const auto& v : r.violations) {
        if (v.rule != 4 || v.message.rfind("buffers ", 0) != 0) continue;
        const auto and_at = v.message.find(" and ");
        const std::size_t other = std::stoul(v.message.substr(and_at + 5));
        REQUIRE(other < p.buffers.size());
        out.insert({v.buffer, other});
    }
    return out;
}

std::set<std::pair<std::size_t, std::size_t>> overlapping_items(const alloc_problem& p,
                                                                const std::vector<std::uint64_t>& off) {
    std::set<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t a = 0; a < p.items.size(); ++a)
        for (std::size_t b = a + 1; b < p.items.size(); ++b) {
            const auto& x = p.items[a];
            const auto& y = p.items[b];
            // Not alloc_item::overlaps_in_time: it counts an empty interval
            // inside another as overlapping.
            if (x.size == 0 || y.size == 0 || x.begin >= x.end || y.begin >= y.end) continue;
            if (!(x.begin < y.end && y.begin < x.end)) continue;
            if (off[a] < off[b] + y.size && off[b] < off[a] + x.size) out.insert({a, b});
        }
    return out;
}

} // namespace

TEST_CASE("check.plan.hand_made_training_plan_is_valid") {
    const graph g = training_graph();
    const plan p = training_plan(g);
    const auto r = check_plan(g, p);
    INFO(r.to_string());
    CHECK(r.ok());
    CHECK(r.to_string().empty());
}

TEST_CASE("check.plan.rule1_op_never_runs_or_backward_twice") {
    const graph g = training_graph();
    SUBCASE("an op that never runs") {
        graph g2 = g;
        g2.add_op("probe", {"x"}, {});
        const auto r = check_plan(g2, training_plan(g));
        INFO(r.to_string());
        CHECK(only_rule(r, 1));
        CHECK(r.violations.front().message.find("op 'probe' never runs") != std::string::npos);
    }
    SUBCASE("a backward op run twice") {
        graph g2 = g;
        g2.op_at(*g2.find_op("fc")).phase = phase::backward; // fc runs at steps 0 and 4
        const auto r = check_plan(g2, training_plan(g));
        INFO(r.to_string());
        CHECK(only_rule(r, 1));
        CHECK(r.violations.front().step == 4);
        CHECK(check_plan(g2, training_plan(g), {.allow_backward_recompute = true}).ok());
    }
}

TEST_CASE("check.plan.rule2_input_not_live_or_not_yet_produced") {
    const graph g = training_graph();
    SUBCASE("x freed before its last reader") {
        plan p = training_plan(g);
        p.buffers[B_X].last = 5; // fc_bw reads x at step 6
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 2));
        CHECK(r.count(2) == 1);
        CHECK(r.violations.front().step == 6);
        CHECK(r.violations.front().tensor == "x");
    }
    SUBCASE("a tensor read before its recomputation") {
        // relu_bw's h comes from the recomputation at step 4; make the
        // recomputation run at step 5 instead by swapping the two steps.
        plan p = training_plan(g);
        std::swap(p.steps[4], p.steps[5]);
        p.buffers[B_H1].first = 5;
        p.buffers[B_DH].first = 4;
        p.buffers[B_DH].last = 6;
        p.buffers[B_DH].offset = 4864; // keep clear of the rest
        p.arena_bytes = 5888;
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 2));
        CHECK(r.count(2) == 1);
        CHECK(r.violations.front().step == 4);
        CHECK(r.violations.front().tensor == "h");
    }
}

TEST_CASE("check.plan.rule3_outputs_and_buffer_starts") {
    const graph g = training_graph();
    SUBCASE("a buffer that starts a step early") {
        plan p = training_plan(g);
        p.buffers[B_DA].first = 2; // loss_bw produces da at step 3
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 3));
        CHECK(r.count(3) == 2); // step 3 makes no da; the buffer starts at step 2
    }
    SUBCASE("two buffers for one output") {
        plan p = training_plan(g);
        p.buffers.push_back(tensor_buffer(g, "dh", 4864, 5, 5));
        p.arena_bytes = 5888;
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 3));
        CHECK(r.violations.front().message.find("2 buffers") != std::string::npos);
    }
}

TEST_CASE("check.plan.rule4_overlaps_and_alias_claims") {
    const graph g = training_graph();
    SUBCASE("two live buffers share bytes") {
        plan p = training_plan(g);
        p.buffers[B_DW].offset = 2560; // over loss at steps 6 and 7
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 4));
        REQUIRE(r.count(4) == 1);
        CHECK(r.violations.front().message == "buffers 5 (tensor 'loss') and 10 (tensor 'dw') overlap in bytes "
                                              "[2560, 2816)");
        CHECK(r.violations.front().step == 6);
    }
    SUBCASE("alias at a different offset") {
        plan p = training_plan(g);
        p.buffers[B_A].offset = 3840; // clear of everything, but not over h
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 4));
        CHECK(r.count(4) == 1);
        CHECK(r.violations.front().message.find("is at offset 1536, not 3840") != std::string::npos);
    }
    SUBCASE("alias over an input still live afterwards") {
        plan p = training_plan(g);
        p.buffers[B_H0].last = 2;
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 4));
        CHECK(r.count(4) == 2); // the bad claim, and h/a overlapping at step 1
        CHECK(r.to_string().find("still live after this step") != std::string::npos);
    }
    SUBCASE("alias the op does not declare") {
        graph g2 = g;
        g2.op_at(*g2.find_op("relu")).inplace.clear();
        const auto r = check_plan(g2, training_plan(g));
        INFO(r.to_string());
        CHECK(only_rule(r, 4));
        CHECK(r.count(4) == 2);
        CHECK(r.to_string().find("declares no such in-place pair") != std::string::npos);
    }
    SUBCASE("zero-byte buffers never conflict") {
        graph g2 = g;
        g2.tensor_at(*g2.find_tensor("dw")).bytes = 0;
        plan p = training_plan(g2);
        p.buffers[B_DW].bytes = 0;
        p.buffers[B_DW].offset = 2560;
        CHECK(check_plan(g2, p).ok());
    }
}

TEST_CASE("check.plan.rule5_alignment_size_arena") {
    const graph g = training_graph();
    plan p = training_plan(g);
    SUBCASE("misaligned") {
        p.buffers[B_WNEW].offset = 32;
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 5));
        CHECK(r.count(5) == 1);
    }
    SUBCASE("smaller than the tensor") {
        p.buffers[B_DA].bytes = 1000;
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 5));
        CHECK(r.violations.front().tensor == "da");
    }
    SUBCASE("smaller than the workspace") {
        p.buffers[B_WS0].bytes = 128; // gemm needs 256
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 5));
    }
    SUBCASE("past the arena") {
        p.arena_bytes = 4800;
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 5));
        CHECK(r.count(5) == 1); // dh ends at 4864
    }
    SUBCASE("offset + bytes would wrap") {
        p.buffers[B_WNEW].offset = std::numeric_limits<std::uint64_t>::max() - 63; // aligned to 64
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 5));
        CHECK(r.count(5) == 1);
    }
}

TEST_CASE("check.plan.rule6_persistent_and_outputs_live_at_end") {
    const graph g = training_graph();
    plan p = training_plan(g);
    SUBCASE("graph output freed early") { p.buffers[B_LOSS].last = 6; }
    SUBCASE("persistent update result gone before the end") {
        // One more step (fc recomputed once more) after sgd; everything else
        // stays live to it, w_new does not.
        p.steps.push_back(p.steps[4]);
        p.buffers.push_back(tensor_buffer(g, "h", 1536, 8, 8));
        p.buffers[B_X].last = 8;
        p.buffers[B_W].last = 8;
        p.buffers[B_LOSS].last = 8;
        p.buffers[B_WNEW].offset = 4864; // x now lives under its old place
        p.arena_bytes = 5376;
    }
    const auto r = check_plan(g, p);
    INFO(r.to_string());
    CHECK(only_rule(r, 6));
    CHECK(r.count(6) == 1);
}

TEST_CASE("check.plan.rule7_missing_workspace") {
    const graph g = training_graph();
    SUBCASE("op's own workspace") {
        plan p = training_plan(g);
        p.buffers.erase(p.buffers.begin() + B_WS6);
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 7));
        CHECK(r.violations.front().step == 6);
    }
    SUBCASE("the chosen variant's workspace") {
        plan p = training_plan(g);
        p.steps[4].variant = 0; // the recomputation now runs gemm: 256 bytes
        const auto r = check_plan(g, p);
        INFO(r.to_string());
        CHECK(only_rule(r, 7));
        CHECK(r.violations.front().step == 4);
    }
}

TEST_CASE("check.plan.rule0_structural_faults") {
    const graph g = training_graph();
    plan p = training_plan(g);
    auto expect = [](const validation_report& r, bool alone) {
        INFO(r.to_string());
        CHECK(r.has_rule(0));
        if (alone) CHECK(only_rule(r, 0));
    };
    SUBCASE("no steps") {
        p.steps.clear();
        expect(check_plan(g, p), true);
    }
    SUBCASE("zero alignment") {
        p.alignment = 0;
        expect(check_plan(g, p), true);
    }
    SUBCASE("variant on an op without variants") {
        p.steps[1].variant = 0;
        expect(check_plan(g, p), true);
    }
    SUBCASE("op with variants but none named") {
        p.steps[4].variant = no_variant;
        expect(check_plan(g, p), true);
    }
    SUBCASE("unknown variant") {
        p.steps[4].variant = 7;
        expect(check_plan(g, p), true);
    }
    SUBCASE("unknown op") {
        p.steps[2].op = 99;
        expect(check_plan(g, p), false);
    }
    SUBCASE("first after last") {
        p.buffers[B_DA].first = 4;
        p.buffers[B_DA].last = 3;
        expect(check_plan(g, p), false);
    }
    SUBCASE("live past the last step") {
        p.buffers[B_LOSS].last = 8;
        expect(check_plan(g, p), false);
    }
    SUBCASE("unknown tensor") {
        p.buffers.push_back(tensor_buffer(g, "x", 0, 0, 0));
        p.buffers.back().tensor = 42;
        expect(check_plan(g, p), true);
    }
    SUBCASE("workspace of a step that does not exist") {
        p.buffers.push_back(workspace_buffer(8, 64, 0));
        expect(check_plan(g, p), true);
    }
    SUBCASE("workspace live beyond its step") {
        p.buffers[B_WS6].last = 7;
        expect(check_plan(g, p), false); // and step 6 has no sound workspace: rule 7
    }
    SUBCASE("alias of an unknown tensor") {
        p.buffers[B_DW].alias = 99;
        expect(check_plan(g, p), false);
    }
}

TEST_CASE("check.plan.reports_every_overlapping_pair") {
    graph g("three");
    g.add_tensor("a", 64);
    g.add_tensor("b", 64);
    g.add_tensor("c", 64);
    g.add_op("pa", {}, {"a"});
    g.add_op("pb", {}, {"b"});
    g.add_op("pc", {}, {"c"});
    g.add_op("sum", {"a", "b", "c"}, {});
    plan p;
    p.alignment = 64;
    p.arena_bytes = 64;
    p.steps = default_schedule(g);
    p.buffers = {tensor_buffer(g, "a", 0, 0, 3), tensor_buffer(g, "b", 0, 1, 3), tensor_buffer(g, "c", 0, 2, 3)};
    const auto r = check_plan(g, p);
    INFO(r.to_string());
    CHECK(only_rule(r, 4));
    CHECK(r.count(4) == 3);
    CHECK(r.to_string() == "rule 4: step 1: buffers 0 (tensor 'a') and 1 (tensor 'b') overlap in bytes [0, 64)\n"
                           "rule 4: step 2: buffers 0 (tensor 'a') and 2 (tensor 'c') overlap in bytes [0, 64)\n"
                           "rule 4: step 2: buffers 1 (tensor 'b') and 2 (tensor 'c') overlap in bytes [0, 64)\n");

    const auto capped = check_plan(g, p, {.max_violations = 2});
    CHECK(capped.violations.size() == 2);
    CHECK(capped.truncated);
    CHECK_FALSE(capped.ok());
    CHECK(capped.to_string().find("stopped after 2 violations") != std::string::npos);
}

TEST_CASE("check.plan.make_plan_on_random_graphs_is_valid") {
    std::mt19937_64 rng(20240611);
    std::size_t aliases = 0, recomputed = 0, broken_pairs = 0;
    for (int round = 0; round < 60; ++round) {
        const graph g = random_graph(rng, 4 + static_cast<std::size_t>(round % 12));
        const schedule s = random_schedule(rng, g);
        const std::uint64_t align = round % 3 == 0 ? 1 : 256;
        for (bool inplace : {true, false}) {
            plan_options opt;
            opt.alignment = align;
            opt.liveness.use_inplace = inplace;
            const auto stacked = make_plan(g, s, stacking_allocator{}, opt);
            const auto fitted = make_plan(g, s, first_fit_allocator{}, opt);
            REQUIRE(has_solution(stacked.status));
            REQUIRE(has_solution(fitted.status));
            const auto r1 = check_plan(g, stacked.plan);
            const auto r2 = check_plan(g, fitted.plan);
            INFO("round " << round << "\n" << r1.to_string() << r2.to_string());
            CHECK(r1.ok());
            CHECK(r2.ok());
            CHECK(fitted.plan.arena_bytes >= fitted.bound);

            // Break the fitted plan at random and compare the overlaps found
            // with a brute-force pairwise scan.
            plan bad = fitted.plan;
            std::uniform_int_distribution<std::size_t> any(0, bad.buffers.size() - 1);
            for (int k = 0; k < 3; ++k) bad.buffers[any(rng)].offset = bad.buffers[any(rng)].offset;
            const auto rb = check_plan(g, bad);
            const auto expected = overlapping_pairs(g, bad);
            CHECK(reported_pairs(rb, bad) == expected);
            broken_pairs += expected.size();

            // Every buffer of a make_plan result is needed: dropping any one
            // breaks some rule.
            plan fewer = fitted.plan;
            fewer.buffers.erase(fewer.buffers.begin() + static_cast<std::ptrdiff_t>(any(rng)));
            CHECK_FALSE(check_plan(g, fewer).ok());

            for (const auto& b : fitted.plan.buffers) aliases += b.has_alias() ? 1 : 0;
            recomputed += s.size() - g.num_ops();
        }
    }
    // The properties above were not checked on trivial plans only.
    CHECK(aliases > 20);
    CHECK(recomputed > 20);
    CHECK(broken_pairs > 20);
    MESSAGE("aliases " << aliases << ", recomputed steps " << recomputed << ", broken pairs " << broken_pairs);
}

// The project's own heuristic allocators: every plan they give on the same
// random graphs passes the validator.
TEST_CASE("check.plan.heuristic_allocators_on_random_graphs_are_valid") {
    std::mt19937_64 rng(4242);
    for (int round = 0; round < 30; ++round) {
        const graph g = random_graph(rng, 4 + static_cast<std::size_t>(round % 10));
        const schedule s = random_schedule(rng, g);
        for (auto name : heuristic_allocator_names()) {
            plan_options opt;
            opt.alignment = round % 2 ? 256 : 1;
            const auto planned = make_plan(g, s, name, opt);
            REQUIRE(has_solution(planned.status));
            const auto r = check_plan(g, planned.plan);
            INFO("round " << round << ", allocator " << name << "\n" << r.to_string());
            CHECK(r.ok());
        }
    }
}

TEST_CASE("check.plan.large_valid_plan") {
    // 100,000 buffers in a long chain placed by a two-slot ping-pong: the sweep
    // must accept it without a quadratic scan (the test would take minutes).
    graph g("chain");
    const std::size_t n = 100000;
    g.add_tensor("t0", 64);
    for (std::size_t k = 1; k < n; ++k) {
        g.add_tensor(numbered("t", k), 64);
        op o;
        o.name = numbered("op", k);
        o.inputs = {static_cast<id>(k - 1)};
        o.outputs = {static_cast<id>(k)};
        g.add_op(std::move(o));
    }
    g.add_output(static_cast<id>(n - 1));
    plan p;
    p.alignment = 64;
    p.arena_bytes = 128;
    p.steps = default_schedule(g);
    p.buffers.push_back(tensor_buffer(g, "t0", 0, 0, 0));
    for (std::size_t k = 1; k < n; ++k) {
        buffer b;
        b.tensor = static_cast<id>(k);
        b.bytes = 64;
        b.offset = (k % 2) * 64;
        b.first = k - 1;
        b.last = k == n - 1 ? n - 2 : k;
        p.buffers.push_back(b);
    }
    CHECK(check_plan(g, p).ok());
    // Put every buffer at offset 0: each neighbour pair overlaps (n - 1 pairs),
    // and the cap stops the report at 1000.
    for (auto& b : p.buffers) b.offset = 0;
    const auto r = check_plan(g, p);
    CHECK(r.truncated);
    CHECK(r.violations.size() == 1000);
    CHECK(only_rule(r, 4));
}

TEST_CASE("check.placement.hand_cases") {
    alloc_problem p;
    p.alignment = 4;
    p.items = {{4, 0, 3}, {4, 3, 9}, {8, 1, 5}, {0, 0, 9}, {8, 4, 4}};
    SUBCASE("valid: b2 reuses b1's bytes after it ends") {
        const auto r = check_placement(p, {0, 0, 4, 0, 4}, std::uint64_t{12});
        INFO(r.to_string());
        CHECK(r.ok());
    }
    SUBCASE("overlap while both live") {
        const auto r = check_placement(p, {0, 4, 0, 0, 0});
        INFO(r.to_string());
        CHECK(only_rule(r, 4));
        CHECK(r.count(4) == 2); // item 2 meets items 0 (time 1) and 1 (time 3)
        CHECK(r.to_string().find("rule 4: step 1: items 0 and 2 overlap in bytes [0, 4)") != std::string::npos);
    }
    SUBCASE("misaligned and over capacity, with the height") {
        const auto r = check_placement(p, {0, 0, 6, 0, 4}, std::uint64_t{12});
        INFO(r.to_string());
        CHECK(only_rule(r, 5));
        CHECK(r.count(5) == 2);
        CHECK(r.to_string().find("height is 14") != std::string::npos);
    }
    SUBCASE("wrong number of offsets") {
        CHECK(only_rule(check_placement(p, {0, 0}), 0));
    }
    SUBCASE("begin after end") {
        p.items[1].begin = 10;
        CHECK(only_rule(check_placement(p, {0, 0, 4, 0, 0}), 0));
    }
}

TEST_CASE("check.placement.random_against_brute_force") {
    std::mt19937_64 rng(77);
    auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
    for (int round = 0; round < 200; ++round) {
        alloc_problem p;
        p.alignment = round % 2 ? 8 : 1;
        const std::size_t n = 1 + pick(60);
        for (std::size_t k = 0; k < n; ++k) {
            const std::uint64_t b = pick(30);
            p.items.push_back({pick(5) == 0 ? 0 : 1 + pick(100), b, b + pick(12)});
        }
        // A valid first-fit placement first...
        const auto placed = first_fit_allocator{}.place(p);
        const auto good = check_placement(p, placed.offsets);
        INFO(good.to_string());
        CHECK(good.ok());
        CHECK(overlapping_items(p, placed.offsets).empty());
        // ...then random offsets, compared pair by pair with the oracle.
        std::vector<std::uint64_t> off(n);
        for (auto& o : off) o = pick(200) * p.alignment;
        const auto r = check_placement(p, off);
        std::set<std::pair<std::size_t, std::size_t>> found;
        for (const auto& v : r.violations) {
            REQUIRE(v.rule == 4);
            found.insert({v.buffer, std::stoul(v.message.substr(v.message.find(" and ") + 5))});
        }
        const auto expected = overlapping_items(p, off);
        std::string diff;
        for (auto [x, y] : expected)
            if (!found.contains({x, y})) diff += " missed " + std::to_string(x) + "-" + std::to_string(y);
        for (auto [x, y] : found)
            if (!expected.contains({x, y})) diff += " extra " + std::to_string(x) + "-" + std::to_string(y);
        INFO(diff);
        CHECK(found == expected);
    }
}
