// The bucket engines distributed_data_parallel chooses from by where the
// gradients live: host_bucket_engine for host memory, device_bucket_engine
// for device memory. It holds one in a std::variant and calls it through
// std::visit, so a bucket goes from the DDP straight to its engine. Both meet
// the bucket_engine_for concept. The device engine is compiled in where
// DDP_WITH_CUDA is defined (the ddp::cuda and ddp::nccl CMake targets define
// it); without it, device gradients are a clear error at construction, and
// nothing here needs CUDA headers.
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP

#include <ddp/detail/data_parallel/host_bucket_engine.hpp>
// Before the conditional block: the single header inlines a file where it is
// first included, and device_broadcasts.hpp needs this one without CUDA too.
#include <ddp/detail/data_parallel/unchecked_works.hpp>
// The engine variant's layout is in the ABI namespace's name (config.hpp): the macro
// must say the same here as where config.hpp was first included.
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
#if !DDP_DETAIL_ABI_CUDA
#error "ddp: define DDP_WITH_CUDA (DDP_WITH_NCCL) before the first ddp header, as ddp::cuda does"
#endif
#include <ddp/detail/data_parallel/device_bucket_engine.hpp>
#define DDP_DETAIL_DEVICE_ENGINE 1
#elif DDP_DETAIL_ABI_CUDA
#error "ddp: DDP_WITH_CUDA (DDP_WITH_NCCL) undefined after the first ddp header saw it"
#endif

#include <concepts>
#include <functional>
#include <string>
#include <variant>

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

/// What distributed_data_parallel asks of a bucket engine. `defers_last_bucket`:
/// whether the step's last bucket waits for synchronize() to launch it (host
/// gradients, so the caller may run it itself); `launch(i, scale, caller_waits)`:
/// caller_waits marks that bucket.
template <class E>
concept bucket_engine_for = requires(E& e, const E& ce, std::size_t i, double scale, bool flag,
                                     const tensor_slot& p) {
  { E::capabilities } -> std::convertible_to<plan_capabilities>;
  { E::defers_last_bucket } -> std::convertible_to<bool>;
  e.layout();
  e.zero(p);
  e.launch(i, scale, flag);
  { e.wait(i) } -> std::same_as<bool>;
  e.unpack(i);
  e.finish_step(flag);
  e.prepare_join();
  { e.reduce_zeros(i, scale) } -> std::same_as<work>;
  e.wait_all_quietly();
  { ce.last_duration_ms(i) } -> std::convertible_to<double>;
};

/// The engines of this build; a DDP holds the one for its gradients' memory.
template <communicator Comm>
using bucket_engine = std::variant<host_bucket_engine<Comm>
#ifdef DDP_DETAIL_DEVICE_ENGINE
                                   ,
                                   device_bucket_engine<Comm>
#endif
                                   >;

/// What the bucket plan may use with the engine for `on_device` gradients.
template <communicator Comm> plan_capabilities bucket_engine_capabilities([[maybe_unused]] bool on_device) {
  static_assert(bucket_engine_for<host_bucket_engine<Comm>>);
#ifdef DDP_DETAIL_DEVICE_ENGINE
  static_assert(bucket_engine_for<device_bucket_engine<Comm>>);
  if (on_device) return device_bucket_engine<Comm>::capabilities;
#endif
  return host_bucket_engine<Comm>::capabilities;
}

/// The engine for `on_device` gradients (the caller checked that it is
/// compiled in). `fail_group(why)`: the device engine's own work before a
/// collective failed (process_group::abort); noexcept. Engines neither copy
/// nor move: the variant is made in place, where the caller's member is.
template <communicator Comm>
bucket_engine<Comm>
make_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params,
                   [[maybe_unused]] bool on_device, [[maybe_unused]] CUstream_st* compute_stream,
                   [[maybe_unused]] std::function<void(const std::string&)> fail_group) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
  if (on_device)
    return bucket_engine<Comm>(std::in_place_type<device_bucket_engine<Comm>>, comm, plan, params,
                               compute_stream, std::move(fail_group));
#endif
  return bucket_engine<Comm>(std::in_place_type<host_bucket_engine<Comm>>, comm, plan, params);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP
