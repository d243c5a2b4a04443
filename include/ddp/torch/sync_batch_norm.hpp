// SyncBatchNorm for LibTorch: a module declared where torch::nn::BatchNorm1d,
// 2d or 3d would be, whose training forward normalizes with the statistics of
// all ranks' batches (ddp::sync_batch_stats) and whose backward is the exact
// gradient of that: the per-channel sums of grad_output and of
// grad_output * (x - mean) are all-reduced, as PyTorch's SyncBatchNorm does.
// convert_sync_batchnorm swaps the BatchNorm modules of a Sequential for it.
#ifndef DDP_TORCH_SYNC_BATCH_NORM_HPP
#define DDP_TORCH_SYNC_BATCH_NORM_HPP

#include <ddp/backend/gloo.hpp>
#include <ddp/detail/torch/linkage.hpp>
#include <ddp/process_group.hpp>

#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <ostream>

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
  DDP_INLINE SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options_, process_group<gloo>& pg);

  DDP_INLINE void reset() override;
  DDP_INLINE void reset_running_stats();
  DDP_INLINE ::torch::Tensor forward(const ::torch::Tensor& input);
  DDP_INLINE void pretty_print(std::ostream& stream) const override;

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

/// A copy of `seq` whose BatchNorm1d/2d/3d modules are SyncBatchNorms over
/// `pg` with the same options, parameters and running statistics (copied);
/// every other module is shared with `seq`, under the same names. Build the
/// optimizer after converting. It reaches only the Sequential's own entries:
/// LibTorch's Sequential cannot hold another Sequential, and a custom module
/// holds its submodules in typed members that nothing generic can replace, so
/// declare SyncBatchNorm there instead of BatchNorm.
DDP_INLINE ::torch::nn::Sequential convert_sync_batchnorm(const ::torch::nn::Sequential& seq,
                                                          process_group<gloo>& pg);

} // namespace torch
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_TORCH_RUNTIME
#include <ddp/torch/sync_batch_norm-inl.hpp>
#endif

#endif // DDP_TORCH_SYNC_BATCH_NORM_HPP
