// The definitions behind error.hpp: compiled in every translation unit when
// ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp). Every throw site builds an error, so its
// constructor is worth keeping out of each user's file.
#ifndef DDP_ERROR_INL_HPP
#define DDP_ERROR_INL_HPP

#include <ddp/error.hpp>

DDP_BEGIN_NAMESPACE

DDP_INLINE error::error(error_kind kind, const std::string& what, int rank)
    : std::runtime_error("ddp " + std::string(to_string(kind)) + " error: " + what), kind_(kind),
      rank_(rank < 0 && kind == error_kind::config ? leading_rank(what) : rank),
      prefix_(what_string().size() - what.size()) {}

DDP_INLINE int error::leading_rank(std::string_view what) noexcept {
  constexpr std::string_view lead = "rank ";
  if (what.substr(0, lead.size()) != lead) return -1;
  long n = 0;
  std::size_t i = lead.size();
  for (; i < what.size() && what[i] >= '0' && what[i] <= '9' && n < (1L << 30); ++i)
    n = n * 10 + (what[i] - '0');
  return i > lead.size() && i < what.size() && what[i] == ':' ? static_cast<int>(n) : -1;
}

DDP_END_NAMESPACE

#endif // DDP_ERROR_INL_HPP
