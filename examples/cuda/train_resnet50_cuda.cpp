// ResNet-50 (zoo/resnet.hpp) at MONeT's batch 184 on 224x224 images, trained
// on the GPU with SGD + momentum: store-all by default, `--budget 33.3%` for
// one third of the store-all arena (the remat planner of --remat, "auto" by
// default; when it cannot reach the budget it says so and runs the smallest
// budget it reaches). Same options and last line as the other train_*
// examples; default 5 steps.
// Synthetic data: two fixed batches of uniform images and labels, alternating.
#include "cuda_common.hpp"

#include <memplan/zoo/resnet.hpp>

#include <memory>

int main(int argc, char** argv) {
    using namespace memplan;
    constexpr std::uint64_t batch = 184;
    examples::model m{zoo::resnet(50, batch), {}};
    // Generated once: 27.7 M floats per batch are too slow to draw every step.
    auto batches = std::make_shared<std::vector<examples::batch_data>>();
    m.batch = [batches](std::uint64_t step) {
        if (batches->empty())
            for (std::uint64_t b = 0; b < 2; ++b) {
                engine::rng r(5000 + b);
                std::vector<float> x(batch * 3 * 224 * 224);
                for (auto& v : x) v = r.uniform(-1.0f, 1.0f);
                std::vector<std::int64_t> y(batch);
                for (auto& v : y) v = static_cast<std::int64_t>(r.below(1000));
                batches->push_back({{"x", examples::detail::bytes_of(x)}, {"labels", examples::detail::bytes_of(y)}});
            }
        return (*batches)[step % 2];
    };
    return examples::run_cuda_example(m, optimizer::sgd_momentum, argc, argv, 5);
}
