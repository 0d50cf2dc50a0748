// Input a hostile user would try, each class once found to break a promise:
// deep nesting, numbers beyond double range, alignments and
// offsets that wrap 64 bits, plans of another graph, MILPs too large to
// build, outputs that are devices, links or several files. The promise: the
// library throws memplan::error naming the culprit (never anything else),
// the validator rejects what is invalid, and nothing is half-written.
#include <memplan/alloc/allocators.hpp>
#include <memplan/alloc/milp.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/io/atomic_file.hpp>
#include <memplan/io/checkmate_json.hpp>
#include <memplan/io/graph_json.hpp>
#include <memplan/io/offset_csv.hpp>
#include <memplan/io/plan_json.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/plan/named.hpp>
#include <memplan/schedule/schedule.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <vector>

using namespace memplan;
namespace fs = std::filesystem;

namespace hostile {

/// The message of the memplan::error `f` throws; fails the test when it
/// throws anything else or nothing.
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("not a memplan::error: " << e.what());
    }
    FAIL("no error");
    return {};
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

std::string nested(std::size_t depth, std::string_view inner = "") {
    return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

std::string graph_doc(const std::string& tensors, const std::string& extra = "") {
    return "{\"format\": \"memplan.graph\", \"version\": 1, \"name\": \"g\",\n\"tensors\": " + tensors +
           ",\n\"ops\": [{\"name\": \"p\", \"inputs\": [], \"outputs\": [\"x\"]}]" + extra + "}";
}
const std::string one_tensor = R"([{"name": "x", "bytes": 64}])";

graph small_graph() {
    graph g("small");
    g.add_tensor("x", 1000);
    g.add_tensor("y", 1000);
    g.add_tensor("z", 24);
    g.add_op("p", {}, {"x"});
    g.add_op("q", {"x"}, {"y"});
    g.add_op("r", {"y"}, {"z"});
    validate(g);
    return g;
}

fs::path scratch_dir() {
    std::random_device rd;
    const fs::path dir = fs::temp_directory_path() / ("memplan-hostile-" + std::to_string(rd()));
    fs::create_directories(dir);
    return dir;
}

std::size_t entries(const fs::path& dir) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace hostile

TEST_CASE("hostile.json.deep_nesting_is_a_named_error_in_every_reader") {
    using namespace hostile;
    const graph g = small_graph();
    const std::string deep = nested(100000); // 200 KB: once a stack overflow
    const std::vector<std::pair<std::string, std::function<void()>>> cases = {
        {"the whole graph", [&] { (void)parse_graph_json(deep, "g.json"); }},
        {"inside tensors", [&] { (void)parse_graph_json(graph_doc("[" + deep + "]"), "g.json"); }},
        {"as a name", [&] { (void)parse_graph_json(graph_doc("[{\"name\": " + deep + ", \"bytes\": 1}]"), "g.json"); }},
        {"in an unknown field", [&] { (void)parse_graph_json(graph_doc(one_tensor, ", \"extra\": " + deep), "g.json"); }},
        {"in a plan", [&] { (void)parse_plan_json("{\"steps\": " + deep + "}", g, "p.json"); }},
        {"as Checkmate nodes", [&] { (void)parse_checkmate_json("{\"nodes\": " + deep + ", \"links\": []}", "c.json"); }},
    };
    for (const auto& [what, f] : cases) {
        CAPTURE(what);
        const auto msg = error_of(f);
        CHECK(has(msg, "nested deeper than 256 levels"));
        CHECK(std::regex_search(msg, std::regex(R"(\.json:[0-9]+:[0-9]+: )"))); // file, line and column
        CHECK(msg.size() < 300);     // an excerpt, never the value
    }
    // 256 levels are fine (an unknown field is ignored), 257 are not.
    CHECK_NOTHROW((void)parse_graph_json(graph_doc(one_tensor, ", \"extra\": " + nested(255)), "g.json"));
    CHECK(has(error_of([&] { (void)parse_graph_json(graph_doc(one_tensor, ", \"extra\": " + nested(256)), "g.json"); }),
              "nested deeper"));
}

TEST_CASE("hostile.json.numbers_beyond_double_range_name_file_and_line") {
    using namespace hostile;
    const graph g = small_graph();
    const std::vector<std::pair<std::string, std::function<void()>>> cases = { // each number on line 3
        {"bytes", [&] { (void)parse_graph_json(graph_doc("[\n{\"name\": \"x\", \"bytes\": 1e400}]"), "g.json"); }},
        {"cost", [&] {
             (void)parse_graph_json("{\"format\": \"memplan.graph\", \"version\": 1, \"tensors\": [],\n\"ops\": [\n"
                                    "{\"name\": \"p\", \"inputs\": [], \"outputs\": [], \"cost\": 456e84198}]}",
                                    "g.json");
         }},
        {"plan offset", [&] {
             (void)parse_plan_json("{\"format\": \"memplan.plan\", \"version\": 1,\n\n\"arena_bytes\": -1e999}", g,
                                   "p.json");
         }},
        {"checkmate cost", [&] {
             (void)parse_checkmate_json("{\"nodes\": [\n\n{\"id\": 0, \"cost_ram\": 4, \"cost_cpu\": 1e309}], "
                                        "\"links\": []}",
                                        "c.json");
         }},
    };
    for (const auto& [what, f] : cases) {
        CAPTURE(what);
        const auto msg = error_of(f);
        CHECK(has(msg, "number overflow"));
        CHECK(has(msg, ".json:3:"));
    }
}

TEST_CASE("hostile.json.messages_quote_a_bounded_excerpt") {
    using namespace hostile;
    // A name that is a 1 MB string, and a `bytes` that is a huge array: the
    // message quotes at most 60 characters of either.
    const std::string long_name = "[{\"name\": \"" + std::string(1 << 20, 'a') + "\", \"bytes\": \"x\"}]";
    std::string big_array = "[";
    for (int i = 0; i < 100000; ++i) big_array += (i ? ",1" : "1");
    big_array += "]";
    for (const auto& doc : {graph_doc(long_name), graph_doc("[{\"name\": \"x\", \"bytes\": " + big_array + "}]")}) {
        const auto msg = error_of([&] { (void)parse_graph_json(doc, "g.json"); });
        CAPTURE(msg.substr(0, 200));
        CHECK(msg.size() < 400);
        CHECK(has(msg, "..."));
    }
}

TEST_CASE("hostile.json.writers_refuse_invalid_utf8_with_a_memplan_error") {
    using namespace hostile;
    graph g("bad \xff name");
    g.add_tensor("x", 4);
    g.add_op("p", {}, {"x"});
    CHECK(has(error_of([&] { (void)format_graph_json(g); }), "not valid UTF-8"));
}

TEST_CASE("hostile.alignment.wrapping_alignments_are_refused_naming_the_tensor") {
    using namespace hostile;
    const graph g = small_graph();
    for (const std::uint64_t alignment :
         {std::uint64_t{1} << 63, ~std::uint64_t{0}, (std::uint64_t{1} << 63) - 1}) {
        CAPTURE(alignment);
        plan_options o;
        o.alignment = alignment;
        for (const auto* name : {"auto", "exact", "greedy_by_size", "best_heuristic", "no_reuse", "online_best_fit"}) {
            CAPTURE(name);
            const auto msg = error_of([&] { (void)make_plan(g, default_schedule(g), name, o); });
            CHECK(has(msg, "graph 'small'"));
            CHECK(has(msg, "tensor '"));
            CHECK(has(msg, std::to_string(alignment)));
        }
    }
    // Large alignments that do fit give valid plans from every allocator.
    plan_options o;
    o.alignment = std::uint64_t{1} << 40;
    for (const auto* name : {"auto", "exact", "greedy_by_size", "best_heuristic", "no_reuse", "online_best_fit"}) {
        CAPTURE(name);
        const auto r = make_plan(g, default_schedule(g), name, o);
        REQUIRE(has_solution(r.status));
        CHECK(check_plan(g, r.plan).ok());
        CHECK(r.plan.arena_bytes >= (std::uint64_t{1} << 40));
    }
}

TEST_CASE("hostile.alloc.no_allocator_returns_a_wrapped_placement") {
    using namespace hostile;
    // Three overlapping items aligned to 2^63: no placement fits 64 bits.
    // Two: one does (offsets 0 and 2^63). Every allocator either returns a
    // placement the checker accepts or says it has none; none wraps.
    for (const std::size_t n : {2, 3}) {
        alloc_problem p;
        p.alignment = std::uint64_t{1} << 63;
        for (std::size_t i = 0; i < n; ++i) p.items.push_back({10, 0, 4});
        for (const auto& entry : allocator_registry()) {
            if (entry.needs_solver) continue;
            CAPTURE(n);
            CAPTURE(entry.name);
            try {
                const auto r = allocate(entry.name, p);
                if (has_solution(r.status)) CHECK(check_placement(p, r.offsets).ok());
                else CHECK(r.status == status::error);
                if (n == 3) CHECK_FALSE(has_solution(r.status));
            } catch (const error&) {
                CHECK(n == 3); // refusing is fine when nothing fits
            }
        }
    }
}

TEST_CASE("hostile.placement.an_offset_plus_size_past_2_64_is_invalid") {
    using namespace hostile;
    alloc_problem p;
    p.items = {{100, 0, 2}, {8, 1, 3}};
    const std::vector<std::uint64_t> offsets = {18446744073709551600ull, 0};
    const auto report = check_placement(p, offsets, std::uint64_t{0}, {}, {"a", "b"});
    REQUIRE_FALSE(report.ok());
    CHECK(report.has_rule(5));
    CHECK(has(report.to_string(), "item 'a'"));
    CHECK(has(report.to_string(), "past the end of the size type"));
    // And through the reader, as `memplan check-csv` reads it.
    const auto csv = parse_offset_csv("id,lower,upper,size,offset\na,0,2,100,18446744073709551600\n", "w.csv");
    CHECK_FALSE(check_placement(csv.problem, *csv.offsets, std::uint64_t{0}, {}, csv.ids).ok());
    // Sizes that sum past 2^64 cannot be one arena: rejected with line and id.
    const auto msg = error_of([] {
        (void)parse_offset_csv("id,lower,upper,size\na,0,2,18446744073709551000\nb,5,6,1000\n", "s.csv");
    });
    CHECK(has(msg, "s.csv:3"));
    CHECK(has(msg, "'b'"));
}

TEST_CASE("hostile.plan.a_plan_of_another_graph_is_rejected") {
    using namespace hostile;
    const graph g = small_graph();
    auto r = make_plan(g, default_schedule(g), greedy_by_size{});
    REQUIRE(check_plan(g, r.plan).ok());
    graph other = g;
    other.set_name("other");
    const auto report = check_plan(other, r.plan);
    CHECK_FALSE(report.ok());
    CHECK(has(report.to_string(), "the plan is for graph 'small', not for graph 'other'"));
    // Read from a file, the same plan loads (names resolve) and is flagged.
    const auto read = parse_plan_json(format_plan_json(g, r.plan), other, "p.json");
    CHECK_FALSE(check_plan(other, read).ok());
}

TEST_CASE("hostile.milp.an_offset_model_too_large_is_refused_before_it_is_built") {
    using namespace hostile;
    alloc_problem p;
    for (std::uint64_t i = 0; i < 2000; ++i) p.items.push_back({64 + i, i, 4000 + i}); // every pair overlaps
    CHECK(detail::milp_overlapping_pairs(p) == 2000ull * 1999 / 2);
    const auto msg = error_of([&] { (void)make_offset_model<std::uint64_t>(p, 0, 1ull << 40); });
    CHECK(has(msg, "1999000 binaries"));
    CHECK(has(msg, "exact"));
    // Counting agrees with the definition on a random instance.
    std::mt19937_64 rng(7);
    alloc_problem q;
    for (int i = 0; i < 300; ++i) {
        const std::uint64_t b = rng() % 500, len = rng() % 40;
        q.items.push_back({1 + rng() % 9, b, b + len});
    }
    std::uint64_t brute = 0;
    for (std::size_t a = 0; a < q.items.size(); ++a)
        for (std::size_t b = a + 1; b < q.items.size(); ++b)
            brute += q.items[a].size > 0 && q.items[b].size > 0 && q.items[a].overlaps_in_time(q.items[b]);
    CHECK(detail::milp_overlapping_pairs(q) == brute);
}

TEST_CASE("hostile.write.devices_are_written_through_and_links_stay_links") {
    using namespace hostile;
    // /dev/null: written and discarded, still a character device (a rename
    // over it, as root, would have made it a regular file).
    write_file_atomically("/dev/null", "discarded\n");
    struct stat st {};
    REQUIRE(::stat("/dev/null", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
    // /dev/full: the device's error is reported, nothing is created.
    if (fs::exists("/dev/full"))
        CHECK(has(error_of([] { write_file_atomically("/dev/full", std::string(1 << 16, 'x')); }), "/dev/full"));

    const fs::path dir = scratch_dir();
    // A link to a file: the file gets the content, the link stays a link.
    { std::ofstream(dir / "target.json") << "old"; }
    fs::create_symlink("target.json", dir / "link.json");
    write_file_atomically(dir / "link.json", "new");
    CHECK(fs::is_symlink(dir / "link.json"));
    CHECK(slurp(dir / "target.json") == "new");
    // A link to /dev/null stays one too.
    fs::create_symlink("/dev/null", dir / "null");
    write_file_atomically(dir / "null", "x");
    CHECK(fs::is_symlink(dir / "null"));
    // A directory is refused.
    fs::create_directory(dir / "sub");
    CHECK(has(error_of([&] { write_file_atomically(dir / "sub", "x"); }), "it is a directory"));
    CHECK(entries(dir) == 4); // no temporaries left
    fs::remove_all(dir);
}

TEST_CASE("hostile.write.several_outputs_are_written_all_or_none") {
    using namespace hostile;
    const fs::path dir = scratch_dir();
    { std::ofstream(dir / "a.csv") << "old"; }
    const auto msg = error_of([&] {
        write_files_atomically({{dir / "a.csv", "new"}, {dir / "nodir" / "b.svg", "svg"}});
    });
    CHECK(has(msg, "b.svg"));
    CHECK(slurp(dir / "a.csv") == "old"); // the first was not written
    CHECK(entries(dir) == 1);             // and no temporary is left
    write_files_atomically({{dir / "a.csv", "new"}, {dir / "b.svg", "svg"}});
    CHECK(slurp(dir / "a.csv") == "new");
    CHECK(slurp(dir / "b.svg") == "svg");
    fs::remove_all(dir);
}

TEST_CASE("hostile.fuzz_regressions.every_seed_through_the_public_readers_is_a_memplan_error_or_a_value") {
    using namespace hostile;
    // The inputs that once crashed a fuzz harness (tests/fuzz/regressions):
    // a library caller that catches memplan::error must see nothing else.
    const fs::path root = fs::path(MEMPLAN_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
    const graph mlp = read_graph_json(fs::path(MEMPLAN_SOURCE_DIR) / "examples" / "graphs" / "mlp-train.json");
    const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers = {
        {"graph_json", [](const std::string& t) { (void)parse_graph_json(t, "seed"); }},
        {"plan_json", [&](const std::string& t) { (void)check_plan(mlp, parse_plan_json(t, mlp, "seed")); }},
        {"offset_csv",
         [](const std::string& t) {
             const auto csv = parse_offset_csv(t, "seed");
             if (csv.offsets) (void)check_placement(csv.problem, *csv.offsets, std::uint64_t{0}, {}, csv.ids);
         }},
        {"checkmate_json", [](const std::string& t) { (void)parse_checkmate_json(t, "seed"); }},
    };
    std::size_t seeds = 0;
    for (const auto& [reader, read] : readers) {
        REQUIRE(fs::is_directory(root / reader));
        for (const auto& e : fs::directory_iterator(root / reader)) {
            CAPTURE(e.path().string());
            const std::string text = slurp(e.path());
            ++seeds;
            try {
                read(text);
            } catch (const error&) {
                // the promised outcome for bad input
            } catch (const std::exception& x) {
                FAIL("not a memplan::error: " << x.what());
            }
        }
    }
    CHECK(seeds >= 10);
}
