// The definitions behind attached_module.hpp: compiled in every translation
// unit when ddp is header-only, once in the torch runtime when it is compiled
// separately (detail/torch/linkage.hpp).
#ifndef DDP_DETAIL_TORCH_ATTACHED_MODULE_INL_HPP
#define DDP_DETAIL_TORCH_ATTACHED_MODULE_INL_HPP

#include <ddp/detail/torch/attached_module.hpp>
#include <ddp/detail/torch/gradient_views.hpp>
#include <ddp/error.hpp>

#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <algorithm>
#include <unordered_set>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

DDP_INLINE attached_module::attached_module(::torch::nn::Module& m) {
  std::vector<::torch::Tensor> trainable;
  std::unordered_set<const void*> seen; // tied parameters: one tensor under two names
  for (auto& item : m.named_parameters(/*recurse=*/true)) {
    const auto& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    const std::string what = "parameter '" + item.key() + "'";
    with_element_type(p.scalar_type(), what, [](auto) {});
    require_host(p, what);
    require_contiguous(p, what);
    params_.push_back({item.key(), p, {}});
    trainable.push_back(p);
  }
  auto views = make_gradient_views(trainable);
  for (std::size_t k = 0; k < params_.size(); ++k) {
    params_[k].view = std::move(views[k]);
    params_[k].param.mutable_grad() = params_[k].view;
    params_[k].version_at_sync = params_[k].view._version();
  }
  for (auto& item : m.named_buffers(/*recurse=*/true)) {
    const auto& b = item.value();
    if (!b.defined() || !seen.insert(b.unsafeGetTensorImpl()).second) continue;
    const std::string what = "buffer '" + item.key() + "'";
    require_host(b, what);
    require_contiguous(b, what);
    buffers_.push_back({item.key(), b});
  }
}

DDP_INLINE attached_module::~attached_module() { disconnect(); }

DDP_INLINE void attached_module::connect(gradient_sink sink) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& e = params_[i];
    e.accumulator = ::torch::autograd::impl::grad_accumulator(e.param);
    if (!e.accumulator)
      throw error(error_kind::config, "parameter '" + e.name +
                                          "' has no gradient accumulator (is it a leaf tensor that "
                                          "requires grad?)");
    auto hook = std::make_unique<::torch::autograd::utils::LambdaPostHook>(
        [this, i, sink](const ::torch::autograd::variable_list& outputs,
                        const ::torch::autograd::variable_list&) {
          auto& p = params_[i];
          adopt_gradient(p);
          p.fired = true;
          p.version_after_hook = p.view._version();
          sink.ready(i);
          return outputs;
        });
    e.hook = hook.get();
    e.accumulator->add_post_hook(std::move(hook));
  }
}

DDP_INLINE void attached_module::before_synchronize(gradient_sink sink) {
  bool any_fired = false;
  for (auto& e : params_)
    any_fired = any_fired || e.fired;
  try {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& e = params_[i];
      const bool replaced = e.param.grad().defined() && !is_view(e);
      if (e.fired) {
        if (replaced || e.view._version() != e.version_after_hook)
          throw error(error_kind::config,
                      "parameter '" + e.name + "': its gradient was " +
                          (replaced ? "replaced by a new tensor" : "changed in place") +
                          " after backward produced it and before synchronize(); its bucket may already "
                          "have been reduced without the change: change gradients (clipping, scaling) after "
                          "synchronize() returns");
        continue;
      }
      if (sink.marked(i)) continue; // mark_grad_ready / mark_unused by hand
      if (replaced) {
        adopt_gradient(e);
        continue;
      }
      if (!e.param.grad().defined()) {
        e.param.mutable_grad() = e.view; // zero_grad(set_to_none) and no backward since
      } else if (e.view._version() != e.version_at_sync || !any_fired) {
        continue;
      }
      sink.unused(i);
    }
  } catch (...) {
    end_round();
    throw;
  }
  end_round();
}

DDP_INLINE void attached_module::require_contiguous(const ::torch::Tensor& t, const std::string& what) {
  if (!t.is_contiguous())
    throw error(error_kind::config,
                what + " is not contiguous: ddp reduces a tensor as one run of elements; make it "
                       "contiguous (p.set_data(p.contiguous())) before building distributed_data_parallel");
}

DDP_INLINE void attached_module::require_host(const ::torch::Tensor& t, const std::string& what) {
  if (!t.device().is_cpu())
    throw error(error_kind::config,
                what + " lives on " + t.device().str() +
                    ": ddp::torch takes CPU modules for now (CUDA LibTorch modules are not supported yet)");
}

DDP_INLINE void attached_module::adopt_gradient(parameter& e) {
  const auto& g = e.param.grad();
  if (!g.defined() || is_view(e)) return;
  ::torch::NoGradGuard no_grad;
  e.view.copy_(g);
  e.param.mutable_grad() = e.view;
}

DDP_INLINE void attached_module::end_round() {
  for (auto& e : params_) {
    e.fired = false;
    e.version_at_sync = e.view._version();
  }
}

DDP_INLINE void attached_module::disconnect() noexcept {
  for (auto& e : params_) {
    if (!e.accumulator || !e.hook) continue;
    auto& hooks = e.accumulator->post_hooks();
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.get() == e.hook; }),
                hooks.end());
    e.hook = nullptr;
  }
}

} // namespace detail::libtorch
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TORCH_ATTACHED_MODULE_INL_HPP
