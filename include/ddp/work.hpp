// ddp::work — the handle of an asynchronous collective.
#ifndef DDP_WORK_HPP
#define DDP_WORK_HPP

#include <ddp/error.hpp>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

DDP_BEGIN_NAMESPACE

namespace detail {
struct work_state {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr failure;
  std::string what; ///< "all_reduce #12 (4096 x float32)": names it in a timeout
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};

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

private:
  std::shared_ptr<detail::work_state> s_;
};

DDP_END_NAMESPACE

#endif // DDP_WORK_HPP
