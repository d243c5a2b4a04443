// ddp::work — the handle of an asynchronous collective.
#ifndef DDP_WORK_HPP
#define DDP_WORK_HPP

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
struct work_state {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr failure;
  std::string what; ///< "all_reduce #12 (4096 x float32)": names it in a timeout
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  /// Set by a backend whose collective completes on a device stream (NCCL,
  /// device tensors) once it is queued there: makes a stream wait for it on
  /// the device. Empty for collectives that complete on the host.
  std::function<void(CUstream_st*)> order_stream;

  /// Called by the running collective, on the backend's thread.
  void queued_on_device(std::function<void(CUstream_st*)> order) {
    {
      std::lock_guard lock(mu);
      order_stream = std::move(order);
    }
    cv.notify_all();
  }

  void finish(std::exception_ptr e) {
    {
      std::lock_guard lock(mu);
      finished = true;
      failure = std::move(e);
    }
    cv.notify_all();
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
  void wait() const {
    if (!s_) return;
    std::unique_lock lock(s_->mu);
    auto limit = s_->timeout + std::chrono::seconds(30);
    if (!s_->cv.wait_for(lock, limit, [&] { return s_->finished; }))
      throw error(error_kind::timeout,
                  s_->what + " did not complete within " + std::to_string(limit.count()) + " ms");
    if (s_->failure) std::rethrow_exception(s_->failure);
  }

  /// Stream-ordered wait: `stream` (a cudaStream_t; null: the legacy default
  /// stream of the calling thread's device) waits, on the device, for the
  /// collective. Where it completes on a device stream (ddp::nccl, device
  /// tensors) the calling thread waits only until it was queued there, not
  /// for it to finish; a failure after that (a timeout, a lost peer) is
  /// reported by wait(), and the group refuses every later collective with it.
  /// Anywhere else (host memory, ddp::gloo) the result is written by the host:
  /// this is wait().
  void wait_on(CUstream_st* stream) const {
    if (!s_) return;
    std::function<void(CUstream_st*)> order;
    {
      std::unique_lock lock(s_->mu);
      auto limit = s_->timeout + std::chrono::seconds(30);
      if (!s_->cv.wait_for(lock, limit, [&] { return s_->finished || s_->order_stream; }))
        throw error(error_kind::timeout,
                    s_->what + " was not queued within " + std::to_string(limit.count()) + " ms");
      if (s_->failure) std::rethrow_exception(s_->failure);
      order = s_->order_stream;
    }
    if (order) order(stream);
  }

private:
  std::shared_ptr<detail::work_state> s_;
};

DDP_END_NAMESPACE

#endif // DDP_WORK_HPP
