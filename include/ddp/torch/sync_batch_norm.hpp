// SyncBatchNorm for LibTorch: a module declared where torch::nn::BatchNorm1d,
// 2d or 3d would be, whose training forward normalizes with the statistics of
// all ranks' batches (ddp::sync_batch_stats) and whose backward is the exact
// gradient of that: the per-channel sums of grad_output and of
// grad_output * (x - mean) are all-reduced, as PyTorch's SyncBatchNorm does.
// convert_sync_batchnorm swaps the BatchNorm modules of a Sequential for it.
#ifndef DDP_TORCH_SYNC_BATCH_NORM_HPP
#define DDP_TORCH_SYNC_BATCH_NORM_HPP

#include <ddp/backend/gloo.hpp>
#include <ddp/detail/torch/sync_batch_norm.hpp>
#include <ddp/error.hpp>
#include <ddp/process_group.hpp>
#include <ddp/sync_batch_stats.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace torch {

/// A BatchNorm over (N, C), (N, C, L), (N, C, H, W) or (N, C, D, H, W) inputs
/// whose training statistics are those of every rank's batch together. It has
/// BatchNorm's parameters and buffers under BatchNorm's names (weight, bias,
/// running_mean, running_var, num_batches_tracked), so checkpoints move
/// between the two. `pg` must outlive the module; every rank of it must run
/// the module's forward and backward in training the same number of times.
class SyncBatchNormImpl : public ::torch::nn::Cloneable<SyncBatchNormImpl> {
public:
  SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options_, process_group<gloo>& pg)
      : options(options_), group(&pg) {
    SyncBatchNormImpl::reset();
  }

  void reset() override {
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

  void reset_running_stats() {
    if (!options.track_running_stats()) return;
    running_mean.zero_();
    running_var.fill_(1);
    num_batches_tracked.zero_();
  }

  ::torch::Tensor forward(const ::torch::Tensor& input) {
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

  void pretty_print(std::ostream& stream) const override {
    stream << "ddp::torch::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps()
           << ", momentum=";
    if (options.momentum())
      stream << *options.momentum();
    else
      stream << "None";
    stream << ", affine=" << options.affine() << ", track_running_stats=" << options.track_running_stats()
           << ", world=" << group->size() << ")";
  }

  ::torch::nn::BatchNormOptions options;
  ::torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  process_group<gloo>* group;
};
/// The module holder, as TORCH_MODULE(SyncBatchNorm) would make it (the macro
/// names torch:: unqualified, which means ddp::torch in here).
class SyncBatchNorm : public ::torch::nn::ModuleHolder<SyncBatchNormImpl> {
public:
  using ::torch::nn::ModuleHolder<SyncBatchNormImpl>::ModuleHolder;
  using Impl = SyncBatchNormImpl;
};

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

/// A copy of `seq` whose BatchNorm1d/2d/3d modules are SyncBatchNorms over
/// `pg` with the same options, parameters and running statistics (copied);
/// every other module is shared with `seq`, under the same names. Build the
/// optimizer after converting. It reaches only the Sequential's own entries:
/// LibTorch's Sequential cannot hold another Sequential, and a custom module
/// holds its submodules in typed members that nothing generic can replace, so
/// declare SyncBatchNorm there instead of BatchNorm.
inline ::torch::nn::Sequential convert_sync_batchnorm(const ::torch::nn::Sequential& seq,
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

#endif // DDP_TORCH_SYNC_BATCH_NORM_HPP
