// LibTorch support: include after <ddp/ddp.hpp> and link ddp::torch.
//  - any torch::nn::Module is a distributed_data_parallel model; autograd
//    marks its gradients, which live in ddp's bucket views (ddp/torch/module.hpp);
//  - ddp::torch::distributed_sampler for torch::data loaders, index-identical
//    to Python's DistributedSampler (ddp/torch/distributed_sampler.hpp);
//  - ddp::torch::SyncBatchNorm and convert_sync_batchnorm (ddp/torch/sync_batch_norm.hpp).
// Inside namespace ddp, ddp::torch hides ::torch: write ::torch:: there.
#ifndef DDP_TORCH_HPP
#define DDP_TORCH_HPP

#include <ddp/torch/distributed_sampler.hpp>
#include <ddp/torch/module.hpp>
#include <ddp/torch/sync_batch_norm.hpp>

#endif // DDP_TORCH_HPP
