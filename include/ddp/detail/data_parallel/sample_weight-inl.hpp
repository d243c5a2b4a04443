// The definitions behind sample_weight.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_SAMPLE_WEIGHT_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_SAMPLE_WEIGHT_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/sample_weight.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/error.hpp>

#include <cstring>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE double sample_weight(std::size_t local, std::size_t global, int world, bool average, int rank) {
  if (global == 0 || local > global)
    detail::throw_error(
        error_kind::config,
        {"rank ", rank, ": set_samples(", local, ", ", global,
         "): the step's global sample count must be at least 1 and at least this rank's own "
         "count; pass this rank's samples and the whole global batch's (global_batch::local_samples "
         "and global_samples)"},
        rank);
  const double n = static_cast<double>(local), total = static_cast<double>(global);
  return average ? n * static_cast<double>(world) / total : n / total;
}

DDP_INLINE void weigh_bucket(const planned_bucket& b, const std::vector<tensor_slot>& params, double weight) {
  for (std::size_t i : b.params) {
    const auto& p = params[i];
    if (p.count == 0) continue;
    if (weight == 0.0)
      std::memset(p.grad, 0, p.count * size_of(p.type));
    else
      scale_in_place(p.grad, p.count, p.type, weight);
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_SAMPLE_WEIGHT_INL_HPP
