// A LibTorch module as distributed_data_parallel walks it: its trainable
// parameters with gradients in ddp-owned views, its buffers, and hooks on
// autograd's gradient accumulators that report each gradient as backward
// finishes it (as PyTorch's reducer does), so buckets overlap backward.
#ifndef DDP_DETAIL_TORCH_ATTACHED_MODULE_HPP
#define DDP_DETAIL_TORCH_ATTACHED_MODULE_HPP

#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/detail/torch/element_types.hpp>
#include <ddp/detail/torch/gradient_views.hpp>
#include <ddp/error.hpp>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

class attached_module {
public:
  /// Trainable parameters (requires_grad) in registration order, then buffers.
  /// Frozen parameters are left alone: neither averaged nor broadcast.
  explicit attached_module(::torch::nn::Module& m) {
    std::vector<::torch::Tensor> trainable;
    for (auto& item : m.named_parameters(/*recurse=*/true)) {
      const auto& p = item.value();
      if (!p.requires_grad()) continue;
      const std::string what = "parameter '" + item.key() + "'";
      with_element_type(p.scalar_type(), /*floating_only=*/true, what, [](auto) {});
      require_contiguous(p, what);
      params_.push_back({item.key(), p, {}});
      trainable.push_back(p);
    }
    auto views = make_gradient_views(trainable);
    for (std::size_t k = 0; k < params_.size(); ++k) {
      params_[k].view = std::move(views[k]);
      params_[k].param.mutable_grad() = params_[k].view;
    }
    for (auto& item : m.named_buffers(/*recurse=*/true)) {
      const auto& b = item.value();
      if (!b.defined()) continue;
      const std::string what = "buffer '" + item.key() + "'";
      with_element_type(b.scalar_type(), /*floating_only=*/false, what, [](auto) {});
      require_contiguous(b, what);
      buffers_.push_back({item.key(), b});
    }
  }
  attached_module(const attached_module&) = delete;
  attached_module& operator=(const attached_module&) = delete;
  ~attached_module() { disconnect(); }

  template <class F> void for_each_parameter(F&& f) {
    for (auto& e : params_) {
      require_contiguous(e.param, "parameter '" + e.name + "'");
      with_element_type(e.param.scalar_type(), true, e.name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_parameter<T>(e.param, e.view, [&](auto value, auto grad) { f(e.name, value, grad); });
      });
    }
  }

  template <class F> void for_each_buffer(F&& f) {
    for (auto& b : buffers_)
      with_element_type(b.value.scalar_type(), false, b.name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_elements<T>(b.value, [&](auto value) { f(b.name, value); });
      });
  }

  /// Hooks each parameter's gradient accumulator: once autograd has added this
  /// step's gradient, the gradient is put back in its view (when autograd made
  /// a new tensor: after zero_grad(set_to_none) or on a first backward) and
  /// reported ready.
  void connect(gradient_sink sink) {
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
            sink.ready(i);
            return outputs;
          });
      e.hook = hook.get();
      e.accumulator->add_post_hook(std::move(hook));
    }
  }

  /// Gradients that autograd did not produce since the last synchronize()
  /// (a branch not taken) count as zeros; one that arrived during no_sync()
  /// steps stays as accumulated. A gradient replaced after backward made it
  /// is refused: its bucket may already have been reduced without it.
  void before_synchronize(gradient_sink sink) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& e = params_[i];
      const bool replaced = e.param.grad().defined() && !is_view(e);
      if (e.fired && replaced) {
        clear_fired();
        throw error(error_kind::config,
                    "parameter '" + e.name +
                        "': its gradient was replaced by a new tensor after backward produced it; change "
                        "gradients in place (p.grad().mul_(...)) so ddp reduces what you changed");
      }
      if (e.fired) continue;
      if (replaced) {
        adopt_gradient(e); // set by hand before synchronize(): reduced as it is
        continue;
      }
      e.param.mutable_grad() = e.view;
      sink.unused(i);
    }
    clear_fired();
  }

private:
  struct parameter {
    std::string name;
    ::torch::Tensor param, view;
    std::shared_ptr<::torch::autograd::Node> accumulator{};
    ::torch::autograd::FunctionPostHook* hook = nullptr;
    bool fired = false;
  };
  struct buffer {
    std::string name;
    ::torch::Tensor value;
  };

  static void require_contiguous(const ::torch::Tensor& t, const std::string& what) {
    if (!t.is_contiguous())
      throw error(error_kind::config,
                  what + " is not contiguous: ddp reduces a tensor as one run of elements; make it "
                         "contiguous (p.set_data(p.contiguous())) before building distributed_data_parallel");
  }

  static bool is_view(const parameter& e) { return e.param.grad().data_ptr() == e.view.data_ptr(); }

  /// Copies a gradient autograd put in a new tensor into the view, which
  /// becomes .grad again.
  static void adopt_gradient(parameter& e) {
    const auto& g = e.param.grad();
    if (!g.defined() || is_view(e)) return;
    ::torch::NoGradGuard no_grad;
    e.view.copy_(g);
    e.param.mutable_grad() = e.view;
  }

  void clear_fired() {
    for (auto& e : params_)
      e.fired = false;
  }

  void disconnect() noexcept {
    for (auto& e : params_) {
      if (!e.accumulator || !e.hook) continue;
      auto& hooks = e.accumulator->post_hooks();
      hooks.erase(
          std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.get() == e.hook; }),
          hooks.end());
      e.hook = nullptr;
    }
  }

  std::vector<parameter> params_;
  std::vector<buffer> buffers_;
};

} // namespace detail::libtorch
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TORCH_ATTACHED_MODULE_HPP
