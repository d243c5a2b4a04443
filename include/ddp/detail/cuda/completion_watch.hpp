// Finishes the works of collectives that complete on a device stream (NCCL,
// device tensors), from a thread of its own, in the order they were queued.
// The communicator's worker queues such a collective, records an event after
// it and hands both here instead of waiting: so it can queue the next one at
// once (a step's buckets reach NCCL back to back, and work::stream_wait
// returns as soon as its collective is queued, not after those before it
// ended), while every collective keeps its deadline. PyTorch's NCCL watchdog
// does the same job. The watcher polls the oldest event (one stream: they
// complete in order), the communicator's health (`comm_error`) and the
// deadline; the first failure fails the group (`fail_group`: abort, poison)
// and every work still watched.
#ifndef DDP_DETAIL_CUDA_COMPLETION_WATCH_HPP
#define DDP_DETAIL_CUDA_COMPLETION_WATCH_HPP

#include <ddp/detail/common/trace.hpp>
#include <ddp/detail/cuda/runtime.hpp>
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
namespace detail::cuda {

class completion_watch {
public:
  using clock = std::chrono::steady_clock;

  /// `comm_error(what)`: the communicator's asynchronous error, if any, as a
  /// failure of collective `what` (polled while one is outstanding). `fail_group(why)`: aborts the
  /// communicator and poisons the group; called once, on the watcher thread.
  completion_watch(int rank, int device, std::chrono::milliseconds timeout,
                   std::function<std::exception_ptr(const std::string&)> comm_error,
                   std::function<void(std::exception_ptr)> fail_group)
      : rank_(rank), device_(device), timeout_(timeout), comm_error_(std::move(comm_error)),
        fail_group_(std::move(fail_group)), thread_([this] { run(); }) {}
  completion_watch(const completion_watch&) = delete;
  completion_watch& operator=(const completion_watch&) = delete;
  ~completion_watch() { stop(); }

  /// Takes over `st` (its task called queued_on_device): finished when `done`
  /// completes, failed at `deadline`. Called by the communicator's worker. At
  /// most `capacity` are outstanding; beyond, this waits (bounded by the
  /// oldest one's deadline, which the watcher enforces).
  void watch(std::shared_ptr<work_state> st, std::shared_ptr<event> done, clock::time_point deadline,
             std::string what) noexcept {
    std::unique_lock lock(mu_);
    room_.wait_for(lock, timeout_ + std::chrono::seconds(30),
                   [&] { return failed_ || stop_ || q_.size() < capacity; });
    if (failed_ || stop_) {
      auto why = failed_ ? failed_
                         : std::make_exception_ptr(error(
                               error_kind::backend, what + ": the communicator is shutting down", rank_));
      lock.unlock();
      st->finish(why);
      return;
    }
    q_.push_back({std::move(st), std::move(done), deadline, std::move(what)});
    lock.unlock();
    work_.notify_one();
  }

  /// Blocks until every collective handed over so far has completed or failed
  /// (each is bounded by its deadline).
  void drain() {
    std::unique_lock lock(mu_);
    room_.wait_for(lock, timeout_ + std::chrono::seconds(30), [&] { return q_.empty(); });
  }

  /// Waits for what is outstanding (as drain()), then ends the thread.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (!thread_.joinable()) return;
      stop_ = true;
    }
    work_.notify_all();
    room_.notify_all();
    thread_.join();
  }

  /// At most this many collectives outstanding on the device; far more than
  /// a step's buckets, and it bounds the events alive at once.
  static constexpr std::size_t capacity = 4096;

private:
  struct outstanding {
    std::shared_ptr<work_state> state;
    std::shared_ptr<event> done;
    clock::time_point deadline;
    std::string what;
  };

  void run() {
    trace::thread_label = "comm (device)";
    if (cudaSetDevice(device_) != cudaSuccess) cudaGetLastError(); // events query on any device anyway
    for (;;) {
      const outstanding* front = nullptr; // stable: only this thread pops, push_back keeps references
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return; // stop_, and nothing left
        front = &q_.front();
      }
      std::exception_ptr why = poll(*front);
      if (why) {
        fail_all(why);
        continue;
      }
      if (!completed_) {
        // 20 us, as the worker's own sync() polls: a coarser sleep is latency
        // added to every collective's work, a finer one a busier core.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        continue;
      }
      completed_ = false;
      std::shared_ptr<work_state> st;
      {
        std::lock_guard lock(mu_);
        st = std::move(q_.front().state);
        q_.pop_front();
      }
      room_.notify_all();
      st->finish(nullptr);
    }
  }

  /// Sets completed_ when `o` completed; returns its failure, if it failed.
  std::exception_ptr poll(const outstanding& o) {
    cudaError_t e = cudaEventQuery(o.done->get());
    if (e == cudaSuccess) {
      completed_ = true;
      return nullptr;
    }
    if (e != cudaErrorNotReady) {
      cudaGetLastError();
      return std::make_exception_ptr(error(error_kind::backend,
                                           o.what + " failed on the device: " + cudaGetErrorString(e) +
                                               "; the NCCL communicator was aborted",
                                           rank_));
    }
    if (auto x = comm_error_(o.what)) return x;
    if (clock::now() > o.deadline)
      return std::make_exception_ptr(error(error_kind::timeout,
                                           o.what + " timed out after " + std::to_string(timeout_.count()) +
                                               " ms: a rank stalled, died or skipped this collective; the "
                                               "NCCL communicator was aborted",
                                           -1));
    return nullptr;
  }

  /// The group fails (once) and every outstanding work with it; later
  /// watch() calls fail at once.
  void fail_all(std::exception_ptr why) {
    std::deque<outstanding> failed;
    bool first = false;
    {
      std::lock_guard lock(mu_);
      first = !failed_;
      if (first) failed_ = why;
      why = failed_;
      failed.swap(q_);
    }
    if (first) fail_group_(why);
    room_.notify_all();
    for (auto& o : failed)
      o.state->finish(why);
  }

  int rank_, device_;
  std::chrono::milliseconds timeout_;
  std::function<std::exception_ptr(const std::string&)> comm_error_;
  std::function<void(std::exception_ptr)> fail_group_;
  std::mutex mu_;
  std::condition_variable work_, room_;
  std::deque<outstanding> q_;
  std::exception_ptr failed_;
  bool stop_ = false;
  bool completed_ = false; ///< watcher thread only
  std::thread thread_;     // last: started once the rest exists
};

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_COMPLETION_WATCH_HPP
