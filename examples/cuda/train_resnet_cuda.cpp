// The CUDA twin of examples/train/train_resnet.cpp: the same network, data,
// options and last line, trained on the GPU (memplan::cuda).
#include "cuda_common.hpp"

int main(int argc, char** argv) {
    return memplan::examples::run_cuda_example(memplan::examples::resnet(), memplan::optimizer::sgd_momentum, argc, argv, 100);
}
