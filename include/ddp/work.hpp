// ddp::work — the handle of an asynchronous collective.
#ifndef DDP_WORK_HPP
#define DDP_WORK_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/error.hpp>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

struct CUstream_st; // cudaStream_t is CUstream_st*: no CUDA header needed here

DDP_BEGIN_NAMESPACE

namespace detail {
/// Made with std::make_shared only (a backend that finishes a work later keeps it alive).
struct work_state : std::enable_shared_from_this<work_state> {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr failure;
  std::string what; ///< "all_reduce #12 (4096 x float32)": names it in a timeout
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  /// Set once a collective that completes on a device stream (NCCL, device
  /// tensors) is queued there: makes a stream wait for it on the device.
  /// Called under `mu`, and only before finish(). Empty for collectives that
  /// complete on the host.
  std::function<void(CUstream_st*)> order_stream;
  /// Such a collective's task returns before it completes: the backend calls
  /// finish() when the device is done, and the queue's bookkeeping (flight
  /// recorder, trace) for it runs then (after_deferred_finish).
  bool deferred = false;
  std::function<void(bool ok)> on_deferred_finish;

  /// Called by the running task once its collective is queued on a device
  /// stream, before it hands the work to whatever will finish() it (which
  /// may then happen at once, on another thread): from here on the task's
  /// return does not finish the work, and it must not throw.
  void queued_on_device(std::function<void(CUstream_st*)> order) {
    {
      std::lock_guard lock(mu);
      order_stream = std::move(order);
      deferred = true;
    }
    cv.notify_all();
  }

  /// The first call wins: a later one (a failure racing a completion) is ignored.
  void finish(std::exception_ptr e) {
    std::function<void(bool)> bookkeeping;
    {
      std::lock_guard lock(mu);
      if (finished) return;
      finished = true;
      failure = std::move(e);
      if (deferred) bookkeeping = std::move(on_deferred_finish); // empty: the queue sets it later
    }
    cv.notify_all();
    run_bookkeeping(bookkeeping, failure == nullptr);
  }

  /// By the queue, after a task that deferred its completion returned: `fn(ok)`
  /// runs when the work finishes, or now if it already did. (Set only then, so
  /// a collective that completes on the host allocates nothing for it.)
  void after_deferred_finish(std::function<void(bool)> fn) {
    bool ok = false;
    {
      std::lock_guard lock(mu);
      if (!finished) {
        on_deferred_finish = std::move(fn);
        return;
      }
      ok = failure == nullptr;
    }
    run_bookkeeping(fn, ok);
  }

  bool is_deferred() {
    std::lock_guard lock(mu);
    return deferred;
  }

private:
  /// Diagnostics only: on a backend's thread (NCCL's watcher), nothing may escape.
  static void run_bookkeeping(const std::function<void(bool)>& fn, bool ok) noexcept {
    if (!fn) return;
    try {
      fn(ok);
    } catch (...) {}
  }
};
} // namespace detail

class work {
public:
  work() = default;
  explicit work(std::shared_ptr<detail::work_state> s) : s_(std::move(s)) {}

  /// True once the collective finished, successfully or not.
  bool done() const {
    if (!s_) return true;
    std::lock_guard lock(s_->mu);
    return s_->finished;
  }

  /// Waits for the collective; rethrows its ddp::error. The backend's own
  /// timeout fires first; the extra margin here only guards against a
  /// collective that never reaches the wire.
  DDP_INLINE void wait() const;

  /// Stream-ordered wait: `stream` (a cudaStream_t; null: the default stream
  /// of the calling thread's device) waits, on the device, for the
  /// collective (what cudaStreamWaitEvent does with an event). Where it completes on a device stream
  /// (ddp::nccl, device tensors) the calling thread waits only until it was queued there, not for it to
  /// finish; a failure after that (a timeout, a lost peer) is reported by wait(), and the group refuses every
  /// later collective with it. Anywhere else (host memory, ddp::gloo) the result is written by the host: this
  /// is wait().
  DDP_INLINE void stream_wait(CUstream_st* stream) const;

private:
  std::shared_ptr<detail::work_state> s_;
};

DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/work-inl.hpp>
#endif

#endif // DDP_WORK_HPP
