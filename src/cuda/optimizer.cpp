// The CUDA kernels of the training graph's own ops: gradient accumulation
// and the optimizer updates (SGD, SGD with momentum, Adam, AdamW).
#include "common.hpp"

#include <cmath>

namespace memplan::engine::cuda::detail {

void run_grad_acc(context& x, const kernel_call& c) {
    if (c.inputs.size() != 2 || c.outputs.size() != 1 || !c.inputs[0] || !c.inputs[1] || !c.outputs[0])
        fail(c, "a gradient accumulation takes two bound inputs and one output");
    kernels::add(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), fp(c.outputs[0]), count(c.outputs[0]));
    launched(c);
}

void run_update(context& x, const kernel_call& c) {
    if (c.inputs.size() < 2 || !c.opt) fail(c, "an update takes the parameter, its gradient and its state");
    const i64 n = count(c.inputs[0]);
    const auto& o = *c.opt;
    switch (o.kind) {
    case optimizer::sgd: kernels::sgd(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), n, o.lr); break;
    case optimizer::sgd_momentum:
        if (c.inputs.size() < 3) fail(c, "SGD with momentum needs a momentum buffer");
        kernels::sgd_momentum(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), fp(c.inputs[2]), n, o.lr, o.momentum);
        break;
    case optimizer::adam:
    case optimizer::adamw: {
        if (c.inputs.size() != 4) fail(c, "Adam needs its two moment buffers (and this engine keeps no master copy)");
        if (o.kind == optimizer::adamw) {
            const float keep = 1.0f - o.lr * o.weight_decay;
            MEMPLAN_CUDA_CHECK(cublasSscal(x.blas, static_cast<int>(n), &keep, fp(c.inputs[0]), 1));
        }
        const double t = double(c.iteration);
        kernels::adam(x.stream, fp(c.inputs[0]), fp(c.inputs[1]), fp(c.inputs[2]), fp(c.inputs[3]), n, o.lr, o.beta1,
                      o.beta2, o.eps, static_cast<float>(1.0 - std::pow(double(o.beta1), t)),
                      static_cast<float>(1.0 - std::pow(double(o.beta2), t)));
        break;
    }
    }
    launched(c);
}

} // namespace memplan::engine::cuda::detail
