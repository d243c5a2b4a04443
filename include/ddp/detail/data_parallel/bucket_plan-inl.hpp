// The definitions behind bucket_plan.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE bucket_plan make_bucket_plan(const std::vector<std::vector<std::size_t>>& assignment,
                                        std::span<const tensor_slot> params, dtype (*wire)(dtype),
                                        plan_capabilities caps) {
  bucket_plan plan;
  std::vector<int> seen(params.size(), 0);
  plan.bucket_of.assign(params.size(), 0);
  for (auto& members : assignment) {
    if (members.empty())
      detail::throw_error(error_kind::config, {"the bucketing policy produced an empty bucket"});
    planned_bucket b;
    b.params = members;
    for (auto i : members) {
      if (i >= params.size())
        detail::throw_error(error_kind::config,
                            {"the bucketing policy named parameter ", i, " of ", params.size()});
      if (seen[i]++)
        detail::throw_error(error_kind::config,
                            {"the bucketing policy put parameter '", params[i].name, "' in two buckets"});
      if (params[i].type != params[members.front()].type)
        detail::throw_error(error_kind::config, {"the bucketing policy mixed dtypes in one bucket ('",
                                                 params[i].name, "' is ", to_string(params[i].type), ")"});
      b.offsets.push_back(b.elements);
      b.elements += params[i].count;
      plan.bucket_of[i] = plan.buckets.size();
    }
    b.param_type = params[members.front()].type;
    b.wire_type = wire(b.param_type);
    plan.buckets.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!seen[i])
      detail::throw_error(error_kind::config,
                          {"the bucketing policy left parameter '", params[i].name, "' out"});
  choose_paths(plan, params, caps);
  return plan;
}

DDP_INLINE std::vector<parameter_desc> describe_for_bucketing(std::span<const tensor_slot> params) {
  std::vector<parameter_desc> out;
  out.reserve(params.size());
  for (auto& p : params)
    out.push_back({p.name, p.type, p.count, p.count * size_of(p.type)});
  return out;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_INL_HPP
