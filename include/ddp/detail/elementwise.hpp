// Type-erased elementwise kernels on raw buffers, keyed by dtype: the reduce
// functions handed to the backends, and in-place scaling for op::avg. Half
// types compute in float and round once.
#pragma once

#include <ddp/detail/half.hpp>
#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <algorithm>
#include <cstring>

DDP_BEGIN_NAMESPACE
namespace detail {

using reduce_fn = void (*)(void* out, const void* a, const void* b, std::size_t n);

struct f16_codec {
  using storage = std::uint16_t;
  static float load(storage s) { return half_bits_to_float(s); }
  static storage store(float f) { return float_to_half_bits(f); }
};
struct bf16_codec {
  using storage = std::uint16_t;
  static float load(storage s) { return bf16_bits_to_float(s); }
  static storage store(float f) { return float_to_bf16_bits(f); }
};
template <class T> struct plain_codec {
  using storage = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};

template <class Codec, op O> void reduce_kernel(void* out, const void* a, const void* b, std::size_t n) {
  using S = typename Codec::storage;
  auto* o = static_cast<S*>(out);
  auto* x = static_cast<const S*>(a);
  auto* y = static_cast<const S*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    auto u = Codec::load(x[i]), v = Codec::load(y[i]);
    if constexpr (O == op::sum || O == op::avg) o[i] = Codec::store(u + v);
    else if constexpr (O == op::product) o[i] = Codec::store(u * v);
    else if constexpr (O == op::min) o[i] = Codec::store(std::min(u, v));
    else o[i] = Codec::store(std::max(u, v));
  }
}

template <class Codec> reduce_fn pick_reduce(op o) {
  switch (o) {
  case op::sum: return &reduce_kernel<Codec, op::sum>;
  case op::avg: return &reduce_kernel<Codec, op::avg>;
  case op::min: return &reduce_kernel<Codec, op::min>;
  case op::max: return &reduce_kernel<Codec, op::max>;
  case op::product: return &reduce_kernel<Codec, op::product>;
  }
  return nullptr;
}

/// The reduce function for (dtype, op). op::avg reduces as a sum; the caller
/// scales afterwards (see scale_in_place).
inline reduce_fn reduce_for(dtype d, op o) {
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

template <class Codec, class F> void scale_kernel(void* data, std::size_t n, F factor) {
  auto* p = static_cast<typename Codec::storage*>(data);
  for (std::size_t i = 0; i < n; ++i) p[i] = Codec::store(Codec::load(p[i]) * factor);
}

/// Multiplies n elements in place by `factor` (floating dtypes only).
inline void scale_in_place(void* data, std::size_t n, dtype d, double factor) {
  switch (d) {
  case dtype::f32: return scale_kernel<plain_codec<float>>(data, n, static_cast<float>(factor));
  case dtype::f64: return scale_kernel<plain_codec<double>>(data, n, factor);
  case dtype::f16: return scale_kernel<f16_codec>(data, n, static_cast<float>(factor));
  case dtype::bf16: return scale_kernel<bf16_codec>(data, n, static_cast<float>(factor));
  default:
    throw error(error_kind::config, "op::avg needs a floating-point tensor, got " + std::string(to_string(d)) +
                                        ": use op::sum and divide yourself");
  }
}

} // namespace detail
DDP_END_NAMESPACE
