// The SVG line-plot writer: well-formed XML (checked by a small tag parser
// here: balanced tags, quoted attributes, only the five entities), the series
// present with one marker per finite point, ticks on nice values, escaping,
// and the atomic file write.
#include <memplan/core/error.hpp>
#include <memplan/io/svg_plot.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct xml_summary {
    bool ok = true;
    std::string problem;
    std::vector<std::string> elements; ///< names of all elements, in document order
    std::vector<std::string> texts;    ///< character data, entities decoded
};

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':'; }

/// Decodes the five predefined entities; false on any other '&'.
bool decode(std::string_view in, std::string& out) {
    static constexpr std::pair<std::string_view, char> ents[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (std::size_t i = 0; i < in.size();) {
        if (in[i] != '&') {
            out += in[i++];
            continue;
        }
        bool found = false;
        for (auto [e, c] : ents)
            if (in.substr(i, e.size()) == e) {
                out += c;
                i += e.size();
                found = true;
                break;
            }
        if (!found) return false;
    }
    return true;
}

/// A parse-level check of the XML subset the writer emits: one prolog, then
/// elements with quoted attributes, character data and self-closing tags.
xml_summary parse_xml(const std::string& s) {
    xml_summary r;
    auto fail = [&](std::string why, std::size_t at) {
        if (r.ok) r.problem = why + " at offset " + std::to_string(at);
        r.ok = false;
    };
    std::vector<std::string> open;
    std::size_t i = 0;
    if (s.rfind("<?xml ", 0) == 0) {
        i = s.find("?>");
        if (i == std::string::npos) {
            fail("unterminated prolog", 0);
            return r;
        }
        i += 2;
    }
    bool root_seen = false;
    while (i < s.size() && r.ok) {
        if (s[i] != '<') {
            const auto next = s.find('<', i);
            const auto text = std::string_view(s).substr(i, next == std::string::npos ? s.size() - i : next - i);
            if (text.find('>') != std::string_view::npos) fail("raw '>' in text", i);
            std::string decoded;
            if (!decode(text, decoded)) fail("bad entity in text", i);
            if (open.empty() && decoded.find_first_not_of(" \n\t\r") != std::string::npos)
                fail("text outside the root", i);
            if (!open.empty() && decoded.find_first_not_of(" \n\t\r") != std::string::npos) r.texts.push_back(decoded);
            i = next == std::string::npos ? s.size() : next;
            continue;
        }
        const bool closing = i + 1 < s.size() && s[i + 1] == '/';
        std::size_t j = i + (closing ? 2 : 1);
        const std::size_t name_start = j;
        while (j < s.size() && name_char(s[j])) ++j;
        const std::string name = s.substr(name_start, j - name_start);
        if (name.empty()) {
            fail("tag without a name", i);
            break;
        }
        if (closing) {
            if (j >= s.size() || s[j] != '>') fail("bad closing tag", i);
            if (open.empty() || open.back() != name) fail("unbalanced </" + name + ">", i);
            else open.pop_back();
            i = j + 1;
            continue;
        }
        if (open.empty()) {
            if (root_seen) fail("second root element", i);
            root_seen = true;
        }
        // Attributes: name="value" separated by spaces.
        bool self_closing = false;
        while (j < s.size() && r.ok) {
            while (j < s.size() && s[j] == ' ') ++j;
            if (j < s.size() && s[j] == '>') {
                ++j;
                break;
            }
            if (j + 1 < s.size() && s[j] == '/' && s[j + 1] == '>') {
                self_closing = true;
                j += 2;
                break;
            }
            const std::size_t a = j;
            while (j < s.size() && name_char(s[j])) ++j;
            if (j == a || j + 1 >= s.size() || s[j] != '=' || s[j + 1] != '"') {
                fail("bad attribute in <" + name + ">", j);
                break;
            }
            const auto end = s.find('"', j + 2);
            if (end == std::string::npos) {
                fail("unterminated attribute", j);
                break;
            }
            std::string value;
            const auto raw = std::string_view(s).substr(j + 2, end - j - 2);
            if (raw.find('<') != std::string_view::npos || !decode(raw, value)) fail("bad attribute value", j);
            j = end + 1;
        }
        r.elements.push_back(name);
        if (!self_closing) open.push_back(name);
        i = j;
    }
    if (r.ok && !open.empty()) fail("unclosed <" + open.back() + ">", s.size());
    if (r.ok && !root_seen) fail("no root element", 0);
    return r;
}

std::size_t count(const std::vector<std::string>& v, const std::string& x) {
    return static_cast<std::size_t>(std::count(v.begin(), v.end(), x));
}

bool has_text(const xml_summary& x, const std::string& t) {
    return std::find(x.texts.begin(), x.texts.end(), t) != x.texts.end();
}

} // namespace

TEST_CASE("svg_plot.two_series_well_formed") {
    memplan::svg_plot p;
    p.title = "resnet <block> & friends";
    p.x_label = "arena (GiB)";
    p.y_label = "overhead (%)";
    p.series.push_back({"chen_greedy", {{1.0, 30.0}, {2.0, 12.5}, {3.5, 0.0}}, ""});
    p.series.push_back({"joint \"MONeT\"", {{0.8, 25.0}, {1.5, 5.0}, {3.5, -1.0}, {2.0, std::nan("")}}, "#123456"});
    const auto s = memplan::svg_plot_string(p);
    const auto x = parse_xml(s);
    REQUIRE_MESSAGE(x.ok, x.problem);
    REQUIRE(!x.elements.empty());
    CHECK(x.elements.front() == "svg");
    CHECK(count(x.elements, "polyline") == 2);
    CHECK(count(x.elements, "circle") == 6); // the NaN point is skipped
    // Title, labels and series names survive escaping.
    CHECK(has_text(x, "resnet <block> & friends"));
    CHECK(has_text(x, "arena (GiB)"));
    CHECK(has_text(x, "overhead (%)"));
    CHECK(has_text(x, "chen_greedy"));
    CHECK(has_text(x, "joint \"MONeT\""));
    CHECK(s.find("#123456") != std::string::npos);
    // Nice ticks: y spans -1..30, about 6 intervals -> steps of 10 from -10 to 30;
    // x spans 0.8..3.5 -> steps of 0.5 from 0.5 to 3.5.
    for (std::string t : {"-10", "0", "10", "20", "30", "0.5", "1.0", "2.5", "3.5"}) CHECK_MESSAGE(has_text(x, t), t);
    for (std::string t : {"-0", "5", "40", "4.0"}) CHECK_MESSAGE(!has_text(x, t), t);
}

TEST_CASE("svg_plot.degenerate_inputs") {
    SUBCASE("no series") {
        memplan::svg_plot p;
        p.title = "empty";
        const auto x = parse_xml(memplan::svg_plot_string(p));
        CHECK_MESSAGE(x.ok, x.problem);
        CHECK(count(x.elements, "polyline") == 0);
    }
    SUBCASE("one point") {
        memplan::svg_plot p;
        p.series.push_back({"single", {{0.5, 0.5}}, ""});
        const auto s = memplan::svg_plot_string(p);
        const auto x = parse_xml(s);
        CHECK_MESSAGE(x.ok, x.problem);
        CHECK(count(x.elements, "circle") == 1);
        CHECK(s.find("nan") == std::string::npos);
        CHECK(s.find("inf") == std::string::npos);
    }
    SUBCASE("fixed ranges, control characters dropped") {
        memplan::svg_plot p;
        p.x_range = std::pair{0.0, 1.0};
        p.y_range = std::pair{0.0, 100.0};
        p.series.push_back({std::string("a\x01") + "b", {{0.1, 10}, {0.9, 90}}, ""});
        const auto s = memplan::svg_plot_string(p);
        const auto x = parse_xml(s);
        CHECK_MESSAGE(x.ok, x.problem);
        CHECK(has_text(x, "ab"));
        CHECK(has_text(x, "0.2"));
        CHECK(has_text(x, "100"));
    }
    SUBCASE("too small") {
        memplan::svg_plot p;
        p.width = 10;
        CHECK_THROWS_AS(memplan::svg_plot_string(p), memplan::error);
    }
}

TEST_CASE("svg_plot.random_data_always_parses") {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> mag(-12, 12);
    for (int rep = 0; rep < 50; ++rep) {
        CAPTURE(rep);
        memplan::svg_plot p;
        const double scale = std::pow(10.0, mag(rng));
        for (int k = 0; k < 3; ++k) {
            memplan::svg_series ser;
            ser.name = "s";
            ser.name += std::to_string(k);
            for (int i = 0; i < 7; ++i)
                ser.points.push_back({scale * std::uniform_real_distribution<double>(-1, 1)(rng),
                                      std::uniform_real_distribution<double>(-50, 200)(rng)});
            p.series.push_back(ser);
        }
        const auto s = memplan::svg_plot_string(p);
        const auto x = parse_xml(s);
        CHECK_MESSAGE(x.ok, x.problem);
        CHECK(count(x.elements, "circle") == 21);
        CHECK(s.find("nan") == std::string::npos);
    }
}

TEST_CASE("svg_plot.write_atomically") {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    std::string leaf = "memplan-svg-";
    leaf += std::to_string(std::random_device{}());
    const auto dir = std::filesystem::temp_directory_path() / leaf;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    memplan::svg_plot p;
    p.series.push_back({"curve", {{1, 2}, {2, 1}}, ""});
    memplan::write_svg_plot(dir / "plot.svg", p);
    std::ifstream in(dir / "plot.svg");
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str() == memplan::svg_plot_string(p));
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
    CHECK(files == 1);
    CHECK_THROWS_AS(memplan::write_svg_plot(dir / "no" / "plot.svg", p), memplan::error);
    std::filesystem::remove_all(dir);
}
