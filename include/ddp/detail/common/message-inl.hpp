// The definitions behind detail/common/message.hpp (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_COMMON_MESSAGE_INL_HPP
#define DDP_DETAIL_COMMON_MESSAGE_INL_HPP

#include <ddp/detail/common/message.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void message_part::append_to(std::string& out) const {
  switch (kind_) {
  case kind::text: out += text_; return;
  case kind::signed_integer: out += std::to_string(static_cast<long long>(integer_)); return;
  case kind::unsigned_integer: out += std::to_string(integer_); return;
  }
}

DDP_INLINE void append_message(std::string& out, std::initializer_list<message_part> parts) {
  std::size_t bound = out.size();
  for (const message_part& p : parts)
    bound += p.size_bound();
  // Doubling, as appends do, so that a document built piece by piece in a loop stays linear.
  if (bound > out.capacity()) out.reserve(bound > 2 * out.capacity() ? bound : 2 * out.capacity());
  for (const message_part& p : parts)
    p.append_to(out);
}

DDP_INLINE std::string message(std::initializer_list<message_part> parts) {
  std::string out;
  append_message(out, parts);
  return out;
}

DDP_INLINE void throw_error(error_kind kind, std::initializer_list<message_part> parts, int rank) {
  throw error(kind, message(parts), rank);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_MESSAGE_INL_HPP
