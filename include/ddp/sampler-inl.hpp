// The definitions behind sampler.hpp's policies: compiled in every
// translation unit when ddp is header-only, once in the runtime when it is
// compiled separately (detail/common/linkage.hpp).
#ifndef DDP_SAMPLER_INL_HPP
#define DDP_SAMPLER_INL_HPP

#include <ddp/sampler.hpp>

DDP_BEGIN_NAMESPACE
namespace sampling {

DDP_INLINE void shuffled::rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
  if (c.n == 0) {
    out.clear();
    return;
  }
  // The permutation is the one O(n) buffer besides `out`; 32-bit entries
  // when they fit (n <= 2^32 - 1), which halves it: 4n + 8n/num_replicas
  // bytes at the peak. It cannot be avoided: in either shuffle an element's
  // final value depends on swaps with positions anywhere in the array, so a
  // rank's share needs the whole permutation.
  if (c.n <= 0xffffffffu) {
    detail::shuffle_buffer<std::uint32_t> perm;
    detail::randperm(perm, c.n, c.seed + c.epoch, c.randperm);
    detail::strided_share(c, out, [&](std::size_t j) { return perm[j]; });
  } else {
    detail::shuffle_buffer<std::uint64_t> perm;
    detail::randperm(perm, c.n, c.seed + c.epoch, c.randperm);
    detail::strided_share(c, out, [&](std::size_t j) { return perm[j]; });
  }
}

DDP_INLINE void sequential::rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
  if (c.n == 0) {
    out.clear();
    return;
  }
  detail::strided_share(c, out, [](std::size_t j) { return j; });
}

} // namespace sampling
DDP_END_NAMESPACE

#endif // DDP_SAMPLER_INL_HPP
