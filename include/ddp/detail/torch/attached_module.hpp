// A LibTorch module as distributed_data_parallel walks it: its trainable
// parameters with gradients in ddp-owned views, its buffers, and hooks on
// autograd's gradient accumulators that report each gradient as backward
// finishes it (as PyTorch's reducer does), so buckets overlap backward.
#ifndef DDP_DETAIL_TORCH_ATTACHED_MODULE_HPP
#define DDP_DETAIL_TORCH_ATTACHED_MODULE_HPP

#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/detail/torch/element_types.hpp>
#include <ddp/detail/torch/linkage.hpp>

#include <torch/csrc/autograd/function.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

class attached_module {
public:
  /// Trainable parameters (requires_grad) in registration order, then buffers.
  /// Frozen parameters are left alone: neither averaged nor broadcast.
  DDP_INLINE explicit attached_module(::torch::nn::Module& m);
  attached_module(const attached_module&) = delete;
  attached_module& operator=(const attached_module&) = delete;
  DDP_INLINE ~attached_module();

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
  DDP_INLINE void connect(gradient_sink sink);

  /// At synchronize(), for each gradient not marked by hand: one autograd
  /// produced since the last synchronize() must not have changed since (its
  /// bucket may already be reduced: change gradients after synchronize()); one
  /// it did not produce (a branch not taken) counts as zeros, unless it was
  /// written since (set by hand: reduced as it is), or nothing at all happened
  /// since the last synchronize() (reduced again as it is). One that arrived
  /// during no_sync() steps stays as accumulated.
  DDP_INLINE void before_synchronize(gradient_sink sink);

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

  DDP_INLINE static void require_contiguous(const ::torch::Tensor& t, const std::string& what);

  /// CUDA parameters need the hooks to follow LibTorch's current stream, which
  /// ddp does not do yet; until that is built and run, they are refused.
  DDP_INLINE static void require_host(const ::torch::Tensor& t, const std::string& what);

  static bool is_view(const parameter& e) { return e.param.grad().data_ptr() == e.view.data_ptr(); }

  /// Copies a gradient autograd put in a new tensor into the view, which
  /// becomes .grad again.
  DDP_INLINE static void adopt_gradient(parameter& e);

  DDP_INLINE void end_round();
  DDP_INLINE void disconnect() noexcept;

  std::vector<parameter> params_;
  std::vector<buffer> buffers_;
};

} // namespace detail::libtorch
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_TORCH_RUNTIME
#include <ddp/detail/torch/attached_module-inl.hpp>
#endif

#endif // DDP_DETAIL_TORCH_ATTACHED_MODULE_HPP
