// Reading and validating environment variables: every failure names the
// variable and its value.
#ifndef DDP_DETAIL_COMMON_ENV_HPP
#define DDP_DETAIL_COMMON_ENV_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

inline std::optional<std::string> getenv_str(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

/// Parses a whole decimal integer; no sign games, no trailing junk.
inline std::optional<std::int64_t> parse_int(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

/// An integer from `name`, within [lo, hi]; nullopt when unset.
inline std::optional<std::int64_t> env_int(const char* name, std::int64_t lo, std::int64_t hi) {
  auto raw = getenv_str(name);
  if (!raw) return std::nullopt;
  auto v = parse_int(*raw);
  if (!v)
    detail::throw_error(error_kind::config,
                        {"environment variable ", name, "='", *raw, "' is not an integer"});
  if (*v < lo || *v > hi)
    detail::throw_error(error_kind::config,
                        {"environment variable ", name, "=", *raw, " is out of range [", lo, ", ", hi, "]"});
  return v;
}

inline std::int64_t require_env_int(const char* name, std::int64_t lo, std::int64_t hi,
                                    std::string_view why) {
  auto v = env_int(name, lo, hi);
  if (!v) detail::throw_error(error_kind::config, {"environment variable ", name, " is not set (", why, ")"});
  return *v;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_ENV_HPP
