// distributed_data_parallel::set_samples: the sample-weighted global mean.
// Each rank's gradient is the mean over its own n_r samples; the global mean
// over N = sum n_r samples is sum_r n_r g_r / N. Scaling rank r's gradient by
// w_r = n_r W / N before the usual mean (1/W) gives exactly that, through
// every bucket path unchanged: the factor is this rank's own, applied before
// its data leaves it, and the common 1/W stays where the path fuses it. With
// even shares w_r is 1 and nothing is touched.
#ifndef DDP_DETAIL_DATA_PARALLEL_SAMPLE_WEIGHT_HPP
#define DDP_DETAIL_DATA_PARALLEL_SAMPLE_WEIGHT_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>

#include <cstddef>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The factor for this rank's gradients: n_r W / N for a mean, n_r / N for a
/// sum. Refuses counts that cannot be one step's (local above global, a global
/// of zero), naming the rank.
DDP_INLINE double sample_weight(std::size_t local, std::size_t global, int world, bool average, int rank);

/// Scales bucket b's host gradients by `weight` where they lie; a weight of 0
/// (a rank without samples this step) writes zeros, so that a mean over no
/// samples (NaN) contributes nothing.
DDP_INLINE void weigh_bucket(const planned_bucket& b, const std::vector<tensor_slot>& params, double weight);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/sample_weight-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_SAMPLE_WEIGHT_HPP
