// CPU kernels of the ops the training-graph derivation adds: gradient
// accumulation (a sum that may overwrite its first operand) and the optimizer
// updates, which write the parameter and its state in place: SGD, SGD with
// momentum (PyTorch's form v = mu v + g, w -= lr v), Adam (bias-corrected) and
// AdamW (Adam after PyTorch's decoupled decay w *= 1 - lr * weight_decay).
#pragma once

#include <memplan/engine/cpu/common.hpp>

#include <cmath>

namespace memplan::engine::cpu {

/// Runs "<x>.grad_acc<k>": out = acc + contribution.
inline void run_grad_acc(const kernel_call& c) {
    if (c.inputs.size() != 2 || c.outputs.size() != 1 || !c.inputs[0] || !c.inputs[1] || !c.outputs[0])
        fail(c, "a gradient accumulation takes two bound inputs and one output");
    const index n = count(c.outputs[0]);
    vector_map(fp(c.outputs[0]), n) = const_vector_map(fp(c.inputs[0]), n) + const_vector_map(fp(c.inputs[1]), n);
}

/// Runs "<param>.update" with the call's optimizer configuration.
inline void run_update(const kernel_call& c) {
    if (c.inputs.size() < 2 || !c.opt) fail(c, "an update takes the parameter, its gradient and its state");
    const index n = count(c.inputs[0]);
    vector_map w(fp(c.inputs[0]), n);
    const const_vector_map g(fp(c.inputs[1]), n);
    const auto& o = *c.opt;
    switch (o.kind) {
    case optimizer::sgd: w -= o.lr * g; break;
    case optimizer::sgd_momentum: {
        if (c.inputs.size() < 3) fail(c, "SGD with momentum needs a momentum buffer");
        vector_map v(fp(c.inputs[2]), n);
        v = o.momentum * v + g;
        w -= o.lr * v;
        break;
    }
    case optimizer::adam:
    case optimizer::adamw: {
        if (c.inputs.size() != 4) fail(c, "Adam needs its two moment buffers (and this engine keeps no master copy)");
        if (o.kind == optimizer::adamw) w *= 1.0f - o.lr * o.weight_decay;
        float* m = fp(c.inputs[2]);
        float* v = fp(c.inputs[3]);
        const double t = double(c.iteration);
        const auto c1 = static_cast<float>(1.0 - std::pow(double(o.beta1), t));
        const auto c2 = static_cast<float>(1.0 - std::pow(double(o.beta2), t));
        float* W = fp(c.inputs[0]);
        const float* G = fp(c.inputs[1]);
        for (index i = 0; i < n; ++i) {
            m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * G[i];
            v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * G[i] * G[i];
            W[i] -= o.lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + o.eps);
        }
        break;
    }
    }
}

} // namespace memplan::engine::cpu
