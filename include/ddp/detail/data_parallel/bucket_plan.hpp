// The bucket plan: which parameters travel together, at which offsets, as
// which wire type, and along which path. A pure function of the bucketing
// policy's assignment, the parameters' dtypes, sizes and addresses, the
// reduction's wire type and what the backend can do — testable without a
// process group (tests/unit/test_bucket_plan.cpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_HPP

#include <ddp/bucketing.hpp>
#include <ddp/data_parallel/options.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>
#include <ddp/error.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct planned_bucket {
  std::vector<std::size_t> params;  ///< registration indices, in bucket order
  std::vector<std::size_t> offsets; ///< element offset of each parameter in the bucket
  dtype param_type = dtype::f32;
  dtype wire_type = dtype::f32;
  std::size_t elements = 0;
  bucket_path path = bucket_path::packed;
};

struct bucket_plan {
  std::vector<planned_bucket> buckets; ///< in launch order
  std::vector<std::size_t> bucket_of;  ///< parameter index -> bucket index
};

/// What the backend offers the plan.
struct plan_capabilities {
  bool fragments = false; ///< reduces lists of fragments where they lie (a fragment_communicator)
};

/// Below this average tensor size a bucket is packed: one message per tiny
/// tensor costs more than two copies of the bucket. 64 KiB packs the 1 KiB
/// tensors of bench/grad_sync's many_small case and leaves ResNet-50's
/// convolutions unpacked (docs/performance.md, Gradient synchronization).
inline constexpr std::size_t unpacked_min_average_bytes = std::size_t{64} << 10;

/// The path of one bucket, from where its gradients lie now.
inline bucket_path choose_path(const planned_bucket& b, std::span<const tensor_slot> params,
                               plan_capabilities caps) {
  if (b.wire_type != b.param_type) return bucket_path::packed; // conversion needs a buffer
  const std::size_t esize = size_of(b.param_type);
  auto* base = static_cast<std::byte*>(params[b.params.front()].grad);
  bool contiguous = true;
  for (std::size_t k = 0; contiguous && k < b.params.size(); ++k)
    contiguous = static_cast<std::byte*>(params[b.params[k]].grad) == base + b.offsets[k] * esize;
  if (contiguous) return bucket_path::in_place;
  const std::size_t average_bytes = b.elements * esize / b.params.size();
  if (caps.fragments && average_bytes >= unpacked_min_average_bytes) return bucket_path::fragments;
  return bucket_path::packed;
}

/// Gradient storage moved (a resized Eigen matrix): the paths follow it.
inline void choose_paths(bucket_plan& plan, std::span<const tensor_slot> params, plan_capabilities caps) {
  for (auto& b : plan.buckets)
    b.path = choose_path(b, params, caps);
}

/// Checks the policy's assignment (every parameter exactly once, one dtype per
/// bucket, no empty bucket) and lays the buckets out.
DDP_INLINE bucket_plan make_bucket_plan(const std::vector<std::vector<std::size_t>>& assignment,
                                        std::span<const tensor_slot> params, dtype (*wire)(dtype),
                                        plan_capabilities caps);

/// What a bucketing policy sees of the parameters.
DDP_INLINE std::vector<parameter_desc> describe_for_bucketing(std::span<const tensor_slot> params);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/bucket_plan-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_HPP
