// Offset assignment at production scale: the vendored allocation traces of
// production compilers (data/large/: MindSpore SOMAS traces of ResNet-50 and
// PanGu-2.6B, an IOPDDL trace) placed by each memplan allocator, and
// MiniMalloc's challenging instances decided at capacity 1,048,576. When
// omnimalloc can be imported (an optional peer: `pip install omnimalloc`
// into any Python; never a dependency of the build or the tests), its
// greedy_by_size and omni run on the same traces in the same run, through
// bench/omnimalloc_peer.py, and are scored by the same lower bound.
//
// Besides the vendored traces, the run adds traces of the same shapes and
// the LLM training graphs' own buffers:
//   - `--random N` (default 28000; 0: none) traces resampled from each
//     vendored trace to N buffers (seeds 1..`--seeds`, default 2): each
//     buffer a random buffer of the source with its size, its lifetime scaled
//     by N / source size and jittered by up to 25 %, its start scaled the
//     same way plus a random offset within the scaled step, so the size
//     palette, the lifetime distribution and the density are the source's;
//   - `--llm` (default on; --no-llm) the buffers of the zoo's decoder
//     (Llama-3-8B and -70B at 1 x 4096, bf16) under the store-all schedule and
//     under full recomputation.
//
// Usage: bench_alloc_large [--time-limit S] [--python PY] [--no-peer]
//                          [--traces a.csv,b.csv] [--peer-allocators x,y] [--random N] [--seeds K] [--no-llm]
//                          [--no-minimalloc] [--keep DIR]
//   --keep DIR       write the generated traces to DIR and keep them (memplan alloc --input DIR/NAME.csv)
//   --time-limit S   what `auto` and `exact` get per trace (default 5), as `memplan alloc --time-limit`
//   --python PY      the Python to run the peer with (default: $MEMPLAN_PYTHON, else python3)
// Prints markdown tables; every memplan placement is checked with
// check_placement, and an invalid one ends the program with exit 1.
#include "args.hpp"

#include <memplan/alloc/allocators.hpp>
#include <memplan/check/placement.hpp>
#include <memplan/io/offset_csv.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/remat/policy.hpp>
#include <memplan/remat/place.hpp>
#include <memplan/schedule/liveness.hpp>
#include <memplan/zoo/zoo.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

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

/// One trace of the run: its name, its problem and a CSV the peer can read.
struct trace {
    std::string name;
    alloc_problem problem;
    std::string csv;
};

/// Writes `p` as an offset CSV under `dir` (for the peer) and returns the trace.
trace saved(const std::filesystem::path& dir, std::string name, alloc_problem p) {
    offset_csv csv;
    for (std::size_t i = 0; i < p.items.size(); ++i) csv.ids.push_back(std::to_string(i));
    csv.problem = p;
    const auto path = dir / (name + ".csv");
    write_offset_csv(path, csv, std::vector<std::uint64_t>(p.items.size(), 0));
    return {std::move(name), std::move(p), path.string()};
}

/// `src` resampled to `n` buffers (see the header).
alloc_problem resampled(const alloc_problem& src, std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const double scale = static_cast<double>(n) / static_cast<double>(src.items.size());
    std::uint64_t horizon = 0;
    for (const auto& it : src.items) horizon = std::max(horizon, it.end);
    const auto end = static_cast<std::uint64_t>(static_cast<double>(horizon) * scale) + 1;
    std::uniform_int_distribution<std::size_t> pick(0, src.items.size() - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0), jitter(0.8, 1.25);
    alloc_problem p;
    p.alignment = src.alignment;
    for (std::size_t k = 0; k < n; ++k) {
        const auto& it = src.items[pick(rng)];
        const auto begin = static_cast<std::uint64_t>((static_cast<double>(it.begin) + unit(rng)) * scale);
        const double length = static_cast<double>(it.end - it.begin) * scale * jitter(rng);
        const auto stop = std::min(end, begin + std::max<std::uint64_t>(1, static_cast<std::uint64_t>(length)));
        p.items.push_back({it.size, std::min(begin, end - 1), stop});
    }
    return p;
}

/// The buffers of the zoo decoder `preset` (1 x 4096, bf16) under policy `policy`'s schedule.
alloc_problem llm_buffers(const std::string& preset, const std::string& policy) {
    zoo_options o;
    o.preset = preset;
    o.batch = 1;
    o.seq = 4096;
    const graph g = zoo_graph("llama", o);
    const remat_context<graph> ctx(g);
    const auto s = updates_after_their_readers(g, ctx.schedule_of(policy_choice(ctx, parse_recompute_policy(policy))));
    std::vector<std::size_t> block_of;
    return allocation_problem(compute_liveness(g, s), graph::size_type{256}, block_of);
}

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
    std::vector<std::string> peer_allocators{"greedy_by_size", "greedy_by_all", "omni"};
    std::size_t random_n = 28000, seeds = 2;
    bool llm = true, minimalloc = true;
    std::string keep; // where the generated traces stay (default: a temporary folder, removed)
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
            else if (a == "--random" && has_value) random_n = std::stoul(argv[++i]);
            else if (a == "--seeds" && has_value) seeds = std::stoul(argv[++i]);
            else if (a == "--no-llm") llm = false;
            else if (a == "--no-minimalloc") minimalloc = false;
            else if (a == "--keep" && has_value) keep = argv[++i];
            else throw std::invalid_argument(a);
        }
    } catch (const std::exception&) {
        std::fprintf(stderr,
                     "usage: %s [--time-limit S] [--python PY] [--no-peer] [--traces a.csv,b.csv] "
                     "[--peer-allocators x,y] [--random N] [--seeds K] [--no-llm] [--no-minimalloc] [--keep DIR]\n",
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
    // The run's traces: the files, their resamplings, the LLM graphs' buffers.
    const auto dir = keep.empty()
                         ? std::filesystem::temp_directory_path() / ("memplan_alloc_large_" + std::to_string(::getpid()))
                         : std::filesystem::path(keep);
    std::filesystem::create_directories(dir);
    std::vector<trace> all;
    for (const auto& path : traces)
        all.push_back({std::filesystem::path(path).stem().string(), read_offset_csv(path).problem, path});
    const std::size_t files = all.size();
    for (std::size_t f = 0; f < files && random_n > 0; ++f)
        for (std::uint64_t seed = 1; seed <= seeds; ++seed)
            all.push_back(saved(dir, all[f].name + "~" + std::to_string(random_n / 1000) + "k-s" + std::to_string(seed),
                                resampled(all[f].problem, random_n, seed)));
    if (llm)
        for (const char* preset : {"llama3-8b", "llama3-70b"})
            for (const char* policy : {"none", "full"})
                all.push_back(saved(dir, std::string(preset) + "-" + policy, llm_buffers(preset, policy)));

    struct verdict {
        std::string trace;
        std::uint64_t ours = 0, peer = 0; // auto's height; the peers' lowest (0: none ran)
        std::string peer_name;
    };
    std::vector<verdict> verdicts;
    std::string joined;
    for (const auto& tr : all) {
        const auto& p = tr.problem;
        const auto& path = tr.csv;
        const auto lb = lower_bound(p);
        std::vector<row> rows;
        rows.push_back(run_memplan(greedy_by_size{}, p, "greedy_by_size"));
        rows.push_back(run_memplan(greedy_by_size_begin{}, p, "greedy_by_size_begin"));
        rows.push_back(run_memplan(best_heuristic{}, p, "best_heuristic"));
        auto_allocator a; // as `memplan alloc` runs it: to the bound or the time limit
        a.time_limit = time_limit;
        a.gap = 0;
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
        const std::string& name = tr.name;
        verdict v{name, rows[3].height, 0, ""};
        for (const auto& r : rows)
            if (r.note == "peer" && r.height && (v.peer == 0 || r.height < v.peer)) {
                v.peer = r.height;
                v.peer_name = r.allocator;
            }
        verdicts.push_back(v);
        for (const auto& r : rows) {
            char ratio[32] = "-";
            if (r.height) std::snprintf(ratio, sizeof ratio, "%.6f", static_cast<double>(r.height) / static_cast<double>(lb));
            std::printf("| %s | %zu | %.3f GiB | %s | %s | %.2f | %s |\n", name.c_str(), p.items.size(),
                        static_cast<double>(lb) / (1u << 30), r.allocator.c_str(), ratio, r.seconds, r.note.c_str());
        }
        std::fflush(stdout);
    }

    if (keep.empty()) std::filesystem::remove_all(dir);
    if (peer) {
        // The claim checked in bytes, not in rounded ratios.
        std::printf("\n## auto against the peers' lowest, in bytes\n\n"
                    "| trace | auto | peers' lowest | auto - peer | |\n|---|---:|---:|---:|---|\n");
        std::size_t lower = 0, equal = 0, higher = 0;
        for (const auto& v : verdicts) {
            if (v.peer == 0) {
                std::printf("| %s | %llu | - | - | no peer result |\n", v.trace.c_str(),
                            static_cast<unsigned long long>(v.ours));
                continue;
            }
            const auto diff = static_cast<long long>(v.ours) - static_cast<long long>(v.peer);
            const char* word = diff < 0 ? "lower" : diff == 0 ? "equal" : "HIGHER";
            (diff < 0 ? lower : diff == 0 ? equal : higher) += 1;
            std::printf("| %s | %llu | %llu (%s) | %+lld | %s |\n", v.trace.c_str(),
                        static_cast<unsigned long long>(v.ours), static_cast<unsigned long long>(v.peer),
                        v.peer_name.c_str(), diff, word);
        }
        std::printf("\nauto lower on %zu traces, equal on %zu, higher on %zu\n", lower, equal, higher);
    }
    if (!minimalloc) return 0;
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
