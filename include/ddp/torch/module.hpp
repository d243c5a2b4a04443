// LibTorch modules as ddp models: any type derived from torch::nn::Module (or
// a torch::nn::ModuleHolder such as the `Net` of TORCH_MODULE(Net)).
// distributed_data_parallel then lays the gradients out as bucket views and
// hooks autograd, so backward() marks them: no mark_grad_ready calls.
#ifndef DDP_TORCH_MODULE_HPP
#define DDP_TORCH_MODULE_HPP

#include <ddp/detail/torch/attached_module.hpp>
#include <ddp/detail/torch/instances.hpp>
#include <ddp/model.hpp>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>

DDP_BEGIN_NAMESPACE

namespace detail::libtorch {
template <class M>
concept module = std::derived_from<M, ::torch::nn::Module>;

template <class H>
concept module_holder = requires {
  typename H::ContainedType;
}
&&std::derived_from<H, ::torch::nn::ModuleHolder<typename H::ContainedType>>;

/// The module a model stands for: itself, or what its holder holds.
template <class M>::torch::nn::Module& module_of(M& m) {
  if constexpr (module_holder<M>)
    return *m.ptr();
  else
    return m;
}

/// Outside distributed_data_parallel, a module's walk hands out the gradients
/// it has; one it lacks is an error (distributed_data_parallel creates them).
template <class F> void for_each_parameter_as_is(::torch::nn::Module& m, F&& f) {
  std::unordered_set<const void*> seen; // tied parameters: one tensor under two names
  for (auto& item : m.named_parameters(/*recurse=*/true)) {
    const auto& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    const std::string what = "parameter '" + item.key() + "'";
    if (!p.grad().defined())
      throw error(error_kind::config, what + " has no gradient yet: run backward first, or build "
                                             "distributed_data_parallel, which gives every parameter one");
    with_element_type(p.scalar_type(), what, [&](auto tag) {
      using T = typename decltype(tag)::type;
      with_parameter<T>(p, p.grad(), [&](auto value, auto grad) { f(item.key(), value, grad); });
    });
  }
}
} // namespace detail::libtorch

template <class M>
requires detail::libtorch::module<M> || detail::libtorch::module_holder<M>
struct model_traits<M> {
  /// What distributed_data_parallel walks and keeps: gradients in its own
  /// views, reported by autograd hooks (see ddp/model.hpp).
  static detail::libtorch::attached_module attach(M& m) {
    return detail::libtorch::attached_module(detail::libtorch::module_of(m));
  }
  template <class F> static void for_each_parameter(M& m, F&& f) {
    detail::libtorch::for_each_parameter_as_is(detail::libtorch::module_of(m), f);
  }
  /// Buffers are only broadcast: any dtype goes as its bytes.
  template <class F> static void for_each_buffer(M& m, F&& f) {
    for (auto& item : detail::libtorch::module_of(m).named_buffers(/*recurse=*/true)) {
      std::span<std::uint8_t> bytes(static_cast<std::uint8_t*>(item.value().data_ptr()),
                                    static_cast<std::size_t>(item.value().nbytes()));
      f(item.key(), bytes);
    }
  }
};

DDP_END_NAMESPACE

#endif // DDP_TORCH_MODULE_HPP
