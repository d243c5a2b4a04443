// The generations of in-process recovery across nodes, as every node's agent reads them from the
// store: which job ranks each generation holds.
#pragma once

#include <ddp/store.hpp>

#include <utility>
#include <vector>

namespace ddprun {

/// The job ranks of each generation, read from what the survivors' meetings publish
/// ("r<k>/meet/g<g>/members": one "<rank in generation g-1> <node>" line per member; a joiner's
/// line names ddp::detail::joiner_rank_base + the job rank of the slot it was started in).
class generations {
public:
  explicit generations(int world_size);
  /// Reads the generations published since the last look; whether there was a new one.
  /// Throws when the store does not answer.
  bool update(ddp::tcp_store& store, int round);
  int latest() const { return latest_; } ///< 0 until a meeting published generation 1
  bool member(int job_rank) const;
  /// Whether the latest generation holds `job_rank` as a member that entered in a generation
  /// above `after` (a joiner started when generation `after` was the latest), or at or below it.
  bool member_since_above(int job_rank, int after) const;
  bool member_since_at_most(int job_rank, int after) const;
  /// Whether the latest generation holds `job_rank` as the member that entered in `generation`.
  bool member_entered_at(int job_rank, int generation) const;
  /// Whether some joiner in `job_rank`'s slot entered a generation above `after`, whether or not
  /// the latest still holds it. Only a hint: two joiners of one slot (the first published, then
  /// dead) enter different generations, and only a joiner's own claim says which one is its.
  bool joiner_entered_after(int job_rank, int after) const;
  /// Whether `generation` took in a joiner in `job_rank`'s slot.
  bool joiner_entered(int job_rank, int generation) const;
  const std::vector<int>& members() const { return members_; } ///< the latest's job ranks, in rank order

private:
  int latest_ = 0;
  std::vector<int> members_;
  std::vector<int> since_; ///< the generation each member entered (0: the job's start)
  /// Every joiner that entered: {generation, job rank of its slot}.
  std::vector<std::pair<int, int>> joiners_entered_;
};

} // namespace ddprun
