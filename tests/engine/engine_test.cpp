// The training engine on the CPU backend: plans of the rematerialization
// planners (store-all, half of it, the smallest budget reached; with
// recomputation and with other variants; poisoned) train as the naive run
// does: bit for bit when every reduction keeps its order, otherwise within
// the measured float32 reassociation error. Finite-difference checks of the
// kernels: gradcheck_test.cpp.
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/engine/cpu/backend.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/pareto.hpp>
#include <memplan/remat/select.hpp>

#include <models.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <variant>
#include <string>
#include <vector>

using namespace memplan;
namespace mx = memplan::examples;
using cpu_executor = engine::executor<engine::cpu::backend>;

namespace {

struct trained {
    std::vector<float> losses;
    std::vector<std::vector<float>> params;
};

struct setup {
    mx::model m;
    training_program prog;
    graph g;
    engine::optimizer_config opt;
    explicit setup(mx::model model, optimizer o = optimizer::sgd_momentum) : m(std::move(model)) {
        training_options to;
        to.opt = o;
        g = training_graph(m.net, to, prog);
        opt.kind = o;
        if (o == optimizer::adam) opt.lr = 1e-3f;
    }
};

trained train(const setup& s, const plan* p, int steps, bool poison) {
    engine::executor_options o;
    o.poison = poison;
    o.opt = s.opt;
    auto ex = p ? cpu_executor(s.m.net, s.g, s.prog, *p, {}, o) : cpu_executor::naive(s.m.net, s.g, s.prog, {}, o);
    if (p) CHECK(ex.reserved_bytes() == p->arena_bytes);
    trained t;
    for (int i = 0; i < steps; ++i) {
        mx::feed(ex, s.m, static_cast<std::uint64_t>(i));
        t.losses.push_back(ex.step());
    }
    for (const auto& p : s.m.net.parameters()) t.params.push_back(ex.read(p.name));
    return t;
}

bool all_finite(const trained& t) {
    for (float l : t.losses)
        if (!std::isfinite(l)) return false;
    for (const auto& v : t.params)
        for (float x : v)
            if (!std::isfinite(x)) return false;
    return true;
}

bool bitwise_equal(const trained& a, const trained& b) {
    if (a.losses.size() != b.losses.size() || a.params.size() != b.params.size()) return false;
    if (std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(float)) != 0) return false;
    for (std::size_t i = 0; i < a.params.size(); ++i)
        if (a.params[i].size() != b.params[i].size() ||
            std::memcmp(a.params[i].data(), b.params[i].data(), a.params[i].size() * sizeof(float)) != 0)
            return false;
    return true;
}

/// Largest |a - b| / max(|b|, floor) over losses and parameters; `where`
/// gets the index of the worst parameter tensor (-1: the losses).
double max_relative(const trained& a, const trained& b, double floor = 1e-3, int* where = nullptr) {
    double worst = 0;
    auto cmp = [&](float x, float y, int i) {
        const double e = std::abs(double(x) - double(y)) / std::max(std::abs(double(y)), floor);
        if (e > worst && where) *where = i;
        worst = std::max(worst, e);
    };
    for (std::size_t i = 0; i < a.losses.size(); ++i) cmp(a.losses[i], b.losses[i], -1);
    for (std::size_t i = 0; i < a.params.size(); ++i)
        for (std::size_t k = 0; k < a.params[i].size(); ++k) cmp(a.params[i][k], b.params[i][k], int(i));
    return worst;
}

/// Largest normwise relative difference max|a - b| / max|b| over one tensor,
/// taken over every parameter tensor and the sequence of losses.
double max_normwise(const trained& a, const trained& b, int* where = nullptr) {
    auto one = [](const std::vector<float>& x, const std::vector<float>& y) {
        double diff = 0, scale = 0;
        for (std::size_t k = 0; k < x.size(); ++k) {
            diff = std::max(diff, std::abs(double(x[k]) - double(y[k])));
            scale = std::max(scale, std::abs(double(y[k])));
        }
        return scale > 0 ? diff / scale : diff;
    };
    double worst = one(a.losses, b.losses);
    if (where) *where = -1;
    for (std::size_t i = 0; i < a.params.size(); ++i) {
        const double e = one(a.params[i], b.params[i]);
        if (e > worst && where) *where = int(i);
        worst = std::max(worst, e);
    }
    return worst;
}

void require_valid(const graph& g, const plan& p) {
    const auto report = check_plan(g, p);
    if (!report.ok()) FAIL_CHECK("plan fails check_plan: " << report.violations.front().message);
    REQUIRE(report.ok());
}

/// Whether plan `p` runs a variant whose arithmetic differs from the default
/// one: convolution through im2col + GEMM (the direct loops sum in another
/// order) or batch-norm backward from the output (x-hat recovered as
/// (y - beta) / gamma instead of (x - mean) * invstd). ReLU from the mask and
/// Winograd (the direct kernel on the CPU) compute the same bits.
bool reorders_arithmetic(const setup& s, const plan& p) {
    for (const auto& st : p.steps) {
        if (!st.has_variant()) continue;
        const auto kind = nn::parse_impl_kind(s.g.op(st.op).variants.at(st.variant).name);
        const auto& o = s.prog.ops[st.op];
        const bool bn = o.kind == op_origin_kind::layer &&
                        std::holds_alternative<nn::batch_norm>(s.m.net.nodes()[o.node].layer);
        if (kind == nn::impl_kind::gemm_im2col || (bn && kind == nn::impl_kind::from_output)) return true;
    }
    return false;
}

std::size_t recomputed_steps(const setup& s, const plan& p) { return p.steps.size() - s.g.num_ops(); }
std::size_t variant_steps(const plan& p) {
    std::size_t n = 0;
    for (const auto& st : p.steps) n += st.has_variant() && st.variant != 0;
    return n;
}

/// Float32 reassociation bound for variant plans. Measured largest relative
/// difference (losses and parameters after 2-3 steps, floor 1e-3; the deep
/// example networks of models.hpp, test sizes): cnn 2.3e-5 (conv4.w), resnet
/// 1.6e-3 (block2.a.conv.w), unet 6.1e-5 (enc1.conv2.w); mlp, transformer: no
/// such variant. Normwise per tensor (max|a - b| / max|b|): cnn 2.4 (conv6.b,
/// a bias before batch-norm, whose gradient is zero but for rounding),
/// resnet 2.0e-3 and unet 9.7e-4 (batch-norm betas, sums of gradients that
/// nearly cancel). A one-ulp difference in a gradient grows through the
/// updates and through depth; neither 1e-6 nor the earlier 1e-5 holds.
constexpr double variant_tolerance = 5e-3;

struct model_figures {
    std::size_t recomputed = 0, variants = 0;
    double worst_variant_error = 0;
    double worst_normwise_error = 0; ///< max|a - b| / max|b| per tensor, variant plans
    std::string worst_variant_tensor, worst_normwise_tensor;
};

std::string tensor_name(const setup& s, int i) {
    return i < 0 ? std::string("losses") : s.m.net.parameters()[static_cast<std::size_t>(i)].name;
}

/// Trains plan `p` (checked first) poisoned and compares it with the naive run.
void check_against_naive(const setup& s, const plan& p, const trained& naive, int steps, model_figures& f) {
    require_valid(s.g, p);
    const auto t = train(s, &p, steps, true);
    REQUIRE(all_finite(t)); // poison mode found no NaN
    f.recomputed += recomputed_steps(s, p);
    f.variants += variant_steps(p);
    if (!reorders_arithmetic(s, p)) {
        CHECK(bitwise_equal(t, naive));
    } else {
        int at = -1, at_n = -1;
        const double e = max_relative(t, naive, 1e-3, &at), n = max_normwise(t, naive, &at_n);
        if (e > f.worst_variant_error) f.worst_variant_tensor = tensor_name(s, at);
        if (n > f.worst_normwise_error) f.worst_normwise_tensor = tensor_name(s, at_n);
        f.worst_variant_error = std::max(f.worst_variant_error, e);
        f.worst_normwise_error = std::max(f.worst_normwise_error, n);
        CHECK(e < variant_tolerance);
    }
}

/// Every check of a planned step on one example network.
model_figures check_model(const setup& s, int steps) {
    model_figures f;
    const auto naive = train(s, nullptr, steps, false);
    REQUIRE(all_finite(naive));
    const auto naive_poisoned = train(s, nullptr, steps, true);
    CHECK(bitwise_equal(naive, naive_poisoned));

    // Store-all with default variants: the same op order per reduction, bit for bit.
    remat_options ro;
    ro.time_limit = 2;
    const auto store_all = plan_remat("store_all", s.g, ro);
    REQUIRE(has_solution(store_all.status));
    REQUIRE(!reorders_arithmetic(s, store_all.plan));
    check_against_naive(s, store_all.plan, naive, steps, f);
    const std::uint64_t sa = store_all.arena();

    // The default planner at store-all and at half of it (the example
    // networks are deep enough for that), and the smallest budget it reaches
    // (bisection).
    for (std::uint64_t budget : {sa, sa / 2}) {
        ro.budget = budget;
        const auto r = plan_remat("auto", s.g, ro);
        CAPTURE(budget);
        MESSAGE(s.m.net.name() << " budget " << budget << ": " << to_string(r.status) << " arena " << r.arena()
                               << " (" << r.planner << ", predicted overhead " << 100 * r.overhead() << " %)");
        REQUIRE(has_solution(r.status));
        REQUIRE(r.arena() <= budget);
        check_against_naive(s, r.plan, naive, steps, f);
    }
    pareto_options po;
    po.max_bisection_steps = 6;
    const auto smallest = smallest_budget_plan(s.g, sa, [&](std::uint64_t b) {
        remat_options o;
        o.time_limit = 2;
        o.budget = b;
        return plan_remat("auto", s.g, o);
    }, po);
    REQUIRE(has_solution(smallest.status));
    MESSAGE(s.m.net.name() << " smallest arena " << smallest.arena() << " of store-all " << sa << ", "
                           << recomputed_steps(s, smallest.plan) << " recomputed steps, "
                           << variant_steps(smallest.plan) << " non-default variants");
    check_against_naive(s, smallest.plan, naive, steps, f);

    // Every alternative variant at once (im2col, batch-norm from the output,
    // ReLU from the mask) on the store-all schedule.
    auto sched = default_schedule(s.g);
    for (auto& st : sched)
        for (std::size_t v = 0; v < s.g.op(st.op).variants.size(); ++v) {
            const auto kind = nn::parse_impl_kind(s.g.op(st.op).variants[v].name);
            if (kind == nn::impl_kind::gemm_im2col || kind == nn::impl_kind::from_output ||
                kind == nn::impl_kind::from_mask)
                st.variant = static_cast<graph::id_type>(v);
        }
    // ReLU has from_output first and from_mask second: the loop leaves the last match.
    const auto all = make_plan(s.g, sched, best_heuristic{}).plan;
    check_against_naive(s, all, naive, steps, f);
    MESSAGE(s.m.net.name() << " worst variant error " << f.worst_variant_error << " (relative, floor 1e-3; "
                           << f.worst_variant_tensor << "), " << f.worst_normwise_error
                           << " (normwise, max|a - b| / max|b| per tensor; " << f.worst_normwise_tensor << ")");
    return f;
}

} // namespace

TEST_CASE("engine.program.matches_training_graph") {
    const auto m = mx::resnet(2);
    training_program prog;
    const auto g = training_graph(m.net, {}, prog);
    const auto plain = training_graph(m.net);
    REQUIRE(g.num_ops() == plain.num_ops());
    for (std::uint32_t o = 0; o < g.num_ops(); ++o) CHECK(g.op(o).name == plain.op(o).name);
    REQUIRE(prog.ops.size() == g.num_ops());
    REQUIRE(prog.tensors.size() == g.num_tensors());
    for (std::uint32_t t = 0; t < g.num_tensors(); ++t) CHECK(prog.tensors[t].bytes(nn::dtype::fp32) == g.tensor(t).bytes);
    std::size_t updates = 0;
    for (const auto& o : prog.ops) updates += o.kind == op_origin_kind::update;
    const auto trainable = std::count_if(m.net.parameters().begin(), m.net.parameters().end(),
                                         [](const nn::parameter& p) { return p.trainable; });
    CHECK(updates == static_cast<std::size_t>(trainable));
}

TEST_CASE("engine.mlp.plans_match_naive") { check_model(setup(mx::mlp(256, 16, 16), optimizer::adam), 3); }
TEST_CASE("engine.cnn.plans_match_naive") {
    const auto f = check_model(setup(mx::cnn(4)), 3);
    CHECK(f.recomputed > 0);
    CHECK(f.variants > 0);
    CHECK(f.worst_variant_error > 0); // im2col and batch-norm from y do change the bits
}
TEST_CASE("engine.resnet.plans_match_naive") {
    const auto f = check_model(setup(mx::resnet(2)), 2);
    CHECK(f.recomputed > 0);
    CHECK(f.variants > 0);
}
TEST_CASE("engine.unet.plans_match_naive") { CHECK(check_model(setup(mx::unet(4)), 2).recomputed > 0); }
TEST_CASE("engine.transformer.plans_match_naive") {
    CHECK(check_model(setup(mx::transformer(4, 64), optimizer::adam), 3).recomputed > 0);
}

TEST_CASE("engine.executor.rejects_a_plan_that_misses_a_buffer") {
    const setup s(mx::mlp(4));
    auto p = make_plan(s.g, default_schedule(s.g), best_heuristic{}).plan;
    p.buffers.erase(std::find_if(p.buffers.begin(), p.buffers.end(), [&](const buffer& b) {
        return !b.is_workspace() && s.g.tensor(b.tensor).name == "fc2.y";
    }));
    CHECK_THROWS_WITH_AS(cpu_executor(s.m.net, s.g, s.prog, p), doctest::Contains("fc2.y"), memplan::error);
}

TEST_CASE("engine.executor.rejects_an_unknown_variant_naming_op_and_variant") {
    // Variant names come from the graph (a file, a profile); the executor
    // resolves each to its implementation once, when it is built.
    const setup s(mx::cnn(2));
    auto g = s.g;
    graph::id_type relu_bwd = graph::npos;
    for (graph::id_type o = 0; o < g.num_ops(); ++o)
        if (g.op(o).variants.size() == 2 && nn::parse_impl_kind(g.op(o).variants[1].name) == nn::impl_kind::from_mask)
            relu_bwd = o;
    REQUIRE(relu_bwd != graph::npos);
    const std::string op_name = g.op(relu_bwd).name;
    auto sched = default_schedule(g);
    for (auto& st : sched)
        if (st.op == relu_bwd) st.variant = 1;
    const auto p = make_plan(g, sched, best_heuristic{}).plan;
    CHECK_NOTHROW(cpu_executor(s.m.net, g, s.prog, p));

    g.op_at(relu_bwd).variants[1].name = "from_magic"; // no layer implements it
    const std::string unknown = "op '" + op_name + "') has variant 'from_magic'";
    CHECK_THROWS_WITH_AS(cpu_executor(s.m.net, g, s.prog, p), doctest::Contains(unknown.c_str()), memplan::error);
    g.op_at(relu_bwd).variants[1].name = "winograd"; // a known implementation, but not ReLU's
    const std::string foreign = "op '" + op_name + "') has variant 'winograd', which its layer";
    CHECK_THROWS_WITH_AS(cpu_executor(s.m.net, g, s.prog, p), doctest::Contains(foreign.c_str()), memplan::error);
}

TEST_CASE("engine.executor.rejects_a_read_after_the_update") {
    // An update overwrites its parameter in place; the graph format cannot
    // say so, so the executor refuses a plan that reads a parameter after
    // its update (here: fc2's weight gradient and update moved in front of
    // its data gradient, which reads fc2.w).
    const setup s(mx::mlp(4, 2, 8));
    auto sched = default_schedule(s.g);
    auto at = [&](const std::string& name) {
        return std::find_if(sched.begin(), sched.end(), [&](const auto& st) { return s.g.op(st.op).name == name; });
    };
    for (const auto* name : {"fc2.bwd_data", "fc2.bwd_weight", "fc2.w.update"}) REQUIRE(at(name) != sched.end());
    REQUIRE(at("fc2.bwd_data") < at("fc2.w.update"));
    const auto weight = *at("fc2.bwd_weight");
    sched.erase(at("fc2.bwd_weight"));
    const auto update = *at("fc2.w.update");
    sched.erase(at("fc2.w.update"));
    sched.insert(at("fc2.bwd_data"), {weight, update});
    const auto p = make_plan(s.g, sched, best_heuristic{}).plan;
    CHECK_THROWS_WITH_AS(cpu_executor(s.m.net, s.g, s.prog, p), doctest::Contains("fc2.w.update"), memplan::error);
    // The planners' base order never does this: every update after every reader of its parameter.
    const remat_context<graph> ctx(s.g);
    const auto& order = ctx.base_order();
    for (std::size_t i = 0; i < order.size(); ++i) {
        const auto& u = s.g.op(order[i]);
        if (u.phase != phase::update) continue;
        for (std::size_t j = i + 1; j < order.size(); ++j)
            for (auto t : s.g.op(order[j]).inputs)
                if (s.g.op(order[j]).phase != phase::update)
                    CHECK_MESSAGE(std::find(u.inputs.begin(), u.inputs.end(), t) == u.inputs.end(),
                                  s.g.op(order[j]).name << " reads " << s.g.tensor(t).name << " after " << u.name);
    }
}

TEST_CASE("engine.executor.poison_exposes_a_plan_that_frees_early") {
    // Shorten one activation's life by hand: the poisoned run must differ (NaN).
    const setup s(mx::mlp(4));
    auto p = make_plan(s.g, default_schedule(s.g), no_reuse{}).plan;
    const auto t = *s.g.find_tensor("relu1.y");
    for (auto& b : p.buffers)
        if (b.tensor == t) b.last = b.first + 1; // dies before fc2.bwd_weight reads it
    const auto naive = train(s, nullptr, 1, false);
    const auto bad = train(s, &p, 1, true);
    CHECK_FALSE(all_finite(bad));
}

TEST_CASE("engine.inplace.batch_norm_relu_and_sums_over_their_input") {
    // Batch-norm backward from y lets the forward write y over x; ReLU from
    // the mask lets y go over x too; gradient sums and ReLU's backward write
    // over their first operand. A plan that takes every such pair must train
    // as the naive run does (the kernels read what they need before writing).
    const setup s(mx::resnet(2));
    auto sched = default_schedule(s.g);
    for (auto& st : sched)
        for (std::size_t v = 0; v < s.g.op(st.op).variants.size(); ++v) {
            const auto kind = nn::parse_impl_kind(s.g.op(st.op).variants[v].name);
            if (kind == nn::impl_kind::from_output || kind == nn::impl_kind::from_mask)
                st.variant = static_cast<graph::id_type>(v);
        }
    const auto p = make_plan(s.g, sched, best_heuristic{}).plan;
    require_valid(s.g, p);
    std::vector<char> sum_output(s.g.num_tensors(), 0);
    for (const auto& o : s.g.ops())
        if (o.name.find(".grad_acc") != std::string::npos) sum_output[o.outputs[0]] = 1;
    std::size_t bn = 0, relu = 0, acc = 0, other = 0;
    for (const auto& b : p.buffers) {
        if (!b.has_alias()) continue;
        const auto& name = s.g.tensor(b.tensor).name;
        if (name.ends_with(".bn.y")) ++bn;
        else if (name.ends_with(".relu.y") || name.ends_with(".out.y")) ++relu;
        else if (sum_output[b.tensor]) ++acc;
        else ++other;
    }
    MESSAGE("in-place buffers: batch-norm " << bn << ", relu " << relu << ", gradient sums " << acc << ", other "
                                            << other);
    CHECK(bn > 0);
    CHECK(relu > 0);
    CHECK(acc > 0);
    const auto naive = train(s, nullptr, 2, false);
    const auto t = train(s, &p, 2, true);
    REQUIRE(all_finite(t));
    CHECK(max_relative(t, naive) < variant_tolerance);
}
