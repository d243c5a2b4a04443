// Which elements of each bucket a rank owns under sharded_data_parallel, and
// where they travel. A bucket of n elements is cut into W contiguous shards
// whose sizes differ by at most one (the first n % W ranks own one more); on
// the wire each shard is padded to c = ceil(n / W) elements, since the
// backends' reduce_scatter and all_gather move equal blocks. A pure function
// of the plan, the world size and the rank (tests/unit/test_shard_layout.cpp).
#ifndef DDP_DETAIL_SHARDED_SHARD_LAYOUT_HPP
#define DDP_DETAIL_SHARDED_SHARD_LAYOUT_HPP

#include <ddp/detail/data_parallel/bucket_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// A run of one parameter's elements inside one shard.
struct shard_run {
  std::size_t param;        ///< registration index
  std::size_t param_offset; ///< first element within the parameter
  std::size_t padded;       ///< its position in the padded wire layout (W blocks of `block`)
  std::size_t count;
  int owner; ///< the rank whose shard holds it
};

struct bucket_shards {
  std::size_t block = 0;        ///< c: elements per rank on the wire
  std::size_t begin = 0;        ///< this rank's first element of the bucket
  std::size_t size = 0;         ///< this rank's elements (block or block - 1, or 0)
  std::vector<shard_run> runs;  ///< every run, in bucket order
  std::vector<shard_run> owned; ///< this rank's runs
};

inline std::size_t shard_begin(std::size_t n, std::size_t world, std::size_t r) {
  return r * (n / world) + std::min(r, n % world);
}

inline bucket_shards shard_bucket(const planned_bucket& b, const std::vector<std::size_t>& counts, int world,
                                  int rank) {
  const auto w = static_cast<std::size_t>(world), n = b.elements;
  bucket_shards s;
  s.block = (n + w - 1) / w;
  s.begin = shard_begin(n, w, static_cast<std::size_t>(rank));
  s.size = shard_begin(n, w, static_cast<std::size_t>(rank) + 1) - s.begin;
  for (std::size_t k = 0; k < b.params.size(); ++k) {
    const std::size_t first = b.offsets[k], last = first + counts[b.params[k]];
    for (std::size_t r = 0; r < w; ++r) {
      const std::size_t lo = std::max(first, shard_begin(n, w, r)),
                        hi = std::min(last, shard_begin(n, w, r + 1));
      if (lo >= hi) continue;
      shard_run run{b.params[k], lo - first, r * s.block + (lo - shard_begin(n, w, r)), hi - lo,
                    static_cast<int>(r)};
      s.runs.push_back(run);
      if (static_cast<int>(r) == rank) s.owned.push_back(run);
    }
  }
  return s;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHARDED_SHARD_LAYOUT_HPP
