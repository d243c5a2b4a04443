// The Gloo backend policy: CPU tensors over TCP, and through the node's shared
// memory where ranks share a node. Its communicator is
// detail/gloo/communicator.hpp.
#ifndef DDP_BACKEND_GLOO_HPP
#define DDP_BACKEND_GLOO_HPP

#include <ddp/detail/gloo/communicator.hpp>
#include <ddp/process_group.hpp>
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

// Separately compiled, process_group<gloo>'s members that are not templates
// are compiled once, in the runtime (detail/common/linkage.hpp).
#if defined(DDP_SEPARATE_COMPILATION)
#if defined(DDP_IMPLEMENTATION)
template class process_group<gloo>;
#else
extern template class process_group<gloo>;
#endif
#endif

DDP_END_NAMESPACE

#endif // DDP_BACKEND_GLOO_HPP
