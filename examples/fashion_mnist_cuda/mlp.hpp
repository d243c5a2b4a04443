// The CPU example's MLP (784-256-128-10, ReLU, softmax cross-entropy, same He
// initialisation from the seed) with parameters, activations, gradients and the
// optimizer's momentum in device memory. GEMMs are cuBLAS's, the rest kernels.cu's.
// Parameters, gradients and momentum each lie in one allocation, in reverse
// registration order as ddp::arena lays them out, so the optimizer is one kernel
// and a bucket of neighbouring gradients is one contiguous range.
#pragma once

#include "gpu.hpp"
#include "kernels.hpp"

#include <ddp/tensor.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace example {

struct gpu_mlp {
  static constexpr int layers = 3;
  static constexpr int classes = 10;
  const int dims[layers + 1] = {784, 256, 128, classes};

  gpu_mlp(const gpu::context& ctx, unsigned seed, int max_batch) : ctx_(ctx), max_batch_(max_batch) {
    std::size_t off = 0;
    for (std::size_t k = 2 * layers; k-- > 0;) { // reverse registration order, as ddp::arena
      offset_[k] = off;
      off += count(k);
    }
    total_ = off;
    params_ = gpu::buffer<float>(total_);
    grads_ = gpu::buffer<float>(total_);
    velocity_ = gpu::buffer<float>(total_);
    check_k(kernels::fill(grads_.data(), 0.0f, total_, ctx_.stream()), "fill (gradients)");
    check_k(kernels::fill(velocity_.data(), 0.0f, total_, ctx_.stream()), "fill (momentum)");
    // He initialisation for ReLU layers, N(0, 2 / fan_in), drawn exactly as the CPU example
    // draws it (same generator, same order), so both start from the same weights.
    std::mt19937 gen(seed);
    std::vector<float> host(total_, 0.0f); // biases stay 0
    for (int l = 0; l < layers; ++l) {
      std::normal_distribution<float> n(0.0f, std::sqrt(2.0f / static_cast<float>(dims[l])));
      float* w = host.data() + offset_[2 * static_cast<std::size_t>(l)];
      for (std::size_t i = 0; i < count(2 * static_cast<std::size_t>(l)); ++i)
        w[i] = n(gen);
    }
    upload(host);
    for (std::size_t k = 0; k < 2 * layers; ++k) {
      param_views_[k] = param(k);
      grad_views_[k] = grad(k);
    }
    for (int l = 0; l <= layers; ++l)
      act_[l] = gpu::buffer<float>(static_cast<std::size_t>(dims[l]) * static_cast<std::size_t>(max_batch));
    delta_[0] = gpu::buffer<float>(static_cast<std::size_t>(dims[1]) * static_cast<std::size_t>(max_batch));
    delta_[1] = gpu::buffer<float>(static_cast<std::size_t>(dims[1]) * static_cast<std::size_t>(max_batch));
    ones_ = gpu::buffer<float>(static_cast<std::size_t>(max_batch));
    check_k(kernels::fill(ones_.data(), 1.0f, ones_.size(), ctx_.stream()), "fill (ones)");
    labels_ = gpu::buffer<int>(static_cast<std::size_t>(max_batch));
    ctx_.sync();
  }

  /// Elements of tensor k (registration order: fc1.weight, fc1.bias, fc2.weight, ...).
  std::size_t count(std::size_t k) const {
    const auto l = k / 2;
    return static_cast<std::size_t>(dims[l + 1]) * (k % 2 ? 1 : static_cast<std::size_t>(dims[l]));
  }
  static std::string name(std::size_t k) {
    return "fc" + std::to_string(k / 2 + 1) + (k % 2 ? ".bias" : ".weight");
  }
  std::size_t total() const noexcept { return total_; }
  ddp::device_span<float> param(std::size_t k) const { return {params_.data() + offset_[k], count(k)}; }
  ddp::device_span<float> grad(std::size_t k) const { return {grads_.data() + offset_[k], count(k)}; }
  ddp::device_span<float> all_grads() const { return {grads_.data(), total_}; }

  /// ddp's model concept: f(name, value, gradient), in registration order.
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t k = 0; k < 2 * layers; ++k)
      f(name(k), param_views_[k], grad_views_[k]);
  }

  /// Batch inputs (784 x batch, column-major) and labels go here before forward().
  float* input() { return act_[0].data(); }
  int* labels() { return labels_.data(); }

  /// Logits (10 x batch, column-major, on the device) of the inputs in input().
  const float* forward(int batch) {
    for (int l = 0; l < layers; ++l) {
      const float one = 1.0f, zero = 0.0f;
      gpu::check(cublasSgemm(ctx_.blas(), CUBLAS_OP_N, CUBLAS_OP_N, dims[l + 1], batch, dims[l], &one, w(l),
                             dims[l + 1], act_[l].data(), dims[l], &zero, act_[l + 1].data(), dims[l + 1]),
                 "cublasSgemm (forward)");
      check_k(kernels::add_bias(act_[l + 1].data(), b(l), dims[l + 1], batch, l + 1 < layers, ctx_.stream()),
              "add_bias");
    }
    return act_[layers].data();
  }

  /// Backward of the last forward against labels(): writes the gradients (replacing
  /// them), adds the batch's mean loss to *loss (device memory), and calls
  /// layer_done(l) once layer l's gradients are enqueued on the stream.
  void backward(int batch, float* loss, const std::function<void(int)>& layer_done) {
    float* delta = delta_[0].data();
    float* spare = delta_[1].data();
    check_k(kernels::softmax_cross_entropy(act_[layers].data(), labels(), classes, batch, delta, loss,
                                           ctx_.stream()),
            "softmax_cross_entropy");
    const float one = 1.0f, zero = 0.0f;
    for (int l = layers - 1; l >= 0; --l) {
      const auto k = 2 * static_cast<std::size_t>(l);
      // dW = delta * act^T; db = delta * ones (row sums).
      gpu::check(cublasSgemm(ctx_.blas(), CUBLAS_OP_N, CUBLAS_OP_T, dims[l + 1], dims[l], batch, &one, delta,
                             dims[l + 1], act_[l].data(), dims[l], &zero, grad(k).data(), dims[l + 1]),
                 "cublasSgemm (weight gradient)");
      gpu::check(cublasSgemv(ctx_.blas(), CUBLAS_OP_N, dims[l + 1], batch, &one, delta, dims[l + 1],
                             ones_.data(), 1, &zero, grad(k + 1).data(), 1),
                 "cublasSgemv (bias gradient)");
      if (layer_done) layer_done(l);
      if (l > 0) { // delta of the layer below: W^T delta, masked by the ReLU
        gpu::check(cublasSgemm(ctx_.blas(), CUBLAS_OP_T, CUBLAS_OP_N, dims[l], batch, dims[l + 1], &one, w(l),
                               dims[l + 1], delta, dims[l + 1], &zero, spare, dims[l]),
                   "cublasSgemm (backward)");
        check_k(kernels::relu_backward(spare, act_[l].data(),
                                       static_cast<std::size_t>(dims[l]) * static_cast<std::size_t>(batch),
                                       ctx_.stream()),
                "relu_backward");
        std::swap(delta, spare);
      }
    }
  }

  /// One SGD step with momentum over every parameter (one kernel: same layouts).
  void sgd_step(float lr, float mu) {
    check_k(
        kernels::sgd_momentum(params_.data(), velocity_.data(), grads_.data(), lr, mu, total_, ctx_.stream()),
        "sgd_momentum");
  }

  /// Parameters then momentum, as host vectors in the CPU example's checkpoint order.
  void download(std::vector<float>& params, std::vector<float>& velocity) const {
    params.resize(total_);
    velocity.resize(total_);
    gpu::check(cudaMemcpyAsync(params.data(), params_.data(), total_ * sizeof(float), cudaMemcpyDeviceToHost,
                               ctx_.stream()),
               "cudaMemcpyAsync (parameters to host)");
    gpu::check(cudaMemcpyAsync(velocity.data(), velocity_.data(), total_ * sizeof(float),
                               cudaMemcpyDeviceToHost, ctx_.stream()),
               "cudaMemcpyAsync (momentum to host)");
    ctx_.sync();
  }
  void upload(const std::vector<float>& params, const std::vector<float>* velocity = nullptr) {
    gpu::check(cudaMemcpyAsync(params_.data(), params.data(), total_ * sizeof(float), cudaMemcpyHostToDevice,
                               ctx_.stream()),
               "cudaMemcpyAsync (parameters to device)");
    if (velocity)
      gpu::check(cudaMemcpyAsync(velocity_.data(), velocity->data(), total_ * sizeof(float),
                                 cudaMemcpyHostToDevice, ctx_.stream()),
                 "cudaMemcpyAsync (momentum to device)");
    ctx_.sync();
  }
  /// Where tensor k lies in the host vectors of download()/upload().
  std::size_t offset(std::size_t k) const { return offset_[k]; }

private:
  const float* w(int l) const { return params_.data() + offset_[2 * static_cast<std::size_t>(l)]; }
  const float* b(int l) const { return params_.data() + offset_[2 * static_cast<std::size_t>(l) + 1]; }
  static void check_k(cudaError_t e, const char* kernel) { gpu::check(e, kernel); }

  const gpu::context& ctx_;
  int max_batch_;
  std::size_t offset_[2 * layers] = {};
  std::size_t total_ = 0;
  gpu::buffer<float> params_, grads_, velocity_, ones_;
  gpu::buffer<float> act_[layers + 1], delta_[2];
  gpu::buffer<int> labels_;
  ddp::device_span<float> param_views_[2 * layers], grad_views_[2 * layers];
};

} // namespace example
