// The GPU tests' main: exits 77 (CTest: skipped) when there is no CUDA
// device, so a machine without a GPU builds and "passes" them honestly.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <memplan/engine/cuda/device.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    if (memplan::engine::cuda::device_count() == 0) {
        std::printf("no CUDA device: GPU tests skipped\n");
        return 77;
    }
    const auto d = memplan::engine::cuda::describe_device(0);
    std::printf("CUDA device 0: %s (sm_%d%d, %llu bytes)\n", d.name.c_str(), d.sm_major, d.sm_minor,
                (unsigned long long)d.total_bytes);
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
