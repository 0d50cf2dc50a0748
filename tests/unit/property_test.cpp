// Property tests across planners and the validator: on random training-like
// graphs and schedules with recomputation, every allocator's plan passes the
// independent validator, never beats the lower bound, and no_reuse costs the
// sum of its (aligned) blocks.
#include "support/random_graph.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/plan/bounds.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>

#include <doctest/doctest.h>

#include <random>

using namespace memplan;

TEST_CASE("property.every_allocator.valid_and_above_lower_bound") {
    std::mt19937_64 rng(20261129);
    std::size_t aliased = 0, recomputed = 0; // the generator must exercise in-place and recomputation
    std::size_t aliased_peaks = 0;           // peaks where a buffer takes over another in place
    for (int trial = 0; trial < 60; ++trial) {
        testing::random_graph_options opt;
        opt.forward_ops = 3 + static_cast<std::size_t>(trial % 17);
        const graph g = testing::random_training_graph(rng, opt);
        const schedule s = trial % 2 == 0 ? default_schedule(g) : testing::random_schedule_with_recompute(g, rng, 3);
        const std::uint64_t alignment = trial % 3 == 0 ? 1 : 256;
        for (auto name : heuristic_allocator_names()) {
            CAPTURE(trial);
            CAPTURE(name);
            const auto r = make_plan(g, s, name, plan_options{.alignment = alignment});
            REQUIRE(has_solution(r.status));
            const auto report = check_plan(g, r.plan);
            CHECK_MESSAGE(report.ok(), report.to_string());
            CHECK(r.plan.arena_bytes >= r.bound);
            for (const auto& b : r.plan.buffers) aliased += b.has_alias() ? 1 : 0;
            recomputed += s.size() - g.num_ops();
            CHECK(r.bound == lower_bound(r.plan));
            CHECK(r.bound == schedule_lower_bound(g, s));
            // What holds the peak: the listed buffers live at its step, largest first, their bytes the
            // peak's (a buffer taking over another in place there shares its bytes and is not listed).
            const auto m = peak_moment_of(r.plan);
            CHECK(m.bytes == r.bound);
            std::uint64_t listed = 0;
            bool alias_here = false;
            for (std::size_t i = 0; i < m.buffers.size(); ++i) {
                const auto& b = r.plan.buffers[m.buffers[i]];
                CHECK((b.first <= m.step && m.step <= b.last));
                if (i > 0) CHECK(r.plan.buffers[m.buffers[i - 1]].bytes >= b.bytes);
                listed += b.bytes;
            }
            // An in-place buffer starting at the step adds only what it has beyond its source's bytes.
            std::uint64_t beyond = 0;
            for (const auto& b : r.plan.buffers) {
                if (!b.has_alias() || b.first != m.step) continue;
                for (const auto& y : r.plan.buffers)
                    if (!y.is_workspace() && y.tensor == b.alias && y.last == b.first && y.offset == b.offset) {
                        alias_here = true;
                        beyond += b.bytes > y.bytes ? b.bytes - y.bytes : 0;
                        break;
                    }
            }
            CHECK(listed + beyond == m.bytes);
            aliased_peaks += alias_here ? 1 : 0;
            if (name == "no_reuse") {
                // Stacked blocks: the sum of aligned block sizes, less the last block's padding.
                std::vector<std::size_t> block_of;
                const auto problem = allocation_problem(compute_liveness(g, s), alignment, block_of);
                std::uint64_t sum = 0, last_pad = 0;
                for (const auto& it : problem.items) {
                    if (it.size == 0 || it.begin >= it.end) continue;
                    const auto aligned = *detail::checked_align_up<std::uint64_t>(it.size, alignment);
                    sum += aligned;
                    last_pad = aligned - it.size;
                }
                CHECK(r.plan.arena_bytes == sum - last_pad);
            }
        }
    }
    CHECK(aliased > 0);
    CHECK(recomputed > 0);
    CHECK(aliased_peaks > 0);
}

TEST_CASE("property.recompute.creates_second_materialisation") {
    std::mt19937_64 rng(7);
    const graph g = testing::random_training_graph(rng);
    const schedule s = testing::random_schedule_with_recompute(g, rng, 4);
    CHECK(s.size() == g.num_ops() + 4);
    const auto r = make_plan(g, s, "greedy_by_size", {});
    std::size_t tensor_buffers = 0;
    for (const auto& b : r.plan.buffers) tensor_buffers += b.is_workspace() ? 0 : 1;
    std::size_t outputs = 0;
    for (const auto& st : s) outputs += g.op(st.op).outputs.size();
    std::size_t inputs = 0;
    const graph_index<graph> index(g);
    for (std::size_t t = 0; t < g.num_tensors(); ++t) inputs += index.is_graph_input(static_cast<graph::id_type>(t));
    CHECK(tensor_buffers == outputs + inputs);
    CHECK(check_plan(g, r.plan).ok());
}
