// Type-erased elementwise kernels on raw buffers, keyed by dtype: the reduce
// functions handed to the backends, and in-place scaling for op::avg. Half
// types compute in float and round once.
#ifndef DDP_DETAIL_NUMERIC_ELEMENTWISE_HPP
#define DDP_DETAIL_NUMERIC_ELEMENTWISE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/numeric/half.hpp>
#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <cstring>
#include <type_traits>

DDP_BEGIN_NAMESPACE
namespace detail {

using reduce_fn = void (*)(void* out, const void* a, const void* b, std::size_t n);

struct f16_codec {
  using storage = std::uint16_t;
  using value = float; ///< what load() gives and store() takes
  static float load(storage s) { return half_bits_to_float(s); }
  static storage store(float f) { return float_to_half_bits(f); }
};
struct bf16_codec {
  using storage = std::uint16_t;
  using value = float;
  static float load(storage s) { return bf16_bits_to_float(s); }
  static storage store(float f) { return float_to_bf16_bits(f); }
};
template <class T> struct plain_codec {
  using storage = T;
  using value = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};

template <op O, class V> V combine(V u, V v) {
  if constexpr (O == op::sum || O == op::avg)
    return u + v;
  else if constexpr (O == op::product)
    return u * v;
  else if constexpr (O == op::min)
    return v < u ? v : u;
  else
    return u < v ? v : u;
}

/// out[i] = value_at(i) for i < n, in blocks that compute every value before
/// storing any: safe when `out` is also an input index for index, and g++ -O2
/// turns such blocks into SIMD code (a plain loop would need -O3).
template <class S, class F> void blockwise(S* out, std::size_t n, F&& value_at) {
  constexpr std::size_t block = 64 / sizeof(S);
  std::size_t i = 0;
  for (; i + block <= n; i += block) {
    S r[block];
    for (std::size_t k = 0; k < block; ++k)
      r[k] = value_at(i + k);
    for (std::size_t k = 0; k < block; ++k)
      out[i + k] = r[k];
  }
  for (; i < n; ++i)
    out[i] = value_at(i);
}

template <class Codec, op O> void reduce_kernel(void* out, const void* a, const void* b, std::size_t n) {
  using S = typename Codec::storage;
  auto* x = static_cast<const S*>(a);
  auto* y = static_cast<const S*>(b);
  blockwise(static_cast<S*>(out), n,
            [&](std::size_t i) { return Codec::store(combine<O>(Codec::load(x[i]), Codec::load(y[i]))); });
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
DDP_INLINE reduce_fn reduce_for(dtype d, op o);

template <class Codec, class F> void scale_kernel(void* data, std::size_t n, F factor) {
  auto* p = static_cast<typename Codec::storage*>(data);
  blockwise(p, n, [&](std::size_t i) { return Codec::store(Codec::load(p[i]) * factor); });
}

template <class Codec>
void sum_scaled_kernel(void* out, const void* a, const void* b, std::size_t n, double factor) {
  using S = typename Codec::storage;
  auto* x = static_cast<const S*>(a);
  auto* y = static_cast<const S*>(b);
  using compute = std::conditional_t<std::is_same_v<S, double>, double, decltype(Codec::load(S{}) * 1.0f)>;
  const auto f = static_cast<compute>(factor);
  blockwise(static_cast<S*>(out), n,
            [&](std::size_t i) { return Codec::store((Codec::load(x[i]) + Codec::load(y[i])) * f); });
}

/// out[i] = (a[i] + b[i]) * factor: the last step of an averaging all-reduce, fused.
DDP_INLINE void sum_scaled(void* out, const void* a, const void* b, std::size_t n, dtype d, double factor);

/// Multiplies n elements in place by `factor` (floating dtypes only).
DDP_INLINE void scale_in_place(void* data, std::size_t n, dtype d, double factor);

template <class To, class From>
void convert_kernel(void* dst, const void* src, std::size_t n, double factor) {
  auto* d = static_cast<typename To::storage*>(dst);
  auto* s = static_cast<const typename From::storage*>(src);
  using compute = std::conditional_t<std::is_same_v<typename To::storage, double> ||
                                         std::is_same_v<typename From::storage, double>,
                                     double, float>;
  const auto f = static_cast<compute>(factor);
  blockwise(d, n, [&](std::size_t i) {
    // Narrowing to the destination is the point of a conversion (f64 -> f32 here).
    return To::store(static_cast<typename To::value>(static_cast<compute>(From::load(s[i])) * f));
  });
}

template <class From> void convert_from(void* dst, dtype to, const void* src, std::size_t n, double factor) {
  switch (to) {
  case dtype::f32: return convert_kernel<plain_codec<float>, From>(dst, src, n, factor);
  case dtype::f64: return convert_kernel<plain_codec<double>, From>(dst, src, n, factor);
  case dtype::f16: return convert_kernel<f16_codec, From>(dst, src, n, factor);
  case dtype::bf16: return convert_kernel<bf16_codec, From>(dst, src, n, factor);
  default: detail::throw_error(error_kind::config, {"cannot convert to ", to_string(to)});
  }
}

/// dst[i] = src[i] * factor, converting between floating dtypes (a plain copy
/// when the types match and factor is 1). dst and src must not overlap.
DDP_INLINE void copy_scaled(void* dst, dtype to, const void* src, dtype from, std::size_t n, double factor);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/numeric/elementwise-inl.hpp>
#endif

#endif // DDP_DETAIL_NUMERIC_ELEMENTWISE_HPP
