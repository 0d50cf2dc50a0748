// memplan::engine::cuda::measure (engine/cuda/measure.hpp): every op and
// variant of a training graph timed on the CUDA backend, one planned
// store-all step per variant index as engine/profile.hpp's profile_graph does
// on the CPU, each op between two CUDA events on the backend's stream. Each
// convolution variant's cuDNN algorithm is first sized by the backend's own
// workspace query (conv_choice.hpp: same descriptors, same math type) and
// timed alone in a workspace of exactly that size, so the planners get the
// workspace the backend will ask for and a variant too large for the device
// is recorded as such, not dropped.
#include "common.hpp"
#include "conv_choice.hpp"

#include <memplan/alloc/best_heuristic.hpp>
#include <memplan/engine/cuda/algorithms.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/engine/cuda/measure.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/engine/profile.hpp>
#include <memplan/nn/layer.hpp>
#include <memplan/plan/make_plan.hpp>
#include <memplan/schedule/schedule.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace memplan::engine::cuda {

namespace detail {

/// The profiler's way into a backend (a friend of it): the context's stream
/// for the events, its cuDNN handle and options for the algorithm runs.
struct profiler_access {
    static context& of(backend& b) { return b.ctx(); }
};

} // namespace detail

namespace {

using detail::cudnn_outcome;

/// Device memory owned by RAII.
class device_buffer {
public:
    explicit device_buffer(std::size_t n) { MEMPLAN_CUDA_CHECK(cudaMalloc(&p_, n ? n : 1)); }
    /// `n` bytes, or nullptr when the device has not that much free (the
    /// failed allocation is cleared, so the next call does not report it).
    static std::unique_ptr<device_buffer> try_allocate(std::size_t n) {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, n ? n : 1);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            return nullptr;
        }
        MEMPLAN_CUDA_CHECK(e);
        return std::unique_ptr<device_buffer>(new device_buffer(p));
    }
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;
    ~device_buffer() {
        if (p_) cudaFree(p_);
    }
    void* get() const noexcept { return p_; }
    float* floats() const noexcept { return static_cast<float*>(p_); }

private:
    explicit device_buffer(void* p) noexcept : p_(p) {}
    void* p_ = nullptr;
};

/// Two CUDA events (timing enabled) around work queued on a stream.
class event_pair {
public:
    event_pair() {
        MEMPLAN_CUDA_CHECK(cudaEventCreate(&start_));
        const cudaError_t e = cudaEventCreate(&stop_);
        if (e != cudaSuccess) {
            cudaEventDestroy(start_);
            MEMPLAN_CUDA_CHECK(e);
        }
    }
    event_pair(event_pair&& o) noexcept
        : start_(std::exchange(o.start_, nullptr)), stop_(std::exchange(o.stop_, nullptr)) {}
    event_pair(const event_pair&) = delete;
    event_pair& operator=(const event_pair&) = delete;
    event_pair& operator=(event_pair&&) = delete;
    ~event_pair() {
        if (stop_) cudaEventDestroy(stop_);
        if (start_) cudaEventDestroy(start_);
    }
    void begin(cudaStream_t s) { MEMPLAN_CUDA_CHECK(cudaEventRecord(start_, s)); }
    void end(cudaStream_t s) { MEMPLAN_CUDA_CHECK(cudaEventRecord(stop_, s)); }
    /// Milliseconds of GPU time between the two records; waits for the second.
    double ms() const {
        MEMPLAN_CUDA_CHECK(cudaEventSynchronize(stop_));
        float t = 0;
        MEMPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
        return static_cast<double>(t);
    }

private:
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
};

/// The CUDA backend with each op between two events on its stream. The
/// events measure the op's time on the GPU; host clocks around a
/// synchronised run would add the launch and synchronisation latency, and
/// the executor's uploads of the batch (before the first op) fall outside
/// every pair. The events are read after the step's synchronisation.
class event_timed_backend {
public:
    event_timed_backend() = default;
    explicit event_timed_backend(backend_options o) : inner_(o) {}

    std::byte* allocate(std::uint64_t n) { return inner_.allocate(n); }
    void deallocate(std::byte* p, std::uint64_t n) noexcept { inner_.deallocate(p, n); }
    void upload(std::byte* d, const std::byte* h, std::uint64_t n) { inner_.upload(d, h, n); }
    void download(std::byte* h, const std::byte* d, std::uint64_t n) { inner_.download(h, d, n); }
    void poison(std::byte* p, std::uint64_t n) { inner_.poison(p, n); }
    void synchronize() { inner_.synchronize(); }
    void run(const kernel_call& c) {
        const cudaStream_t s = detail::profiler_access::of(inner_).stream;
        if (next_ == events_.size()) events_.emplace_back();
        auto& e = events_[next_++];
        e.begin(s);
        inner_.run(c);
        e.end(s);
    }
    /// Each op's milliseconds since the last call, in the order they ran.
    std::vector<double> take_times() {
        std::vector<double> t;
        t.reserve(next_);
        for (std::size_t i = 0; i < next_; ++i) t.push_back(events_[i].ms());
        next_ = 0;
        return t;
    }

private:
    backend inner_; // first: destroyed last, after the events recorded on its stream
    std::vector<event_pair> events_;
    std::size_t next_ = 0;
};

static_assert(BackendLike<event_timed_backend>);

double median(const std::vector<double>& v) { return memplan::engine::detail::quantile(v, 0.5); }

/// Runs `once()` (one convolution pass, its cuDNN status) `warmup` times,
/// then `repeats` times each between two events on `s`: the median ms; none
/// when cuDNN refuses the algorithm at run time (a NOT_SUPPORTED-category
/// status: the backend would fall back). Another failed status throws
/// naming the op, the variant and `call_name`.
template <class Once>
std::optional<double> time_runs(cudaStream_t s, Once once, const measure_options& o, const std::string& where,
                                const char* call_name) {
    auto ran = [&] {
        const cudnnStatus_t st = once();
        if (detail::classify(st) == cudnn_outcome::failure)
            throw error("cuda", where + ": " + call_name + " failed: " + cudnnGetErrorString(st));
        return st == CUDNN_STATUS_SUCCESS;
    };
    for (int r = 0; r < o.warmup; ++r)
        if (!ran()) return std::nullopt;
    std::vector<event_pair> events(static_cast<std::size_t>(o.repeats));
    for (auto& e : events) {
        e.begin(s);
        if (!ran()) return std::nullopt;
        e.end(s);
    }
    std::vector<double> ms;
    for (const auto& e : events) ms.push_back(e.ms());
    return median(ms);
}

/// Measures the algorithm `algo` of one variant into `m`: its workspace from
/// `query(algo, bytes)` (the backend's question, conv_choice.hpp), then its
/// time from `call(algo, workspace, bytes)` in a workspace of exactly that
/// size. NOT_SUPPORTED (query or run): unsupported. A workspace the device
/// cannot hold: supported, its bytes recorded, not timed. Any other failure
/// throws naming the op and the variant.
template <class Algo, class Query, class Call>
void measure_algorithm(detail::context& x, variant_measurement& m, Algo algo, Query query, Call call,
                       const std::string& op, const char* query_name, const char* call_name,
                       const measure_options& o) {
    const std::string where = "measure: op '" + op + "', variant '" + m.name + "' (" + m.algorithm + ")";
    std::size_t bytes = 0;
    const cudnnStatus_t st = query(algo, bytes);
    switch (detail::classify(st)) {
    case cudnn_outcome::success: break;
    case cudnn_outcome::not_supported:
        m.supported = false;
        m.reason = std::string(query_name) + ": " + cudnnGetErrorString(st);
        return;
    case cudnn_outcome::failure:
        throw error("cuda", where + ": " + query_name + " failed: " + cudnnGetErrorString(st));
    }
    m.workspace_bytes = bytes;
    const auto ws = device_buffer::try_allocate(bytes);
    if (!ws) {
        std::size_t free = 0, total = 0;
        MEMPLAN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
        m.timed = false;
        m.reason = "needs " + std::to_string(bytes) + " bytes of workspace; " + std::to_string(free) +
                   " bytes of device memory were free while measuring";
        return;
    }
    const auto ms = time_runs(x.stream, [&] { return call(algo, ws->get(), bytes); }, o, where, call_name);
    if (!ms) {
        m.supported = false;
        m.workspace_bytes = 0;
        m.reason = std::string(call_name) + " refused the algorithm at run time";
        return;
    }
    m.ms = *ms;
}

/// Every variant of one pass of conv2d `l` (x -> y), each algorithm alone as
/// the backend runs the op (with the bias when the layer has one), on the
/// context's stream and cuDNN handle.
std::vector<variant_measurement> measure_conv(detail::context& x, const nn::conv2d& l, const nn::shape& xs,
                                              const nn::shape& ys, conv_pass pass,
                                              const std::vector<std::pair<std::string, nn::impl_kind>>& variants,
                                              const std::string& op, const measure_options& o) {
    detail::conv_setup d;
    const conv_geometry q = detail::geometry_of(l, xs, ys);
    detail::describe(d, q, x.opt.allow_tf32);
    auto floats = [](auto... e) { return static_cast<std::size_t>((e * ...)) * sizeof(float); };
    const std::size_t x_bytes = floats(q.n, q.c, q.h, q.w), y_bytes = floats(q.n, q.k, q.ho, q.wo),
                      w_bytes = floats(q.k, q.cg(), q.r, q.s), b_bytes = floats(q.k);
    // Zeros: the operands' values do not change an fp32 convolution's speed, and NaN garbage would be
    // no better. x and y double as dx and dy.
    device_buffer bx(x_bytes), by(y_bytes), bw(w_bytes), bb(b_bytes);
    MEMPLAN_CUDA_CHECK(cudaMemsetAsync(bx.get(), 0, x_bytes, x.stream));
    MEMPLAN_CUDA_CHECK(cudaMemsetAsync(by.get(), 0, y_bytes, x.stream));
    MEMPLAN_CUDA_CHECK(cudaMemsetAsync(bw.get(), 0, w_bytes, x.stream));
    MEMPLAN_CUDA_CHECK(cudaMemsetAsync(bb.get(), 0, b_bytes, x.stream));
    const float one = 1.0f, zero = 0.0f;
    std::vector<variant_measurement> out;
    for (const auto& [name, kind] : variants) {
        variant_measurement m;
        m.name = name;
        m.algorithm = std::string(cudnn_algorithm(kind, pass));
        if (pass == conv_pass::forward) {
            measure_algorithm(
                x, m, detail::fwd_algo(kind),
                [&](cudnnConvolutionFwdAlgo_t a, std::size_t& b) {
                    return cudnnGetConvolutionForwardWorkspaceSize(x.dnn, d.x, d.w, d.conv, d.y, a, &b);
                },
                [&](cudnnConvolutionFwdAlgo_t a, void* ws, std::size_t b) {
                    const cudnnStatus_t st = cudnnConvolutionForward(x.dnn, &one, d.x, bx.get(), d.w, bw.get(), d.conv,
                                                                     a, ws, b, &zero, d.y, by.get());
                    if (st == CUDNN_STATUS_SUCCESS && l.bias)
                        MEMPLAN_CUDA_CHECK(cudnnAddTensor(x.dnn, &one, d.bias, bb.get(), &one, d.y, by.get()));
                    return st;
                },
                op, "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward", o);
        } else if (pass == conv_pass::backward_data) {
            measure_algorithm(
                x, m, detail::bwd_data_algo(kind),
                [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t& b) {
                    return cudnnGetConvolutionBackwardDataWorkspaceSize(x.dnn, d.w, d.y, d.conv, d.x, a, &b);
                },
                [&](cudnnConvolutionBwdDataAlgo_t a, void* ws, std::size_t b) {
                    return cudnnConvolutionBackwardData(x.dnn, &one, d.w, bw.get(), d.y, by.get(), d.conv, a, ws, b,
                                                        &zero, d.x, bx.get());
                },
                op, "cudnnGetConvolutionBackwardDataWorkspaceSize", "cudnnConvolutionBackwardData", o);
        } else {
            measure_algorithm(
                x, m, detail::bwd_filter_algo(kind),
                [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t& b) {
                    return cudnnGetConvolutionBackwardFilterWorkspaceSize(x.dnn, d.x, d.y, d.conv, d.w, a, &b);
                },
                [&](cudnnConvolutionBwdFilterAlgo_t a, void* ws, std::size_t b) {
                    const cudnnStatus_t st = cudnnConvolutionBackwardFilter(x.dnn, &one, d.x, bx.get(), d.y, by.get(),
                                                                            d.conv, a, ws, b, &zero, d.w, bw.get());
                    if (st == CUDNN_STATUS_SUCCESS && l.bias)
                        MEMPLAN_CUDA_CHECK(
                            cudnnConvolutionBackwardBias(x.dnn, &one, d.y, by.get(), &zero, d.bias, bb.get()));
                    return st;
                },
                op, "cudnnGetConvolutionBackwardFilterWorkspaceSize", "cudnnConvolutionBackwardFilter", o);
        }
        out.push_back(std::move(m));
    }
    MEMPLAN_CUDA_CHECK(cudaStreamSynchronize(x.stream)); // before the buffers go
    return out;
}

/// The conv2d layer of graph op `i`, or null when the op is not a conv2d pass with variants.
const nn::conv2d* conv_of(const nn::network& net, const graph& g, const training_program& prog, graph::id_type i) {
    const auto& origin = prog.ops.at(i);
    if (origin.kind != op_origin_kind::layer || g.op(i).variants.empty()) return nullptr;
    return std::get_if<nn::conv2d>(&net.nodes()[origin.node].layer);
}

/// Part 1: each convolution variant's algorithm alone (per graph op; empty
/// for other ops), before any executor holds device memory, so that the
/// largest workspaces get their chance.
std::vector<std::vector<variant_measurement>> measure_convolutions(const nn::network& net, const graph& g,
                                                                   const training_program& prog,
                                                                   const backend_options& bo,
                                                                   const measure_options& o) {
    std::vector<std::vector<variant_measurement>> conv(g.num_ops());
    backend b(bo);
    auto& x = detail::profiler_access::of(b);
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        const nn::conv2d* l = conv_of(net, g, prog, i);
        if (!l) continue;
        const auto& op = g.op(i);
        std::vector<std::pair<std::string, nn::impl_kind>> variants;
        for (const auto& v : op.variants) {
            const auto kind = nn::parse_impl_kind(v.name);
            if (!kind)
                throw error("cuda", "measure: op '" + op.name + "' has variant '" + v.name +
                                        "', which no backend implements");
            variants.push_back({v.name, *kind});
        }
        const auto& origin = prog.ops[i];
        const auto& node = net.nodes()[origin.node];
        const nn::tensor_info& xi = net.info(node.inputs[0]);
        const nn::tensor_info& yi = net.info(node.output);
        const auto ops = nn::lower(node.layer, {std::span(&xi, 1), yi});
        const auto& spec = (origin.backward ? ops.backward : ops.forward).at(origin.spec);
        conv[i] = measure_conv(x, *l, xi.shape, yi.shape, pass_of(spec.pass), variants, op.name, o);
    }
    return conv;
}

} // namespace

profile_table measure(const nn::network& net, const graph& g, const training_program& prog, const measure_options& o) {
    if (device_count() == 0) throw error("cuda", "measure: no CUDA device");
    if (o.repeats < 1 || o.warmup < 0) throw error("cuda", "measure: repeats must be at least 1 and warmup at least 0");
    backend_options bo; // device 0; the math type the plan's backend will use
    bo.allow_tf32 = o.allow_tf32;
    // Convolution variants take their times from their runs alone; should a
    // step's convolution need more workspace than cuDNN's answer below, the
    // pass runs on rather than stop (its convolution times are not used).
    bo.shortfall = workspace_shortfall::fallback;

    profile_table table;
    table.source = describe_device(bo.device).name;
    const auto conv = measure_convolutions(net, g, prog, bo, o);

    // Part 2: one planned store-all step per variant index. Pass k runs each
    // op with variants on its k-th (its last when it has fewer), a
    // convolution on its default when the k-th cannot run or was not timed;
    // the plan holds cuDNN's workspaces, not the model's estimates.
    graph work = g;
    std::size_t passes = 1;
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        auto& op = work.op_at(i);
        passes = std::max(passes, op.variants.size());
        for (std::size_t k = 0; k < conv[i].size(); ++k)
            if (conv[i][k].supported) op.variants[k].workspace = conv[i][k].workspace_bytes;
    }
    executor_options eo;
    eo.opt.kind = o.opt;
    eo.poison = false;
    // samples[k][op]: op's times in pass k (ms)
    std::vector<std::vector<std::vector<double>>> samples(passes, std::vector<std::vector<double>>(g.num_ops()));
    for (std::size_t k = 0; k < passes; ++k) {
        schedule s;
        for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
            const auto nv = g.op(i).variants.size();
            if (nv == 0) {
                s.push_back({i, graph::npos});
                continue;
            }
            auto v = std::min(k, nv - 1);
            if (!conv[i].empty() && !(conv[i][v].supported && conv[i][v].timed)) v = 0;
            s.push_back({i, static_cast<graph::id_type>(v)});
        }
        auto made = make_plan(work, s, best_heuristic{});
        if (!has_solution(made.status))
            throw error("cuda", "measure: no store-all plan for pass " + std::to_string(k) + ": " + made.message);
        executor<event_timed_backend> ex(net, work, prog, std::move(made.plan), event_timed_backend(bo), eo);
        memplan::engine::detail::feed_inputs_or_zeros(ex, work, o.inputs);
        const auto& steps = ex.plan().steps;
        for (int r = 0; r < o.warmup + o.repeats; ++r) {
            ex.step();
            const auto t = ex.backend().take_times();
            if (r < o.warmup) continue;
            if (t.size() != steps.size())
                throw error("cuda", "measure: the backend ran " + std::to_string(t.size()) + " ops for " +
                                        std::to_string(steps.size()) + " steps");
            for (std::size_t j = 0; j < steps.size(); ++j) samples[k][steps[j].op].push_back(t[j]);
        }
    } // each pass's arena and context go before the next pass's

    // The table: an op without variants pools every pass's samples (it ran
    // the same kernel in each); variant k of a batch-norm or ReLU backward
    // takes pass k's; a convolution's variants their runs alone.
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        const auto& op = g.op(i);
        op_measurement m{op.name, 0.0, {}};
        if (op.variants.empty()) {
            std::vector<double> all;
            for (std::size_t k = 0; k < passes; ++k) all.insert(all.end(), samples[k][i].begin(), samples[k][i].end());
            m.ms = median(all);
        } else if (!conv[i].empty()) {
            m.variants = conv[i];
            const auto& first = m.variants.front();
            m.ms = first.supported && first.timed ? first.ms : median(samples[0][i]);
        } else {
            for (std::size_t k = 0; k < op.variants.size(); ++k) {
                variant_measurement v;
                v.name = op.variants[k].name;
                v.workspace_bytes = op.variants[k].workspace;
                v.ms = median(samples[k][i]);
                m.variants.push_back(std::move(v));
            }
            m.ms = m.variants.front().ms;
        }
        table.ops.push_back(std::move(m));
    }
    return table;
}

} // namespace memplan::engine::cuda
