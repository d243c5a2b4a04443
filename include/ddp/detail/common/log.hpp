// Diagnostics on stderr, gated by DDP_DEBUG (OFF | INFO | DETAIL). Warnings
// (refused connections, teardown trouble) are always printed.
#ifndef DDP_DETAIL_COMMON_LOG_HPP
#define DDP_DETAIL_COMMON_LOG_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/linkage.hpp>

#include <cstdio>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class debug_level { off = 0, info = 1, detail = 2 };

DDP_INLINE debug_level parse_debug_level(std::string_view v);

/// DDP_DEBUG, read once per process.
DDP_INLINE debug_level debug();

/// One line on stderr, "[ddp <who>] <text>".
DDP_INLINE void log_line(std::string_view who, std::string_view text);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/common/log-inl.hpp>
#endif

#endif // DDP_DETAIL_COMMON_LOG_HPP
