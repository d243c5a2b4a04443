// The definitions behind sync_batch_stats.hpp: compiled in every translation
// unit when ddp is header-only, once in the runtime when it is compiled
// separately (detail/common/linkage.hpp).
#ifndef DDP_SYNC_BATCH_STATS_INL_HPP
#define DDP_SYNC_BATCH_STATS_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/sync_batch_stats.hpp>

#include <cmath>
#include <limits>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void check_batch_count(std::int64_t count, int rank, const char* what) {
  if (count < 0)
    detail::throw_error(error_kind::config,
                        {what, " on rank ", rank, ": count ", count,
                         " is negative: pass the elements per channel in this rank's batch "
                         "(batch size times the spatial size), 0 for an empty batch"});
}

DDP_INLINE std::int64_t combine_batch_moments(std::span<const double> records, std::size_t channels,
                                              std::span<double> mean, std::span<double> var,
                                              std::span<double> unbiased_var) {
  const std::size_t stride = 1 + 2 * channels;
  const std::size_t world = stride == 0 ? 0 : records.size() / stride;
  double n = 0.0;
  for (std::size_t c = 0; c < channels; ++c)
    mean[c] = var[c] = 0.0; // var holds M2 until the end
  for (std::size_t r = 0; r < world; ++r) {
    const double* rec = records.data() + r * stride;
    const double nb = rec[0];
    if (nb <= 0.0) continue; // an empty batch adds nothing (and no 0/0)
    const double nab = n + nb;
    for (std::size_t c = 0; c < channels; ++c) {
      const double delta = rec[1 + c] - mean[c];
      mean[c] += delta * (nb / nab);
      var[c] += rec[1 + channels + c] + delta * delta * (n * nb / nab);
    }
    n = nab;
  }
  if (n <= 0.0)
    detail::throw_error(error_kind::config,
                        {"sync_batch_stats: every rank's batch is empty (count 0 on all ", world,
                         " ranks): there is nothing to normalize with; skip the step or "
                         "give some rank data"});
  for (std::size_t c = 0; c < channels; ++c) {
    const double m2 = var[c];
    var[c] = m2 / n;
    unbiased_var[c] = n > 1.0 ? m2 / (n - 1.0) : std::numeric_limits<double>::quiet_NaN();
  }
  return static_cast<std::int64_t>(n);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_SYNC_BATCH_STATS_INL_HPP
