// Chooses the bucket engine by where the gradients live: the host engine for
// host memory, the CUDA engine (device_bucket_engine.hpp) for device memory.
// The CUDA engine is compiled in where DDP_WITH_CUDA is defined (the ddp::cuda
// and ddp::nccl CMake targets define it); without it, device gradients are a
// clear error at construction, and nothing here needs CUDA headers.
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP

#include <ddp/detail/data_parallel/host_bucket_engine.hpp>
// Before the conditional block: the single header inlines a file where it is
// first included, and device_broadcasts.hpp needs this one without CUDA too.
#include <ddp/detail/data_parallel/unchecked_works.hpp>
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
#include <ddp/detail/data_parallel/device_bucket_engine.hpp>
#define DDP_DETAIL_DEVICE_ENGINE 1
#endif

#include <functional>
#include <memory>
#include <string>

struct CUstream_st;

DDP_BEGIN_NAMESPACE
namespace detail {

/// Whether ddp was compiled with its CUDA engine.
inline constexpr bool cuda_engine_available =
#ifdef DDP_DETAIL_DEVICE_ENGINE
    true;
#else
    false;
#endif

template <communicator Comm> class bucket_engine {
public:
  static plan_capabilities capabilities(bool on_device) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if (on_device) return device_bucket_engine<Comm>::capabilities;
#endif
    (void)on_device;
    return host_bucket_engine<Comm>::capabilities;
  }

  /// `fail_group(why)`: the device engine's own work before a collective
  /// failed (process_group::abort); noexcept.
  bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params, bool on_device,
                CUstream_st* compute_stream, std::function<void(const std::string&)> fail_group) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if (on_device) {
      device_ = std::make_unique<device_bucket_engine<Comm>>(comm, plan, params, compute_stream,
                                                             std::move(fail_group));
      return;
    }
#endif
    (void)on_device;
    (void)compute_stream;
    (void)fail_group; // the host engine's only failures are the group's own
    host_ = std::make_unique<host_bucket_engine<Comm>>(comm, plan, params);
  }

  void layout() {
    call([](auto& e) { e.layout(); });
  }
  void zero(const tensor_slot& p) {
    call([&](auto& e) { e.zero(p); });
  }
  /// `caller_waits`: see host_bucket_engine::launch (the device engine never
  /// blocks its caller: it queues on streams either way).
  void launch(std::size_t i, double scale, bool caller_waits) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if (device_) return device_->launch(i, scale);
#endif
    host_->launch(i, scale, caller_waits);
  }
  /// Whether the step's last bucket waits for synchronize() to launch it (host
  /// gradients; device engines launch it at once, stream-ordered).
  bool defers_last_bucket() const { return host_ != nullptr; }
  bool wait(std::size_t i) {
    bool r = false;
    call([&](auto& e) { r = e.wait(i); });
    return r;
  }
  void unpack(std::size_t i) {
    call([&](auto& e) { e.unpack(i); });
  }
  void prepare_join() {
    call([](auto& e) { e.prepare_join(); });
  }
  work reduce_zeros(std::size_t i, double scale) {
    work w;
    call([&](auto& e) { w = e.reduce_zeros(i, scale); });
    return w;
  }
  void wait_all_quietly() {
    call([](auto& e) { e.wait_all_quietly(); });
  }
  double last_duration_ms(std::size_t i) const {
    return host_ ? host_->last_duration_ms(i) : device_duration(i);
  }

  /// After the last bucket's unpack: device engines order the compute stream
  /// after the unpacking (or wait, `blocking`); host engines are done already.
  void finish_step([[maybe_unused]] bool blocking) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if (device_) device_->finish_step(blocking);
#endif
  }

private:
  template <class F> void call(F&& f) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if (device_) return f(*device_);
#endif
    f(*host_);
  }
  double device_duration([[maybe_unused]] std::size_t i) const {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    return device_->last_duration_ms(i);
#else
    return 0;
#endif
  }

  std::unique_ptr<host_bucket_engine<Comm>> host_;
#ifdef DDP_DETAIL_DEVICE_ENGINE
  std::unique_ptr<device_bucket_engine<Comm>> device_;
#endif
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP
