// How DDP's broadcasts from rank 0 (construction, sync_buffers()) carry
// device tensors. Over a host-only communicator (ddp::gloo) they go through
// pinned memory (staged_broadcaster), never as device pointers. Over a device
// communicator (ddp::nccl) they go directly, after what the compute stream
// queued: stream-ordered where the communicator takes an event (NCCL's stream
// waits for the compute stream on the device, then the compute stream for the
// broadcasts: synchronize() does not block the host for buffers), otherwise
// the host waits for the compute stream first and for the broadcasts after.
// Without ddp's CUDA engine a device tensor here is a clear error.
#ifndef DDP_DETAIL_DATA_PARALLEL_DEVICE_BROADCASTS_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEVICE_BROADCASTS_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/bucket_engine.hpp> // DDP_DETAIL_DEVICE_ENGINE, the CUDA engine's helpers
#include <ddp/detail/data_parallel/unchecked_works.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct CUstream_st;

DDP_BEGIN_NAMESPACE
namespace detail {

/// One round of broadcasts (parameter_registry::broadcast_from_rank0):
/// begin(), broadcast(slot) for each device tensor, complete(works) for all.
template <communicator Comm> class device_broadcasts {
public:
  /// `fail_group(why)`: rank 0's staging copy before a broadcast over a
  /// host-only communicator failed (process_group::abort); noexcept.
  device_broadcasts(Comm& comm, CUstream_st* compute_stream,
                    std::function<void(const std::string&)> fail_group)
      : comm_(comm), stream_(compute_stream), fail_group_(std::move(fail_group)), unchecked_(comm.rank()) {}

  /// Before a round with device tensors. `stream_ordered`: the caller lets
  /// the compute stream, not the host, wait for the result (synchronize()
  /// with a compute stream); honoured where the communicator takes an event.
  void begin([[maybe_unused]] bool stream_ordered) {
    ordered_ = false;
    unchecked_.check(); // the last stream-ordered round's failures, if known by now
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if constexpr (event_ordered_communicator<Comm>) {
      if (stream_ordered && stream_) {
        if (!ready_) { // on the communicator's device, which the compute stream is on
          cuda::device_guard on(comm_.device(), comm_.rank());
          ready_.emplace(comm_.rank());
        }
        cuda::check(cudaEventRecord(ready_->get(), stream_),
                    "cudaEventRecord (the compute stream, before broadcasting device tensors)", comm_.rank());
        ordered_ = true;
        return;
      }
    }
    if constexpr (device_communicator<Comm>) // its stream does not follow the compute stream
      cuda::wait_stream(stream_, comm_.timeout(), "the compute stream (before broadcasting device tensors)",
                        comm_.rank());
#endif
  }

  /// Broadcasts device tensor `s` from rank 0: queued on a device
  /// communicator, done before it returns over a host-only one (empty work).
  work broadcast(const tensor_slot& s) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if constexpr (event_ordered_communicator<Comm>) {
      if (ordered_) return comm_.broadcast(device_memory, s.value, s.count, s.type, 0, ready_->get(), false);
    }
    if constexpr (device_communicator<Comm>) {
      return comm_.broadcast(device_memory, s.value, s.count, s.type, 0, false);
    } else {
      if (!staged_) staged_ = std::make_unique<staged_broadcaster<Comm>>(comm_, stream_, fail_group_);
      (*staged_)(s);
      return work{};
    }
#else
    detail::throw_error(error_kind::config,
                        {"rank ", comm_.rank(), ": '", s.name,
                         "' lives in device memory but ddp was compiled without CUDA: link "
                         "ddp::cuda or ddp::nccl (they define DDP_WITH_CUDA)"});
#endif
  }

  /// Ends the round: the compute stream (stream-ordered; the host waits only
  /// until each broadcast is queued, and re-recording the ready event is safe
  /// after that; the works are checked at the next round) or the host waits
  /// for every broadcast, host tensors' too.
  void complete(std::vector<work>& ws) {
    const bool ordered = std::exchange(ordered_, false);
    for (auto& w : ws) {
      if (!ordered) {
        w.wait();
        continue;
      }
      unchecked_.stream_wait(w, stream_);
    }
  }

private:
  Comm& comm_;
  CUstream_st* stream_;
  std::function<void(const std::string&)> fail_group_;
  bool ordered_ = false; ///< this round waits on the compute stream, not the host
  unchecked_works unchecked_;
#ifdef DDP_DETAIL_DEVICE_ENGINE
  std::optional<cuda::event> ready_; ///< the compute stream's point the broadcasts follow
  std::unique_ptr<staged_broadcaster<Comm>> staged_;
#endif
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_DEVICE_BROADCASTS_HPP
