// The local check of all_to_all's counts per peer, before anything is queued:
// one count per rank on each side, and the tensors as long as their sums.
// Whether the ranks' counts fit each other is checked across ranks by the
// backend (detail/gloo/collectives.hpp).
#ifndef DDP_DETAIL_PROCESS_GROUP_SPLIT_COUNTS_HPP
#define DDP_DETAIL_PROCESS_GROUP_SPLIT_COUNTS_HPP

#include <ddp/detail/common/linkage.hpp>

#include <cstddef>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Throws ddp::error(config) naming `what`, the rank and the count at fault.
DDP_INLINE void check_split_counts(const char* what, int rank, int world, std::size_t in_size,
                                   const std::vector<std::size_t>& send_counts, std::size_t out_size,
                                   const std::vector<std::size_t>& recv_counts);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/process_group/split_counts-inl.hpp>
#endif

#endif // DDP_DETAIL_PROCESS_GROUP_SPLIT_COUNTS_HPP
