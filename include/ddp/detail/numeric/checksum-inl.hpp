// The definitions behind checksum.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_NUMERIC_CHECKSUM_INL_HPP
#define DDP_DETAIL_NUMERIC_CHECKSUM_INL_HPP

#include <ddp/detail/numeric/checksum.hpp>

#include <cstring>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE std::uint64_t checksum(const void* data, std::size_t bytes) noexcept {
  // Word by word: xor, then multiply and fold (a 64-bit mix as in splitmix64), the length folded in last.
  constexpr std::uint64_t k = 0x9e3779b97f4a7c15ull;
  auto mix = [](std::uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
  };
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = k;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w) + k;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, p + i, bytes - i);
  return mix(mix(h ^ tail) ^ bytes);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NUMERIC_CHECKSUM_INL_HPP
