// The definitions behind step_state.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_STATE_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_STATE_INL_HPP

#include <ddp/detail/data_parallel/step_state.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE step_state::step_state(const bucket_plan& plan) : plan_(plan) {
  marks_.assign(plan.bucket_of.size(), mark_state::pending);
  pending_.resize(plan.buckets.size());
  reset();
}

DDP_INLINE void step_state::skip_empty(const std::vector<bool>& empty) {
  empty_ = empty;
  reset();
}

DDP_INLINE void step_state::reset() {
  std::fill(marks_.begin(), marks_.end(), mark_state::pending);
  for (std::size_t i = 0; i < pending_.size(); ++i)
    pending_[i] = plan_.buckets[i].params.size();
  for (std::size_t p = 0; p < marks_.size(); ++p)
    if (is_empty(p)) mark(p, mark_state::ready);
  next_launch_ = 0;
  started_ = false;
}

// After reserve(): assign allocates nothing, and reset() only counts.
DDP_INLINE void step_state::plan_changed() noexcept {
  pending_.assign(plan_.buckets.size(), 0);
  reset();
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_STATE_INL_HPP
