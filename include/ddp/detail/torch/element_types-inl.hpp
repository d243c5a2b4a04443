// The definitions behind element_types.hpp: compiled in every translation
// unit when ddp is header-only, once in the torch runtime when it is compiled
// separately (detail/torch/linkage.hpp).
#ifndef DDP_DETAIL_TORCH_ELEMENT_TYPES_INL_HPP
#define DDP_DETAIL_TORCH_ELEMENT_TYPES_INL_HPP

#include <ddp/detail/torch/element_types.hpp>
#include <ddp/error.hpp>

#include <string>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

DDP_INLINE void throw_unsupported_element_type(c10::ScalarType s, const std::string& what) {
  throw error(error_kind::config,
              what + " is " + std::string(c10::toString(s)) +
                  ": ddp averages float32, float64, float16 and bfloat16 parameters; keep "
                  "this one frozen (requires_grad false) or convert it");
}

} // namespace detail::libtorch
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TORCH_ELEMENT_TYPES_INL_HPP
