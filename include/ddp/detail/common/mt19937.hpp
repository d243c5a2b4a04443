// MT19937, the 32-bit Mersenne Twister, seeded as std::mt19937(seed) and giving
// the same numbers: the samplers need only this engine, and <random> would cost
// every file that includes ddp a noticeable share of its parsing (docs/performance.md,
// Compile cost). A unit test checks it against std::mt19937.
#ifndef DDP_DETAIL_COMMON_MT19937_HPP
#define DDP_DETAIL_COMMON_MT19937_HPP

#include <ddp/config.hpp>

#include <cstddef>
#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

class mt19937 {
public:
  using result_type = std::uint32_t;

  explicit mt19937(std::uint32_t seed) noexcept {
    state_[0] = seed;
    for (std::size_t i = 1; i < n; ++i)
      state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
    next_ = n;
  }

  std::uint32_t operator()() noexcept {
    if (next_ >= n) twist();
    std::uint32_t y = state_[next_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }

private:
  static constexpr std::size_t n = 624, m = 397;

  static std::uint32_t mix(std::uint32_t upper, std::uint32_t lower, std::uint32_t far) noexcept {
    const std::uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }

  /// The next 624 words at once, in two loops without a modulo (as libstdc++ does).
  void twist() noexcept {
    std::size_t k = 0;
    for (; k < n - m; ++k)
      state_[k] = mix(state_[k], state_[k + 1], state_[k + m]);
    for (; k < n - 1; ++k)
      state_[k] = mix(state_[k], state_[k + 1], state_[k + m - n]);
    state_[n - 1] = mix(state_[n - 1], state_[0], state_[m - 1]);
    next_ = 0;
  }

  std::uint32_t state_[n];
  std::size_t next_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_MT19937_HPP
