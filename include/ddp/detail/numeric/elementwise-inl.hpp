// The definitions behind elementwise.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_NUMERIC_ELEMENTWISE_INL_HPP
#define DDP_DETAIL_NUMERIC_ELEMENTWISE_INL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/numeric/elementwise.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE reduce_fn reduce_for(dtype d, op o) {
  switch (d) {
  case dtype::f32: return pick_reduce<plain_codec<float>>(o);
  case dtype::f64: return pick_reduce<plain_codec<double>>(o);
  case dtype::f16: return pick_reduce<f16_codec>(o);
  case dtype::bf16: return pick_reduce<bf16_codec>(o);
  case dtype::i32: return pick_reduce<plain_codec<std::int32_t>>(o);
  case dtype::i64: return pick_reduce<plain_codec<std::int64_t>>(o);
  case dtype::u8: return pick_reduce<plain_codec<std::uint8_t>>(o);
  case dtype::i8: return pick_reduce<plain_codec<std::int8_t>>(o);
  }
  return nullptr;
}

DDP_INLINE void sum_scaled(void* out, const void* a, const void* b, std::size_t n, dtype d, double factor) {
  switch (d) {
  case dtype::f32: return sum_scaled_kernel<plain_codec<float>>(out, a, b, n, factor);
  case dtype::f64: return sum_scaled_kernel<plain_codec<double>>(out, a, b, n, factor);
  case dtype::f16: return sum_scaled_kernel<f16_codec>(out, a, b, n, factor);
  case dtype::bf16: return sum_scaled_kernel<bf16_codec>(out, a, b, n, factor);
  default:
    detail::throw_error(error_kind::config, {"scaling needs a floating-point tensor, got ", to_string(d)});
  }
}

DDP_INLINE void scale_in_place(void* data, std::size_t n, dtype d, double factor) {
  switch (d) {
  case dtype::f32: return scale_kernel<plain_codec<float>>(data, n, static_cast<float>(factor));
  case dtype::f64: return scale_kernel<plain_codec<double>>(data, n, factor);
  case dtype::f16: return scale_kernel<f16_codec>(data, n, static_cast<float>(factor));
  case dtype::bf16: return scale_kernel<bf16_codec>(data, n, static_cast<float>(factor));
  default:
    detail::throw_error(error_kind::config, {"op::avg needs a floating-point tensor, got ", to_string(d),
                                             ": use op::sum and divide yourself"});
  }
}

DDP_INLINE void copy_scaled(void* dst, dtype to, const void* src, dtype from, std::size_t n, double factor) {
  if (to == from && factor == 1.0) {
    if (n) std::memcpy(dst, src, n * size_of(to));
    return;
  }
  switch (from) {
  case dtype::f32: return convert_from<plain_codec<float>>(dst, to, src, n, factor);
  case dtype::f64: return convert_from<plain_codec<double>>(dst, to, src, n, factor);
  case dtype::f16: return convert_from<f16_codec>(dst, to, src, n, factor);
  case dtype::bf16: return convert_from<bf16_codec>(dst, to, src, n, factor);
  default: detail::throw_error(error_kind::config, {"cannot convert from ", to_string(from)});
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NUMERIC_ELEMENTWISE_INL_HPP
