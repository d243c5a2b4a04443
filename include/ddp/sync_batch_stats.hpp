// SyncBatchNorm's statistics for any model: each rank's per-channel batch
// statistics combined into those of all ranks' batches together (uneven
// per-rank batches weighted by their counts), and the two gradient sums its
// backward needs all-reduced. The LibTorch module built on it is
// ddp::torch::SyncBatchNorm (ddp/torch/sync_batch_norm.hpp).
#ifndef DDP_SYNC_BATCH_STATS_HPP
#define DDP_SYNC_BATCH_STATS_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/op.hpp>
#include <ddp/process_group.hpp>
#include <ddp/tensor.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

DDP_BEGIN_NAMESPACE

/// The statistics of all ranks' batches together, per channel.
template <std::floating_point T> struct batch_stats {
  std::vector<T> mean;         ///< the global mean
  std::vector<T> var;          ///< biased variance (divided by count): what the forward normalizes with
  std::vector<T> unbiased_var; ///< divided by count - 1: what running_var follows (NaN when count is 1)
  std::int64_t count = 0;      ///< elements per channel over all ranks
};

namespace detail {

/// Combines W per-rank records, each (count, mean[C], M2[C]) with M2 the sum of
/// squared deviations from that rank's mean, into the global mean, biased and
/// unbiased variance; returns the total count. The same records in the same
/// (rank) order give every rank the same bits. Throws if the total count is 0.
DDP_INLINE std::int64_t combine_batch_moments(std::span<const double> records, std::size_t channels,
                                              std::span<double> mean, std::span<double> var,
                                              std::span<double> unbiased_var);

/// Checks a rank's own count before anything goes on the wire.
DDP_INLINE void check_batch_count(std::int64_t count, int rank, const char* what);

template <class T> void require_host_float_tensor(const char* what) {
  static_assert(!on_device_v<T>, "ddp::sync_batch_stats works on host tensors: copy device statistics to the "
                                 "host first (they are C values per tensor, not the batch)");
  static_assert(std::floating_point<std::remove_cv_t<tensor_value_t<T>>>,
                "ddp::sync_batch_stats needs float or double statistics");
  (void)what;
}

template <std::floating_point T, class B>
batch_stats<T> sync_moments(process_group<B>& pg, std::vector<double>& record, std::size_t channels) {
  std::vector<double> all(record.size() * static_cast<std::size_t>(pg.size()));
  pg.all_gather(record, all);
  std::vector<double> mean(channels), var(channels), unbiased(channels);
  batch_stats<T> out;
  out.count = combine_batch_moments(all, channels, mean, var, unbiased);
  out.mean.assign(mean.begin(), mean.end());
  out.var.assign(var.begin(), var.end());
  out.unbiased_var.assign(unbiased.begin(), unbiased.end());
  return out;
}

} // namespace detail

/// SyncBatchNorm's forward statistics from this rank's per-channel batch mean
/// and biased variance over `count` elements per channel (count may be 0 on
/// some ranks, not on all). Every rank of `pg` calls it with the same number
/// of channels; each gets the same result, bit for bit.
///
/// Each rank's (count, mean, M2 = var * count) is all-gathered and the records
/// are combined pairwise in rank order (Chan, Golub and LeVeque's parallel
/// variance), in double. Not an all-reduce of sums and sums of squares: the
/// variance from E[x^2] - E[x]^2 loses every digit once the mean is large next
/// to the spread (a mean of 1e4 and a spread of 1 in float), where M2 keeps
/// them. It is also what PyTorch's SyncBatchNorm does (it gathers mean,
/// invstd and count), and W * (2C + 1) doubles cost no more than the
/// all-reduce would for the C of a BatchNorm layer.
template <class B, tensor Mean, tensor Var>
auto sync_batch_stats(process_group<B>& pg, const Mean& mean, const Var& var, std::int64_t count) {
  using T = std::remove_cv_t<tensor_value_t<Mean>>;
  detail::require_host_float_tensor<Mean>("mean");
  detail::require_host_float_tensor<Var>("var");
  auto m = as_span(mean);
  auto v = as_span(var);
  detail::check_batch_count(count, pg.rank(), "sync_batch_stats");
  if (m.size() != v.size())
    detail::throw_error(error_kind::config,
                        {"sync_batch_stats on rank ", pg.rank(), ": mean has ", m.size(),
                         " channels and var ", v.size(), ": pass one value per channel in each"});
  const std::size_t c = m.size();
  std::vector<double> record(1 + 2 * c);
  record[0] = static_cast<double>(count);
  for (std::size_t i = 0; i < c; ++i) {
    record[1 + i] = count > 0 ? static_cast<double>(m[i]) : 0.0;
    record[1 + c + i] = count > 0 ? static_cast<double>(v[i]) * static_cast<double>(count) : 0.0;
  }
  return detail::sync_moments<T>(pg, record, c);
}

/// The same from this rank's per-channel sum and sum of squares over `count`
/// elements. The local variance is sum_sq / count - mean^2 (in double, clamped
/// at 0), so it carries the cancellation described above within each rank:
/// pass mean and variance to the other overload where the data's mean is large
/// next to its spread.
template <class B, tensor Sum, tensor SumSq>
auto sync_batch_stats_from_sums(process_group<B>& pg, const Sum& sum, const SumSq& sum_sq,
                                std::int64_t count) {
  using T = std::remove_cv_t<tensor_value_t<Sum>>;
  detail::require_host_float_tensor<Sum>("sum");
  detail::require_host_float_tensor<SumSq>("sum_sq");
  auto s = as_span(sum);
  auto q = as_span(sum_sq);
  detail::check_batch_count(count, pg.rank(), "sync_batch_stats_from_sums");
  if (s.size() != q.size())
    detail::throw_error(error_kind::config,
                        {"sync_batch_stats_from_sums on rank ", pg.rank(), ": sum has ", s.size(),
                         " channels and sum_sq ", q.size(), ": pass one value per channel in each"});
  const std::size_t c = s.size();
  std::vector<double> record(1 + 2 * c);
  record[0] = static_cast<double>(count);
  for (std::size_t i = 0; i < c; ++i) {
    if (count == 0) continue;
    const double n = static_cast<double>(count), mu = static_cast<double>(s[i]) / n;
    const double m2 = static_cast<double>(q[i]) - mu * static_cast<double>(s[i]);
    record[1 + i] = mu;
    record[1 + c + i] = m2 > 0.0 ? m2 : 0.0;
  }
  return detail::sync_moments<T>(pg, record, c);
}

/// SyncBatchNorm's backward: all-reduces (sums), in one collective, this rank's
/// per-channel sum of grad_output and sum of grad_output * (x - mean), in
/// place. With N the global count, the input gradient is then
/// (dy - sum_dy / N - (x - mean) * sum_dy_xmu / (N * (var + eps))) * weight / sqrt(var + eps).
/// (The weight's and bias's gradients are this rank's own sums before the
/// call: DDP averages those like any other gradient.)
template <class B, tensor SumDy, tensor SumDyXmu>
void sync_batch_norm_grad_sums(process_group<B>& pg, SumDy&& sum_dy, SumDyXmu&& sum_dy_xmu) {
  detail::require_host_float_tensor<std::remove_reference_t<SumDy>>("sum_dy");
  detail::require_host_float_tensor<std::remove_reference_t<SumDyXmu>>("sum_dy_xmu");
  static_assert(
      std::is_same_v<std::remove_cv_t<tensor_value_t<SumDy>>, std::remove_cv_t<tensor_value_t<SumDyXmu>>>,
      "sync_batch_norm_grad_sums needs sum_dy and sum_dy_xmu of one element type");
  auto a = as_span(sum_dy);
  auto b = as_span(sum_dy_xmu);
  if (a.size() != b.size())
    detail::throw_error(error_kind::config,
                        {"sync_batch_norm_grad_sums on rank ", pg.rank(), ": sum_dy has ", a.size(),
                         " channels and sum_dy_xmu ", b.size(), ": pass one value per channel in each"});
  std::vector<std::remove_cv_t<tensor_value_t<SumDy>>> both(a.begin(), a.end());
  both.insert(both.end(), b.begin(), b.end());
  pg.all_reduce(both, op::sum);
  std::copy(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(a.size()), a.begin());
  std::copy(both.begin() + static_cast<std::ptrdiff_t>(a.size()), both.end(), b.begin());
}

DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/sync_batch_stats-inl.hpp>
#endif

#endif // DDP_SYNC_BATCH_STATS_HPP
