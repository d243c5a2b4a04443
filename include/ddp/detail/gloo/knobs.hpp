// The Gloo communicator's knobs for tests and benches, in one place: the
// piece size of ddp's ring and chain, whether all_reduce may take the node's
// shared memory, and how many collectives took which shared-memory path.
#ifndef DDP_DETAIL_GLOO_KNOBS_HPP
#define DDP_DETAIL_GLOO_KNOBS_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/gloo/ring.hpp>
#include <ddp/error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

struct gloo_knobs {
  /// Larger pieces buy nothing, and sizes near SIZE_MAX would overflow the piece arithmetic.
  static constexpr std::size_t max_piece_bytes = std::size_t{1} << 30;

  /// gloo_communicator::set_ring_piece_bytes, checked for `rank`.
  void set_ring_piece_bytes(int rank, std::size_t bytes) {
    if (bytes == 0 || bytes > max_piece_bytes)
      detail::throw_error(error_kind::config,
                          {"rank ", rank, ": set_ring_piece_bytes(", bytes,
                           "): the piece size must be 1 B to ", max_piece_bytes, " B (1 GiB)"});
    ring_piece_bytes = bytes;
  }

  std::size_t ring_piece_bytes = fragment_ring::default_piece_bytes;
  /// use_shm(false): all_reduce, reduce_scatter and all_gather over TCP although the segment is there.
  bool shm_on = true;
  std::atomic<std::uint64_t> in_place_runs{0};  ///< all-reduces run in place in a shm array
  std::atomic<std::uint64_t> shm_block_runs{0}; ///< reduce_scatters and all_gathers run through the segment
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_KNOBS_HPP
