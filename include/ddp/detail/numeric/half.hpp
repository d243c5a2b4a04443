// IEEE binary16 and bfloat16 <-> float conversions (round to nearest even),
// used by reductions on half types and by the compressed reductions.
#ifndef DDP_DETAIL_NUMERIC_HALF_HPP
#define DDP_DETAIL_NUMERIC_HALF_HPP

#include <ddp/config.hpp>

#include <bit>
#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

inline float half_bits_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0)
      bits = sign;
    else { // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

inline std::uint16_t float_to_half_bits(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // rounds to inf
  if (abs < 0x38800000u) {                                                   // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign); // below half of the smallest subnormal
    std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23); // 14..24
    std::uint32_t half_man = man >> (shift);
    std::uint32_t rest = man & ((1u << shift) - 1u);
    std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half_man & 1u))) ++half_man;
    return static_cast<std::uint16_t>(sign | half_man);
  }
  std::uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - (static_cast<std::uint32_t>(127 - 15) << 23);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

inline float bf16_bits_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u); // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NUMERIC_HALF_HPP
