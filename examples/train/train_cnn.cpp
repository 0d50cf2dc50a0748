// Trains the small cnn of models.hpp on synthetic data with a memplan plan
// (--budget P% of the store-all arena; recomputation when below 100%) or
// naively (--naive), and prints the loss, the footprints and the step time.
#include "common.hpp"

int main(int argc, char** argv) {
    return memplan::examples::run_example(memplan::examples::cnn(), memplan::optimizer::sgd_momentum, argc, argv, 200);
}
