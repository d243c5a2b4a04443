// What every backend shares: one ordered queue of collectives per group (so
// ranks stay in lock-step and an async bucket never crosses a blocking call),
// each collective described once — "rank 1: all_reduce #12 (4096 x float32)" —
// so that a timeout or a failure names it, and the first failure poisoning the
// group. Every collective passes through the flight recorder on its way, and
// onto the timeline (DDP_TRACE) when that is on.
#ifndef DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP
#define DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP

#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/backend/ordered_queue.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/common/trace.hpp>
#include <ddp/detail/fault/flight_recorder.hpp>
#include <ddp/tensor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

class collective_queue {
public:
  /// `note` is appended to every description (", NCCL"); `label` names the
  /// worker's row on the timeline.
  collective_queue(int rank, std::chrono::milliseconds timeout, std::string note = {},
                   std::string label = "comm")
      : trace_(rank), rank_(rank), timeout_(timeout), note_(std::move(note)),
        queue_(std::make_unique<ordered_queue>(std::move(label))) {}

  /// The rank descriptions give (a subgroup's job rank); files and the
  /// timeline keep the rank the queue was made with.
  void show_rank(int rank) { shown_rank_ = rank; }

  /// A collective's work: body(what, state), `state` the returned work's.
  using body_type = std::function<void(const std::string& what, work_state& state)>;

  /// Queues `body(what, state)` behind every collective submitted before it.
  /// With `blocking`, a caller about to wait anyway runs it inline when the queue is idle. `bucket`: the DDP
  /// bucket this collective reduces, when the caller knows it (else the one distributed_data_parallel is
  /// launching on this thread, if any). Not a template: one copy of this code, whatever the body
  /// (a template on the body's type compiled once per kind of collective).
  work submit(std::string_view name, std::size_t n, dtype dt, bool blocking, body_type body,
              int bucket = -1) {
    const std::uint64_t seq = seq_++;
    std::string what = detail::message({"rank ", shown_rank_, ": ",
                                        (current_call ? current_call.describe() + ": " : std::string()), name,
                                        " #", seq, " (", n, " x ", to_string(dt), note_, ")"});
    if (bucket < 0) bucket = trace::submitting_bucket;
    recorder_.queued(seq, name, dt, n, bucket);
    traced t{-1, 0, bucket, nullptr};
    if (trace::on())
      t = {trace::now_ns(), static_cast<std::int64_t>(n * size_of(dt)), bucket, trace_label(name)};
    return queue_->submit(
        [this, body = std::move(body), what, seq, t](work_state& self) mutable {
          const std::int64_t start = t.queued_ns >= 0 ? trace::now_ns() : -1;
          recorder_.running(seq);
          auto done = [this, seq, t, start](bool ok) {
            recorder_.finished(seq, ok);
            t.record(seq, start);
            if (!ok) recorder_.dump_if_asked(rank_);
          };
          try {
            body(what, self);
          } catch (...) {
            done(false);
            throw;
          }
          if (self.is_deferred())
            self.after_deferred_finish(done); // NCCL's device collectives: when the device is done
          else
            done(true);
        },
        what, timeout_, blocking);
  }

  /// The last collectives of this rank (the desync report reads it).
  flight_recorder& recorder() noexcept { return recorder_; }

  /// Fails everything queued but not started with `why` and refuses later
  /// collectives; the one running (if any) finishes on its own. For a rank
  /// leaving on an error of its own, before it closes its connections.
  void abort(std::exception_ptr why) { queue_->abort(std::move(why)); }

  /// The error that poisoned the group, if any.
  std::exception_ptr poisoned() const { return queue_->poisoned(); }
  /// Blocks until every collective submitted so far has run.
  void drain() { queue_->drain(); }
  /// Finishes (or fails) what is queued and stops the worker: a backend calls
  /// this before it frees what its collectives use.
  /// abort() and poisoned() still work afterwards (a backend whose collectives
  /// finish later, on another thread, may fail the group then).
  void stop() { queue_->stop(); }

private:
  /// What the timeline keeps of a collective: when it was queued, its size and
  /// bucket, its kind as a string literal.
  struct traced {
    std::int64_t queued_ns; ///< -1: not traced
    std::int64_t bytes;
    int bucket;
    const char* label;
    void record(std::uint64_t seq, std::int64_t start) const {
      if (start < 0) return;
      trace::record(trace::kind::collective, start, trace::now_ns() - start, static_cast<std::int64_t>(seq),
                    bytes, bucket, start - queued_ns, label);
    }
  };
  static const char* trace_label(std::string_view name) {
    for (const char* k : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "all_to_all",
                          "gather", "scatter", "reduce"})
      if (name == k) return k;
    return "collective";
  }

  trace::session trace_; // first: the trace is written after the worker stopped
  int rank_;
  int shown_rank_ = rank_;
  std::chrono::milliseconds timeout_;
  std::string note_;
  std::atomic<std::uint64_t> seq_{0};
  flight_recorder recorder_; // before queue_: the worker records into it until it stops
  std::unique_ptr<ordered_queue> queue_ = std::make_unique<ordered_queue>();
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP
