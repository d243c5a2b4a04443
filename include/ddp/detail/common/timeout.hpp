// DDP_TIMEOUT: the one deadline every wait in ddp is bounded by.
#ifndef DDP_DETAIL_COMMON_TIMEOUT_HPP
#define DDP_DETAIL_COMMON_TIMEOUT_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/linkage.hpp>

#include <chrono>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

/// "600" (seconds), or with a unit: "500ms", "30s", "10m".
DDP_INLINE std::chrono::milliseconds parse_timeout(std::string_view v);

/// DDP_TIMEOUT when set, else 10 minutes (PyTorch's default for Gloo and NCCL).
DDP_INLINE std::chrono::milliseconds default_timeout();

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/common/timeout-inl.hpp>
#endif

#endif // DDP_DETAIL_COMMON_TIMEOUT_HPP
