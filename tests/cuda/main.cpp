// The GPU tests' main: exits 77 (CTest: skipped) when there is no CUDA
// device, so a machine without a GPU builds and "passes" them honestly.
// Queries (--list-test-cases, --help, ...) answer without a device, so a
// driver can list the cases anywhere and then run them one per process
// (--first=K --last=K, or --test-case=NAME).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <memplan/engine/cuda/device.hpp>

#include <cstdio>
#include <string_view>

namespace {

/// doctest's options that print something and run no test (with or without the "dt-" prefix).
bool is_query(std::string_view arg) {
    if (arg.rfind("--dt-", 0) == 0) arg.remove_prefix(5);
    else if (arg.rfind("-dt-", 0) == 0) arg.remove_prefix(4);
    else if (arg.rfind("--", 0) == 0) arg.remove_prefix(2);
    else if (arg.rfind("-", 0) == 0) arg.remove_prefix(1);
    else return false;
    arg = arg.substr(0, arg.find('='));
    for (std::string_view q : {"help", "h", "?", "version", "v", "count", "c", "list-test-cases", "ltc",
                               "list-test-suites", "lts", "list-reporters", "lr"})
        if (arg == q) return true;
    return false;
}

} // namespace

int main(int argc, char** argv) {
    bool query = false;
    for (int i = 1; i < argc; ++i) query = query || is_query(argv[i]);
    if (!query) {
        if (memplan::engine::cuda::device_count() == 0) {
            std::printf("no CUDA device: GPU tests skipped\n");
            return 77;
        }
        const auto d = memplan::engine::cuda::describe_device(0);
        std::printf("CUDA device 0: %s (sm_%d%d, %llu bytes)\n", d.name.c_str(), d.sm_major, d.sm_minor,
                    (unsigned long long)d.total_bytes);
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
