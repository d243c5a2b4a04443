// The definitions behind finite.hpp: compiled in every translation unit when
// ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_NUMERIC_FINITE_INL_HPP
#define DDP_DETAIL_NUMERIC_FINITE_INL_HPP

#include <ddp/detail/numeric/finite.hpp>

#include <cstdint>
#include <cstring>

DDP_BEGIN_NAMESPACE
namespace detail {

namespace finite_bits {
/// The first element whose exponent bits (`mask`) are all ones. Block by block, a
/// branch-free pass the compiler vectorizes finds whether a block has one at all.
template <class Bits> std::size_t first_with_exponent(const void* data, std::size_t n, Bits mask) {
  constexpr std::size_t block = 512;
  const auto* bytes = static_cast<const unsigned char*>(data);
  Bits b[block];
  for (std::size_t start = 0; start < n; start += block) {
    const std::size_t len = n - start < block ? n - start : block;
    std::memcpy(b, bytes + start * sizeof(Bits), len * sizeof(Bits));
    unsigned any = 0;
    for (std::size_t i = 0; i < len; ++i)
      any |= static_cast<unsigned>((b[i] & mask) == mask);
    if (any)
      for (std::size_t i = 0; i < len; ++i)
        if ((b[i] & mask) == mask) return start + i;
  }
  return n;
}
} // namespace finite_bits

DDP_INLINE std::size_t first_non_finite(const void* data, std::size_t n, dtype type) {
  switch (type) {
  case dtype::f32: return finite_bits::first_with_exponent<std::uint32_t>(data, n, 0x7f800000u);
  case dtype::f64: return finite_bits::first_with_exponent<std::uint64_t>(data, n, 0x7ff0000000000000ull);
  case dtype::f16: return finite_bits::first_with_exponent<std::uint16_t>(data, n, 0x7c00u);
  case dtype::bf16: return finite_bits::first_with_exponent<std::uint16_t>(data, n, 0x7f80u);
  default: return n;
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NUMERIC_FINITE_INL_HPP
