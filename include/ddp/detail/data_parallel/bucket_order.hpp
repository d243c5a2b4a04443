// Buckets in the order backward runs (PyTorch's Reducer::rebuild_buckets).
// The first buckets follow the registration order (reversed), the best guess
// before any backward ran. During the first step that communicates, the step
// driver records the order of mark_grad_ready; after it, every rank sends its
// order and options in one all_gather, and every rank lays the buckets out
// again from rank 0's order, so that they stay identical everywhere. Once,
// between steps: nothing is in flight. A failure on any rank (the policy's
// ordered assign, the new buffers) is known to every rank at once, and then
// no rank changes its buckets (docs/design-notes.md, "Note [rebuild all or
// none]"). What keeps the first layout: the user's pin
// (ddp_options::pin_bucket_order), a policy with no ordered form
// (reorderable_bucketing_policy), device gradients, and gradients laid out
// in memory for the first buckets (an arena, a flat_model, LibTorch's views)
// where the new ones would reduce fewer bytes in place (docs/bucketing.md).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_HPP

#include <ddp/bucketing.hpp>
#include <ddp/detail/common/function_ref.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// A reorderable policy's second assign, as a plain function.
using ordered_assign = std::vector<std::vector<std::size_t>> (*)(std::span<const parameter_desc>,
                                                                 std::span<const std::size_t>);

/// The order to rebuild in: the parameters marked ready, in mark order, then
/// every other one (marked unused, never marked, zero-sized), last first.
DDP_INLINE std::vector<std::size_t> backward_order(std::span<const std::size_t> ready, std::size_t n);

/// Each bucket's members by descending registration index: the memory order
/// of ddp::arena, ddp::flat_model and LibTorch's gradient views, so that a
/// bucket of neighbours there is one contiguous range. Which gradients share
/// a bucket and when it launches do not depend on this order.
DDP_INLINE void order_members_like_memory(std::vector<std::vector<std::size_t>>& assignment);

/// Whether the gradients lie in memory for these buckets: some bucket of two
/// or more tensors is one contiguous range (an arena, a flat_model, LibTorch's
/// views; separate allocations never are).
DDP_INLINE bool laid_out_for(const bucket_plan& plan);

/// Bytes of the buckets reduced in place, where they lie.
DDP_INLINE std::size_t in_place_bytes(const bucket_plan& plan);

/// What one rank brings to the rebuild.
struct bucket_order_request {
  std::span<const tensor_slot> params;
  std::span<const std::size_t> ready; ///< this rank's mark_grad_ready order in the recorded step
  ordered_assign assign;              ///< the policy's ordered form
  dtype (*wire)(dtype);
  plan_capabilities caps;
  /// Why the buckets stay whatever the order (a policy with no ordered form,
  /// device gradients: every rank alike), or null. No exchange then.
  const char* fixed;
  bool pinned; ///< ddp_options::pin_bucket_order: every rank must say the same
  int rank;
  int world;
  /// The step just finished (its call site names the exchange); 0 for a joined rank's
  /// stand-in, unnamed as its stand-in collectives are: its count of steps lags the ranks
  /// that accumulated with no_sync() (Note [step check]).
  std::uint32_t step;
};

/// Rank 0's decision, as it travels in the exchange. `same`: backward's buckets are the
/// ones in use; `refused`: rank 0 could not make them (its policy or the plan threw);
/// `refused_out_of_memory`: the same, for want of memory.
namespace order_verdict {
inline constexpr std::int64_t keep_pinned = 0, keep_layout = 1, rebuild = 2, same = 3, refused = 4,
                              refused_out_of_memory = 5;
}

/// Both orders for DDP_DEBUG: registration, and `ready` then the rest.
DDP_INLINE std::string describe_orders(std::span<const tensor_slot> params,
                                       std::span<const std::size_t> ready);

/// The policy's buckets for `order`, members in memory order, laid out as a plan.
DDP_INLINE bucket_plan plan_in_order(const bucket_order_request& req, std::span<const std::size_t> order);

/// The exchange and the decision, on every rank alike: the plan in backward's
/// order when the buckets change, after `lay_out_aside(next)` made on every
/// rank what depends on it without touching what is in use (the caller then
/// swaps it in with operations that cannot throw); nullopt when they stay.
/// Every rank throws alike, no rank's buckets changed, when: the pins differ
/// (ddp::error(mismatch) naming the first such rank); rank 0's policy threw
/// in its ordered assign (before the exchange: it joins it with a refusal);
/// a rank's assign or lay_out_aside threw, or its buckets differ from rank
/// 0's (a second exchange of every rank's whole layout, only when the buckets
/// change). A policy's exception is error_kind::config, std::bad_alloc backend. A rank at
/// another collective (a different step, a different parameter count) fails
/// in the exchange's header check. DDP_DEBUG=INFO: rank 0 logs both orders, once.
DDP_INLINE std::optional<bucket_plan>
agree_on_bucket_order(const bucket_plan& plan, const bucket_order_request& req,
                      function_ref<void(const std::int64_t*, std::int64_t*, std::size_t)> all_gather,
                      function_ref<void(const bucket_plan&)> lay_out_aside);

/// The layout as one exchange row: row[0] the number of buckets, row[1 + p] where parameter p
/// sits (bucket * (n + 1) + its place there; -1: in none), n = row.size() - 1. Two rows are
/// equal exactly when the buckets hold the same parameters in the same order.
DDP_INLINE void write_layout(const bucket_plan& plan, std::span<std::int64_t> row);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/bucket_order-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_HPP
