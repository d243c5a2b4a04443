// One worker thread that runs a process group's collectives strictly in
// submission order. The first failure poisons the queue: every pending and
// every later task fails at once with that same error, so no rank waits on a
// collective its peers will never join.
#ifndef DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP
#define DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP

#include <ddp/detail/common/trace.hpp>
#include <ddp/work.hpp>

#include <deque>
#include <functional>
#include <string>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

class ordered_queue {
public:
  /// Gets its own work's state: a collective that completes on a device
  /// stream publishes how to wait for it there (work_state::queued_on_device).
  using task = std::function<void(work_state&)>;

private:
  struct item {
    task fn;
    std::shared_ptr<work_state> state;
  };

public:
  /// `label` names the worker's row on the timeline ("comm"; a subgroup's carries its name).
  explicit ordered_queue(std::string label = "comm") : label_(std::move(label)), thread_([this] { run(); }) {}
  ordered_queue(const ordered_queue&) = delete;
  ordered_queue& operator=(const ordered_queue&) = delete;
  ~ordered_queue() { stop(); }

  /// Runs (or fails) what is queued, then ends the worker; later submissions
  /// fail at once. abort() and poisoned() keep working.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

  /// Queues `fn`; the returned work completes when it ran (or failed), or,
  /// where `fn` deferred its completion, when its backend says so.
  /// With `inline_if_idle`, a caller that is about to wait anyway runs `fn`
  /// itself when nothing is queued or running: same order, no thread hand-off.
  work submit(task fn, std::string what, std::chrono::milliseconds timeout, bool inline_if_idle = false) {
    auto st = std::make_shared<work_state>();
    st->what = std::move(what);
    st->timeout = timeout;
    {
      std::lock_guard lock(mu_);
      if (poison_ || stop_) {
        st->finish(poison_ ? poison_
                           : std::make_exception_ptr(error(
                                 error_kind::backend, st->what + ": the process group is shutting down")));
        return work(st);
      }
      if (!inline_if_idle || busy_ || !q_.empty()) {
        q_.push_back({std::move(fn), st});
        cv_.notify_one();
        return work(st);
      }
      busy_ = true;
    }
    execute(item{std::move(fn), st});
    return work(st);
  }

  /// The error that poisoned the queue, if any.
  std::exception_ptr poisoned() const {
    std::lock_guard lock(mu_);
    return poison_;
  }

  /// Poisons the queue with `why` (unless already poisoned): what is queued
  /// fails now, later submissions fail at once; a running task is not touched.
  void abort(std::exception_ptr why) {
    std::deque<item> failed;
    {
      std::lock_guard lock(mu_);
      if (!poison_) poison_ = std::move(why);
      why = poison_;
      failed.swap(q_);
    }
    for (auto& f : failed)
      f.state->finish(why);
    idle_cv_.notify_all();
  }

  /// Blocks until everything queued so far has run.
  void drain() {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return q_.empty() && !busy_; });
  }

private:
  void run() {
    trace::thread_label = label_.c_str(); // its row on the timeline (the ring copies it)
    for (;;) {
      item it;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !busy_ && (stop_ || !q_.empty()); });
        if (q_.empty()) return; // stop_ and nothing left
        it = std::move(q_.front());
        q_.pop_front();
        busy_ = true;
      }
      execute(std::move(it));
    }
  }

  /// Runs one item; the caller has set busy_.
  void execute(item it) {
    std::exception_ptr failure;
    try {
      it.fn(*it.state);
    } catch (...) { failure = std::current_exception(); }
    std::deque<item> failed;
    {
      std::lock_guard lock(mu_);
      if (failure && !poison_) {
        poison_ = failure;
        failed.swap(q_);
      }
      busy_ = false;
      // Notified under the lock: once the works below finish, a waiting thread
      // may destroy this queue, so nothing here may touch it after that.
      idle_cv_.notify_all();
      // The worker only when items queued behind an inline run (or a stop
      // waited for it): waking the idle worker after every inline collective
      // cost a futex wake and a context switch each; a 4 KiB all-reduce over
      // shm at 2 ranks took 13 us (median of 3000) that way, 2-4.6 us without.
      if (!q_.empty() || stop_) cv_.notify_one();
    }
    // A task whose collective completes on a device stream (work_state::
    // queued_on_device) is finished by its backend when the device is done.
    if (failure || !it.state->is_deferred()) it.state->finish(failure);
    for (auto& f : failed)
      f.state->finish(failure);
  }

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<item> q_;
  std::exception_ptr poison_;
  bool busy_ = false;
  bool stop_ = false;
  std::string label_; // before thread_: the worker reads it
  std::thread thread_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP
