// Messages built out of line. A throw site that concatenates its message
// ("rank " + std::to_string(r) + ": ...") expands, in every function that
// throws, into a chain of temporary strings, each with its own cleanup path;
// in the quick start's object they were 8% of its code
// (docs/performance.md, "Compile cost"). Here a site passes its pieces (text
// and integers) to one function that builds the text and, at a throw, to one
// cold function that throws, so the site is a few stores and a call.
#ifndef DDP_DETAIL_COMMON_MESSAGE_HPP
#define DDP_DETAIL_COMMON_MESSAGE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/error.hpp>

#include <concepts>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

DDP_BEGIN_NAMESPACE
namespace detail {

/// An integer a message prints in decimal, as std::to_string does. Characters and
/// bool are left out: `text + 'c'` appends a character, to_string(true) prints 1; so
/// are integers wider than 64 bits (__int128), which would be cut short.
template <class T>
concept message_integer =
    std::integral<T> && !std::same_as<std::remove_cv_t<T>, bool> &&
    !std::same_as<std::remove_cv_t<T>, char> && !std::same_as<std::remove_cv_t<T>, char8_t> &&
    !std::same_as<std::remove_cv_t<T>, char16_t> && !std::same_as<std::remove_cv_t<T>, char32_t> &&
    !std::same_as<std::remove_cv_t<T>, wchar_t> && sizeof(T) <= sizeof(unsigned long long);

/// One piece of a message: a view of text (which must outlive the call it is
/// passed to, as a temporary std::string argument does) or an integer.
class message_part {
public:
  enum class kind : unsigned char { text, signed_integer, unsigned_integer };

  constexpr message_part(std::string_view text) noexcept : text_(text), kind_(kind::text) {}
  constexpr message_part(const char* text) noexcept : text_(text), kind_(kind::text) {}
  message_part(const std::string& text) noexcept : text_(text), kind_(kind::text) {}
  template <message_integer I>
  constexpr message_part(I value) noexcept
      : integer_(std::is_signed_v<I> ? static_cast<unsigned long long>(static_cast<long long>(value))
                                     : static_cast<unsigned long long>(value)),
        kind_(std::is_signed_v<I> ? kind::signed_integer : kind::unsigned_integer) {}

  /// Appends this piece to `out`.
  DDP_INLINE void append_to(std::string& out) const;
  /// The bytes it appends, or at most that (an integer's widest decimal).
  constexpr std::size_t size_bound() const noexcept { return kind_ == kind::text ? text_.size() : 20; }

private:
  std::string_view text_;
  unsigned long long integer_ = 0;
  kind kind_;
};

/// The pieces' text, concatenated. Not cold: a message built on every call (a
/// collective's description, a store key) would make its caller cold too, and
/// GCC would move that caller out of the hot code and optimize it for size.
DDP_INLINE std::string message(std::initializer_list<message_part> parts);

/// Appends the pieces' text to `out`: `out += message(parts)` without the temporary.
DDP_INLINE void append_message(std::string& out, std::initializer_list<message_part> parts);

/// Throws error(kind, message(parts), rank): one call in place of a string chain at each throw
/// site. Cold, as it is only ever reached on the way to a throw: the code around it stays hot.
[[noreturn, gnu::cold]] DDP_INLINE void throw_error(error_kind kind,
                                                    std::initializer_list<message_part> parts, int rank = -1);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/common/message-inl.hpp>
#endif

#endif // DDP_DETAIL_COMMON_MESSAGE_HPP
