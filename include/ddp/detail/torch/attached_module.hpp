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
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
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
  attached_module(const attached_module&) = delete;
  attached_module& operator=(const attached_module&) = delete;
  ~attached_module() { disconnect(); }

  template <class F> void for_each_parameter(F&& f) {
    for (auto& e : params_) {
      if (!e.param.is_contiguous()) require_contiguous(e.param, "parameter '" + e.name + "'");
      with_element_type(e.param.scalar_type(), e.name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        with_parameter<T>(e.param, e.view, [&](auto value, auto grad) { f(e.name, value, grad); });
      });
    }
  }

  /// Buffers are only broadcast: any dtype goes as its bytes.
  template <class F> void for_each_buffer(F&& f) {
    for (auto& b : buffers_) {
      std::span<std::uint8_t> bytes(static_cast<std::uint8_t*>(b.value.data_ptr()),
                                    static_cast<std::size_t>(b.value.nbytes()));
      f(b.name, bytes);
    }
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
            p.version_after_hook = p.view._version();
            sink.ready(i);
            return outputs;
          });
      e.hook = hook.get();
      e.accumulator->add_post_hook(std::move(hook));
    }
  }

  /// At synchronize(), for each gradient not marked by hand: one autograd
  /// produced since the last synchronize() must not have changed since (its
  /// bucket may already be reduced: change gradients after synchronize()); one
  /// it did not produce (a branch not taken) counts as zeros, unless it was
  /// written since (set by hand: reduced as it is), or nothing at all happened
  /// since the last synchronize() (reduced again as it is). One that arrived
  /// during no_sync() steps stays as accumulated.
  void before_synchronize(gradient_sink sink) {
    bool any_fired = false;
    for (auto& e : params_)
      any_fired = any_fired || e.fired;
    try {
      for (std::size_t i = 0; i < params_.size(); ++i) {
        auto& e = params_[i];
        const bool replaced = e.param.grad().defined() && !is_view(e);
        if (e.fired) {
          if (replaced || e.view._version() != e.version_after_hook)
            throw error(
                error_kind::config,
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

private:
  struct parameter {
    std::string name;
    ::torch::Tensor param, view;
    std::shared_ptr<::torch::autograd::Node> accumulator{};
    ::torch::autograd::FunctionPostHook* hook = nullptr;
    bool fired = false; ///< autograd produced it since the last synchronize()
    std::int64_t version_after_hook = 0, version_at_sync = 0; ///< the view's version counter then
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

  /// CUDA parameters need the hooks to follow LibTorch's current stream, which
  /// ddp does not do yet; until that is built and run, they are refused.
  static void require_host(const ::torch::Tensor& t, const std::string& what) {
    if (!t.device().is_cpu())
      throw error(error_kind::config,
                  what + " lives on " + t.device().str() +
                      ": ddp::torch takes CPU modules for now (CUDA LibTorch modules are not supported yet)");
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

  void end_round() {
    for (auto& e : params_) {
      e.fired = false;
      e.version_at_sync = e.view._version();
    }
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
