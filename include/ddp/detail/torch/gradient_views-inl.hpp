// The definitions behind gradient_views.hpp: compiled in every translation
// unit when ddp is header-only, once in the torch runtime when it is compiled
// separately (detail/torch/linkage.hpp).
#ifndef DDP_DETAIL_TORCH_GRADIENT_VIEWS_INL_HPP
#define DDP_DETAIL_TORCH_GRADIENT_VIEWS_INL_HPP

#include <ddp/detail/torch/gradient_views.hpp>

#include <cstdint>
#include <map>
#include <tuple>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

DDP_INLINE std::vector<::torch::Tensor> make_gradient_views(const std::vector<::torch::Tensor>& params) {
  using group_key = std::tuple<int, int, int>; // dtype, device type, device index
  auto key_of = [](const ::torch::Tensor& p) {
    return group_key{static_cast<int>(p.scalar_type()), static_cast<int>(p.device().type()),
                     p.device().index()};
  };
  std::map<group_key, std::int64_t> totals;
  std::vector<std::int64_t> offsets(params.size());
  for (std::size_t k = params.size(); k-- > 0;) {
    auto& total = totals[key_of(params[k])];
    offsets[k] = total;
    total += params[k].numel();
  }
  std::map<group_key, ::torch::Tensor> storage;
  for (std::size_t k = 0; k < params.size(); ++k) {
    auto& flat = storage[key_of(params[k])];
    if (!flat.defined())
      flat = ::torch::zeros({totals[key_of(params[k])]}, params[k].options().requires_grad(false));
  }
  ::torch::NoGradGuard no_grad;
  std::vector<::torch::Tensor> views;
  views.reserve(params.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    const auto& p = params[k];
    auto flat = storage[key_of(p)];
    void* at =
        static_cast<char*>(flat.data_ptr()) + offsets[k] * static_cast<std::int64_t>(flat.element_size());
    // The deleter owns a reference to the flat storage: a view outlives ddp safely.
    auto view = ::torch::from_blob(
        at, p.sizes(), [flat](void*) mutable { flat.reset(); }, flat.options());
    if (p.grad().defined()) view.copy_(p.grad());
    views.push_back(std::move(view));
  }
  return views;
}

} // namespace detail::libtorch
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TORCH_GRADIENT_VIEWS_INL_HPP
