// LibTorch's run-time dtypes mapped onto ddp's element types: a tensor's
// scalar type picks the span type a model walk hands to ddp.
#ifndef DDP_DETAIL_TORCH_ELEMENT_TYPES_HPP
#define DDP_DETAIL_TORCH_ELEMENT_TYPES_HPP

#include <ddp/detail/torch/linkage.hpp>
#include <ddp/tensor.hpp>

// torch::Tensor and c10's scalar types, what a model walk reads: not LibTorch's umbrella
// header, <torch/torch.h>, which costs users far more to parse (docs/performance.md).
#include <torch/types.h>

#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE

template <> struct dtype_of<c10::Half> : std::integral_constant<dtype, dtype::f16> {};
template <> struct dtype_of<c10::BFloat16> : std::integral_constant<dtype, dtype::bf16> {};

namespace detail::libtorch {

template <class T> struct type_tag { using type = T; };

/// The error for a parameter of a dtype ddp does not average.
[[noreturn]] DDP_INLINE void throw_unsupported_element_type(c10::ScalarType s, const std::string& what);

/// Calls f(type_tag<T>{}) with the C++ element type of a parameter of dtype
/// `s`: float32, float64, float16 or bfloat16, the dtypes ddp averages.
template <class F> decltype(auto) with_element_type(c10::ScalarType s, const std::string& what, F&& f) {
  switch (s) {
  case c10::ScalarType::Float: return f(type_tag<float>{});
  case c10::ScalarType::Double: return f(type_tag<double>{});
  case c10::ScalarType::Half: return f(type_tag<c10::Half>{});
  case c10::ScalarType::BFloat16: return f(type_tag<c10::BFloat16>{});
  default: break;
  }
  throw_unsupported_element_type(s, what);
}

/// Calls f(value, grad) over a parameter and its gradient (same device).
template <class T, class F>
void with_parameter(const ::torch::Tensor& value, const ::torch::Tensor& grad, F&& f) {
  auto* v = static_cast<T*>(value.data_ptr());
  auto* g = static_cast<T*>(grad.data_ptr());
  const auto n = static_cast<std::size_t>(value.numel());
  if (value.is_cuda())
    f(device_span<T>{v, n}, device_span<T>{g, n});
  else
    f(std::span<T>(v, n), std::span<T>(g, n));
}

} // namespace detail::libtorch
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_TORCH_RUNTIME
#include <ddp/detail/torch/element_types-inl.hpp>
#endif

#endif // DDP_DETAIL_TORCH_ELEMENT_TYPES_HPP
