// Tensors: any contiguous buffer of a supported element type. tensor_traits
// is the customization point; std::vector, std::array, std::span, Eigen dense
// objects (Matrix, Array, Map, Ref) and ddp::device_span are built in.
#ifndef DDP_TENSOR_HPP
#define DDP_TENSOR_HPP

#include <ddp/error.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span> // std::ranges::enable_borrowed_range too: <span> specializes it
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#if !defined(DDP_NO_EIGEN) && __has_include(<Eigen/Core>)
#define DDP_HAS_EIGEN 1
#include <ddp/detail/common/eigen_declarations.hpp>
#include <ddp/detail/common/message.hpp>
#endif

DDP_BEGIN_NAMESPACE

/// Element types the collectives understand.
enum class dtype : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8, i8 };

constexpr std::string_view to_string(dtype d) noexcept {
  constexpr std::string_view names[] = {"float32", "float64", "float16", "bfloat16",
                                        "int32",   "int64",   "uint8",   "int8"};
  return names[static_cast<int>(d)];
}

constexpr std::size_t size_of(dtype d) noexcept {
  constexpr std::size_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
  return sizes[static_cast<int>(d)];
}

constexpr bool is_floating(dtype d) noexcept {
  return d == dtype::f32 || d == dtype::f64 || d == dtype::f16 || d == dtype::bf16;
}

/// Maps an element type to its dtype. Specialize for your own 16-bit types
/// (layout must be IEEE binary16 or bfloat16).
template <class T> struct dtype_of {};
template <> struct dtype_of<float> : std::integral_constant<dtype, dtype::f32> {};
template <> struct dtype_of<double> : std::integral_constant<dtype, dtype::f64> {};
template <> struct dtype_of<std::int32_t> : std::integral_constant<dtype, dtype::i32> {};
template <> struct dtype_of<std::int64_t> : std::integral_constant<dtype, dtype::i64> {};
template <> struct dtype_of<std::uint8_t> : std::integral_constant<dtype, dtype::u8> {};
template <> struct dtype_of<std::int8_t> : std::integral_constant<dtype, dtype::i8> {};
#ifdef DDP_HAS_EIGEN
template <> struct dtype_of<Eigen::half> : std::integral_constant<dtype, dtype::f16> {};
template <> struct dtype_of<Eigen::bfloat16> : std::integral_constant<dtype, dtype::bf16> {};
#endif

/// An element type: dtype_of<T> names its dtype and its size matches. (Some
/// 16-bit types, gloo::float16 among them, are not trivially copyable; their
/// bytes are still what goes on the wire.)
template <class T>
concept element = requires {
  { dtype_of<std::remove_cv_t<T>>::value } -> std::convertible_to<dtype>;
}
&&sizeof(T) == size_of(dtype_of<std::remove_cv_t<T>>::value);

template <element T> inline constexpr dtype dtype_v = dtype_of<std::remove_cv_t<T>>::value;

/// A buffer in CUDA device memory: pointer plus element count.
template <class T> struct device_span {
  T* ptr = nullptr;
  std::size_t count = 0;
  T* data() const noexcept { return ptr; }
  std::size_t size() const noexcept { return count; }
};

/// Customization point: specialize with `value_type`, `static data(t)`,
/// `static size(t)` and `static constexpr bool on_device` for your own
/// contiguous buffer type.
template <class T, class = void> struct tensor_traits {};

namespace detail {
template <class C> struct contiguous_container_traits {
  using value_type = std::remove_reference_t<decltype(*std::declval<C&>().data())>;
  static constexpr bool on_device = false;
  static auto* data(C& c) noexcept { return c.data(); }
  static std::size_t size(const C& c) noexcept { return c.size(); }
};
} // namespace detail

// std::vector<bool> packs bits: not a tensor.
template <class T, class A>
requires(!std::is_same_v<T, bool>) struct tensor_traits<std::vector<T, A>>
    : detail::contiguous_container_traits<std::vector<T, A>> {
};
template <class T, class A>
requires(!std::is_same_v<T, bool>) struct tensor_traits<const std::vector<T, A>>
    : detail::contiguous_container_traits<const std::vector<T, A>> {
};
template <class T, std::size_t N>
struct tensor_traits<std::array<T, N>> : detail::contiguous_container_traits<std::array<T, N>> {};
template <class T, std::size_t N>
struct tensor_traits<const std::array<T, N>> : detail::contiguous_container_traits<const std::array<T, N>> {};
template <class T, std::size_t E>
struct tensor_traits<std::span<T, E>> : detail::contiguous_container_traits<std::span<T, E>> {};
template <class T, std::size_t E>
struct tensor_traits<const std::span<T, E>> : detail::contiguous_container_traits<const std::span<T, E>> {};

template <class T> struct tensor_traits<device_span<T>> {
  using value_type = T;
  static constexpr bool on_device = true;
  static T* data(const device_span<T>& s) noexcept { return s.ptr; }
  static std::size_t size(const device_span<T>& s) noexcept { return s.count; }
};
template <class T> struct tensor_traits<const device_span<T>> : tensor_traits<device_span<T>> {};

#ifdef DDP_HAS_EIGEN
namespace detail {
/// Eigen dense objects whose elements are contiguous: unit inner stride known at
/// compile time (Matrix, Array, Map and Ref with the default strides). An outer
/// stride that differs from the inner size (a block of a larger matrix) is caught
/// at run time by `size()`.
template <class T>
concept eigen_dense = std::is_base_of_v<Eigen::DenseBase<std::remove_cv_t<T>>, std::remove_cv_t<T>> &&
    requires(T& t) {
  {t.data()};
  {t.outerStride()};
};
} // namespace detail

template <class T>
requires detail::eigen_dense<T> &&
    (int(std::remove_cv_t<T>::InnerStrideAtCompileTime) == 1) struct tensor_traits<T> {
  using value_type = std::remove_pointer_t<decltype(std::declval<T&>().data())>;
  static constexpr bool on_device = false;
  static value_type* data(T& t) noexcept { return t.data(); }
  static std::size_t size(const T& t) {
    if (t.size() > 1 && t.outerStride() != t.innerSize() && t.outerSize() > 1)
      detail::throw_error(
          error_kind::config,
          {"an Eigen object with outer stride ", t.outerStride(), " and inner size ", t.innerSize(),
           " is not contiguous: copy it into a Matrix, or use a Map over contiguous storage"});
    return static_cast<std::size_t>(t.size());
  }
};
#endif

/// A type ddp can treat as one contiguous run of elements.
template <class T>
concept tensor = requires(std::remove_reference_t<T>& t) {
  typename tensor_traits<std::remove_reference_t<T>>::value_type;
  {tensor_traits<std::remove_reference_t<T>>::data(t)};
  { tensor_traits<std::remove_reference_t<T>>::size(t) } -> std::convertible_to<std::size_t>;
}
&&element<typename tensor_traits<std::remove_reference_t<T>>::value_type>;

template <tensor T> using tensor_value_t = typename tensor_traits<std::remove_reference_t<T>>::value_type;

/// Whether a T refers to elements it does not own, so that a temporary T still
/// names storage that outlives it: true for std::span (every borrowed range),
/// ddp::device_span and Eigen's Map, Ref and Block. Specialize it for a view
/// type of your own; an owning container (std::vector, an Eigen Matrix) is not
/// one, and ddp refuses it as a temporary where it would keep or write through
/// its address (for_each_parameter, collectives).
template <class T> inline constexpr bool enable_tensor_view = std::ranges::enable_borrowed_range<T>;
template <class T> inline constexpr bool enable_tensor_view<device_span<T>> = true;
#ifdef DDP_HAS_EIGEN
template <class P, int O, class S> inline constexpr bool enable_tensor_view<Eigen::Map<P, O, S>> = true;
template <class P, int O, class S> inline constexpr bool enable_tensor_view<Eigen::Ref<P, O, S>> = true;
template <class X, int R, int C, bool I>
inline constexpr bool enable_tensor_view<Eigen::Block<X, R, C, I>> = true;
#endif

/// A tensor that is a view (enable_tensor_view): passed as a temporary, it
/// still names the elements it views.
template <class T>
concept tensor_view = tensor<T> && enable_tensor_view<std::remove_cvref_t<T>>;

/// A view of a tensor as a span of its elements: of a named tensor, or of a
/// temporary view (a temporary that owns its elements would leave it dangling).
template <tensor T>
requires std::is_lvalue_reference_v<T> || tensor_view<T>
auto as_span(T&& t) {
  using traits = tensor_traits<std::remove_reference_t<T>>;
  return std::span<tensor_value_t<T>>(traits::data(t), traits::size(t));
}

template <class T>
constexpr bool on_device_v = [] {
  if constexpr (tensor<T>)
    return tensor_traits<std::remove_reference_t<T>>::on_device;
  else
    return false;
}();

namespace detail {
/// Gives the one readable message for a type that is not a tensor, instead of
/// a page of failed overloads.
template <class T> consteval void require_tensor() {
  static_assert(tensor<T>,
                "ddp: this type is not a contiguous tensor. Use std::vector, std::array, std::span, "
                "an Eigen Matrix/Array/Map/Ref of float, double, half, bfloat16, int32 or int64, "
                "or specialize ddp::tensor_traits<T> (value_type, data(t), size(t), on_device).");
}
} // namespace detail

DDP_END_NAMESPACE

#endif // DDP_TENSOR_HPP
