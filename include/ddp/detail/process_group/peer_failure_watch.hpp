// Hears of a failed rank from the store, while the group lives, for the ranks
// that a collective's own connections would not tell: a rank that crashed,
// or gave up with process_group::abort, is recorded in the store at once
// (its dropped connection, or its report), but
//   - over TCP a rank waiting on a third rank learns nothing: Gloo reports a
//     closed connection only to operations posted on it (docs/design-notes.md,
//     "Note [peer failure watch]");
//   - over NCCL no peer learns anything until its own deadline.
// So one thread per group blocks in a store wait for the lost-rank key, on a
// connection of its own (the group's client stays free for its requests),
// and hands the first lost rank to the communicator once; a store that
// vanishes is rank 0's loss when rank 0 served it. The store answers a
// wait as soon as the key appears: no polling, nothing on the wire meanwhile.
#ifndef DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_WATCH_HPP
#define DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_WATCH_HPP

#include <ddp/store.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

class peer_failure_watch {
public:
  /// `on_failure(lost)` runs on the watch's thread, at most once, for a rank
  /// other than `self` (this rank's own failure is this rank's business), or
  /// with rank -1 when the launcher serving the store is gone.
  /// Connects at once, within connect_timeout at most: throws what tcp_store
  /// throws when the store is gone or takes no more connections.
  peer_failure_watch(const tcp_store& store, int self, std::function<void(const lost_rank&)> on_failure)
      : conn_(store.connect_again(std::min(store.timeout(), connect_timeout))), self_(self),
        on_failure_(std::move(on_failure)), thread_([this] { run(); }) {}

  /// A store that takes no connection more within this long is out of
  /// descriptors or overloaded (it sheds pending handshakes): the group goes
  /// on without the watch rather than wait out the store's timeout.
  static constexpr std::chrono::milliseconds connect_timeout{10000};

  peer_failure_watch(const peer_failure_watch&) = delete;
  peer_failure_watch& operator=(const peer_failure_watch&) = delete;
  ~peer_failure_watch() { stop(); }

  /// Returns once the callback cannot run any more (it may be running now:
  /// then after it returned). Never from the callback itself.
  void stop() noexcept {
    stopping_ = true;
    conn_->shutdown_connection(); // wakes the wait at once
    if (thread_.joinable()) thread_.join();
  }

private:
  void run() noexcept {
    try {
      while (!stopping_) {
        // A long wait, repeated: the store answers the moment the key appears.
        if (!conn_->try_wait({store_lost_key}, conn_->timeout())) continue;
        auto lost = conn_->wait_for_lost_rank(std::chrono::milliseconds(0));
        if (!stopping_ && lost && lost.rank != self_) on_failure_(lost);
        return;
      }
    } catch (...) {
      if (stopping_) return;
      // The store vanished or went silent: when rank 0 serves it, rank 0 died
      // or stopped (with NCCL nothing else would tell this rank before its
      // deadline); when ddprun serves it, the launcher died without stopping
      // its ranks (SIGKILL, the OOM killer), and nobody else will end this one.
      try {
        auto lost = conn_->wait_for_lost_rank(std::chrono::milliseconds(0));
        if (lost ? lost.rank != self_ : !lost.reason.empty()) on_failure_(lost);
      } catch (...) {}
    }
  }

  std::unique_ptr<tcp_store> conn_;
  int self_;
  std::function<void(const lost_rank&)> on_failure_;
  std::atomic<bool> stopping_{false};
  std::thread thread_; // last: starts after everything it reads
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_WATCH_HPP
