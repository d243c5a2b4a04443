// The example's few kernels (kernels.cu, compiled by nvcc), behind host functions
// that plain C++ (main.cpp, compiled by g++) calls. Each enqueues on `s` and returns
// the launch's status (cudaGetLastError), which the caller checks and names.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace example::kernels {

/// x (dim x n, column-major) gets the images idx[0..n) (rows of `images`, count x dim
/// row-major); y gets their labels.
cudaError_t gather_batch(const float* images, const std::uint8_t* labels, const std::int64_t* idx, int n,
                         int dim, float* x, int* y, cudaStream_t s);

/// a (rows x cols, column-major) += b per row; then max(a, 0) when `relu`.
cudaError_t add_bias(float* a, const float* b, int rows, int cols, bool relu, cudaStream_t s);

/// Softmax cross-entropy over each column of logits (classes x batch): delta gets
/// (softmax - onehot(y)) / batch, *loss gets the batch's mean loss added.
cudaError_t softmax_cross_entropy(const float* logits, const int* y, int classes, int batch, float* delta,
                                  float* loss, cudaStream_t s);

/// delta *= (act > 0): the ReLU's derivative.
cudaError_t relu_backward(float* delta, const float* act, std::size_t n, cudaStream_t s);

/// SGD with momentum, PyTorch's formulation: v = mu * v + g; w -= lr * v.
cudaError_t sgd_momentum(float* w, float* v, const float* g, float lr, float mu, std::size_t n,
                         cudaStream_t s);

/// *correct += the columns of logits (classes x batch) whose largest entry is at y.
cudaError_t count_correct(const float* logits, const int* y, int classes, int batch,
                          unsigned long long* correct, cudaStream_t s);

/// p[0..n) = v.
cudaError_t fill(float* p, float v, std::size_t n, cudaStream_t s);

} // namespace example::kernels
