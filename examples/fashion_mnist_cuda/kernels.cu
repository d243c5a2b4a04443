// The kernels of the CUDA example: bias and ReLU, softmax cross-entropy, the ReLU's
// derivative, SGD with momentum, batch gathering and accuracy counting. The GEMMs
// are cuBLAS's (main.cpp); these are the element-wise rest.
#include "kernels.hpp"

namespace example::kernels {
namespace {

constexpr int threads = 256;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + threads - 1) / threads); }

__global__ void gather_batch_k(const float* images, const std::uint8_t* labels, const std::int64_t* idx,
                               int n, int dim, float* x, int* y) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<std::size_t>(n) * dim) return;
  const std::size_t col = i / dim, row = i % dim;
  const std::int64_t sample = idx[col];
  x[i] = images[static_cast<std::size_t>(sample) * dim + row];
  if (row == 0) y[col] = labels[sample];
}

__global__ void add_bias_k(float* a, const float* b, int rows, std::size_t n, bool relu) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = a[i] + b[i % rows];
  a[i] = relu ? fmaxf(v, 0.0f) : v;
}

// One thread per column: ten classes, so a loop beats a reduction.
__global__ void softmax_xent_k(const float* logits, const int* y, int classes, int batch, float* delta,
                               float* loss) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= batch) return;
  const float* z = logits + static_cast<std::size_t>(c) * classes;
  float* d = delta + static_cast<std::size_t>(c) * classes;
  float m = z[0];
  for (int k = 1; k < classes; ++k)
    m = fmaxf(m, z[k]);
  float sum = 0;
  for (int k = 0; k < classes; ++k)
    sum += expf(z[k] - m);
  const int label = y[c];
  float p_label = 0;
  for (int k = 0; k < classes; ++k) {
    const float p = expf(z[k] - m) / sum;
    if (k == label) p_label = p;
    d[k] = (p - (k == label ? 1.0f : 0.0f)) / static_cast<float>(batch);
  }
  atomicAdd(loss, -logf(fmaxf(p_label, 1e-30f)) / static_cast<float>(batch));
}

__global__ void relu_backward_k(float* delta, const float* act, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && !(act[i] > 0.0f)) delta[i] = 0.0f;
}

__global__ void sgd_momentum_k(float* w, float* v, const float* g, float lr, float mu, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float nv = mu * v[i] + g[i];
  v[i] = nv;
  w[i] -= lr * nv;
}

__global__ void count_correct_k(const float* logits, const int* y, int classes, int batch,
                                unsigned long long* correct) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= batch) return;
  const float* z = logits + static_cast<std::size_t>(c) * classes;
  int best = 0; // the first largest, as Eigen's maxCoeff picks
  for (int k = 1; k < classes; ++k)
    if (z[k] > z[best]) best = k;
  if (best == y[c]) atomicAdd(correct, 1ULL);
}

__global__ void fill_k(float* p, float v, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = v;
}

} // namespace

cudaError_t gather_batch(const float* images, const std::uint8_t* labels, const std::int64_t* idx, int n,
                         int dim, float* x, int* y, cudaStream_t s) {
  const std::size_t total = static_cast<std::size_t>(n) * static_cast<std::size_t>(dim);
  if (total == 0) return cudaSuccess;
  gather_batch_k<<<blocks_for(total), threads, 0, s>>>(images, labels, idx, n, dim, x, y);
  return cudaGetLastError();
}

cudaError_t add_bias(float* a, const float* b, int rows, int cols, bool relu, cudaStream_t s) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (n == 0) return cudaSuccess;
  add_bias_k<<<blocks_for(n), threads, 0, s>>>(a, b, rows, n, relu);
  return cudaGetLastError();
}

cudaError_t softmax_cross_entropy(const float* logits, const int* y, int classes, int batch, float* delta,
                                  float* loss, cudaStream_t s) {
  if (batch == 0) return cudaSuccess;
  softmax_xent_k<<<blocks_for(static_cast<std::size_t>(batch)), threads, 0, s>>>(logits, y, classes, batch,
                                                                                 delta, loss);
  return cudaGetLastError();
}

cudaError_t relu_backward(float* delta, const float* act, std::size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  relu_backward_k<<<blocks_for(n), threads, 0, s>>>(delta, act, n);
  return cudaGetLastError();
}

cudaError_t sgd_momentum(float* w, float* v, const float* g, float lr, float mu, std::size_t n,
                         cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  sgd_momentum_k<<<blocks_for(n), threads, 0, s>>>(w, v, g, lr, mu, n);
  return cudaGetLastError();
}

cudaError_t count_correct(const float* logits, const int* y, int classes, int batch,
                          unsigned long long* correct, cudaStream_t s) {
  if (batch == 0) return cudaSuccess;
  count_correct_k<<<blocks_for(static_cast<std::size_t>(batch)), threads, 0, s>>>(logits, y, classes, batch,
                                                                                  correct);
  return cudaGetLastError();
}

cudaError_t fill(float* p, float v, std::size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  fill_k<<<blocks_for(n), threads, 0, s>>>(p, v, n);
  return cudaGetLastError();
}

} // namespace example::kernels
