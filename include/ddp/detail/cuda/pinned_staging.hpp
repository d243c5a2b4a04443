// process_group<B>'s collectives on device tensors where the backend takes
// host memory only (ddp::gloo): device -> pinned host buffer -> the backend's
// collective -> device. Blocking: the call returns once the result is in
// device memory. PyTorch's Gloo group stages CUDA tensors the same way.
//
// Ordering: the copies run on a stream of this object's own that first waits
// for an event recorded on the legacy default stream at each call, so they
// follow what the legacy stream (and, through it, every blocking stream and a
// per-thread default stream) queued on the device that was current when the
// group staged its first device tensor, before the call, as cudaMemcpy does
// (with one device per rank, the rank's device). Work on a stream created with
// cudaStreamNonBlocking must be finished by the caller. Every wait polls with
// the group's timeout. One pinned buffer, grown to the largest collective and
// kept: page-locked copies run several times faster than pageable ones
// (docs/performance.md, On a GPU).
//
// Copies use cudaMemcpyDefault (unified addressing), so a collective that
// mixes host and device tensors (all_gather of a host vector into a
// device_span) stages both the same way. The event recorded on the legacy
// stream invalidates a CUDA graph capture in global mode, as NCCL's does.
#ifndef DDP_DETAIL_CUDA_PINNED_STAGING_HPP
#define DDP_DETAIL_CUDA_PINNED_STAGING_HPP

#include <ddp/detail/backend/staged_collectives.hpp>
#include <ddp/detail/cuda/runtime.hpp>
#include <ddp/work.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// `Comm`: a ddp::communicator on host memory (process_group checks it).
template <class Comm> class pinned_staging final : public staged_collectives {
public:
  /// `fail_group(why)`: fails the group at once, noexcept (a staging copy
  /// failed before its collective; see copy()).
  pinned_staging(Comm& comm, std::function<void(const std::string&)> fail_group)
      : comm_(comm), fail_group_(std::move(fail_group)), device_(current_device(comm.rank())),
        stream_(comm.rank()), after_legacy_(comm.rank()) {}

  void all_reduce(void* data, std::size_t n, dtype dt, op o) override {
    const std::size_t bytes = n * size_of(dt);
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(bytes);
    copy(h, data, bytes, "all_reduce", before_collective);
    await(comm_.all_reduce(h, n, dt, o, true));
    copy(data, h, bytes, "all_reduce", after_collective);
  }

  void broadcast(void* data, std::size_t n, dtype dt, int root) override {
    const std::size_t bytes = n * size_of(dt);
    const bool is_root = comm_.rank() == root;
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(bytes);
    if (is_root) copy(h, data, bytes, "broadcast", before_collective);
    await(comm_.broadcast(h, n, dt, root, true));
    if (!is_root) copy(data, h, bytes, "broadcast", after_collective);
  }

  void all_gather(const void* in, void* out, std::size_t n, dtype dt) override {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(comm_.size());
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(total + bytes); // [0, total): the result; then this rank's input
    copy(h + total, in, bytes, "all_gather", before_collective);
    await(comm_.all_gather(h + total, h, n, dt, true));
    copy(out, h, total, "all_gather", after_collective);
  }

  void reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o) override {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(comm_.size());
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(total + bytes); // [0, total): the input; then this rank's block
    copy(h, in, total, "reduce_scatter", before_collective);
    await(comm_.reduce_scatter(h, h + total, n, dt, o, true));
    copy(out, h + total, bytes, "reduce_scatter", after_collective);
  }

private:
  /// Which side of the host collective a copy is on.
  enum class phase : bool { before, after };
  static constexpr phase before_collective = phase::before, after_collective = phase::after;

  /// A group that failed (here or in a collective) refuses at once, before any copy.
  void refuse_if_failed() const {
    if (auto failed = comm_.poisoned()) std::rethrow_exception(failed);
  }

  /// Waits for the host collective on the pinned buffer. When the wait gives up
  /// (its own deadline) the collective may still be queued or running on the
  /// group's thread and write the buffer later: it is retired, not freed or
  /// reused, until this object goes (after the communicator stopped).
  void await(work w) {
    try {
      w.wait();
    } catch (...) {
      retire();
      throw;
    }
  }
  void retire() {
    retired_.push_back(std::move(buffer_));
    buffer_ = pinned_buffer();
  }

  /// At least `bytes` of pinned memory (never null: a 0-element collective
  /// still passes a valid pointer). Nothing is in flight when it grows.
  std::byte* pinned(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 64);
    if (buffer_.bytes() < bytes) {
      buffer_ = pinned_buffer(); // free the old one first: the two need not fit at once
      buffer_ = pinned_buffer(bytes, comm_.rank());
    }
    return buffer_.get();
  }

  /// One copy on the staging stream, waited for with the group's deadline. A
  /// copy that failed or timed out may still be queued: its buffer is retired.
  /// Before the collective, the peers are (or will be) waiting for this rank
  /// in it: the group is failed at once (fail_group_: the store names this rank
  /// and why, connections close), so they fail now, not at their timeout; that
  /// may wait, bounded by the group's timeout, for a collective this rank
  /// submitted earlier to end. After the collective nobody waits: the error is
  /// this rank's alone, and a stuck device fails the next staged call's first copy.
  void copy(void* dst, const void* src, std::size_t bytes, const char* collective, phase when) {
    if (bytes == 0) return;
    const int rank = comm_.rank();
    const std::string what = std::string(collective) + " of a device tensor on a host backend (" +
                             (when == phase::before ? "to" : "from") + " pinned memory, " +
                             std::to_string(bytes) + " B)";
    try {
      device_guard on(device_, rank); // the stream, the event and the legacy stream of one device
      order_after(stream_.get(), cudaStreamLegacy, after_legacy_.get(), rank);
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_.get()),
            ("cudaMemcpyAsync: " + what).c_str(), rank);
      wait_stream(stream_.get(), comm_.timeout(), what, rank);
    } catch (const error& e) {
      if (when == phase::before)
        fail_group_(what + " failed before its collective: " + std::string(e.message()));
      retire();
      throw;
    } catch (...) {
      if (when == phase::before) fail_group_(what + " failed before its collective");
      retire();
      throw;
    }
  }

  Comm& comm_;
  std::function<void(const std::string&)> fail_group_;
  int device_; ///< current at construction; stream_ and after_legacy_ belong to it
  stream stream_;
  event after_legacy_; ///< re-recorded per copy: each copy is waited for before the next
  pinned_buffer buffer_;
  std::vector<pinned_buffer> retired_; ///< buffers a collective may still write (see await)
  std::mutex mu_;                      ///< one staged collective at a time per group (they share buffer_)
};

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_PINNED_STAGING_HPP
