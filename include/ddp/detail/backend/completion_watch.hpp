// Finishes the works of collectives that complete on a device stream (NCCL,
// device tensors), from a thread of its own, in the order they were queued.
// The communicator's worker queues such a collective, records an event after
// it and hands both here instead of waiting: so it queues the next one at once
// (a step's buckets reach NCCL back to back, and work::stream_wait returns as
// soon as its collective is queued, not after those before it ended), while
// every collective keeps its deadline. PyTorch's NCCL watchdog does this job.
//
// The watcher polls the oldest outstanding completion (one stream: they
// complete in order), the communicator's health (`health(what)`: its
// asynchronous error, or the group's error once it was aborted: an aborted
// NCCL communicator's kernels exit, so its events complete, and that is not
// a success) and the deadline. The first failure poisons the group, fails
// every outstanding work, then aborts the communicator; so does fail_all(),
// for a failure the communicator's worker found.
//
// `Completion` is a device event's handle: `bool ready() const` (throws a
// ddp::error when the device reported an error). CUDA-free, so tests/unit
// drives it with completions of their own.
#ifndef DDP_DETAIL_BACKEND_COMPLETION_WATCH_HPP
#define DDP_DETAIL_BACKEND_COMPLETION_WATCH_HPP

#include <ddp/detail/common/trace.hpp>
#include <ddp/error.hpp>
#include <ddp/work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Completion> class completion_watch {
public:
  using clock = std::chrono::steady_clock;

  /// Called on whichever thread found the failure, with no lock of this
  /// class held; none may call fail_all().
  struct hooks {
    std::function<void()> on_start;                               ///< on the watcher thread (cudaSetDevice)
    std::function<std::exception_ptr(const std::string&)> health; ///< see above
    /// Refuses later collectives with the group's error and returns it: the
    /// first failure poisons the group (this one, or one the worker's job
    /// reported meanwhile); the works fail with the same error.
    std::function<std::exception_ptr(std::exception_ptr)> poison;
    std::function<void()> abort; ///< once, after the works failed (an abort may block: cudaFree)
    /// How often `health` runs while nothing completes (it also runs at every
    /// completion): each call takes the communicator's lock its worker
    /// enqueues under.
    std::chrono::microseconds health_every{1000};
  };

  completion_watch(int rank, std::chrono::milliseconds timeout, hooks h)
      : rank_(rank), timeout_(timeout), hooks_(std::move(h)), thread_([this] { run(); }) {}
  completion_watch(const completion_watch&) = delete;
  completion_watch& operator=(const completion_watch&) = delete;
  ~completion_watch() { stop(); }

  /// Takes over `st` (its task called queued_on_device): finished when `done`
  /// is ready, failed at `deadline` (counted from when it was queued, so it
  /// includes the device's backlog ahead of it, as PyTorch's does). Called by
  /// the communicator's worker. Beyond `capacity` outstanding this waits,
  /// bounded by the oldest one's deadline, which the watcher enforces.
  void watch(std::shared_ptr<work_state> st, Completion done, clock::time_point deadline,
             std::string what) noexcept {
    std::unique_lock lock(mu_);
    room_.wait_for(lock, timeout_ + std::chrono::seconds(30),
                   [&] { return failed_ || stop_ || q_.size() < capacity; });
    if (failed_ || stop_) {
      auto why = failed_ ? failed_ : shutting_down(what);
      lock.unlock();
      st->finish(why);
      return;
    }
    q_.push_back(std::make_shared<outstanding>(
        outstanding{std::move(st), std::move(done), deadline, std::move(what)}));
    lock.unlock();
    work_.notify_one();
  }

  /// Fails the group (once: poison, the works, then abort) and every
  /// outstanding work with `why`; later watch() calls fail at once. From any
  /// thread but inside a hook.
  void fail_all(std::exception_ptr why) {
    if (hooks_.poison) why = hooks_.poison(why); // the group's error, whoever failed first
    std::deque<std::shared_ptr<outstanding>> failed;
    bool first = false;
    {
      std::lock_guard lock(mu_);
      first = !failed_;
      if (first) failed_ = why;
      why = failed_;
      failed.swap(q_);
    }
    room_.notify_all();
    for (auto& o : failed)
      o->state->finish(why);
    if (first && hooks_.abort) hooks_.abort();
  }

  /// Blocks until every collective handed over so far completed or failed
  /// (each is bounded by its deadline; this wait too).
  void drain() {
    std::unique_lock lock(mu_);
    room_.wait_for(lock, timeout_ + std::chrono::seconds(30), [&] { return q_.empty(); });
  }

  /// Waits for what is outstanding (as drain()), then ends the thread.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    work_.notify_all();
    room_.notify_all();
    if (thread_.get_id() != std::this_thread::get_id())
      thread_.join();
    else
      thread_.detach(); // from a finish on the watcher itself: nothing may touch this object after
  }

  /// At most this many collectives outstanding on the device: far more than
  /// a step's buckets; it bounds the events alive at once.
  static constexpr std::size_t capacity = 4096;

private:
  struct outstanding {
    std::shared_ptr<work_state> state;
    Completion done;
    clock::time_point deadline;
    std::string what;
  };

  std::exception_ptr shutting_down(const std::string& what) const {
    return std::make_exception_ptr(
        error(error_kind::backend, what + ": the communicator is shutting down", rank_));
  }

  void run() {
    trace::thread_label = "comm (device)";
    if (hooks_.on_start) hooks_.on_start();
    auto last_health = clock::now();
    for (;;) {
      std::shared_ptr<outstanding> front; // a copy: fail_all() may empty q_ from another thread
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return; // stop_, and nothing left
        front = q_.front();
      }
      const auto now = clock::now();
      std::exception_ptr why;
      bool ready = false;
      try {
        ready = front->done.ready();
      } catch (...) { why = std::current_exception(); }
      // The communicator's health: at every completion (an aborted
      // communicator's events complete too), else once a millisecond (each
      // check takes the communicator's lock its worker enqueues under).
      if (!why && (ready || now - last_health > hooks_.health_every)) {
        last_health = now;
        if (hooks_.health) why = hooks_.health(front->what);
      }
      if (!why && !ready && now > front->deadline)
        why = std::make_exception_ptr(error(error_kind::timeout,
                                            front->what + " timed out after " +
                                                std::to_string(timeout_.count()) +
                                                " ms: a rank stalled, died or skipped this collective; the "
                                                "NCCL communicator was aborted",
                                            -1));
      if (why) {
        fail_all(why);
        continue;
      }
      if (!ready) {
        // 20 us while the oldest is young (a small collective's work is not
        // held up by a coarse sleep), then 200 us: a collective that runs for
        // milliseconds gets noticed a fraction later and this thread stays
        // off the cores backward computes on.
        const bool young = now - front->deadline + timeout_ < std::chrono::milliseconds(2);
        std::this_thread::sleep_for(std::chrono::microseconds(young ? 20 : 200));
        continue;
      }
      {
        std::lock_guard lock(mu_);
        if (q_.empty() || q_.front() != front) continue; // fail_all() took it meanwhile
        q_.pop_front();
      }
      room_.notify_all();
      front->state->finish(nullptr);
    }
  }

  int rank_;
  std::chrono::milliseconds timeout_;
  hooks hooks_;
  std::mutex mu_;
  std::condition_variable work_, room_;
  std::deque<std::shared_ptr<outstanding>> q_;
  std::exception_ptr failed_;
  bool stop_ = false;
  std::thread thread_; // last: started once the rest exists
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_COMPLETION_WATCH_HPP
