// Stops a backend's waits for a rank that failed while the connections form.
// A rank that fails then (a peer it cannot dial, an open-files refusal, a
// crash) is recorded in the store at once, but a rank waiting for that peer's
// connection inside Gloo heard nothing of it and waited DDP_TIMEOUT
// (docs/design-notes.md, "Note [failure during connect]"). process_group
// starts its peer-failure watch before the communicator; until the
// communicator exists, the watch's news (which rank was lost, and why) comes
// here, and a backend registers here, while it waits for connections, what
// ends its waits for that rank (gloo_mesh_context closes that rank's pair and
// lets the living peers finish: see there).
#ifndef DDP_DETAIL_FAULT_CONNECT_INTERRUPT_HPP
#define DDP_DETAIL_FAULT_CONNECT_INTERRUPT_HPP

#include <ddp/config.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

class connect_interrupt {
public:
  /// The news: the rank that was lost (a global rank; -1: none in
  /// particular) and why, for the error.
  struct news {
    int lost_rank = -1;
    std::string why;
  };
  /// Runs on the thread that brings the news, or in registration's
  /// constructor when the news came first; it must return promptly (a few
  /// milliseconds: it holds this object's lock).
  using stop_function = std::function<void(const news&)>;

  /// Records the news (the first sticks) and runs the registered stop, on
  /// the calling thread. Thread-safe.
  void interrupt(int lost_rank, std::string why) {
    {
      std::lock_guard lock(mu_);
      if (news_) return;
      news_ = news{lost_rank, std::move(why)};
      if (stop_) stop_(*news_);
    }
    news_cv_.notify_all();
  }

  /// Waits up to `timeout` for news; true once there is some.
  bool wait_for_news(std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return news_cv_.wait_for(lock, timeout, [&] { return news_.has_value(); });
  }

  /// Keeps `stop` registered while it lives; its destructor returns once the
  /// stop is not running any more (it may be running on another thread).
  class registration {
  public:
    registration(connect_interrupt& owner, stop_function stop) : owner_(owner) {
      std::lock_guard lock(owner_.mu_);
      owner_.stop_ = std::move(stop);
      if (owner_.news_) owner_.stop_(*owner_.news_); // interrupted already
    }
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration() {
      std::lock_guard lock(owner_.mu_);
      owner_.stop_ = nullptr;
    }

  private:
    connect_interrupt& owner_;
  };

private:
  mutable std::mutex mu_;
  mutable std::condition_variable news_cv_;
  std::optional<news> news_;
  stop_function stop_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_CONNECT_INTERRUPT_HPP
