// Bucketing policies: which gradients travel together in one all-reduce.
// Buckets launch in bucket order, so bucket 0 should hold the gradients that
// backward produces first (the last parameters).
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

namespace detail {
/// size_capped's assignment, compiled once for every pair of caps.
DDP_INLINE std::vector<std::vector<std::size_t>> assign_size_capped(std::span<const parameter_desc> params,
                                                                    std::size_t cap_bytes,
                                                                    std::size_t first_bucket_bytes);
} // namespace detail

namespace bucketing {

/// PyTorch's default: reverse registration order, one open bucket per dtype,
/// closed when it would exceed CapBytes (FirstBucketBytes for the first one,
/// so communication starts early in backward).
template <std::size_t CapBytes = std::size_t{25} << 20, std::size_t FirstBucketBytes = std::size_t{1} << 20>
struct size_capped {
  static_assert(CapBytes > 0 && FirstBucketBytes > 0, "ddp: size_capped needs positive caps");
  static constexpr std::size_t cap_bytes = CapBytes;
  static constexpr std::size_t first_bucket_bytes = FirstBucketBytes;

  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    return detail::assign_size_capped(params, CapBytes, FirstBucketBytes);
  }
};

/// One bucket per parameter (most collectives, earliest start).
struct per_tensor {
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    std::vector<std::vector<std::size_t>> buckets;
    for (std::size_t k = params.size(); k-- > 0;)
      buckets.push_back({k});
    return buckets;
  }
};

/// One bucket per dtype (fewest collectives, no overlap with backward).
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
