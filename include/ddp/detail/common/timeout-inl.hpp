// The definitions behind timeout.hpp: compiled in every translation unit when
// ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_COMMON_TIMEOUT_INL_HPP
#define DDP_DETAIL_COMMON_TIMEOUT_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/common/timeout.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE std::chrono::milliseconds parse_timeout(std::string_view v) {
  auto bad = [&] {
    return error(error_kind::config,
                 detail::message({"environment variable DDP_TIMEOUT='", v,
                                  "' is not a positive duration like 600, 30s, 500ms or 10m"}));
  };
  std::int64_t scale = 1000;
  if (v.ends_with("ms")) {
    scale = 1;
    v.remove_suffix(2);
  } else if (v.ends_with("s")) {
    v.remove_suffix(1);
  } else if (v.ends_with("m")) {
    scale = 60000;
    v.remove_suffix(1);
  }
  auto n = parse_int(v);
  if (!n || *n <= 0 || *n > (std::int64_t{1} << 40) / scale) throw bad();
  return std::chrono::milliseconds(*n * scale);
}

DDP_INLINE std::chrono::milliseconds default_timeout() {
  if (auto v = getenv_str("DDP_TIMEOUT")) return parse_timeout(*v);
  return std::chrono::minutes(10);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_TIMEOUT_INL_HPP
