// The definitions behind debug.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_DEBUG_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEBUG_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/debug.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void log_bucket_layout(const bucket_plan& plan, const std::vector<tensor_slot>& params) {
  std::string s = detail::message({"distributed_data_parallel: ", params.size(), " parameters in ",
                                   plan.buckets.size(), " buckets (launch order):"});
  for (std::size_t i = 0; i < plan.buckets.size(); ++i) {
    auto& b = plan.buckets[i];
    detail::append_message(
        s, {"\n  bucket ", i, ": ", b.params.size(), " tensors, ", b.elements, " x ", to_string(b.param_type),
            (b.wire_type != b.param_type ? " sent as " + std::string(to_string(b.wire_type)) : ""), ", ",
            to_string(b.path), " [", params[b.params.front()].name,
            (b.params.size() > 1 ? " .. " + params[b.params.back()].name : ""), "]"});
  }
  log_line("rank 0", s);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_DEBUG_INL_HPP
