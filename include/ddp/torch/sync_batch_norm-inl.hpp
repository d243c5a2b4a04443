// The definitions behind sync_batch_norm.hpp: compiled in every translation
// unit when ddp is header-only, once in the torch runtime when it is compiled
// separately (detail/torch/linkage.hpp).
#ifndef DDP_TORCH_SYNC_BATCH_NORM_INL_HPP
#define DDP_TORCH_SYNC_BATCH_NORM_INL_HPP

#include <ddp/detail/torch/sync_batch_norm.hpp>
#include <ddp/error.hpp>
#include <ddp/sync_batch_stats.hpp>
#include <ddp/torch/sync_batch_norm.hpp>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

DDP_BEGIN_NAMESPACE
namespace torch {

DDP_INLINE SyncBatchNormImpl::SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options_,
                                                process_group<gloo>& pg)
    : options(options_), group(&pg) {
  SyncBatchNormImpl::reset();
}

DDP_INLINE void SyncBatchNormImpl::reset() {
  if (options.affine()) {
    weight = register_parameter("weight", ::torch::ones({options.num_features()}));
    bias = register_parameter("bias", ::torch::zeros({options.num_features()}));
  } else {
    weight = register_parameter("weight", ::torch::Tensor(), /*requires_grad=*/false);
    bias = register_parameter("bias", ::torch::Tensor(), /*requires_grad=*/false);
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", ::torch::zeros({options.num_features()}));
    running_var = register_buffer("running_var", ::torch::ones({options.num_features()}));
    num_batches_tracked =
        register_buffer("num_batches_tracked", ::torch::tensor(0, ::torch::dtype(::torch::kLong)));
  } else {
    running_mean = register_buffer("running_mean", ::torch::Tensor());
    running_var = register_buffer("running_var", ::torch::Tensor());
    num_batches_tracked = register_buffer("num_batches_tracked", ::torch::Tensor());
  }
}

DDP_INLINE void SyncBatchNormImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

DDP_INLINE ::torch::Tensor SyncBatchNormImpl::forward(const ::torch::Tensor& input) {
  if (input.dim() < 2 || input.dim() > 5)
    throw error(error_kind::config, "SyncBatchNorm on rank " + std::to_string(group->rank()) +
                                        ": expected a 2D to 5D input (N, C, ...), got " +
                                        std::to_string(input.dim()) + "D");
  if (input.size(1) != options.num_features())
    throw error(error_kind::config,
                "SyncBatchNorm on rank " + std::to_string(group->rank()) + ": input has " +
                    std::to_string(input.size(1)) + " channels (dimension 1), the module " +
                    std::to_string(options.num_features()) + ": build it with the input's channel count");
  double factor = 0.0;
  if (is_training() && options.track_running_stats()) {
    num_batches_tracked.add_(1);
    factor = options.momentum() ? *options.momentum()
                                : 1.0 / static_cast<double>(num_batches_tracked.item<std::int64_t>());
  }
  // As BatchNorm: batch statistics in training, or when there are no running ones to use.
  const bool batch_stats = is_training() || !options.track_running_stats();
  if (!batch_stats || !is_training())
    return ::torch::nn::functional::batch_norm(input, running_mean, running_var,
                                               ::torch::nn::functional::BatchNormFuncOptions()
                                                   .weight(weight)
                                                   .bias(bias)
                                                   .training(batch_stats)
                                                   .eps(options.eps()));
  // Autograd's custom functions take no undefined tensor: absent ones travel as empty tensors.
  auto or_empty = [](const ::torch::Tensor& t) { return t.defined() ? t : ::torch::empty({0}); };
  return detail::libtorch::sync_batch_norm_function<process_group<gloo>>::apply(
      input, or_empty(weight), or_empty(bias), or_empty(running_mean), or_empty(running_var), options.eps(),
      factor, reinterpret_cast<std::int64_t>(group));
}

DDP_INLINE void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "ddp::torch::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=";
  if (options.momentum())
    stream << *options.momentum();
  else
    stream << "None";
  stream << ", affine=" << options.affine() << ", track_running_stats=" << options.track_running_stats()
         << ", world=" << group->size() << ")";
}

namespace detail::libtorch {
template <class BN> SyncBatchNorm from_batch_norm(const BN& bn, process_group<gloo>& pg) {
  SyncBatchNorm s(::torch::nn::BatchNormOptions(bn->options.num_features())
                      .eps(bn->options.eps())
                      .momentum(bn->options.momentum())
                      .affine(bn->options.affine())
                      .track_running_stats(bn->options.track_running_stats()),
                  pg);
  ::torch::NoGradGuard no_grad;
  if (bn->options.affine()) {
    s->weight.copy_(bn->weight);
    s->bias.copy_(bn->bias);
    s->weight.set_requires_grad(bn->weight.requires_grad());
    s->bias.set_requires_grad(bn->bias.requires_grad());
  }
  if (bn->options.track_running_stats()) {
    s->running_mean.copy_(bn->running_mean);
    s->running_var.copy_(bn->running_var);
    s->num_batches_tracked.copy_(bn->num_batches_tracked);
  }
  s->train(bn->is_training());
  return s;
}
} // namespace detail::libtorch

DDP_INLINE ::torch::nn::Sequential convert_sync_batchnorm(const ::torch::nn::Sequential& seq,
                                                          process_group<gloo>& pg) {
  ::torch::nn::Sequential out;
  const auto names = seq->named_children().keys();
  std::size_t i = 0;
  for (const auto& any : *seq) {
    std::string name = names[i++];
    auto m = any.ptr();
    if (auto b1 = std::dynamic_pointer_cast<::torch::nn::BatchNorm1dImpl>(m))
      out->push_back(name, ::torch::nn::AnyModule(
                               detail::libtorch::from_batch_norm(::torch::nn::BatchNorm1d(b1), pg).ptr()));
    else if (auto b2 = std::dynamic_pointer_cast<::torch::nn::BatchNorm2dImpl>(m))
      out->push_back(name, ::torch::nn::AnyModule(
                               detail::libtorch::from_batch_norm(::torch::nn::BatchNorm2d(b2), pg).ptr()));
    else if (auto b3 = std::dynamic_pointer_cast<::torch::nn::BatchNorm3dImpl>(m))
      out->push_back(name, ::torch::nn::AnyModule(
                               detail::libtorch::from_batch_norm(::torch::nn::BatchNorm3d(b3), pg).ptr()));
    else
      out->push_back(name, any);
  }
  out->train(seq->is_training());
  return out;
}

} // namespace torch
DDP_END_NAMESPACE

#endif // DDP_TORCH_SYNC_BATCH_NORM_INL_HPP
