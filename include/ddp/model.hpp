// The model concept: any type that can list its parameters (value and gradient
// tensors, in forward/registration order) and, optionally, its buffers.
#ifndef DDP_MODEL_HPP
#define DDP_MODEL_HPP

#include <ddp/tensor.hpp>

#include <string_view>
#include <type_traits>

DDP_BEGIN_NAMESPACE

/// Customization point for model types you cannot change: specialize with
///   template <class F> static void for_each_parameter(M& m, F&& f);  // f(name, value, grad)
///   template <class F> static void for_each_buffer(M& m, F&& f);     // optional: f(name, value)
/// Optionally, for models whose framework knows when each gradient is final
/// (an autograd engine, as in ddp/torch.hpp):
///   static A attach(M& m);
/// distributed_data_parallel then keeps the returned A for its lifetime and
/// walks A instead of m (A is a model: its gradients may be storage it owns,
/// laid out so buckets reduce in place), calls a.connect(sink) once built, so
/// that A reports each gradient through ddp::gradient_sink as backward makes
/// it, and a.before_synchronize(sink) at each synchronize(), where A reports
/// the gradients that got none since the last one as unused.
/// The primary template forwards to the model's own member functions.
template <class M> struct model_traits {
  // MM = M keeps the member lookup in the immediate context: a model without
  // for_each_buffer makes this overload vanish instead of a hard error.
  template <class F, class MM = M>
  static auto for_each_parameter(MM& m, F&& f) -> decltype(m.for_each_parameter(static_cast<F&&>(f))) {
    return m.for_each_parameter(static_cast<F&&>(f));
  }
  template <class F, class MM = M>
  static auto for_each_buffer(MM& m, F&& f) -> decltype(m.for_each_buffer(static_cast<F&&>(f))) {
    return m.for_each_buffer(static_cast<F&&>(f));
  }
};

namespace detail {
/// Stands in for ddp's visitor when checking the concept.
struct parameter_probe {
  template <class N, class V, class G> void operator()(N&&, V&&, G&&) const {}
};
struct buffer_probe {
  template <class N, class V> void operator()(N&&, V&&) const {}
};
} // namespace detail

template <class M>
concept model = requires(M& m) {
  model_traits<M>::for_each_parameter(m, detail::parameter_probe{});
};

/// A model whose traits attach an adapter that marks gradients by itself.
template <class M>
concept attachable_model = model<M> && requires(M& m) {
  model_traits<M>::attach(m);
};

template <class M>
concept model_with_buffers = model<M> && requires(M& m) {
  model_traits<M>::for_each_buffer(m, detail::buffer_probe{});
};

DDP_END_NAMESPACE

#endif // DDP_MODEL_HPP
