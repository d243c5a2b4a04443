// The Gloo backend policy: CPU tensors over TCP, and through the node's shared
// memory where ranks share a node. Its communicator is
// detail/gloo/communicator.hpp.
#ifndef DDP_BACKEND_GLOO_HPP
#define DDP_BACKEND_GLOO_HPP

#include <ddp/detail/gloo/communicator.hpp>
#include <ddp/tensor.hpp>

#include <gloo/types.h>

#include <string_view>
#include <type_traits>

DDP_BEGIN_NAMESPACE

template <> struct dtype_of<::gloo::float16> : std::integral_constant<dtype, dtype::f16> {};

/// Backend policy: Gloo over TCP, for CPU tensors.
struct gloo {
  static constexpr std::string_view name = "gloo";
  using communicator = detail::gloo_communicator;
};

DDP_END_NAMESPACE

#endif // DDP_BACKEND_GLOO_HPP
