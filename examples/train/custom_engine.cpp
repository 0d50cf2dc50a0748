// A user's own training loop on memplan, without memplan's layers or engine:
// build the graph of one step by hand (linear regression trained by SGD),
// ask for a plan, allocate ONE arena of plan.arena_bytes, and bind every
// tensor to base + offset of the buffer that holds it at each step. Exits 0
// when the arena run matches the same loop on separate std::vectors.
#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/check/validator.hpp>
#include <memplan/graph/graph.hpp>
#include <memplan/plan/make_plan.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <vector>

namespace {

constexpr std::size_t n = 64, d = 8;
constexpr float lr = 0.1f;

/// The step as a graph: pred = x w, err = pred - y, loss = mean(err^2) / 2,
/// grad = x^T err / n, w -= lr grad.
memplan::graph make_graph() {
    memplan::graph g("linreg");
    g.add_tensor("x", n * d * 4);
    g.add_tensor("y", n * 4);
    g.add_tensor("w", d * 4, true);
    g.add_tensor("pred", n * 4);
    g.add_tensor("err", n * 4);
    g.add_tensor("loss", 4);
    g.add_tensor("grad", d * 4);
    g.add_op("pred", {"x", "w"}, {"pred"});
    g.add_op("err", {"pred", "y"}, {"err"});
    g.add_op("loss", {"err"}, {"loss"});
    g.add_op("grad", {"x", "err"}, {"grad"}, 1.0, 0, memplan::phase::backward);
    g.add_op("update", {"w", "grad"}, {}, 1.0, 0, memplan::phase::update);
    g.add_output(*g.find_tensor("loss"));
    return g;
}

/// Runs op `name` on pointers to its tensors: the user's kernels.
void run_op(const std::string& name, float* x, float* y, float* w, float* pred, float* err, float* loss, float* grad) {
    if (name == "pred")
        for (std::size_t i = 0; i < n; ++i) {
            float s = 0;
            for (std::size_t k = 0; k < d; ++k) s += x[i * d + k] * w[k];
            pred[i] = s;
        }
    else if (name == "err")
        for (std::size_t i = 0; i < n; ++i) err[i] = pred[i] - y[i];
    else if (name == "loss") {
        float s = 0;
        for (std::size_t i = 0; i < n; ++i) s += err[i] * err[i];
        *loss = s / (2 * n);
    } else if (name == "grad")
        for (std::size_t k = 0; k < d; ++k) {
            float s = 0;
            for (std::size_t i = 0; i < n; ++i) s += x[i * d + k] * err[i];
            grad[k] = s / n;
        }
    else if (name == "update")
        for (std::size_t k = 0; k < d; ++k) w[k] -= lr * grad[k];
}

} // namespace

int main() {
    try {
        const auto g = make_graph();
        const auto made = memplan::make_plan(g, memplan::default_schedule(g), memplan::best_heuristic{});
        const auto& plan = made.plan;
        if (!memplan::check_plan(g, plan).ok()) {
            std::fprintf(stderr, "the plan is not valid\n");
            return 1;
        }
        // One arena; a tensor at step i lives in its latest buffer live at i.
        auto* arena = static_cast<std::byte*>(::operator new(plan.arena_bytes, std::align_val_t{256}));
        auto at = [&](const char* tensor, std::size_t step) -> float* {
            const auto t = *g.find_tensor(tensor);
            const memplan::buffer* best = nullptr;
            for (const auto& b : plan.buffers)
                if (b.tensor == t && b.first <= step && step <= b.last && (!best || b.first > best->first)) best = &b;
            return best ? reinterpret_cast<float*>(arena + best->offset) : nullptr;
        };
        // Data: y = x . (1, 2, ..., d) exactly, so the loss goes to zero.
        std::vector<float> x(n * d), y(n), w_ref(d, 0.0f);
        for (std::size_t i = 0; i < n * d; ++i) x[i] = std::sin(float(i) * 0.37f);
        for (std::size_t i = 0; i < n; ++i) {
            y[i] = 0;
            for (std::size_t k = 0; k < d; ++k) y[i] += x[i * d + k] * float(k + 1);
        }
        std::memset(at("w", 0), 0, d * 4);
        // The reference: separate vectors.
        std::vector<float> pred(n), err(n), grad(d);
        float loss_ref = 0, loss = 0;
        for (int it = 0; it < 200; ++it) {
            std::memcpy(at("x", 0), x.data(), n * d * 4);
            std::memcpy(at("y", 0), y.data(), n * 4);
            for (std::size_t i = 0; i < plan.steps.size(); ++i) {
                const auto& name = g.op(plan.steps[i].op).name;
                run_op(name, at("x", i), at("y", i), at("w", i), at("pred", i), at("err", i), at("loss", i),
                       at("grad", i));
                run_op(name, x.data(), y.data(), w_ref.data(), pred.data(), err.data(), &loss_ref, grad.data());
            }
            loss = *at("loss", plan.steps.size() - 1);
            if (it % 50 == 0) std::printf("iteration %3d loss %.6f\n", it, double(loss));
        }
        const bool same = std::memcmp(at("w", plan.steps.size() - 1), w_ref.data(), d * 4) == 0 && loss == loss_ref;
        std::printf("arena %llu bytes for %zu tensors (%llu bytes one by one); %s\n",
                    (unsigned long long)plan.arena_bytes, g.num_tensors(),
                    (unsigned long long)[&] {
                        std::uint64_t s = 0;
                        for (const auto& t : g.tensors()) s += t.bytes;
                        return s;
                    }(),
                    same ? "arena run equals the reference" : "MISMATCH");
        ::operator delete(arena, std::align_val_t{256});
        return same && loss < 1e-3f ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
