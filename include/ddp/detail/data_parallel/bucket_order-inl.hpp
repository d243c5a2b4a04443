// The definitions behind bucket_order.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_INL_HPP

#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/data_parallel/bucket_order.hpp>
#include <ddp/detail/data_parallel/debug.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE std::vector<std::size_t> backward_order(std::span<const std::size_t> ready, std::size_t n) {
  std::vector<std::size_t> order;
  order.reserve(n);
  std::vector<bool> placed(n, false);
  for (std::size_t i : ready)
    if (i < n && !placed[i]) {
      placed[i] = true;
      order.push_back(i);
    }
  for (std::size_t i = n; i-- > 0;)
    if (!placed[i]) order.push_back(i);
  return order;
}

DDP_INLINE void order_members_like_memory(std::vector<std::vector<std::size_t>>& assignment) {
  for (auto& members : assignment)
    std::sort(members.begin(), members.end(), std::greater<>());
}

DDP_INLINE bool laid_out_for(const bucket_plan& plan) {
  for (const auto& b : plan.buckets)
    if (b.params.size() > 1 && b.path == bucket_path::in_place) return true;
  return false;
}

DDP_INLINE std::size_t in_place_bytes(const bucket_plan& plan) {
  std::size_t bytes = 0;
  for (const auto& b : plan.buckets)
    if (b.path == bucket_path::in_place) bytes += b.elements * size_of(b.param_type);
  return bytes;
}

DDP_INLINE std::string describe_orders(std::span<const tensor_slot> params,
                                       std::span<const std::size_t> ready) {
  auto names = [&](std::span<const std::size_t> order) {
    std::string s;
    for (std::size_t k = 0; k < order.size(); ++k)
      s += (k ? ", " : "") + params[order[k]].name;
    return s;
  };
  std::vector<std::size_t> registration(params.size());
  for (std::size_t i = 0; i < registration.size(); ++i)
    registration[i] = i;
  const auto order = backward_order(ready, params.size());
  const std::size_t marked = std::min(ready.size(), order.size());
  std::string s = "\n  registration order: " + names(registration) +
                  "\n  backward order (marked ready on rank 0): " + names(std::span(order).first(marked));
  if (marked < order.size())
    s += "\n  then, never marked ready on rank 0 (last first): " + names(std::span(order).subspan(marked));
  return s;
}

DDP_INLINE bucket_plan plan_in_order(const bucket_order_request& req, std::span<const std::size_t> order) {
  const auto descs = describe_for_bucketing(req.params);
  auto assignment = req.assign(std::span<const parameter_desc>(descs), order);
  order_members_like_memory(assignment);
  return make_bucket_plan(assignment, req.params, req.wire, req.caps);
}

DDP_INLINE bool
agree_on_bucket_order(bucket_plan& plan, const bucket_order_request& req,
                      function_ref<void(const std::int64_t*, std::int64_t*, std::size_t)> all_gather) {
  const bool log = req.rank == 0 && debug() >= debug_level::info;
  const std::string after = "distributed_data_parallel: after step " + std::to_string(req.step) + ", ";
  if (req.fixed) {
    if (log)
      log_line("rank 0", after + "the buckets stay in registration order: " + req.fixed +
                             describe_orders(req.params, req.ready));
    return false;
  }
  const std::size_t n = req.params.size(), w = static_cast<std::size_t>(req.world), row = n + 3;
  const auto mine_order = backward_order(req.ready, n);
  // Only rank 0's verdict counts: it decides from its own layout, the others follow.
  std::int64_t verdict = order_verdict::keep_pinned;
  std::size_t kept_bytes = 0;
  if (req.rank == 0 && !req.pinned) {
    // A layout made for the first buckets is not traded for copies: the new buckets must reduce
    // as many bytes in place.
    kept_bytes = in_place_bytes(plan);
    verdict = laid_out_for(plan) && in_place_bytes(plan_in_order(req, mine_order)) < kept_bytes
                  ? order_verdict::keep_layout
                  : order_verdict::rebuild;
  }
  std::vector<std::int64_t> mine(row), all(row * w);
  mine[0] = req.pinned ? 1 : 0;
  mine[1] = verdict;
  mine[2] = static_cast<std::int64_t>(n);
  for (std::size_t k = 0; k < n; ++k)
    mine[3 + k] = static_cast<std::int64_t>(mine_order[k]);
  {
    call_site site{call_kind::ddp_rebuild_buckets, req.step, 0, 1};
    const call_site_scope named(site);
    all_gather(mine.data(), all.data(), row);
  }
  for (std::size_t r = 1; r < w; ++r)
    if (all[r * row] != all[0])
      throw error(error_kind::mismatch,
                  "rank " + std::to_string(req.rank) + ": after step " + std::to_string(req.step) +
                      ", distributed_data_parallel's buckets are rebuilt in backward's order unless "
                      "ddp_options::pin_bucket_order is set, but rank " +
                      std::to_string(r) + " has it " + (all[r * row] ? "on" : "off") + " and rank 0 " +
                      (all[0] ? "on" : "off") +
                      ": set the same options on every rank (the buckets must be the same everywhere). "
                      "No rank changed its buckets",
                  static_cast<int>(r));
  // Rank 0's order, checked: every index once (the header check made the counts equal).
  std::vector<std::size_t> order(n);
  std::vector<bool> seen(n, false);
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = all[3 + k];
    if (all[2] != static_cast<std::int64_t>(n) || i < 0 || static_cast<std::size_t>(i) >= n ||
        seen[static_cast<std::size_t>(i)])
      throw error(error_kind::mismatch,
                  "rank " + std::to_string(req.rank) +
                      ": rank 0 sent a bucket order that is not a permutation of this rank's " +
                      std::to_string(n) + " parameters: the ranks hold different models",
                  0);
    seen[static_cast<std::size_t>(i)] = true;
    order[k] = static_cast<std::size_t>(i);
  }
  if (all[1] != order_verdict::rebuild) {
    if (log)
      log_line("rank 0",
               after + "the buckets stay in registration order: " +
                   (all[1] == order_verdict::keep_pinned
                        ? std::string("ddp_options::pin_bucket_order is set")
                        : "the gradients lie in memory for those buckets (" + std::to_string(kept_bytes) +
                              " bytes reduced in place; ddp::arena, ddp::flat_model, LibTorch's "
                              "gradient views), and buckets in backward's order would copy some") +
                   describe_orders(req.params, req.ready));
    return false;
  }
  auto rebuilt = plan_in_order(req, order);
  bool same = rebuilt.buckets.size() == plan.buckets.size();
  for (std::size_t b = 0; same && b < plan.buckets.size(); ++b)
    same = rebuilt.buckets[b].params == plan.buckets[b].params;
  if (same) {
    if (log)
      log_line("rank 0", after +
                             "the buckets in the order backward marked the gradients on rank 0 are the "
                             "ones in use" +
                             describe_orders(req.params, req.ready));
    return false;
  }
  plan = std::move(rebuilt);
  if (log) {
    log_line("rank 0", after + "buckets rebuilt in the order backward marked the gradients on rank 0" +
                           describe_orders(req.params, req.ready));
    log_bucket_layout(plan, std::vector<tensor_slot>(req.params.begin(), req.params.end()));
  }
  return true;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_INL_HPP
