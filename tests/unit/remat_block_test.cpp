// block_dp: blocks are cut out of the graph correctly (identical ones
// recognised and solved once, their plans carried over by position), a
// block plan's figures are what its schedule keeps and peaks at, and the
// composed plans are valid and fit. The chain program with block plans as
// options is checked against exhaustive search in remat_chain_test.cpp.
#include <memplan/check/validator.hpp>
#include <memplan/remat/block_dp.hpp>
#include <memplan/remat/store_all.hpp>
#include <memplan/zoo/zoo.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace memplan;

namespace {

graph small_zoo(const char* name, std::size_t batch = 4) {
    zoo_options zo;
    zo.batch = batch;
    return zoo_graph(name, zo);
}

std::vector<std::size_t> block_of_ops(const detail::graph_chain<graph>& chain, std::size_t ops) {
    std::vector<std::size_t> b(ops, chain.seg.size());
    for (std::size_t i = 0; i < chain.seg.size(); ++i) {
        for (auto o : chain.forward_all[i]) b[o] = i;
        for (auto o : chain.backward[i]) b[o] = i;
    }
    return b;
}

} // namespace

TEST_CASE("remat.block.identical_blocks_solved_once") {
    for (const char* name : {"resnet18", "resnet50"}) {
        CAPTURE(name);
        const graph g = small_zoo(name);
        const remat_context<graph> ctx(g);
        detail::graph_chain<graph> chain(ctx, detail::merge_unread_cuts(ctx, detail::segment_forward(ctx)));
        const auto owner = block_of_ops(chain, g.num_ops());
        // Distinct blocks counted here, independently of the planner.
        std::map<std::string, std::size_t> first;
        std::size_t closed = 0;
        std::vector<std::string> sig(chain.seg.size());
        for (std::size_t i = 0; i < chain.seg.size(); ++i) {
            if (!detail::block_is_closed(ctx, chain, i, owner)) continue;
            ++closed;
            sig[i] = detail::extract_block(ctx, chain.forward_all[i], chain.backward[i]).signature;
            first.emplace(sig[i], i);
        }
        REQUIRE(closed > first.size()); // these networks repeat blocks
        remat_options o;
        const auto stats = block_dp{}.add_block_options(ctx, o, chain, deadline::after(60));
        CHECK(stats.blocks == chain.seg.size());
        CHECK(stats.distinct == first.size());
        CHECK(stats.solved == first.size()); // each distinct block once, not once per segment
        MESSAGE(std::string(name), ": ", stats.blocks, " segments, ", closed, " blocks planned alone, ", stats.solved,
                " solved, ", stats.options, " options");
        // A repeated block gets the plans of the first like it, by position.
        std::size_t carried = 0;
        for (std::size_t i = 0; i < chain.seg.size(); ++i) {
            if (sig[i].empty()) continue;
            const std::size_t f = first[sig[i]];
            const auto& mine = chain.bytes.options[i + 1];
            const auto& theirs = chain.bytes.options[f + 1];
            REQUIRE(mine.size() == theirs.size());
            REQUIRE(chain.option_runs[i].size() == mine.size());
            for (std::size_t k = 0; k < mine.size(); ++k) {
                CHECK(mine[k].abar == theirs[k].abar);
                CHECK(mine[k].cost == doctest::Approx(theirs[k].cost));
                // Same positions, this block's own ops.
                const auto& run = chain.option_runs[i][k];
                CHECK(run.forward.size() == chain.option_runs[f][k].forward.size());
                for (const auto& st : run.forward) CHECK(owner[st.op] == i);
                for (const auto& st : run.backward) CHECK(owner[st.op] == i);
            }
            carried += i != f ? mine.size() : 0;
        }
        CHECK(carried > 0);
    }
}

// What a block plan says it keeps and peaks at is what its schedule does:
// recomputed here from the schedule's reads, without the liveness code.
TEST_CASE("remat.block.figures_are_the_schedules") {
    const graph g = small_zoo("resnet18");
    const remat_context<graph> ctx(g);
    const detail::graph_chain<graph> chain(ctx, detail::merge_unread_cuts(ctx, detail::segment_forward(ctx)));
    const auto owner = block_of_ops(chain, g.num_ops());
    int checked = 0;
    for (std::size_t i = 0; i < chain.seg.size(); ++i) {
        if (!detail::block_is_closed(ctx, chain, i, owner)) continue;
        const auto b = detail::extract_block(ctx, chain.forward_all[i], chain.backward[i]);
        const remat_context<graph> sub(b.sub);
        const graph_index<graph> index(b.sub);
        for (double frac : {1.0, 0.8, 0.6}) {
            remat_options o;
            o.budget = static_cast<std::uint64_t>(static_cast<double>(store_all{}.plan(sub, {}).arena()) * frac);
            o.time_limit = 1;
            const auto r = joint{}.plan(b.sub, o);
            if (!has_solution(r.status)) continue;
            detail::block_plan<graph> p;
            REQUIRE(detail::block_figures(b.sub, r.plan.steps, b.forward, p));
            const auto& s = r.plan.steps;
            // Kept across the forward/backward boundary: made in the forward
            // part, and read after it before being made again, or an output.
            std::vector<char> is_output(b.sub.num_tensors(), 0);
            for (auto t : b.sub.outputs()) is_output[t] = 1;
            std::size_t abar = 0;
            std::set<graph::id_type> made;
            for (std::size_t k = 0; k < b.forward; ++k)
                for (auto t : b.sub.op(s[k].op).outputs) made.insert(t);
            for (auto t : made) {
                if (b.sub.tensor(t).persistent) continue;
                bool read = is_output[t] != 0;
                for (std::size_t k = b.forward; k < s.size() && !read; ++k) {
                    const auto& reads = b.sub.reads_of(s[k].op, s[k].variant);
                    if (std::find(reads.begin(), reads.end(), t) != reads.end()) read = true;
                    const auto& outs = b.sub.op(s[k].op).outputs;
                    if (std::find(outs.begin(), outs.end(), t) != outs.end()) break; // made again first
                }
                if (read) abar += b.sub.tensor(t).bytes;
            }
            CHECK(p.abar == abar);
            CHECK(p.forward.size() + p.backward.size() == s.size());
            CHECK(p.cost == doctest::Approx(schedule_cost(b.sub, s)));
            CHECK(p.peak_back >= p.abar); // what it keeps is live when the backward starts
            CHECK(std::max(p.ovf, p.peak_back) <= r.schedule_bound); // inputs not counted: never above the peak
            ++checked;
        }
    }
    CHECK(checked > 10);
}

TEST_CASE("remat.block.plans_valid_and_fit") {
    for (const char* name : {"resnet18", "mobilenet_v2"}) {
        CAPTURE(name);
        const graph g = small_zoo(name, 32); // activations well above the weights
        const auto base = store_all{}.plan(g, {});
        const auto [need, op] = remat_context<graph>(g).min_memory();
        int planned = 0;
        for (double frac : {0.8, 0.65, 0.5}) {
            CAPTURE(frac);
            remat_options o;
            o.budget = static_cast<std::uint64_t>(static_cast<double>(base.arena()) * frac);
            o.time_limit = 6; // validity, not speed: room for a loaded machine
            const auto r = block_dp{}.plan(g, o);
            CHECK(r.planner == "block_dp");
            if (o.budget < need) CHECK(r.status == status::infeasible);
            if (!has_solution(r.status)) continue;
            ++planned;
            CHECK(r.arena() <= o.budget);
            const auto report = check_plan(g, r.plan);
            CHECK_MESSAGE(report.ok(), report.to_string());
            CHECK(r.cost == doctest::Approx(schedule_cost(g, r.plan.steps)));
        }
        CHECK(planned >= 2);
    }
}
