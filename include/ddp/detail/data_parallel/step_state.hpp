// One step of distributed_data_parallel as a state machine: which gradients
// are marked (ready, or unused on this rank), how many each bucket still
// waits for, and which bucket launches next — strictly in bucket order, so
// every rank issues the same collectives in the same order.
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_STATE_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_STATE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class mark_state : std::uint8_t { pending, ready, unused };

class step_state {
public:
  DDP_INLINE explicit step_state(const bucket_plan& plan);

  /// Zero-sized parameters have nothing to reduce: they count as marked from
  /// the start of every step, and their marks are ignored (step_driver).
  DDP_INLINE void skip_empty(const std::vector<bool>& empty);
  bool is_empty(std::size_t param) const { return param < empty_.size() && empty_[param]; }

  bool started() const noexcept { return started_; }
  std::size_t buckets() const noexcept { return pending_.size(); }
  /// Whether launch_ready(…, limit) would launch a bucket now.
  bool can_launch(std::size_t limit) const {
    return next_launch_ < std::min(limit, pending_.size()) && pending_[next_launch_] == 0;
  }
  /// Whether a bucket of this step has been launched (its collective is in flight).
  bool launched_any() const noexcept { return next_launch_ > 0; }
  /// How many of this step's buckets have been launched.
  std::size_t launched() const noexcept { return next_launch_; }
  void start() noexcept { started_ = true; }
  bool is_pending(std::size_t param) const { return marks_[param] == mark_state::pending; }
  bool marked_unused(std::size_t param) const { return marks_[param] == mark_state::unused; }
  /// Whether no gradient is pending (every one was marked, or is zero-sized).
  bool all_marked() const {
    for (auto p : pending_)
      if (p) return false;
    return true;
  }

  /// Records the mark (the caller checked it was pending).
  void mark(std::size_t param, mark_state how) {
    marks_[param] = how;
    --pending_[plan_.bucket_of[param]];
  }

  /// Calls launch(bucket) for every bucket below `limit` that is complete, in
  /// bucket order, stopping at the first that is not.
  template <class F> void launch_ready(F&& launch, std::size_t limit) {
    limit = std::min(limit, pending_.size());
    while (next_launch_ < limit && pending_[next_launch_] == 0)
      launch(next_launch_++);
  }

  DDP_INLINE void reset();
  /// The plan was laid out again between steps (bucket_order.hpp): counts per new bucket.
  DDP_INLINE void plan_changed() noexcept;
  /// Room for `buckets` buckets, before the plan is replaced (may throw).
  void reserve(std::size_t buckets) { pending_.reserve(buckets); }

private:
  const bucket_plan& plan_;
  std::vector<mark_state> marks_;
  std::vector<bool> empty_;          ///< per parameter: zero-sized
  std::vector<std::size_t> pending_; ///< per bucket: gradients not yet marked
  std::size_t next_launch_ = 0;
  bool started_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/step_state-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_STATE_HPP
