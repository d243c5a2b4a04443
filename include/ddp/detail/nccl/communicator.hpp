// The NCCL communicator behind ddp::nccl (backend/nccl.hpp): GPU collectives.
// Tensors in device memory (ddp::device_span, passed with the device_memory
// tag: known at compile time) go to NCCL directly; host tensors are staged
// through a pinned host buffer and a device buffer kept across calls.
// Collectives are queued in submission order by one worker thread on one CUDA
// stream. A device collective's job does not wait for it: it records an event
// after it and hands the work to a watcher thread (completion_watch.hpp) that
// finishes it when the event completes, so a step's collectives reach NCCL
// back to back, and work::stream_wait(stream) makes a caller's stream wait for
// that event without blocking the caller. A host collective's job waits for
// the stream (the copy back needs it). Every wait polls with a deadline and
// aborts the communicator on timeout or error, so a dead or stalled peer is an
// error naming the collective, not a hang.
#ifndef DDP_DETAIL_NCCL_COMMUNICATOR_HPP
#define DDP_DETAIL_NCCL_COMMUNICATOR_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/collective_queue.hpp>
#include <ddp/detail/backend/completion_watch.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/cuda/runtime.hpp>
#include <ddp/op.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// An event recorded after a collective on NCCL's stream, as completion_watch
/// polls it. The event goes back to its pool when the watcher drops this, after
/// the work finished: work::stream_wait no longer asks for it by then.
class event_completion {
public:
  event_completion(cuda::event_pool& pool, cudaEvent_t event, int rank) noexcept
      : pool_(&pool), event_(event), rank_(rank) {}
  event_completion(event_completion&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), event_(o.event_), rank_(o.rank_) {}
  event_completion& operator=(event_completion&&) = delete;
  ~event_completion() {
    if (pool_) pool_->release(event_);
  }
  bool ready() const {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    cuda::check(e, "cudaEventQuery (a collective's completion, on NCCL's stream)", rank_);
    return true;
  }

private:
  cuda::event_pool* pool_;
  cudaEvent_t event_;
  int rank_;
};

inline ncclDataType_t nccl_type(dtype d) {
  switch (d) {
  case dtype::f32: return ncclFloat32;
  case dtype::f64: return ncclFloat64;
  case dtype::f16: return ncclFloat16;
  case dtype::bf16: return ncclBfloat16;
  case dtype::i32: return ncclInt32;
  case dtype::i64: return ncclInt64;
  case dtype::u8: return ncclUint8;
  case dtype::i8: return ncclInt8;
  }
  return ncclFloat32;
}

inline ncclRedOp_t nccl_op(op o) {
  switch (o) {
  case op::sum: return ncclSum;
  case op::avg: return ncclAvg;
  case op::min: return ncclMin;
  case op::max: return ncclMax;
  case op::product: return ncclProd;
  }
  return ncclSum;
}

class nccl_communicator {
public:
  explicit nccl_communicator(const rendezvous& rv)
      : rank_(rv.topo.rank), size_(rv.topo.world_size), timeout_(rv.timeout), store_(rv.store),
        events_(rank_), queue_(rank_, timeout_, ", NCCL") {
    if (!store_)
      throw error(error_kind::config,
                  "the NCCL backend needs env:// or tcp:// initialisation (file:// has no store)");
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0)
      throw error(error_kind::backend,
                  "rank " + std::to_string(rank_) + ": no usable CUDA device for NCCL (cudaGetDeviceCount: " +
                      (ce != cudaSuccess ? std::string(cudaGetErrorString(ce)) : std::string("0 devices")) +
                      "). On machines without a GPU use ddp::gloo.",
                  rank_);
    device_ = cuda_device_for(rv.topo, count); // LOCAL_RANK within the visible devices
    cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) {
      nccl_call(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store_->set("ddp/nccl/unique_id", std::string_view(reinterpret_cast<const char*>(&id), sizeof id));
    } else {
      auto bytes = store_->get("ddp/nccl/unique_id");
      if (bytes.size() != sizeof id)
        throw error(error_kind::backend, "malformed NCCL unique id in the store");
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // so that every wait below can time out
    nccl_call(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig");
    // Not the collectives' timeout alone: init loads NCCL's kernels and reads the topology
    // before any peer matters, about 0.5-1.1 s on one GPU (NCCL's "Init timings" lines in
    // public logs: 0.66 s, 0.96 s, 1.08 s), so a short DDP_TIMEOUT (1 s in gpu.nccl.timeout)
    // would fail init itself.
    const auto init_limit = std::max<std::chrono::milliseconds>(timeout_, std::chrono::seconds(60));
    await_comm("ncclCommInitRankConfig", clock::now() + init_limit, init_limit);
    grow_scratch(initial_scratch_bytes, initial_scratch_bytes);
    cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    watch_.emplace(rank_, timeout_,
                   watch_type::hooks{.on_start = [this] { watcher_on_device(); },
                                     .health = [this](const std::string& what) { return async_error(what); },
                                     .poison =
                                         [this](std::exception_ptr why) {
                                           queue_.abort(why);
                                           return queue_.poisoned();
                                         },
                                     .abort = [this] { abort(); }});
  }

  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;

  ~nccl_communicator() {
    queue_.stop();  // finish or fail what is queued, stop the worker
    watch_.reset(); // then what the device still runs (each until its deadline)
    cuda::device_guard on(device_,
                          std::nothrow); // the stream and scratch belong to it; the caller's may differ
    // The communicator first (finalized within its deadline, else aborted):
    // until then NCCL may still use its stream and the staging buffers.
    if (comm_ && !aborted_) {
      ncclCommFinalize(comm_);
      ncclResult_t state = ncclInProgress;
      auto deadline = clock::now() + std::chrono::seconds(10);
      while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
             clock::now() < deadline)
        std::this_thread::yield();
      if (state == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    }
    scratch_ = {};
    pinned_ = {};
    outgrown_.clear();
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::exception_ptr poisoned() const { return queue_.poisoned(); }
  /// This rank failed on its own (process_group::abort): later collectives are
  /// refused with `reason`, outstanding ones fail, the communicator is aborted.
  /// NCCL has no way to tell the peers: they learn it from the store
  /// (process_group's peer_failure_watch, then fail_for_peer).
  void abort_for_failure(const std::string& reason) {
    fail_group(std::make_exception_ptr(error(error_kind::backend, reason, rank_)));
  }
  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it and the communicator is
  /// aborted, so collectives waiting on it end now, not at their deadline.
  void fail_for_peer(const lost_rank& lost) {
    if (queue_.poisoned()) return; // the group failed already: its error stands
    fail_group(std::make_exception_ptr(error(
        lost.silent ? error_kind::timeout : error_kind::peer_lost,
        "rank " + std::to_string(rank_) + ": " + lost_news(lost) +
            " (this rank heard it from the rendezvous store): its NCCL communicator is aborted and every "
            "collective of this group fails",
        lost.rank)));
  }
  /// How many CUDA events this communicator created: pooled, so a few per
  /// collective in flight at once, not one per collective (tests read it).
  std::size_t events_created() const { return events_.created(); }
  /// Until every collective submitted so far completed (device ones included).
  void drain() {
    queue_.drain();
    if (watch_) watch_->drain();
  }

  // Host memory: staged through the device scratch buffer.

  work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    return submit("all_reduce", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt);
      auto* d = static_cast<char*>(scratch(bytes));
      stage_in(d, 0, data, bytes);
      enqueue([&] { return ncclAllReduce(d, d, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclAllReduce");
      stage_out(d, 0, bytes);
      sync();
      unstage(data, 0, bytes);
    });
  }

  work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt);
      auto* d = static_cast<char*>(scratch(bytes));
      stage_in(d, 0, data, bytes);
      enqueue([&] { return ncclBroadcast(d, d, n, nccl_type(dt), root, comm_, stream_); }, "ncclBroadcast");
      stage_out(d, 0, bytes);
      sync();
      unstage(data, 0, bytes);
    });
  }

  work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false) {
    return submit("all_gather", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
      auto* d = static_cast<char*>(scratch(total + bytes));
      stage_in(d, total, in, bytes);
      enqueue([&] { return ncclAllGather(d + total, d, n, nccl_type(dt), comm_, stream_); }, "ncclAllGather");
      stage_out(d, 0, total);
      sync();
      unstage(out, 0, total);
    });
  }

  work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o, bool blocking = false) {
    return submit("reduce_scatter", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
      auto* d = static_cast<char*>(scratch(total + bytes));
      stage_in(d, 0, in, total);
      enqueue([&] { return ncclReduceScatter(d, d + total, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclReduceScatter");
      stage_out(d, total, bytes);
      sync();
      unstage(out, total, bytes);
    });
  }

  // Device memory: straight to NCCL. The tensors were produced on the caller's
  // streams while NCCL's own stream is non-blocking: each of these collectives
  // first waits, on the device, for what the legacy default stream had queued
  // when it was submitted (what cudaMemcpy follows). Work on streams created
  // with cudaStreamNonBlocking is the caller's to finish (or use DDP's
  // compute_stream, which hands NCCL an event of that stream instead). Costs
  // one record of a pooled event per call, and the record on the legacy
  // stream waits for every blocking stream of the device; it also invalidates
  // a CUDA graph capture in global mode.

  work all_reduce(device_memory_t, void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    return submit("all_reduce", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclAllReduce(data, data, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclAllReduce");
      complete_on_device();
    });
  }

  /// Stream-ordered: NCCL's stream first waits, on the device, for `ready`, an
  /// event the caller recorded on its own stream after producing `data` (the
  /// caller's thread never blocks on that). The caller must not re-record
  /// `ready` before this work was queued (work::stream_wait returned, or the work
  /// completed): NCCL's stream takes the record it finds then. Used by the
  /// CUDA bucket engine.
  work all_reduce(device_memory_t, void* data, std::size_t n, dtype dt, op o, cudaEvent_t ready,
                  bool blocking = false) {
    return submit("all_reduce", n, dt, blocking, [=, this] {
      cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent (the bucket's ready event)");
      enqueue([&] { return ncclAllReduce(data, data, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclAllReduce");
      complete_on_device();
    });
  }

  /// Stream-ordered like the all_reduce above: after `ready`, on the device.
  work broadcast(device_memory_t, void* data, std::size_t n, dtype dt, int root, cudaEvent_t ready,
                 bool blocking = false) {
    return submit("broadcast", n, dt, blocking, [=, this] {
      cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent (the compute stream's ready event)");
      enqueue([&] { return ncclBroadcast(data, data, n, nccl_type(dt), root, comm_, stream_); },
              "ncclBroadcast");
      complete_on_device();
    });
  }

  work broadcast(device_memory_t, void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclBroadcast(data, data, n, nccl_type(dt), root, comm_, stream_); },
              "ncclBroadcast");
      complete_on_device();
    });
  }

  work all_gather(device_memory_t, const void* in, void* out, std::size_t n, dtype dt,
                  bool blocking = false) {
    return submit("all_gather", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclAllGather(in, out, n, nccl_type(dt), comm_, stream_); }, "ncclAllGather");
      complete_on_device();
    });
  }

  work reduce_scatter(device_memory_t, const void* in, void* out, std::size_t n, dtype dt, op o,
                      bool blocking = false) {
    return submit("reduce_scatter", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclReduceScatter(in, out, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclReduceScatter");
      complete_on_device();
    });
  }

  work barrier(bool blocking = false) {
    return submit("barrier", 1, dtype::i32, blocking, [this] {
      auto* d = scratch(sizeof(std::int32_t));
      enqueue([&] { return ncclAllReduce(d, d, 1, ncclInt32, ncclSum, comm_, stream_); },
              "ncclAllReduce (barrier)");
      sync();
    });
  }

private:
  using clock = std::chrono::steady_clock;

  /// An event recorded now, on the caller's thread, on this device's legacy
  /// default stream (the thread's current device is restored); null for an
  /// empty collective, whose job returns before follow(). Taken from the pool
  /// until follow() waited on it: a shared event re-recorded by a later
  /// submission could make an earlier collective wait for work queued after it.
  cudaEvent_t default_stream_point(std::size_t n) {
    if (n == 0 || queue_.poisoned()) return nullptr; // a poisoned group fails it with its own error
    detail::cuda::device_guard on(device_, rank_);
    const cudaEvent_t point = events_.acquire();
    if (const cudaError_t e = cudaEventRecord(point, cudaStreamLegacy); e != cudaSuccess) {
      events_.release(point);
      cuda(e, "cudaEventRecord (the legacy default stream, before a collective of device tensors)");
    }
    return point;
  }

  /// The end of a device collective's job, after enqueue(): an event is
  /// recorded after it on NCCL's stream and published to the work
  /// (work::stream_wait), and the work goes to the watcher, which finishes it
  /// when the device is done, or fails it at its deadline. This thread does
  /// not wait: the next collective is queued at once. The event is the
  /// work's alone until the watcher finished it (a pooled one, given back
  /// then): re-recording it earlier would move the point its waiters wait for.
  void complete_on_device() {
    cudaEvent_t done = nullptr;
    try {
      done = events_.acquire();
    } catch (const error& e) { fail_group_and_throw(e); }
    event_completion completion(events_, done, rank_); // gives the event back on every path
    cuda(cudaEventRecord(done, stream_), "cudaEventRecord (after a collective, on NCCL's stream)");
    work_state* self = running_; // owns the function below: valid whenever it runs
    self->queued_on_device([done, self](CUstream_st* waiter) {
      // -1: `what` names the rank already
      detail::cuda::check(cudaStreamWaitEvent(waiter, done, 0),
                          ("cudaStreamWaitEvent (a stream waiting for " + self->what + ")").c_str(), -1);
    });
    watch_->watch(self->shared_from_this(), std::move(completion), deadline_, current_); // noexcept
  }

  /// Queues one NCCL operation on stream_ (`op` returns its ncclResult_t) and
  /// waits, with the deadline, until NCCL really did: a non-blocking
  /// communicator may return ncclInProgress and launch it later (while it
  /// connects to a peer), and nothing may be queued behind it on stream_
  /// before that (the copy back of a host tensor, the completion event).
  template <class F> void enqueue(F&& op, const char* name) {
    nccl_call(comm_call(std::forward<F>(op)), name);
    await_comm(name, deadline_, timeout_);
  }

  /// In a job: NCCL's stream waits for the point default_stream_point()
  /// recorded. The wait takes the record it finds now, so the event goes back at once.
  void follow(cudaEvent_t point) {
    if (!point) return;
    const cudaError_t e = cudaStreamWaitEvent(stream_, point, 0);
    events_.release(point);
    cuda(e, "cudaStreamWaitEvent (the legacy default stream)");
  }

  template <class F> work submit(const char* name, std::size_t n, dtype dt, bool blocking, F body) {
    return queue_.submit(
        name, n, dt, blocking,
        [this, body = std::move(body), n](const std::string& what, work_state& self) mutable {
          if (n == 0) return;
          current_ = what;
          running_ = &self;
          deadline_ = clock::now() + timeout_; // the job's one deadline: queueing, completion, copies
          // A blocking job may run inline on the caller's thread: its current device is restored.
          std::optional<cuda::device_guard> on;
          try {
            on.emplace(device_, rank_);
          } catch (const error& e) { fail_group_and_throw(e); }
          body();
        });
  }

  /// The device staging buffer and its pinned host mirror, grown together to
  /// at least twice their size (between host-memory collectives: each one
  /// ends with sync()).
  void* scratch(std::size_t bytes) {
    if (bytes > scratch_.bytes()) grow_scratch(bytes, std::max(bytes, 2 * scratch_.bytes()));
    return scratch_.get();
  }

  /// Nothing is freed inside a job: cudaFree and cudaFreeHost wait for the
  /// whole device, the user's streams too, with no deadline. An outgrown pair
  /// stays until the destructor; doubling keeps them all smaller than the
  /// current one. Where the doubled size does not fit, exactly `needed` is
  /// tried before the group fails.
  void grow_scratch(std::size_t needed, std::size_t wanted) {
    std::optional<cuda::device_buffer> device;
    std::optional<cuda::pinned_buffer> host;
    for (std::size_t bytes : {wanted, needed}) {
      try {
        device.emplace(bytes, rank_, "cudaMalloc of the staging buffer");
        host.emplace(bytes, rank_, "cudaHostAlloc of the pinned staging buffer");
        break;
      } catch (const error& e) {
        device.reset();
        host.reset();
        if (bytes == needed) fail_group_and_throw(e);
      }
    }
    if (scratch_.get()) outgrown_.emplace_back(std::move(scratch_), std::move(pinned_));
    scratch_ = std::move(*device);
    pinned_ = std::move(*host);
  }

  // Host tensors travel through a pinned buffer that mirrors the device
  // scratch (same offsets), kept across calls: DMA from pinned memory runs
  // several times faster than from pageable memory, at the cost of one host
  // memcpy each way (docs/performance.md, On a GPU).
  // Call scratch() with the full size first: it sizes the pinned mirror too, so
  // nothing is reallocated while a copy from it is in flight.
  void stage_in(char* device, std::size_t offset, const void* host, std::size_t bytes) {
    std::memcpy(pinned_.get() + offset, host, bytes);
    cuda(cudaMemcpyAsync(device + offset, pinned_.get() + offset, bytes, cudaMemcpyHostToDevice, stream_),
         "cudaMemcpyAsync (pinned -> device)");
  }
  void stage_out(const char* device, std::size_t offset, std::size_t bytes) {
    cuda(cudaMemcpyAsync(pinned_.get() + offset, device + offset, bytes, cudaMemcpyDeviceToHost, stream_),
         "cudaMemcpyAsync (device -> pinned)");
  }
  /// After sync(): the result from the pinned buffer into the user's tensor.
  void unstage(void* host, std::size_t offset, std::size_t bytes) {
    std::memcpy(host, pinned_.get() + offset, bytes);
  }

  /// Waits for the stream with a deadline; a communicator error or a timeout
  /// fails the group. A drained stream after an abort (by the watcher) is not
  /// a result: the communicator's state is checked once more at the end.
  void sync(const char* waiting_for = nullptr) {
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e != cudaSuccess && e != cudaErrorNotReady) cuda(e, ("cudaStreamQuery (" + current_ + ")").c_str());
      ncclResult_t async = ncclSuccess;
      comm_call([&] { return ncclCommGetAsyncError(comm_, &async); }); // throws once aborted
      if (async != ncclSuccess && async != ncclInProgress) fail_nccl(async, current_.c_str());
      if (e == cudaSuccess) return;
      if (clock::now() > deadline_)
        fail_group_and_throw(error(error_kind::timeout,
                                   current_ +
                                       (waiting_for ? std::string(": waiting for ") + waiting_for : "") +
                                       ": timed out after " + std::to_string(timeout_.count()) +
                                       " ms: a rank stalled, died or skipped a collective; the NCCL "
                                       "communicator was aborted",
                                   -1));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  /// Polls until the communicator's last call (init, or an operation that
  /// returned ncclInProgress) is done; a failure or the deadline fails the group.
  void await_comm(const char* what, clock::time_point deadline, std::chrono::milliseconds limit) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      nccl_call(comm_call([&] { return ncclCommGetAsyncError(comm_, &state); }), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail_nccl(state, what);
      if (clock::now() > deadline)
        fail_group_and_throw(
            error(error_kind::timeout,
                  (current_.empty() ? "rank " + std::to_string(rank_) : current_) + ": " + what +
                      ": NCCL did not finish within " + std::to_string(limit.count()) +
                      " ms (a rank did not join, or stalled?); the NCCL communicator was aborted",
                  -1));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  /// For the watcher (its own thread): the communicator's asynchronous error
  /// while `what` runs, if any.
  std::exception_ptr async_error(const std::string& what) noexcept {
    try {
      ncclResult_t state = ncclSuccess;
      std::string last;
      comm_call([&] {
        ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
        if (state != ncclSuccess && state != ncclInProgress)
          if (const char* l = ncclGetLastError(comm_); l && *l) last = l;
        return r;
      });
      if (state == ncclSuccess || state == ncclInProgress) return nullptr;
      return std::make_exception_ptr(error(
          state == ncclRemoteError ? error_kind::peer_lost : error_kind::backend,
          what + " failed: " + ncclGetErrorString(state) +
              (last.empty() ? std::string() : " (" + last + ")") + "; the NCCL communicator was aborted",
          -1));
    } catch (...) { return std::current_exception(); }
  }

  /// Every use of comm_ once the watcher runs: under comm_mu_, and none once
  /// it was aborted (ncclCommAbort frees it; the watcher may abort it from
  /// its own thread while this one polls).
  template <class F> ncclResult_t comm_call(F&& f) {
    std::lock_guard lock(comm_mu_);
    if (aborted_) {
      if (auto why = queue_.poisoned()) std::rethrow_exception(why);
      throw error(error_kind::backend,
                  "rank " + std::to_string(rank_) +
                      ": the NCCL communicator was aborted after an earlier failure",
                  rank_);
    }
    return f();
  }

  void nccl_call(ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    fail_nccl(r, what);
  }

  [[noreturn]] void fail_nccl(ncclResult_t r, const char* what) {
    std::string text = std::string(what) + " failed: " + ncclGetErrorString(r);
    {
      std::lock_guard lock(comm_mu_);
      if (comm_ && !aborted_)
        if (const char* last = ncclGetLastError(comm_); last && *last) text += " (" + std::string(last) + ")";
    }
    fail_group_and_throw(error(r == ncclRemoteError ? error_kind::peer_lost : error_kind::backend,
                               "rank " + std::to_string(rank_) + ": " + text, -1));
  }

  /// A failure this thread found: the group is poisoned with it, the works the
  /// watcher holds fail with it (an aborted communicator's events complete:
  /// they must not read as results), the communicator is aborted; then it is
  /// thrown. Before the watcher exists (construction), only the abort.
  [[noreturn]] void fail_group_and_throw(const error& e) {
    fail_group(std::make_exception_ptr(e));
    if (auto group = queue_.poisoned()) std::rethrow_exception(group); // whoever failed first
    throw e;
  }

  void fail_group(std::exception_ptr why) {
    if (watch_) {
      watch_->fail_all(why); // poison, the watched works, abort (unless something failed first)
    } else {
      queue_.abort(why);
      abort();
    }
  }

  /// A CUDA error fails the group too (peers would otherwise wait for this
  /// rank until their deadline, and the communicator would be finalized).
  void cuda(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError(); // clear a sticky non-fatal error so later calls report their own
    fail_group_and_throw(
        error(error_kind::backend,
              "rank " + std::to_string(rank_) + ": " + what + " failed: " + cudaGetErrorString(e), rank_));
  }

  /// Once, from either thread (the worker or the watcher). ncclCommAbort may
  /// block (it frees device memory: cudaFree waits for the device), so it
  /// runs outside the lock: once aborted_ is set nothing else touches comm_,
  /// and every poll gets the group's error at once instead of waiting here.
  void abort() {
    ncclComm_t doomed = nullptr;
    {
      std::lock_guard lock(comm_mu_);
      if (!comm_ || aborted_) return;
      aborted_ = true;
      doomed = comm_;
    }
    // ncclCommAbort sets the device on the calling thread (any thread); it aborts
    // even where the caller's device cannot be restored.
    cuda::device_guard on(device_, std::nothrow);
    ncclCommAbort(doomed);
  }

  /// The watcher thread's start. It only queries events (cudaEventQuery works
  /// from any device), so a device it cannot select is worth a line, not a
  /// failure: the error is cleared so no later call on the thread reports it.
  void watcher_on_device() {
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      cudaGetLastError();
      log_line("rank " + std::to_string(rank_),
               std::string("warning: NCCL's completion watcher could not select "
                           "CUDA device ") +
                   std::to_string(device_) + " (" + cudaGetErrorString(e) +
                   "); it polls events from the default device");
    }
  }

  int rank_, size_, device_ = 0;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  /// Host-memory collectives' staging: join's flag, a barrier and other small
  /// ones never allocate inside a job.
  static constexpr std::size_t initial_scratch_bytes = std::size_t{64} << 10;
  cuda::device_buffer scratch_; ///< device staging (worker thread only)
  cuda::pinned_buffer pinned_;  ///< host staging, mirrors scratch_ (worker thread only)
  std::vector<std::pair<cuda::device_buffer, cuda::pinned_buffer>> outgrown_; ///< see grow_scratch
  bool aborted_ = false;          ///< under comm_mu_ (the destructor reads it alone)
  std::mutex comm_mu_;            ///< comm_'s calls against its abort (see comm_call)
  std::string current_;           ///< the running collective's description (worker thread)
  work_state* running_ = nullptr; ///< the running collective's work (worker thread)
  clock::time_point deadline_;    ///< the running collective's (worker thread)
  cuda::event_pool events_;       ///< before queue_ and watch_: their jobs and completions give events back
  collective_queue queue_;
  using watch_type = completion_watch<event_completion>;
  std::optional<watch_type> watch_; ///< after queue_: destroyed first (it fails into queue_)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NCCL_COMMUNICATOR_HPP
