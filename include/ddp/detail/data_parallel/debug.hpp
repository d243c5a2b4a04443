// DDP_DEBUG diagnostics for distributed_data_parallel, kept apart from it:
// INFO logs the bucket layout once, DETAIL adds per-step bucket timings and a
// cross-rank check before every bucket that all ranks launch the same one.
#ifndef DDP_DETAIL_DATA_PARALLEL_DEBUG_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEBUG_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>

#include <cstdint>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void log_bucket_layout(const bucket_plan& plan, const std::vector<tensor_slot>& params);

template <class Engine> void log_step_timing(const Engine& engine, std::size_t buckets) {
  // Host time: until the host saw the collective done, or, for device
  // gradients over NCCL (stream-ordered), until it was queued there.
  std::string s = "step timing (ms from launch to done, or to queued on the device):";
  for (std::size_t i = 0; i < buckets; ++i)
    detail::append_message(s, {" b", i, "=", std::to_string(engine.last_duration_ms(i))});
  log_line("rank 0", s);
}

/// Every rank must be launching the same bucket; say who is not.
template <communicator Comm>
void check_same_bucket_everywhere(Comm& comm, std::size_t index, const planned_bucket& b) {
  const auto w = static_cast<std::size_t>(comm.size());
  std::int64_t mine[3] = {static_cast<std::int64_t>(index), static_cast<std::int64_t>(b.elements),
                          static_cast<std::int64_t>(b.wire_type)};
  std::vector<std::int64_t> all(3 * w);
  comm.all_gather(mine, all.data(), 3, dtype::i64, true).wait();
  for (std::size_t r = 1; r < w; ++r)
    if (all[3 * r] != all[0] || all[3 * r + 1] != all[1] || all[3 * r + 2] != all[2])
      detail::throw_error(error_kind::mismatch,
                          {"collective mismatch: rank 0 launches bucket ", all[0], " (", all[1],
                           " elements) but rank ", r, " launches bucket ", all[3 * r], " (", all[3 * r + 1],
                           " elements): the ranks disagree on this step's gradients"},
                          static_cast<int>(r));
}

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/debug-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_DEBUG_HPP
