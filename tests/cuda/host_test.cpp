// Host-only tests of the CUDA backend's decisions that need no GPU: how a
// cuDNN status is read (NOT_SUPPORTED category: fall back; anything else: an
// error naming the op), the convolution algorithm choice with a stub in
// place of cuDNN's workspace query, the variant -> algorithm table, and the
// MEMPLAN_CUDA_SYNC switch. Nothing here touches a device (cudnnGetErrorString
// is a table lookup), so it runs on every machine that builds memplan::cuda.
#include "common.hpp"
#include "conv_choice.hpp"

#include <doctest/doctest.h>

#include <memplan/engine/cuda/algorithms.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace memplan;
using memplan::engine::cuda::backend_options;
using memplan::engine::cuda::backend_stats;
using memplan::engine::cuda::conv_pass;
using memplan::engine::cuda::cudnn_algorithm;
using memplan::engine::cuda::workspace_shortfall;
namespace cd = memplan::engine::cuda::detail; // the backend's private helpers
using cd::cudnn_outcome;

namespace {

/// A kernel_call naming op "conv7.<pass>", variant `v`, with `workspace` planned bytes.
struct fake_call {
    nn::node node;
    nn::op_spec spec;
    engine::kernel_call c;
    fake_call(nn::impl_kind v, std::uint64_t workspace, nn::op_pass pass = nn::op_pass::fwd) {
        node.name = "conv7";
        spec.pass = pass;
        c.node = &node;
        c.spec = &spec;
        c.variant = v;
        c.workspace_bytes = workspace;
    }
    fake_call(const fake_call&) = delete;
};

/// cuDNN's workspace query, scripted: per algorithm a status and a size; records what was asked.
template <class Algo>
struct stub_query {
    std::map<Algo, std::pair<cudnnStatus_t, std::size_t>> answers;
    std::vector<Algo> asked;
    cudnnStatus_t operator()(Algo a, std::size_t& bytes) {
        asked.push_back(a);
        const auto& [st, b] = answers.at(a);
        if (st == CUDNN_STATUS_SUCCESS) bytes = b;
        return st;
    }
};

constexpr auto winograd = CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
constexpr auto implicit = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;

cudnnConvolutionFwdAlgo_t choose_fwd(fake_call& f, stub_query<cudnnConvolutionFwdAlgo_t>& q, backend_stats& stats,
                                     std::size_t& bytes,
                                     workspace_shortfall policy = workspace_shortfall::error) {
    return cd::choose(stats, policy, f.c, cd::fwd_algo(f.c.variant), cd::fallback_algo(winograd), q, bytes,
                          "cudnnGetConvolutionForwardWorkspaceSize");
}

/// The message choose_fwd throws (empty when it does not throw).
std::string error_of(fake_call& f, stub_query<cudnnConvolutionFwdAlgo_t>& q, backend_stats& stats) {
    std::size_t bytes = 0;
    try {
        choose_fwd(f, q, stats, bytes);
    } catch (const memplan::error& e) {
        return e.what();
    }
    return {};
}

} // namespace

TEST_CASE("cuda.host.status_categories") {
    CHECK(cd::classify(CUDNN_STATUS_SUCCESS) == cudnn_outcome::success);
    for (auto s : {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED_SHAPE, CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                   CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT}) {
        INFO(cudnnGetErrorString(s));
        CHECK(cd::classify(s) == cudnn_outcome::not_supported);
    }
    for (auto s : {CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_BAD_PARAM_NULL_POINTER, CUDNN_STATUS_INTERNAL_ERROR,
                   CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, CUDNN_STATUS_EXECUTION_FAILED,
                   CUDNN_STATUS_NOT_INITIALIZED}) {
        INFO(cudnnGetErrorString(s));
        CHECK(cd::classify(s) == cudnn_outcome::failure);
    }
}

TEST_CASE("cuda.host.choose.supported_variant_runs") {
    fake_call f(nn::impl_kind::winograd, 4096);
    stub_query<cudnnConvolutionFwdAlgo_t> q;
    q.answers[winograd] = {CUDNN_STATUS_SUCCESS, 4000};
    backend_stats stats;
    std::size_t bytes = 0;
    CHECK(choose_fwd(f, q, stats, bytes) == winograd);
    CHECK(bytes == 4000);
    CHECK(stats.conv_fallbacks == 0);
    CHECK(stats.workspace_fallbacks == 0);
}

TEST_CASE("cuda.host.choose.not_supported_falls_back_counted") {
    for (auto refusal : {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED_SHAPE}) {
        INFO(cudnnGetErrorString(refusal));
        fake_call f(nn::impl_kind::winograd, 4096);
        stub_query<cudnnConvolutionFwdAlgo_t> q;
        q.answers[winograd] = {refusal, 0};
        q.answers[implicit] = {CUDNN_STATUS_SUCCESS, 0};
        backend_stats stats;
        std::size_t bytes = 1;
        CHECK(choose_fwd(f, q, stats, bytes) == implicit);
        CHECK(bytes == 0);
        CHECK(stats.conv_fallbacks == 1);
        CHECK(stats.workspace_fallbacks == 0);
        CHECK(q.asked == std::vector{winograd, implicit});
    }
}

TEST_CASE("cuda.host.choose.other_failures_name_the_op") {
    for (auto failure : {CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_INTERNAL_ERROR, CUDNN_STATUS_EXECUTION_FAILED}) {
        INFO(cudnnGetErrorString(failure));
        fake_call f(nn::impl_kind::winograd, 4096);
        stub_query<cudnnConvolutionFwdAlgo_t> q;
        q.answers[winograd] = {failure, 0};
        q.answers[implicit] = {CUDNN_STATUS_SUCCESS, 0};
        backend_stats stats;
        const std::string what = error_of(f, q, stats);
        CHECK(what.find("op 'conv7.fwd'") != std::string::npos);
        CHECK(what.find("winograd") != std::string::npos);
        CHECK(what.find("cudnnGetConvolutionForwardWorkspaceSize") != std::string::npos);
        CHECK(what.find(cudnnGetErrorString(failure)) != std::string::npos);
        CHECK(stats.conv_fallbacks == 0); // not a fallback: no other algorithm was asked
        CHECK(q.asked == std::vector{winograd});
    }
}

TEST_CASE("cuda.host.choose.fallback_unsupported_too_throws") {
    fake_call f(nn::impl_kind::gemm_im2col, 1 << 20, nn::op_pass::fwd);
    stub_query<cudnnConvolutionFwdAlgo_t> q;
    q.answers[CUDNN_CONVOLUTION_FWD_ALGO_GEMM] = {CUDNN_STATUS_NOT_SUPPORTED, 0};
    q.answers[implicit] = {CUDNN_STATUS_NOT_SUPPORTED_SHAPE, 0};
    backend_stats stats;
    std::size_t bytes = 0;
    CHECK_THROWS_WITH_AS(choose_fwd(f, q, stats, bytes), doctest::Contains("op 'conv7.fwd'"), memplan::error);
    CHECK_THROWS_WITH_AS(choose_fwd(f, q, stats, bytes), doctest::Contains("supports neither"), memplan::error);
    // The fallback's query failing other than NOT_SUPPORTED is an error too.
    q.answers[implicit] = {CUDNN_STATUS_INTERNAL_ERROR, 0};
    CHECK_THROWS_WITH_AS(choose_fwd(f, q, stats, bytes), doctest::Contains(cudnnGetErrorString(CUDNN_STATUS_INTERNAL_ERROR)),
                         memplan::error);
    // The default variant itself unsupported: nothing to fall back to.
    fake_call d(nn::impl_kind::implicit_gemm, 0);
    q.answers[implicit] = {CUDNN_STATUS_NOT_SUPPORTED, 0};
    CHECK_THROWS_WITH_AS(choose_fwd(d, q, stats, bytes), doctest::Contains("op 'conv7.fwd'"), memplan::error);
}

TEST_CASE("cuda.host.choose.workspace_shortfall") {
    fake_call f(nn::impl_kind::winograd, 1000);
    stub_query<cudnnConvolutionFwdAlgo_t> q;
    q.answers[winograd] = {CUDNN_STATUS_SUCCESS, 5000};
    q.answers[implicit] = {CUDNN_STATUS_SUCCESS, 0};
    backend_stats stats;
    std::size_t bytes = 0;
    // error: names the op, the variant and both sizes
    const std::string what = error_of(f, q, stats);
    CHECK(what.find("op 'conv7.fwd'") != std::string::npos);
    CHECK(what.find("'winograd' needs a workspace of 5000 bytes, the plan gives 1000") != std::string::npos);
    // fallback: the zero-workspace algorithm, counted apart from unsupported ones
    CHECK(choose_fwd(f, q, stats, bytes, workspace_shortfall::fallback) == implicit);
    CHECK(bytes == 0);
    CHECK(stats.workspace_fallbacks == 1);
    CHECK(stats.conv_fallbacks == 0);
}

TEST_CASE("cuda.host.choose.backward_passes") {
    fake_call f(nn::impl_kind::gemm_im2col, 1 << 20, nn::op_pass::bwd_filter);
    stub_query<cudnnConvolutionBwdFilterAlgo_t> q;
    q.answers[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1] = {CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, 0};
    q.answers[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0] = {CUDNN_STATUS_SUCCESS, 0};
    backend_stats stats;
    std::size_t bytes = 0;
    const auto wanted = cd::bwd_filter_algo(f.c.variant);
    CHECK(cd::choose(stats, workspace_shortfall::error, f.c, wanted, cd::fallback_algo(wanted), q, bytes,
                         "cudnnGetConvolutionBackwardFilterWorkspaceSize") == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
    CHECK(stats.conv_fallbacks == 1);
    q.answers[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1] = {CUDNN_STATUS_BAD_PARAM, 0};
    CHECK_THROWS_WITH_AS(cd::choose(stats, workspace_shortfall::error, f.c, wanted, cd::fallback_algo(wanted), q,
                                        bytes, "cudnnGetConvolutionBackwardFilterWorkspaceSize"),
                         doctest::Contains("op 'conv7.bwd_filter'"), memplan::error);
}

TEST_CASE("cuda.host.algorithm_table_matches_the_names") {
    // engine/cuda/algorithms.hpp names what conv_choice.hpp runs.
    const std::map<cudnnConvolutionFwdAlgo_t, std::string> fwd{{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM"},
                                                              {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM"},
                                                              {winograd, "WINOGRAD_NONFUSED"}};
    const std::map<cudnnConvolutionBwdDataAlgo_t, std::string> data{
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "ALGO_0"},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "ALGO_1"},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED"}};
    const std::map<cudnnConvolutionBwdFilterAlgo_t, std::string> filter{
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "ALGO_0"},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "ALGO_1"},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED"}};
    for (auto k : {nn::impl_kind::none, nn::impl_kind::implicit_gemm, nn::impl_kind::gemm_im2col, nn::impl_kind::winograd}) {
        CHECK(fwd.at(cd::fwd_algo(k)) == cudnn_algorithm(k, conv_pass::forward));
        CHECK(data.at(cd::bwd_data_algo(k)) == cudnn_algorithm(k, conv_pass::backward_data));
        CHECK(filter.at(cd::bwd_filter_algo(k)) == cudnn_algorithm(k, conv_pass::backward_filter));
    }
    // Time with the math type the backend runs (profile.cpp and conv.cpp share conv_math).
    CHECK(cd::conv_math(false) == CUDNN_FMA_MATH);
    CHECK(cd::conv_math(true) == CUDNN_DEFAULT_MATH);
}

TEST_CASE("cuda.host.sync_mode_from_the_environment") {
    ::unsetenv("MEMPLAN_CUDA_SYNC");
    CHECK_FALSE(cd::sync_requested_by_environment());
    ::setenv("MEMPLAN_CUDA_SYNC", "1", 1);
    CHECK(cd::sync_requested_by_environment());
    ::setenv("MEMPLAN_CUDA_SYNC", "0", 1);
    CHECK_FALSE(cd::sync_requested_by_environment());
    ::setenv("MEMPLAN_CUDA_SYNC", "", 1);
    CHECK_FALSE(cd::sync_requested_by_environment());
    ::unsetenv("MEMPLAN_CUDA_SYNC");
    CHECK_FALSE(backend_options{}.sync_each_op);
}
