// memplan::engine::cuda::measure: every op of a training graph timed on the
// CUDA backend (naive executor, each step synchronised before and after, the
// median over a few training steps), and each convolution variant's cuDNN
// algorithm measured by cuDNN's Find (time and workspace bytes).
#include "check.hpp"

#include <memplan/engine/cuda/algorithms.hpp>
#include <memplan/engine/cuda/backend.hpp>
#include <memplan/engine/cuda/device.hpp>
#include <memplan/engine/cuda/measure.hpp>
#include <memplan/engine/executor.hpp>
#include <memplan/engine/profile.hpp>
#include <memplan/nn/layer.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace memplan::engine::cuda {

namespace {

using i64 = std::int64_t;

/// The CUDA backend with every run timed on the host between two
/// synchronisations (engine/profile.hpp's wrapper; times in microseconds).
using timed_backend = memplan::engine::detail::timed_backend<backend>;

struct device_buffer {
    void* p = nullptr;
    explicit device_buffer(std::size_t n) { MEMPLAN_CUDA_CHECK(cudaMalloc(&p, n ? n : 1)); }
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;
    ~device_buffer() { cudaFree(p); }
};

/// Find results for one pass of one conv2d layer, per variant (graph name, implementation).
std::vector<variant_measurement> find_conv(cudnnHandle_t h, const nn::conv2d& l, const nn::shape& xs,
                                           const nn::shape& ys, conv_pass pass,
                                           const std::vector<std::pair<std::string, nn::impl_kind>>& variants) {
    auto i = [](std::uint64_t v) { return static_cast<int>(v); };
    detail::tensor_desc xd, yd;
    detail::filter_desc wd;
    detail::conv_desc cd;
    MEMPLAN_CUDA_CHECK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(xs[0]), i(xs[1]), i(xs[2]), i(xs[3])));
    MEMPLAN_CUDA_CHECK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(ys[0]), i(ys[1]), i(ys[2]), i(ys[3])));
    MEMPLAN_CUDA_CHECK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(ys[1]), i(xs[1] / l.groups),
                                                  i(l.kernel_h), i(l.kernel_w)));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolution2dDescriptor(cd, i(l.pad_h), i(l.pad_w), i(l.stride_h), i(l.stride_w),
                                                       i(l.dilation_h), i(l.dilation_w), CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolutionGroupCount(cd, i(l.groups)));
    MEMPLAN_CUDA_CHECK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    device_buffer x(xs.numel() * 4), y(ys.numel() * 4), w(ys[1] * (xs[1] / l.groups) * l.kernel_h * l.kernel_w * 4);
    std::size_t free = 0, total = 0;
    MEMPLAN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const std::size_t ws_bytes = std::min<std::size_t>(free / 4, std::size_t(2) << 30);
    device_buffer ws(ws_bytes);
    struct found {
        std::string algorithm;
        int algo;
        cudnnStatus_t status;
        float ms;
        std::size_t memory;
    };
    std::vector<found> results;
    int n = 0;
    // The backend sizes its workspace with cudnnGet*WorkspaceSize (src/cuda/backend.cpp, choose);
    // Find's perf.memory can be smaller, so a plan made from it alone would come up short.
    std::function<std::size_t(int)> query;
    auto sized = [](cudnnStatus_t st, std::size_t b) { return st == CUDNN_STATUS_SUCCESS ? b : std::size_t(0); };
    if (pass == conv_pass::forward) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        MEMPLAN_CUDA_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x.p, wd, w.p, cd, yd, y.p,
                                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, ws.p, ws_bytes));
        const char* names[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
        for (int k = 0; k < n; ++k)
            results.push_back({names[perf[k].algo], perf[k].algo, perf[k].status, perf[k].time, perf[k].memory});
        query = [&](int a) {
            std::size_t b = 0;
            return sized(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, cudnnConvolutionFwdAlgo_t(a), &b), b);
        };
    } else if (pass == conv_pass::backward_data) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        MEMPLAN_CUDA_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            h, wd, w.p, yd, y.p, cd, xd, x.p, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, ws.p, ws_bytes));
        const char* names[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
        for (int k = 0; k < n; ++k)
            results.push_back({names[perf[k].algo], perf[k].algo, perf[k].status, perf[k].time, perf[k].memory});
        query = [&](int a) {
            std::size_t b = 0;
            return sized(
                cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, cudnnConvolutionBwdDataAlgo_t(a), &b), b);
        };
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        MEMPLAN_CUDA_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            h, xd, x.p, yd, y.p, cd, wd, w.p, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf, ws.p, ws_bytes));
        const char* names[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
        for (int k = 0; k < n; ++k)
            results.push_back({names[perf[k].algo], perf[k].algo, perf[k].status, perf[k].time, perf[k].memory});
        query = [&](int a) {
            std::size_t b = 0;
            return sized(
                cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, cudnnConvolutionBwdFilterAlgo_t(a), &b),
                b);
        };
    }
    std::vector<variant_measurement> out;
    for (const auto& [name, kind] : variants) {
        variant_measurement m{name, std::string(cudnn_algorithm(kind, pass)), false, 0, 0};
        // Find lists the fastest first (and may list an algorithm once per math type): keep the first success.
        for (const auto& r : results)
            if (r.algorithm == m.algorithm && r.status == CUDNN_STATUS_SUCCESS && r.ms >= 0) {
                m.supported = true;
                m.ms = double(r.ms);
                m.workspace_bytes = std::max(r.memory, query(r.algo));
                break;
            }
        out.push_back(std::move(m));
    }
    return out;
}

} // namespace

profile_table measure(const nn::network& net, const graph& g, const training_program& prog, const measure_options& o) {
    if (device_count() == 0) throw error("cuda", "measure: no CUDA device");
    executor_options eo;
    eo.opt.kind = o.opt;
    auto ex = executor<timed_backend>::naive(net, g, prog, {}, eo);
    memplan::engine::detail::feed_inputs_or_zeros(ex, g, o.inputs);
    const auto& steps = ex.plan().steps;
    std::vector<std::vector<double>> per_op(g.num_ops());
    for (int r = 0; r < std::max(1, o.repeats) + 1; ++r) {
        ex.backend().times().clear();
        ex.step();
        if (r == 0) continue; // warm-up: cuDNN and cuBLAS pick kernels on first use
        const auto& t = ex.backend().times();
        for (std::size_t i = 0; i < steps.size() && i < t.size(); ++i)
            per_op[steps[i].op].push_back(t[i] / 1000.0); // the table is in ms
    }
    profile_table table;
    table.source = describe_device(0).name;
    cudnnHandle_t h = nullptr;
    MEMPLAN_CUDA_CHECK(cudnnCreate(&h));
    std::unique_ptr<cudnnContext, decltype(&cudnnDestroy)> guard(h, cudnnDestroy);
    for (graph::id_type i = 0; i < static_cast<graph::id_type>(g.num_ops()); ++i) {
        auto& ms = per_op[i];
        std::sort(ms.begin(), ms.end());
        op_measurement m{g.op(i).name, ms.empty() ? 0.0 : ms[ms.size() / 2], {}};
        const auto& origin = prog.ops[i];
        if (origin.kind == op_origin_kind::layer && !g.op(i).variants.empty()) {
            const auto& node = net.nodes()[origin.node];
            if (const auto* conv = std::get_if<nn::conv2d>(&node.layer)) {
                std::vector<std::pair<std::string, nn::impl_kind>> variants;
                for (const auto& v : g.op(i).variants) {
                    const auto kind = nn::parse_impl_kind(v.name);
                    if (!kind)
                        throw error("cuda", "measure: op '" + m.op + "' has variant '" + v.name +
                                                "', which no backend implements");
                    variants.push_back({v.name, *kind});
                }
                const nn::tensor_info& x = net.info(node.inputs[0]);
                const nn::tensor_info& y = net.info(node.output);
                const auto ops = nn::lower(node.layer, {std::span(&x, 1), y});
                const auto& spec = (origin.backward ? ops.backward : ops.forward).at(origin.spec);
                m.variants = find_conv(h, *conv, x.shape, y.shape, pass_of(spec.pass), variants);
            }
        }
        table.ops.push_back(std::move(m));
    }
    return table;
}

} // namespace memplan::engine::cuda
