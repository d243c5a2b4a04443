// Small owners of CUDA runtime objects (device and pinned buffers, streams,
// events), the one place CUDA return codes become ddp::errors, and host waits
// with a deadline. Host code here never dereferences device memory.
#ifndef DDP_DETAIL_CUDA_RUNTIME_HPP
#define DDP_DETAIL_CUDA_RUNTIME_HPP

#include <ddp/error.hpp>

#include <cuda.h> // types only (CUresult, CUdevice): driver calls go through cudaGetDriverEntryPoint
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// Turns a CUDA return code into a ddp::error naming the call and what to do.
inline void check(cudaError_t e, const char* call, int rank = -1) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); // clear the sticky non-fatal error so later calls report their own
  throw error(
      error_kind::backend,
      (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + call +
          " failed: " + cudaGetErrorString(e) +
          " (check that a CUDA device is visible and that the device pointers given to ddp (gradients, "
          "device_span tensors) belong to this process's device)",
      rank);
}

/// The calling thread's current device.
inline int current_device(int rank = -1) {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice", rank);
  return d;
}

/// The current device, or -1 where it cannot be read (noexcept: for owners
/// that remember where they were created).
inline int current_device_or_none() noexcept {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

/// Whether `device`'s primary context exists. Switching a thread back to a
/// device without one would create it (cudaSetDevice initialises the context
/// since CUDA 12): hundreds of MiB on a GPU this process never used, for every
/// rank of a node whose own GPU is not device 0 (threads start on device 0).
/// PyTorch's MaybeSetDevice makes the same check. The runtime has no such call:
/// the driver's cuDevicePrimaryCtxGetState is fetched through the runtime
/// (cudaGetDriverEntryPointByVersion, or cudaGetDriverEntryPoint before CUDA
/// 12.5), so nothing links libcuda. When it cannot
/// be asked (an old driver): true, and callers restore as before.
inline bool primary_context_active(int device) noexcept {
  using device_get = CUresult (*)(CUdevice*, int);
  using state_get = CUresult (*)(CUdevice, unsigned int*, int*);
  struct driver {
    device_get get = nullptr;
    state_get state = nullptr;
  };
  static const driver fns = [] {
    driver d;
    auto fetch = [](const char* name) -> void* {
      void* fn = nullptr;
#if CUDART_VERSION >= 12050
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess)
        fn = nullptr;
#else
      // Before 12.5, which added ByVersion and deprecated this form: both
      // functions are the same in every CUDA the runtime can be built for.
      if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) fn = nullptr;
#endif
      cudaGetLastError();
      return fn;
    };
    d.get = reinterpret_cast<device_get>(fetch("cuDeviceGet"));
    d.state = reinterpret_cast<state_get>(fetch("cuDevicePrimaryCtxGetState"));
    return d;
  }();
  if (!fns.get || !fns.state) return true;
  CUdevice handle{};
  unsigned int flags = 0;
  int active = 1;
  if (fns.get(&handle, device) != CUDA_SUCCESS || fns.state(handle, &flags, &active) != CUDA_SUCCESS)
    return true;
  return active != 0;
}

/// Makes `device` the calling thread's current device for its lifetime, then
/// restores the one it found (ddp's objects live on one device; a user thread
/// may have switched to another since), unless that one has no context yet:
/// restoring would create one (primary_context_active).
class device_guard {
public:
  device_guard(int device, int rank = -1) {
    const int was = current_device(rank);
    if (was == device) return;
    check(cudaSetDevice(device), "cudaSetDevice", rank);
    if (primary_context_active(was)) restore_ = was;
  }
  /// For destructors: never throws. Where `device` (-1: unknown) cannot be made
  /// current (no driver left at exit, an invalid id) nothing changes, and the
  /// destroy call that follows reports into the void as before. Only this
  /// guard's own failures are cleared: a recoverable error the user's code has
  /// not read yet (a launch it queued) stays for the user to read.
  device_guard(int device, std::nothrow_t) noexcept {
    const int was = current_device_or_none();
    if (device < 0 || was < 0 || was == device) return;
    if (cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (primary_context_active(was)) restore_ = was;
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    if (restore_ >= 0) cudaSetDevice(restore_);
  }

private:
  int restore_ = -1;
};

// The owners below remember the device current at their creation and make it
// current again to free what they own: an object may be destroyed on a thread
// or after a guard that left another device current (a process driving
// several GPUs), and a stream or event belongs to its device's context.

/// Device memory, allocated once and kept.
class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaMalloc (a device bucket buffer)") {
    if (bytes) check(cudaMalloc(&p_, bytes), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~device_buffer() {
    if (!p_) return;
    device_guard on(device_, std::nothrow);
    cudaFree(p_);
  }
  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

/// Page-locked host memory (cudaHostAlloc): copies to and from the device run
/// several times faster than from pageable memory (docs/performance.md, On a
/// GPU). Allocated once and kept across steps.
class pinned_buffer {
public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaHostAlloc (a pinned staging buffer)") {
    if (bytes) check(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  pinned_buffer(pinned_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~pinned_buffer() {
    if (!p_) return;
    // Portable memory frees from any context, but a thread that never used CUDA
    // would create one on device 0 for the call (PyTorch guards its event
    // destructor for the same stray context).
    device_guard on(device_, std::nothrow);
    cudaFreeHost(p_);
  }
  std::byte* get() const noexcept { return static_cast<std::byte*>(p_); }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

class stream {
public:
  explicit stream(int rank = -1) {
    check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (!s_) return;
    device_guard on(device_, std::nothrow);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const noexcept { return s_; }

private:
  cudaStream_t s_ = nullptr;
  int device_ = -1;
};

class event {
public:
  explicit event(int rank = -1) {
    check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)), device_(o.device_) {}
  event& operator=(event&& o) noexcept {
    std::swap(e_, o.e_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~event() {
    if (!e_) return;
    device_guard on(device_, std::nothrow);
    cudaEventDestroy(e_);
  }
  cudaEvent_t get() const noexcept { return e_; }

private:
  cudaEvent_t e_ = nullptr;
  int device_ = -1;
};

/// Events reused instead of created and destroyed for each use (microseconds
/// of host time each, per collective). An acquired event is its holder's alone
/// until released: no other record can move the point its waiters wait for.
class event_pool {
public:
  explicit event_pool(int rank = -1) : rank_(rank) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  /// A free event, or a new one on the current device (callers make the
  /// pool's device current: its events belong there).
  cudaEvent_t acquire() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        const cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    event fresh(rank_); // outside the lock: creating one takes microseconds
    const cudaEvent_t e = fresh.get();
    std::lock_guard lock(mu_);
    free_.reserve(all_.size() + 1); // so that release() never allocates
    all_.push_back(std::move(fresh));
    return e;
  }

  /// Gives back an event acquire() returned; a record still pending on it is
  /// fine (the next holder records it anew). One never given back (a job
  /// dropped when its group failed) stays owned here.
  void release(cudaEvent_t e) noexcept {
    std::lock_guard lock(mu_);
    free_.push_back(e);
  }

  /// How many events the pool created: as many as were in use at once, not one per use.
  std::size_t created() const {
    std::lock_guard lock(mu_);
    return all_.size();
  }

private:
  int rank_;
  mutable std::mutex mu_;
  std::vector<event> all_;
  std::vector<cudaEvent_t> free_;
};

/// Makes `waiter` wait (on the device) for what is queued on `producer` so far.
inline void order_after(cudaStream_t waiter, cudaStream_t producer, cudaEvent_t scratch, int rank) {
  check(cudaEventRecord(scratch, producer), "cudaEventRecord", rank);
  check(cudaStreamWaitEvent(waiter, scratch, 0), "cudaStreamWaitEvent", rank);
}

/// Waits on the host for everything queued on `s`, polling until `timeout`:
/// a stream that never drains (a kernel stuck, a user stream that waits
/// forever) is a timeout error naming `what`, never a hang.
inline void wait_stream(cudaStream_t s, std::chrono::milliseconds timeout, const std::string& what,
                        int rank) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, ("cudaStreamQuery (" + what + ")").c_str(), rank);
    if (std::chrono::steady_clock::now() > deadline)
      throw error(error_kind::timeout,
                  "rank " + std::to_string(rank) + ": " + what + " did not finish on the GPU within " +
                      std::to_string(timeout.count()) +
                      " ms (a kernel stuck, or a stream it follows blocked: the compute stream given to "
                      "ddp_options, or the legacy default stream)",
                  rank);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// How many CUDA devices this process sees (0 where the driver or a GPU is missing).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_RUNTIME_HPP
