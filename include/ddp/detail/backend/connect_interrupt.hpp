// Stops a backend that is still connecting when another rank has failed.
// A rank that fails while the job's connections form (a peer it cannot dial,
// an open-files refusal, a crash) is recorded in the store at once, but a rank
// waiting for that peer's connection inside Gloo heard nothing of it and
// waited DDP_TIMEOUT (measured in dist.netns.unreachable: node 1's ranks
// failed after 7.05 s at DDP_TIMEOUT=6s, where node 0's had failed at 1 s; at
// the default timeout, ten minutes). process_group now starts its peer-failure
// watch before the communicator; until the communicator exists, the watch's
// news goes here, and a backend registers here, while it waits for
// connections, what ends those waits (gloo_mesh_context closes its pairs).
#ifndef DDP_DETAIL_BACKEND_CONNECT_INTERRUPT_HPP
#define DDP_DETAIL_BACKEND_CONNECT_INTERRUPT_HPP

#include <ddp/config.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

class connect_interrupt {
public:
  using stop_function = std::function<void(const std::string& why)>;

  /// Records why (the first reason sticks) and runs the registered stop, on
  /// the calling thread. Thread-safe.
  void interrupt(std::string why) {
    std::lock_guard lock(mu_);
    if (why_) return;
    why_ = std::move(why);
    if (stop_) stop_(*why_);
  }

  /// Why the connect was interrupted; empty while it was not.
  std::optional<std::string> why() const {
    std::lock_guard lock(mu_);
    return why_;
  }

  /// Keeps `stop` registered while it lives; its destructor returns once the
  /// stop is not running any more (it may be running on another thread).
  class registration {
  public:
    registration(connect_interrupt& owner, stop_function stop) : owner_(owner) {
      std::lock_guard lock(owner_.mu_);
      owner_.stop_ = std::move(stop);
      if (owner_.why_) owner_.stop_(*owner_.why_); // interrupted already
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
  std::optional<std::string> why_;
  stop_function stop_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_CONNECT_INTERRUPT_HPP
