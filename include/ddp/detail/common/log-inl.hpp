// The definitions behind log.hpp: compiled in every translation unit when
// ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_COMMON_LOG_INL_HPP
#define DDP_DETAIL_COMMON_LOG_INL_HPP

#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE debug_level parse_debug_level(std::string_view v) {
  if (v.empty() || v == "OFF" || v == "off" || v == "0") return debug_level::off;
  if (v == "INFO" || v == "info" || v == "1") return debug_level::info;
  if (v == "DETAIL" || v == "detail" || v == "2") return debug_level::detail;
  detail::throw_error(error_kind::config,
                      {"environment variable DDP_DEBUG='", v, "' is not one of OFF, INFO, DETAIL"});
}

DDP_INLINE debug_level debug() {
  static const debug_level level = parse_debug_level(getenv_str("DDP_DEBUG").value_or(""));
  return level;
}

DDP_INLINE void log_line(std::string_view who, std::string_view text) {
  std::string line = "[ddp";
  if (!who.empty()) line.append(" ").append(who);
  line.append("] ").append(text).append("\n");
  std::fwrite(line.data(), 1, line.size(), stderr); // one write: lines do not interleave
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_LOG_INL_HPP
