// What the four libFuzzer harnesses share: turning a property failure into a
// crash libFuzzer reports (a message, then __builtin_trap), and the checks a
// graph that a reader accepted must pass (validate, a cheap plan that the
// validator accepts, an exact round trip through the graph writer).
#pragma once

#include <memplan/alloc/greedy.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/core/error.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/graph/validate.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/plan_json.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace memplan_fuzz {

/// The fuzzer's bytes as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

/// What `read()` returns, or nullopt when it throws memplan::error (the
/// promised outcome for bad input). Any other exception escapes, for
/// libFuzzer to report as a crash.
template <class Read>
auto accepted(Read&& read) -> std::optional<decltype(read())> {
    try {
        return read();
    } catch (const memplan::error&) {
        return std::nullopt;
    }
}

/// A broken promise: print why, then trap so that libFuzzer saves the input.
/// Never returns.
[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {}) {
    std::fprintf(stderr, "memplan fuzz property failed: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
                 static_cast<int>(detail.size()), detail.data());
    std::fflush(stderr);
    __builtin_trap();
}

/// Planning is the expensive part of a run; graphs larger than this are only
/// validated and round-tripped so that the fuzzer keeps its speed.
inline constexpr std::size_t max_planned_tensors = 2000;

/// The checks for a graph `g` that a reader accepted. Any exception but
/// memplan::error escapes (libFuzzer reports it); a broken property traps.
inline void check_accepted_graph(const memplan::graph& g) {
    // The reader validated it: validating again must agree.
    try {
        memplan::validate(g);
    } catch (const memplan::error& e) {
        fail("validate() rejects a graph the reader accepted", e.what());
    }

    // Writer then reader: the same graph, so the same text.
    const std::string text = memplan::format_graph_json(g);
    memplan::graph back;
    try {
        back = memplan::parse_graph_json(text, "roundtrip.json");
    } catch (const memplan::error& e) {
        fail("parse_graph_json rejects what format_graph_json wrote", std::string(e.what()) + "\n" + text);
    }
    if (back.num_tensors() != g.num_tensors() || back.num_ops() != g.num_ops() ||
        memplan::format_graph_json(back) != text)
        fail("graph round trip differs", text);

    if (g.num_tensors() > max_planned_tensors || g.num_ops() > max_planned_tensors) return;

    // A cheap plan; a refusal (memplan::error: sizes overflow, no steps) is
    // an allowed outcome, an invalid plan is not.
    memplan::planned made;
    try {
        memplan::plan_options opt;
        opt.validate = false; // checked below, independently of make_plan's own check
        made = memplan::make_plan(g, memplan::default_schedule(g), memplan::greedy_by_size{}, opt);
    } catch (const memplan::error&) {
        return;
    }
    if (!memplan::has_solution(made.status)) return;
    const auto report = memplan::check_plan(g, made.plan);
    if (!report.ok()) fail("check_plan rejects a plan make_plan made", report.to_string() + text);

    // And the plan survives its own round trip.
    const std::string plan_text = memplan::format_plan_json(g, made.plan);
    memplan::plan plan_back;
    try {
        plan_back = memplan::parse_plan_json(plan_text, g, "roundtrip.plan.json");
    } catch (const memplan::error& e) {
        fail("parse_plan_json rejects what format_plan_json wrote", std::string(e.what()) + "\n" + plan_text);
    }
    if (!(plan_back == made.plan)) fail("plan round trip differs", plan_text);
}

} // namespace memplan_fuzz
