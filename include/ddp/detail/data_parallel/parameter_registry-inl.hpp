// The definitions behind parameter_registry.hpp's parameter_slots: compiled
// in every translation unit when ddp is header-only, once in the runtime when
// it is compiled separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE parameter_slots::parameter_slots(std::vector<tensor_slot> params, std::vector<tensor_slot> buffers,
                                            int rank)
    : params_(std::move(params)), buffers_(std::move(buffers)) {
  check_unique_names(params_, "parameters");
  check_unique_names(buffers_, "buffers");
  check_gradient_storage(params_, rank);
  index_gradients();
}

DDP_INLINE void parameter_slots::replace(std::vector<tensor_slot> params, std::vector<tensor_slot> buffers,
                                         int rank) {
  check_unchanged(params, params_, "parameter", rank);
  check_unchanged(buffers, buffers_, "buffer", rank);
  check_gradient_storage(params, rank);
  params_ = std::move(params);
  buffers_ = std::move(buffers);
  index_gradients();
}

DDP_INLINE std::size_t parameter_slots::index(std::string_view name) const {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return i;
  detail::throw_error(error_kind::config, {"no parameter named '", name, "'"});
}

DDP_INLINE bool parameter_slots::gradients_on_device(int rank) const {
  for (auto& p : params_)
    if (p.on_device != params_.front().on_device)
      detail::throw_error(error_kind::config,
                          {"rank ", rank, ": parameter '", p.name, "' lives in ",
                           (p.on_device ? "device" : "host"), " memory but parameter '", params_.front().name,
                           "' does not: distributed_data_parallel needs every gradient in one memory space"},
                          rank);
  return !params_.empty() && params_.front().on_device;
}

DDP_INLINE bool parameter_slots::any_on_device() const {
  for (auto* list : {&params_, &buffers_})
    for (auto& s : *list)
      if (s.on_device) return true;
  return false;
}

DDP_INLINE void parameter_slots::index_gradients() {
  by_grad_.clear();
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].count > 0) by_grad_[params_[i].grad] = i;
}

DDP_INLINE void parameter_slots::throw_first_difference(const std::vector<std::string>& each) {
  for (std::size_t r = 1; r < each.size(); ++r) {
    auto diff = first_difference(each[0], each[r], static_cast<int>(r));
    if (!diff.empty())
      detail::throw_error(error_kind::mismatch,
                          {"the model differs between ranks: ", diff,
                           ". Every rank must build the same model (same parameters, in the "
                           "same order, with the same dtypes and sizes)."},
                          static_cast<int>(r));
  }
  for (std::size_t r = 1; r < each.size(); ++r) {
    auto diff = first_setting_difference(each[0], each[r], static_cast<int>(r));
    if (!diff.empty())
      detail::throw_error(error_kind::mismatch,
                          {diff, ": set the same options on every rank (the ranks must run the same "
                                 "collectives). No rank went on"},
                          static_cast<int>(r));
  }
}

DDP_INLINE void parameter_slots::check_unchanged(const std::vector<tensor_slot>& now,
                                                 const std::vector<tensor_slot>& before, const char* what,
                                                 int rank) {
  for (std::size_t i = 0; i < before.size(); ++i)
    if (i >= now.size() || now[i].count != before[i].count || now[i].name != before[i].name)
      detail::throw_error(error_kind::config,
                          {"rank ", rank, ": ", what, " '", before[i].name,
                           "' changed its name or size after distributed_data_parallel was built"});
  if (now.size() != before.size())
    detail::throw_error(error_kind::config,
                        {"the model's ", what, " count changed after distributed_data_parallel was built"});
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_INL_HPP
