// The one checking macro of the CUDA backend: MEMPLAN_CUDA_CHECK(call) turns
// a failed CUDA runtime, cuBLAS or cuDNN call into memplan::error("cuda", ...)
// naming the call, file:line and the library's message; `fail`, the error
// that names the op instead; and the RAII owner of cuDNN descriptors both the
// backend and the profiler use. Private to src/cuda.
#pragma once

#include <memplan/core/error.hpp>
#include <memplan/engine/program.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <string>

namespace memplan::engine::cuda::detail {

inline bool failed(cudaError_t e) noexcept { return e != cudaSuccess; }
inline bool failed(cublasStatus_t e) noexcept { return e != CUBLAS_STATUS_SUCCESS; }
inline bool failed(cudnnStatus_t e) noexcept { return e != CUDNN_STATUS_SUCCESS; }
inline std::string message(cudaError_t e) { return cudaGetErrorString(e); }
inline std::string message(cublasStatus_t e) { return cublasGetStatusString(e); }
inline std::string message(cudnnStatus_t e) { return cudnnGetErrorString(e); }

template <class Status>
void check(Status s, const char* call, const char* file, int line) {
    if (failed(s))
        throw error("cuda", std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + message(s));
}

} // namespace memplan::engine::cuda::detail

#define MEMPLAN_CUDA_CHECK(call) ::memplan::engine::cuda::detail::check((call), #call, __FILE__, __LINE__)

namespace memplan::engine::cuda::detail {

/// The error of op `c`: memplan::error("cuda", "op '<layer>.<suffix>': <what>").
[[noreturn]] inline void fail(const kernel_call& c, const std::string& what) {
    throw error("cuda", "op '" + c.name() + "': " + what);
}

/// A cuDNN descriptor owned by RAII.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
struct descriptor {
    T d{};
    descriptor() { MEMPLAN_CUDA_CHECK(Create(&d)); }
    descriptor(const descriptor&) = delete;
    descriptor& operator=(const descriptor&) = delete;
    ~descriptor() { Destroy(d); }
    operator T() const noexcept { return d; }
};
using tensor_desc = descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using filter_desc = descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using conv_desc =
    descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

/// An NCHW float tensor descriptor.
inline void set4d(const tensor_desc& d, std::int64_t n, std::int64_t ch, std::int64_t h, std::int64_t w) {
    auto i = [](std::int64_t v) { return static_cast<int>(v); };
    MEMPLAN_CUDA_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(n), i(ch), i(h), i(w)));
}

} // namespace memplan::engine::cuda::detail
