// Whether a shard group and a replicate group tile the world for hybrid
// sharding: every rank in one shard group of S ranks and one replicate group
// of R ranks, S × R = W, and each replicate group holding the same shard rank
// of every shard group. Each rank describes its two groups in a few integers;
// the records are all-gathered over the world and every rank runs the same
// check on the same records, so a bad layout is one error, the same text on
// every rank, and nothing waits on a mesh that cannot complete.
#ifndef DDP_DETAIL_SHARDED_HYBRID_TILING_HPP
#define DDP_DETAIL_SHARDED_HYBRID_TILING_HPP

#include <ddp/detail/common/linkage.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// One group as a rank sees it: whether it is a member, its rank and size
/// there, the group's name (unique per new_group/split call) and its members
/// as job ranks.
struct hybrid_side {
  bool member = false;
  int rank = -1;
  int size = 0;
  const std::string* name = nullptr;
  const std::vector<int>* job_ranks = nullptr;
};

inline constexpr std::size_t hybrid_record_fields = 7;

/// This rank's record: a problem code seen locally (not a member, a member
/// outside the world), then rank, size and identity of each group.
DDP_INLINE std::vector<std::int64_t> hybrid_record(const hybrid_side& shard, const hybrid_side& replicate,
                                                   const std::vector<int>& world_job_ranks);

/// "" when the gathered records (hybrid_record_fields per world rank) tile a
/// world of `world` ranks; else what is wrong, naming the ranks, the same on every rank.
DDP_INLINE std::string hybrid_tiling_problem(const std::vector<std::int64_t>& records, int world);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/sharded/hybrid_tiling-inl.hpp>
#endif

#endif // DDP_DETAIL_SHARDED_HYBRID_TILING_HPP
