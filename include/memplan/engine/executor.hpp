// Runs a plan of a network's training graph on a backend.
//
// The executor reserves ONE arena of `plan.arena_bytes` and binds every buffer
// of the plan to base + offset (reserve, then bind: ggml-alloc; llm.c's
// malloc_and_point_activations written by hand). Parameters and optimizer
// state are persistent buffers of the same arena, initialised from a fixed
// seed. A step of training runs the plan's steps in order: recomputed forward
// steps write their outputs again, each step's variant decides what its kernel
// reads, and the executor frees nothing. The `naive` mode runs the default
// schedule with one allocation per tensor and no in-place reuse (the baseline
// footprint); the `poison` mode fills every buffer with NaN after its last
// step, so a plan that frees too early shows as NaN in the results.
#pragma once

#include <memplan/alloc/no_reuse.hpp>
#include <memplan/core/error.hpp>
#include <memplan/engine/backend.hpp>
#include <memplan/engine/program.hpp>
#include <memplan/nn/network.hpp>
#include <memplan/nn/training.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memplan::engine {

struct executor_options {
    bool poison = false;     ///< fill buffers with NaN after their last step
    std::uint64_t seed = 42; ///< parameter initialisation
    optimizer_config opt{};
};

/// Deterministic 64-bit generator (splitmix64): the same values on every
/// platform, unlike the standard distributions.
class rng {
public:
    explicit rng(std::uint64_t seed) : s_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    /// Uniform in [lo, hi).
    float uniform(float lo, float hi) noexcept {
        const double u = double(next() >> 11) * 0x1.0p-53;
        return lo + static_cast<float>(u * double(hi - lo));
    }
    /// Uniform integer in [0, n).
    std::uint64_t below(std::uint64_t n) noexcept { return n ? next() % n : 0; }

private:
    std::uint64_t s_;
};

/// Initial values of parameter `p` of a network: gamma and running variances
/// 1, biases, betas and running means 0, other weights uniform in
/// +-1/sqrt(fan_in) (PyTorch's default bound for linear and conv layers).
inline std::vector<float> initial_values(const nn::parameter& p, rng& r) {
    const auto n = static_cast<std::size_t>(p.shape.numel());
    switch (p.role) {
    case nn::param_role::gamma:
    case nn::param_role::running_var: return std::vector<float>(n, 1.0f);
    case nn::param_role::bias:
    case nn::param_role::beta:
    case nn::param_role::running_mean: return std::vector<float>(n, 0.0f);
    case nn::param_role::weight: break;
    }
    std::uint64_t fan_in = 1;
    for (std::size_t a = 1; a < p.shape.rank(); ++a) fan_in *= p.shape[a];
    const float bound = p.shape.rank() >= 2 ? 1.0f / std::sqrt(float(fan_in)) : 0.1f;
    std::vector<float> v(n);
    for (auto& x : v) x = r.uniform(-bound, bound);
    return v;
}

/// Where buffers live: one arena (planned runs) or one allocation each (naive).
enum class memory_mode : std::uint8_t { arena, per_tensor };

template <BackendLike Backend>
class executor {
public:
    /// Binds plan `p` of graph `g` (from `training_graph(net, opt, prog)`).
    /// Reserves one arena of `p.arena_bytes`. Throws memplan::error when the
    /// plan does not fit the graph (an unknown op, a step output without a
    /// buffer) or the program does not match the graph.
    executor(const nn::network& net, const graph& g, const training_program& prog, plan p, Backend backend = {},
             executor_options o = {})
        : executor(net, g, prog, std::move(p), std::move(backend), o, memory_mode::arena) {}

    /// The naive baseline: the default schedule (no recomputation, default
    /// variants), no in-place reuse, one allocation per tensor.
    static executor naive(const nn::network& net, const graph& g, const training_program& prog, Backend backend = {},
                          executor_options o = {}) {
        plan_options po;
        po.liveness.use_inplace = false;
        auto made = make_plan(g, default_schedule(g), no_reuse{}, po);
        return executor(net, g, prog, std::move(made.plan), std::move(backend), o, memory_mode::per_tensor);
    }

    executor(const executor&) = delete;
    executor& operator=(const executor&) = delete;
    executor(executor&& o) noexcept { *this = std::move(o); }
    executor& operator=(executor&& o) noexcept {
        if (this != &o) {
            release();
            net_ = o.net_;
            g_ = o.g_;
            prog_ = o.prog_;
            plan_ = std::move(o.plan_);
            backend_ = std::move(o.backend_);
            opt_ = o.opt_;
            mode_ = o.mode_;
            lowered_ = std::move(o.lowered_);
            node_inputs_ = std::move(o.node_inputs_);
            arena_ = std::exchange(o.arena_, nullptr);
            arena_bytes_ = std::exchange(o.arena_bytes_, 0);
            ptr_ = std::move(o.ptr_);
            steps_ = std::move(o.steps_);
            inputs_ = std::move(o.inputs_);
            final_ = std::move(o.final_);
            iteration_ = o.iteration_;
        }
        return *this;
    }
    ~executor() { release(); }

    /// Data fed to graph input `name` (images, labels, token ids) at the start
    /// of every step, as raw host bytes of the tensor's size. Throws when the
    /// name is not a graph input or the size differs.
    void set_input(std::string_view name, std::span<const std::byte> bytes) {
        const auto t = g_->find_tensor(name);
        if (!t) throw error("engine", "set_input: graph '" + g_->name() + "' has no tensor '" + std::string(name) + "'");
        for (auto& in : inputs_)
            if (in.tensor == *t) {
                if (bytes.size() != g_->tensor(*t).bytes)
                    throw error("engine", "set_input: tensor '" + std::string(name) + "' has " +
                                              std::to_string(g_->tensor(*t).bytes) + " bytes, got " +
                                              std::to_string(bytes.size()));
                in.host.assign(bytes.begin(), bytes.end());
                return;
            }
        throw error("engine", "set_input: tensor '" + std::string(name) + "' is not a graph input");
    }
    template <class T>
    void set_input(std::string_view name, const std::vector<T>& values) {
        set_input(name, std::as_bytes(std::span<const T>(values)));
    }

    /// Runs one training step (every step of the plan; with `update` false,
    /// all but the optimizer updates) and returns the loss.
    float step(bool update = true) {
        for (const auto& in : inputs_) {
            if (in.host.empty())
                throw error("engine", "input '" + g_->tensor(in.tensor).name + "' was not set before the step");
            backend_.upload(ptr_[in.buffer], in.host.data(), in.host.size());
        }
        ++iteration_;
        std::vector<std::pair<nn::slot, tensor_ref>> slots;
        for (std::size_t i = 0; i < steps_.size(); ++i) {
            const auto& s = steps_[i];
            const auto& op = g_->op(plan_.steps[i].op);
            if (!update && op.phase == phase::update) continue;
            kernel_call c;
            c.kind = s.origin->kind;
            c.inputs = s.inputs;
            c.outputs = s.outputs;
            c.workspace = s.workspace == none ? nullptr : ptr_[s.workspace];
            c.workspace_bytes = s.workspace == none ? 0 : plan_.buffers[s.workspace].bytes;
            c.recompute = s.recompute;
            c.iteration = iteration_;
            c.opt = &opt_.opt;
            c.variant = s.variant;
            if (c.kind == op_origin_kind::layer) {
                const auto& o = *s.origin;
                c.node = &net_->nodes()[o.node];
                const auto& lo = lowered_[o.node];
                c.spec = &(o.backward ? lo.backward : lo.forward)[o.spec];
                slots.clear();
                for (const auto& [slot, t] : o.slots) slots.push_back({slot, ref_of(s, t)});
                c.slots = slots;
                c.node_inputs = node_inputs_[o.node];
                c.node_output = &net_->info(c.node->output);
            }
            backend_.run(c);
            if (opt_.poison)
                for (auto b : s.poison) backend_.poison(ptr_[b], plan_.buffers[b].bytes);
        }
        backend_.synchronize();
        float loss = 0;
        const auto loss_tensor = g_->outputs().at(0);
        backend_.download(reinterpret_cast<std::byte*>(&loss), ptr_[final_[loss_tensor]], sizeof(float));
        return loss;
    }

    /// The current values of tensor `name` (its last materialisation: for a
    /// parameter, its value after the last update), as floats. Throws when the
    /// tensor is unknown, was never bound, or is not floating.
    std::vector<float> read(std::string_view name) const {
        const auto t = g_->find_tensor(name);
        if (!t) throw error("engine", "read: graph '" + g_->name() + "' has no tensor '" + std::string(name) + "'");
        if (final_[*t] == none) throw error("engine", "read: tensor '" + std::string(name) + "' has no buffer");
        const auto& info = prog_->tensors.at(*t);
        if (info.elem != nn::element::floating && info.elem != nn::element::f32)
            throw error("engine", "read: tensor '" + std::string(name) + "' is not floating");
        std::vector<float> v(static_cast<std::size_t>(info.numel()));
        backend_.download(reinterpret_cast<std::byte*>(v.data()), ptr_[final_[*t]], v.size() * sizeof(float));
        return v;
    }

    /// Overwrites a persistent tensor (a parameter) with `values`.
    void write(std::string_view name, std::span<const float> values) {
        const auto t = g_->find_tensor(name);
        if (!t || final_[*t] == none) throw error("engine", "write: no bound tensor '" + std::string(name) + "'");
        if (values.size() * sizeof(float) != g_->tensor(*t).bytes)
            throw error("engine", "write: tensor '" + std::string(name) + "' size differs");
        backend_.upload(ptr_[final_[*t]], reinterpret_cast<const std::byte*>(values.data()), g_->tensor(*t).bytes);
    }

    /// Bytes reserved from the backend: the arena (`plan.arena_bytes`), or in
    /// naive mode the sum of the per-tensor allocations.
    std::uint64_t reserved_bytes() const noexcept { return arena_bytes_; }
    const memplan::plan& plan() const noexcept { return plan_; }
    Backend& backend() noexcept { return backend_; }
    memory_mode mode() const noexcept { return mode_; }

private:
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    struct bound_step {
        const op_origin* origin = nullptr;
        std::vector<tensor_ref> inputs, outputs;
        std::vector<graph::id_type> input_ids, output_ids;
        std::size_t workspace = none;
        bool recompute = false;
        nn::impl_kind variant = nn::impl_kind::none;
        std::vector<std::size_t> poison;
    };
    struct fed_input {
        graph::id_type tensor;
        std::size_t buffer;
        std::vector<std::byte> host;
    };

    executor(const nn::network& net, const graph& g, const training_program& prog, memplan::plan p, Backend backend,
             executor_options o, memory_mode mode)
        : net_(&net), g_(&g), prog_(&prog), plan_(std::move(p)), backend_(std::move(backend)), opt_(o), mode_(mode) {
        if (prog.ops.size() != g.num_ops() || prog.tensors.size() != g.num_tensors())
            throw error("engine", "the training program does not match graph '" + g.name() + "' (" +
                                      std::to_string(prog.ops.size()) + " ops described, " +
                                      std::to_string(g.num_ops()) + " in the graph)");
        for (const auto& n : net.nodes()) {
            std::vector<nn::tensor_info> in;
            for (auto v : n.inputs) in.push_back(net.info(v));
            lowered_.push_back(nn::lower(n.layer, {in, net.info(n.output)}));
            node_inputs_.push_back(std::move(in));
        }
        bind();
        build_steps();
        init_persistent();
    }

    void release() noexcept {
        if (mode_ == memory_mode::arena) {
            if (arena_) backend_.deallocate(arena_, arena_bytes_);
        } else {
            for (std::size_t b = 0; b < ptr_.size(); ++b)
                if (ptr_[b]) backend_.deallocate(ptr_[b], plan_.buffers[b].bytes);
        }
        arena_ = nullptr;
        ptr_.clear();
    }

    void bind() {
        ptr_.assign(plan_.buffers.size(), nullptr);
        if (mode_ == memory_mode::arena) {
            for (const auto& b : plan_.buffers)
                if (b.bytes > 0 && b.offset + b.bytes > plan_.arena_bytes)
                    throw error("engine", "plan buffer at offset " + std::to_string(b.offset) +
                                              " ends beyond the arena of " + std::to_string(plan_.arena_bytes) +
                                              " bytes");
            arena_bytes_ = plan_.arena_bytes;
            arena_ = backend_.allocate(arena_bytes_);
            for (std::size_t b = 0; b < plan_.buffers.size(); ++b) ptr_[b] = arena_ + plan_.buffers[b].offset;
        } else {
            arena_bytes_ = 0;
            for (std::size_t b = 0; b < plan_.buffers.size(); ++b) {
                ptr_[b] = backend_.allocate(plan_.buffers[b].bytes);
                arena_bytes_ += plan_.buffers[b].bytes;
            }
        }
    }

    tensor_ref ref_of(const bound_step& s, graph::id_type t) const {
        if (t == graph::npos) return {};
        for (std::size_t k = 0; k < s.output_ids.size(); ++k)
            if (s.output_ids[k] == t) return s.outputs[k];
        for (std::size_t k = 0; k < s.input_ids.size(); ++k)
            if (s.input_ids[k] == t) return s.inputs[k];
        return {};
    }

    // Replays the plan's liveness reading: which buffer holds each tensor at
    // each step, which buffers die after each step.
    void build_steps() {
        const auto& g = *g_;
        std::vector<char> produced(g.num_tensors(), 0);
        for (const auto& o : g.ops())
            for (auto t : o.outputs) produced[t] = 1;
        std::vector<std::size_t> current(g.num_tensors(), none);
        std::vector<std::vector<std::size_t>> born(plan_.steps.size());
        std::vector<std::size_t> workspace(plan_.steps.size(), none);
        for (std::size_t b = 0; b < plan_.buffers.size(); ++b) {
            const auto& x = plan_.buffers[b];
            if (x.is_workspace()) {
                if (x.step >= plan_.steps.size()) throw error("engine", "a workspace buffer names a missing step");
                workspace[x.step] = b;
            } else if (!produced[x.tensor]) {
                current[x.tensor] = b;
                if (!g.tensor(x.tensor).persistent) inputs_.push_back({x.tensor, b, {}});
            } else {
                if (x.first >= plan_.steps.size()) throw error("engine", "a buffer starts after the last step");
                born[x.first].push_back(b);
            }
        }
        std::vector<char> ran(g.num_ops(), 0);
        // An update overwrites its persistent inputs in place: no other op
        // may read them after it (the graph format cannot say so; the engine must).
        std::vector<std::size_t> updated_by(g.num_tensors(), none);
        steps_.resize(plan_.steps.size());
        for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
            const auto& st = plan_.steps[i];
            if (st.op >= g.num_ops()) throw error("engine", "plan step " + std::to_string(i) + " names no op");
            const auto& op = g.op(st.op);
            auto& s = steps_[i];
            s.origin = &prog_->ops[st.op];
            s.recompute = ran[st.op] != 0;
            ran[st.op] = 1;
            s.workspace = workspace[i];
            if (st.has_variant()) s.variant = resolve_variant(i, st.variant, op, *s.origin);
            if (g.workspace_of(st.op, st.variant) > 0 && s.workspace == none)
                throw error("engine", "plan step " + std::to_string(i) + " (op '" + op.name + "') has no workspace buffer");
            const auto& reads = g.reads_of(st.op, st.variant);
            for (auto t : reads)
                if (updated_by[t] != none && op.phase != phase::update)
                    throw error("engine", "plan step " + std::to_string(i) + " (op '" + op.name + "') reads '" +
                                              g.tensor(t).name + "' after step " + std::to_string(updated_by[t]) +
                                              " (op '" + g.op(plan_.steps[updated_by[t]].op).name +
                                              "') updated it in place");
            if (op.phase == phase::update)
                for (auto t : op.inputs)
                    if (g.tensor(t).persistent) updated_by[t] = i;
            for (auto t : op.inputs) {
                s.input_ids.push_back(t);
                const bool read = std::find(reads.begin(), reads.end(), t) != reads.end();
                if (read && current[t] == none)
                    throw error("engine", "plan step " + std::to_string(i) + " (op '" + op.name + "') reads tensor '" +
                                              g.tensor(t).name + "' which has no buffer");
                s.inputs.push_back(read ? tensor_ref{ptr_[current[t]], &prog_->tensors[t]} : tensor_ref{});
            }
            for (auto t : op.outputs) {
                std::size_t found = none;
                for (auto b : born[i])
                    if (plan_.buffers[b].tensor == t) found = b;
                if (found == none)
                    throw error("engine", "plan step " + std::to_string(i) + " (op '" + op.name + "') output '" +
                                              g.tensor(t).name + "' has no buffer starting there");
                current[t] = found;
                s.output_ids.push_back(t);
                s.outputs.push_back({ptr_[found], &prog_->tensors[t]});
            }
        }
        final_ = current;
        // Poison lists: a buffer whose last step is i, unless its bytes are
        // still in use after i (an in-place output took it over).
        if (!opt_.poison) return;
        const std::size_t last = plan_.steps.size() - 1;
        for (std::size_t b = 0; b < plan_.buffers.size(); ++b) {
            const auto& x = plan_.buffers[b];
            if (x.bytes == 0 || x.last >= last) continue;
            bool shared = false;
            for (const auto& y : plan_.buffers)
                if (&y != &x && y.bytes > 0 && y.first <= x.last && y.last > x.last &&
                    (mode_ == memory_mode::arena && y.offset < x.offset + x.bytes && x.offset < y.offset + y.bytes))
                    shared = true;
            if (!shared) steps_[x.last].poison.push_back(b);
        }
    }

    // The graph names a step's variant; kernels switch on its enum. Resolved
    // once here: a name no layer implements, or one the op's layer does not
    // offer, is an error naming the op and the variant.
    nn::impl_kind resolve_variant(std::size_t i, graph::id_type v, const memplan::op& op, const op_origin& origin) const {
        const std::string where = "plan step " + std::to_string(i) + " (op '" + op.name + "')";
        if (v >= op.variants.size())
            throw error("engine", where + " runs variant " + std::to_string(v) + " of " +
                                      std::to_string(op.variants.size()));
        const auto& name = op.variants[v].name;
        const auto kind = nn::parse_impl_kind(name);
        if (!kind) throw error("engine", where + " has variant '" + name + "', which no backend implements");
        if (origin.kind == op_origin_kind::layer) {
            const auto& lo = lowered_[origin.node];
            const auto& spec = (origin.backward ? lo.backward : lo.forward)[origin.spec];
            if (!spec.offers(*kind))
                throw error("engine", where + " has variant '" + name + "', which its layer '" +
                                          net_->nodes()[origin.node].name + "' (" +
                                          std::string(nn::kind_of(net_->nodes()[origin.node].layer)) +
                                          ") does not offer");
        }
        return *kind;
    }

    void init_persistent() {
        rng r(opt_.seed);
        std::vector<char> is_param(g_->num_tensors(), 0);
        for (const auto& p : net_->parameters()) {
            const auto values = initial_values(p, r);
            const auto t = g_->find_tensor(p.name);
            if (!t || final_[*t] == none) continue;
            is_param[*t] = 1;
            backend_.upload(ptr_[final_[*t]], reinterpret_cast<const std::byte*>(values.data()),
                            values.size() * sizeof(float));
        }
        // Optimizer state starts at zero.
        for (std::size_t t = 0; t < g_->num_tensors(); ++t)
            if (g_->tensor(static_cast<graph::id_type>(t)).persistent && !is_param[t] && final_[t] != none) {
                std::vector<std::byte> zero(g_->tensor(static_cast<graph::id_type>(t)).bytes, std::byte{0});
                backend_.upload(ptr_[final_[t]], zero.data(), zero.size());
            }
    }

    const nn::network* net_ = nullptr;
    const graph* g_ = nullptr;
    const training_program* prog_ = nullptr;
    memplan::plan plan_;
    mutable Backend backend_{}; // read() downloads through it
    executor_options opt_{};
    memory_mode mode_ = memory_mode::arena;
    std::vector<nn::layer_ops> lowered_;
    std::vector<std::vector<nn::tensor_info>> node_inputs_;
    std::byte* arena_ = nullptr;
    std::uint64_t arena_bytes_ = 0;
    std::vector<std::byte*> ptr_;
    std::vector<bound_step> steps_;
    std::vector<fed_input> inputs_;
    std::vector<std::size_t> final_;
    std::uint64_t iteration_ = 0;
};

} // namespace memplan::engine
