// The offset CSV of formats.md §3 and the atomic file writer: round trips,
// tolerated variations, and every rejection with its message.
#include "support/fixtures.hpp"
#include <memplan/alloc/greedy.hpp>
#include <memplan/io/atomic_file.hpp>
#include <memplan/io/offset_csv.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

using namespace memplan;
using memplan::testing::message_of;
namespace fs = std::filesystem;

namespace {


std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh directory under the system's temporary directory, removed at the end.
struct temp_dir {
    fs::path path;
    temp_dir() {
        std::random_device rd;
        path = fs::temp_directory_path() / ("memplan-csv-test-" + std::to_string(rd()) + std::to_string(rd()));
        fs::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), {})); }
};

} // namespace

TEST_CASE("io.offset_csv.parse_the_spec_example") {
    const auto csv = parse_offset_csv("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n", "ex.csv");
    REQUIRE(csv.ids == std::vector<std::string>{"b1", "b2"});
    REQUIRE(csv.problem.items.size() == 2);
    CHECK(csv.problem.items[0].begin == 0);
    CHECK(csv.problem.items[0].end == 3);
    CHECK(csv.problem.items[0].size == 4);
    CHECK(csv.problem.items[1].begin == 3);
    CHECK(csv.problem.items[1].end == 9);
    CHECK(!csv.offsets);
    CHECK(lower_bound(csv.problem) == 4); // half-open: the two never meet
}

TEST_CASE("io.offset_csv.columns_by_name_crlf_and_no_trailing_newline") {
    const auto csv = parse_offset_csv("size,note,offset,upper,id,lower\r\n8,x,16,5,a,1\r\n2,,0,7,b,0", "x.csv");
    REQUIRE(csv.ids == std::vector<std::string>{"a", "b"});
    CHECK(csv.problem.items[0].size == 8);
    CHECK(csv.problem.items[0].begin == 1);
    CHECK(csv.problem.items[0].end == 5);
    REQUIRE(csv.offsets);
    CHECK(*csv.offsets == std::vector<std::uint64_t>{16, 0});
    // Header only: no rows.
    CHECK(parse_offset_csv("id,lower,upper,size\n", "h.csv").ids.empty());
    // Trailing blank lines are not rows.
    CHECK(parse_offset_csv("id,lower,upper,size\nb,0,1,1\n\n\r\n", "t.csv").ids.size() == 1);
    // Full 64-bit values.
    CHECK(parse_offset_csv("id,lower,upper,size\nb,0,1,18446744073709551615\n", "m.csv").problem.items[0].size ==
          18446744073709551615ull);
}

TEST_CASE("io.offset_csv.round_trip_through_a_file") {
    temp_dir dir;
    const auto in = parse_offset_csv("id,lower,upper,size\nx,0,3,4\ny,1,9,40\nz,3,9,4\nw,2,2,7\n", "in.csv");
    const auto placed = greedy_by_size{}.place(in.problem);
    const auto file = dir.path / "out.csv";
    write_offset_csv(file, in, placed.offsets);
    CHECK(slurp(file) == "id,lower,upper,size,offset\nx,0,3,4,40\ny,1,9,40,0\nz,3,9,4,40\nw,2,2,7,0\n");
    const auto back = read_offset_csv(file);
    CHECK(back.ids == in.ids);
    REQUIRE(back.problem.items.size() == in.problem.items.size());
    for (std::size_t i = 0; i < in.ids.size(); ++i) {
        CHECK(back.problem.items[i].begin == in.problem.items[i].begin);
        CHECK(back.problem.items[i].end == in.problem.items[i].end);
        CHECK(back.problem.items[i].size == in.problem.items[i].size);
    }
    REQUIRE(back.offsets);
    CHECK(*back.offsets == placed.offsets);
    CHECK(dir.entries() == 1); // no temporary left behind
}

TEST_CASE("io.offset_csv.reads_the_shared_minimalloc_instances") {
    const auto csv = read_offset_csv(MEMPLAN_DATA_DIR "/minimalloc-challenging/C.1048576.csv");
    CHECK(csv.ids.size() == 203);
    CHECK(csv.ids[0] == "0");
    CHECK(csv.problem.items[0].begin == 871424);
    CHECK(csv.problem.items[0].end == 906240);
    CHECK(csv.problem.items[0].size == 143360);
    CHECK(lower_bound(csv.problem) <= 1048576);
}

TEST_CASE("io.offset_csv.rejections_name_file_line_and_field") {
    auto msg = [](const std::string& text) { return message_of([&] { parse_offset_csv(text, "bad.csv"); }); };
    const std::string head = "id,lower,upper,size\n";
    CHECK(msg("") == "[memplan.io] bad.csv: empty file; expected a header row 'id,lower,upper,size'");
    CHECK(msg("\r\n\n") == "[memplan.io] bad.csv: empty file; expected a header row 'id,lower,upper,size'");
    CHECK(msg("id,lower,size\nb,0,1\n") == "[memplan.io] bad.csv:1: missing column 'upper' in the header row");
    CHECK(msg("id,lower,upper,size,id\n") == "[memplan.io] bad.csv:1: column 'id' appears twice");
    CHECK(msg(head + "a,0,1,4\nb,0,1\n") == "[memplan.io] bad.csv:3: expected 4 fields, found 3");
    CHECK(msg(head + "a,0,1,4,5\n") == "[memplan.io] bad.csv:2: expected 4 fields, found 5");
    CHECK(msg(head + "a,0,1,4\n\nb,0,1,4\n") == "[memplan.io] bad.csv:3: expected 4 fields, found 1");
    CHECK(msg(head + "a,0,1,4\nb,0,x1,4\n") == "[memplan.io] bad.csv:3: field 'upper': 'x1' is not a non-negative integer");
    CHECK(msg(head + "a,0,1,4.5\n") == "[memplan.io] bad.csv:2: field 'size': '4.5' is not a non-negative integer");
    CHECK(msg(head + "a,-2,1,4\n") == "[memplan.io] bad.csv:2: field 'lower': '-2' is negative");
    CHECK(msg(head + "a,0,1,+4\n") == "[memplan.io] bad.csv:2: field 'size': '+4' is not a non-negative integer");
    CHECK(msg(head + "a,0,1,\n") == "[memplan.io] bad.csv:2: field 'size' is empty");
    CHECK(msg(head + "a,0,1,18446744073709551616\n") ==
          "[memplan.io] bad.csv:2: field 'size': '18446744073709551616' does not fit in 64 bits");
    CHECK(msg(head + "a,5,3,4\n") == "[memplan.io] bad.csv:2: field 'lower': 5 is after field 'upper': 3");
    CHECK(msg(head + "a,0,1,4\nb,0,1,4\na,2,3,4\n") ==
          "[memplan.io] bad.csv:4: field 'id': duplicate id 'a' (first on line 2)");
    CHECK(msg(head + ",0,1,4\n") == "[memplan.io] bad.csv:2: field 'id' is empty");
    CHECK(msg("id,lower,upper,size,offset\na,0,1,4,z\n") ==
          "[memplan.io] bad.csv:2: field 'offset': 'z' is not a non-negative integer");
}

TEST_CASE("io.offset_csv.io_failures") {
    temp_dir dir;
    CHECK(message_of([&] { read_offset_csv(dir.path / "missing.csv"); }).find("cannot open '" +
                                                                             (dir.path / "missing.csv").string()) !=
          std::string::npos);
    const auto csv = parse_offset_csv("id,lower,upper,size\na,0,1,4\n", "a.csv");
    CHECK(message_of([&] { format_offset_csv(csv, {}); }) == "[memplan.io] offset CSV: 0 offsets for 1 rows");
    offset_csv odd = csv;
    odd.ids[0] = "a,b";
    CHECK(message_of([&] { format_offset_csv(odd, {0}); }).find("id 'a,b' of row 1 contains a comma") !=
          std::string::npos);
}

TEST_CASE("io.atomic_file.replaces_or_leaves_untouched") {
    temp_dir dir;
    const auto file = dir.path / "plan.json";
    write_file_atomically(file, "first");
    CHECK(slurp(file) == "first");
    write_file_atomically(file, "second, longer");
    CHECK(slurp(file) == "second, longer");
    write_file_atomically(file, "");
    CHECK(slurp(file).empty());
    CHECK(dir.entries() == 1);

    // A missing directory: the error names the path, nothing is created.
    const auto nowhere = dir.path / "no" / "such" / "dir.json";
    CHECK(message_of([&] { write_file_atomically(nowhere, "x"); }).find("cannot write '" + nowhere.string() + "'") !=
          std::string::npos);
    // A directory in the way: refused before any temporary is made, the directory stays.
    fs::create_directory(dir.path / "taken");
    fs::create_directory(dir.path / "taken" / "child");
    CHECK(message_of([&] { write_file_atomically(dir.path / "taken", "x"); }).find("it is a directory") !=
          std::string::npos);
    CHECK(fs::is_directory(dir.path / "taken"));
    CHECK(dir.entries() == 2);
    CHECK(message_of([&] { write_file_atomically("", "x"); }).find("not a file name") != std::string::npos);
}
