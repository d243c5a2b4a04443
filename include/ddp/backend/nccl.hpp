// The NCCL backend policy: GPU collectives, host tensors staged through the
// device. Its communicator is detail/nccl/communicator.hpp. Needs <nccl.h> and
// the CUDA runtime: link ddp::nccl.
#ifndef DDP_BACKEND_NCCL_HPP
#define DDP_BACKEND_NCCL_HPP

#include <ddp/detail/nccl/communicator.hpp>

#include <string_view>

DDP_BEGIN_NAMESPACE

/// Backend policy: NCCL, for GPU tensors (host tensors are staged).
struct nccl {
  static constexpr std::string_view name = "nccl";
  using communicator = detail::nccl_communicator;
};

DDP_END_NAMESPACE

#endif // DDP_BACKEND_NCCL_HPP
