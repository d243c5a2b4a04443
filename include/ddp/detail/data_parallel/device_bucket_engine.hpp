// Launches and completes the buckets of a plan whose gradients are in CUDA
// device memory; the host engine's twin. Host code here never dereferences
// device memory: every touch of a gradient is a kernel, cudaMemsetAsync or
// cudaMemcpyAsync on the engine's stream.
//
// Per bucket, allocated once (layout()): a device buffer for packed buckets,
// a device table of (src, dst, count) runs for packing and one for unpacking,
// and, where the backend takes host memory only (ddp::gloo), a slice of one
// pinned host staging buffer and, in place, a table that scales the bucket.
// Nothing is allocated or freed inside a step (cudaFree and cudaFreeHost wait
// for the whole device, the user's streams too, with no deadline). A step:
//   launch  the engine's stream waits for the user's compute stream (an event),
//           packs with one kernel (converting to the wire type, scale fused) or,
//           for a contiguous bucket (ddp::device_arena), packs nothing;
//           a device communicator (NCCL) averages with ncclAvg where no
//           conversion is needed; otherwise the sum is pre-multiplied by 1/W.
//           NCCL: an event recorded after the packing is handed over with the
//           pointer; NCCL's stream waits for it on the device (no host wait).
//           Host backends: one device->pinned copy; the host waits (deadline)
//           for it before handing the pinned pointer to the communicator.
//   wait    NCCL: the engine's stream waits for the collective's event (the
//           host only until it is queued: work::stream_wait); host backends: the
//           host waits for the collective (it runs there).
//   unpack  pinned->device copy (host backends) and one unpack kernel, queued
//           on the engine's stream.
//   failure  this rank's own part before a collective (following the compute
//           stream, packing, the copy to pinned memory, zeroing) failing means
//           its peers would wait for it until their deadline: the group is
//           failed at once (fail_group: process_group::abort), then it throws.
//   finish_step  the user's stream waits for the engine's stream (an event;
//           a collective's failure known by then is thrown, a later one by
//           the next step or the group's next collective, or logged), or the
//           host waits with a deadline (blocking form, or no compute stream)
//           for every collective's work first (an NCCL timeout aborts the
//           communicator, whose stream then runs on: the error must come from
//           the work, naming the collective), then for the engine's stream.
#ifndef DDP_DETAIL_DATA_PARALLEL_DEVICE_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEVICE_BUCKET_ENGINE_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/cuda/kernels.hpp>
#include <ddp/detail/cuda/runtime.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/unchecked_works.hpp>

#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// A device communicator that orders a collective after an event on the
/// device (ddp::nccl): the caller's thread does not wait for its own stream.
template <class C>
concept event_ordered_communicator = device_communicator<C> &&
    requires(C& c, void* p, std::size_t n, dtype dt, op o, cudaEvent_t ready) {
  { c.all_reduce(device_memory, p, n, dt, o, ready, false) } -> std::same_as<work>;
  { c.broadcast(device_memory, p, n, dt, 0, ready, false) } -> std::same_as<work>;
};

/// Runs `f`, this rank's own part before a collective its peers will wait in;
/// if it throws, the group is failed first (`fail_group`: peers fail now and
/// name this rank and `what()`, not at their deadline), then it is rethrown. A
/// failure of the group itself (a refused submission) leaves it as it is:
/// process_group::abort does nothing once the group has failed.
template <class Describe, class F>
decltype(auto) run_before_collective(const std::function<void(const std::string&)>& fail_group,
                                     Describe&& what, F&& f) {
  try {
    return f();
  } catch (const error& e) {
    fail_group(what() + " failed before its collective: " + std::string(e.message()));
    throw;
  } catch (const std::exception& e) {
    fail_group(what() + " failed before its collective: " + e.what());
    throw;
  }
}

template <communicator Comm> class device_bucket_engine {
  static constexpr bool device_comm = device_communicator<Comm>;

public:
  /// No fragments: a bucket is in place (contiguous) or packed on the device.
  static constexpr plan_capabilities capabilities{.fragments = false};
  /// Every bucket launches at once, stream-ordered: nothing waits for synchronize().
  static constexpr bool defers_last_bucket = false;

  /// `compute_stream`: the user's stream that produces the gradients (null:
  /// the legacy default stream). `fail_group(why)`: fails the group at once
  /// (this rank's own work before a collective failed), noexcept.
  device_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params,
                       cudaStream_t compute_stream, std::function<void(const std::string&)> fail_group)
      : device_bucket_engine(comm, plan, params, compute_stream, std::move(fail_group),
                             cuda::device_guard(engine_device(comm), comm.rank())) {}
  device_bucket_engine(const device_bucket_engine&) = delete;
  device_bucket_engine& operator=(const device_bucket_engine&) = delete;
  ~device_bucket_engine() {
    cuda::device_guard on(device_, std::nothrow); // the streams and events below belong to it
    wait_in_flight_quietly();
    unchecked_.log_all(); // the last step's collectives: nobody else would hear of a failure
    try {                 // buffers are freed below: nothing queued may still use them
      cuda::wait_stream(stream_.get(), comm_.timeout(), "the last unpacking (destruction)", rank());
    } catch (...) {}
  }

  /// Buffers and copy tables for the plan's current paths and gradient
  /// addresses; call again when they changed. Synchronous (construction and
  /// moved storage only).
  void layout() {
    cuda::device_guard on(device_, rank());
    // The buffers replaced below are freed with cudaFree and cudaFreeHost,
    // which wait for the whole device: the engine's own stream first, with
    // the deadline, so that they find nothing of ddp's left to wait for.
    cuda::wait_stream(stream_.get(), comm_.timeout(), "the previous step's unpacking (before a re-layout)",
                      rank());
    std::byte* staged = nullptr;
    if constexpr (!device_comm) {
      std::size_t total = 0;
      for (auto& b : plan_.buckets)
        total += staging_slice(b);
      if (staging_.bytes() < total) staging_ = cuda::pinned_buffer(total, rank());
      staged = staging_.get();
    }
    for (std::size_t i = 0; i < state_.size(); ++i) {
      auto& b = plan_.buckets[i];
      auto& s = state_[i];
      const std::size_t wbytes = b.elements * size_of(b.wire_type);
      s = runtime{};
      if constexpr (event_ordered_communicator<Comm>) s.ready.emplace(rank());
      if constexpr (!device_comm) {
        s.pinned = staged;
        staged += staging_slice(b);
      }
      if (b.path != bucket_path::packed) {
        // A host communicator sums (no uses_avg): a mean is scaled here first (scale_in_place).
        if constexpr (!device_comm) {
          void* grads = params_[b.params.front()].grad;
          s.scale_table = upload(cuda::make_copy_table({{grads, grads, b.elements}}));
        }
        continue;
      }
      s.packed = cuda::device_buffer(wbytes, rank());
      std::vector<cuda::copy_entry> pack, unpack;
      auto* base = static_cast<std::byte*>(s.packed.get());
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        auto& p = params_[b.params[k]];
        void* slot = base + b.offsets[k] * size_of(b.wire_type);
        pack.push_back({p.grad, slot, p.count});
        unpack.push_back({slot, p.grad, p.count});
      }
      s.pack_table = upload(cuda::make_copy_table(std::move(pack)));
      s.unpack_table = upload(cuda::make_copy_table(std::move(unpack)));
    }
  }

  /// A gradient with no contribution this step: zeroed on the engine's stream,
  /// after what the compute stream has queued.
  void zero(const tensor_slot& p) {
    cuda::device_guard on(device_, rank());
    before_collective([&] { return "zeroing the unused gradient of '" + p.name + "'"; },
                      [&] {
                        follow_compute_stream();
                        check(cudaMemsetAsync(p.grad, 0, p.count * size_of(p.type), stream_.get()),
                              "cudaMemsetAsync (mark_unused)");
                      });
  }

  /// Starts the all-reduce of bucket i; `scale` is 1/W for a mean, else 1.
  /// The caller never waits here (`caller_waits` is the host engine's): the
  /// collective is queued on streams either way.
  void launch(std::size_t i, double scale, bool /*caller_waits*/ = false) {
    cuda::device_guard on(device_, rank());
    before_collective([&] { return "launching bucket " + std::to_string(i); },
                      [&] { launch_unguarded(i, scale); });
  }

  /// Waits for bucket i's collective, so that unpack(i) follows it; false
  /// when it was not launched. A device communicator's collective is waited
  /// for on the engine's stream (over NCCL the host waits only until it is
  /// queued) and kept until finish_step() checks it; t_done is then when it
  /// was queued, not when it ended (DDP_DEBUG=DETAIL's step timing says so).
  bool wait(std::size_t i) {
    auto& s = state_[i];
    if (!s.in_flight) return false;
    auto w = std::move(*s.in_flight);
    s.in_flight.reset();
    if constexpr (device_comm) {
      cuda::device_guard on(device_, rank());
      unchecked_.stream_wait(w, stream_.get());
    } else {
      w.wait();
    }
    s.t_done = std::chrono::steady_clock::now();
    return true;
  }

  /// Queues the copy of bucket i's result into its gradients (after wait).
  void unpack(std::size_t i) {
    cuda::device_guard on(device_, rank());
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    if constexpr (!device_comm) {
      void* target = b.path == bucket_path::packed ? s.packed.get() : params_[b.params.front()].grad;
      check(cudaMemcpyAsync(target, s.pinned, b.elements * size_of(b.wire_type), cudaMemcpyHostToDevice,
                            stream_.get()),
            "cudaMemcpyAsync (pinned staging -> device)");
    }
    if (b.path == bucket_path::packed)
      cuda::launch_convert_copy(s.unpack_table, b.wire_type, b.param_type, 1.0, stream_.get(), rank());
  }

  /// The end of synchronize(): the compute stream waits for the unpacking
  /// (stream-ordered), or the host waits for it with the communicator's deadline.
  void finish_step(bool blocking) {
    cuda::device_guard on(device_, rank());
    if (blocking || !user_) {
      unchecked_.wait_all(); // first: a stalled collective is reported by its own deadline and name
      cuda::wait_stream(stream_.get(), comm_.timeout(), "unpacking the reduced gradients", rank());
      return;
    }
    cuda::order_after(user_, stream_.get(), ordered_.get(), rank());
    unchecked_.check(); // failures known by now (this step's or the last one's)
  }

  /// Before the first stand-in, outside any step: a zeros buffer for each
  /// in-place bucket, so that join neither allocates inside a step nor
  /// overwrites this rank's own gradients (a packed bucket's buffer serves).
  void prepare_join() {
    if constexpr (device_comm) {
      cuda::device_guard on(device_, rank());
      for (std::size_t i = 0; i < state_.size(); ++i) {
        const auto& b = plan_.buckets[i];
        const std::size_t bytes = b.elements * size_of(b.wire_type);
        if (b.path != bucket_path::packed && state_[i].zeros.bytes() != bytes)
          state_[i].zeros = cuda::device_buffer(bytes, rank(), "cudaMalloc (join's zeros)");
      }
    }
  }

  /// A joined rank's stand-in for bucket i: the same collective on zeros.
  work reduce_zeros(std::size_t i, double scale) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    const std::size_t bytes = b.elements * size_of(b.wire_type);
    if constexpr (device_comm) {
      cuda::device_guard on(device_, rank());
      return before_collective(
          [&] { return "join's stand-in for bucket " + std::to_string(i); },
          [&] {
            // Nothing allocated inside a step (prepare_join did), and this
            // rank's gradients are left as they are.
            void* zeros = b.path == bucket_path::packed ? s.packed.get() : s.zeros.get();
            follow_compute_stream(); // the packed buffer's last readers follow it
            check(cudaMemsetAsync(zeros, 0, bytes, stream_.get()), "cudaMemsetAsync (join's zeros)");
            return hand_over(s, zeros, b.elements, b.wire_type, uses_avg(b, scale) ? op::avg : op::sum,
                             "zeroing join's stand-in bucket " + std::to_string(i));
          });
    } else {
      s.host_zeros.assign(bytes, std::byte{0});
      return comm_.all_reduce(s.host_zeros.data(), b.elements, b.wire_type, op::sum, false);
    }
  }

  /// On a step's error path (that error is being thrown): every collective
  /// waited for, failures dropped.
  void wait_all_quietly() {
    wait_in_flight_quietly();
    try {
      unchecked_.wait_all();
    } catch (...) {}
  }

  double last_duration_ms(std::size_t i) const {
    return std::chrono::duration<double, std::milli>(state_[i].t_done - state_[i].t_launch).count();
  }

private:
  /// Runs while `on` (a temporary of the delegating constructor) holds the
  /// engine's device current: the stream and events are created on it.
  device_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params,
                       cudaStream_t compute_stream, std::function<void(const std::string&)> fail_group,
                       const cuda::device_guard& /*on*/)
      : comm_(comm), plan_(plan), params_(params), user_(compute_stream), fail_group_(std::move(fail_group)),
        device_(cuda::current_device(comm.rank())), stream_(comm.rank()), ordered_(comm.rank()),
        state_(plan.buckets.size()), unchecked_(comm.rank()) {
    cuda::preload_convert_copy(rank());
    layout();
  }

  struct runtime {
    cuda::device_buffer packed;           ///< the wire-typed bucket (packed path)
    cuda::device_copy_table pack_table;   ///< gradients -> packed
    cuda::device_copy_table unpack_table; ///< packed -> gradients
    cuda::device_copy_table scale_table;  ///< the bucket onto itself (in place, host communicators)
    std::byte* pinned = nullptr;          ///< its slice of staging_ (host communicators)
    cuda::device_buffer zeros;            ///< join's stand-in for an in-place bucket (prepare_join)
    std::vector<std::byte> host_zeros;
    std::optional<cuda::event> ready; ///< recorded after packing (event-ordered communicators)
    std::optional<work> in_flight;
    std::chrono::steady_clock::time_point t_launch, t_done;
  };

  int rank() const { return comm_.rank(); }
  void check(cudaError_t e, const char* call) const { cuda::check(e, call, rank()); }

  template <class Describe, class F> decltype(auto) before_collective(Describe&& what, F&& f) {
    return run_before_collective(fail_group_, std::forward<Describe>(what), std::forward<F>(f));
  }

  void launch_unguarded(std::size_t i, double scale) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    s.t_launch = std::chrono::steady_clock::now();
    follow_compute_stream();
    const bool avg = uses_avg(b, scale);
    const double pre = avg ? 1.0 : scale;
    void* data = nullptr;
    if (b.path == bucket_path::packed) {
      cuda::launch_convert_copy(s.pack_table, b.param_type, b.wire_type, pre, stream_.get(), rank());
      data = s.packed.get();
    } else {
      data = params_[b.params.front()].grad;
      if (pre != 1.0) scale_in_place(s, b.param_type, pre);
    }
    s.in_flight = reduce(i, data, avg);
  }

  void wait_in_flight_quietly() {
    for (auto& s : state_)
      wait_quietly(s.in_flight);
  }

  /// ncclAvg where the communicator is on the device and no conversion packs
  /// the bucket; the same answer on every rank (same plan, same scale).
  static bool uses_avg(const planned_bucket& b, double scale) {
    return device_comm && scale != 1.0 && b.wire_type == b.param_type;
  }

  /// Bucket b's part of the pinned staging buffer: its wire bytes, rounded up
  /// so that each slice starts 256-byte aligned, as an allocation of its own did.
  static std::size_t staging_slice(const planned_bucket& b) {
    constexpr std::size_t align = 256;
    return (b.elements * size_of(b.wire_type) + align - 1) / align * align;
  }

  /// The engine's stream continues after what the compute stream queued so far.
  void follow_compute_stream() { cuda::order_after(stream_.get(), user_, ordered_.get(), rank()); }

  /// On the engine's stream, so the kernels queued after it read it: a
  /// pageable cudaMemcpy may return before its DMA reached the device, and it
  /// is on the legacy stream, which the engine's stream does not follow. A
  /// pageable source is staged before cudaMemcpyAsync returns (CUDA runtime
  /// API, "API synchronization behavior"), so `table` may go at once.
  cuda::device_copy_table upload(const cuda::copy_table& table) {
    return cuda::device_copy_table(table, stream_.get(), rank());
  }

  /// The device every call here runs on: the communicator's (NCCL), else the
  /// one current at construction (the gradients'). A step may come from a
  /// thread whose current device differs (threads start on device 0).
  static int engine_device(Comm& comm) {
    if constexpr (device_comm)
      return comm.device();
    else
      return cuda::current_device(comm.rank());
  }

  void scale_in_place(runtime& s, dtype t, double scale) {
    cuda::launch_convert_copy(s.scale_table, t, t, scale, stream_.get(), rank());
  }

  /// Hands bucket i's device data to the communicator: directly (after the
  /// engine's stream drained: the communicator's stream does not see it), or
  /// through the pinned buffer.
  work reduce(std::size_t i, void* data, bool avg) {
    auto& b = plan_.buckets[i];
    const std::string what = "packing bucket " + std::to_string(i);
    if constexpr (device_comm) {
      return hand_over(state_[i], data, b.elements, b.wire_type, avg ? op::avg : op::sum, what);
    } else {
      auto& s = state_[i];
      check(cudaMemcpyAsync(s.pinned, data, b.elements * size_of(b.wire_type), cudaMemcpyDeviceToHost,
                            stream_.get()),
            "cudaMemcpyAsync (device -> pinned staging)");
      cuda::wait_stream(stream_.get(), comm_.timeout(), what + " and copying it to pinned memory", rank());
      return comm_.all_reduce(s.pinned, b.elements, b.wire_type, op::sum, false);
    }
  }

  /// Gives device data queued on the engine's stream to a device communicator:
  /// with an event it waits for on the device, or after the host waited.
  work hand_over(runtime& s, void* data, std::size_t n, dtype t, op o, const std::string& what) {
    if constexpr (event_ordered_communicator<Comm>) {
      (void)what;
      if (!s.ready) s.ready.emplace(rank());
      check(cudaEventRecord(s.ready->get(), stream_.get()), "cudaEventRecord (a bucket's ready event)");
      return comm_.all_reduce(device_memory, data, n, t, o, s.ready->get(), false);
    } else {
      cuda::wait_stream(stream_.get(), comm_.timeout(), what, rank());
      return comm_.all_reduce(device_memory, data, n, t, o, false);
    }
  }

  Comm& comm_;
  const bucket_plan& plan_;
  const std::vector<tensor_slot>& params_;
  cudaStream_t user_;
  std::function<void(const std::string&)> fail_group_;
  int device_; ///< the stream, events and buffers below belong to it
  cuda::stream stream_;
  cuda::event ordered_; ///< recorded for each cross-stream wait (re-recording is allowed)
  std::vector<runtime> state_;
  unchecked_works unchecked_;   ///< collectives waited for on the device, not yet on the host
  cuda::pinned_buffer staging_; ///< host communicators: every bucket's slice, one allocation (layout())
};

/// Broadcasts device tensors from rank 0 over a host-only communicator
/// (ddp::gloo): device -> pinned, broadcast, pinned -> device, on its own
/// stream after the compute stream. One pinned buffer, grown to the largest
/// tensor and kept. Synchronous: construction and sync_buffers() only.
template <communicator Comm> class staged_broadcaster {
public:
  /// `fail_group(why)`: as the engine's; rank 0's copy to pinned memory is
  /// its own part before the broadcast the others wait in.
  staged_broadcaster(Comm& comm, cudaStream_t compute_stream,
                     std::function<void(const std::string&)> fail_group)
      : comm_(comm), user_(compute_stream), fail_group_(std::move(fail_group)),
        device_(cuda::current_device(comm.rank())), stream_(comm.rank()), ordered_(comm.rank()) {}

  void operator()(const tensor_slot& s) {
    const int r = comm_.rank();
    cuda::device_guard on(device_, r); // the stream and event belong to it
    const std::size_t bytes = s.count * size_of(s.type);
    if (bytes == 0) return;
    if (pinned_.bytes() < bytes) pinned_ = cuda::pinned_buffer(bytes, r);
    const std::string what = "staging '" + s.name + "' for the broadcast from rank 0";
    if (r == 0)
      run_before_collective(
          fail_group_, [&] { return what; },
          [&] {
            cuda::order_after(stream_.get(), user_, ordered_.get(), r);
            cuda::check(cudaMemcpyAsync(pinned_.get(), s.value, bytes, cudaMemcpyDeviceToHost, stream_.get()),
                        "cudaMemcpyAsync (device -> pinned, broadcast)", r);
            cuda::wait_stream(stream_.get(), comm_.timeout(), what, r);
          });
    comm_.broadcast(pinned_.get(), s.count, s.type, 0, true).wait();
    if (r != 0) {
      cuda::order_after(stream_.get(), user_, ordered_.get(), r);
      cuda::check(cudaMemcpyAsync(s.value, pinned_.get(), bytes, cudaMemcpyHostToDevice, stream_.get()),
                  "cudaMemcpyAsync (pinned -> device, broadcast)", r);
      cuda::wait_stream(stream_.get(), comm_.timeout(), what, r);
    }
  }

private:
  Comm& comm_;
  cudaStream_t user_;
  std::function<void(const std::string&)> fail_group_;
  int device_; ///< current at construction (DDP's construction: the model's device)
  cuda::stream stream_;
  cuda::event ordered_;
  cuda::pinned_buffer pinned_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_DEVICE_BUCKET_ENGINE_HPP
