// The practitioners' recomputation policies as plans (remat/policy.hpp): the
// names they parse from, the keep set each makes on the zoo's decoder, plans
// that pass the validator, and `joint` never more expensive than a policy
// at the policy's own arena.
#include <memplan/check/validator.hpp>
#include <memplan/remat/joint.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/zoo/zoo.hpp>

#include "support/decoder.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace memplan;
namespace remat_policy_test {

namespace {

using testing::tiny_decoder;

/// The droppable tensors of block `i` the choice keeps, and its checkpoints, by name.
std::set<std::string> kept_in_block(const remat_context<graph>& ctx, const remat_choice<graph>& c, int i) {
    std::set<std::string> out;
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    for (std::size_t t = 0; t < ctx.graph().num_tensors(); ++t) {
        const auto id = static_cast<graph::id_type>(t);
        const auto& name = ctx.graph().tensor(id).name;
        if (!name.starts_with(prefix)) continue;
        if ((ctx.droppable(id) && c.keep[t]) || c.is_checkpoint(t)) out.insert(name.substr(prefix.size()));
    }
    return out;
}

} // namespace

TEST_CASE("remat.policy.names") {
    CHECK(parse_recompute_policy("full").group == 1);
    CHECK(parse_recompute_policy("full:3").group == 3);
    CHECK(parse_recompute_policy("full:3").name() == "full:3");
    CHECK(parse_recompute_policy("selective").name() == "selective");
    CHECK(parse_recompute_policy("core_attn").name() == "selective");
    CHECK(parse_recompute_policy("layernorm,mlp").name() == "mlp,layernorm");
    CHECK(parse_recompute_policy("op-sac").what == recompute_policy::kind::op_sac);
    for (auto bad : {"full:0", "full:x", "mlp,attn", "", "mlp,"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(parse_recompute_policy(bad), error);
    }
    try {
        (void)parse_recompute_policy("mlp,attn");
    } catch (const error& e) {
        CHECK(std::string(e.what()).find("module 'attn' in 'mlp,attn'") != std::string::npos);
    }
}

TEST_CASE("remat.policy.keep_sets_on_the_decoder") {
    const graph g = tiny_decoder();
    const remat_context<graph> ctx(g);
    auto kept = [&](std::string_view policy, int block) {
        return kept_in_block(ctx, policy_choice(ctx, parse_recompute_policy(policy)), block);
    };
    const auto all = kept("none", 1);
    CHECK(all.contains("mlp.act.y"));
    CHECK(all.contains("self_attn.attn.lse"));

    // full: a block keeps only what the next block starts from.
    CHECK(kept("full", 1) == std::set<std::string>{"mlp_residual.y"});
    // full:2: blocks 0 and 1 are one group; only block 1's output stays.
    CHECK(kept("full:2", 0).empty());
    CHECK(kept("full:2", 1) == std::set<std::string>{"mlp_residual.y"});

    // op-sac: attention's outputs and the 1st, 3rd, 5th and 7th products
    // (q, v, gate, down); the outputs of q and down are checkpoints (no
    // backward op reads them; recomputations start from them).
    CHECK(kept("op-sac", 2) == std::set<std::string>{"self_attn.q_proj.y", "self_attn.v_proj.y",
                                                     "self_attn.attn.y", "self_attn.attn.lse", "mlp.gate_proj.y",
                                                     "mlp.down_proj.y", "mlp_residual.y"});

    // Megatron modules.
    auto without = [&](std::string_view policy) {
        std::set<std::string> gone;
        const auto k = kept(policy, 1);
        for (const auto& n : all)
            if (!k.contains(n)) gone.insert(n);
        return gone;
    };
    CHECK(without("selective") == std::set<std::string>{"self_attn.attn.lse"});
    CHECK(without("mlp") == std::set<std::string>{"mlp.gate_proj.y", "mlp.up_proj.y", "mlp.act.y"});
    CHECK(without("layernorm") ==
          std::set<std::string>{"input_layernorm.y", "input_layernorm.rstd", "post_attention_layernorm.y",
                                "post_attention_layernorm.rstd"});

    // Outside the blocks nothing is dropped.
    const auto full = policy_choice(ctx, parse_recompute_policy("full"));
    for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (!g.tensor(static_cast<graph::id_type>(t)).name.starts_with("model.layers."))
            CHECK(full.keep[t] == ctx.keep_all().keep[t]);
}

TEST_CASE("remat.policy.plans_validate_and_joint_is_never_dearer_at_their_arena") {
    const graph g = tiny_decoder();
    const remat_context<graph> ctx(g);
    const auto store = ctx.store_all_placement(256).plan.arena_bytes;
    int lower = 0;
    for (const auto& p : standard_recompute_policies()) {
        CAPTURE(p.name());
        policy_planner planner;
        planner.policy = p;
        remat_options o;
        const auto r = planner.checked(ctx, o);
        REQUIRE(r.status == status::feasible);
        const auto report = check_plan(g, r.plan);
        CHECK_MESSAGE(report.ok(), report.to_string());
        CHECK(r.arena() <= store);
        CHECK(r.overhead() >= -1e-12);
        if (p.what == recompute_policy::kind::none) CHECK(r.overhead() == doctest::Approx(0.0));

        remat_options at;
        at.budget = r.arena();
        at.time_limit = 2;
        const auto j = joint{}.checked(ctx, at);
        REQUIRE(has_solution(j.status));
        CHECK(j.arena() <= r.arena());
        CHECK(j.cost <= r.cost + 1e-9 * r.cost);
        lower += j.cost < r.cost * (1 - 1e-6);
    }
    MESSAGE("joint cheaper than " << lower << " of " << standard_recompute_policies().size() << " policies");
}

TEST_CASE("remat.policy.a_graph_without_blocks_is_named") {
    zoo_options o;
    o.batch = 2;
    const graph g = zoo_graph("resnet18", o);
    const remat_context<graph> ctx(g);
    CHECK(!has_blocks(g));
    try {
        (void)policy_choice(ctx, parse_recompute_policy("full"));
        FAIL("no error");
    } catch (const error& e) {
        CHECK(std::string(e.what()).find("graph 'resnet18-train-b2' has none") != std::string::npos);
    }
}

} // namespace remat_policy_test
