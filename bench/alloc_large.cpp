// Offset assignment at production scale: the vendored allocation traces of
// production compilers (data/large/: MindSpore SOMAS traces of ResNet-50 and
// PanGu-2.6B, an IOPDDL trace) placed by each memplan allocator, and
// MiniMalloc's challenging instances decided at capacity 1,048,576. When
// omnimalloc can be imported (an optional peer: `pip install omnimalloc`
// into any Python; never a dependency of the build or the tests), its
// greedy_by_size and omni run on the same traces in the same run, through
// bench/omnimalloc_peer.py, and are scored by the same lower bound.
//
// Usage: bench_alloc_large [--time-limit S] [--python PY] [--no-peer]
//                          [--traces a.csv,b.csv] [--peer-allocators x,y]
//   --time-limit S   what `auto` and `exact` get per trace (default 5), as `memplan alloc --time-limit`
//   --python PY      the Python to run the peer with (default: $MEMPLAN_PYTHON, else python3)
// Prints markdown tables; every memplan placement is checked with
// check_placement, and an invalid one ends the program with exit 1.
#include "args.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/io/offset_csv.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace memplan;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct row {
    std::string allocator;
    std::uint64_t height = 0;
    double seconds = 0;
    std::string note;
};

/// Runs `cmd` and returns what it printed (empty when it failed to start).
std::string run_capture(const std::string& cmd) {
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
        std::array<char, 4096> buf{};
        while (std::fgets(buf.data(), static_cast<int>(buf.size()), f)) out += buf.data();
        pclose(f);
    }
    return out;
}

std::string shell_quoted(const std::string& s) { return "'" + s + "'"; } // paths here never hold quotes

template <class Allocator>
row run_memplan(const Allocator& a, const alloc_problem& p, std::string name) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = a.place(p);
    row out{std::move(name), r.size, seconds_since(t0), std::string(to_string(r.status))};
    if (!has_solution(r.status) || !check_placement(p, r.offsets, p.capacity).ok()) {
        std::printf("| INVALID PLACEMENT from %s: %s |\n", out.allocator.c_str(), r.message.c_str());
        std::exit(1);
    }
    return out;
}

} // namespace

int main(int argc, char** argv) {
    double time_limit = 5;
    bool peer = true;
    std::string python = std::getenv("MEMPLAN_PYTHON") ? std::getenv("MEMPLAN_PYTHON") : "python3";
    std::vector<std::string> peer_allocators{"greedy_by_size", "omni"};
    const std::string data = MEMPLAN_DATA_DIR;
    std::vector<std::string> traces;
    for (const char* t : {"resnet50", "G_1", "pangu_2.6B"}) traces.push_back(data + "/large/" + t + ".csv");
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const bool has_value = i + 1 < argc;
            if (a == "--time-limit" && has_value) time_limit = std::stod(argv[++i]);
            else if (a == "--python" && has_value) python = argv[++i];
            else if (a == "--no-peer") peer = false;
            else if (a == "--traces" && has_value) traces = memplan::bench::split_list(argv[++i]);
            else if (a == "--peer-allocators" && has_value) peer_allocators = memplan::bench::split_list(argv[++i]);
            else throw std::invalid_argument(a);
        }
    } catch (const std::exception&) {
        std::fprintf(stderr,
                     "usage: %s [--time-limit S] [--python PY] [--no-peer] [--traces a.csv,b.csv] "
                     "[--peer-allocators x,y]\n",
                     argv[0]);
        return 2;
    }
    const std::string script = std::filesystem::path(__FILE__).parent_path().string() + "/omnimalloc_peer.py";
    if (peer && std::system((shell_quoted(python) + " -c 'import omnimalloc' > /dev/null 2>&1").c_str()) != 0) {
        std::printf("(omnimalloc is not importable by %s: the peer rows are left out; pip install omnimalloc "
                    "into it, or pass --python)\n\n",
                    python.c_str());
        peer = false;
    }

    std::printf("## Large traces\n\nheight / LB (LB = the largest total live at one time); auto and exact get "
                "--time-limit %.0f s; time = wall, one run; peer rows: omnimalloc through %s\n\n",
                time_limit, peer ? python.c_str() : "-");
    std::printf("| trace | buffers | LB | allocator | height / LB | time s | status |\n|---|---:|---:|---|---:|---:|---|\n");
    std::string joined;
    for (const auto& path : traces) {
        const auto csv = read_offset_csv(path);
        const auto& p = csv.problem;
        const auto lb = lower_bound(p);
        std::vector<row> rows;
        rows.push_back(run_memplan(greedy_by_size{}, p, "greedy_by_size"));
        rows.push_back(run_memplan(greedy_by_size_begin{}, p, "greedy_by_size_begin"));
        rows.push_back(run_memplan(best_heuristic{}, p, "best_heuristic"));
        auto_allocator a;
        a.time_limit = time_limit;
        rows.push_back(run_memplan(a, p, "auto"));
        if (peer) {
            joined.clear();
            for (const auto& n : peer_allocators) joined += (joined.empty() ? "" : ",") + n;
            const auto out = run_capture(shell_quoted(python) + " " + shell_quoted(script) + " " + shell_quoted(path) + " " + joined);
            std::size_t at = 0;
            for (const auto& n : peer_allocators) {
                const auto line_end = out.find('\n', at);
                const std::string line = out.substr(at, line_end == std::string::npos ? std::string::npos : line_end - at);
                at = line_end == std::string::npos ? out.size() : line_end + 1;
                row r{"omnimalloc " + n, 0, 0, "peer"};
                char name[128] = {};
                unsigned long long h = 0;
                double s = 0;
                if (std::sscanf(line.c_str(), "%127s %llu %lf", name, &h, &s) == 3) {
                    r.height = h;
                    r.seconds = s;
                } else {
                    r.note = line.empty() ? "no output" : line;
                }
                rows.push_back(r);
            }
        }
        const std::string name = std::filesystem::path(path).stem().string();
        for (const auto& r : rows) {
            char ratio[32] = "-";
            if (r.height) std::snprintf(ratio, sizeof ratio, "%.4f", static_cast<double>(r.height) / static_cast<double>(lb));
            std::printf("| %s | %zu | %.3f GiB | %s | %s | %.2f | %s |\n", name.c_str(), p.items.size(),
                        static_cast<double>(lb) / (1u << 30), r.allocator.c_str(), ratio, r.seconds, r.note.c_str());
        }
        std::fflush(stdout);
    }

    std::printf("\n## MiniMalloc's challenging set\n\nexact, decision mode at capacity 1,048,576 (as MiniMalloc "
                "runs it), time limit 60 s; time = the search's own\n\n"
                "| instance | buffers | status | time s |\n|---|---:|---|---:|\n");
    for (const char* name : {"A", "B", "C", "D", "E", "F", "J"}) {
        const std::string path = data + "/minimalloc-challenging/" + name + ".1048576.csv";
        if (!std::filesystem::exists(path)) continue;
        auto p = read_offset_csv(path).problem;
        p.capacity = 1048576;
        exact e;
        e.time_limit = 60;
        const auto r = e.place(p);
        if (has_solution(r.status) && !check_placement(p, r.offsets, p.capacity).ok()) {
            std::printf("| %s | INVALID PLACEMENT |\n", name);
            return 1;
        }
        std::printf("| %s | %zu | %s | %.3f |\n", name, p.items.size(), std::string(to_string(r.status)).c_str(),
                    r.seconds);
        std::fflush(stdout);
    }
    return 0;
}
