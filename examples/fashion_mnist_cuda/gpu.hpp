// CUDA and cuBLAS for the example: every call's status is checked and a failure is a
// ddp::error naming the call, so a broken GPU run says where it broke.
#pragma once

#include <ddp/error.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace example::gpu {

inline void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw ddp::error(ddp::error_kind::backend, std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                                                   cudaGetErrorString(e) + ")");
}

inline void check(cublasStatus_t e, const char* call) {
  if (e != CUBLAS_STATUS_SUCCESS)
    throw ddp::error(ddp::error_kind::backend, std::string(call) + " failed: " + cublasGetStatusName(e) +
                                                   " (" + cublasGetStatusString(e) + ")");
}

/// Device memory for n elements of T, freed on destruction.
template <class T> class buffer {
public:
  buffer() = default;
  explicit buffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    if (n) check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
    p_ = static_cast<T*>(p);
  }
  buffer(buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() {
    if (p_) cudaFree(p_); // nothing to do about a failure here
  }
  T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }

private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// A non-blocking stream and a cuBLAS handle bound to it.
class context {
public:
  context() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
  }
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  ~context() {
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const noexcept { return stream_; }
  cublasHandle_t blas() const noexcept { return blas_; }
  void sync() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

} // namespace example::gpu
