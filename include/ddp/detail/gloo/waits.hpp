// The transport buffers ddp's collectives over Gloo (the header round, the
// fragment ring, the chain broadcast, the block exchange) send from and
// receive into, kept where another thread can
// end their waits: when a group fails from outside (process_group::abort, or
// the store reporting another rank failed), failing every connection is not
// enough. Gloo then fails the operations still queued on a connection, but
// not a send or receive already under way, and closes the socket, so that
// wait runs to its timeout (docs/design-notes.md, "Note [Gloo waits]").
// Ending the waits themselves (UnboundBuffer::abortWaitSend/abortWaitRecv,
// Gloo's public API) makes them return false, which gloo_deadline::check turns
// into a failure.
// This is why ddp runs none of Gloo's own collectives (its ring all-reduce,
// broadcast, all-gather, all-to-all): they keep their buffers to themselves,
// so a wait already under way there ends with its data or at its timeout.
#ifndef DDP_DETAIL_GLOO_WAITS_HPP
#define DDP_DETAIL_GLOO_WAITS_HPP

#include <ddp/config.hpp>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_waits {
public:
  /// Unregisters, then frees, a buffer made by make().
  struct release {
    gloo_waits* owner;
    void operator()(::gloo::transport::UnboundBuffer* b) const noexcept {
      owner->remove(b);
      delete b;
    }
  };
  using buffer = std::unique_ptr<::gloo::transport::UnboundBuffer, release>;

  /// A transport buffer over [data, data + bytes), registered until it is
  /// freed. After interrupt_all(), a new one starts out interrupted.
  buffer make(::gloo::Context& ctx, void* data, std::size_t bytes) {
    buffer b(ctx.createUnboundBuffer(data, bytes).release(), release{this});
    std::lock_guard lock(mu_);
    live_.push_back(b.get());
    if (interrupted_) end_waits(*b);
    return b;
  }

  /// Ends every wait on every registered buffer now (they return false), and
  /// every later one. Call it after the connections failed, so that no
  /// transfer still writes into memory its collective is about to give back.
  void interrupt_all() noexcept {
    std::lock_guard lock(mu_);
    interrupted_ = true;
    for (auto* b : live_)
      end_waits(*b);
  }

private:
  static void end_waits(::gloo::transport::UnboundBuffer& b) noexcept {
    b.abortWaitSend();
    b.abortWaitRecv();
  }

  void remove(::gloo::transport::UnboundBuffer* b) noexcept {
    std::lock_guard lock(mu_);
    live_.erase(std::remove(live_.begin(), live_.end(), b), live_.end());
  }

  std::mutex mu_;
  std::vector<::gloo::transport::UnboundBuffer*> live_;
  bool interrupted_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_WAITS_HPP
