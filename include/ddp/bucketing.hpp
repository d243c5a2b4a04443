// Bucketing policies: which gradients travel together in one all-reduce.
// Buckets launch in bucket order, so bucket 0 should hold the gradients that
// backward produces first: at construction, the last parameters; after the
// first step, distributed_data_parallel asks a reorderable policy again with
// the order backward really marked them in (docs/bucketing.md).
#ifndef DDP_BUCKETING_HPP
#define DDP_BUCKETING_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/tensor.hpp>

#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE

/// What a bucketing policy sees of each parameter (in registration order).
struct parameter_desc {
  std::string_view name;
  dtype type;
  std::size_t count; ///< elements
  std::size_t bytes;
};

/// A bucketing policy maps parameters to buckets: every index exactly once,
/// one dtype per bucket, in launch order.
template <class B>
concept bucketing_policy = requires(std::span<const parameter_desc> params) {
  { B::assign(params) } -> std::same_as<std::vector<std::vector<std::size_t>>>;
};

/// A bucketing policy that can also fill its buckets in a given order:
/// `order` lists every parameter index once, in the order backward made the
/// gradients on rank 0's first step. distributed_data_parallel rebuilds the
/// buckets of such a policy once, after that step (ddp_options::pin_bucket_order
/// keeps the first ones); a policy without this form keeps its layout.
template <class B>
concept reorderable_bucketing_policy = bucketing_policy<B> &&
    requires(std::span<const parameter_desc> params, std::span<const std::size_t> order) {
  { B::assign(params, order) } -> std::same_as<std::vector<std::vector<std::size_t>>>;
};

namespace detail {
/// size_capped's assignment, compiled once for every pair of caps: the
/// parameters taken in `order` (every index once).
DDP_INLINE std::vector<std::vector<std::size_t>> assign_size_capped(std::span<const parameter_desc> params,
                                                                    std::span<const std::size_t> order,
                                                                    std::size_t cap_bytes,
                                                                    std::size_t first_bucket_bytes);
/// Every parameter index, last first: the order backward usually produces gradients in.
DDP_INLINE std::vector<std::size_t> reverse_registration_order(std::size_t n);
} // namespace detail

namespace bucketing {

/// PyTorch's default: reverse registration order, one open bucket per dtype,
/// closed when it would exceed CapBytes (FirstBucketBytes for the first one,
/// so communication starts early in backward). Reorderable: the same caps in
/// the order backward ran.
template <std::size_t CapBytes = std::size_t{25} << 20, std::size_t FirstBucketBytes = std::size_t{1} << 20>
struct size_capped {
  static_assert(CapBytes > 0 && FirstBucketBytes > 0, "ddp: size_capped needs positive caps");
  static constexpr std::size_t cap_bytes = CapBytes;
  static constexpr std::size_t first_bucket_bytes = FirstBucketBytes;

  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    return assign(params, detail::reverse_registration_order(params.size()));
  }
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params,
                                                      std::span<const std::size_t> order) {
    return detail::assign_size_capped(params, order, CapBytes, FirstBucketBytes);
  }
};

/// One bucket per parameter (most collectives, earliest start). Reorderable:
/// one bucket per parameter in the order backward ran.
struct per_tensor {
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    return assign(params, detail::reverse_registration_order(params.size()));
  }
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc>,
                                                      std::span<const std::size_t> order) {
    std::vector<std::vector<std::size_t>> buckets;
    for (std::size_t k : order)
      buckets.push_back({k});
    return buckets;
  }
};

/// One bucket per dtype (fewest collectives, no overlap with backward). Not
/// reorderable: one bucket gains nothing from an order, and its single
/// buffer may be a layout the user relies on (an arena reduced in place).
struct single_buffer {
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    return size_capped<~std::size_t{0}, ~std::size_t{0}>::assign(params);
  }
};

} // namespace bucketing
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/bucketing-inl.hpp>
#endif

#endif // DDP_BUCKETING_HPP
