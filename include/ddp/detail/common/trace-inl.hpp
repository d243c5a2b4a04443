// The definitions behind trace.hpp that every traced call reaches: compiled
// in every translation unit when ddp is header-only, once in the runtime when
// it is compiled separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_COMMON_TRACE_INL_HPP
#define DDP_DETAIL_COMMON_TRACE_INL_HPP

#include <ddp/detail/common/trace.hpp>

DDP_BEGIN_NAMESPACE
namespace detail::trace {

DDP_INLINE thread_ring& recorder::ring_of_this_thread() {
  if (my_ring) return *my_ring;
  std::lock_guard lock(mu_);
  auto r = std::make_unique<thread_ring>();
  r->capacity = capacity_ ? capacity_ : std::size_t{1} << 17;
  r->slots.reset(new event[r->capacity]);
  r->tid = static_cast<int>(rings_.size());
  r->name = thread_label ? thread_label : "compute";
  rings_.push_back(std::move(r));
  my_ring = rings_.back().get();
  return *my_ring;
}

DDP_INLINE void record(kind what, std::int64_t ts_ns, std::int64_t dur_ns, std::int64_t a0, std::int64_t a1,
                       std::int64_t a2, std::int64_t a3, const char* label) noexcept {
  thread_ring* r = my_ring;
  if (!r) {
    try {
      r = &recorder::get().ring_of_this_thread();
    } catch (...) { return; } // out of memory: lose the event, not the step
  }
  const auto n = r->count.load(std::memory_order_relaxed);
  r->slots[n % r->capacity] = event{ts_ns, dur_ns, label, what, {a0, a1, a2, a3}};
  r->count.store(n + 1, std::memory_order_release);
}

} // namespace detail::trace
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_TRACE_INL_HPP
