// reduce_scatter and all_gather among the ranks of one node through their
// shared segment, in the pipelined steps of the node's all-reduce
// (detail/shm/all_reduce.hpp): per step every rank copies its part into one
// half of its area, meets the others at one barrier, and reads what it needs
// straight from their areas; the next step uses the other half
// (shm_all_reduce::run_steps drives the steps and their barriers).
// Both give the same bits as the TCP path: blocks reduced in rank order, then
// the averaging.
#ifndef DDP_DETAIL_SHM_BLOCK_COLLECTIVES_HPP
#define DDP_DETAIL_SHM_BLOCK_COLLECTIVES_HPP

#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/shm/all_reduce.hpp>
#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Elements per part when a half area of `half_bytes` holds `parts` of them:
/// whole cache lines where they fit, so that each reader's part starts on a
/// line; with many ranks and a small area (DDP_SHM_AREA_BYTES) fewer, never
/// past the half (at least 2 KiB: one 8-byte element for each of 256 ranks).
constexpr std::size_t shm_part_elements(std::size_t half_bytes, std::size_t parts, std::size_t esz) {
  const std::size_t line = std::max<std::size_t>(64 / esz, 1);
  const std::size_t k = half_bytes / parts / esz;
  return k >= line ? k / line * line : std::max<std::size_t>(k, 1);
}

/// Block l of `in` (n elements each, one per local rank) reduced over the
/// node's ranks into local rank l's `out`. One node only: local rank is rank.
/// `out` may be this rank's own block of `in`.
inline void shm_reduce_scatter(shm_all_reduce& node, const void* in, void* out, std::size_t n, dtype dt, op o,
                               const collective_header& h, const std::string& what) {
  const int L = node.segment().local_size(), me = node.segment().local_rank();
  const std::size_t esz = size_of(dt), parts = static_cast<std::size_t>(L);
  const std::size_t cap = shm_part_elements(node.half_area_bytes(), parts, esz);
  const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
  const auto* blocks = static_cast<const char*>(in);
  auto* res = static_cast<char*>(out);
  node.run_steps(
      h, what, n, cap,
      [&](std::size_t off, std::size_t m, int buf) {
        // Every block's part, this rank's own too: `out` may be that block.
        char* mine = node.area_half(me, buf);
        for (std::size_t p = 0; p < parts && m; ++p) // m == 0: `in` may be null
          std::memcpy(mine + p * cap * esz, blocks + (p * n + off) * esz, m * esz);
      },
      [&](std::size_t off, std::size_t m, int buf) {
        auto part = [&](int l) -> const char* {
          return node.area_half(l, buf) + static_cast<std::size_t>(me) * cap * esz;
        };
        char* dst = res + off * esz;
        if (L == 1) std::memcpy(dst, part(0), m * esz);
        for (int l = 1; l < L; ++l)
          fn(dst, l == 1 ? static_cast<const void*>(part(0)) : dst, part(l), m);
        if (o == op::avg) scale_in_place(dst, m, dt, 1.0 / L);
      });
}

/// This rank's `in` (n elements) into block l of every local rank l's `out`
/// (L blocks of n). One node only. `in` may be this rank's own block of `out`.
inline void shm_all_gather(shm_all_reduce& node, const void* in, void* out, std::size_t n, dtype dt,
                           const collective_header& h, const std::string& what) {
  const int L = node.segment().local_size(), me = node.segment().local_rank();
  const std::size_t esz = size_of(dt);
  const std::size_t cap = shm_part_elements(node.half_area_bytes(), 1, esz);
  const auto* src = static_cast<const char*>(in);
  auto* blocks = static_cast<char*>(out);
  node.run_steps(
      h, what, n, cap,
      [&](std::size_t off, std::size_t m, int buf) {
        if (m) std::memcpy(node.area_half(me, buf), src + off * esz, m * esz); // n == 0: `in` may be null
      },
      [&](std::size_t off, std::size_t m, int buf) {
        // Own block from the area too (in place, `in` is that block); the
        // others first, so that the own copy reads a line still in cache.
        for (int i = 1; i <= L; ++i) {
          const int l = (me + i) % L;
          std::memcpy(blocks + (static_cast<std::size_t>(l) * n + off) * esz, node.area_half(l, buf),
                      m * esz);
        }
      });
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_BLOCK_COLLECTIVES_HPP
