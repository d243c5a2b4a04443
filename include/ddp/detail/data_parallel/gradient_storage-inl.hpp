// The definitions behind gradient_storage.hpp: compiled in every translation
// unit when ddp is header-only, once in the runtime when it is compiled
// separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_GRADIENT_STORAGE_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_GRADIENT_STORAGE_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/gradient_storage.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void check_gradient_storage(const std::vector<tensor_slot>& params, int rank) {
  const std::string who = detail::message({"rank ", rank, ": "});
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i];
    if (p.count == 0) continue;
    if (!p.value || !p.grad)
      detail::throw_error(error_kind::config,
                          {who, "parameter '", p.name, "' has ", p.count, " elements but its ",
                           (p.value ? "gradient" : "value"),
                           " pointer is null: allocate parameters and gradients before building the "
                           "data-parallel object (a trainer that allocates gradients in its first backward "
                           "must allocate them first)"},
                          rank);
    order.push_back(i);
  }
  auto begin = [&](std::size_t i) { return reinterpret_cast<std::uintptr_t>(params[i].grad); };
  auto end = [&](std::size_t i) { return begin(i) + params[i].count * size_of(params[i].type); };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return begin(a) < begin(b); });
  // Sorted by start, gradients overlap exactly where one starts before the furthest end so far.
  std::size_t reach = 0; // the parameter whose gradient ends furthest, among those before
  for (std::size_t k = 1; k < order.size(); ++k) {
    const std::size_t prev = order[reach], cur = order[k];
    if (begin(cur) < end(prev)) {
      const bool same = begin(cur) == begin(prev) && end(cur) == end(prev);
      const auto& a = params[std::min(prev, cur)];
      const auto& b = params[std::max(prev, cur)];
      detail::throw_error(
          error_kind::config,
          {who, "parameters '", a.name, "' and '", b.name, "' ",
           (same ? "have the same gradient (a parameter listed twice?)" : "have overlapping gradients"),
           ": the shared elements would be reduced twice. List a tied parameter once; give "
           "every other parameter a gradient buffer of its own"},
          rank);
    }
    if (end(cur) > end(prev)) reach = k;
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_GRADIENT_STORAGE_INL_HPP
