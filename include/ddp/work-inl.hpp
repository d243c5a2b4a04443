// The definitions behind work.hpp: compiled in every translation unit when
// ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_WORK_INL_HPP
#define DDP_WORK_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/work.hpp>

DDP_BEGIN_NAMESPACE

DDP_INLINE void work::wait() const {
  if (!s_) return;
  std::unique_lock lock(s_->mu);
  auto limit = s_->timeout + std::chrono::seconds(30);
  if (!s_->cv.wait_for(lock, limit, [&] { return s_->finished; }))
    detail::throw_error(error_kind::timeout, {s_->what, " did not complete within ", limit.count(), " ms"});
  if (s_->failure) std::rethrow_exception(s_->failure);
}

DDP_INLINE void work::stream_wait(CUstream_st* stream) const {
  if (!s_) return;
  std::unique_lock lock(s_->mu);
  auto limit = s_->timeout + std::chrono::seconds(30);
  if (!s_->cv.wait_for(lock, limit, [&] { return s_->finished || s_->order_stream; }))
    detail::throw_error(error_kind::timeout, {s_->what, " was not queued within ", limit.count(), " ms"});
  if (s_->failure) std::rethrow_exception(s_->failure);
  // A finished collective needs no device wait, and a backend may reuse what
  // order_stream waits on (a pooled event) once the work finished: so it is
  // called only before that, under the lock finish() takes.
  if (!s_->finished && s_->order_stream) s_->order_stream(stream);
}

DDP_END_NAMESPACE

#endif // DDP_WORK_INL_HPP
