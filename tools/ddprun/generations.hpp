// The generations of in-process recovery across nodes, as every node's agent reads them from the
// store: which job ranks each generation holds.
#pragma once

#include <ddp/store.hpp>

#include <vector>

namespace ddprun {

/// The job ranks of each generation, read from what the survivors' meetings publish
/// ("r<k>/meet/g<g>/members": one "<rank in generation g-1> <node>" line per member).
class generations {
public:
  explicit generations(int world_size);
  /// Reads the generations published since the last look; whether there was a new one.
  /// Throws when the store does not answer.
  bool update(ddp::tcp_store& store, int round);
  int latest() const { return latest_; } ///< 0 until a meeting published generation 1
  bool member(int job_rank) const;
  const std::vector<int>& members() const { return members_; } ///< the latest's job ranks, in rank order

private:
  int latest_ = 0;
  std::vector<int> members_;
};

} // namespace ddprun
