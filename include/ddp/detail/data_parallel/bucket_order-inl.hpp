// The definitions behind bucket_order.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_INL_HPP

#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/bucket_order.hpp>
#include <ddp/detail/data_parallel/debug.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <new>
#include <span>
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
  std::string s = detail::message(
      {"\n  registration order: ", names(registration),
       "\n  backward order (marked ready on rank 0): ", names(std::span(order).first(marked))});
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

DDP_INLINE void write_layout(const bucket_plan& plan, std::span<std::int64_t> row) {
  const auto n = static_cast<std::int64_t>(row.size() - 1);
  std::fill(row.begin(), row.end(), std::int64_t{-1});
  row[0] = static_cast<std::int64_t>(plan.buckets.size());
  for (std::size_t b = 0; b < plan.buckets.size(); ++b)
    for (std::size_t k = 0; k < plan.buckets[b].params.size(); ++k) {
      const auto p = plan.buckets[b].params[k];
      // A parameter outside the row (a plan for another model) makes the rows differ.
      if (p < row.size() - 1)
        row[1 + p] = static_cast<std::int64_t>(b) * (n + 1) + static_cast<std::int64_t>(k);
      else
        row[0] = -2;
    }
}

DDP_INLINE std::optional<bucket_plan>
agree_on_bucket_order(const bucket_plan& plan, const bucket_order_request& req,
                      function_ref<void(const std::int64_t*, std::int64_t*, std::size_t)> all_gather,
                      function_ref<void(const bucket_plan&)> lay_out_aside) {
  const bool log = req.rank == 0 && debug() >= debug_level::info;
  // What an exception that left the policy (or an allocation) says.
  auto what_of = [](const std::exception_ptr& e) -> std::string {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) { return x.what(); } catch (...) {
      return "an exception not derived from std::exception";
    }
  };
  auto same_buckets = [](const bucket_plan& a, const bucket_plan& b) {
    bool same = a.buckets.size() == b.buckets.size();
    for (std::size_t k = 0; same && k < a.buckets.size(); ++k)
      same = a.buckets[k].params == b.buckets[k].params;
    return same;
  };
  const std::string when =
      req.step ? detail::message({"after step ", req.step}) : "in a joined rank's stand-in step";
  const std::string after = detail::message({"distributed_data_parallel: ", when, ", "});
  const std::string me = detail::message({"rank ", req.rank, ": "});
  const std::string unchanged = ". No rank changed its buckets: the step's gradients are reduced, and "
                                "the next steps run on the first buckets";
  if (req.fixed) {
    if (log)
      log_line("rank 0", detail::message({after, "the buckets stay in registration order: ", req.fixed,
                                          describe_orders(req.params, req.ready)}));
    return std::nullopt;
  }
  const std::size_t n = req.params.size(), w = static_cast<std::size_t>(req.world), row = n + 3;
  const auto mine_order = backward_order(req.ready, n);
  // Only rank 0's verdict counts: it decides from its own layout, the others follow. It makes
  // the new buckets before the exchange, so that a policy that throws there is a refusal every
  // rank hears in the exchange, not a rank missing from it.
  std::int64_t verdict = order_verdict::keep_pinned;
  std::size_t kept_bytes = 0;
  std::optional<bucket_plan> rebuilt;
  std::string refusal;
  if (req.rank == 0 && !req.pinned) {
    try {
      rebuilt = plan_in_order(req, mine_order);
      // A layout made for the first buckets is not traded for copies: the new buckets must
      // reduce as many bytes in place.
      kept_bytes = in_place_bytes(plan);
      verdict = laid_out_for(plan) && in_place_bytes(*rebuilt) < kept_bytes ? order_verdict::keep_layout
                : same_buckets(*rebuilt, plan)                              ? order_verdict::same
                                                                            : order_verdict::rebuild;
    } catch (const std::bad_alloc& x) {
      verdict = order_verdict::refused_out_of_memory;
      refusal = x.what();
    } catch (...) {
      verdict = order_verdict::refused;
      refusal = what_of(std::current_exception());
    }
  }
  // Everything the two exchanges need, allocated before the first: from there to the second,
  // nothing allocates outside a try, so no rank leaves its peers waiting there.
  std::vector<std::int64_t> mine(row), all(row * w), outcome(n + 2), outcomes((n + 2) * w);
  std::vector<std::size_t> order(n);
  std::vector<bool> seen(n, false);
  mine[0] = req.pinned ? 1 : 0;
  mine[1] = verdict;
  mine[2] = static_cast<std::int64_t>(n);
  for (std::size_t k = 0; k < n; ++k)
    mine[3 + k] = static_cast<std::int64_t>(mine_order[k]);
  {
    call_site site{req.step ? call_kind::ddp_rebuild_buckets : call_kind::none, req.step, 0, 1};
    const call_site_scope named(site);
    all_gather(mine.data(), all.data(), row);
  }
  for (std::size_t r = 1; r < w; ++r)
    if (all[r * row] != all[0])
      detail::throw_error(error_kind::mismatch,
                          {me, when,
                           ", distributed_data_parallel's buckets are rebuilt in backward's order unless "
                           "ddp_options::pin_bucket_order is set, but rank ",
                           r, " has it ", (all[r * row] ? "on" : "off"), " and rank 0 ",
                           (all[0] ? "on" : "off"),
                           ": set the same options on every rank (the buckets must be the same everywhere). "
                           "No rank changed its buckets"},
                          static_cast<int>(r));
  if (all[1] == order_verdict::refused || all[1] == order_verdict::refused_out_of_memory) {
    // The policy's exception is the user's to fix; running out of memory is the machine's.
    const bool oom = all[1] == order_verdict::refused_out_of_memory;
    detail::throw_error(oom ? error_kind::backend : error_kind::config,
                        {me, when, ", rebuilding the buckets in backward's order: ",
                         (req.rank == 0 ? "making the new buckets (the bucketing policy's assign(params, "
                                          "order), then their plan) threw: " +
                                              refusal
                                        : detail::message({"rank 0 could not make the new buckets (",
                                                           (oom ? "out of memory"
                                                                : "its bucketing policy's assign(params, "
                                                                  "order) or the plan threw"),
                                                           "; rank 0's error says what)"})),
                         unchanged, "; fix the policy, or set ddp_options::pin_bucket_order on every rank"},
                        0);
  }
  // Rank 0's order, checked: every index once (the header check made the counts equal).
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = all[3 + k];
    if (all[2] != static_cast<std::int64_t>(n) || i < 0 || static_cast<std::size_t>(i) >= n ||
        seen[static_cast<std::size_t>(i)])
      detail::throw_error(error_kind::mismatch,
                          {me, "rank 0 sent a bucket order that is not a permutation of this rank's ", n,
                           " parameters: the ranks hold different models"},
                          0);
    seen[static_cast<std::size_t>(i)] = true;
    order[k] = static_cast<std::size_t>(i);
  }
  if (all[1] == order_verdict::same) {
    if (log)
      log_line("rank 0",
               detail::message({after,
                                "the buckets in the order backward marked the gradients on rank 0 are the "
                                "ones in use",
                                describe_orders(req.params, req.ready)}));
    return std::nullopt;
  }
  if (all[1] != order_verdict::rebuild) {
    if (log)
      log_line(
          "rank 0",
          detail::message(
              {after, "the buckets stay in registration order: ",
               (all[1] == order_verdict::keep_pinned
                    ? std::string("ddp_options::pin_bucket_order is set")
                    : detail::message({"the gradients lie in memory for those buckets (", kept_bytes,
                                       " bytes reduced in place; ddp::arena, ddp::flat_model, LibTorch's "
                                       "gradient views), and buckets in backward's order would copy some"})),
               describe_orders(req.params, req.ready)}));
    return std::nullopt;
  }
  // Every rank makes the new buckets and lays out what depends on them aside; a second exchange
  // says whether all did, and the same buckets, before any rank takes them
  // (docs/design-notes.md, "Note [rebuild all or none]").
  std::exception_ptr failed;
  bool out_of_memory = false;
  try {
    if (!rebuilt) rebuilt = plan_in_order(req, order);
    lay_out_aside(*rebuilt);
  } catch (const std::bad_alloc&) {
    failed = std::current_exception();
    out_of_memory = true;
  } catch (...) { failed = std::current_exception(); }
  // Each rank's whole layout travels, not a hash of it: two layouts that differ are told apart
  // exactly. Row: how it failed (0: it did not; 1: the policy or the plan threw; 2: out of
  // memory), then the layout (write_layout).
  const std::size_t orow = outcome.size();
  outcome[0] = !failed ? 0 : out_of_memory ? 2 : 1;
  if (!failed) write_layout(*rebuilt, std::span(outcome).subspan(1));
  {
    call_site site{req.step ? call_kind::ddp_rebuild_buckets : call_kind::none, req.step, 1, 2};
    const call_site_scope named(site);
    all_gather(outcome.data(), outcomes.data(), orow);
  }
  for (std::size_t r = 0; r < w; ++r)
    if (outcomes[orow * r])
      detail::throw_error(
          outcomes[orow * r] == 2 ? error_kind::backend : error_kind::config,
          {me, when, ", rebuilding the buckets in backward's order: ",
           (static_cast<int>(r) == req.rank
                ? "this rank failed to make or lay out the new buckets: " + what_of(failed)
                : detail::message({"rank ", r, " failed to make or lay out the new buckets (",
                                   (outcomes[orow * r] == 2 ? "out of memory" : "its policy or plan threw"),
                                   "; its error says what)"})),
           unchanged},
          static_cast<int>(r));
  for (std::size_t r = 1; r < w; ++r)
    if (!std::equal(outcomes.begin() + static_cast<std::ptrdiff_t>(orow * r + 1),
                    outcomes.begin() + static_cast<std::ptrdiff_t>(orow * (r + 1)), outcomes.begin() + 1))
      detail::throw_error(error_kind::mismatch,
                          {me, when,
                           ", rebuilding the buckets in backward's order: the bucketing policy made "
                           "other buckets on rank ",
                           r, " than on rank 0 from rank 0's order", unchanged,
                           "; a policy's assign must depend on nothing but its arguments"},
                          static_cast<int>(r));
  if (log) {
    try { // best effort: every rank takes the new buckets now, whatever a log line does
      log_line("rank 0",
               detail::message({after, "buckets rebuilt in the order backward marked the gradients on rank 0",
                                describe_orders(req.params, req.ready)}));
      log_bucket_layout(*rebuilt, std::vector<tensor_slot>(req.params.begin(), req.params.end()));
    } catch (...) {}
  }
  return rebuilt;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_ORDER_INL_HPP
