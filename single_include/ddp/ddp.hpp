// ddp 0.1.0 — single-header edition, generated from include/ddp/ddp.hpp.
// Do not edit: change include/ddp/ and run `python3 tools/amalgamate.py`.
// Header-only distributed data-parallel training for C++20; needs Gloo and
// OpenSSL's libcrypto (and optionally Eigen). Link: -lgloo -lcrypto -pthread.
// ---- begin ddp/ddp.hpp ----
// ddp — header-only distributed data-parallel training for C++20.
// The umbrella header: everything for the Gloo backend.
#ifndef DDP_DDP_HPP
#define DDP_DDP_HPP

// ---- begin ddp/arena.hpp ----
// ddp::arena — gradient storage laid out so that buckets need no packing.
// Parameters are registered forward; backward (and so every bucket) walks them
// in reverse. The arena places slot k (registration order) so that the slots
// lie in memory in reverse registration order, back to back: any bucket of
// consecutive parameters is then one contiguous range, and DDP reduces it in
// place. (PyTorch's gradient_as_bucket_view, without the view bookkeeping.)
// The storage starts on a 64-byte boundary, so every slot lies at the same
// alignment in every run: kernels that peel to an aligned address (Eigen
// writing through a Map, e.g. a rowwise sum) then round the same way each
// time, and a restarted run reproduces a straight one bit for bit.
// `arena(sizes, pg)` puts the storage in memory the node's ranks share
// (process_group<gloo>::make_shm_array): each bucket is then reduced in
// place there, with no copy through the node's segment (bench/grad_sync).
#ifndef DDP_ARENA_HPP
#define DDP_ARENA_HPP

// ---- begin ddp/error.hpp ----
// ddp::error — the one exception type ddp throws, with a kind to branch on.
#ifndef DDP_ERROR_HPP
#define DDP_ERROR_HPP

// ---- begin ddp/config.hpp ----
// ddp — version, ABI namespace and the few macros every header uses.
#ifndef DDP_CONFIG_HPP
#define DDP_CONFIG_HPP

#define DDP_VERSION_MAJOR 0
#define DDP_VERSION_MINOR 1
#define DDP_VERSION_PATCH 0

#define DDP_DETAIL_STR2(x) #x
#define DDP_DETAIL_STR(x) DDP_DETAIL_STR2(x)
#define DDP_VERSION_STRING                                                                                   \
  DDP_DETAIL_STR(DDP_VERSION_MAJOR)                                                                          \
  "." DDP_DETAIL_STR(DDP_VERSION_MINOR) "." DDP_DETAIL_STR(DDP_VERSION_PATCH)

// Every public name lives in ddp::DDP_ABI_NAMESPACE (an inline namespace), so two
// incompatible versions linked into one program fail to link instead of silently
// mixing layouts. The name is the version plus one tag per macro that changes a
// class's layout or a function's linkage (as nlohmann/json's NLOHMANN_JSON_ABI_TAGS):
// v0_1_0, v0_1_0_cuda, v0_1_0_sc, v0_1_0_cuda_sc.
// Translation units built with different tags see distinct types, so they link
// (each its own classes) or a function taking a class across the boundary is an
// unresolved symbol; they never share one name with two layouts.
//
// The tags, and the macros that are none (from an audit of every #if in include/):
// - _cuda: DDP_WITH_CUDA or DDP_WITH_NCCL defined (any value; ddp::cuda and ddp::nccl
//   define them). Adds device_bucket_engine to distributed_data_parallel's engine
//   std::variant (detail/data_parallel/bucket_engine.hpp), device broadcasts and
//   process_group's pinned staging. DDP_WITH_NCCL needs no tag of its own: it implies
//   the same layouts and only adds names (ddp::nccl, backend/nccl.hpp).
//   They must be defined before the first ddp header (bucket_engine.hpp checks).
// - none for DDP_NO_EIGEN / Eigen being found: it adds tensor_traits and dtype_of
//   specializations for Eigen types and arena::matrix(), a non-virtual member
//   function; no data member, base or variant alternative changes.
// - _notrace: DDP_TRACE_DISABLED defined. No layout changes, but the body of an inline
//   function does (trace::on(), detail/common/trace.hpp): two bodies of one function in one
//   program, and with the runtime compiled once its queue would trace for a file that
//   turned tracing off. Under two names each keeps its own.
// - none for NDEBUG: no header has an assert() or an NDEBUG-dependent member.
//   DDP_DEBUG is an environment variable, read at run time.
// - _sc: DDP_SEPARATE_COMPILATION defined (the runtime compiled once,
//   detail/common/linkage.hpp). No layout changes, but linkage does: the runtime's
//   functions are inline in a header-only file and defined once otherwise, and one
//   function may not be both in one program. Under two names a header-only file and
//   separately compiled ones coexist (each with its own definitions), and a runtime
//   built with other tags (another DDP_WITH_CUDA) does not link.
// - none for CUDART_VERSION (a function body), the platform (__linux__, __x86_64__:
//   one per program) or the standard library's ABI macros (_GLIBCXX_USE_CXX11_ABI:
//   libstdc++ tags its own names).
// A new layout-changing macro gets a tag here and a case in tests/abi.
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
#define DDP_DETAIL_ABI_CUDA 1
#define DDP_DETAIL_ABI_TAG_CUDA _cuda
#else
#define DDP_DETAIL_ABI_CUDA 0
#define DDP_DETAIL_ABI_TAG_CUDA
#endif
#if defined(DDP_TRACE_DISABLED)
#define DDP_DETAIL_ABI_TRACE 0
#define DDP_DETAIL_ABI_TAG_TRACE _notrace
#else
#define DDP_DETAIL_ABI_TRACE 1
#define DDP_DETAIL_ABI_TAG_TRACE
#endif
#if defined(DDP_SEPARATE_COMPILATION)
#define DDP_DETAIL_ABI_SEPARATE 1
#define DDP_DETAIL_ABI_TAG_SEPARATE _sc
#else
#define DDP_DETAIL_ABI_SEPARATE 0
#define DDP_DETAIL_ABI_TAG_SEPARATE
#endif
#define DDP_DETAIL_ABI_CAT6(a, b, c, cuda, trace, separate) v##a##_##b##_##c##cuda##trace##separate
#define DDP_DETAIL_ABI_NAME(a, b, c, cuda, trace, separate)                                                  \
  DDP_DETAIL_ABI_CAT6(a, b, c, cuda, trace, separate)
#define DDP_ABI_NAMESPACE                                                                                    \
  DDP_DETAIL_ABI_NAME(DDP_VERSION_MAJOR, DDP_VERSION_MINOR, DDP_VERSION_PATCH, DDP_DETAIL_ABI_TAG_CUDA,      \
                      DDP_DETAIL_ABI_TAG_TRACE, DDP_DETAIL_ABI_TAG_SEPARATE)

#define DDP_BEGIN_NAMESPACE                                                                                  \
  namespace ddp {                                                                                            \
  inline namespace DDP_ABI_NAMESPACE {
#define DDP_END_NAMESPACE                                                                                    \
  }                                                                                                          \
  }

#include <string_view>

DDP_BEGIN_NAMESPACE

struct version_info {
  int major;
  int minor;
  int patch;
  std::string_view string;
};

/// The version of the headers this translation unit was compiled against.
constexpr version_info version() noexcept {
  return {DDP_VERSION_MAJOR, DDP_VERSION_MINOR, DDP_VERSION_PATCH, DDP_VERSION_STRING};
}

DDP_END_NAMESPACE

#endif // DDP_CONFIG_HPP
// ---- end ddp/config.hpp ----

#include <stdexcept>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE

enum class error_kind {
  config,    ///< bad environment variable, option or argument
  timeout,   ///< a wait ran past its deadline
  peer_lost, ///< another rank went away (rank() names it when known)
  mismatch,  ///< ranks disagree on a model or collective shape
  backend,   ///< Gloo/NCCL/CUDA/OS failure, wrapped
  data,      ///< a data or checkpoint file is missing or corrupt
};

constexpr std::string_view to_string(error_kind k) noexcept {
  switch (k) {
  case error_kind::config: return "config";
  case error_kind::timeout: return "timeout";
  case error_kind::peer_lost: return "peer_lost";
  case error_kind::mismatch: return "mismatch";
  case error_kind::backend: return "backend";
  case error_kind::data: return "data";
  }
  return "unknown";
}

/// The exit status of a rank that ends on an uncaught ddp::error, once a process group was
/// initialized: its message is on stderr, and ddprun's summary quotes it (EX_SOFTWARE).
inline constexpr int uncaught_error_exit_code = 70;

class error : public std::runtime_error {
public:
  /// `rank` is the rank the error is about (the lost peer, the mismatching
  /// rank), or -1 when unknown / not applicable.
  error(error_kind kind, const std::string& what, int rank = -1)
      : std::runtime_error("ddp " + std::string(to_string(kind)) + " error: " + what), kind_(kind),
        rank_(rank), prefix_(what_string().size() - what.size()) {}

  error_kind kind() const noexcept { return kind_; }
  int rank() const noexcept { return rank_; }
  /// what() without its "ddp <kind> error: " prefix, for quoting inside another message.
  std::string_view message() const noexcept { return what_string().substr(prefix_); }

private:
  std::string_view what_string() const noexcept { return what(); }

  error_kind kind_;
  int rank_;
  std::size_t prefix_;
};

DDP_END_NAMESPACE

#endif // DDP_ERROR_HPP
// ---- end ddp/error.hpp ----
// ---- begin ddp/shm_array.hpp ----
// ddp::shm_array — host memory the ranks of one node can all see, made by
// process_group<gloo>::make_shm_array (collective). An all_reduce of a range
// inside it runs in place in shared memory: no copy into the node's segment and
// out again, two barriers instead of one per 256 KiB step (NCCL's ncclMemAlloc
// and user-buffer registration serve the same purpose on GPUs). ddp::arena
// builds on it: `ddp::arena<float> grads(sizes, pg)` puts the gradients there.
//
// Where the shared-memory all-reduce is off (DDP_SHM=0, one rank per node,
// ranks on several nodes, /dev/shm too small) the array is private memory,
// in_shared_memory() is false, and everything works as with any other tensor.
//
// What every rank must do alike: make its arrays in the same order with the
// same sizes, and pass the same kind of memory to each collective: a rank that
// reduces part of its shm_array while another passes private memory (or
// another part) fails with ddp::error(mismatch) on every rank, since the
// in-place reduction reads the others' arrays where its own range lies.
// Keep the array alive until the collectives on it have completed (wait()).
// A child made by fork() without exec shares the array with the node's ranks
// (it is a shared mapping, not copy-on-write like private memory).
#ifndef DDP_SHM_ARRAY_HPP
#define DDP_SHM_ARRAY_HPP

// ---- begin ddp/tensor.hpp ----
// Tensors: any contiguous buffer of a supported element type. tensor_traits
// is the customization point; std::vector, std::array, std::span, Eigen dense
// objects (Matrix, Array, Map, Ref) and ddp::device_span are built in.
#ifndef DDP_TENSOR_HPP
#define DDP_TENSOR_HPP


#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#if !defined(DDP_NO_EIGEN) && __has_include(<Eigen/Core>)
#include <Eigen/Core>
#define DDP_HAS_EIGEN 1
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
      throw error(error_kind::config,
                  "an Eigen object with outer stride " + std::to_string(t.outerStride()) +
                      " and inner size " + std::to_string(t.innerSize()) +
                      " is not contiguous: copy it into a Matrix, or use a Map over contiguous storage");
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

/// A view of a tensor as a span of its elements.
template <tensor T> auto as_span(T& t) {
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
// ---- end ddp/tensor.hpp ----

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

DDP_BEGIN_NAMESPACE

namespace detail {
/// What a backend makes for make_shm_array<T>, before it is typed: the backend
/// needs only the element size and dtype, so it is not a template.
struct shm_memory {
  void* data = nullptr;
  std::shared_ptr<void> owner; ///< keeps the memory mapped (or allocated)
  bool shared = false;         ///< in the node's shared memory, not private
};

/// `bytes` (at least 1) zeroed bytes of private memory on a 64 B boundary. Throws std::bad_alloc.
inline shm_memory private_shm_memory(std::size_t bytes) {
  bytes = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = ::operator new (bytes, std::align_val_t{64});
  std::memset(p, 0, bytes);
  return {p, std::shared_ptr<void>(p, [](void* q) { ::operator delete (q, std::align_val_t{64}); }), false};
}
} // namespace detail

template <class T> class shm_array {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "ddp::shm_array holds plain values (its memory is shared with other processes)");
  static_assert(alignof(T) <= 64, "ddp::shm_array aligns its storage to 64 B");

public:
  shm_array() = default;
  /// Made by the backend (make_shm_array): `owner` keeps the memory mapped.
  shm_array(T* data, std::size_t n, std::shared_ptr<void> owner, bool in_shared_memory) noexcept
      : data_(data), size_(n), owner_(std::move(owner)), in_shared_memory_(in_shared_memory) {}

  // Move-only, like std::vector: one owner of the elements (not a shared_ptr).
  shm_array(shm_array&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), owner_(std::move(o.owner_)),
        in_shared_memory_(std::exchange(o.in_shared_memory_, false)) {}
  shm_array& operator=(shm_array&& o) noexcept {
    if (this != &o) {
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      owner_ = std::move(o.owner_);
      in_shared_memory_ = std::exchange(o.in_shared_memory_, false);
    }
    return *this;
  }
  shm_array(const shm_array&) = delete;
  shm_array& operator=(const shm_array&) = delete;

  /// `n` zeroed elements of private memory on a 64 B boundary: the array where
  /// shared memory is off, and ddp::arena's own storage. Throws std::bad_alloc.
  static shm_array private_memory(std::size_t n) {
    return shm_array(detail::private_shm_memory(n * sizeof(T)), n);
  }
  /// Types what the backend made (make_shm_array).
  shm_array(detail::shm_memory m, std::size_t n) noexcept
      : shm_array(static_cast<T*>(m.data), n, std::move(m.owner), m.shared) {}

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  std::span<T> span() noexcept { return {data_, size_}; }
  std::span<const T> span() const noexcept { return {data_, size_}; }
  /// Where the memory lies: in the node's shared memory (all_reduce of it runs
  /// in place), or private (see the file comment). Not whether the group now
  /// takes the shm path (a bench's use_shm(false) sends it over TCP).
  bool in_shared_memory() const noexcept { return in_shared_memory_; }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<void> owner_;
  bool in_shared_memory_ = false;
};

template <class T> struct tensor_traits<shm_array<T>> : detail::contiguous_container_traits<shm_array<T>> {};
template <class T>
struct tensor_traits<const shm_array<T>> : detail::contiguous_container_traits<const shm_array<T>> {};

DDP_END_NAMESPACE

#endif // DDP_SHM_ARRAY_HPP
// ---- end ddp/shm_array.hpp ----

#include <algorithm>
#include <concepts>

#include <cstddef>
#include <memory>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#if !defined(DDP_NO_EIGEN) && __has_include(<Eigen/Core>)
#include <Eigen/Core>
#endif

DDP_BEGIN_NAMESPACE

template <class T> class arena {
  static_assert(std::is_trivially_destructible_v<T>, "ddp::arena holds plain gradient values");

public:
  /// Alignment of the storage: the widest SIMD vector (AVX-512) and a cache line.
  static constexpr std::size_t alignment = std::max<std::size_t>(64, alignof(T));

  /// `sizes`: element counts of the gradients, in registration order.
  explicit arena(std::vector<std::size_t> sizes) : sizes_(std::move(sizes)), offsets_(sizes_.size()) {
    lay_out();
    storage_ = shm_array<T>::private_memory(total_);
  }

  /// The same, in memory the node's ranks share: `group.make_shm_array`
  /// (ddp::process_group<ddp::gloo>; another backend's says it has none);
  /// collective, like it: every rank builds
  /// its arenas in the same order with the same sizes. Buckets are then
  /// reduced in place in shared memory. Private memory where that is off
  /// (see ddp/shm_array.hpp); in_shared_memory() says which.
  template <class Group>
  requires requires(Group& g) {
    { g.template make_shm_array<T>(std::size_t{}) } -> std::same_as<shm_array<T>>;
  }
  explicit arena(std::vector<std::size_t> sizes, Group& group)
      : sizes_(std::move(sizes)), offsets_(sizes_.size()) {
    lay_out();
    storage_ = group.template make_shm_array<T>(total_);
  }

  /// Whether the storage lies in the node's shared memory (the arena(sizes, pg)
  /// form, where that is on: see ddp/shm_array.hpp).
  bool in_shared_memory() const noexcept { return storage_.in_shared_memory(); }

  std::size_t size() const noexcept { return sizes_.size(); }
  std::size_t total_elements() const noexcept { return total_; }
  std::span<T> all() noexcept { return {storage_.data(), total_}; }

  /// The storage of gradient k (registration order).
  std::span<T> slot(std::size_t k) {
    if (k >= sizes_.size())
      throw error(error_kind::config, "arena: slot " + std::to_string(k) + " does not exist (" +
                                          std::to_string(sizes_.size()) + " slots)");
    return {storage_.data() + offsets_[k], sizes_[k]};
  }

#ifdef EIGEN_WORLD_VERSION
  /// Gradient k as a column-major rows x cols Eigen map.
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> matrix(std::size_t k, Eigen::Index rows,
                                                                      Eigen::Index cols) {
    auto s = slot(k);
    if (static_cast<std::size_t>(rows * cols) != s.size())
      throw error(error_kind::config, "arena: slot " + std::to_string(k) + " holds " +
                                          std::to_string(s.size()) + " elements, not " +
                                          std::to_string(rows) + "x" + std::to_string(cols));
    return {s.data(), rows, cols};
  }
#endif

private:
  void lay_out() {
    std::size_t off = 0;
    for (std::size_t k = sizes_.size(); k-- > 0;) {
      offsets_[k] = off;
      off += sizes_[k];
    }
    total_ = off;
  }

  std::vector<std::size_t> sizes_, offsets_;
  std::size_t total_ = 0;
  shm_array<T> storage_;
};

DDP_END_NAMESPACE

#endif // DDP_ARENA_HPP
// ---- end ddp/arena.hpp ----
// ---- begin ddp/backend/communicator.hpp ----
// The backend contract. A backend policy (ddp::gloo, ddp::nccl, or a user's)
// names a communicator type; the communicator connects from a rendezvous and
// runs type-erased collectives on (pointer, count, dtype) in submission order.
// What a backend can do beyond that is a refinement of the concept, and
// process_group and distributed_data_parallel choose their path by which
// refinements the communicator models — never by probing for members at the
// point of use:
//   communicator           host memory; rank/size/timeout; poison state
//   fragment_communicator  reduces a bucket as a list of fragments where its
//                          tensors lie, with a scale fused in (no packing)
//   device_communicator    also takes device pointers (tagged device_memory:
//                          where memory lives is known at compile time)
//   shm_communicator       makes host memory the node's ranks share
//                          (ddp::shm_array) and reduces ranges of it in place
//   abortable_communicator fails the whole group at once from outside a
//                          collective (peers blocked on this rank fail now)
//   peer_failure_communicator
//                          fails the group when the store reports another
//                          rank failed (a wait on a third rank ends now)
//   open_files_communicator
//                          says how many descriptors its connections take,
//                          so the open-files limit is raised before they form
#ifndef DDP_BACKEND_COMMUNICATOR_HPP
#define DDP_BACKEND_COMMUNICATOR_HPP

// ---- begin ddp/detail/backend/fragment.hpp ----
// A contiguous piece of a bucket: one tensor's memory, as a backend sees it.
#ifndef DDP_DETAIL_BACKEND_FRAGMENT_HPP
#define DDP_DETAIL_BACKEND_FRAGMENT_HPP


#include <algorithm>
#include <cstddef>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct fragment {
  void* data;
  std::size_t count; ///< elements
};

/// Elements in all the fragments together.
inline std::size_t total_count(const std::vector<fragment>& frags) {
  std::size_t n = 0;
  for (const auto& f : frags)
    n += f.count;
  return n;
}

/// Calls f(ptr, at, count) for each contiguous piece of elements [first,
/// first + count) of the concatenated fragments: `ptr` points into the
/// fragment's memory, `at` counts elements from `first`. Elements are `esz`
/// bytes. A linear walk: buckets hold hundreds of fragments, not millions.
template <class F>
void for_each_piece(const std::vector<fragment>& frags, std::size_t first, std::size_t count, std::size_t esz,
                    F&& f) {
  std::size_t pos = 0, at = 0;
  for (const auto& fr : frags) {
    if (at == count) return;
    if (first + at >= pos + fr.count) {
      pos += fr.count;
      continue;
    }
    const std::size_t from = first + at - pos, take = std::min(count - at, fr.count - from);
    f(static_cast<char*>(fr.data) + from * esz, at, take);
    at += take;
    pos += fr.count;
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_FRAGMENT_HPP
// ---- end ddp/detail/backend/fragment.hpp ----
// ---- begin ddp/detail/common/timeout.hpp ----
// DDP_TIMEOUT: the one deadline every wait in ddp is bounded by.
#ifndef DDP_DETAIL_COMMON_TIMEOUT_HPP
#define DDP_DETAIL_COMMON_TIMEOUT_HPP

// ---- begin ddp/detail/common/env.hpp ----
// Reading and validating environment variables: every failure names the
// variable and its value.
#ifndef DDP_DETAIL_COMMON_ENV_HPP
#define DDP_DETAIL_COMMON_ENV_HPP


#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

inline std::optional<std::string> getenv_str(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

/// Parses a whole decimal integer; no sign games, no trailing junk.
inline std::optional<std::int64_t> parse_int(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

/// An integer from `name`, within [lo, hi]; nullopt when unset.
inline std::optional<std::int64_t> env_int(const char* name, std::int64_t lo, std::int64_t hi) {
  auto raw = getenv_str(name);
  if (!raw) return std::nullopt;
  auto v = parse_int(*raw);
  if (!v)
    throw error(error_kind::config,
                std::string("environment variable ") + name + "='" + *raw + "' is not an integer");
  if (*v < lo || *v > hi)
    throw error(error_kind::config, std::string("environment variable ") + name + "=" + *raw +
                                        " is out of range [" + std::to_string(lo) + ", " +
                                        std::to_string(hi) + "]");
  return v;
}

inline std::int64_t require_env_int(const char* name, std::int64_t lo, std::int64_t hi,
                                    std::string_view why) {
  auto v = env_int(name, lo, hi);
  if (!v)
    throw error(error_kind::config,
                std::string("environment variable ") + name + " is not set (" + std::string(why) + ")");
  return *v;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_ENV_HPP
// ---- end ddp/detail/common/env.hpp ----

#include <chrono>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

/// "600" (seconds), or with a unit: "500ms", "30s", "10m".
inline std::chrono::milliseconds parse_timeout(std::string_view v) {
  auto bad = [&] {
    return error(error_kind::config, "environment variable DDP_TIMEOUT='" + std::string(v) +
                                         "' is not a positive duration like 600, 30s, 500ms or 10m");
  };
  std::int64_t scale = 1000;
  if (v.ends_with("ms")) {
    scale = 1;
    v.remove_suffix(2);
  } else if (v.ends_with("s")) {
    v.remove_suffix(1);
  } else if (v.ends_with("m")) {
    scale = 60000;
    v.remove_suffix(1);
  }
  auto n = parse_int(v);
  if (!n || *n <= 0 || *n > (std::int64_t{1} << 40) / scale) throw bad();
  return std::chrono::milliseconds(*n * scale);
}

/// DDP_TIMEOUT when set, else 10 minutes (PyTorch's default for Gloo and NCCL).
inline std::chrono::milliseconds default_timeout() {
  if (auto v = getenv_str("DDP_TIMEOUT")) return parse_timeout(*v);
  return std::chrono::minutes(10);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_TIMEOUT_HPP
// ---- end ddp/detail/common/timeout.hpp ----
// ---- begin ddp/detail/fault/connect_interrupt.hpp ----
// Stops a backend's waits for a rank that failed while the connections form.
// A rank that fails then (a peer it cannot dial, an open-files refusal, a
// crash) is recorded in the store at once, but a rank waiting for that peer's
// connection inside Gloo heard nothing of it and waited DDP_TIMEOUT
// (docs/design-notes.md, "Note [failure during connect]"). process_group
// starts its peer-failure watch before the communicator; until the
// communicator exists, the watch's news (which rank was lost, and why) comes
// here, and a backend registers here, while it waits for connections, what
// ends its waits for that rank (gloo_mesh_context closes that rank's pair and
// lets the living peers finish: see there).
#ifndef DDP_DETAIL_FAULT_CONNECT_INTERRUPT_HPP
#define DDP_DETAIL_FAULT_CONNECT_INTERRUPT_HPP


#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

class connect_interrupt {
public:
  /// The news: the rank that was lost (a global rank; -1: none in
  /// particular) and why, for the error.
  struct news {
    int lost_rank = -1;
    std::string why;
  };
  /// Runs on the thread that brings the news, or in registration's
  /// constructor when the news came first; it must return promptly (a few
  /// milliseconds: it holds this object's lock).
  using stop_function = std::function<void(const news&)>;

  /// Records the news (the first sticks) and runs the registered stop, on
  /// the calling thread. Thread-safe.
  void interrupt(int lost_rank, std::string why) {
    {
      std::lock_guard lock(mu_);
      if (news_) return;
      news_ = news{lost_rank, std::move(why)};
      if (stop_) stop_(*news_);
    }
    news_cv_.notify_all();
  }

  /// Waits up to `timeout` for news; true once there is some.
  bool wait_for_news(std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return news_cv_.wait_for(lock, timeout, [&] { return news_.has_value(); });
  }

  /// Keeps `stop` registered while it lives; its destructor returns once the
  /// stop is not running any more (it may be running on another thread).
  class registration {
  public:
    registration(connect_interrupt& owner, stop_function stop) : owner_(owner) {
      std::lock_guard lock(owner_.mu_);
      owner_.stop_ = std::move(stop);
      if (owner_.news_) owner_.stop_(*owner_.news_); // interrupted already
    }
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration() {
      std::lock_guard lock(owner_.mu_);
      owner_.stop_ = nullptr;
    }

  private:
    connect_interrupt& owner_;
  };

private:
  mutable std::mutex mu_;
  mutable std::condition_variable news_cv_;
  std::optional<news> news_;
  stop_function stop_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_CONNECT_INTERRUPT_HPP
// ---- end ddp/detail/fault/connect_interrupt.hpp ----
// ---- begin ddp/op.hpp ----
// ddp::op — the reduction operators of all_reduce and reduce_scatter.
#ifndef DDP_OP_HPP
#define DDP_OP_HPP


#include <string_view>

DDP_BEGIN_NAMESPACE

enum class op { sum, avg, min, max, product };

constexpr std::string_view to_string(op o) noexcept {
  switch (o) {
  case op::sum: return "sum";
  case op::avg: return "avg";
  case op::min: return "min";
  case op::max: return "max";
  case op::product: return "product";
  }
  return "?";
}

DDP_END_NAMESPACE

#endif // DDP_OP_HPP
// ---- end ddp/op.hpp ----
// ---- begin ddp/store.hpp ----
// ddp::tcp_store — the rendezvous key-value store. Served on
// MASTER_ADDR:MASTER_PORT (that address only) by ddprun on node 0 when ddprun
// launched the job (it says so with DDP_STORE_IN_LAUNCHER=1), so the store
// outlives every rank; otherwise by rank 0. Every rank, rank 0 included, talks
// to it as a client. Both ends of every connection prove they hold the job
// token without sending it (detail/store/auth.hpp). A client may scope its
// keys with a prefix (a restart round's "r<k>/"): every key it names, the
// store's own lost-rank keys included, then lives under that prefix.
#ifndef DDP_STORE_HPP
#define DDP_STORE_HPP

// ---- begin ddp/detail/common/linkage.hpp ----
// How ddp's model-independent runtime (the store, the Gloo communicator, the
// rendezvous, ...) is defined. Header-only (the default): its functions are
// `inline` and their definitions, in the `-inl.hpp` headers, come with the
// headers that declare them. Separately compiled (DDP_SEPARATE_COMPILATION in
// every translation unit, as target ddp::runtime does): the headers only
// declare them, and one translation unit defines them once (the ddp::runtime
// library, or a user's own file that includes <ddp/runtime.hpp>), so a
// program's other files do not generate that code again
// (docs/performance.md, "Compile cost").
#ifndef DDP_DETAIL_COMMON_LINKAGE_HPP
#define DDP_DETAIL_COMMON_LINKAGE_HPP


/// 1 where the runtime's definitions are compiled in this translation unit:
/// header-only, or the one file that defines the separately compiled runtime.
#if !defined(DDP_SEPARATE_COMPILATION) || defined(DDP_IMPLEMENTATION)
#define DDP_DETAIL_DEFINE_RUNTIME 1
#else
#define DDP_DETAIL_DEFINE_RUNTIME 0
#endif

/// On every declaration and definition of a runtime function: `inline` only
/// where each translation unit carries its own copy (header-only).
#if defined(DDP_SEPARATE_COMPILATION)
#define DDP_INLINE
#else
#define DDP_INLINE inline
#endif

#endif // DDP_DETAIL_COMMON_LINKAGE_HPP

// Outside the guard, so that every header that declares runtime functions checks
// again: the ABI namespace was named when config.hpp came first (its tags), so the
// macros that name it must be set before any ddp header, as the targets do.
#if defined(DDP_DETAIL_LINKAGE_MISMATCH_SAID)
#elif defined(DDP_SEPARATE_COMPILATION) != DDP_DETAIL_ABI_SEPARATE
#define DDP_DETAIL_LINKAGE_MISMATCH_SAID // one message, not one per header
#error                                                                                                       \
    "ddp: DDP_SEPARATE_COMPILATION changed after the first ddp header: define it for the whole file, or not at all"
#elif (defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)) != DDP_DETAIL_ABI_CUDA
#define DDP_DETAIL_LINKAGE_MISMATCH_SAID
#error                                                                                                       \
    "ddp: DDP_WITH_CUDA (DDP_WITH_NCCL) changed after the first ddp header: define it for the whole file, as ddp::cuda does"
#elif defined(DDP_TRACE_DISABLED) == DDP_DETAIL_ABI_TRACE
#define DDP_DETAIL_LINKAGE_MISMATCH_SAID
#error                                                                                                       \
    "ddp: DDP_TRACE_DISABLED changed after the first ddp header: define it for the whole file, or not at all"
#endif
// ---- end ddp/detail/common/linkage.hpp ----
// ---- begin ddp/detail/store/protocol.hpp ----
// The rendezvous store's wire format. A frame is a little-endian u32 length
// followed by that many bytes: a one-byte opcode, then fields. Strings and
// byte blobs are a u32 length plus bytes; integers are fixed-width.
#ifndef DDP_DETAIL_STORE_PROTOCOL_HPP
#define DDP_DETAIL_STORE_PROTOCOL_HPP


#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

// A connection starts with the handshake of auth.hpp: hello, then proof; any
// other first frame closes it.
enum class store_op : std::uint8_t {
  hello = 1, ///< rank (i32), client nonce -> ok, server nonce, server proof
  set = 2,   ///< key, value
  get = 3,   ///< key -> found(u8) [value]
  wait = 4,  ///< count (u32), keys, timeout_ms (u64) -> ok(u8)
  add = 5,   ///< key, delta (i64) -> new value (i64)
  check = 6, ///< count, keys -> all present (u8)
  bye = 7,   ///< orderly goodbye: this rank is not lost
  proof = 8, ///< client proof -> ok | refused
  /// scope (bytes) -> ok: this connection's keys carry that prefix (a restart
  /// round's, "r1/"), so its loss is recorded under scope + store_lost_key and
  /// cuts short only waits of the same scope (a rank lost in round 0 must not
  /// end round 1's waits).
  scope = 9,
  /// rank (i32) -> ok: this connection, registered as no rank, belongs to
  /// that rank's process (its peer-failure watch): its drop is still nobody's
  /// loss, but rank 0's linger stops waiting for it when it stops waiting for
  /// that rank (store_stalled_prefix).
  owner = 10,
};

/// `lost` answers a pending wait (then i32: the rank) as soon as a rank drops
/// without a goodbye: the keys it would have set will never come.
enum class store_status : std::uint8_t { ok = 0, missing = 1, timeout = 2, refused = 3, lost = 4 };

/// Frames above this size are malformed by definition and close the connection.
/// The server records, under this key, each rank whose connection dropped
/// without a goodbye; clients read it to name the rank a job lost.
inline constexpr const char* store_lost_key = "ddp/lost";

/// Keys under this prefix serve failure diagnostics (who failed, who reached
/// which collective): waits on them are never cut short by a lost rank.
inline constexpr std::string_view store_fault_prefix = "ddp/fault/";

/// A rank that fails on its own sets `store_failed_prefix + rank` to its
/// reason; the server then records that rank as lost, like a dropped one.
inline constexpr std::string_view store_failed_prefix = "ddp/fault/failed/";

/// A rank whose host stopped acknowledging its store connection (see set_keepalive):
/// the server sets `store_unreachable_prefix + rank` to the reason when it records it lost.
inline constexpr std::string_view store_unreachable_prefix = "ddp/fault/unreachable/";

/// Each survivor's progress for the desync report (detail/fault/desync.hpp),
/// under `store_progress_prefix + rank`.
inline constexpr std::string_view store_progress_prefix = "ddp/fault/progress/";

/// A survivor whose desync report found a rank silent (stopped or hung) sets
/// `store_stalled_prefix + rank`: rank 0's store then stops lingering for that
/// rank's connections, which a stopped process holds open without ever
/// reading the failure they would linger for.
inline constexpr std::string_view store_stalled_prefix = "ddp/fault/stalled/";

inline constexpr std::uint32_t store_max_frame = 256u << 20;

/// Keys a wait or check may name in one frame; tcp_store splits longer lists.
inline constexpr std::uint32_t store_max_keys_per_frame = 65536;

class frame_writer {
public:
  explicit frame_writer(store_op op) {
    buf_.resize(4);
    buf_.push_back(static_cast<char>(op));
  }
  explicit frame_writer(store_status st) {
    buf_.resize(4);
    buf_.push_back(static_cast<char>(st));
  }
  frame_writer& u8(std::uint8_t v) { return raw(&v, 1); }
  frame_writer& u32(std::uint32_t v) { return raw(&v, 4); }
  frame_writer& i32(std::int32_t v) { return raw(&v, 4); }
  frame_writer& u64(std::uint64_t v) { return raw(&v, 8); }
  frame_writer& i64(std::int64_t v) { return raw(&v, 8); }
  frame_writer& bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    return raw(s.data(), s.size());
  }
  /// The finished frame, length prefix filled in; the writer is spent after this.
  std::vector<char> finish() {
    auto n = static_cast<std::uint32_t>(buf_.size() - 4);
    std::memcpy(buf_.data(), &n, 4);
    return std::move(buf_);
  }

private:
  /// resize + memcpy, not vector::insert of a range: GCC 12 at -O3 warns
  /// (-Warray-bounds) inside insert's inlined reallocation, a false positive.
  frame_writer& raw(const void* p, std::size_t n) {
    if (n == 0) return *this;
    const std::size_t at = buf_.size();
    buf_.resize(at + n);
    std::memcpy(buf_.data() + at, p, n);
    return *this;
  }
  std::vector<char> buf_;
};

/// Reads fields from a frame body; every read is bounds-checked, and a short
/// frame makes `ok()` false instead of reading past the end.
class frame_reader {
public:
  explicit frame_reader(std::string_view body) : s_(body) {}
  bool ok() const { return ok_; }
  bool at_end() const { return s_.empty(); }
  std::uint8_t u8() { return fixed<std::uint8_t>(); }
  std::uint32_t u32() { return fixed<std::uint32_t>(); }
  std::int32_t i32() { return fixed<std::int32_t>(); }
  std::uint64_t u64() { return fixed<std::uint64_t>(); }
  std::int64_t i64() { return fixed<std::int64_t>(); }
  std::string bytes() {
    std::uint32_t n = u32();
    if (!ok_ || n > s_.size()) {
      ok_ = false;
      return {};
    }
    std::string out(s_.substr(0, n));
    s_.remove_prefix(n);
    return out;
  }

private:
  template <class T> T fixed() {
    T v{};
    if (s_.size() < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, s_.data(), sizeof(T));
    s_.remove_prefix(sizeof(T));
    return v;
  }
  std::string_view s_;
  bool ok_ = true;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_PROTOCOL_HPP
// ---- end ddp/detail/store/protocol.hpp ----
// ---- begin ddp/detail/store/socket.hpp ----
// Minimal POSIX TCP helpers for the rendezvous store: RAII descriptors, bind
// to one address, connect with retry and backoff, and deadline-bounded I/O.
#ifndef DDP_DETAIL_STORE_SOCKET_HPP
#define DDP_DETAIL_STORE_SOCKET_HPP


#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

using clock = std::chrono::steady_clock;

class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

inline std::string errno_text(int e) { return std::string(std::strerror(e)); }

inline std::string endpoint(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

struct addrinfo_list {
  addrinfo* head = nullptr;
  ~addrinfo_list() {
    if (head) ::freeaddrinfo(head);
  }
};

/// getaddrinfo: 0, or its EAI_ code.
inline int try_resolve(const std::string& host, int port, bool passive, addrinfo_list& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string service = std::to_string(port);
  if (out.head) {
    ::freeaddrinfo(out.head);
    out.head = nullptr;
  }
  return ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
}

/// Whether a getaddrinfo failure may pass when asked again. EAI_AGAIN is the
/// resolver's "temporary failure" (its DNS server timed out or answered
/// SERVFAIL, as one does while it restarts); EAI_NONAME and the others are
/// answers about the name itself, and asking again will not change them.
inline bool resolve_failure_is_temporary(int gai_code) { return gai_code == EAI_AGAIN; }

inline std::string resolve_failure_text(const std::string& host, int gai_code) {
  return "cannot resolve address '" + host + "': " + ::gai_strerror(gai_code);
}

inline error resolve_error(const std::string& host, int gai_code) {
  return error(error_kind::config,
               resolve_failure_text(host, gai_code) + " (check MASTER_ADDR / --master-addr)");
}

/// Resolves once; a failure is a ddp::error (kind config).
inline void resolve(const std::string& host, int port, bool passive, addrinfo_list& out) {
  if (int rc = try_resolve(host, port, passive, out)) throw resolve_error(host, rc);
}

/// Resolves, asking again after a temporary failure with backoff (10 ms .. 1 s)
/// until `deadline`; a lasting failure is a ddp::error (kind config) at once.
inline void resolve(const std::string& host, int port, bool passive, addrinfo_list& out,
                    clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(10);
  for (bool first = true;; first = false) {
    int rc = try_resolve(host, port, passive, out);
    if (rc == 0) return;
    if (!resolve_failure_is_temporary(rc) || (first && clock::now() + backoff > deadline))
      throw resolve_error(host, rc);
    if (clock::now() + backoff > deadline)
      throw error(error_kind::timeout, resolve_failure_text(host, rc) +
                                           ", still at the timeout: check the DNS server, or give "
                                           "MASTER_ADDR as an IP address");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

inline int local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

inline std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  if (ss.ss_family == AF_UNIX) return "a local socket";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return endpoint(host, std::atoi(serv));
}

/// The accept queue asked for. The kernel clamps it to net.core.somaxconn
/// (4096 by default since Linux 5.4), so this asks for what the host allows.
/// A queue of 1024 overflowed when 2048 ranks connected at once, each overflow
/// costing a rank a SYN retransmit (docs/performance.md, Rendezvous and the
/// Gloo mesh).
inline constexpr int store_listen_backlog = 65535;

/// Listens on `host:port` (that address only; port 0 picks a free one). A
/// temporary DNS failure is retried until `resolve_deadline` (default: no retry).
inline unique_fd listen_tcp(const std::string& host, int port, clock::time_point resolve_deadline = {}) {
  addrinfo_list ai;
  resolve(host, port, true, ai, resolve_deadline);
  int last = 0;
  for (addrinfo* p = ai.head; p; p = p->ai_next) {
    unique_fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
    if (!fd) {
      last = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), p->ai_addr, p->ai_addrlen) != 0) {
      last = errno;
      continue;
    }
    if (::listen(fd.get(), store_listen_backlog) != 0) {
      last = errno;
      continue;
    }
    return fd;
  }
  if (last == EADDRINUSE)
    throw error(error_kind::config, "cannot serve the rendezvous store on " + endpoint(host, port) +
                                        ": port " + std::to_string(port) +
                                        " is already in use (another job still running? choose another "
                                        "MASTER_PORT, or --master-port 0 with ddprun)");
  throw error(error_kind::config, "cannot serve the rendezvous store on " + endpoint(host, port) + ": " +
                                      errno_text(last) +
                                      " (MASTER_ADDR must be an address of rank 0's host)");
}

inline void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Lets the kernel notice a peer *host* that stops answering (a cut link, a host
/// down): keepalive probes once the connection is idle for `within` / 4 (at least
/// 1 s, the option's unit), and the connection fails with ETIMEDOUT once nothing
/// was acknowledged for `within` (TCP_USER_TIMEOUT, which also bounds unacknowledged
/// data). A process that is stopped or busy still has its kernel answer, so only a
/// lost host or link trips it. Without it a cut link looked like stopped ranks, and
/// rank 0's store waited for their goodbyes until its linger ran out: ranks ended
/// 11-16 s after a veth went down with DDP_TIMEOUT=5s (tests/netns, link_down).
inline void set_keepalive(int fd, std::chrono::milliseconds within) {
  const auto ms = std::max<std::int64_t>(within.count(), 1000);
  int on = 1;
  int idle = static_cast<int>(std::clamp<std::int64_t>(ms / 4000, 1, 3600));
  int count = 3;
  unsigned user_timeout = static_cast<unsigned>(std::min<std::int64_t>(ms, 0x7fffffff));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

/// errno values that mean the peer's host or the path to it is gone (not the process).
inline bool errno_is_unreachable(int e) { return e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH; }

/// Connects to `host:port`, retrying with exponential backoff (10 ms .. 1 s)
/// until `deadline`: rank 0 may start its server after the others start, and
/// a DNS server may fail for a moment (EAI_AGAIN). A name that does not exist
/// is a ddp::error (kind config) at once.
inline unique_fd connect_tcp(const std::string& host, int port, clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(10);
  std::string last = "no attempt";
  for (;;) {
    addrinfo_list ai;
    int rc = try_resolve(host, port, false, ai);
    if (rc != 0 && !resolve_failure_is_temporary(rc)) throw resolve_error(host, rc);
    if (rc != 0) last = resolve_failure_text(host, rc);
    for (addrinfo* p = ai.head; p; p = p->ai_next) {
      unique_fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
      if (!fd) {
        last = errno_text(errno);
        continue;
      }
      if (::connect(fd.get(), p->ai_addr, p->ai_addrlen) == 0) {
        set_nodelay(fd.get());
        return fd;
      }
      last = errno_text(errno);
    }
    if (clock::now() + backoff > deadline)
      throw error(error_kind::timeout, "could not reach the rendezvous store at " + endpoint(host, port) +
                                           " before the timeout (last error: " + last +
                                           "). Is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

/// Waits until `fd` is readable (or writable) or the deadline passes.
inline bool wait_fd(int fd, short events, clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left < 0) left = 0;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true; // let the I/O call report the error
  }
}

/// Outcome of deadline-bounded I/O. `unreachable`: the kernel gave up on the peer's
/// host (ETIMEDOUT after set_keepalive's window, or no route), as opposed to `timeout`,
/// our own deadline with the peer's host still answering.
enum class io_status { ok, closed, timeout, failed, unreachable };

inline io_status send_all(int fd, const void* data, std::size_t n, clock::time_point deadline) {
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, deadline)) return io_status::timeout;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno_is_unreachable(errno)) return io_status::unreachable;
      return errno == EPIPE || errno == ECONNRESET ? io_status::closed : io_status::failed;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return io_status::ok;
}

inline io_status recv_all(int fd, void* data, std::size_t n, clock::time_point deadline) {
  auto p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) return io_status::timeout;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k == 0) return io_status::closed;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno_is_unreachable(errno)) return io_status::unreachable;
      return errno == ECONNRESET ? io_status::closed : io_status::failed;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return io_status::ok;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_SOCKET_HPP
// ---- end ddp/detail/store/socket.hpp ----

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE

struct tcp_store_options {
  std::string host = "127.0.0.1";
  int port = 0;       ///< 0 with serve=true picks a free port (see port())
  bool serve = false; ///< true on exactly one process (rank 0)
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  std::string token; ///< must match the server's; empty is a valid token
  int rank = -1;     ///< reported to the server so a lost connection names the rank
  /// With serve: how long teardown keeps serving ranks still connected
  /// (default: timeout + 10 s, see default_linger).
  std::optional<std::chrono::milliseconds> linger;
  /// Prefix of every key this client names ("r1/": restart round 1); empty: none.
  std::string scope;
  /// The launcher (ddprun on node 0) serves the store, not rank 0: a vanished
  /// store then means the launcher died, and names no rank.
  bool served_by_launcher = false;
};

/// The rank a survivor blames for a failure, as the store tells it.
struct lost_rank {
  int rank = -1;       ///< -1: no lost rank known (in fail_for_peer: the launcher serving the store is gone)
  std::string reason;  ///< "exited or lost its connection", "failed: <its reason>", ...
  bool silent = false; ///< rank 0 did not answer (stopped or hung), rather than died
  explicit operator bool() const { return rank >= 0; }
};

namespace detail {
class store_server;

/// "rank R <reason>", or the reason alone where no rank is named (the launcher is gone).
inline std::string lost_news(const lost_rank& lost) {
  return lost.rank >= 0 ? "rank " + std::to_string(lost.rank) + " " + lost.reason : lost.reason;
}
} // namespace detail

class tcp_store {
public:
  DDP_INLINE explicit tcp_store(const tcp_store_options& o);

  tcp_store(const tcp_store&) = delete;
  tcp_store& operator=(const tcp_store&) = delete;

  DDP_INLINE ~tcp_store();

  /// The port the store listens on (useful with port 0).
  int port() const { return opts_.port; }
  const std::string& host() const { return opts_.host; }
  std::chrono::milliseconds timeout() const { return opts_.timeout; }
  bool is_server() const { return server_ != nullptr; }

  DDP_INLINE void set(const std::string& key, std::string_view value,
                      std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  /// Waits (up to the store timeout) until `key` exists, then returns its value.
  DDP_INLINE std::string get(const std::string& key);

  /// Sets `keys[i]` to `values[i]` for every i in one round trip: the
  /// requests go out back to back and their replies are read after them (see
  /// pipelined). A full mesh's address exchange sets a key per peer; one round
  /// trip each took a median 0.24 s of each rank's connect at 64 ranks on this
  /// project's 2-core machine (bench_store_fanin --mesh-keys compares).
  DDP_INLINE void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);

  /// Waits (up to `timeout`, as wait() does, naming the keys still missing or
  /// a rank lost meanwhile) until every key exists, then reads them all in one
  /// round trip (see pipelined; bounded by the store's timeout, like get()):
  /// the values, in the order of `keys`.
  DDP_INLINE std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout);

  DDP_INLINE std::optional<std::string>
  try_get(const std::string& key, std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  /// Atomically adds `delta` to the integer under `key` (0 when absent); returns the new value.
  DDP_INLINE std::int64_t add(const std::string& key, std::int64_t delta);

  DDP_INLINE bool check(const std::vector<std::string>& keys);

  void wait(const std::vector<std::string>& keys) { wait(keys, opts_.timeout); }

  /// Waits until every key exists; ddp::error (kind timeout) naming the
  /// missing keys after `timeout`, or (kind peer_lost) naming a rank that
  /// dropped without a goodbye meanwhile: the keys it owed will never come.
  DDP_INLINE void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  /// Like wait(), but returns false on timeout instead of throwing (a lost rank
  /// still throws peer_lost). `slack`: how long past `timeout` the store may
  /// take to answer before it counts as gone (failure paths keep it short).
  DDP_INLINE bool try_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                           std::chrono::milliseconds slack = std::chrono::seconds(10));

  /// Ranks whose connection dropped without a goodbye (crashed processes).
  DDP_INLINE std::vector<int> lost_ranks();

  /// The rank to blame, for a survivor whose collective just failed: the
  /// first rank that dropped without a goodbye or announced its own failure.
  /// The store notices a crash at about the moment we do, so it is given
  /// `grace` to record it. `rank == -1` (unknown) when none was recorded.
  /// Rank 0 when the store is gone or silent: rank 0 serves it and, on
  /// teardown, keeps serving until the other ranks are done with it (see
  /// store_server), so a vanished store means rank 0 really died or stopped.
  /// When the launcher serves the store, a vanished one names nobody (-1).
  DDP_INLINE lost_rank wait_for_lost_rank(std::chrono::milliseconds grace);

  /// Announces that this rank fails on its own (not because of a peer): the
  /// store records it as lost at once, so peers name it instead of waiting.
  /// Best effort, bounded by a short deadline; false when the store is gone.
  /// When another thread of this rank holds the connection (a store wait of
  /// its collective, up to the timeout, which would hold the report back:
  /// docs/design-notes.md, "Note [leaving on an error]"), the report goes over
  /// a connection of its own, as this rank, that says goodbye after it.
  DDP_INLINE bool report_failure(std::string_view reason) noexcept;

  /// Rank 0 only, when a rank was lost before every rank arrived: on
  /// teardown, keep serving (late_arrival_linger at most) until each of the
  /// job's `world_size` ranks has connected once, so that a rank starting late
  /// reads who was lost instead of finding no store and waiting its timeout.
  DDP_INLINE void serve_late_arrivals(int world_size);
  /// Rank 0's error waits this long at most (a rank that never starts).
  static constexpr std::chrono::milliseconds late_arrival_linger{3000};

  /// Rank 0 only: on teardown, do not wait for the other ranks to disconnect.
  DDP_INLINE void stop_serving_at_once();

  /// Rank 0 only, when it failed on its own and said so (report_failure): on
  /// teardown, keep serving until the other ranks have left, but only for
  /// own_failure_linger, not the usual timeout + 10 s: its peers, told at once
  /// by their peer-failure watches, need only read why.
  DDP_INLINE void linger_briefly();

  /// With no linger at all, a peer sometimes read "the store is gone" instead
  /// of rank 0's reason: rank 0 exited 30 ms after giving up (dist.faults'
  /// abort-during-a-collective case, 1 run in 20 beside a CPU hog). Its peers
  /// fail within milliseconds of the report and then leave, ending the linger.
  static constexpr std::chrono::milliseconds own_failure_linger{2000};

  /// Another client of the same store, with the same token and key scope,
  /// registered as no rank (its connection dropping is nobody's loss): for a
  /// thread that blocks in store waits of its own (ddp's peer-failure watch)
  /// without holding up this client's requests.
  /// `timeout` bounds connecting and is the new client's default for requests.
  DDP_INLINE std::unique_ptr<tcp_store> connect_again(std::chrono::milliseconds timeout) const;

  /// Ends the request another thread is blocked in (it throws peer_lost) and
  /// fails every later one; no goodbye is sent. For the owner of a client
  /// whose thread blocks on it, at teardown. Safe from any thread.
  DDP_INLINE void shutdown_connection() noexcept;

  /// The rank this client registered as (-1: none).
  int rank() const { return opts_.rank; }
  /// The prefix of every key this client names (empty: none).
  const std::string& scope() const { return opts_.scope; }
  bool served_by_launcher() const { return opts_.served_by_launcher; }

  /// Failure paths (naming a lost rank, the desync report) give the store this
  /// long to answer beyond their own wait: a live store answers in well under a
  /// millisecond, even beside a CPU hog, so a silent one is a stopped rank 0.
  static constexpr std::chrono::milliseconds fault_slack{3000};

  /// How long report_failure waits for this client's connection before it
  /// opens one of its own: a request takes well under a millisecond, so a
  /// connection busy this long is in a wait that may last the timeout.
  static constexpr std::chrono::milliseconds report_patience{100};

  /// Requests pipelined beyond this many bytes wait for the replies to those
  /// before them: the server answers as it reads, so a client writing without
  /// reading could fill the socket buffers both ways (the kernel's default
  /// receive buffer alone, 128 KiB, holds a piece).
  static constexpr std::size_t pipeline_piece_bytes = 32 * 1024;

private:
  /// Calls `ask(part)` for each part of `keys` that fits a frame
  /// (store_max_keys_per_frame), in order, once for no keys; false as soon as
  /// one answers false.
  template <class Ask> static bool every_frame_part(const std::vector<std::string>& keys, Ask&& ask) {
    std::span<const std::string> rest(keys);
    do {
      const auto part = rest.first(std::min<std::size_t>(rest.size(), detail::store_max_keys_per_frame));
      if (!ask(part)) return false;
      rest = rest.subspan(part.size());
    } while (!rest.empty());
    return true;
  }

  /// One wait frame for `keys` (part of `all_keys`, which an error names).
  DDP_INLINE bool try_wait_frame(std::span<const std::string> keys, const std::vector<std::string>& all_keys,
                                 std::chrono::milliseconds timeout, std::chrono::milliseconds slack);

  /// Messages name at most this many keys of a list, then count the rest.
  static constexpr std::size_t keys_named = 8;

  DDP_INLINE static std::string name_keys(std::span<const std::string> keys);

  std::string scoped(const std::string& key) const { return opts_.scope.empty() ? key : opts_.scope + key; }

  /// A failed rank's own reason, when it gave one (store_failed_prefix).
  DDP_INLINE std::string describe_lost(int rank);

  /// How long rank 0's store keeps serving on teardown for ranks still
  /// connected. A survivor blocked in a send inside Gloo learns of a loss only
  /// at its timeout (seen with kill -9 of 1 rank of 4), then needs ~1 s to ask
  /// who was lost, or up to ~6 s for the desync report (gloo.hpp): so the
  /// timeout plus 10 s. (A linger of min(timeout, 10 s) let such a survivor
  /// find the store gone and blame rank 0: 1 trial in 50 beside a CPU hog.)
  /// It ends as soon as every other rank has left or was found stopped by
  /// the survivors' desync report (store_stalled_prefix), so it costs time
  /// only while a rank is stuck unseen: bounded, never forever.
  DDP_INLINE static std::chrono::milliseconds default_linger(std::chrono::milliseconds timeout);

  /// After how long without acknowledgements a store connection's peer host counts
  /// as lost (detail::set_keepalive): half the timeout, so that a survivor whose
  /// collective times out finds a rank cut off by the network already recorded
  /// lost (it takes one look, see detail/gloo/blame.hpp's find_lost_rank). At least 1 s.
  DDP_INLINE static std::chrono::milliseconds peer_timeout(std::chrono::milliseconds timeout);

  std::string where() const { return detail::endpoint(opts_.host, opts_.port); }
  /// Why no rank can go on once the launcher's store closed (wait_for_lost_rank's reason).
  DDP_INLINE std::string launcher_gone() const;

  /// Connects and authenticates (detail/store/auth.hpp). A server that closes
  /// the connection or goes quiet mid-handshake is shedding load (its cap on
  /// pending handshakes, or out of descriptors): ask again, with backoff,
  /// until the deadline. A wrong proof either way is final.
  DDP_INLINE void open_connection(detail::clock::time_point deadline);

  /// Tells the server this connection's key prefix (store_op::scope).
  DDP_INLINE void declare_scope(detail::clock::time_point deadline);

  /// Tells the server that this rank-less connection belongs to `rank`'s
  /// process (store_op::owner), so that rank 0's linger skips it with that
  /// rank once survivors found the rank stopped.
  DDP_INLINE void declare_owner(int rank);

  /// Who serves the store, for messages about it vanishing.
  DDP_INLINE std::string server_name() const;

  DDP_INLINE error protocol_error(const char* what) const;

  /// Sends `frames` back to back, in pieces of pipeline_piece_bytes, and
  /// returns their replies in order (the server answers a connection's frames
  /// in order, and those it read at once in one send: store_server).
  DDP_INLINE std::vector<std::string> pipelined(const std::vector<std::vector<char>>& frames,
                                                const std::string& what);

  DDP_INLINE void throw_if_broken() const;

  DDP_INLINE std::string request(detail::frame_writer& w, const std::string& what,
                                 std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  DDP_INLINE std::string
  request_holding_lock(detail::frame_writer& w, const std::string& what,
                       std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  DDP_INLINE void send_frame(const std::vector<char>& f, detail::clock::time_point deadline);

  DDP_INLINE std::string recv_frame(detail::clock::time_point deadline, const std::string& what);

  [[noreturn]] DDP_INLINE void fail(detail::io_status st, const std::string& what);

  tcp_store_options opts_;
  std::unique_ptr<detail::store_server> server_;
  detail::unique_fd fd_;
  std::mutex mu_; ///< one request at a time on fd_ (report_failure gives up on it after a while)
  bool broken_ = false;
  bool unreachable_ = false; ///< broken because rank 0's host stopped acknowledging
  error_kind broken_kind_ = error_kind::peer_lost;
};

DDP_END_NAMESPACE


#endif // DDP_STORE_HPP
// ---- end ddp/store.hpp ----
// ---- begin ddp/topology.hpp ----
// ddp::topology — who this process is: from ddprun/torchrun, OpenMPI or SLURM variables.
#ifndef DDP_TOPOLOGY_HPP
#define DDP_TOPOLOGY_HPP

// ---- begin ddp/detail/topology/nodelist.hpp ----
// Expansion of SLURM host lists: "gpu[01-03,07],cpu5" -> gpu01 gpu02 gpu03 gpu07 cpu5.
// Several bracket groups in one name expand as a product: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2.
#ifndef DDP_DETAIL_TOPOLOGY_NODELIST_HPP
#define DDP_DETAIL_TOPOLOGY_NODELIST_HPP


#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

inline error nodelist_error(std::string_view list, std::string_view why) {
  return error(error_kind::config,
               "SLURM node list '" + std::string(list) + "' cannot be parsed: " + std::string(why));
}

/// Expands the inside of one bracket group ("01-03,07") into its tokens,
/// keeping the zero padding of each range's lower bound.
inline std::vector<std::string> expand_bracket(std::string_view body, std::string_view whole) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    std::string_view item = body.substr(start, comma - start);
    if (item.empty()) throw nodelist_error(whole, "empty item inside brackets");
    std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      if (!parse_int(item)) throw nodelist_error(whole, "'" + std::string(item) + "' is not a number");
      out.emplace_back(item);
    } else {
      std::string_view lo_s = item.substr(0, dash), hi_s = item.substr(dash + 1);
      auto lo = parse_int(lo_s), hi = parse_int(hi_s);
      if (!lo || !hi || *lo < 0 || *hi < *lo)
        throw nodelist_error(whole, "bad range '" + std::string(item) + "'");
      if (*hi - *lo > 100000) throw nodelist_error(whole, "range too large");
      for (auto v = *lo; v <= *hi; ++v) {
        std::string s = std::to_string(v);
        if (s.size() < lo_s.size()) s.insert(0, lo_s.size() - s.size(), '0');
        out.push_back(std::move(s));
      }
    }
    start = comma + 1;
  }
  return out;
}

/// Expands one host pattern that contains no top-level comma.
inline std::vector<std::string> expand_host(std::string_view pat, std::string_view whole) {
  std::vector<std::string> acc{std::string()};
  std::size_t i = 0;
  while (i < pat.size()) {
    if (pat[i] == '[') {
      std::size_t close = pat.find(']', i);
      if (close == std::string_view::npos) throw nodelist_error(whole, "unbalanced '['");
      auto parts = expand_bracket(pat.substr(i + 1, close - i - 1), whole);
      std::vector<std::string> next;
      next.reserve(acc.size() * parts.size());
      for (const auto& a : acc)
        for (const auto& p : parts)
          next.push_back(a + p);
      acc = std::move(next);
      i = close + 1;
    } else if (pat[i] == ']') {
      throw nodelist_error(whole, "unbalanced ']'");
    } else {
      std::size_t next_br = pat.find_first_of("[]", i);
      if (next_br == std::string_view::npos) next_br = pat.size();
      for (auto& a : acc)
        a.append(pat.substr(i, next_br - i));
      i = next_br;
    }
  }
  return acc;
}

/// All host names of a SLURM node list, in order.
inline std::vector<std::string> expand_nodelist(std::string_view list) {
  std::vector<std::string> hosts;
  if (list.empty()) throw nodelist_error(list, "it is empty");
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c == '[')
      ++depth;
    else if (c == ']')
      --depth;
    else if (c == ',' && depth == 0) {
      std::string_view pat = list.substr(start, i - start);
      if (pat.empty()) throw nodelist_error(list, "empty host name");
      for (auto& h : expand_host(pat, list))
        hosts.push_back(std::move(h));
      start = i + 1;
    }
    if (depth < 0 || depth > 1) throw nodelist_error(list, "unbalanced or nested brackets");
  }
  if (depth != 0) throw nodelist_error(list, "unbalanced '['");
  return hosts;
}

/// The first host of a node list (the list is validated whole).
inline std::string first_node(std::string_view list) { return expand_nodelist(list).front(); }

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TOPOLOGY_NODELIST_HPP
// ---- end ddp/detail/topology/nodelist.hpp ----

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE

/// Where this process sits in the job.
struct topology {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;        ///< empty when the environment names none
  int master_port = 0;            ///< 0 when the environment names none
  std::string source = "default"; ///< "ddprun/torchrun", "openmpi", "slurm" or "default"
  /// The port ddp's own rendezvous store listens on (env://), 0 when none is known:
  /// DDP_STORE_PORT when set; else MASTER_PORT + 1 when torch's elastic agent serves its own store
  /// on MASTER_PORT (it says so with TORCHELASTIC_USE_AGENT_STORE=True: torchrun's static
  /// rendezvous, torch.distributed.launch); else master_port.
  int store_port = 0;
  /// DDP_STORE_IN_LAUNCHER=1 (ddprun sets it): the launcher on the master node serves the
  /// store on store_port, so it outlives every rank, and no rank serves one.
  bool store_in_launcher = false;
  /// DDP_RESTART_ROUND (ddprun sets it: 0, then 1, 2, ... after each restart of the job);
  /// nullopt when no launcher restarts the job. Store keys are scoped by it ("r<round>/").
  std::optional<int> restart_round;

  /// Reads ddprun/torchrun variables (RANK, ...) first, then OpenMPI
  /// (OMPI_COMM_WORLD_*), then SLURM (SLURM_PROCID, ...). With none of them
  /// set, a single process (rank 0 of 1). Every bad value throws ddp::error
  /// (kind config) naming the variable and its value.
  static topology from_env();
};

namespace detail {

/// The port a SLURM or OpenMPI job uses when MASTER_PORT is not set: a
/// deterministic function of the job id in [20000, 29999], so every task of a
/// job agrees without talking, and concurrent jobs rarely collide.
inline int port_from_job_id(std::uint64_t job_id) { return 20000 + static_cast<int>(job_id % 10000); }

inline int port_from_job_id(const std::string& job) {
  std::uint64_t h = 1469598103934665603ull; // FNV-1a: stable across builds
  for (char c : job)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return port_from_job_id(h);
}

inline void read_master(topology& t) {
  if (auto a = getenv_str("MASTER_ADDR")) {
    if (a->empty()) throw error(error_kind::config, "environment variable MASTER_ADDR is set but empty");
    t.master_addr = *a;
  }
  if (auto p = env_int("MASTER_PORT", 1, 65535)) t.master_port = static_cast<int>(*p);
}

inline void check_topology(const topology& t, const char* rank_var, const char* world_var,
                           const char* local_var, const char* local_world_var) {
  auto fail = [&](const std::string& what) {
    throw error(error_kind::config, "contradictory " + t.source + " environment: " + what);
  };
  if (t.rank >= t.world_size)
    fail(std::string(rank_var) + "=" + std::to_string(t.rank) + " is not below " + world_var + "=" +
         std::to_string(t.world_size));
  if (t.local_rank >= t.local_world_size)
    fail(std::string(local_var) + "=" + std::to_string(t.local_rank) + " is not below " + local_world_var +
         "=" + std::to_string(t.local_world_size));
  if (t.local_world_size > t.world_size)
    fail(std::string(local_world_var) + "=" + std::to_string(t.local_world_size) + " exceeds " + world_var +
         "=" + std::to_string(t.world_size));
  if (t.node_rank >= t.nnodes)
    fail("node rank " + std::to_string(t.node_rank) + " is not below the node count " +
         std::to_string(t.nnodes));
}

/// True when torch's elastic agent serves its own store on MASTER_PORT (torch sets "True"/"False").
inline bool agent_holds_master_port() {
  auto v = getenv_str("TORCHELASTIC_USE_AGENT_STORE");
  return v && (*v == "True" || *v == "true" || *v == "1");
}

/// The launcher's part: DDP_STORE_IN_LAUNCHER and DDP_RESTART_ROUND (ddprun sets both).
inline void read_launcher(topology& t) {
  if (auto v = getenv_str("DDP_STORE_IN_LAUNCHER")) {
    if (*v != "0" && *v != "1")
      throw error(error_kind::config,
                  "environment variable DDP_STORE_IN_LAUNCHER='" + *v + "' must be 0 or 1 (ddprun sets it)");
    t.store_in_launcher = *v == "1";
  }
  if (auto r = env_int("DDP_RESTART_ROUND", 0, 1 << 30)) t.restart_round = static_cast<int>(*r);
}

inline void read_store_port(topology& t) {
  if (auto p = env_int("DDP_STORE_PORT", 1, 65535)) {
    t.store_port = static_cast<int>(*p);
  } else if (t.master_port != 0 && agent_holds_master_port()) {
    if (t.master_port == 65535)
      throw error(error_kind::config,
                  "MASTER_PORT=65535 and torch's elastic agent holds it (TORCHELASTIC_USE_AGENT_STORE=True), "
                  "so ddp's store has no MASTER_PORT+1 to use: choose a lower --master_port, or set "
                  "DDP_STORE_PORT to a free port");
    t.store_port = t.master_port + 1;
  } else {
    t.store_port = t.master_port;
  }
}

/// Where the store port came from, for error messages.
inline std::string store_port_origin(const topology& t) {
  if (getenv_str("DDP_STORE_PORT")) return "DDP_STORE_PORT=" + std::to_string(t.store_port);
  if (t.store_port != t.master_port)
    return "port " + std::to_string(t.store_port) +
           " = MASTER_PORT+1, because torch's elastic agent serves its own store on MASTER_PORT=" +
           std::to_string(t.master_port) + " (TORCHELASTIC_USE_AGENT_STORE=True)";
  return "MASTER_PORT=" + std::to_string(t.master_port);
}

inline topology topology_from_torchrun() {
  topology t;
  t.source = "ddprun/torchrun";
  t.world_size =
      static_cast<int>(require_env_int("WORLD_SIZE", 1, 1 << 20, "RANK is set, so WORLD_SIZE must be too"));
  t.rank = static_cast<int>(require_env_int("RANK", 0, 1 << 20, "launcher"));
  t.local_rank = static_cast<int>(env_int("LOCAL_RANK", 0, 1 << 20).value_or(t.rank));
  t.local_world_size = static_cast<int>(env_int("LOCAL_WORLD_SIZE", 1, 1 << 20).value_or(t.world_size));
  auto group = env_int("GROUP_RANK", 0, 1 << 20);
  auto node = env_int("NODE_RANK", 0, 1 << 20);
  if (group && node && *group != *node)
    throw error(error_kind::config, "contradictory environment: GROUP_RANK=" + std::to_string(*group) +
                                        " but NODE_RANK=" + std::to_string(*node));
  t.node_rank = static_cast<int>(group ? *group : node.value_or(0));
  if (t.world_size % t.local_world_size != 0)
    throw error(error_kind::config,
                "contradictory environment: WORLD_SIZE=" + std::to_string(t.world_size) +
                    " is not a multiple of LOCAL_WORLD_SIZE=" + std::to_string(t.local_world_size));
  t.nnodes = t.world_size / t.local_world_size;
  read_master(t);
  check_topology(t, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return t;
}

inline topology topology_from_openmpi() {
  topology t;
  t.source = "openmpi";
  t.world_size =
      static_cast<int>(require_env_int("OMPI_COMM_WORLD_SIZE", 1, 1 << 20, "OMPI_COMM_WORLD_RANK is set"));
  t.rank = static_cast<int>(require_env_int("OMPI_COMM_WORLD_RANK", 0, 1 << 20, "launcher"));
  t.local_rank = static_cast<int>(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 1 << 20).value_or(0));
  t.local_world_size = static_cast<int>(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1 << 20).value_or(1));
  // mpirun's default (--map-by slot) places consecutive ranks on one node.
  t.nnodes = (t.world_size + t.local_world_size - 1) / t.local_world_size;
  t.node_rank = t.rank / t.local_world_size;
  read_master(t);
  if (t.master_addr.empty() && t.nnodes == 1) t.master_addr = "127.0.0.1";
  if (t.master_port == 0) {
    auto job = getenv_str("OMPI_MCA_ess_base_jobid");
    if (!job) job = getenv_str("PMIX_NAMESPACE");
    if (job) t.master_port = port_from_job_id(*job);
  }
  check_topology(t, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE");
  return t;
}

/// Tasks on this node from SLURM_STEP_TASKS_PER_NODE ("2(x3),1"), else ntasks/nnodes.
inline int slurm_tasks_on_node(int node, int ntasks, int nnodes) {
  auto spec = getenv_str("SLURM_STEP_TASKS_PER_NODE");
  if (!spec) spec = getenv_str("SLURM_TASKS_PER_NODE");
  if (!spec) return (ntasks + nnodes - 1) / nnodes;
  std::string_view s = *spec;
  int seen = 0;
  while (!s.empty()) {
    std::size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    int repeat = 1;
    std::size_t paren = item.find('(');
    auto count = parse_int(item.substr(0, paren));
    if (paren != std::string_view::npos) {
      auto r =
          item.size() > paren + 3 ? parse_int(item.substr(paren + 2, item.size() - paren - 3)) : std::nullopt;
      if (!r || *r < 1 || item.substr(paren, 2) != "(x" || item.back() != ')')
        count.reset();
      else
        repeat = static_cast<int>(*r);
    }
    const std::int64_t tasks = count.value_or(0);
    if (tasks < 1)
      throw error(error_kind::config,
                  "environment variable SLURM_STEP_TASKS_PER_NODE='" + *spec + "' cannot be parsed");
    if (node < seen + repeat) return static_cast<int>(tasks);
    seen += repeat;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  throw error(error_kind::config, "environment variable SLURM_STEP_TASKS_PER_NODE='" + *spec +
                                      "' names fewer nodes than SLURM_NODEID=" + std::to_string(node) +
                                      " needs");
}

inline topology topology_from_slurm() {
  topology t;
  t.source = "slurm";
  t.world_size = static_cast<int>(require_env_int("SLURM_NTASKS", 1, 1 << 20, "SLURM_PROCID is set"));
  t.rank = static_cast<int>(require_env_int("SLURM_PROCID", 0, 1 << 20, "launcher"));
  t.local_rank = static_cast<int>(env_int("SLURM_LOCALID", 0, 1 << 20).value_or(0));
  t.nnodes = static_cast<int>(env_int("SLURM_NNODES", 1, 1 << 20).value_or(1));
  t.node_rank = static_cast<int>(env_int("SLURM_NODEID", 0, 1 << 20).value_or(0));
  if (t.node_rank >= t.nnodes)
    throw error(error_kind::config,
                "contradictory slurm environment: SLURM_NODEID=" + std::to_string(t.node_rank) +
                    " is not below SLURM_NNODES=" + std::to_string(t.nnodes));
  t.local_world_size = slurm_tasks_on_node(t.node_rank, t.world_size, t.nnodes);
  read_master(t);
  if (t.master_addr.empty()) {
    auto list = getenv_str("SLURM_STEP_NODELIST");
    if (!list) list = getenv_str("SLURM_JOB_NODELIST");
    if (!list)
      throw error(error_kind::config,
                  "SLURM_PROCID is set but neither MASTER_ADDR nor SLURM_STEP_NODELIST is: "
                  "run under srun, or export MASTER_ADDR");
    t.master_addr = first_node(*list);
  }
  if (t.master_port == 0) {
    if (auto job = env_int("SLURM_JOB_ID", 0, INT64_MAX))
      t.master_port = port_from_job_id(static_cast<std::uint64_t>(*job));
  }
  check_topology(t, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "local task count");
  return t;
}

} // namespace detail

inline topology topology::from_env() {
  topology t;
  if (detail::getenv_str("RANK"))
    t = detail::topology_from_torchrun();
  else if (detail::getenv_str("OMPI_COMM_WORLD_RANK"))
    t = detail::topology_from_openmpi();
  else if (detail::getenv_str("SLURM_PROCID"))
    t = detail::topology_from_slurm();
  else
    detail::read_master(t);
  detail::read_store_port(t);
  detail::read_launcher(t);
  return t;
}

/// The CUDA device (an index among the visible ones) a rank uses, given how many devices
/// it sees (cudaGetDeviceCount, which honours CUDA_VISIBLE_DEVICES):
/// - local_world_size <= visible_devices: device local_rank (the node's ranks share one
///   visible set, as under ddprun, torchrun or `CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun ...`);
/// - one visible device: device 0 (each rank sees its own GPU, as with SLURM
///   `--gpus-per-task=1` or a per-rank CUDA_VISIBLE_DEVICES);
/// - otherwise ddp::error (config): more ranks on this node than visible GPUs, and NCCL
///   refuses two ranks on one GPU. Every rank of the node fails alike, before NCCL starts.
inline int cuda_device_for(const topology& t, int visible_devices) {
  if (visible_devices < 1)
    throw error(error_kind::backend,
                "rank " + std::to_string(t.rank) + ": no visible CUDA device (check CUDA_VISIBLE_DEVICES)",
                t.rank);
  if (t.local_world_size <= visible_devices) return t.local_rank;
  if (visible_devices == 1) return 0;
  throw error(error_kind::config,
              "rank " + std::to_string(t.rank) + " (local rank " + std::to_string(t.local_rank) +
                  "): " + std::to_string(t.local_world_size) + " ranks on this node but only " +
                  std::to_string(visible_devices) +
                  " CUDA devices visible (CUDA_VISIBLE_DEVICES), and NCCL needs one GPU per rank: start "
                  "at most " +
                  std::to_string(visible_devices) +
                  " ranks per node, make one device visible to each rank (SLURM --gpus-per-task=1), or use "
                  "ddp::gloo, whose ranks may share a GPU",
              t.rank);
}

/// Removes the local-rank option that torch.distributed.launch (without --use_env) passes to
/// the program — `--local_rank=N` (torch 1.x), `--local-rank=N` (torch 2.x), or either with
/// the value as the next argument — from argc/argv, so that a command-line parser that
/// rejects unknown options (CLI11, getopt) never sees it. Call it first thing in main().
/// Scanning stops at "--". Returns the value, or nullopt when the option is absent.
/// Throws ddp::error (config) when the value is missing or not a non-negative integer, when
/// two occurrences disagree, or when it differs from LOCAL_RANK (which ddp reads; every
/// launcher that passes the option also sets LOCAL_RANK).
inline std::optional<int> consume_local_rank_arg(int& argc, char** argv) {
  if (argc < 1 || argv == nullptr) return std::nullopt;
  std::optional<int> found;
  int out = 1;
  int i = 1;
  auto take = [&](std::string_view opt, std::string_view value) {
    auto v = detail::parse_int(value);
    if (!v || *v < 0 || *v > (1 << 20))
      throw error(error_kind::config, "command line: " + std::string(opt) + " needs a local rank (a " +
                                          "non-negative integer), got '" + std::string(value) + "'");
    if (found && *found != *v)
      throw error(error_kind::config, "command line: the local rank is given twice, as " +
                                          std::to_string(*found) + " and " + std::to_string(*v));
    found = static_cast<int>(*v);
  };
  for (; i < argc; ++i) {
    std::string_view a = argv[i] ? argv[i] : "";
    if (a == "--") break;
    std::string_view opt;
    for (std::string_view name : {"--local_rank", "--local-rank"})
      if (a.starts_with(name) && (a.size() == name.size() || a[name.size()] == '=')) opt = name;
    if (opt.empty()) {
      argv[out++] = argv[i];
      continue;
    }
    if (a.size() > opt.size()) {
      take(opt, a.substr(opt.size() + 1));
    } else {
      if (i + 1 >= argc) take(opt, "");
      take(opt, argv[++i]);
    }
  }
  for (; i < argc; ++i)
    argv[out++] = argv[i];
  argc = out;
  argv[argc] = nullptr;
  if (found) {
    if (auto env = detail::env_int("LOCAL_RANK", 0, 1 << 20); env && *env != *found)
      throw error(error_kind::config,
                  "command line says --local_rank=" + std::to_string(*found) +
                      " but LOCAL_RANK=" + std::to_string(*env) +
                      ": the option and the environment must come from the same launcher");
  }
  return found;
}

DDP_END_NAMESPACE

#endif // DDP_TOPOLOGY_HPP
// ---- end ddp/topology.hpp ----
// ---- begin ddp/work.hpp ----
// ddp::work — the handle of an asynchronous collective.
#ifndef DDP_WORK_HPP
#define DDP_WORK_HPP


#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

struct CUstream_st; // cudaStream_t is CUstream_st*: no CUDA header needed here

DDP_BEGIN_NAMESPACE

namespace detail {
/// Made with std::make_shared only (a backend that finishes a work later keeps it alive).
struct work_state : std::enable_shared_from_this<work_state> {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr failure;
  std::string what; ///< "all_reduce #12 (4096 x float32)": names it in a timeout
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  /// Set once a collective that completes on a device stream (NCCL, device
  /// tensors) is queued there: makes a stream wait for it on the device.
  /// Called under `mu`, and only before finish(). Empty for collectives that
  /// complete on the host.
  std::function<void(CUstream_st*)> order_stream;
  /// Such a collective's task returns before it completes: the backend calls
  /// finish() when the device is done, and the queue's bookkeeping (flight
  /// recorder, trace) for it runs then (after_deferred_finish).
  bool deferred = false;
  std::function<void(bool ok)> on_deferred_finish;

  /// Called by the running task once its collective is queued on a device
  /// stream, before it hands the work to whatever will finish() it (which
  /// may then happen at once, on another thread): from here on the task's
  /// return does not finish the work, and it must not throw.
  void queued_on_device(std::function<void(CUstream_st*)> order) {
    {
      std::lock_guard lock(mu);
      order_stream = std::move(order);
      deferred = true;
    }
    cv.notify_all();
  }

  /// The first call wins: a later one (a failure racing a completion) is ignored.
  void finish(std::exception_ptr e) {
    std::function<void(bool)> bookkeeping;
    {
      std::lock_guard lock(mu);
      if (finished) return;
      finished = true;
      failure = std::move(e);
      if (deferred) bookkeeping = std::move(on_deferred_finish); // empty: the queue sets it later
    }
    cv.notify_all();
    run_bookkeeping(bookkeeping, failure == nullptr);
  }

  /// By the queue, after a task that deferred its completion returned: `fn(ok)`
  /// runs when the work finishes, or now if it already did. (Set only then, so
  /// a collective that completes on the host allocates nothing for it.)
  void after_deferred_finish(std::function<void(bool)> fn) {
    bool ok = false;
    {
      std::lock_guard lock(mu);
      if (!finished) {
        on_deferred_finish = std::move(fn);
        return;
      }
      ok = failure == nullptr;
    }
    run_bookkeeping(fn, ok);
  }

  bool is_deferred() {
    std::lock_guard lock(mu);
    return deferred;
  }

private:
  /// Diagnostics only: on a backend's thread (NCCL's watcher), nothing may escape.
  static void run_bookkeeping(const std::function<void(bool)>& fn, bool ok) noexcept {
    if (!fn) return;
    try {
      fn(ok);
    } catch (...) {}
  }
};
} // namespace detail

class work {
public:
  work() = default;
  explicit work(std::shared_ptr<detail::work_state> s) : s_(std::move(s)) {}

  /// True once the collective finished, successfully or not.
  bool done() const {
    if (!s_) return true;
    std::lock_guard lock(s_->mu);
    return s_->finished;
  }

  /// Waits for the collective; rethrows its ddp::error. The backend's own
  /// timeout fires first; the extra margin here only guards against a
  /// collective that never reaches the wire.
  void wait() const {
    if (!s_) return;
    std::unique_lock lock(s_->mu);
    auto limit = s_->timeout + std::chrono::seconds(30);
    if (!s_->cv.wait_for(lock, limit, [&] { return s_->finished; }))
      throw error(error_kind::timeout,
                  s_->what + " did not complete within " + std::to_string(limit.count()) + " ms");
    if (s_->failure) std::rethrow_exception(s_->failure);
  }

  /// Stream-ordered wait: `stream` (a cudaStream_t; null: the default stream
  /// of the calling thread's device) waits, on the device, for the
  /// collective (what cudaStreamWaitEvent does with an event). Where it completes on a device stream
  /// (ddp::nccl, device tensors) the calling thread waits only until it was queued there, not for it to
  /// finish; a failure after that (a timeout, a lost peer) is reported by wait(), and the group refuses every
  /// later collective with it. Anywhere else (host memory, ddp::gloo) the result is written by the host: this
  /// is wait().
  void stream_wait(CUstream_st* stream) const {
    if (!s_) return;
    std::unique_lock lock(s_->mu);
    auto limit = s_->timeout + std::chrono::seconds(30);
    if (!s_->cv.wait_for(lock, limit, [&] { return s_->finished || s_->order_stream; }))
      throw error(error_kind::timeout,
                  s_->what + " was not queued within " + std::to_string(limit.count()) + " ms");
    if (s_->failure) std::rethrow_exception(s_->failure);
    // A finished collective needs no device wait, and a backend may reuse what
    // order_stream waits on (a pooled event) once the work finished: so it is
    // called only before that, under the lock finish() takes.
    if (!s_->finished && s_->order_stream) s_->order_stream(stream);
  }

private:
  std::shared_ptr<detail::work_state> s_;
};

DDP_END_NAMESPACE

#endif // DDP_WORK_HPP
// ---- end ddp/work.hpp ----

#include <chrono>
#include <concepts>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE

/// How init_process_group joins the job; the rendezvous below is built from it.
struct init_options {
  std::string init_method = "env://"; ///< env://, tcp://host:port or file:///shared/dir
  int rank = -1;                      ///< -1: from the environment (topology)
  int world_size = -1;                ///< -1: from the environment
  std::chrono::milliseconds timeout = detail::default_timeout();
  std::string token; ///< empty: DDP_TOKEN (set per job by ddprun)
};

/// What a communicator needs to connect: the resolved topology, timeout,
/// token and (for env:// and tcp://) the job's tcp_store. Built by
/// init_process_group.
struct rendezvous {
  ddp::topology topo; ///< rank/world_size already overridden by init_options
  std::chrono::milliseconds timeout{};
  std::string token;
  std::shared_ptr<tcp_store> store; ///< null for file://
  std::string file_path;            ///< the directory of file://
  /// Set by process_group where it watches the store for failed ranks: a
  /// communicator still connecting may register here what ends its waits
  /// for a rank lost meanwhile (ddp::gloo does: the news names the rank).
  /// Null: nothing does.
  std::shared_ptr<detail::connect_interrupt> interrupt;
};

namespace detail {
using ddp::rendezvous; // its name before the backend contract was written down
} // namespace detail

/// Tags a collective's pointers as device memory (for a device_communicator).
struct device_memory_t {
  explicit device_memory_t() = default;
};
inline constexpr device_memory_t device_memory{};

/// The collectives every backend offers, on host memory. `blocking` tells the
/// backend that the caller waits at once (it may then run the collective inline).
/// Every collective returns a ddp::work; the first failure poisons the
/// communicator, and every pending and later work fails with that error.
template <class C>
concept communicator = std::constructible_from<C, const rendezvous&> &&
    requires(C& c, const C& cc, void* p, const void* in, std::size_t n, dtype dt, op o, int root,
             bool blocking) {
  { cc.rank() } -> std::same_as<int>;
  { cc.size() } -> std::same_as<int>;
  { cc.timeout() } -> std::same_as<std::chrono::milliseconds>;
  { cc.poisoned() } -> std::same_as<std::exception_ptr>;
  c.drain();
  { c.all_reduce(p, n, dt, o, blocking) } -> std::same_as<work>;
  { c.broadcast(p, n, dt, root, blocking) } -> std::same_as<work>;
  { c.all_gather(in, p, n, dt, blocking) } -> std::same_as<work>;
  { c.reduce_scatter(in, p, n, dt, o, blocking) } -> std::same_as<work>;
  { c.barrier(blocking) } -> std::same_as<work>;
};

/// Sums a bucket given as fragments (each tensor where it lies) across ranks
/// and multiplies the result by a scale (1/W for a mean): no packing copies,
/// and the averaging fused into the pass that already touches the data.
template <class C>
concept fragment_communicator = communicator<C> &&
    requires(C& c, std::vector<detail::fragment> frags, dtype dt, double scale, bool blocking) {
  { c.all_reduce_fragments(std::move(frags), dt, scale, blocking) } -> std::same_as<work>;
};

/// Also takes pointers to device memory, tagged `device_memory`.
template <class C>
concept device_communicator = communicator<C> &&
    requires(C& c, void* p, const void* in, std::size_t n, dtype dt, op o, int root, bool blocking) {
  { c.all_reduce(device_memory, p, n, dt, o, blocking) } -> std::same_as<work>;
  { c.broadcast(device_memory, p, n, dt, root, blocking) } -> std::same_as<work>;
  { c.all_gather(device_memory, in, p, n, dt, blocking) } -> std::same_as<work>;
  { c.reduce_scatter(device_memory, in, p, n, dt, o, blocking) } -> std::same_as<work>;
};

/// Makes arrays in memory every rank of the node sees (collectively), and says
/// whether a range lies in one: an all_reduce of it runs in place there, and a
/// joined rank's zeros must go there too (host_bucket_engine::reduce_zeros).
template <class C>
concept shm_communicator = communicator<C> && requires(C& c, std::size_t n, const void* p) {
  { c.template make_shm_array<float>(n) } -> std::same_as<shm_array<float>>;
  { c.is_shm_array_memory(p, n) } -> std::same_as<bool>;
};

/// Fails the group at once from outside a collective, for an error of this
/// rank's own: what is queued fails, then every connection closes, so peers
/// blocked on this rank fail now and name it instead of waiting for their
/// timeout. process_group uses it when an exception leaves it, and when a
/// device tensor's staging copy fails between its collectives (ddp::gloo).
template <class C>
concept abortable_communicator = communicator<C> && requires(C& c, const std::string& why) {
  c.abort_for_failure(why);
};

/// Fails the group from outside a collective because another rank failed, as
/// the store reports it (detail::peer_failure_watch, which process_group runs
/// for such a communicator): collectives refuse from then on, naming that
/// rank, and one waiting now ends now, even on a rank that waits on some
/// third rank. Called at most once: from the watch's thread, or, for a failure
/// heard while the communicator was being built, from process_group's
/// constructor right after (peer_failure_relay.hpp).
template <class C>
concept peer_failure_communicator = communicator<C> && requires(C& c, const lost_rank& lost) {
  c.fail_for_peer(lost);
};

/// Says how many descriptors its connections take at a topology (a static
/// function: asked before it connects), so that init_process_group raises the
/// open-files limit, or refuses the job clearly, before the mesh runs out.
template <class C>
concept open_files_communicator = communicator<C> && requires(const ddp::topology& t) {
  { C::open_files(t) } -> std::convertible_to<long>;
};

/// A backend policy: a name and a communicator type.
template <class B>
concept backend_policy = requires {
  typename B::communicator;
  { B::name } -> std::convertible_to<std::string_view>;
}
&&communicator<typename B::communicator>;

/// Whether tensors in device memory may be given to this backend's collectives.
template <class B>
inline constexpr bool accepts_device_tensors_v = device_communicator<typename B::communicator>;

DDP_END_NAMESPACE

#endif // DDP_BACKEND_COMMUNICATOR_HPP
// ---- end ddp/backend/communicator.hpp ----
// ---- begin ddp/backend/gloo.hpp ----
// The Gloo backend policy: CPU tensors over TCP, and through the node's shared
// memory where ranks share a node. Its communicator is
// detail/gloo/communicator.hpp.
#ifndef DDP_BACKEND_GLOO_HPP
#define DDP_BACKEND_GLOO_HPP

// ---- begin ddp/detail/gloo/communicator.hpp ----
// The Gloo communicator behind ddp::gloo (backend/gloo.hpp): CPU tensors over
// TCP. Collectives run one at a time, in submission order, on a worker thread
// (Gloo has no non-blocking collectives), each with a fresh tag. The first
// failure closes every connection, so peers fail fast too, and poisons the
// group.
//
// This class is what a user's translation unit sees: declarations and a
// pointer. What it holds and does (the mesh, the collectives, the
// shared-memory path, the blame: its parts in this folder) is
// gloo_communicator_impl (communicator_impl.hpp), which only the runtime's
// definitions include (communicator-inl.hpp), so a file that trains a model
// parses none of it when ddp is compiled separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_GLOO_COMMUNICATOR_HPP
#define DDP_DETAIL_GLOO_COMMUNICATOR_HPP


#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_communicator_impl;

class gloo_communicator {
public:
  DDP_INLINE explicit gloo_communicator(const rendezvous& rv);
  gloo_communicator(const gloo_communicator&) = delete;
  gloo_communicator& operator=(const gloo_communicator&) = delete;
  DDP_INLINE ~gloo_communicator(); // the worker stops before the connections go

  /// Descriptors a rank holds at its peak: one per peer, its device's epoll and
  /// the eventfd that wakes it; where the node's ranks can share memory, the
  /// segment's two and, on a node leader, the leaders' mesh across nodes
  /// (docs/design-notes.md, "Note [open files]").
  DDP_INLINE static long open_files(const ddp::topology& t);

  /// True when all_reduce goes through the node's shared-memory segment (see
  /// detail/shm/all_reduce.hpp): on by default when ranks share a node, DDP_SHM=0 off.
  DDP_INLINE bool shm_active() const;
  /// The shm path's step size (like set_ring_piece_bytes: tests make it small
  /// to cross step ends; same value on every rank, before collectives); 0
  /// restores the defaults (256 KiB within a node, the whole area across nodes).
  DDP_INLINE void set_shm_step_bytes(std::size_t bytes);
  DDP_INLINE std::size_t shm_step_bytes() const;
  /// Benches compare the two paths in one run: false sends all_reduce,
  /// reduce_scatter and all_gather over TCP again. Every rank must switch at
  /// the same point of its collective sequence.
  DDP_INLINE void use_shm(bool on);
  /// The shm segment's name (tests look for it in /dev/shm); empty when off.
  DDP_INLINE std::string shm_segment_name() const;
  /// All-reduces run in place in a shm array so far (tests check the path taken).
  DDP_INLINE std::uint64_t shm_in_place_runs() const;
  /// reduce_scatters and all_gathers run through the node's segment so far (tests).
  DDP_INLINE std::uint64_t shm_block_runs() const;

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  DDP_INLINE bool is_shm_array_memory(const void* p, std::size_t bytes) const;

  /// `n` zeroed elements in memory every rank of the node sees (ddp::shm_array):
  /// an all_reduce of a range inside it runs in place. Collective: every rank
  /// calls it, in the same order, with the same n and T. It runs in the
  /// group's queue, after the collectives submitted before it. Private memory
  /// where the shm path is off or spans nodes, or when the node's segment for
  /// it (LOCAL_WORLD_SIZE x n x sizeof(T)) cannot be made (rank 0 warns, once per array).
  template <class T> shm_array<T> make_shm_array(std::size_t n) {
    return shm_array<T>(make_shm_memory(n, dtype_v<T>, sizeof(T)), n);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  DDP_INLINE std::exception_ptr poisoned() const;
  DDP_INLINE void drain();

  /// For a rank leaving on an error of its own (process_group::abort, or its
  /// teardown on an escaping exception), from any thread: what is queued fails
  /// with `reason`, every connection fails, so peers blocked on this rank fail
  /// now, not at their timeout, and a collective running here is interrupted
  /// (it fails with `reason` too). Returns without waiting for it.
  DDP_INLINE void abort_for_failure(const std::string& reason);
  /// The first half of abort_for_failure: collectives are refused with
  /// `reason` from now on, and one running now that fails, fails with it,
  /// but nothing is interrupted yet. process_group calls it before it tells
  /// the store, whose news makes the peers close their connections.
  DDP_INLINE void poison_for_failure(const std::string& reason);
  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it, and this rank's TCP
  /// connections close, so a collective waiting here ends now even when it
  /// waits on some other rank. The node's segment is left alone: its waits
  /// read the store themselves, and aborting it would name this rank.
  DDP_INLINE void fail_for_peer(const lost_rank& lost);

  /// The largest message ddp's fragment ring and chain broadcast send (1 MiB
  /// by default; docs/performance.md, Collectives). Like Gloo's
  /// maxSegmentSize: tests make it small so that small tensors cross piece
  /// boundaries. Every rank must use the same value, set before the
  /// collectives it is for.
  DDP_INLINE void set_ring_piece_bytes(std::size_t bytes);
  static constexpr std::size_t max_piece_bytes = std::size_t{1} << 30;
  DDP_INLINE std::size_t ring_piece_bytes() const;

  /// Small tensors (up to 64 KiB at 2-4 ranks) travel with the header: one
  /// round, and every rank reduces all contributions in rank order, so every
  /// rank gets the same bits. Larger ones go around ddp's ring (as buckets
  /// do), the averaging fused into its last reduction step
  /// (docs/performance.md, Collectives).
  DDP_INLINE work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false);
  /// Sums a bucket given as fragments (each tensor where it lies) across ranks,
  /// then multiplies it by `scale`: no packing, and the averaging fused in.
  DDP_INLINE work all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale,
                                       bool blocking = false);
  /// Small tensors travel with the header; larger ones down ddp's chain
  /// (detail/gloo/chain.hpp), once the headers agree.
  DDP_INLINE work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false);
  /// On one node with shm: through the node's segment
  /// (detail/shm/block_collectives.hpp). Else small tensors travel with the
  /// header, larger ones in ddp's block exchange (detail/gloo/exchange.hpp).
  /// `in` may be this rank's own block of `out`.
  DDP_INLINE work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false);
  /// Block r of `in` (n elements each) is reduced across ranks into rank r's `out`,
  /// by its owner in rank order. `out` may be this rank's own block of `in`.
  DDP_INLINE work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o,
                                 bool blocking = false);
  /// The header round is the barrier: no rank leaves it before every rank's
  /// header arrived.
  DDP_INLINE work barrier(bool blocking = false);

private:
  DDP_INLINE shm_memory make_shm_memory(std::size_t n, dtype dt, std::size_t elem_size);

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<gloo_communicator_impl> impl_;
};

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_GLOO_COMMUNICATOR_HPP
// ---- end ddp/detail/gloo/communicator.hpp ----
// ---- begin ddp/process_group.hpp ----
// ddp::process_group<Backend> and ddp::init_process_group<Backend>().
#ifndef DDP_PROCESS_GROUP_HPP
#define DDP_PROCESS_GROUP_HPP

// ---- begin ddp/detail/backend/staged_collectives.hpp ----
// The interface process_group<B> uses for device tensors when its backend
// takes host memory only (ddp::gloo): each collective is staged through host
// memory and blocks until the result is back in device memory. No CUDA here:
// the implementation (detail/cuda/pinned_staging.hpp) is compiled in where
// DDP_WITH_CUDA is defined, and process_group's layout does not depend on it.
#ifndef DDP_DETAIL_BACKEND_STAGED_COLLECTIVES_HPP
#define DDP_DETAIL_BACKEND_STAGED_COLLECTIVES_HPP


#include <cstddef>

DDP_BEGIN_NAMESPACE
namespace detail {

class staged_collectives {
public:
  virtual ~staged_collectives() = default;
  virtual void all_reduce(void* data, std::size_t n, dtype dt, op o) = 0;
  virtual void broadcast(void* data, std::size_t n, dtype dt, int root) = 0;
  /// `in`: n elements; `out`: n x world size.
  virtual void all_gather(const void* in, void* out, std::size_t n, dtype dt) = 0;
  /// `in`: n x world size elements; `out`: n.
  virtual void reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o) = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_STAGED_COLLECTIVES_HPP
// ---- end ddp/detail/backend/staged_collectives.hpp ----
// ---- begin ddp/detail/common/failure_note.hpp ----
// Tells the launcher that this rank fails on its own, before it tells its
// peers. ddprun sets DDP_FAILURE_FILE to one file shared by its ranks; a rank
// leaving on an error of its own appends "<unix ns> <rank> <reason>" (one
// write under PIPE_BUF with O_APPEND: lines never interleave). The peers then
// fail a moment later, and may even exit first; the timestamps let ddprun
// report the rank that failed first, not the one that exited first (the idea
// of torchrun's TORCHELASTIC_ERROR_FILE).
#ifndef DDP_DETAIL_COMMON_FAILURE_NOTE_HPP
#define DDP_DETAIL_COMMON_FAILURE_NOTE_HPP


#include <chrono>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {

inline void note_failure_for_launcher(int rank, std::string_view reason) noexcept {
  try {
    auto path = getenv_str("DDP_FAILURE_FILE");
    if (!path || path->empty()) return;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    std::string line = std::to_string(ns) + " " + std::to_string(rank) + " ";
    for (char c : reason.substr(0, 400))
      line += c == '\n' ? ' ' : c;
    line += '\n';
    int fd = ::open(path->c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    [[maybe_unused]] auto w = ::write(fd, line.data(), line.size());
    ::close(fd);
  } catch (...) {}
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_FAILURE_NOTE_HPP
// ---- end ddp/detail/common/failure_note.hpp ----
// ---- begin ddp/detail/common/log.hpp ----
// Diagnostics on stderr, gated by DDP_DEBUG (OFF | INFO | DETAIL). Warnings
// (refused connections, teardown trouble) are always printed.
#ifndef DDP_DETAIL_COMMON_LOG_HPP
#define DDP_DETAIL_COMMON_LOG_HPP


#include <cstdio>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class debug_level { off = 0, info = 1, detail = 2 };

inline debug_level parse_debug_level(std::string_view v) {
  if (v.empty() || v == "OFF" || v == "off" || v == "0") return debug_level::off;
  if (v == "INFO" || v == "info" || v == "1") return debug_level::info;
  if (v == "DETAIL" || v == "detail" || v == "2") return debug_level::detail;
  throw error(error_kind::config,
              "environment variable DDP_DEBUG='" + std::string(v) + "' is not one of OFF, INFO, DETAIL");
}

/// DDP_DEBUG, read once per process.
inline debug_level debug() {
  static const debug_level level = parse_debug_level(getenv_str("DDP_DEBUG").value_or(""));
  return level;
}

inline void log_line(std::string_view who, std::string_view text) {
  std::string line = "[ddp";
  if (!who.empty()) line.append(" ").append(who);
  line.append("] ").append(text).append("\n");
  std::fwrite(line.data(), 1, line.size(), stderr); // one write: lines do not interleave
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_LOG_HPP
// ---- end ddp/detail/common/log.hpp ----
// ---- begin ddp/detail/common/open_files.hpp ----
// The open-files limit (RLIMIT_NOFILE) a job needs, raised before it is hit.
//
// A rank holds one descriptor per Gloo peer, and the store's server two per
// rank, so a large job runs into the usual soft limit of 1024: about 340 ranks
// where rank 0 serves the store. Running out there shows as the store pausing
// its accepts and every rank timing out in its handshake, a full DDP_TIMEOUT
// later (docs/design-notes.md, "Note [open files]").
// Like the Go runtime and the JVM, ddp raises the soft limit to the hard one
// when it needs more (the soft limit of 1024 exists for select(), which ddp
// does not use); when even the hard limit is too low it fails at once and
// says how to raise it.
#ifndef DDP_DETAIL_COMMON_OPEN_FILES_HPP
#define DDP_DETAIL_COMMON_OPEN_FILES_HPP


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/resource.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Descriptors this process has open now (/proc/self/fd; 16 where that cannot be read).
inline long open_files_in_use() {
  std::error_code ec;
  long n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec))
    ++n;
  return ec || n == 0 ? 16 : n - 1; // less the iterator's own descriptor
}

/// Wanted free beyond the estimate, for the program's own files (checkpoints,
/// data, logs). A hard limit that leaves less is a warning, not an error.
inline constexpr long open_files_headroom = 32;

/// What a process of the job will hold at its peak, by owner, for the
/// estimate and for the message when the limit cannot cover it. needed()
/// is the estimate, wanted() adds what should stay spare.
struct open_files_need {
  long in_use = 0;       ///< open already (the program's own)
  long backend = 0;      ///< the backend's connections (Gloo: one per peer)
  long store_server = 0; ///< served here: two connections per rank
  long store_client = 0; ///< this process's own store connections
  long launcher = 0;     ///< ddprun: the ranks' output pipes
  /// Kept free: the program's own files, and where the store is served, the
  /// reserve below which its server pauses accepting (store_fd_reserve).
  long spare = open_files_headroom;

  long needed() const { return in_use + backend + store_server + store_client + launcher; }
  long wanted() const { return needed() + spare; }

  std::string breakdown() const {
    std::string s = std::to_string(in_use) + " open already";
    auto part = [&](long n, const char* what) {
      if (n > 0) s += ", " + std::to_string(n) + " " + what;
    };
    part(backend, "for the backend's connections");
    part(store_server, "for the store served here (two per rank)");
    part(store_client, "for this process's store connections");
    part(launcher, "for the ranks' output");
    return s;
  }
};

/// The store's server: its listener, its wake-up pipe, two connections per rank.
inline long store_server_open_files(int world) { return 3 + 2L * world; }

/// The most the kernel lets a soft limit rise to when the hard one is unlimited.
inline rlim_t kernel_open_files_max() {
  std::ifstream f("/proc/sys/fs/nr_open");
  unsigned long long n = 0;
  return f >> n && n > 0 ? static_cast<rlim_t>(n) : rlim_t{1} << 20;
}

/// Makes RLIMIT_NOFILE cover `need`: a soft limit below the need with its
/// spare is raised to the hard one. A hard limit below the need itself is a
/// config error naming `who`, the job (`job`: "a job of 400 ranks"), the parts
/// of the need and how to raise the limit; one that covers the need but not
/// the spare is a warning (the job runs, the program's own files may not open).
inline void ensure_open_files(const open_files_need& need, const std::string& who, const std::string& job) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return; // nothing to learn: let the job try
  const long must = need.needed(), want = need.wanted();
  auto covers = [](rlim_t v, long n) { return v == RLIM_INFINITY || v >= static_cast<rlim_t>(n); };
  if (covers(lim.rlim_cur, want)) return;
  const std::string limit = lim.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_max);
  const std::string how =
      "Raise it to " + std::to_string(want) + " (" + std::to_string(need.spare) +
      " to spare) where the job starts: `ulimit -n " + std::to_string(want) +
      "` in the job script (above the hard limit as root), `nofile` in "
      "/etc/security/limits.conf, LimitNOFILE= in a systemd unit, or `docker run --ulimit "
      "nofile=" +
      std::to_string(want) + "`";
  const std::string needs = who + ": " + job + " needs about " + std::to_string(must) +
                            " open files in this process (" + need.breakdown() + ")";
  if (!covers(lim.rlim_max, must))
    throw error(error_kind::config,
                needs + ", but its hard open-files limit (RLIMIT_NOFILE) is " + limit + ". " + how);
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_max == RLIM_INFINITY)
    lim.rlim_cur = std::max<rlim_t>(kernel_open_files_max(), static_cast<rlim_t>(want));
  else
    lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
    throw error(error_kind::config, needs + "; raising the soft open-files limit from " +
                                        std::to_string(before) + " to " + std::to_string(lim.rlim_cur) +
                                        " failed (" + std::strerror(errno) + "). " + how);
  if (!covers(lim.rlim_cur, want))
    log_line(who, "warning: the open-files limit " + std::to_string(lim.rlim_cur) + " leaves " +
                      std::to_string(static_cast<long>(lim.rlim_cur) - must) + " spare beyond the about " +
                      std::to_string(must) + " that " + job + " needs in this process (" + need.breakdown() +
                      "): files the program opens may fail. " + how);
  else if (debug() >= debug_level::info)
    log_line(who, "raised the soft open-files limit from " + std::to_string(before) + " to " +
                      std::to_string(lim.rlim_cur) + ": " + job + " needs about " + std::to_string(must) +
                      " (" + need.breakdown() + ")");
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_OPEN_FILES_HPP
// ---- end ddp/detail/common/open_files.hpp ----
// ---- begin ddp/detail/process_group/make_rendezvous.hpp ----
// Turns init_options and the launcher's topology into a rendezvous: the
// checked rank and world size, the init method, the token, the open-files
// check, and (for env:// and tcp://) the joined store every rank arrived at.
#ifndef DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_HPP
#define DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_HPP


#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Tells ddprun's failure note and the store that `rank` fails on an error of
/// its own, so that peers waiting for it fail now, naming it and `reason`.
/// Peers read "rank R failed: <reason>": a leading "rank R: " goes.
DDP_INLINE void report_own_failure(tcp_store& store, int rank, std::string_view why) noexcept;

/// The rendezvous of init_process_group. `backend_files`: the descriptors the
/// backend's connections take (its communicator's open_files(topology), where
/// it has one).
DDP_INLINE ddp::rendezvous make_rendezvous(const init_options& o,
                                           long (*backend_files)(const ddp::topology&) = nullptr);

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_HPP
// ---- end ddp/detail/process_group/make_rendezvous.hpp ----
// ---- begin ddp/detail/process_group/peer_failure_relay.hpp ----
// Where the peer-failure watch's news goes. The watch starts before the
// communicator (so that a rank failing while the connections form stops the
// others' waits: detail/fault/connect_interrupt.hpp); until the communicator
// exists, a failure interrupts its connect and is kept; once it exists, the
// kept failure, or a later one, goes to its fail_for_peer.
#ifndef DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_RELAY_HPP
#define DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_RELAY_HPP


#include <memory>
#include <mutex>
#include <optional>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Communicator> class peer_failure_relay {
public:
  /// What the communicator's connect registers its stop with (rendezvous::interrupt).
  std::shared_ptr<connect_interrupt> connecting() const { return connecting_; }

  /// The watch's news (from its thread, once).
  void deliver(const lost_rank& lost) {
    std::lock_guard lock(mu_);
    if (comm_) {
      comm_->fail_for_peer(lost);
      return;
    }
    kept_ = lost;
    connecting_->interrupt(lost.rank, lost.rank >= 0
                                          ? "the store reports rank " + std::to_string(lost.rank) + " lost"
                                          : lost.reason); // the reason: in the error
  }

  /// The communicator exists: a failure heard while it connected reaches it now.
  void attach(Communicator& comm) {
    std::lock_guard lock(mu_);
    comm_ = &comm;
    if (kept_) comm_->fail_for_peer(*kept_);
  }

private:
  std::mutex mu_;
  std::shared_ptr<connect_interrupt> connecting_ = std::make_shared<connect_interrupt>();
  Communicator* comm_ = nullptr;
  std::optional<lost_rank> kept_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_RELAY_HPP
// ---- end ddp/detail/process_group/peer_failure_relay.hpp ----
// ---- begin ddp/detail/process_group/peer_failure_watch.hpp ----
// Hears of a failed rank from the store, while the group lives, for the ranks
// that a collective's own connections would not tell: a rank that crashed,
// or gave up with process_group::abort, is recorded in the store at once
// (its dropped connection, or its report), but
//   - over TCP a rank waiting on a third rank learns nothing: Gloo reports a
//     closed connection only to operations posted on it (docs/design-notes.md,
//     "Note [peer failure watch]");
//   - over NCCL no peer learns anything until its own deadline.
// So one thread per group blocks in a store wait for the lost-rank key, on a
// connection of its own (the group's client stays free for its requests),
// and hands the first lost rank to the communicator once; a store that
// vanishes is rank 0's loss when rank 0 served it. The store answers a
// wait as soon as the key appears: no polling, nothing on the wire meanwhile.
#ifndef DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_WATCH_HPP
#define DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_WATCH_HPP


#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

class peer_failure_watch {
public:
  /// `on_failure(lost)` runs on the watch's thread, at most once, for a rank
  /// other than `self` (this rank's own failure is this rank's business), or
  /// with rank -1 when the launcher serving the store is gone.
  /// Connects at once, within connect_timeout at most: throws what tcp_store
  /// throws when the store is gone or takes no more connections.
  peer_failure_watch(const tcp_store& store, int self, std::function<void(const lost_rank&)> on_failure)
      : conn_(store.connect_again(std::min(store.timeout(), connect_timeout))), self_(self),
        on_failure_(std::move(on_failure)), thread_([this] { run(); }) {}

  /// A store that takes no connection more within this long is out of
  /// descriptors or overloaded (it sheds pending handshakes): the group goes
  /// on without the watch rather than wait out the store's timeout.
  static constexpr std::chrono::milliseconds connect_timeout{10000};

  peer_failure_watch(const peer_failure_watch&) = delete;
  peer_failure_watch& operator=(const peer_failure_watch&) = delete;
  ~peer_failure_watch() { stop(); }

  /// Returns once the callback cannot run any more (it may be running now:
  /// then after it returned). Never from the callback itself.
  void stop() noexcept {
    stopping_ = true;
    conn_->shutdown_connection(); // wakes the wait at once
    if (thread_.joinable()) thread_.join();
  }

private:
  void run() noexcept {
    try {
      while (!stopping_) {
        // A long wait, repeated: the store answers the moment the key appears.
        if (!conn_->try_wait({store_lost_key}, conn_->timeout())) continue;
        auto lost = conn_->wait_for_lost_rank(std::chrono::milliseconds(0));
        if (!stopping_ && lost && lost.rank != self_) on_failure_(lost);
        return;
      }
    } catch (...) {
      if (stopping_) return;
      // The store vanished or went silent: when rank 0 serves it, rank 0 died
      // or stopped (with NCCL nothing else would tell this rank before its
      // deadline); when ddprun serves it, the launcher died without stopping
      // its ranks (SIGKILL, the OOM killer), and nobody else will end this one.
      try {
        auto lost = conn_->wait_for_lost_rank(std::chrono::milliseconds(0));
        if (lost ? lost.rank != self_ : !lost.reason.empty()) on_failure_(lost);
      } catch (...) {}
    }
  }

  std::unique_ptr<tcp_store> conn_;
  int self_;
  std::function<void(const lost_rank&)> on_failure_;
  std::atomic<bool> stopping_{false};
  std::thread thread_; // last: starts after everything it reads
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_PEER_FAILURE_WATCH_HPP
// ---- end ddp/detail/process_group/peer_failure_watch.hpp ----

#include <algorithm>
#include <chrono>
#include <concepts>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

// Device tensors on a host-only backend are staged through pinned memory where
// ddp is built with CUDA (ddp::cuda and ddp::nccl define these).
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
// ---- begin ddp/detail/cuda/pinned_staging.hpp ----
// process_group<B>'s collectives on device tensors where the backend takes
// host memory only (ddp::gloo): device -> pinned host buffer -> the backend's
// collective -> device. Blocking: the call returns once the result is in
// device memory. PyTorch's Gloo group stages CUDA tensors the same way.
//
// Ordering: the copies run on a stream of this object's own that first waits
// for an event recorded on the legacy default stream at each call, so they
// follow what the legacy stream (and, through it, every blocking stream and a
// per-thread default stream) queued on the device that was current when the
// group staged its first device tensor, before the call, as cudaMemcpy does
// (with one device per rank, the rank's device). Work on a stream created with
// cudaStreamNonBlocking must be finished by the caller. Every wait polls with
// the group's timeout. One pinned buffer, grown to the largest collective and
// kept: page-locked copies run several times faster than pageable ones
// (docs/performance.md, On a GPU).
//
// Copies use cudaMemcpyDefault (unified addressing), so a collective that
// mixes host and device tensors (all_gather of a host vector into a
// device_span) stages both the same way. The event recorded on the legacy
// stream invalidates a CUDA graph capture in global mode, as NCCL's does.
#ifndef DDP_DETAIL_CUDA_PINNED_STAGING_HPP
#define DDP_DETAIL_CUDA_PINNED_STAGING_HPP

// ---- begin ddp/detail/cuda/runtime.hpp ----
// Small owners of CUDA runtime objects (device and pinned buffers, streams,
// events), the one place CUDA return codes become ddp::errors, and host waits
// with a deadline. Host code here never dereferences device memory.
#ifndef DDP_DETAIL_CUDA_RUNTIME_HPP
#define DDP_DETAIL_CUDA_RUNTIME_HPP


#include <cuda.h> // types only (CUresult, CUdevice): driver calls go through cudaGetDriverEntryPoint
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// Turns a CUDA return code into a ddp::error naming the call and what to do.
inline void check(cudaError_t e, const char* call, int rank = -1) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); // clear the sticky non-fatal error so later calls report their own
  throw error(
      error_kind::backend,
      (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + call +
          " failed: " + cudaGetErrorString(e) +
          " (check that a CUDA device is visible and that the device pointers given to ddp (gradients, "
          "device_span tensors) belong to this process's device)",
      rank);
}

/// The calling thread's current device.
inline int current_device(int rank = -1) {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice", rank);
  return d;
}

/// The current device, or -1 where it cannot be read (noexcept: for owners
/// that remember where they were created).
inline int current_device_or_none() noexcept {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

/// Whether `device`'s primary context exists. Switching a thread back to a
/// device without one would create it (cudaSetDevice initialises the context
/// since CUDA 12): hundreds of MiB on a GPU this process never used, for every
/// rank of a node whose own GPU is not device 0 (threads start on device 0).
/// PyTorch's MaybeSetDevice makes the same check. The runtime has no such call:
/// the driver's cuDevicePrimaryCtxGetState is fetched through the runtime
/// (cudaGetDriverEntryPointByVersion, or cudaGetDriverEntryPoint before CUDA
/// 12.5), so nothing links libcuda. When it cannot
/// be asked (an old driver): true, and callers restore as before.
inline bool primary_context_active(int device) noexcept {
  using device_get = CUresult (*)(CUdevice*, int);
  using state_get = CUresult (*)(CUdevice, unsigned int*, int*);
  struct driver {
    device_get get = nullptr;
    state_get state = nullptr;
  };
  static const driver fns = [] {
    driver d;
    auto fetch = [](const char* name) -> void* {
      void* fn = nullptr;
#if CUDART_VERSION >= 12050
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess)
        fn = nullptr;
#else
      // Before 12.5, which added ByVersion and deprecated this form: both
      // functions are the same in every CUDA the runtime can be built for.
      if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) fn = nullptr;
#endif
      cudaGetLastError();
      return fn;
    };
    d.get = reinterpret_cast<device_get>(fetch("cuDeviceGet"));
    d.state = reinterpret_cast<state_get>(fetch("cuDevicePrimaryCtxGetState"));
    return d;
  }();
  if (!fns.get || !fns.state) return true;
  CUdevice handle{};
  unsigned int flags = 0;
  int active = 1;
  if (fns.get(&handle, device) != CUDA_SUCCESS || fns.state(handle, &flags, &active) != CUDA_SUCCESS)
    return true;
  return active != 0;
}

/// Makes `device` the calling thread's current device for its lifetime, then
/// restores the one it found (ddp's objects live on one device; a user thread
/// may have switched to another since), unless that one has no context yet:
/// restoring would create one (primary_context_active).
class device_guard {
public:
  device_guard(int device, int rank = -1) {
    const int was = current_device(rank);
    if (was == device) return;
    check(cudaSetDevice(device), "cudaSetDevice", rank);
    if (primary_context_active(was)) restore_ = was;
  }
  /// For destructors: never throws. Where `device` (-1: unknown) cannot be made
  /// current (no driver left at exit, an invalid id) nothing changes, and the
  /// destroy call that follows reports into the void as before. Only this
  /// guard's own failures are cleared: a recoverable error the user's code has
  /// not read yet (a launch it queued) stays for the user to read.
  device_guard(int device, std::nothrow_t) noexcept {
    const int was = current_device_or_none();
    if (device < 0 || was < 0 || was == device) return;
    if (cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (primary_context_active(was)) restore_ = was;
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    if (restore_ >= 0) cudaSetDevice(restore_);
  }

private:
  int restore_ = -1;
};

// The owners below remember the device current at their creation and make it
// current again to free what they own: an object may be destroyed on a thread
// or after a guard that left another device current (a process driving
// several GPUs), and a stream or event belongs to its device's context.

/// Device memory, allocated once and kept.
class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaMalloc (a device bucket buffer)") {
    if (bytes) check(cudaMalloc(&p_, bytes), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~device_buffer() {
    if (!p_) return;
    device_guard on(device_, std::nothrow);
    cudaFree(p_);
  }
  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

/// Page-locked host memory (cudaHostAlloc): copies to and from the device run
/// several times faster than from pageable memory (docs/performance.md, On a
/// GPU). Allocated once and kept across steps.
class pinned_buffer {
public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaHostAlloc (a pinned staging buffer)") {
    if (bytes) check(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  pinned_buffer(pinned_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~pinned_buffer() {
    if (!p_) return;
    // Portable memory frees from any context, but a thread that never used CUDA
    // would create one on device 0 for the call (PyTorch guards its event
    // destructor for the same stray context).
    device_guard on(device_, std::nothrow);
    cudaFreeHost(p_);
  }
  std::byte* get() const noexcept { return static_cast<std::byte*>(p_); }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

class stream {
public:
  explicit stream(int rank = -1) {
    check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (!s_) return;
    device_guard on(device_, std::nothrow);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const noexcept { return s_; }

private:
  cudaStream_t s_ = nullptr;
  int device_ = -1;
};

class event {
public:
  explicit event(int rank = -1) {
    check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)), device_(o.device_) {}
  event& operator=(event&& o) noexcept {
    std::swap(e_, o.e_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~event() {
    if (!e_) return;
    device_guard on(device_, std::nothrow);
    cudaEventDestroy(e_);
  }
  cudaEvent_t get() const noexcept { return e_; }

private:
  cudaEvent_t e_ = nullptr;
  int device_ = -1;
};

/// Events reused instead of created and destroyed for each use (microseconds
/// of host time each, per collective). An acquired event is its holder's alone
/// until released: no other record can move the point its waiters wait for.
class event_pool {
public:
  explicit event_pool(int rank = -1) : rank_(rank) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  /// A free event, or a new one on the current device (callers make the
  /// pool's device current: its events belong there).
  cudaEvent_t acquire() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        const cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    event fresh(rank_); // outside the lock: creating one takes microseconds
    const cudaEvent_t e = fresh.get();
    std::lock_guard lock(mu_);
    free_.reserve(all_.size() + 1); // so that release() never allocates
    all_.push_back(std::move(fresh));
    return e;
  }

  /// Gives back an event acquire() returned; a record still pending on it is
  /// fine (the next holder records it anew). One never given back (a job
  /// dropped when its group failed) stays owned here.
  void release(cudaEvent_t e) noexcept {
    std::lock_guard lock(mu_);
    free_.push_back(e);
  }

  /// How many events the pool created: as many as were in use at once, not one per use.
  std::size_t created() const {
    std::lock_guard lock(mu_);
    return all_.size();
  }

private:
  int rank_;
  mutable std::mutex mu_;
  std::vector<event> all_;
  std::vector<cudaEvent_t> free_;
};

/// Makes `waiter` wait (on the device) for what is queued on `producer` so far.
inline void order_after(cudaStream_t waiter, cudaStream_t producer, cudaEvent_t scratch, int rank) {
  check(cudaEventRecord(scratch, producer), "cudaEventRecord", rank);
  check(cudaStreamWaitEvent(waiter, scratch, 0), "cudaStreamWaitEvent", rank);
}

/// Waits on the host for everything queued on `s`, polling until `timeout`:
/// a stream that never drains (a kernel stuck, a user stream that waits
/// forever) is a timeout error naming `what`, never a hang.
inline void wait_stream(cudaStream_t s, std::chrono::milliseconds timeout, const std::string& what,
                        int rank) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, ("cudaStreamQuery (" + what + ")").c_str(), rank);
    if (std::chrono::steady_clock::now() > deadline)
      throw error(error_kind::timeout,
                  "rank " + std::to_string(rank) + ": " + what + " did not finish on the GPU within " +
                      std::to_string(timeout.count()) +
                      " ms (a kernel stuck, or a stream it follows blocked: the compute stream given to "
                      "ddp_options, or the legacy default stream)",
                  rank);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// How many CUDA devices this process sees (0 where the driver or a GPU is missing).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_RUNTIME_HPP
// ---- end ddp/detail/cuda/runtime.hpp ----

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// `Comm`: a ddp::communicator on host memory (process_group checks it).
template <class Comm> class pinned_staging final : public staged_collectives {
public:
  /// `fail_group(why)`: fails the group at once, noexcept (a staging copy
  /// failed before its collective; see copy()).
  pinned_staging(Comm& comm, std::function<void(const std::string&)> fail_group)
      : comm_(comm), fail_group_(std::move(fail_group)), device_(current_device(comm.rank())),
        stream_(comm.rank()), after_legacy_(comm.rank()) {}

  void all_reduce(void* data, std::size_t n, dtype dt, op o) override {
    const std::size_t bytes = n * size_of(dt);
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(bytes);
    copy(h, data, bytes, "all_reduce", before_collective);
    await(comm_.all_reduce(h, n, dt, o, true));
    copy(data, h, bytes, "all_reduce", after_collective);
  }

  void broadcast(void* data, std::size_t n, dtype dt, int root) override {
    const std::size_t bytes = n * size_of(dt);
    const bool is_root = comm_.rank() == root;
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(bytes);
    if (is_root) copy(h, data, bytes, "broadcast", before_collective);
    await(comm_.broadcast(h, n, dt, root, true));
    if (!is_root) copy(data, h, bytes, "broadcast", after_collective);
  }

  void all_gather(const void* in, void* out, std::size_t n, dtype dt) override {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(comm_.size());
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(total + bytes); // [0, total): the result; then this rank's input
    copy(h + total, in, bytes, "all_gather", before_collective);
    await(comm_.all_gather(h + total, h, n, dt, true));
    copy(out, h, total, "all_gather", after_collective);
  }

  void reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o) override {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(comm_.size());
    std::lock_guard lock(mu_);
    refuse_if_failed();
    std::byte* h = pinned(total + bytes); // [0, total): the input; then this rank's block
    copy(h, in, total, "reduce_scatter", before_collective);
    await(comm_.reduce_scatter(h, h + total, n, dt, o, true));
    copy(out, h + total, bytes, "reduce_scatter", after_collective);
  }

private:
  /// Which side of the host collective a copy is on.
  enum class phase : bool { before, after };
  static constexpr phase before_collective = phase::before, after_collective = phase::after;

  /// A group that failed (here or in a collective) refuses at once, before any copy.
  void refuse_if_failed() const {
    if (auto failed = comm_.poisoned()) std::rethrow_exception(failed);
  }

  /// Waits for the host collective on the pinned buffer. When the wait gives up
  /// (its own deadline) the collective may still be queued or running on the
  /// group's thread and write the buffer later: it is retired, not freed or
  /// reused, until this object goes (after the communicator stopped).
  void await(work w) {
    try {
      w.wait();
    } catch (...) {
      retire();
      throw;
    }
  }
  void retire() {
    retired_.push_back(std::move(buffer_));
    buffer_ = pinned_buffer();
  }

  /// At least `bytes` of pinned memory (never null: a 0-element collective
  /// still passes a valid pointer). Nothing is in flight when it grows.
  std::byte* pinned(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 64);
    if (buffer_.bytes() < bytes) {
      buffer_ = pinned_buffer(); // free the old one first: the two need not fit at once
      buffer_ = pinned_buffer(bytes, comm_.rank());
    }
    return buffer_.get();
  }

  /// One copy on the staging stream, waited for with the group's deadline. A
  /// copy that failed or timed out may still be queued: its buffer is retired.
  /// Before the collective, the peers are (or will be) waiting for this rank
  /// in it: the group is failed at once (fail_group_: the store names this rank
  /// and why, connections close), so they fail now, not at their timeout; that
  /// may wait, bounded by the group's timeout, for a collective this rank
  /// submitted earlier to end. After the collective nobody waits: the error is
  /// this rank's alone, and a stuck device fails the next staged call's first copy.
  void copy(void* dst, const void* src, std::size_t bytes, const char* collective, phase when) {
    if (bytes == 0) return;
    const int rank = comm_.rank();
    const std::string what = std::string(collective) + " of a device tensor on a host backend (" +
                             (when == phase::before ? "to" : "from") + " pinned memory, " +
                             std::to_string(bytes) + " B)";
    try {
      device_guard on(device_, rank); // the stream, the event and the legacy stream of one device
      order_after(stream_.get(), cudaStreamLegacy, after_legacy_.get(), rank);
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_.get()),
            ("cudaMemcpyAsync: " + what).c_str(), rank);
      wait_stream(stream_.get(), comm_.timeout(), what, rank);
    } catch (const error& e) {
      if (when == phase::before)
        fail_group_(what + " failed before its collective: " + std::string(e.message()));
      retire();
      throw;
    } catch (...) {
      if (when == phase::before) fail_group_(what + " failed before its collective");
      retire();
      throw;
    }
  }

  Comm& comm_;
  std::function<void(const std::string&)> fail_group_;
  int device_; ///< current at construction; stream_ and after_legacy_ belong to it
  stream stream_;
  event after_legacy_; ///< re-recorded per copy: each copy is waited for before the next
  pinned_buffer buffer_;
  std::vector<pinned_buffer> retired_; ///< buffers a collective may still write (see await)
  std::mutex mu_;                      ///< one staged collective at a time per group (they share buffer_)
};

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_PINNED_STAGING_HPP
// ---- end ddp/detail/cuda/pinned_staging.hpp ----
#define DDP_DETAIL_PINNED_STAGING 1
#endif

DDP_BEGIN_NAMESPACE

template <class Backend> class process_group {
  static_assert(backend_policy<Backend>,
                "ddp: process_group<B> needs a backend policy such as ddp::gloo or ddp::nccl: a type with "
                "`static constexpr std::string_view name` and `using communicator = ...;` naming a type that "
                "models ddp::communicator (see ddp/backend/communicator.hpp).");

public:
  using backend_type = Backend;

  /// Prefer init_process_group<Backend>(); this connects from a prepared rendezvous.
  explicit process_group(rendezvous rv);

  process_group(const process_group&) = delete;
  process_group& operator=(const process_group&) = delete;
  process_group(process_group&&) = delete;

  /// Finishes queued collectives, then leaves in step with the other ranks:
  /// rank 0 serves the store, so it waits (bounded) until every rank is done with it.
  ///
  /// Unless this rank is leaving on an error of its own (an exception escaping
  /// while the group is healthy): then the exit barrier would hold every peer
  /// blocked in a collective until its timeout
  /// (docs/design-notes.md, "Note [leaving on an error]"). Instead it tells
  /// the launcher and the store that it failed, then closes its connections,
  /// so its peers fail within a second and name it.
  ~process_group();

  int rank() const noexcept { return topo_.rank; }
  int size() const noexcept { return topo_.world_size; }
  const ddp::topology& topology() const noexcept { return topo_; }
  std::chrono::milliseconds timeout() const { return comm_->timeout(); }
  /// The job's store (null with file:// init).
  tcp_store* store() const noexcept { return store_.get(); }
  typename Backend::communicator& communicator() noexcept { return *comm_; }

  /// Reduces `t` across ranks in place. `t` must stay alive until the work completes.
  ///
  /// Device tensors (ddp::device_span) go to a device backend (ddp::nccl) as
  /// they are. On a host backend (ddp::gloo) the blocking forms stage them
  /// through a pinned host buffer and return once the result is back in device
  /// memory; the copies follow the legacy default stream (like cudaMemcpy).
  /// Needs ddp built with CUDA (link ddp::cuda). The _async forms refuse them
  /// there at compile time: distributed_data_parallel overlaps the staging of
  /// device gradients with backward instead.
  template <class T> work all_reduce_async(T& t, op o = op::sum) {
    require_async_allowed<T>();
    return all_reduce_impl(t, o, false);
  }
  template <class T> void all_reduce(T& t, op o = op::sum) { all_reduce_impl(t, o, true).wait(); }

  /// Copies rank `root`'s `t` into every rank's `t`.
  template <class T> work broadcast_async(T& t, int root = 0) {
    require_async_allowed<T>();
    return broadcast_impl(t, root, false);
  }
  template <class T> void broadcast(T& t, int root = 0) { broadcast_impl(t, root, true).wait(); }

  /// `out` (size() * in.size() elements) receives every rank's `in`, in rank order.
  template <class In, class Out> work all_gather_async(const In& in, Out& out) {
    require_async_allowed<const In, Out>();
    return all_gather_impl(in, out, false);
  }
  template <class In, class Out> void all_gather(const In& in, Out& out) {
    all_gather_impl(in, out, true).wait();
  }

  /// Rank r receives in `out` the reduction of block r (out.size() elements) of every rank's `in`.
  template <class In, class Out> work reduce_scatter_async(const In& in, Out& out, op o = op::sum) {
    require_async_allowed<const In, Out>();
    return reduce_scatter_impl(in, out, o, false);
  }
  template <class In, class Out> void reduce_scatter(const In& in, Out& out, op o = op::sum) {
    reduce_scatter_impl(in, out, o, true).wait();
  }

  /// `n` zeroed elements of host memory that every rank of this node can see
  /// (ddp/shm_array.hpp): an all_reduce of a range inside it runs in place,
  /// without copies through the node's segment. Collective: every rank calls
  /// it, in the same order, with the same n and T. ddp::gloo only.
  template <class T> [[nodiscard]] shm_array<T> make_shm_array(std::size_t n) {
    if constexpr (!element<T>) {
      static_assert(element<T>, "ddp: make_shm_array<T> needs an element type the collectives reduce "
                                "(float, double, ddp::half, std::int32_t, ...): make one array per field");
      return {};
    } else if constexpr (shm_communicator<typename Backend::communicator>) {
      return comm_->template make_shm_array<T>(n);
    } else {
      static_assert(sizeof(T) == 0, "ddp: make_shm_array is a feature of ddp::gloo (host memory shared by "
                                    "the ranks of a node); this backend has none");
      return {};
    }
  }

  work barrier_async() { return comm_->barrier(false); }
  void barrier() { comm_->barrier(true).wait(); }

  /// This rank cannot go on, for a reason of its own (bad data, a failed
  /// device copy): instead of letting its peers wait for it until their
  /// timeout, the launcher and the store are told, and the communicator
  /// (ddp::gloo closes its connections, ddp::nccl aborts its communicator). A
  /// collective running here fails at once with the same error; so does every
  /// later one; teardown skips the exit barrier. The peers fail within a
  /// second, naming this rank and `reason`: their groups watch the store
  /// (detail::peer_failure_watch). distributed_data_parallel calls it when its
  /// own work before a collective fails. Does nothing once the group has
  /// failed.
  void abort(std::string_view reason) noexcept;

private:
  /// Another rank's failure, as the store records it, fails this group at
  /// once (see peer_failure_watch.hpp), or its connect while the communicator
  /// is being built (peer_failure_relay.hpp). The group works without the watch.
  void start_peer_watch();

  /// A rank whose communicator could not connect for a reason of its own (a
  /// peer's address it cannot reach, a device it cannot make) tells the store
  /// before it throws: its peers, waiting for its connections, then stop at
  /// once and name it (peer_failure_relay.hpp) instead of waiting DDP_TIMEOUT
  /// (docs/design-notes.md, "Note [failure during connect]").
  /// Its exception going out unwinds the store's client, which says goodbye:
  /// without the report, nobody would hear of the failure. Not reported: a
  /// failure for another rank's loss (peer_lost), a timeout (the rank waited
  /// for is to blame), or any failure once the store knows of a lost rank
  /// (this rank's is then likely its consequence: the rank that failed first
  /// reports after a grace of its own, detail/gloo/blame.hpp's find_lost_rank).
  void report_failed_connect(const std::exception& e) noexcept;

  void leave_on_own_failure() noexcept;

  /// This rank failed on its own, outside the group's collectives: the
  /// launcher, the store (peers then name this rank and `reason` within a
  /// second) and every connection (peers blocked on this rank fail now) are
  /// told; the group refuses later collectives. Not a teardown: the caller
  /// decides what happens to the group object.
  void fail_job(const std::string& reason, const char* what_happened) noexcept;

  template <class T> work all_reduce_impl(T& t, op o, bool blocking) {
    if constexpr (usable<T>()) {
      auto s = as_span(t);
      if constexpr (staged<T>()) {
        staging().all_reduce(s.data(), s.size(), dtype_v<tensor_value_t<T>>, o);
        return {};
      } else {
        return in_space<T>([&](auto... where) {
          return comm_->all_reduce(where..., s.data(), s.size(), dtype_v<tensor_value_t<T>>, o, blocking);
        });
      }
    } else {
      return {};
    }
  }

  template <class T> work broadcast_impl(T& t, int root, bool blocking) {
    if constexpr (usable<T>()) {
      check_root(root, "broadcast");
      auto s = as_span(t);
      if constexpr (staged<T>()) {
        staging().broadcast(s.data(), s.size(), dtype_v<tensor_value_t<T>>, root);
        return {};
      } else {
        return in_space<T>([&](auto... where) {
          return comm_->broadcast(where..., s.data(), s.size(), dtype_v<tensor_value_t<T>>, root, blocking);
        });
      }
    } else {
      return {};
    }
  }

  template <class In, class Out> work all_gather_impl(const In& in, Out& out, bool blocking) {
    if constexpr (usable<const In, Out>()) {
      static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                    "ddp: all_gather needs input and output of the same element type");
      auto i = as_span(in);
      auto o = as_span(out);
      if (o.size() != i.size() * static_cast<std::size_t>(size()))
        throw error(error_kind::config, "all_gather on rank " + std::to_string(rank()) + ": output has " +
                                            std::to_string(o.size()) + " elements, expected world size " +
                                            std::to_string(size()) + " x input " + std::to_string(i.size()));
      if constexpr (staged<const In, Out>()) {
        staging().all_gather(i.data(), o.data(), i.size(), dtype_v<tensor_value_t<Out>>);
        return {};
      } else {
        return in_space<const In, Out>([&](auto... where) {
          return comm_->all_gather(where..., i.data(), o.data(), i.size(), dtype_v<tensor_value_t<Out>>,
                                   blocking);
        });
      }
    } else {
      return {};
    }
  }

  template <class In, class Out> work reduce_scatter_impl(const In& in, Out& out, op o, bool blocking) {
    if constexpr (usable<const In, Out>()) {
      static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                    "ddp: reduce_scatter needs input and output of the same element type");
      auto i = as_span(in);
      auto s = as_span(out);
      if (i.size() != s.size() * static_cast<std::size_t>(size()))
        throw error(error_kind::config, "reduce_scatter on rank " + std::to_string(rank()) + ": input has " +
                                            std::to_string(i.size()) + " elements, expected world size " +
                                            std::to_string(size()) + " x output " + std::to_string(s.size()));
      if constexpr (staged<const In, Out>()) {
        staging().reduce_scatter(i.data(), s.data(), s.size(), dtype_v<tensor_value_t<Out>>, o);
        return {};
      } else {
        return in_space<const In, Out>([&](auto... where) {
          return comm_->reduce_scatter(where..., i.data(), s.data(), s.size(), dtype_v<tensor_value_t<Out>>,
                                       o, blocking);
        });
      }
    } else {
      return {};
    }
  }

  /// True when the tensors of one collective can be used here; otherwise one
  /// static_assert says why (for the first tensor at fault), and the caller
  /// compiles nothing else (no cascade of follow-up errors).
  template <class... T> static constexpr bool usable() {
    if constexpr (!all_tensors<std::remove_reference_t<T>...>()) {
      return false;
    } else {
      constexpr bool ok = accepts_device_tensors_v<Backend> || pinned_staging_available ||
                          !(on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> || ...);
      static_assert(ok, "ddp: this backend (Gloo) works on host memory; a device_span is staged through "
                        "pinned host memory only where ddp is built with CUDA: link ddp::cuda (it defines "
                        "DDP_WITH_CUDA), or use ddp::nccl");
      // The host path of a device backend copies host memory with the CPU, so a
      // device tensor among host ones would be read by the CPU.
      constexpr bool one_space = !ok || !accepts_device_tensors_v<Backend> ||
                                 (on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> && ...) ||
                                 !(on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> || ...);
      static_assert(one_space, "ddp: this backend (NCCL) takes a collective's tensors in one memory space: "
                               "all in device memory (device_span) or all on the host; copy the host side to "
                               "the device first (cudaMemcpyAsync), then call the collective");
      return ok && one_space;
    }
  }
  template <class T, class... Rest> static constexpr bool all_tensors() {
    if constexpr (!tensor<T>) {
      detail::require_tensor<T>(); // its one message
      return false;
    } else if constexpr (sizeof...(Rest) > 0) {
      return all_tensors<Rest...>();
    } else {
      return true;
    }
  }

  static constexpr bool pinned_staging_available =
#ifdef DDP_DETAIL_PINNED_STAGING
      true;
#else
      false;
#endif

  /// Whether a collective of these tensors goes through pinned staging: some
  /// are in device memory and the backend takes host memory only.
  template <class... T> static constexpr bool staged() {
    return !accepts_device_tensors_v<Backend> &&
           (on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> || ...);
  }
  /// Staged collectives block; without CUDA, usable() already said why not.
  template <class... T> static constexpr bool async_allowed() {
    return !pinned_staging_available || !staged<T...>();
  }
  template <class... T> static constexpr void require_async_allowed() {
    static_assert(async_allowed<T...>(),
                  "ddp: on this backend (Gloo) a device tensor's collective is staged through pinned host "
                  "memory and blocks: call the blocking form (all_reduce, not all_reduce_async), or use "
                  "ddp::nccl");
  }

  /// Made on first use (not at construction: that would make a CUDA context
  /// before the user's cudaSetDevice), once even when threads race to it.
  detail::staged_collectives& staging() {
    std::call_once(staged_once_, [this] { staged_ = make_staging(); });
    return *staged_;
  }
  std::unique_ptr<detail::staged_collectives> make_staging();

  /// Calls f(device_memory) when every tensor of the collective is in device
  /// memory, else f(): where memory lives is a compile-time fact, so the
  /// backend never has to ask. (usable() refuses a host/device mix on a device
  /// backend; a host backend stages the mix with cudaMemcpyDefault.)
  template <class... T, class F> static work in_space(F&& f) {
    if constexpr ((on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> && ...))
      return f(device_memory);
    else
      return f();
  }

  void check_root(int root, const char* what) const {
    if (root < 0 || root >= size())
      throw error(error_kind::config, std::string(what) + ": root " + std::to_string(root) +
                                          " is not a rank of this group (0.." + std::to_string(size() - 1) +
                                          ")");
  }

  ddp::topology topo_;
  std::shared_ptr<tcp_store> store_;
  std::unique_ptr<typename Backend::communicator> comm_;
  /// Hands the watch's news to comm_, or to its connect while it is built.
  std::unique_ptr<detail::peer_failure_relay<typename Backend::communicator>> relay_;
  /// Tells comm_ of another rank's failure (peer_failure_communicator); reset before comm_ is.
  std::unique_ptr<detail::peer_failure_watch> peer_watch_;
  std::unique_ptr<detail::staged_collectives> staged_; ///< device tensors on a host backend (lazily)
  std::once_flag staged_once_;
  int uncaught_at_start_ = std::uncaught_exceptions(); // the group is made outside any unwinding, usually
};

template <class Backend>
process_group<Backend>::process_group(rendezvous rv) : topo_(rv.topo), store_(rv.store) {
  start_peer_watch(); // first: a rank failing while the connections form stops this one's waits for it
  if (relay_) rv.interrupt = relay_->connecting();
  try {
    comm_ = std::make_unique<typename Backend::communicator>(rv);
  } catch (const std::exception& e) {
    report_failed_connect(e);
    throw;
  }
  if constexpr (peer_failure_communicator<typename Backend::communicator>)
    if (relay_) relay_->attach(*comm_);
}

template <class Backend> process_group<Backend>::~process_group() {
  if (std::uncaught_exceptions() > uncaught_at_start_ && !comm_->poisoned()) {
    leave_on_own_failure();
    return;
  }
  try {
    comm_->drain();
    peer_watch_.reset(); // before the exit barrier: ranks leaving from here on are not failures
    if (store_ && !comm_->poisoned()) {
      if (store_->add("ddp/exit", 1) >= size()) store_->set("ddp/exit/all", "1");
      if (store_->is_server() &&
          !store_->try_wait({"ddp/exit/all"}, std::min(comm_->timeout(), std::chrono::milliseconds(60000))))
        detail::log_line("rank 0", "not every rank reached process_group teardown; closing the store anyway");
    }
  } catch (const std::exception& e) {
    detail::log_line("rank " + std::to_string(rank()), std::string("teardown: ") + e.what());
  }
  peer_watch_.reset();
  comm_.reset();
  staged_.reset(); // after the communicator: a job whose wait() gave up may still use its buffer
}

template <class Backend> void process_group<Backend>::abort(std::string_view reason) noexcept {
  if (comm_->poisoned()) return;
  fail_job(std::string(reason), "gave up");
}

template <class Backend> void process_group<Backend>::start_peer_watch() {
  if constexpr (peer_failure_communicator<typename Backend::communicator>) {
    if (!store_ || size() == 1) return;
    try {
      auto relay = std::make_unique<detail::peer_failure_relay<typename Backend::communicator>>();
      peer_watch_ = std::make_unique<detail::peer_failure_watch>(
          *store_, rank(), [r = relay.get()](const lost_rank& lost) { r->deliver(lost); });
      relay_ = std::move(relay);
    } catch (const std::exception& e) {
      detail::log_line("rank " + std::to_string(rank()),
                       std::string("warning: no watch for other ranks' failures (") + e.what() +
                           "): a rank that fails reaches this one through its collectives only, over TCP "
                           "possibly at the timeout. Raise the open-file limit (ulimit -n) of the store "
                           "(rank 0, or ddprun on node 0)");
    }
  }
}

template <class Backend>
void process_group<Backend>::report_failed_connect(const std::exception& e) noexcept {
  if (!store_) return;
  const auto* d = dynamic_cast<const ddp::error*>(&e);
  if (d && (d->kind() == error_kind::peer_lost || d->kind() == error_kind::timeout)) return;
  try {
    if (store_->wait_for_lost_rank(std::chrono::milliseconds(0))) return;
    peer_watch_.reset(); // what it would hear now is this rank's own report
    detail::report_own_failure(*store_, rank(), d ? d->message() : std::string_view(e.what()));
    store_->linger_briefly();        // rank 0 serving the store: its peers read the reason, then leave
  } catch (const std::exception&) {} // best effort: the error going out is what matters
}

template <class Backend> void process_group<Backend>::leave_on_own_failure() noexcept {
  fail_job("an exception escaped while its process group was alive (an error of its own, outside ddp's "
           "collectives: see its output)",
           "left the job");
  peer_watch_.reset(); // it calls into the communicator
  comm_.reset();
  staged_.reset();
}

template <class Backend>
void process_group<Backend>::fail_job(const std::string& reason, const char* what_happened) noexcept {
  const std::string who = "rank " + std::to_string(rank());
  detail::note_failure_for_launcher(rank(), reason);
  detail::log_line(who, std::string(what_happened) + " on an error of its own: telling the other ranks");
  try {
    const std::string why = who + " " + what_happened + ": " + reason;
    // Refused first, interrupted last: the store tells the peers, who close
    // their connections, and a collective running here that fails of that
    // must fail with `why`, not name this rank as the peer it lost
    // (docs/design-notes.md, "Note [leaving on an error]"). Interrupting
    // before the store knows left the node's shm peers without a reason to
    // read.
    if constexpr (requires(typename Backend::communicator & c) { c.poison_for_failure(why); })
      comm_->poison_for_failure(why);
    if (store_) {
      store_->report_failure(reason);
      store_->linger_briefly(); // rank 0: its peers read the reason, then leave
    }
    if constexpr (abortable_communicator<typename Backend::communicator>) comm_->abort_for_failure(why);
  } catch (const std::exception& e) { detail::log_line(who, std::string("teardown: ") + e.what()); }
}

template <class Backend> std::unique_ptr<detail::staged_collectives> process_group<Backend>::make_staging() {
#ifdef DDP_DETAIL_PINNED_STAGING
  // A staging copy fails outside the group's collectives: the group is failed
  // at once where the backend can, or the peers would wait in the collective
  // this rank never joins (or left) until their timeout.
  auto fail_group = [this](const std::string& why) { fail_job(why, "failed its part of a collective"); };
  return std::make_unique<detail::cuda::pinned_staging<typename Backend::communicator>>(*comm_, fail_group);
#else
  throw error(error_kind::config, "ddp was built without CUDA: device tensors cannot be staged");
#endif
}

/// Joins the job: rendezvous (env://, tcp://, file://), then the backend connects every pair.
template <class Backend> process_group<Backend> init_process_group(const init_options& o = {}) {
  static_assert(backend_policy<Backend>,
                "ddp: init_process_group<B> needs a backend policy such as ddp::gloo");
  long (*files)(const ddp::topology&) = nullptr;
  if constexpr (open_files_communicator<typename Backend::communicator>)
    files = [](const ddp::topology& t) { return static_cast<long>(Backend::communicator::open_files(t)); };
  return process_group<Backend>(detail::make_rendezvous(o, files));
}

DDP_END_NAMESPACE

#endif // DDP_PROCESS_GROUP_HPP
// ---- end ddp/process_group.hpp ----

#include <gloo/types.h>

#include <string_view>
#include <type_traits>

DDP_BEGIN_NAMESPACE

template <> struct dtype_of<::gloo::float16> : std::integral_constant<dtype, dtype::f16> {};

/// Backend policy: Gloo over TCP, for CPU tensors.
struct gloo {
  static constexpr std::string_view name = "gloo";
  using communicator = detail::gloo_communicator;
};

// Separately compiled, process_group<gloo>'s members that are not templates
// are compiled once, in the runtime (detail/common/linkage.hpp).
#if defined(DDP_SEPARATE_COMPILATION)
#if defined(DDP_IMPLEMENTATION)
template class process_group<gloo>;
#else
extern template class process_group<gloo>;
#endif
#endif

DDP_END_NAMESPACE

#endif // DDP_BACKEND_GLOO_HPP
// ---- end ddp/backend/gloo.hpp ----
// ---- begin ddp/bucketing.hpp ----
// Bucketing policies: which gradients travel together in one all-reduce.
// Buckets launch in bucket order, so bucket 0 should hold the gradients that
// backward produces first (the last parameters).
#ifndef DDP_BUCKETING_HPP
#define DDP_BUCKETING_HPP


#include <concepts>
#include <cstddef>
#include <map>
#include <span>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE

/// What a bucketing policy sees of each parameter (in registration order).
struct parameter_desc {
  std::string_view name;
  dtype type;
  std::size_t count; ///< elements
  std::size_t bytes;
};

/// A bucketing policy maps parameters to buckets: every index exactly once,
/// one dtype per bucket, in launch order.
template <class B>
concept bucketing_policy = requires(std::span<const parameter_desc> params) {
  { B::assign(params) } -> std::same_as<std::vector<std::vector<std::size_t>>>;
};

namespace bucketing {

/// PyTorch's default: reverse registration order, one open bucket per dtype,
/// closed when it would exceed CapBytes (FirstBucketBytes for the first one,
/// so communication starts early in backward).
template <std::size_t CapBytes = std::size_t{25} << 20, std::size_t FirstBucketBytes = std::size_t{1} << 20>
struct size_capped {
  static_assert(CapBytes > 0 && FirstBucketBytes > 0, "ddp: size_capped needs positive caps");
  static constexpr std::size_t cap_bytes = CapBytes;
  static constexpr std::size_t first_bucket_bytes = FirstBucketBytes;

  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    std::vector<std::vector<std::size_t>> buckets;
    struct open_bucket {
      std::size_t index;
      std::size_t bytes;
      bool first;
    };
    std::map<dtype, open_bucket> open;
    for (std::size_t k = params.size(); k-- > 0;) {
      const auto& p = params[k];
      auto it = open.find(p.type);
      if (it != open.end()) {
        auto& b = it->second;
        std::size_t cap = b.first ? FirstBucketBytes : CapBytes;
        if (b.bytes + p.bytes > cap) {
          open.erase(it);
          buckets.push_back({k});
          open.emplace(p.type, open_bucket{buckets.size() - 1, p.bytes, false});
        } else {
          buckets[b.index].push_back(k);
          b.bytes += p.bytes;
        }
      } else {
        bool first = true;
        for (auto& b : buckets)
          if (params[b.front()].type == p.type) first = false;
        buckets.push_back({k});
        open.emplace(p.type, open_bucket{buckets.size() - 1, p.bytes, first});
      }
    }
    return buckets;
  }
};

/// One bucket per parameter (most collectives, earliest start).
struct per_tensor {
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    std::vector<std::vector<std::size_t>> buckets;
    for (std::size_t k = params.size(); k-- > 0;)
      buckets.push_back({k});
    return buckets;
  }
};

/// One bucket per dtype (fewest collectives, no overlap with backward).
struct single_buffer {
  static std::vector<std::vector<std::size_t>> assign(std::span<const parameter_desc> params) {
    return size_capped<~std::size_t{0}, ~std::size_t{0}>::assign(params);
  }
};

} // namespace bucketing
DDP_END_NAMESPACE

#endif // DDP_BUCKETING_HPP
// ---- end ddp/bucketing.hpp ----
// ---- begin ddp/data_parallel.hpp ----
// ddp::distributed_data_parallel — gradient averaging for any model type, in
// buckets that launch while backward is still running. The class coordinates;
// the work is done by its parts in ddp/data_parallel/: the parameter registry
// (walk, verify, follow moved storage), the bucket plan (pure: which path each
// bucket takes), the bucket engine of the gradients' memory space (pack,
// reduce, unpack), the step driver (marks, no_sync, strict_marking, join:
// shared with sharded_data_parallel) and DDP_DEBUG.
#ifndef DDP_DATA_PARALLEL_HPP
#define DDP_DATA_PARALLEL_HPP

// ---- begin ddp/data_parallel/gradient_sink.hpp ----
// ddp::gradient_sink: how a model whose framework knows when each gradient is
// final (an autograd engine) tells distributed_data_parallel, without naming
// its type. See model_traits<M>::attach in ddp/model.hpp.
#ifndef DDP_DATA_PARALLEL_GRADIENT_SINK_HPP
#define DDP_DATA_PARALLEL_GRADIENT_SINK_HPP


#include <cstddef>
#include <type_traits>

DDP_BEGIN_NAMESPACE

class gradient_sink {
public:
  /// `owner`: anything with mark_grad_ready(std::size_t), mark_unused(std::size_t)
  /// and marked(std::size_t).
  template <class Owner>
  requires(!std::is_same_v<std::remove_cv_t<Owner>, gradient_sink>) explicit gradient_sink(
      Owner& owner) noexcept
      : owner_(&owner), ready_([](void* o, std::size_t i) { static_cast<Owner*>(o)->mark_grad_ready(i); }),
        unused_([](void* o, std::size_t i) { static_cast<Owner*>(o)->mark_unused(i); }),
        marked_([](void* o, std::size_t i) { return static_cast<Owner*>(o)->marked(i); }) {}

  /// Gradient `index` (registration order) is final for this step.
  void ready(std::size_t index) const { ready_(owner_, index); }
  /// This rank has no gradient for `index` this step: it counts as zeros.
  void unused(std::size_t index) const { unused_(owner_, index); }
  /// Whether `index` was already marked in this step (by hand or by the adapter).
  bool marked(std::size_t index) const { return marked_(owner_, index); }

private:
  void* owner_;
  void (*ready_)(void*, std::size_t);
  void (*unused_)(void*, std::size_t);
  bool (*marked_)(void*, std::size_t);
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_GRADIENT_SINK_HPP
// ---- end ddp/data_parallel/gradient_sink.hpp ----
// ---- begin ddp/data_parallel/no_sync.hpp ----
// ddp::no_sync_guard: while it lives, distributed_data_parallel lets gradients
// accumulate locally (PyTorch's no_sync()). Guards nest.
#ifndef DDP_DATA_PARALLEL_NO_SYNC_HPP
#define DDP_DATA_PARALLEL_NO_SYNC_HPP


#include <utility>

DDP_BEGIN_NAMESPACE

template <class Model, class Backend, class Bucketing, class Reduction> class distributed_data_parallel;
template <class Model, class Backend, class Bucketing, class Reduction> class sharded_data_parallel;

class no_sync_guard {
public:
  /// Same as dp.no_sync(): refused in the middle of a step.
  template <class DataParallel>
  requires requires(DataParallel& d) { d.no_sync(); }
  explicit no_sync_guard(DataParallel& dp) : no_sync_guard(dp.no_sync()) {}
  no_sync_guard(no_sync_guard&& o) noexcept : depth_(std::exchange(o.depth_, nullptr)) {}
  no_sync_guard(const no_sync_guard&) = delete;
  no_sync_guard& operator=(const no_sync_guard&) = delete;
  no_sync_guard& operator=(no_sync_guard&&) = delete;
  ~no_sync_guard() {
    if (depth_) --*depth_;
  }

private:
  template <class, class, class, class> friend class distributed_data_parallel;
  template <class, class, class, class> friend class sharded_data_parallel;
  explicit no_sync_guard(int& depth) : depth_(&depth) { ++*depth_; }

  int* depth_;
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_NO_SYNC_HPP
// ---- end ddp/data_parallel/no_sync.hpp ----
// ---- begin ddp/data_parallel/options.hpp ----
// What users set and see of distributed_data_parallel: its options and the
// description of its buckets.
#ifndef DDP_DATA_PARALLEL_OPTIONS_HPP
#define DDP_DATA_PARALLEL_OPTIONS_HPP


#include <cstddef>
#include <cstdint>
#include <vector>

struct CUstream_st; // cudaStream_t is CUstream_st*: no CUDA header needed here

DDP_BEGIN_NAMESPACE

struct ddp_options {
  bool broadcast_buffers = true; ///< broadcast rank 0's buffers at the end of every synchronize()
  bool strict_marking = false;   ///< a gradient still unmarked at synchronize() is an error
  bool verify_model = true;      ///< compare names, dtypes and sizes across ranks at construction
  bool uneven_inputs = false;    ///< ranks may run out of data at different steps: enables join()
  /// Device gradients: the CUDA stream that computes them (a cudaStream_t).
  /// Buckets start after what is queued there when they complete; synchronize()
  /// then makes this stream wait for the reduced gradients instead of blocking
  /// the host (synchronize_blocking() still blocks). Null: the legacy default
  /// stream, and synchronize() blocks.
  CUstream_st* compute_stream = nullptr;
};

/// How a bucket travels.
enum class bucket_path : std::uint8_t {
  in_place,  ///< its gradients are one contiguous range of the wire type: reduced where they lie
  fragments, ///< reduced tensor by tensor where they lie (a fragment_communicator's ring): no copies
  packed,    ///< copied (and converted, scaled) into a buffer kept across steps, and back
};

inline constexpr const char* to_string(bucket_path p) {
  switch (p) {
  case bucket_path::in_place: return "in place";
  case bucket_path::fragments: return "unpacked fragments";
  case bucket_path::packed: return "packed";
  }
  return "?";
}

/// Introspection: one entry per bucket, in launch order.
struct bucket_info {
  std::vector<std::size_t> parameters; ///< indices in registration order
  dtype param_type;
  dtype wire_type;
  std::size_t elements;
  bucket_path path;
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_OPTIONS_HPP
// ---- end ddp/data_parallel/options.hpp ----
// ---- begin ddp/detail/data_parallel/attached_model.hpp ----
// What distributed_data_parallel walks: the model itself, or the adapter its
// traits attach (model_traits<M>::attach, ddp/model.hpp), which also reports
// gradients as they become final.
#ifndef DDP_DETAIL_DATA_PARALLEL_ATTACHED_MODEL_HPP
#define DDP_DETAIL_DATA_PARALLEL_ATTACHED_MODEL_HPP

// ---- begin ddp/model.hpp ----
// The model concept: any type that can list its parameters (value and gradient
// tensors, in forward/registration order) and, optionally, its buffers.
#ifndef DDP_MODEL_HPP
#define DDP_MODEL_HPP


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
// ---- end ddp/model.hpp ----

#include <type_traits>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Model> class attached_model {
public:
  using walked_type = Model;
  explicit attached_model(Model& m) noexcept : model_(m) {}
  Model& walked() noexcept { return model_; }
  void connect(gradient_sink) noexcept {}
  void before_synchronize(gradient_sink) {}

private:
  Model& model_;
};

template <attachable_model Model> class attached_model<Model> {
public:
  using walked_type = std::remove_cvref_t<decltype(model_traits<Model>::attach(std::declval<Model&>()))>;
  static_assert(model<walked_type>, "ddp: model_traits<M>::attach must return a model (for_each_parameter)");
  static_assert(
      requires(walked_type & a, gradient_sink s) {
        a.connect(s);
        a.before_synchronize(s);
      },
      "ddp: the adapter model_traits<M>::attach returns needs connect(ddp::gradient_sink) and "
      "before_synchronize(ddp::gradient_sink)");

  explicit attached_model(Model& m) : adapter_(model_traits<Model>::attach(m)) {}
  walked_type& walked() noexcept { return adapter_; }
  void connect(gradient_sink s) { adapter_.connect(s); }
  void before_synchronize(gradient_sink s) { adapter_.before_synchronize(s); }

private:
  walked_type adapter_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_ATTACHED_MODEL_HPP
// ---- end ddp/detail/data_parallel/attached_model.hpp ----
// ---- begin ddp/detail/data_parallel/bucket_engine.hpp ----
// The bucket engines distributed_data_parallel chooses from by where the
// gradients live: host_bucket_engine for host memory, device_bucket_engine
// for device memory. It holds one in a std::variant and calls it through
// std::visit, so a bucket goes from the DDP straight to its engine. Both meet
// the bucket_engine_for concept. The device engine is compiled in where
// DDP_WITH_CUDA is defined (the ddp::cuda and ddp::nccl CMake targets define
// it); without it, device gradients are a clear error at construction, and
// nothing here needs CUDA headers.
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP

// ---- begin ddp/detail/data_parallel/host_bucket_engine.hpp ----
// Launches and completes the buckets of a plan whose gradients are in host
// memory: packs (converting and scaling in the same pass) where the plan says
// packed, scales in place or fuses the scale into the ring otherwise, and
// unpacks when a bucket is done. The CUDA engine sits beside it.
#ifndef DDP_DETAIL_DATA_PARALLEL_HOST_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_HOST_BUCKET_ENGINE_HPP

// ---- begin ddp/detail/data_parallel/bucket_plan.hpp ----
// The bucket plan: which parameters travel together, at which offsets, as
// which wire type, and along which path. A pure function of the bucketing
// policy's assignment, the parameters' dtypes, sizes and addresses, the
// reduction's wire type and what the backend can do — testable without a
// process group (tests/unit/test_bucket_plan.cpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_HPP

// ---- begin ddp/detail/data_parallel/model_layout.hpp ----
// The parameters and buffers of a model, walked once into type-erased slots,
// plus the description that ranks compare to prove they hold the same model.
#ifndef DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_HPP
#define DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_HPP


#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct tensor_slot {
  std::string name;
  dtype type = dtype::f32;
  void* value = nullptr;
  void* grad = nullptr; ///< null for buffers
  std::size_t count = 0;
  bool on_device = false; ///< value (and grad) in device memory
};

template <class T> consteval void require_parameter_tensor() {
  static_assert(tensor<T>,
                "ddp: for_each_parameter passed a value or gradient that is not a contiguous tensor: "
                "use std::vector, std::span, an Eigen Matrix/Array/Map, or specialize ddp::tensor_traits");
}

template <class M> std::vector<tensor_slot> collect_parameters(M& m) {
  std::vector<tensor_slot> out;
  model_traits<M>::for_each_parameter(m, [&](auto&& name, auto& value, auto& grad) {
    using V = std::remove_cvref_t<decltype(value)>;
    using G = std::remove_cvref_t<decltype(grad)>;
    require_parameter_tensor<V>();
    require_parameter_tensor<G>();
    if constexpr (tensor<V> && tensor<G>) {
      static_assert(std::is_same_v<tensor_value_t<V>, tensor_value_t<G>>,
                    "ddp: a parameter and its gradient must have the same element type");
      static_assert(on_device_v<V> == on_device_v<G>,
                    "ddp: a parameter and its gradient must live in the same memory space (host or device)");
      auto v = as_span(value);
      auto g = as_span(grad);
      std::string n(name);
      if (v.size() != g.size())
        throw error(error_kind::config, "parameter '" + n + "' has " + std::to_string(v.size()) +
                                            " elements but its gradient has " + std::to_string(g.size()));
      if (!is_floating(dtype_v<tensor_value_t<V>>))
        throw error(error_kind::config, "parameter '" + n + "' is " +
                                            std::string(to_string(dtype_v<tensor_value_t<V>>)) +
                                            ": gradients must be floating point");
      out.push_back({std::move(n), dtype_v<tensor_value_t<V>>, v.data(), g.data(), v.size(), on_device_v<V>});
    }
  });
  return out;
}

template <class M> std::vector<tensor_slot> collect_buffers(M& m) {
  std::vector<tensor_slot> out;
  if constexpr (model_with_buffers<M>) {
    model_traits<M>::for_each_buffer(m, [&](auto&& name, auto& value) {
      using V = std::remove_cvref_t<decltype(value)>;
      require_parameter_tensor<V>();
      if constexpr (tensor<V>) {
        auto v = as_span(value);
        out.push_back(
            {std::string(name), dtype_v<tensor_value_t<V>>, v.data(), nullptr, v.size(), on_device_v<V>});
      }
    });
  }
  return out;
}

/// Whether the model still lists the same parameters and buffers (names, sizes)
/// at the same addresses as `params` and `buffers`. Walks the model without
/// allocating: it runs at the start of every step.
template <class M>
bool same_storage(M& m, const std::vector<tensor_slot>& params, const std::vector<tensor_slot>& buffers) {
  bool same = true;
  std::size_t i = 0;
  model_traits<M>::for_each_parameter(m, [&](auto&& name, auto& value, auto& grad) {
    if constexpr (tensor<std::remove_cvref_t<decltype(value)>> &&
                  tensor<std::remove_cvref_t<decltype(grad)>>) {
      auto v = as_span(value);
      auto g = as_span(grad);
      same = same && i < params.size() && std::string_view(name) == params[i].name &&
             v.size() == params[i].count && static_cast<void*>(v.data()) == params[i].value &&
             static_cast<void*>(g.data()) == params[i].grad;
      ++i;
    }
  });
  same = same && i == params.size();
  if constexpr (model_with_buffers<M>) {
    std::size_t j = 0;
    model_traits<M>::for_each_buffer(m, [&](auto&& name, auto& value) {
      if constexpr (tensor<std::remove_cvref_t<decltype(value)>>) {
        auto v = as_span(value);
        same = same && j < buffers.size() && std::string_view(name) == buffers[j].name &&
               v.size() == buffers[j].count && static_cast<void*>(v.data()) == buffers[j].value;
        ++j;
      }
    });
    same = same && j == buffers.size();
  }
  return same;
}

DDP_INLINE void check_unique_names(const std::vector<tensor_slot>& slots, const char* what);

/// "name|dtype|count\n" per parameter, then per buffer: what ranks compare.
DDP_INLINE std::string describe(const std::vector<tensor_slot>& params,
                                const std::vector<tensor_slot>& buffers);

/// A description split back into its two sections, one line per entry.
struct described_layout {
  std::vector<std::string> params, buffers;
};

DDP_INLINE described_layout parse_description(const std::string& d);

/// "'fc1.weight' float32 x 100" from a description line.
DDP_INLINE std::string pretty_entry(const std::string& line);

/// The first difference between rank 0's description and rank r's, as a sentence; empty when equal.
/// Parameters and buffers are compared section by section, each counted from #0 on both sides, so
/// an extra parameter on rank r is named by its own index whatever rank 0 lists at that line.
DDP_INLINE std::string first_difference(const std::string& d0, const std::string& dr, int r);

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_HPP
// ---- end ddp/detail/data_parallel/model_layout.hpp ----

#include <cstddef>
#include <span>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct planned_bucket {
  std::vector<std::size_t> params;  ///< registration indices, in bucket order
  std::vector<std::size_t> offsets; ///< element offset of each parameter in the bucket
  dtype param_type = dtype::f32;
  dtype wire_type = dtype::f32;
  std::size_t elements = 0;
  bucket_path path = bucket_path::packed;
};

struct bucket_plan {
  std::vector<planned_bucket> buckets; ///< in launch order
  std::vector<std::size_t> bucket_of;  ///< parameter index -> bucket index
};

/// What the backend offers the plan.
struct plan_capabilities {
  bool fragments = false; ///< reduces lists of fragments where they lie (a fragment_communicator)
};

/// Below this average tensor size a bucket is packed: one message per tiny
/// tensor costs more than two copies of the bucket. 64 KiB packs the 1 KiB
/// tensors of bench/grad_sync's many_small case and leaves ResNet-50's
/// convolutions unpacked (docs/performance.md, Gradient synchronization).
inline constexpr std::size_t unpacked_min_average_bytes = std::size_t{64} << 10;

/// The path of one bucket, from where its gradients lie now.
inline bucket_path choose_path(const planned_bucket& b, std::span<const tensor_slot> params,
                               plan_capabilities caps) {
  if (b.wire_type != b.param_type) return bucket_path::packed; // conversion needs a buffer
  const std::size_t esize = size_of(b.param_type);
  auto* base = static_cast<std::byte*>(params[b.params.front()].grad);
  bool contiguous = true;
  for (std::size_t k = 0; contiguous && k < b.params.size(); ++k)
    contiguous = static_cast<std::byte*>(params[b.params[k]].grad) == base + b.offsets[k] * esize;
  if (contiguous) return bucket_path::in_place;
  const std::size_t average_bytes = b.elements * esize / b.params.size();
  if (caps.fragments && average_bytes >= unpacked_min_average_bytes) return bucket_path::fragments;
  return bucket_path::packed;
}

/// Gradient storage moved (a resized Eigen matrix): the paths follow it.
inline void choose_paths(bucket_plan& plan, std::span<const tensor_slot> params, plan_capabilities caps) {
  for (auto& b : plan.buckets)
    b.path = choose_path(b, params, caps);
}

/// Checks the policy's assignment (every parameter exactly once, one dtype per
/// bucket, no empty bucket) and lays the buckets out.
DDP_INLINE bucket_plan make_bucket_plan(const std::vector<std::vector<std::size_t>>& assignment,
                                        std::span<const tensor_slot> params, dtype (*wire)(dtype),
                                        plan_capabilities caps);

/// What a bucketing policy sees of the parameters.
inline std::vector<parameter_desc> describe_for_bucketing(std::span<const tensor_slot> params) {
  std::vector<parameter_desc> out;
  out.reserve(params.size());
  for (auto& p : params)
    out.push_back({p.name, p.type, p.count, p.count * size_of(p.type)});
  return out;
}

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_HPP
// ---- end ddp/detail/data_parallel/bucket_plan.hpp ----
// ---- begin ddp/detail/data_parallel/unchecked_works.hpp ----
// Works whose results a stream waited for on the device (work::stream_wait)
// while the host went on: DDP's buckets and buffer broadcasts over NCCL in a
// stream-ordered synchronize(). Their failures still reach the user: a
// failure already known is thrown by the next check() (the next step), and one
// still unchecked at teardown is waited for and logged. A failed collective also poisons the
// group, so the next collective fails with it anyway; this covers the last
// step, after which there may be none.
#ifndef DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_HPP
#define DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_HPP


#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// On an error path or at teardown (an error is already on its way, or
/// nobody is left to tell): waits for a bucket's collective, if any, and
/// drops its failure. Both bucket engines use it.
inline void wait_quietly(std::optional<work>& in_flight) noexcept {
  if (!in_flight) return;
  try {
    in_flight->wait();
  } catch (...) {}
  in_flight.reset();
}

class unchecked_works {
public:
  explicit unchecked_works(int rank) : rank_(rank) {}
  unchecked_works(const unchecked_works&) = delete;
  unchecked_works& operator=(const unchecked_works&) = delete;
  ~unchecked_works() { log_all(); }

  void add(work w) { works_.push_back(std::move(w)); }

  /// Tracks `w`, then makes `stream` wait for it (work::stream_wait). When
  /// that throws, a finished work's failure is being thrown now, so it is
  /// forgotten (not reported twice); one not finished (stream_wait gave up
  /// waiting for it to be queued) stays, to be waited for.
  DDP_INLINE void stream_wait(const work& w, CUstream_st* stream);

  /// Forgets the finished ones; throws the first failure among them.
  DDP_INLINE void check();

  /// Waits for every one on the host (each with its deadline); throws the first failure.
  DDP_INLINE void wait_all();

  /// Waits for every one on the host (each with its deadline) and logs the
  /// failures, each distinct one once (a failed group fails them all with
  /// one error): where nobody is left to throw them to (teardown).
  DDP_INLINE void log_all() noexcept;

private:
  int rank_;
  std::vector<work> works_;
};

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_HPP
// ---- end ddp/detail/data_parallel/unchecked_works.hpp ----
// ---- begin ddp/detail/numeric/elementwise.hpp ----
// Type-erased elementwise kernels on raw buffers, keyed by dtype: the reduce
// functions handed to the backends, and in-place scaling for op::avg. Half
// types compute in float and round once.
#ifndef DDP_DETAIL_NUMERIC_ELEMENTWISE_HPP
#define DDP_DETAIL_NUMERIC_ELEMENTWISE_HPP

// ---- begin ddp/detail/numeric/half.hpp ----
// IEEE binary16 and bfloat16 <-> float conversions (round to nearest even),
// used by reductions on half types and by the compressed reductions.
#ifndef DDP_DETAIL_NUMERIC_HALF_HPP
#define DDP_DETAIL_NUMERIC_HALF_HPP


#include <bit>
#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

inline float half_bits_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0)
      bits = sign;
    else { // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

inline std::uint16_t float_to_half_bits(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // rounds to inf
  if (abs < 0x38800000u) {                                                   // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign); // below half of the smallest subnormal
    std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23); // 14..24
    std::uint32_t half_man = man >> (shift);
    std::uint32_t rest = man & ((1u << shift) - 1u);
    std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half_man & 1u))) ++half_man;
    return static_cast<std::uint16_t>(sign | half_man);
  }
  std::uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - (static_cast<std::uint32_t>(127 - 15) << 23);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

inline float bf16_bits_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u); // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NUMERIC_HALF_HPP
// ---- end ddp/detail/numeric/half.hpp ----

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
  default: throw error(error_kind::config, "cannot convert to " + std::string(to_string(to)));
  }
}

/// dst[i] = src[i] * factor, converting between floating dtypes (a plain copy
/// when the types match and factor is 1). dst and src must not overlap.
DDP_INLINE void copy_scaled(void* dst, dtype to, const void* src, dtype from, std::size_t n, double factor);

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_NUMERIC_ELEMENTWISE_HPP
// ---- end ddp/detail/numeric/elementwise.hpp ----

#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

template <communicator Comm> class host_bucket_engine {
public:
  static constexpr plan_capabilities capabilities{.fragments = fragment_communicator<Comm>};
  /// The step's last bucket waits for synchronize(), which may run it on its own thread.
  static constexpr bool defers_last_bucket = true;

  host_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params)
      : comm_(comm), plan_(plan), params_(params), state_(plan.buckets.size()) {
    layout();
  }
  host_bucket_engine(const host_bucket_engine&) = delete;
  host_bucket_engine& operator=(const host_bucket_engine&) = delete;
  ~host_bucket_engine() { wait_all_quietly(); }

  /// Packing buffers for the packed buckets (kept across steps); call again
  /// when the plan's paths changed.
  void layout() {
    for (std::size_t i = 0; i < state_.size(); ++i) {
      auto& b = plan_.buckets[i];
      if (b.path == bucket_path::packed)
        state_[i].buffer.resize(b.elements * size_of(b.wire_type));
      else
        state_[i].buffer = {};
    }
  }

  /// A gradient with no contribution this step.
  static void zero(const tensor_slot& p) { std::memset(p.grad, 0, p.count * size_of(p.type)); }

  /// Starts the all-reduce of bucket i; `scale` (1/W for a mean, else 1) is
  /// fused into the packing copy or the ring's last step where there is one.
  /// `caller_waits`: the caller waits for it at once (the step's last bucket,
  /// launched by synchronize()), so the communicator may run it on this thread.
  void launch(std::size_t i, double scale, bool caller_waits = false) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    s.t_launch = std::chrono::steady_clock::now();
    if (b.path == bucket_path::packed) {
      const std::size_t wsize = size_of(b.wire_type);
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        auto& p = params_[b.params[k]];
        copy_scaled(s.buffer.data() + b.offsets[k] * wsize, b.wire_type, p.grad, p.type, p.count, scale);
      }
      s.in_flight = reduce(i, nullptr, 1.0, caller_waits);
      return;
    }
    if constexpr (!fragment_communicator<Comm>)
      if (scale != 1.0) scale_in_place(params_[b.params.front()].grad, b.elements, b.param_type, scale);
    s.in_flight = reduce(i, nullptr, fragment_communicator<Comm> ? scale : 1.0, caller_waits);
  }

  /// Waits for bucket i (if launched) and unpacks it into the gradients.
  void finish(std::size_t i) {
    if (wait(i)) unpack(i);
  }

  /// Waits for bucket i's collective; false when it was not launched.
  bool wait(std::size_t i) {
    auto& s = state_[i];
    if (!s.in_flight) return false;
    auto w = std::move(*s.in_flight);
    s.in_flight.reset();
    w.wait();
    s.t_done = std::chrono::steady_clock::now();
    return true;
  }

  /// Copies a packed bucket's reduced data back into its gradients (after wait).
  void unpack(std::size_t i) {
    auto& s = state_[i];
    auto& b = plan_.buckets[i];
    if (b.path != bucket_path::packed) return;
    const std::size_t wsize = size_of(b.wire_type);
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      auto& p = params_[b.params[k]];
      copy_scaled(p.grad, p.type, s.buffer.data() + b.offsets[k] * wsize, b.wire_type, p.count, 1.0);
    }
  }

  /// Before the first stand-in: host zeros are allocated as they are needed.
  void prepare_join() {}
  /// Nothing to order after the last unpack: the host is done with it.
  void finish_step(bool /*blocking*/) {}

  /// A joined rank's stand-in for bucket i: the same collective the others
  /// run, message for message, on zeros.
  work reduce_zeros(std::size_t i, double scale) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    const std::size_t bytes = b.elements * size_of(b.wire_type);
    if constexpr (shm_communicator<Comm>) {
      // Gradients in a shared arena are reduced in place, and the other ranks
      // reduce exactly there (the collective's header says so): zeros go there
      // too. This rank's gradients then end as the others' reduced sum (times
      // the scale), where a private arena's would stay its own: it steps no more.
      void* grads = params_[b.params.front()].grad;
      if (b.path == bucket_path::in_place && comm_.is_shm_array_memory(grads, bytes)) {
        std::memset(grads, 0, bytes);
        return reduce(i, nullptr, scale);
      }
    }
    s.shadow.assign(bytes, std::byte{0});
    return reduce(i, s.shadow.data(), scale);
  }

  void wait_all_quietly() {
    for (auto& s : state_)
      wait_quietly(s.in_flight);
  }

  /// Milliseconds from launch to done of bucket i in the last step.
  double last_duration_ms(std::size_t i) const {
    return std::chrono::duration<double, std::milli>(state_[i].t_done - state_[i].t_launch).count();
  }

private:
  struct runtime {
    std::vector<std::byte> buffer; ///< packed wire data (allocated once, reused)
    std::vector<std::byte> shadow; ///< zeros for join()
    std::optional<work> in_flight;
    std::chrono::steady_clock::time_point t_launch, t_done;
  };

  /// Starts the all-reduce of bucket i on its gradients, its buffer, or
  /// `zeros` in their place (cut into the same fragments).
  work reduce(std::size_t i, std::byte* zeros, double scale, bool caller_waits = false) {
    auto& b = plan_.buckets[i];
    if constexpr (fragment_communicator<Comm>) {
      if (b.path != bucket_path::packed) {
        std::vector<fragment> frags;
        const std::size_t wsize = size_of(b.wire_type);
        if (b.path == bucket_path::in_place) {
          frags.push_back({zeros ? zeros : params_[b.params.front()].grad, b.elements});
        } else {
          for (std::size_t k = 0; k < b.params.size(); ++k) {
            auto& p = params_[b.params[k]];
            frags.push_back({zeros ? zeros + b.offsets[k] * wsize : p.grad, p.count});
          }
        }
        return comm_.all_reduce_fragments(std::move(frags), b.wire_type, scale, caller_waits);
      }
    }
    void* data = zeros                           ? static_cast<void*>(zeros)
                 : b.path == bucket_path::packed ? static_cast<void*>(state_[i].buffer.data())
                                                 : params_[b.params.front()].grad;
    return comm_.all_reduce(data, b.elements, b.wire_type, op::sum, caller_waits);
  }

  Comm& comm_;
  const bucket_plan& plan_;
  const std::vector<tensor_slot>& params_;
  std::vector<runtime> state_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_HOST_BUCKET_ENGINE_HPP
// ---- end ddp/detail/data_parallel/host_bucket_engine.hpp ----
// Before the conditional block: the single header inlines a file where it is
// first included, and device_broadcasts.hpp needs this one without CUDA too.
// The engine variant's layout is in the ABI namespace's name (config.hpp): the macro
// must say the same here as where config.hpp was first included.
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
#if !DDP_DETAIL_ABI_CUDA
#error "ddp: define DDP_WITH_CUDA (DDP_WITH_NCCL) before the first ddp header, as ddp::cuda does"
#endif
// ---- begin ddp/detail/data_parallel/device_bucket_engine.hpp ----
// Launches and completes the buckets of a plan whose gradients are in CUDA
// device memory; the host engine's twin. Host code here never dereferences
// device memory: every touch of a gradient is a kernel, cudaMemsetAsync or
// cudaMemcpyAsync on the engine's stream.
//
// Per bucket, allocated once (layout()): a device buffer for packed buckets,
// a device table of (src, dst, count) runs for packing and one for unpacking,
// and, where the backend takes host memory only (ddp::gloo), a slice of one
// pinned host staging buffer and, in place, a table that scales the bucket.
// Nothing is allocated or freed inside a step (cudaFree and cudaFreeHost wait
// for the whole device, the user's streams too, with no deadline). A step:
//   launch  the engine's stream waits for the user's compute stream (an event),
//           packs with one kernel (converting to the wire type, scale fused) or,
//           for a contiguous bucket (ddp::device_arena), packs nothing;
//           a device communicator (NCCL) averages with ncclAvg where no
//           conversion is needed; otherwise the sum is pre-multiplied by 1/W.
//           NCCL: an event recorded after the packing is handed over with the
//           pointer; NCCL's stream waits for it on the device (no host wait).
//           Host backends: one device->pinned copy; the host waits (deadline)
//           for it before handing the pinned pointer to the communicator.
//   wait    NCCL: the engine's stream waits for the collective's event (the
//           host only until it is queued: work::stream_wait); host backends: the
//           host waits for the collective (it runs there).
//   unpack  pinned->device copy (host backends) and one unpack kernel, queued
//           on the engine's stream.
//   failure  this rank's own part before a collective (following the compute
//           stream, packing, the copy to pinned memory, zeroing) failing means
//           its peers would wait for it until their deadline: the group is
//           failed at once (fail_group: process_group::abort), then it throws.
//   finish_step  the user's stream waits for the engine's stream (an event;
//           a collective's failure known by then is thrown, a later one by
//           the next step or the group's next collective, or logged), or the
//           host waits with a deadline (blocking form, or no compute stream)
//           for every collective's work first (an NCCL timeout aborts the
//           communicator, whose stream then runs on: the error must come from
//           the work, naming the collective), then for the engine's stream.
#ifndef DDP_DETAIL_DATA_PARALLEL_DEVICE_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEVICE_BUCKET_ENGINE_HPP

// ---- begin ddp/detail/cuda/kernels.hpp ----
// ddp's device kernels from host code compiled by any C++ compiler.
//
// How a header-only library ships kernels: the kernels (cuda/kernels.cu) are
// compiled once at development time into a fatbin with SASS for sm_75, sm_80
// and sm_90 (no JIT at start-up on Turing, Ampere, Ada and Hopper) and
// compute_75 PTX of ISA 8.0, uncompressed (a CUDA 12.0 driver JIT-compiles it
// for any other GPU of compute capability >= 7.5), embedded as bytes in
// kernels_fatbin.hpp (scripts/gen-cuda-kernels; ctests fail when it is stale
// or lacks one of these), and loaded here on first use with
// cudaLibraryLoadData + cudaLibraryGetKernel, launched with cudaLaunchKernel.
// Users need the CUDA runtime (libcudart, CUDA >= 12.0) and a driver of CUDA
// >= 12.0, but no nvcc, and a plain .cpp gets the kernels. Rejected: compiling
// the kernels in the user's TU under __CUDACC__ (plain .cpp files would get
// none); NVRTC at run time (another library to link, ~100 ms of compile at
// start-up); the driver API (cuModuleLoadData needs -lcuda and a current
// context).
#ifndef DDP_DETAIL_CUDA_KERNELS_HPP
#define DDP_DETAIL_CUDA_KERNELS_HPP

// ---- begin ddp/detail/cuda/kernels_fatbin.hpp ----
// Generated by scripts/gen-cuda-kernels from cuda/kernels.cu: do not edit.
// A fatbin of ddp's device kernels, uncompressed: SASS for sm_75, sm_80, sm_90 and
// PTX (ISA 8.0) for compute_75, loaded by detail/cuda/kernels.hpp with
// cudaLibraryLoadData.
#ifndef DDP_DETAIL_CUDA_KERNELS_FATBIN_HPP
#define DDP_DETAIL_CUDA_KERNELS_FATBIN_HPP


#include <cstddef>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

// 8-byte aligned: the loader reads the fatbin header in place.
// clang-format off
alignas(8) inline constexpr unsigned char kernels_fatbin[81920] = {
    80,237,85,186,1,0,16,0,240,63,1,0,0,0,0,0,2,0,1,1,
    64,0,0,0,168,74,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    8,0,1,0,75,0,0,0,0,0,0,0,0,0,0,0,17,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    127,69,76,70,2,1,1,65,8,0,0,0,0,0,0,0,2,0,190,0,
    1,0,0,0,0,0,0,0,0,0,0,0,0,74,0,0,0,0,0,0,
    128,70,0,0,0,0,0,0,4,75,0,6,64,0,56,0,3,0,64,0,
    14,0,1,0,0,46,115,104,115,116,114,116,97,98,0,46,115,116,114,116,
    97,98,0,46,115,121,109,116,97,98,0,46,115,121,109,116,97,98,95,115,
    104,110,100,120,0,46,110,111,116,101,46,110,118,46,116,107,105,110,102,111,
    0,46,110,111,116,101,46,110,118,46,99,117,105,110,102,111,0,46,110,118,
    46,105,110,102,111,0,46,116,101,120,116,46,100,100,112,95,99,111,110,118,
    101,114,116,95,99,111,112,121,0,46,110,118,46,105,110,102,111,46,100,100,
    112,95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,110,118,46,115,
    104,97,114,101,100,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,
    112,121,0,46,110,118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,
    95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,114,101,108,46,110,
    118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,95,99,111,110,118,
    101,114,116,95,99,111,112,121,0,46,100,101,98,117,103,95,102,114,97,109,
    101,0,46,114,101,108,46,100,101,98,117,103,95,102,114,97,109,101,0,46,
    114,101,108,97,46,100,101,98,117,103,95,102,114,97,109,101,0,46,110,118,
    46,99,97,108,108,103,114,97,112,104,0,46,110,118,46,112,114,111,116,111,
    116,121,112,101,0,46,110,118,46,114,101,108,46,97,99,116,105,111,110,0,
    0,46,115,104,115,116,114,116,97,98,0,46,115,116,114,116,97,98,0,46,
    115,121,109,116,97,98,0,46,115,121,109,116,97,98,95,115,104,110,100,120,
    0,46,110,111,116,101,46,110,118,46,116,107,105,110,102,111,0,46,110,111,
    116,101,46,110,118,46,99,117,105,110,102,111,0,46,110,118,46,105,110,102,
    111,0,46,116,101,120,116,46,100,100,112,95,99,111,110,118,101,114,116,95,
    99,111,112,121,0,46,110,118,46,105,110,102,111,46,100,100,112,95,99,111,
    110,118,101,114,116,95,99,111,112,121,0,46,110,118,46,115,104,97,114,101,
    100,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,
    114,101,108,46,110,118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,
    95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,110,118,46,99,111,
    110,115,116,97,110,116,48,46,100,100,112,95,99,111,110,118,101,114,116,95,
    99,111,112,121,0,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,
    101,108,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,101,108,97,
    46,100,101,98,117,103,95,102,114,97,109,101,0,46,110,118,46,99,97,108,
    108,103,114,97,112,104,0,46,110,118,46,112,114,111,116,111,116,121,112,101,
    0,46,110,118,46,114,101,108,46,97,99,116,105,111,110,0,100,100,112,95,
    99,111,110,118,101,114,116,95,99,111,112,121,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,41,0,0,0,3,0,5,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,57,0,0,0,3,0,6,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,82,0,0,0,3,0,13,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,194,0,0,0,
    3,0,12,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    225,0,0,0,3,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,17,1,0,0,3,0,9,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,45,1,0,0,3,0,10,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,60,1,0,0,18,16,13,0,
    0,0,0,0,0,0,0,0,128,62,0,0,0,0,0,0,255,255,255,255,
    36,0,0,0,0,0,0,0,255,255,255,255,255,255,255,255,3,0,4,124,
    255,255,255,255,15,12,129,128,128,40,0,8,255,129,128,40,8,129,128,128,
    40,0,0,0,255,255,255,255,52,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,128,62,0,0,0,0,0,0,
    4,4,0,0,0,4,20,0,0,0,12,129,128,128,40,0,4,112,15,0,
    0,0,0,0,0,0,0,0,12,0,0,0,140,0,0,0,208,7,0,0,
    78,86,73,68,73,65,32,67,111,114,112,0,2,0,0,0,0,0,0,0,
    1,0,0,0,7,0,0,0,54,0,0,0,96,0,0,0,0,112,116,120,
    97,115,0,67,117,100,97,32,99,111,109,112,105,108,97,116,105,111,110,32,
    116,111,111,108,115,44,32,114,101,108,101,97,115,101,32,49,51,46,48,44,
    32,86,49,51,46,48,46,56,56,0,66,117,105,108,100,32,99,117,100,97,
    95,49,51,46,48,46,114,49,51,46,48,47,99,111,109,112,105,108,101,114,
    46,51,54,52,50,52,55,49,52,95,48,0,45,97,114,99,104,32,115,109,
    95,55,53,32,45,109,32,54,52,32,0,0,12,0,0,0,8,0,0,0,
    232,3,0,0,78,86,73,68,73,65,32,67,111,114,112,0,2,0,75,0,
    130,0,0,0,4,47,8,0,8,0,0,0,46,0,0,0,4,17,8,0,
    8,0,0,0,0,0,0,0,4,18,8,0,8,0,0,0,0,0,0,0,
    4,54,4,0,1,0,0,0,4,55,4,0,130,0,0,0,4,10,8,0,
    4,0,0,0,96,1,48,0,3,25,48,0,4,23,12,0,0,0,0,0,
    6,0,40,0,0,240,33,0,4,23,12,0,0,0,0,0,5,0,36,0,
    0,240,17,0,4,23,12,0,0,0,0,0,4,0,32,0,0,240,17,0,
    4,23,12,0,0,0,0,0,3,0,24,0,0,240,33,0,4,23,12,0,
    0,0,0,0,2,0,16,0,0,240,33,0,4,23,12,0,0,0,0,0,
    1,0,8,0,0,240,33,0,4,23,12,0,0,0,0,0,0,0,0,0,
    0,240,33,0,3,27,255,0,3,95,0,0,4,28,16,0,144,0,0,0,
    64,35,0,0,128,35,0,0,32,62,0,0,4,30,4,0,0,0,0,0,
    0,0,0,0,255,255,255,255,0,0,0,0,254,255,255,255,0,0,0,0,
    253,255,255,255,0,0,0,0,252,255,255,255,0,0,0,0,115,0,0,0,
    0,0,0,0,0,0,0,17,37,0,5,54,68,0,0,0,0,0,0,0,
    2,0,0,0,8,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,36,118,1,255,0,10,0,0,255,0,142,7,
    0,228,15,0,36,116,0,255,1,0,0,0,255,0,142,7,0,202,15,0,
    12,122,0,0,0,97,0,0,112,82,240,3,0,228,15,4,12,122,0,0,
    0,96,0,0,112,82,242,3,0,228,15,4,12,122,0,0,0,96,0,0,
    112,38,116,4,0,216,15,0,71,41,0,0,240,34,0,0,0,0,128,3,
    0,234,15,0,25,121,3,0,0,0,0,0,0,37,0,0,0,36,14,0,
    12,122,0,3,0,92,0,0,112,96,244,3,0,200,31,0,12,122,0,255,
    0,93,0,0,32,97,244,3,0,216,15,0,77,41,0,0,0,0,0,0,
    0,0,128,3,0,234,15,0,25,121,0,0,0,0,0,0,0,33,0,0,
    0,34,14,0,16,123,2,0,0,98,0,0,0,16,48,0,0,98,14,0,
    185,122,4,0,0,96,0,0,0,10,0,0,0,226,15,0,36,114,4,255,
    255,0,0,0,255,0,142,7,0,226,15,0,140,114,0,63,4,0,0,0,
    112,82,240,11,0,228,15,0,140,114,0,63,5,0,0,0,112,82,242,11,
    0,228,15,0,130,120,6,0,4,0,0,0,0,0,0,0,0,228,15,0,
    135,120,11,6,2,0,0,0,0,0,0,12,0,196,15,0,135,120,6,6,
    2,0,0,0,0,0,128,12,0,228,15,0,17,122,14,3,0,90,0,0,
    255,32,132,7,0,200,31,0,17,122,15,3,0,91,0,0,4,36,15,1,
    0,208,15,0,129,115,16,14,0,0,0,0,0,235,30,0,0,162,14,0,
    36,116,19,255,24,0,0,0,255,0,142,7,0,198,15,0,129,115,24,14,
    0,8,0,0,0,235,30,0,0,226,14,0,37,118,18,16,0,88,0,0,
    19,0,142,7,0,200,79,0,36,120,17,17,24,0,0,0,255,2,142,7,
    0,228,15,0,36,114,16,255,255,0,0,0,18,0,142,7,0,228,15,0,
    36,120,17,19,1,0,0,0,17,2,142,7,0,208,15,0,129,115,18,16,
    0,16,0,0,0,235,30,0,0,232,14,0,129,115,20,16,0,0,0,0,
    0,235,30,0,0,104,5,2,129,115,22,16,0,8,0,0,0,235,30,0,
    0,98,5,0,36,118,8,255,0,97,0,0,255,0,142,7,0,226,15,0,
    16,122,3,3,0,3,0,0,255,224,247,7,0,200,15,0,18,122,255,8,
    0,96,0,0,255,252,136,7,0,226,15,0,36,114,4,255,255,0,0,0,
    4,6,142,1,0,226,15,0,12,122,0,3,0,92,0,0,112,96,246,3,
    0,226,15,0,85,115,255,1,0,0,0,0,0,0,16,0,0,226,15,0,
    69,121,1,0,192,32,0,0,0,0,128,3,0,228,15,0,12,122,0,4,
    0,93,0,0,48,97,246,3,0,200,15,0,3,120,12,255,8,0,0,0,
    0,0,0,0,0,228,15,0,16,114,5,18,24,0,0,128,255,224,245,7,
    0,202,143,0,36,120,6,19,1,0,0,0,25,14,14,1,0,226,15,0,
    12,122,0,5,0,94,0,0,112,16,244,3,0,200,15,0,12,122,0,6,
    0,95,0,0,32,17,244,3,0,200,15,0,7,122,5,5,0,94,0,0,
    0,0,0,1,0,228,15,0,7,122,6,6,0,95,0,0,0,0,0,1,
    0,226,15,0,71,73,0,0,0,1,0,0,0,0,128,3,0,234,47,0,
    36,120,15,24,4,0,0,0,255,0,142,7,0,226,79,4,194,115,4,20,
    0,0,0,0,0,0,14,0,0,162,14,2,25,120,17,24,2,0,0,0,
    25,2,1,0,0,198,15,0,16,114,8,22,15,0,0,0,255,224,245,7,
    0,226,15,0,194,115,5,21,0,0,0,0,0,0,14,0,0,40,7,0,
    194,115,7,15,0,0,0,0,0,0,14,0,0,162,14,0,36,120,10,23,
    1,0,0,0,17,6,14,1,0,198,15,0,194,115,9,8,0,0,0,0,
    0,0,14,0,0,106,14,0,194,115,10,10,0,0,0,0,0,0,14,0,
    0,34,6,0,144,114,7,4,7,0,0,0,63,224,241,15,0,204,79,0,
    28,120,0,0,0,0,0,0,8,240,246,3,0,226,15,0,146,120,63,9,
    15,0,0,0,7,200,128,15,0,200,47,0,36,120,17,21,1,0,0,0,
    17,6,142,1,0,228,15,0,28,120,0,0,0,0,0,0,8,240,244,3,
    0,204,15,0,194,115,8,17,0,0,0,0,0,0,14,0,0,108,6,0,
    71,169,0,0,64,23,0,0,0,0,128,3,0,234,143,1,12,114,0,5,
    0,0,0,0,112,64,244,3,0,226,95,0,85,115,255,0,0,0,0,0,
    0,0,16,0,0,226,15,0,69,121,0,0,0,23,0,0,0,0,128,3,
    0,228,15,0,12,114,0,6,255,0,0,0,32,65,244,3,0,216,15,0,
    71,169,0,0,208,22,0,0,0,0,128,3,0,234,15,0,37,124,16,24,
    6,0,0,0,22,0,142,15,0,200,15,2,36,124,23,25,11,0,0,0,
    255,2,142,15,0,228,15,0,37,124,14,24,11,0,0,0,20,0,142,15,
    0,200,15,0,36,124,25,25,6,0,0,0,255,2,142,15,0,228,15,0,
    36,114,19,255,255,0,0,0,0,0,142,7,0,228,15,0,36,114,21,255,
    255,0,0,0,255,0,142,7,0,228,15,0,36,120,8,15,1,0,0,0,
    23,2,142,7,0,228,15,0,36,120,10,17,1,0,0,0,25,2,142,7,
    0,228,15,0,16,122,31,19,0,0,0,0,255,224,245,7,0,226,15,0,
    85,115,255,2,0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,
    192,6,0,0,0,0,128,3,0,230,15,0,36,114,33,255,255,0,0,0,
    21,6,14,1,0,226,15,0,16,122,23,31,0,0,0,0,255,224,245,7,
    0,202,15,0,36,114,25,255,255,0,0,0,33,6,14,1,0,226,15,0,
    16,122,27,23,0,0,0,0,255,224,245,7,0,202,15,0,36,114,29,255,
    255,0,0,0,25,6,14,1,0,226,15,0,17,114,34,27,14,0,0,0,
    255,8,132,7,0,200,15,0,17,114,35,27,8,0,0,0,29,12,15,1,
    0,226,15,0,71,153,0,0,176,4,0,0,0,0,128,3,0,234,15,2,
    36,118,18,255,0,96,0,0,255,0,142,7,0,202,15,0,12,120,0,18,
    2,0,0,0,112,82,244,3,0,216,15,0,71,169,0,0,0,3,0,0,
    0,0,128,3,0,234,15,0,12,120,0,18,3,0,0,0,112,82,244,3,
    0,216,15,0,71,41,0,0,128,1,0,0,0,0,128,3,0,234,15,0,
    12,114,0,19,5,0,0,0,112,96,244,3,0,228,15,8,12,114,0,31,
    5,0,0,0,112,96,246,3,0,228,15,8,12,114,0,21,6,0,0,0,
    32,97,244,3,0,228,15,8,12,114,0,33,6,0,0,0,48,97,246,3,
    0,228,15,0,12,114,0,23,5,0,0,0,112,96,248,3,0,200,15,0,
    12,114,0,25,6,0,0,0,64,97,248,3,0,200,15,0,17,162,36,19,
    14,0,0,0,255,8,138,7,0,200,15,0,17,162,37,19,8,0,0,0,
    21,12,143,2,0,208,15,0,17,178,38,31,14,0,0,0,255,8,138,7,
    0,226,15,4,128,169,36,36,0,0,0,0,0,229,16,0,0,166,14,0,
    17,178,39,31,8,0,0,0,33,12,143,2,0,208,15,0,17,194,40,23,
    14,0,0,0,255,8,138,7,0,226,15,4,128,185,38,38,0,0,0,0,
    0,229,16,0,0,230,14,0,17,194,41,23,8,0,0,0,25,12,143,2,
    0,208,15,0,128,201,40,40,0,0,0,0,0,229,16,0,0,34,15,0,
    12,114,0,27,5,0,0,0,112,96,250,3,0,200,15,0,12,114,0,29,
    6,0,0,0,80,97,250,3,0,228,15,0,22,168,7,255,16,84,0,0,
    36,0,0,0,0,228,79,0,22,184,9,255,16,84,0,0,38,0,0,0,
    0,228,143,0,22,200,11,255,16,84,0,0,40,0,0,0,0,204,15,1,
    71,89,0,0,144,4,0,0,0,0,128,3,0,234,15,0,128,121,13,34,
    0,0,0,0,0,229,16,0,0,164,14,0,22,120,13,255,16,84,0,0,
    13,0,0,0,0,226,79,0,71,121,0,0,96,4,0,0,0,0,128,3,
    0,234,15,0,12,114,0,19,5,0,0,0,112,96,244,3,0,228,15,8,
    12,114,0,31,5,0,0,0,112,96,246,3,0,228,15,8,12,114,0,21,
    6,0,0,0,32,97,244,3,0,228,15,8,12,114,0,33,6,0,0,0,
    48,97,246,3,0,228,15,0,12,114,0,23,5,0,0,0,112,96,248,3,
    0,200,15,0,12,114,0,25,6,0,0,0,64,97,248,3,0,200,15,0,
    17,162,34,19,14,0,0,0,255,16,138,7,0,200,15,0,17,162,35,19,
    8,0,0,0,21,20,143,2,0,208,15,0,17,178,36,31,14,0,0,0,
    255,16,138,7,0,226,15,4,128,169,7,34,0,0,0,0,0,233,16,0,
    0,102,1,0,17,178,37,31,8,0,0,0,33,20,143,2,0,208,15,0,
    17,194,38,23,14,0,0,0,255,16,138,7,0,226,15,4,128,185,9,36,
    0,0,0,0,0,233,16,0,0,102,1,0,17,194,39,23,8,0,0,0,
    25,20,143,2,0,208,15,0,128,201,11,38,0,0,0,0,0,233,16,0,
    0,98,1,0,12,114,0,27,5,0,0,0,112,96,250,3,0,200,15,0,
    12,114,0,29,6,0,0,0,80,97,250,3,0,216,15,0,71,89,0,0,
    64,3,0,0,0,0,128,3,0,234,15,0,17,114,34,27,14,0,0,0,
    255,16,140,7,0,200,31,0,17,114,35,27,8,0,0,0,29,20,15,3,
    0,208,15,0,128,121,13,34,0,0,0,0,0,233,16,0,0,98,1,0,
    71,121,0,0,0,3,0,0,0,0,128,3,0,234,15,0,12,114,0,19,
    5,0,0,0,112,96,244,3,0,228,15,8,12,114,0,31,5,0,0,0,
    112,96,246,3,0,228,15,8,12,114,0,21,6,0,0,0,32,97,244,3,
    0,228,15,8,12,114,0,33,6,0,0,0,48,97,246,3,0,228,15,0,
    12,114,0,23,5,0,0,0,112,96,248,3,0,200,15,0,12,114,0,25,
    6,0,0,0,64,97,248,3,0,200,15,0,17,162,36,19,14,0,0,0,
    255,8,138,7,0,200,15,0,17,162,37,19,8,0,0,0,21,12,143,2,
    0,208,15,0,17,178,38,31,14,0,0,0,255,8,138,7,0,226,15,4,
    128,169,36,36,0,0,0,0,0,229,16,0,0,166,14,0,17,178,39,31,
    8,0,0,0,33,12,143,2,0,208,15,0,17,194,40,23,14,0,0,0,
    255,8,138,7,0,226,15,4,128,185,38,38,0,0,0,0,0,229,16,0,
    0,230,14,0,17,194,41,23,8,0,0,0,25,12,143,2,0,208,15,0,
    128,201,40,40,0,0,0,0,0,229,16,0,0,34,15,0,12,114,0,27,
    5,0,0,0,112,96,250,3,0,200,15,0,12,114,0,29,6,0,0,0,
    80,97,250,3,0,226,15,0,48,162,7,36,255,0,0,160,0,72,0,0,
    0,228,79,0,48,178,9,38,255,0,0,160,0,72,0,0,0,228,143,0,
    48,194,11,40,255,0,0,160,0,72,0,0,0,206,15,1,71,89,0,0,
    176,1,0,0,0,0,128,3,0,234,15,0,128,121,13,34,0,0,0,0,
    0,229,16,0,0,164,14,0,48,114,13,13,255,0,0,160,0,72,0,0,
    0,226,79,0,71,121,0,0,128,1,0,0,0,0,128,3,0,234,15,0,
    12,114,0,19,5,0,0,0,112,96,244,3,0,228,15,8,12,114,0,31,
    5,0,0,0,112,96,246,3,0,228,15,8,12,114,0,21,6,0,0,0,
    32,97,244,3,0,228,15,8,12,114,0,33,6,0,0,0,48,97,246,3,
    0,228,15,0,12,114,0,23,5,0,0,0,112,96,248,3,0,200,15,0,
    12,114,0,25,6,0,0,0,64,97,248,3,0,200,15,0,17,162,38,19,
    14,0,0,0,255,24,138,7,0,200,15,0,17,162,39,19,8,0,0,0,
    21,28,143,2,0,208,15,0,17,178,36,31,14,0,0,0,255,24,138,7,
    0,226,15,4,128,169,38,38,0,0,0,0,0,235,16,0,0,166,14,0,
    17,178,37,31,8,0,0,0,33,28,143,2,0,208,15,0,17,194,34,23,
    14,0,0,0,255,24,138,7,0,226,15,4,128,185,36,36,0,0,0,0,
    0,235,16,0,0,230,14,0,17,194,35,23,8,0,0,0,25,28,143,2,
    0,208,15,0,12,114,0,27,5,0,0,0,112,96,250,3,0,226,15,0,
    128,201,34,34,0,0,0,0,0,235,16,0,0,38,15,0,12,114,0,29,
    6,0,0,0,80,97,250,3,0,216,15,0,17,210,40,27,14,0,0,0,
    255,24,140,7,0,200,15,0,17,210,41,27,8,0,0,0,29,28,15,3,
    0,208,15,0,128,217,40,40,0,0,0,0,0,235,16,0,0,98,15,0,
    16,163,7,0,38,0,0,0,0,16,48,0,0,176,64,0,16,179,9,0,
    36,0,0,0,0,16,48,0,0,240,128,0,16,195,11,0,34,0,0,0,
    0,16,48,0,0,48,1,1,16,211,13,0,40,0,0,0,0,16,48,0,
    0,100,0,2,65,121,2,0,0,0,0,0,0,0,128,3,0,234,223,1,
    85,115,255,2,0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,
    208,14,0,0,0,0,128,3,0,226,15,0,71,137,0,0,192,12,0,0,
    0,0,128,3,0,234,15,0,17,114,40,19,16,0,0,0,255,8,140,7,
    0,226,15,0,36,118,18,255,0,97,0,0,255,0,142,7,0,198,15,0,
    17,114,41,19,10,0,0,0,21,12,15,3,0,228,15,0,17,114,34,31,
    16,0,0,0,255,8,140,7,0,200,15,0,17,114,35,31,10,0,0,0,
    33,12,15,3,0,228,15,0,17,114,36,23,16,0,0,0,255,8,140,7,
    0,200,15,0,17,114,37,23,10,0,0,0,25,12,15,3,0,228,15,0,
    17,114,38,27,16,0,0,0,255,8,140,7,0,200,15,0,17,114,39,27,
    10,0,0,0,29,12,15,3,0,228,15,0,12,120,0,18,2,0,0,0,
    112,82,252,3,0,216,15,0,71,233,0,0,112,10,0,0,0,0,128,3,
    0,234,15,0,12,120,0,18,3,0,0,0,112,82,252,3,0,216,15,0,
    71,105,0,0,160,8,0,0,0,0,128,3,0,234,15,0,11,120,0,2,
    0,0,128,63,0,208,252,3,0,216,47,0,71,105,0,0,32,4,0,0,
    0,0,128,3,0,234,15,0,85,115,255,3,0,0,0,0,0,0,16,0,
    0,226,15,0,69,121,3,0,240,0,0,0,0,0,128,3,0,226,15,0,
    71,41,0,0,208,0,0,0,0,0,128,3,0,234,15,0,18,120,20,7,
    255,255,255,127,255,192,142,7,0,228,15,2,25,120,18,255,16,0,0,0,
    7,22,1,0,0,228,15,0,12,120,0,20,0,0,128,127,112,64,244,3,
    0,200,15,0,7,120,20,18,255,127,0,0,0,0,0,5,0,226,15,0,
    36,120,18,7,0,0,1,0,255,0,142,7,0,198,15,0,18,120,22,20,
    1,0,0,0,255,192,142,7,0,228,15,0,7,114,18,18,255,0,0,0,
    0,0,0,5,0,228,15,0,12,120,0,22,1,0,0,0,112,80,244,3,
    0,228,15,0,22,120,23,20,16,118,0,0,23,0,0,0,0,228,15,0,
    12,120,0,18,0,0,0,128,112,86,116,1,0,200,15,0,12,120,0,18,
    0,0,0,128,112,48,116,1,0,216,15,0,16,168,23,23,1,0,0,0,
    255,224,255,7,0,208,15,0,133,115,0,40,0,0,0,0,23,229,16,0,
    0,228,1,0,65,121,3,0,0,0,0,0,0,0,128,3,0,234,15,0,
    85,115,255,3,0,0,0,0,0,0,16,0,0,226,15,0,69,121,3,0,
    240,0,0,0,0,0,128,3,0,226,15,0,71,57,0,0,208,0,0,0,
    0,0,128,3,0,234,15,0,18,120,20,9,255,255,255,127,255,192,142,7,
    0,228,15,2,25,120,18,255,16,0,0,0,9,22,1,0,0,228,15,0,
    12,120,0,20,0,0,128,127,112,64,244,3,0,200,15,0,7,120,20,18,
    255,127,0,0,0,0,0,5,0,226,15,0,36,120,18,9,0,0,1,0,
    255,0,142,7,0,198,15,0,18,120,22,20,1,0,0,0,255,192,142,7,
    0,228,15,0,7,114,18,18,255,0,0,0,0,0,0,5,0,228,15,0,
    12,120,0,22,1,0,0,0,112,80,244,3,0,228,15,0,22,120,23,20,
    16,118,0,0,23,0,0,0,0,228,31,0,12,120,0,18,0,0,0,128,
    112,86,116,1,0,200,15,0,12,120,0,18,0,0,0,128,112,48,116,1,
    0,216,15,0,16,168,23,23,1,0,0,0,255,224,255,7,0,208,15,0,
    133,115,0,34,0,0,0,0,23,229,16,0,0,228,1,0,65,121,3,0,
    0,0,0,0,0,0,128,3,0,234,15,0,85,115,255,3,0,0,0,0,
    0,0,16,0,0,226,15,0,69,121,3,0,240,0,0,0,0,0,128,3,
    0,226,15,0,71,73,0,0,208,0,0,0,0,0,128,3,0,234,15,0,
    18,120,20,11,255,255,255,127,255,192,142,7,0,228,15,2,25,120,18,255,
    16,0,0,0,11,22,1,0,0,228,15,0,12,120,0,20,0,0,128,127,
    112,64,244,3,0,200,15,0,7,120,20,18,255,127,0,0,0,0,0,5,
    0,226,15,0,36,120,18,11,0,0,1,0,255,0,142,7,0,198,15,0,
    18,120,22,20,1,0,0,0,255,192,142,7,0,228,15,0,7,114,18,18,
    255,0,0,0,0,0,0,5,0,228,15,0,12,120,0,22,1,0,0,0,
    112,80,244,3,0,228,15,0,22,120,23,20,16,118,0,0,23,0,0,0,
    0,228,31,0,12,120,0,18,0,0,0,128,112,86,116,1,0,200,15,0,
    12,120,0,18,0,0,0,128,112,48,116,1,0,216,15,0,16,168,23,23,
    1,0,0,0,255,224,255,7,0,208,15,0,133,115,0,36,0,0,0,0,
    23,229,16,0,0,228,1,0,65,121,3,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,89,0,0,128,10,0,0,0,0,128,3,0,234,15,0,
    18,120,20,13,255,255,255,127,255,192,142,7,0,228,15,2,25,120,18,255,
    16,0,0,0,13,22,1,0,0,228,15,0,12,120,0,20,0,0,128,127,
    112,64,244,3,0,200,15,0,7,120,20,18,255,127,0,0,0,0,0,5,
    0,226,15,0,36,120,18,13,0,0,1,0,255,0,142,7,0,198,15,0,
    18,120,22,20,1,0,0,0,255,192,142,7,0,228,15,0,7,114,18,18,
    255,0,0,0,0,0,0,5,0,228,15,0,12,120,0,22,1,0,0,0,
    112,80,244,3,0,228,15,0,22,120,23,20,16,118,0,0,23,0,0,0,
    0,228,31,0,12,120,0,18,0,0,0,128,112,86,116,1,0,200,15,0,
    12,120,0,18,0,0,0,128,112,48,116,1,0,216,15,0,16,168,23,23,
    1,0,0,0,255,224,255,7,0,208,15,0,133,115,0,38,0,0,0,0,
    23,229,16,0,0,226,1,0,71,121,0,0,160,9,0,0,0,0,128,3,
    0,234,15,0,85,115,255,3,0,0,0,0,0,0,16,0,0,226,15,0,
    69,121,3,0,0,1,0,0,0,0,128,3,0,226,15,0,71,41,0,0,
    224,0,0,0,0,0,128,3,0,234,15,0,32,114,18,7,2,0,0,0,
    0,0,64,0,0,202,15,2,18,120,22,18,255,255,255,127,255,192,142,7,
    0,228,15,4,25,120,20,255,16,0,0,0,18,22,1,0,0,226,15,0,
    36,120,18,18,0,0,1,0,255,0,142,7,0,226,15,0,12,120,0,22,
    0,0,128,127,112,64,244,3,0,200,15,0,7,120,20,20,255,127,0,0,
    0,0,0,5,0,228,15,0,7,114,18,18,255,0,0,0,0,0,0,5,
    0,228,15,0,18,120,22,20,1,0,0,0,255,192,142,7,0,228,15,4,
    22,120,23,20,16,118,0,0,23,0,0,0,0,228,15,0,12,120,0,22,
    1,0,0,0,112,80,244,3,0,200,15,0,12,120,0,18,0,0,0,128,
    112,86,116,1,0,200,15,0,12,120,0,18,0,0,0,128,112,48,116,1,
    0,216,15,0,16,168,23,23,1,0,0,0,255,224,255,7,0,208,15,0,
    133,115,0,40,0,0,0,0,23,229,16,0,0,228,1,0,65,121,3,0,
    0,0,0,0,0,0,128,3,0,234,15,0,85,115,255,3,0,0,0,0,
    0,0,16,0,0,226,15,0,69,121,3,0,0,1,0,0,0,0,128,3,
    0,226,15,0,71,57,0,0,224,0,0,0,0,0,128,3,0,234,15,0,
    32,114,18,9,2,0,0,0,0,0,64,0,0,202,15,2,18,120,22,18,
    255,255,255,127,255,192,142,7,0,228,15,4,25,120,20,255,16,0,0,0,
    18,22,1,0,0,226,15,0,36,120,18,18,0,0,1,0,255,0,142,7,
    0,226,15,0,12,120,0,22,0,0,128,127,112,64,244,3,0,200,15,0,
    7,120,20,20,255,127,0,0,0,0,0,5,0,228,15,0,7,114,18,18,
    255,0,0,0,0,0,0,5,0,228,15,0,18,120,22,20,1,0,0,0,
    255,192,142,7,0,228,15,4,22,120,23,20,16,118,0,0,23,0,0,0,
    0,228,31,0,12,120,0,22,1,0,0,0,112,80,244,3,0,200,15,0,
    12,120,0,18,0,0,0,128,112,86,116,1,0,200,15,0,12,120,0,18,
    0,0,0,128,112,48,116,1,0,216,15,0,16,168,23,23,1,0,0,0,
    255,224,255,7,0,208,15,0,133,115,0,34,0,0,0,0,23,229,16,0,
    0,228,1,0,65,121,3,0,0,0,0,0,0,0,128,3,0,234,15,0,
    85,115,255,3,0,0,0,0,0,0,16,0,0,226,15,0,69,121,3,0,
    0,1,0,0,0,0,128,3,0,226,15,0,71,73,0,0,224,0,0,0,
    0,0,128,3,0,234,15,0,32,114,18,11,2,0,0,0,0,0,64,0,
    0,202,15,2,18,120,22,18,255,255,255,127,255,192,142,7,0,228,15,4,
    25,120,20,255,16,0,0,0,18,22,1,0,0,226,15,0,36,120,18,18,
    0,0,1,0,255,0,142,7,0,226,15,0,12,120,0,22,0,0,128,127,
    112,64,244,3,0,200,15,0,7,120,20,20,255,127,0,0,0,0,0,5,
    0,228,15,0,7,114,18,18,255,0,0,0,0,0,0,5,0,228,15,0,
    18,120,22,20,1,0,0,0,255,192,142,7,0,228,15,4,22,120,23,20,
    16,118,0,0,23,0,0,0,0,228,31,0,12,120,0,22,1,0,0,0,
    112,80,244,3,0,200,15,0,12,120,0,18,0,0,0,128,112,86,116,1,
    0,200,15,0,12,120,0,18,0,0,0,128,112,48,116,1,0,216,15,0,
    16,168,23,23,1,0,0,0,255,224,255,7,0,208,15,0,133,115,0,36,
    0,0,0,0,23,229,16,0,0,228,1,0,65,121,3,0,0,0,0,0,
    0,0,128,3,0,234,15,0,71,89,0,0,48,6,0,0,0,0,128,3,
    0,234,15,0,32,114,18,13,2,0,0,0,0,0,64,0,0,202,15,2,
    18,120,22,18,255,255,255,127,255,192,142,7,0,228,15,4,25,120,20,255,
    16,0,0,0,18,22,1,0,0,226,15,0,36,120,18,18,0,0,1,0,
    255,0,142,7,0,226,15,0,12,120,0,22,0,0,128,127,112,64,244,3,
    0,200,15,0,7,120,20,20,255,127,0,0,0,0,0,5,0,228,15,0,
    7,114,18,18,255,0,0,0,0,0,0,5,0,228,15,0,18,120,22,20,
    1,0,0,0,255,192,142,7,0,228,15,4,22,120,23,20,16,118,0,0,
    23,0,0,0,0,228,31,0,12,120,0,22,1,0,0,0,112,80,244,3,
    0,200,15,0,12,120,0,18,0,0,0,128,112,86,116,1,0,200,15,0,
    12,120,0,18,0,0,0,128,112,48,116,1,0,216,15,0,16,168,23,23,
    1,0,0,0,255,224,255,7,0,208,15,0,133,115,0,38,0,0,0,0,
    23,229,16,0,0,226,1,0,71,121,0,0,64,5,0,0,0,0,128,3,
    0,234,15,0,32,162,18,7,2,0,0,0,0,0,64,0,0,226,47,2,
    11,168,0,2,0,0,128,63,0,208,252,3,0,200,15,0,8,162,37,18,
    7,0,0,0,0,0,0,3,0,226,15,0,32,178,18,9,2,0,0,0,
    0,0,64,0,0,226,15,0,17,162,34,19,16,0,0,0,255,16,140,7,
    0,200,15,0,17,162,35,19,10,0,0,0,21,20,15,3,0,208,15,0,
    133,163,0,34,0,0,0,0,37,233,16,0,0,226,1,0,17,178,22,31,
    16,0,0,0,255,16,132,7,0,200,15,0,17,178,39,31,10,0,0,0,
    33,20,15,1,0,228,15,0,11,184,0,2,0,0,128,63,0,208,244,3,
    0,200,15,0,8,178,31,18,9,0,0,0,0,0,0,1,0,226,15,0,
    32,194,18,11,2,0,0,0,0,0,64,0,0,206,15,0,17,194,24,23,
    16,0,0,0,255,16,132,7,0,200,15,0,17,194,25,23,10,0,0,0,
    25,20,15,1,0,226,15,0,36,178,23,255,255,0,0,0,39,0,142,7,
    0,226,15,0,11,200,0,2,0,0,128,63,0,208,244,3,0,200,15,0,
    8,194,33,18,11,0,0,0,0,0,0,1,0,198,15,0,133,179,0,22,
    0,0,0,0,31,233,16,0,0,234,1,0,133,195,0,24,0,0,0,0,
    33,233,16,0,0,226,1,0,71,89,0,0,0,4,0,0,0,0,128,3,
    0,234,15,0,32,114,18,13,2,0,0,0,0,0,64,0,0,226,15,0,
    11,120,0,2,0,0,128,63,0,208,246,3,0,228,15,0,17,114,22,27,
    16,0,0,0,255,16,132,7,0,228,31,0,8,114,25,18,13,0,0,0,
    0,0,128,1,0,196,15,0,17,114,23,27,10,0,0,0,29,20,15,1,
    0,208,15,0,133,115,0,22,0,0,0,0,25,233,16,0,0,226,1,0,
    71,121,0,0,144,3,0,0,0,0,128,3,0,234,15,0,11,120,0,2,
    0,0,128,63,0,208,252,3,0,216,47,0,71,105,0,0,160,0,0,0,
    0,0,128,3,0,234,15,0,4,163,23,0,7,0,0,0,0,8,32,0,
    0,48,14,2,4,179,25,0,9,0,0,0,0,8,32,0,0,112,14,0,
    4,195,27,0,11,0,0,0,0,8,32,0,0,162,14,0,133,163,0,40,
    0,0,0,0,23,229,16,0,0,232,17,0,133,179,0,34,0,0,0,0,
    25,229,16,0,0,232,33,0,133,195,0,36,0,0,0,0,27,229,16,0,
    0,226,65,0,71,89,0,0,0,3,0,0,0,0,128,3,0,234,15,0,
    4,115,23,0,13,0,0,0,0,8,32,0,0,36,30,0,133,115,0,38,
    0,0,0,0,23,229,16,0,0,226,17,0,71,121,0,0,208,2,0,0,
    0,0,128,3,0,234,15,0,32,162,23,7,2,0,0,0,0,0,64,0,
    0,228,15,10,32,178,25,9,2,0,0,0,0,0,64,0,0,196,15,0,
    32,194,27,11,2,0,0,0,0,0,64,0,0,228,15,0,4,163,23,0,
    23,0,0,0,0,8,32,0,0,48,14,0,4,179,25,0,25,0,0,0,
    0,8,32,0,0,112,14,0,4,195,27,0,27,0,0,0,0,8,32,0,
    0,162,14,0,133,163,0,40,0,0,0,0,23,229,16,0,0,232,17,0,
    133,179,0,34,0,0,0,0,25,229,16,0,0,232,33,0,133,195,0,36,
    0,0,0,0,27,229,16,0,0,226,65,0,71,89,0,0,48,2,0,0,
    0,0,128,3,0,234,15,0,32,114,23,13,2,0,0,0,0,0,64,0,
    0,204,31,0,4,115,23,0,23,0,0,0,0,8,32,0,0,36,14,0,
    133,115,0,38,0,0,0,0,23,229,16,0,0,226,17,0,71,121,0,0,
    240,1,0,0,0,0,128,3,0,234,15,0,32,162,18,7,2,0,0,0,
    0,0,64,0,0,226,47,10,11,168,0,2,0,0,128,63,0,208,252,3,
    0,226,15,0,32,178,20,9,2,0,0,0,0,0,64,0,0,228,15,8,
    32,194,24,11,2,0,0,0,0,0,64,0,0,226,15,0,8,162,18,18,
    7,0,0,0,0,0,0,3,0,228,15,0,17,162,38,19,16,0,0,0,
    255,24,140,7,0,200,15,0,16,163,36,0,18,0,0,0,0,24,32,0,
    0,98,0,0,17,162,39,19,10,0,0,0,21,28,15,3,0,226,15,0,
    32,210,18,13,2,0,0,0,0,0,64,0,0,206,31,0,133,163,0,38,
    0,0,0,0,36,235,16,0,0,226,33,0,17,178,22,31,16,0,0,0,
    255,24,132,7,0,200,15,0,17,178,41,31,10,0,0,0,33,28,15,1,
    0,228,15,0,11,184,0,2,0,0,128,63,0,208,244,3,0,200,15,0,
    8,178,20,20,9,0,0,0,0,0,0,1,0,204,15,0,16,179,34,0,
    20,0,0,0,0,24,32,0,0,100,14,0,11,200,0,2,0,0,128,63,
    0,208,244,3,0,200,15,0,8,194,32,24,11,0,0,0,0,0,0,1,
    0,204,15,0,16,195,32,0,32,0,0,0,0,24,32,0,0,164,14,0,
    11,216,0,2,0,0,128,63,0,208,244,3,0,200,15,0,8,210,30,18,
    13,0,0,0,0,0,0,1,0,204,15,0,16,211,30,0,30,0,0,0,
    0,24,32,0,0,228,14,0,17,194,18,23,16,0,0,0,255,24,132,7,
    0,200,15,0,17,194,37,23,10,0,0,0,25,28,15,1,0,226,31,0,
    36,178,23,255,255,0,0,0,41,0,142,7,0,206,15,0,17,210,24,27,
    16,0,0,0,255,24,132,7,0,226,15,4,133,179,0,22,0,0,0,0,
    34,235,16,0,0,230,33,0,17,210,25,27,10,0,0,0,29,28,15,1,
    0,226,15,0,36,194,22,255,255,0,0,0,18,0,142,7,0,228,31,0,
    36,194,23,255,255,0,0,0,37,0,142,7,0,208,15,0,133,195,0,22,
    0,0,0,0,32,235,16,0,0,232,65,0,133,211,0,24,0,0,0,0,
    30,235,16,0,0,228,129,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,36,116,23,255,4,0,0,0,255,0,142,7,0,228,31,0,
    36,114,20,255,255,0,0,0,19,0,142,7,0,200,15,0,37,122,20,23,
    0,0,0,0,20,0,142,7,0,200,15,0,36,114,19,255,255,0,0,0,
    20,0,142,7,0,226,15,0,12,114,0,20,5,0,0,0,112,96,244,3,
    0,200,15,0,12,114,0,21,6,0,0,0,32,97,244,3,0,216,15,0,
    71,169,0,0,176,233,255,255,255,255,131,3,0,234,15,0,65,121,0,0,
    0,0,0,0,0,0,128,3,0,234,15,0,71,121,0,0,224,7,0,0,
    0,0,128,3,0,234,15,0,25,120,15,5,2,0,0,0,6,18,0,0,
    0,226,31,16,85,115,255,0,0,0,0,0,0,0,16,0,0,226,15,0,
    25,120,8,255,2,0,0,0,6,22,1,0,0,226,15,0,69,121,0,0,
    48,5,0,0,0,0,128,3,0,226,15,0,12,114,0,15,0,0,0,0,
    112,64,244,3,0,200,15,0,12,114,0,8,255,0,0,0,32,65,244,3,
    0,216,15,0,71,169,0,0,240,4,0,0,0,0,128,3,0,234,15,0,
    11,120,0,2,0,0,128,63,0,208,244,3,0,216,15,0,71,41,0,0,
    16,2,0,0,0,0,128,3,0,234,15,0,36,114,10,255,255,0,0,0,
    0,0,142,7,0,228,15,0,36,114,31,255,255,0,0,0,255,0,142,7,
    0,228,15,0,36,118,33,255,0,0,0,0,255,0,142,7,0,228,15,0,
    36,120,14,10,16,0,0,0,255,0,142,7,0,226,15,4,25,120,28,10,
    4,0,0,0,31,2,1,0,0,200,15,0,16,124,24,14,7,0,0,0,
    255,224,245,15,0,200,15,0,16,124,25,28,8,0,0,0,255,228,127,9,
    0,208,47,0,128,121,16,24,0,0,0,0,0,237,16,0,0,162,14,0,
    16,122,10,10,0,0,0,0,255,224,245,7,0,202,15,0,36,114,31,255,
    255,0,0,0,31,6,14,1,0,226,15,0,12,114,0,10,15,0,0,0,
    112,96,244,3,0,200,15,0,12,114,0,31,8,0,0,0,32,97,244,3,
    0,216,15,0,36,166,27,255,0,0,0,0,255,0,142,7,0,226,15,0,
    17,162,26,33,24,0,0,0,255,32,134,7,0,200,15,0,17,162,27,27,
    25,0,0,0,255,36,143,1,0,226,15,0,36,114,20,255,255,0,0,0,
    16,0,142,7,0,228,79,0,36,114,21,255,255,0,0,0,17,0,142,7,
    0,228,15,0,36,114,22,255,255,0,0,0,18,0,142,7,0,228,15,0,
    36,114,23,255,255,0,0,0,19,0,142,7,0,208,15,0,128,169,20,26,
    0,0,0,0,0,237,16,0,0,162,14,0,16,124,24,14,9,0,0,0,
    255,224,247,15,0,226,15,0,36,166,29,255,0,0,0,0,255,0,142,7,
    0,198,15,0,16,124,25,28,10,0,0,0,255,228,255,9,0,228,15,0,
    17,162,28,29,24,0,0,0,255,32,134,7,0,200,15,0,17,162,29,29,
    25,0,0,0,255,36,143,1,0,228,15,0,133,115,0,24,0,0,0,0,
    16,237,16,0,0,236,1,0,133,163,0,28,0,0,0,0,20,237,16,0,
    0,226,65,0,16,122,10,10,0,0,0,0,255,224,245,7,0,202,15,0,
    36,114,31,255,255,0,0,0,31,6,14,1,0,226,15,0,12,114,0,10,
    15,0,0,0,112,96,244,3,0,200,15,0,12,114,0,31,8,0,0,0,
    32,97,244,3,0,216,15,0,71,169,0,0,48,254,255,255,255,255,131,3,
    0,234,31,0,71,121,0,0,192,2,0,0,0,0,128,3,0,234,15,0,
    36,114,10,255,255,0,0,0,0,0,142,7,0,228,15,0,36,114,29,255,
    255,0,0,0,255,0,142,7,0,228,15,0,36,118,31,255,0,0,0,0,
    255,0,142,7,0,228,15,0,36,120,14,10,16,0,0,0,255,0,142,7,
    0,226,15,4,25,120,28,10,4,0,0,0,29,2,1,0,0,200,15,0,
    16,124,24,14,7,0,0,0,255,224,245,15,0,200,31,0,16,124,25,28,
    8,0,0,0,255,228,127,9,0,208,47,0,128,121,20,24,0,0,0,0,
    0,237,16,0,0,162,0,0,16,122,10,10,0,0,0,0,255,224,245,7,
    0,202,15,0,36,114,29,255,255,0,0,0,29,6,14,1,0,226,15,0,
    12,114,0,10,15,0,0,0,112,96,244,3,0,200,15,0,12,114,0,29,
    8,0,0,0,32,97,244,3,0,216,15,0,17,162,26,31,24,0,0,0,
    255,32,134,7,0,226,15,0,36,166,27,255,0,0,0,0,255,0,142,7,
    0,202,15,0,17,162,27,27,25,0,0,0,255,36,143,1,0,204,15,0,
    16,124,24,14,9,0,0,0,255,224,247,15,0,200,31,0,16,124,25,28,
    10,0,0,0,255,228,255,9,0,228,15,0,16,122,10,10,0,0,0,0,
    255,224,249,7,0,226,15,0,85,115,255,2,0,0,0,0,0,0,16,0,
    0,226,15,0,69,121,2,0,112,1,0,0,0,0,128,3,0,228,15,0,
    12,114,0,10,15,0,0,0,112,96,246,3,0,226,15,0,36,114,29,255,
    255,0,0,0,29,6,14,2,0,202,15,0,12,114,0,29,8,0,0,0,
    48,97,246,3,0,226,15,0,36,114,16,255,255,0,0,0,20,0,142,7,
    0,228,79,2,36,114,17,255,255,0,0,0,21,0,142,7,0,228,15,0,
    36,114,18,255,255,0,0,0,22,0,142,7,0,228,15,0,36,114,19,255,
    255,0,0,0,23,0,142,7,0,228,15,0,32,114,23,23,2,0,0,0,
    0,0,64,0,0,228,15,8,32,114,22,22,2,0,0,0,0,0,64,0,
    0,196,15,0,32,114,21,21,2,0,0,0,0,0,64,0,0,228,15,8,
    32,114,20,20,2,0,0,0,0,0,64,0,0,226,15,0,128,169,16,26,
    0,0,0,0,0,237,16,0,0,110,1,0,133,115,0,24,0,0,0,0,
    20,237,16,0,0,226,1,0,71,41,0,0,128,0,0,0,0,0,128,3,
    0,234,15,0,36,118,21,255,0,0,0,0,255,0,142,7,0,228,31,0,
    32,114,19,19,2,0,0,0,0,0,64,0,0,196,15,2,32,114,18,18,
    2,0,0,0,0,0,64,0,0,226,15,0,17,114,20,21,24,0,0,0,
    255,32,132,7,0,226,15,0,32,114,17,17,2,0,0,0,0,0,64,0,
    0,228,15,8,32,114,16,16,2,0,0,0,0,0,64,0,0,226,15,0,
    17,114,21,21,25,0,0,0,255,36,15,1,0,208,15,0,133,115,0,20,
    0,0,0,0,16,237,16,0,0,228,1,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,71,185,0,0,112,253,255,255,255,255,131,3,
    0,234,15,0,65,121,0,0,0,0,0,0,0,0,128,3,0,234,15,0,
    18,120,15,5,252,255,255,255,255,192,142,7,0,200,15,0,16,114,8,0,
    15,0,0,0,255,224,247,7,0,200,15,0,12,114,0,8,5,0,0,0,
    112,96,244,3,0,226,15,0,36,114,19,255,255,0,0,0,6,6,142,1,
    0,202,31,2,12,114,0,19,6,0,0,0,32,97,244,3,0,216,15,0,
    71,41,0,0,16,2,0,0,0,0,128,3,0,234,15,0,11,120,0,2,
    0,0,128,63,0,208,244,3,0,216,15,0,71,41,0,0,16,1,0,0,
    0,0,128,3,0,234,15,0,85,115,255,0,0,0,0,0,0,0,16,0,
    0,226,15,0,69,121,0,0,224,0,0,0,0,0,128,3,0,228,15,0,
    25,120,15,8,2,0,0,0,19,2,1,0,0,226,31,4,36,120,14,8,
    4,0,0,0,255,0,142,7,0,226,15,0,130,124,4,0,7,0,0,0,
    0,0,0,8,0,228,15,0,130,124,5,0,8,0,0,0,0,0,0,8,
    0,202,47,0,128,121,17,14,4,0,0,0,0,233,16,12,0,162,14,0,
    16,122,8,8,0,0,0,0,255,224,245,7,0,226,15,0,130,124,4,0,
    9,0,0,0,0,0,0,8,0,228,15,0,130,124,5,0,10,0,0,0,
    0,0,0,8,0,228,15,0,36,114,19,255,255,0,0,0,19,6,14,1,
    0,226,15,0,12,114,0,8,5,0,0,0,112,96,244,3,0,200,15,0,
    12,114,0,19,6,0,0,0,32,97,244,3,0,226,15,0,133,121,0,14,
    17,0,0,0,4,233,16,12,0,246,65,0,71,169,0,0,48,255,255,255,
    255,255,131,3,0,234,15,0,65,121,0,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,121,0,0,224,0,0,0,0,0,128,3,0,234,15,0,
    25,120,15,8,2,0,0,0,19,2,1,0,0,226,31,4,36,120,14,8,
    4,0,0,0,255,0,142,7,0,226,15,0,130,124,4,0,7,0,0,0,
    0,0,0,8,0,196,15,0,130,124,5,0,8,0,0,0,0,0,0,8,
    0,202,47,0,128,121,17,14,4,0,0,0,0,233,16,12,0,162,14,0,
    16,122,8,8,0,0,0,0,255,224,245,7,0,226,15,0,130,124,4,0,
    9,0,0,0,0,0,0,8,0,228,15,0,130,124,5,0,10,0,0,0,
    0,0,0,8,0,228,15,0,36,114,19,255,255,0,0,0,19,6,14,1,
    0,226,15,0,12,114,0,8,5,0,0,0,112,96,244,3,0,200,15,0,
    12,114,0,19,6,0,0,0,32,97,244,3,0,226,15,0,32,114,17,17,
    2,0,0,0,0,0,64,0,0,208,79,0,133,121,0,14,17,0,0,0,
    4,233,16,12,0,230,1,0,71,169,0,0,32,255,255,255,255,255,131,3,
    0,234,15,0,65,121,1,0,0,0,0,0,0,0,128,3,0,234,15,0,
    12,114,0,12,255,0,0,0,112,82,244,3,0,216,15,0,71,169,0,0,
    240,221,255,255,255,255,131,3,0,234,15,0,77,121,0,0,0,0,0,0,
    0,0,128,3,0,234,15,0,25,121,14,0,0,0,0,0,0,37,0,0,
    0,36,14,0,12,122,0,14,0,92,0,0,112,96,244,3,0,200,31,0,
    12,122,0,255,0,93,0,0,32,97,244,3,0,216,15,0,77,41,0,0,
    0,0,0,0,0,0,128,3,0,234,15,0,25,121,0,0,0,0,0,0,
    0,33,0,0,0,34,14,0,36,116,2,255,4,0,0,0,255,0,142,7,
    0,226,15,0,12,122,0,255,0,96,0,0,112,82,244,3,0,226,15,0,
    36,114,15,255,255,0,0,0,255,0,142,7,0,226,15,0,12,122,0,255,
    0,97,0,0,112,82,246,3,0,228,15,0,7,120,16,2,2,0,0,0,
    0,0,0,5,0,228,15,4,7,120,17,2,2,0,0,0,0,0,128,5,
    0,228,15,0,7,120,16,16,8,0,0,0,0,0,128,0,0,196,15,0,
    7,120,17,17,8,0,0,0,0,0,0,0,0,228,15,0,17,122,10,14,
    0,90,0,0,255,32,132,7,0,200,15,0,17,122,11,14,0,91,0,0,
    15,36,15,1,0,208,15,0,129,115,12,10,0,0,0,0,0,235,30,0,
    0,162,14,0,36,116,19,255,24,0,0,0,255,0,142,7,0,198,15,0,
    129,115,20,10,0,8,0,0,0,235,30,0,0,226,142,0,37,118,18,12,
    0,88,0,0,19,0,142,7,0,200,79,0,36,120,13,13,24,0,0,0,
    255,2,142,7,0,228,15,0,36,114,24,255,255,0,0,0,18,0,142,7,
    0,228,15,0,36,120,25,19,1,0,0,0,13,2,142,7,0,208,15,0,
    129,115,12,24,0,16,0,0,0,235,30,0,0,226,14,0,16,122,14,14,
    0,3,0,0,255,224,247,7,0,202,15,0,36,114,15,255,255,0,0,0,
    15,6,142,1,0,226,15,0,12,122,0,14,0,92,0,0,112,96,246,3,
    0,226,15,0,85,115,255,0,0,0,0,0,0,0,16,0,0,226,15,0,
    69,121,0,0,240,24,0,0,0,0,128,3,0,228,15,0,12,122,0,15,
    0,93,0,0,48,97,246,3,0,200,15,0,3,120,26,255,8,0,0,0,
    0,0,0,0,0,228,15,0,16,114,19,12,20,0,0,128,255,224,245,7,
    0,202,143,0,36,120,12,13,1,0,0,0,21,14,14,1,0,226,15,0,
    12,122,0,19,0,94,0,0,112,16,244,3,0,200,15,0,12,122,0,12,
    0,95,0,0,32,17,244,3,0,200,15,0,7,122,19,19,0,94,0,0,
    0,0,0,1,0,228,15,0,7,122,18,12,0,95,0,0,0,0,0,1,
    0,228,15,0,12,114,0,19,0,0,0,0,112,64,244,3,0,200,31,0,
    12,114,0,18,255,0,0,0,32,65,244,3,0,216,15,0,71,169,0,0,
    48,24,0,0,0,0,128,3,0,234,15,2,129,115,10,24,0,0,0,0,
    0,235,30,0,0,168,14,0,129,115,12,24,0,8,0,0,0,235,30,0,
    0,226,14,0,36,114,27,21,16,0,0,0,255,2,142,7,0,228,15,4,
    36,114,29,21,17,0,0,0,255,2,142,7,0,228,15,0,36,114,21,255,
    255,0,0,0,0,0,142,7,0,228,15,0,36,114,23,255,255,0,0,0,
    255,0,142,7,0,196,15,0,37,114,10,20,16,0,0,0,10,0,142,7,
    0,200,79,0,37,114,12,20,17,0,0,0,12,0,142,7,0,200,143,0,
    36,120,20,11,1,0,0,0,27,2,142,7,0,228,15,0,36,120,22,13,
    1,0,0,0,29,2,142,7,0,228,15,0,16,122,29,21,0,0,0,0,
    255,224,245,7,0,226,15,0,85,115,255,1,0,0,0,0,0,0,16,0,
    0,226,15,0,69,121,1,0,64,8,0,0,0,0,128,3,0,230,15,0,
    36,114,31,255,255,0,0,0,23,6,14,1,0,226,15,0,16,122,25,29,
    0,0,0,0,255,224,245,7,0,202,15,0,36,114,27,255,255,0,0,0,
    31,6,14,1,0,226,15,0,16,122,35,25,0,0,0,0,255,224,245,7,
    0,202,15,0,36,114,37,255,255,0,0,0,27,6,14,1,0,226,15,0,
    71,153,0,0,48,6,0,0,0,0,128,3,0,234,143,2,36,118,24,255,
    0,96,0,0,255,0,142,7,0,202,15,0,12,120,0,24,2,0,0,0,
    112,82,244,3,0,216,15,0,71,169,0,0,224,3,0,0,0,0,128,3,
    0,234,15,0,12,120,0,24,3,0,0,0,112,82,244,3,0,216,15,0,
    71,41,0,0,32,2,0,0,0,0,128,3,0,234,15,0,12,114,0,21,
    19,0,0,0,112,96,244,3,0,228,15,8,12,114,0,29,19,0,0,0,
    112,96,246,3,0,228,15,8,12,114,0,23,18,0,0,0,32,97,244,3,
    0,228,15,8,12,114,0,31,18,0,0,0,48,97,246,3,0,228,15,0,
    12,114,0,25,19,0,0,0,112,96,248,3,0,200,15,0,12,114,0,27,
    18,0,0,0,64,97,248,3,0,200,15,0,17,162,32,21,10,0,0,0,
    255,8,138,7,0,200,15,0,17,162,33,21,20,0,0,0,23,12,143,2,
    0,208,15,0,17,178,28,29,10,0,0,0,255,8,138,7,0,226,15,4,
    128,169,24,32,0,0,0,0,0,229,16,0,0,166,0,0,17,178,41,29,
    20,0,0,0,31,12,143,2,0,226,15,0,36,178,32,255,255,0,0,0,
    28,0,142,7,0,206,31,0,17,194,30,25,10,0,0,0,255,8,138,7,
    0,226,15,0,36,178,33,255,255,0,0,0,41,0,142,7,0,198,15,0,
    17,194,39,25,20,0,0,0,27,12,143,2,0,202,15,0,128,185,28,32,
    0,0,0,0,0,229,16,0,0,228,0,0,36,194,32,255,255,0,0,0,
    30,0,142,7,0,228,31,0,36,194,33,255,255,0,0,0,39,0,142,7,
    0,208,15,0,128,201,30,32,0,0,0,0,0,229,16,0,0,34,15,0,
    12,114,0,35,19,0,0,0,112,96,250,3,0,200,15,0,12,114,0,37,
    18,0,0,0,80,97,250,3,0,228,15,0,22,168,24,255,16,84,0,0,
    24,0,0,0,0,204,79,0,16,163,6,0,24,0,0,0,0,24,32,0,
    0,98,0,0,22,184,28,255,16,84,0,0,28,0,0,0,0,206,143,0,
    16,179,8,0,28,0,0,0,0,24,32,0,0,162,0,0,22,200,30,255,
    16,84,0,0,30,0,0,0,0,206,15,1,16,195,2,0,30,0,0,0,
    0,24,32,0,0,226,0,0,71,89,0,0,192,5,0,0,0,0,128,3,
    0,234,15,0,17,114,32,35,10,0,0,0,255,8,140,7,0,200,111,0,
    17,114,33,35,20,0,0,0,37,12,15,3,0,208,15,0,128,121,32,32,
    0,0,0,0,0,229,16,0,0,164,14,0,22,120,32,255,16,84,0,0,
    32,0,0,0,0,204,79,0,16,115,4,0,32,0,0,0,0,24,32,0,
    0,162,2,0,71,121,0,0,96,5,0,0,0,0,128,3,0,234,15,0,
    12,114,0,21,19,0,0,0,112,96,244,3,0,228,15,8,12,114,0,29,
    19,0,0,0,112,96,246,3,0,228,15,8,12,114,0,23,18,0,0,0,
    32,97,244,3,0,228,15,8,12,114,0,31,18,0,0,0,48,97,246,3,
    0,228,15,0,12,114,0,25,19,0,0,0,112,96,248,3,0,200,15,0,
    12,114,0,27,18,0,0,0,64,97,248,3,0,200,15,0,17,162,32,21,
    10,0,0,0,255,16,138,7,0,200,15,0,17,162,33,21,20,0,0,0,
    23,20,143,2,0,208,15,0,17,178,38,29,10,0,0,0,255,16,138,7,
    0,226,15,4,128,169,32,32,0,0,0,0,0,233,16,0,0,166,14,0,
    17,178,39,29,20,0,0,0,31,20,143,2,0,208,15,0,17,194,40,25,
    10,0,0,0,255,16,138,7,0,226,15,4,128,185,38,38,0,0,0,0,
    0,233,16,0,0,230,14,0,17,194,41,25,20,0,0,0,27,20,143,2,
    0,208,15,0,128,201,40,40,0,0,0,0,0,233,16,0,0,34,15,0,
    12,114,0,35,19,0,0,0,112,96,250,3,0,200,15,0,12,114,0,37,
    18,0,0,0,80,97,250,3,0,226,15,0,16,163,6,0,32,0,0,0,
    0,24,32,0,0,112,64,0,16,179,8,0,38,0,0,0,0,24,32,0,
    0,176,128,0,16,195,2,0,40,0,0,0,0,24,32,0,0,226,0,1,
    71,89,0,0,16,4,0,0,0,0,128,3,0,234,15,0,17,114,32,35,
    10,0,0,0,255,16,140,7,0,200,63,0,17,114,33,35,20,0,0,0,
    37,20,15,3,0,208,15,0,128,121,32,32,0,0,0,0,0,233,16,0,
    0,36,15,0,16,115,4,0,32,0,0,0,0,24,32,0,0,98,0,1,
    71,121,0,0,192,3,0,0,0,0,128,3,0,234,15,0,12,114,0,21,
    19,0,0,0,112,96,244,3,0,228,15,8,12,114,0,29,19,0,0,0,
    112,96,246,3,0,228,15,8,12,114,0,23,18,0,0,0,32,97,244,3,
    0,228,15,8,12,114,0,31,18,0,0,0,48,97,246,3,0,228,15,0,
    12,114,0,25,19,0,0,0,112,96,248,3,0,200,15,0,12,114,0,27,
    18,0,0,0,64,97,248,3,0,200,15,0,17,162,32,21,10,0,0,0,
    255,8,138,7,0,200,15,0,17,162,33,21,20,0,0,0,23,12,143,2,
    0,208,15,0,17,178,28,29,10,0,0,0,255,8,138,7,0,226,15,4,
    128,169,24,32,0,0,0,0,0,229,16,0,0,166,0,0,17,178,39,29,
    20,0,0,0,31,12,143,2,0,226,15,0,36,178,32,255,255,0,0,0,
    28,0,142,7,0,206,31,0,17,194,30,25,10,0,0,0,255,8,138,7,
    0,226,15,0,36,178,33,255,255,0,0,0,39,0,142,7,0,198,15,0,
    17,194,41,25,20,0,0,0,27,12,143,2,0,202,15,0,128,185,28,32,
    0,0,0,0,0,229,16,0,0,228,0,0,36,194,32,255,255,0,0,0,
    30,0,142,7,0,228,31,0,36,194,33,255,255,0,0,0,41,0,142,7,
    0,208,15,0,128,201,30,32,0,0,0,0,0,229,16,0,0,34,15,0,
    12,114,0,35,19,0,0,0,112,96,250,3,0,200,15,0,12,114,0,37,
    18,0,0,0,80,97,250,3,0,226,15,0,48,162,24,24,255,0,0,160,
    0,72,0,0,0,208,79,0,16,163,6,0,24,0,0,0,0,24,32,0,
    0,98,0,0,48,178,28,28,255,0,0,160,0,72,0,0,0,208,143,0,
    16,179,8,0,28,0,0,0,0,24,32,0,0,162,0,0,48,194,30,30,
    255,0,0,160,0,72,0,0,0,208,15,1,16,195,2,0,30,0,0,0,
    0,24,32,0,0,226,0,0,71,89,0,0,0,2,0,0,0,0,128,3,
    0,234,15,0,17,114,32,35,10,0,0,0,255,8,140,7,0,200,111,0,
    17,114,33,35,20,0,0,0,37,12,15,3,0,208,15,0,128,121,4,32,
    0,0,0,0,0,229,16,0,0,164,14,0,48,114,4,4,255,0,0,160,
    0,72,0,0,0,208,79,0,16,115,4,0,4,0,0,0,0,24,32,0,
    0,98,14,0,71,121,0,0,160,1,0,0,0,0,128,3,0,234,15,0,
    12,114,0,21,19,0,0,0,112,96,244,3,0,228,15,8,12,114,0,29,
    19,0,0,0,112,96,246,3,0,228,15,8,12,114,0,23,18,0,0,0,
    32,97,244,3,0,228,15,8,12,114,0,31,18,0,0,0,48,97,246,3,
    0,228,15,0,12,114,0,25,19,0,0,0,112,96,248,3,0,200,15,0,
    12,114,0,27,18,0,0,0,64,97,248,3,0,200,15,0,17,162,32,21,
    10,0,0,0,255,24,138,7,0,200,15,0,17,162,33,21,20,0,0,0,
    23,28,143,2,0,208,15,0,17,178,30,29,10,0,0,0,255,24,138,7,
    0,226,15,4,128,169,6,32,0,0,0,0,0,235,16,0,0,102,1,0,
    17,178,43,29,20,0,0,0,31,28,143,2,0,208,15,0,17,194,28,25,
    10,0,0,0,255,24,138,7,0,200,15,0,17,194,41,25,20,0,0,0,
    27,28,143,2,0,226,15,0,36,178,32,255,255,0,0,0,30,0,142,7,
    0,206,31,0,12,114,0,35,19,0,0,0,112,96,250,3,0,226,15,0,
    36,178,33,255,255,0,0,0,43,0,142,7,0,198,15,0,12,114,0,37,
    18,0,0,0,80,97,250,3,0,202,15,0,128,185,8,32,0,0,0,0,
    0,235,16,0,0,110,1,0,17,210,24,35,10,0,0,0,255,24,140,7,
    0,226,15,4,36,194,32,255,255,0,0,0,28,0,142,7,0,228,31,0,
    36,194,33,255,255,0,0,0,41,0,142,7,0,226,15,0,17,210,39,35,
    20,0,0,0,37,28,15,3,0,206,15,0,128,201,2,32,0,0,0,0,
    0,235,16,0,0,100,1,0,36,210,32,255,255,0,0,0,24,0,142,7,
    0,228,31,0,36,210,33,255,255,0,0,0,39,0,142,7,0,208,15,0,
    128,217,4,32,0,0,0,0,0,235,16,0,0,100,1,0,65,121,1,0,
    0,0,0,0,0,0,128,3,0,234,111,0,85,115,255,1,0,0,0,0,
    0,0,16,0,0,226,15,0,69,121,1,0,112,14,0,0,0,0,128,3,
    0,226,15,0,71,137,0,0,64,11,0,0,0,0,128,3,0,234,15,0,
    17,114,32,35,12,0,0,0,255,8,140,7,0,226,31,0,36,118,34,255,
    0,97,0,0,255,0,142,7,0,198,15,0,17,114,33,35,22,0,0,0,
    37,12,15,3,0,228,15,0,12,120,0,34,2,0,0,0,112,82,252,3,
    0,216,15,0,71,105,0,0,128,3,0,0,0,0,128,3,0,234,15,0,
    85,115,255,2,0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,
    208,0,0,0,0,0,128,3,0,226,15,0,71,41,0,0,176,0,0,0,
    0,0,128,3,0,234,15,0,36,118,36,255,0,98,0,0,255,0,142,7,
    0,226,15,0,40,122,34,6,0,98,0,0,0,0,0,0,0,226,15,2,
    36,118,37,255,0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,36,
    0,0,240,63,0,208,244,3,0,18,14,0,8,114,34,34,6,0,0,0,
    0,0,0,1,0,228,31,0,8,114,35,35,7,0,0,0,0,0,0,1,
    0,228,15,0,17,114,36,21,12,0,0,0,255,8,132,7,0,200,15,0,
    16,115,34,0,34,0,0,0,0,16,48,0,0,34,14,0,17,114,37,21,
    22,0,0,0,23,12,15,1,0,206,15,0,4,115,39,0,34,0,0,0,
    0,8,32,0,0,36,30,0,133,115,0,36,0,0,0,0,39,229,16,0,
    0,228,17,0,65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,
    85,115,255,2,0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,
    208,0,0,0,0,0,128,3,0,226,15,0,71,57,0,0,176,0,0,0,
    0,0,128,3,0,234,15,0,36,118,36,255,0,98,0,0,255,0,142,7,
    0,226,31,0,40,122,34,8,0,98,0,0,0,0,0,0,0,226,15,2,
    36,118,37,255,0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,36,
    0,0,240,63,0,208,244,3,0,18,14,0,8,114,34,34,8,0,0,0,
    0,0,0,1,0,228,31,0,8,114,35,35,9,0,0,0,0,0,0,1,
    0,228,15,0,17,114,28,29,12,0,0,0,255,8,132,7,0,200,15,0,
    16,115,34,0,34,0,0,0,0,16,48,0,0,34,14,0,17,114,29,29,
    22,0,0,0,31,12,15,1,0,206,15,0,4,115,37,0,34,0,0,0,
    0,8,32,0,0,36,30,0,133,115,0,28,0,0,0,0,37,229,16,0,
    0,228,17,0,65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,
    85,115,255,2,0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,
    208,0,0,0,0,0,128,3,0,226,15,0,71,73,0,0,176,0,0,0,
    0,0,128,3,0,234,15,0,36,118,30,255,0,98,0,0,255,0,142,7,
    0,226,15,0,40,122,28,2,0,98,0,0,0,0,0,0,0,226,159,2,
    36,118,31,255,0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,30,
    0,0,240,63,0,208,244,3,0,18,14,0,8,114,28,28,2,0,0,0,
    0,0,0,1,0,228,31,0,8,114,29,29,3,0,0,0,0,0,0,1,
    0,228,15,0,17,114,24,25,12,0,0,0,255,8,132,7,0,200,15,0,
    16,115,28,0,28,0,0,0,0,16,48,0,0,34,14,0,17,114,25,25,
    22,0,0,0,27,12,15,1,0,206,15,0,4,115,31,0,28,0,0,0,
    0,8,32,0,0,36,30,0,133,115,0,24,0,0,0,0,31,229,16,0,
    0,228,17,0,65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,
    71,89,0,0,32,11,0,0,0,0,128,3,0,234,15,0,36,118,28,255,
    0,98,0,0,255,0,142,7,0,226,31,0,40,122,24,4,0,98,0,0,
    0,0,0,0,0,226,15,2,36,118,29,255,0,99,0,0,255,0,142,7,
    0,204,15,0,42,116,0,28,0,0,240,63,0,208,244,3,0,18,14,0,
    8,114,24,24,4,0,0,0,0,0,0,1,0,228,31,0,8,114,25,25,
    5,0,0,0,0,0,0,1,0,204,15,0,16,115,24,0,24,0,0,0,
    0,16,48,0,0,48,14,0,4,115,27,0,24,0,0,0,0,8,32,0,
    0,36,30,0,133,115,0,32,0,0,0,0,27,229,16,0,0,226,17,0,
    71,121,0,0,128,10,0,0,0,0,128,3,0,234,15,0,85,115,255,2,
    0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,208,1,0,0,
    0,0,128,3,0,226,15,0,71,41,0,0,176,1,0,0,0,0,128,3,
    0,234,15,0,36,118,40,255,0,98,0,0,255,0,142,7,0,226,15,0,
    40,122,38,6,0,98,0,0,0,0,0,0,0,226,15,2,36,118,41,255,
    0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,40,0,0,240,63,
    0,208,244,3,0,18,14,0,8,114,40,38,6,0,0,0,0,0,0,1,
    0,228,31,0,8,114,41,39,7,0,0,0,0,0,0,1,0,228,15,0,
    12,120,0,34,3,0,0,0,112,82,244,3,0,200,15,0,16,115,41,0,
    40,0,0,0,0,16,48,0,0,48,14,0,17,34,38,21,12,0,0,0,
    255,16,140,7,0,200,15,0,17,34,39,21,22,0,0,0,23,20,15,3,
    0,208,15,0,133,35,0,38,0,0,0,0,41,233,16,0,0,226,17,0,
    71,41,0,0,240,0,0,0,0,0,128,3,0,234,15,0,18,120,28,41,
    255,255,255,127,255,192,142,7,0,228,15,0,25,120,24,255,16,0,0,0,
    41,22,1,0,0,228,15,0,12,120,0,28,0,0,128,127,112,64,244,3,
    0,200,15,0,7,120,28,24,255,127,0,0,0,0,0,5,0,226,15,0,
    36,120,24,41,0,0,1,0,255,0,142,7,0,198,15,0,18,120,30,28,
    1,0,0,0,255,192,142,7,0,228,15,0,7,114,24,24,255,0,0,0,
    0,0,0,5,0,228,15,0,12,120,0,30,1,0,0,0,112,80,244,3,
    0,228,15,0,22,120,41,28,16,118,0,0,41,0,0,0,0,228,31,0,
    12,120,0,24,0,0,0,128,112,86,116,1,0,200,15,0,12,120,0,24,
    0,0,0,128,112,48,116,1,0,216,15,0,16,168,41,41,1,0,0,0,
    255,224,255,7,0,228,15,0,17,114,38,21,12,0,0,0,255,8,132,7,
    0,200,15,0,17,114,39,21,22,0,0,0,23,12,15,1,0,208,15,0,
    133,115,0,38,0,0,0,0,41,229,16,0,0,228,1,0,65,121,2,0,
    0,0,0,0,0,0,128,3,0,234,15,0,85,115,255,2,0,0,0,0,
    0,0,16,0,0,226,15,0,69,121,2,0,208,1,0,0,0,0,128,3,
    0,226,15,0,71,57,0,0,176,1,0,0,0,0,128,3,0,234,15,0,
    36,118,40,255,0,98,0,0,255,0,142,7,0,226,15,0,40,122,38,8,
    0,98,0,0,0,0,0,0,0,226,31,2,36,118,41,255,0,99,0,0,
    255,0,142,7,0,226,15,0,12,120,0,34,3,0,0,0,112,82,244,3,
    0,202,15,0,42,116,0,40,0,0,240,63,0,208,246,3,0,18,14,0,
    8,114,40,38,8,0,0,0,0,0,128,1,0,228,31,0,8,114,41,39,
    9,0,0,0,0,0,128,1,0,228,15,0,17,34,38,29,12,0,0,0,
    255,16,134,7,0,200,15,0,16,115,41,0,40,0,0,0,0,16,48,0,
    0,34,14,0,17,34,39,29,22,0,0,0,31,20,143,1,0,208,15,0,
    133,35,0,38,0,0,0,0,41,233,16,0,0,226,17,0,71,41,0,0,
    240,0,0,0,0,0,128,3,0,234,15,0,18,120,28,41,255,255,255,127,
    255,192,142,7,0,228,15,0,25,120,24,255,16,0,0,0,41,22,1,0,
    0,228,15,0,12,120,0,28,0,0,128,127,112,64,244,3,0,200,15,0,
    7,120,28,24,255,127,0,0,0,0,0,5,0,226,15,0,36,120,24,41,
    0,0,1,0,255,0,142,7,0,198,15,0,18,120,30,28,1,0,0,0,
    255,192,142,7,0,228,15,0,7,114,24,24,255,0,0,0,0,0,0,5,
    0,228,15,0,12,120,0,30,1,0,0,0,112,80,244,3,0,228,15,0,
    22,120,39,28,16,118,0,0,39,0,0,0,0,228,31,0,12,120,0,24,
    0,0,0,128,112,86,116,1,0,228,15,0,17,114,28,29,12,0,0,0,
    255,8,134,7,0,196,15,0,12,120,0,24,0,0,0,128,112,48,116,1,
    0,228,15,0,17,114,29,29,22,0,0,0,31,12,143,1,0,212,15,0,
    16,168,39,39,1,0,0,0,255,224,255,7,0,208,15,0,133,115,0,28,
    0,0,0,0,39,229,16,0,0,228,1,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,85,115,255,2,0,0,0,0,0,0,16,0,
    0,226,15,0,69,121,2,0,208,1,0,0,0,0,128,3,0,226,15,0,
    71,73,0,0,176,1,0,0,0,0,128,3,0,234,15,0,36,118,30,255,
    0,98,0,0,255,0,142,7,0,226,15,0,40,122,28,2,0,98,0,0,
    0,0,0,0,0,226,159,2,36,118,31,255,0,99,0,0,255,0,142,7,
    0,226,15,0,12,120,0,34,3,0,0,0,112,82,246,3,0,202,15,0,
    42,116,0,30,0,0,240,63,0,208,244,3,0,18,14,0,8,114,30,28,
    2,0,0,0,0,0,0,1,0,228,31,0,8,114,31,29,3,0,0,0,
    0,0,0,1,0,228,15,0,17,50,28,25,12,0,0,0,255,16,132,7,
    0,200,15,0,16,115,31,0,30,0,0,0,0,16,48,0,0,34,14,0,
    17,50,29,25,22,0,0,0,27,20,15,1,0,208,15,0,133,51,0,28,
    0,0,0,0,31,233,16,0,0,226,17,0,71,57,0,0,240,0,0,0,
    0,0,128,3,0,234,15,0,18,120,28,31,255,255,255,127,255,192,142,7,
    0,228,31,0,25,120,24,255,16,0,0,0,31,22,1,0,0,228,15,0,
    12,120,0,28,0,0,128,127,112,64,244,3,0,200,15,0,7,120,28,24,
    255,127,0,0,0,0,0,5,0,226,15,0,36,120,24,31,0,0,1,0,
    255,0,142,7,0,198,15,0,18,120,29,28,1,0,0,0,255,192,142,7,
    0,228,15,0,7,114,24,24,255,0,0,0,0,0,0,5,0,228,15,0,
    12,120,0,29,1,0,0,0,112,80,244,3,0,228,15,0,22,120,29,28,
    16,118,0,0,29,0,0,0,0,228,15,0,12,120,0,24,0,0,0,128,
    112,86,116,1,0,200,15,0,12,120,0,24,0,0,0,128,112,48,116,1,
    0,228,15,0,17,114,24,25,12,0,0,0,255,8,134,7,0,200,15,0,
    17,114,25,25,22,0,0,0,27,12,143,1,0,204,15,0,16,168,29,29,
    1,0,0,0,255,224,255,7,0,208,15,0,133,115,0,24,0,0,0,0,
    29,229,16,0,0,228,1,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,89,0,0,160,4,0,0,0,0,128,3,0,234,15,0,
    36,118,28,255,0,98,0,0,255,0,142,7,0,226,31,0,40,122,24,4,
    0,98,0,0,0,0,0,0,0,226,15,2,36,118,29,255,0,99,0,0,
    255,0,142,7,0,226,15,0,12,120,0,34,3,0,0,0,112,82,246,3,
    0,202,15,0,42,116,0,28,0,0,240,63,0,208,244,3,0,18,14,0,
    8,114,28,24,4,0,0,0,0,0,0,1,0,228,31,0,8,114,29,25,
    5,0,0,0,0,0,0,1,0,228,15,0,17,50,24,35,12,0,0,0,
    255,16,132,7,0,200,15,0,16,115,29,0,28,0,0,0,0,16,48,0,
    0,34,14,0,17,50,25,35,22,0,0,0,37,20,15,1,0,208,15,0,
    133,51,0,24,0,0,0,0,29,233,16,0,0,226,17,0,71,57,0,0,
    224,3,0,0,0,0,128,3,0,234,15,0,18,120,25,29,255,255,255,127,
    255,192,142,7,0,228,31,0,25,120,24,255,16,0,0,0,29,22,1,0,
    0,228,15,0,12,120,0,25,0,0,128,127,112,64,244,3,0,200,15,0,
    7,120,25,24,255,127,0,0,0,0,0,5,0,226,15,0,36,120,24,29,
    0,0,1,0,255,0,142,7,0,198,15,0,18,120,27,25,1,0,0,0,
    255,192,142,7,0,228,15,0,7,114,24,24,255,0,0,0,0,0,0,5,
    0,228,15,0,12,120,0,27,1,0,0,0,112,80,244,3,0,200,15,0,
    12,120,0,24,0,0,0,128,112,86,116,1,0,200,15,0,12,120,0,24,
    0,0,0,128,112,48,116,1,0,216,15,0,16,168,25,25,1,0,0,0,
    255,224,255,7,0,208,15,0,133,115,0,32,0,0,0,0,25,229,16,0,
    0,226,1,0,71,121,0,0,16,3,0,0,0,0,128,3,0,234,15,0,
    85,115,255,2,0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,
    176,0,0,0,0,0,128,3,0,226,15,0,71,41,0,0,144,0,0,0,
    0,0,128,3,0,234,15,0,36,118,38,255,0,98,0,0,255,0,142,7,
    0,226,31,0,40,122,32,6,0,98,0,0,0,0,0,0,0,226,15,2,
    36,118,39,255,0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,38,
    0,0,240,63,0,208,244,3,0,18,14,0,8,114,38,32,6,0,0,0,
    0,0,0,1,0,228,31,0,8,114,39,33,7,0,0,0,0,0,0,1,
    0,228,15,0,17,114,32,21,12,0,0,0,255,24,132,7,0,200,15,0,
    17,114,33,21,22,0,0,0,23,28,15,1,0,208,15,0,133,115,0,32,
    0,0,0,0,38,235,16,0,0,228,1,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,85,115,255,2,0,0,0,0,0,0,16,0,
    0,226,15,0,69,121,2,0,176,0,0,0,0,0,128,3,0,226,15,0,
    71,57,0,0,144,0,0,0,0,0,128,3,0,234,15,0,36,118,38,255,
    0,98,0,0,255,0,142,7,0,226,31,0,40,122,32,8,0,98,0,0,
    0,0,0,0,0,226,15,2,36,118,39,255,0,99,0,0,255,0,142,7,
    0,226,15,0,17,114,28,29,12,0,0,0,255,24,132,7,0,200,15,0,
    17,114,29,29,22,0,0,0,31,28,15,1,0,226,15,0,42,116,0,38,
    0,0,240,63,0,208,246,3,0,18,14,0,8,114,30,32,8,0,0,0,
    0,0,128,1,0,228,31,0,8,114,31,33,9,0,0,0,0,0,128,1,
    0,208,15,0,133,115,0,28,0,0,0,0,30,235,16,0,0,228,1,0,
    65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,85,115,255,2,
    0,0,0,0,0,0,16,0,0,226,15,0,69,121,2,0,176,0,0,0,
    0,0,128,3,0,226,15,0,71,73,0,0,144,0,0,0,0,0,128,3,
    0,234,15,0,36,118,30,255,0,98,0,0,255,0,142,7,0,226,31,0,
    40,122,28,2,0,98,0,0,0,0,0,0,0,226,143,2,36,118,31,255,
    0,99,0,0,255,0,142,7,0,226,15,0,17,114,24,25,12,0,0,0,
    255,24,132,7,0,200,15,0,17,114,25,25,22,0,0,0,27,28,15,1,
    0,226,15,0,42,116,0,30,0,0,240,63,0,208,246,3,0,18,14,0,
    8,114,28,28,2,0,0,0,0,0,128,1,0,228,31,0,8,114,29,29,
    3,0,0,0,0,0,128,1,0,208,15,0,133,115,0,24,0,0,0,0,
    28,235,16,0,0,228,1,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,89,0,0,144,0,0,0,0,0,128,3,0,234,15,0,
    36,118,24,255,0,98,0,0,255,0,142,7,0,226,31,0,40,122,28,4,
    0,98,0,0,0,0,0,0,0,226,15,2,36,118,25,255,0,99,0,0,
    255,0,142,7,0,204,15,0,42,116,0,24,0,0,240,63,0,208,246,3,
    0,100,0,0,17,114,24,35,12,0,0,0,255,24,132,7,0,200,31,0,
    17,114,25,35,22,0,0,0,37,28,15,1,0,198,15,0,8,114,28,28,
    4,0,0,0,0,0,128,1,0,228,47,0,8,114,29,29,5,0,0,0,
    0,0,128,1,0,208,15,0,133,115,0,24,0,0,0,0,28,235,16,0,
    0,228,1,0,65,121,1,0,0,0,0,0,0,0,128,3,0,234,15,0,
    36,118,27,255,0,0,0,0,255,0,142,7,0,228,31,0,36,114,24,255,
    255,0,0,0,21,0,142,7,0,228,15,0,36,114,25,255,255,0,0,0,
    23,0,142,7,0,200,15,0,37,120,24,27,4,0,0,0,24,0,142,7,
    0,200,15,0,36,114,21,255,255,0,0,0,24,0,142,7,0,226,15,0,
    12,114,0,24,19,0,0,0,112,96,244,3,0,226,15,0,36,114,23,255,
    255,0,0,0,25,0,142,7,0,198,15,0,12,114,0,25,18,0,0,0,
    32,97,244,3,0,216,15,0,71,169,0,0,112,232,255,255,255,255,131,3,
    0,234,15,0,65,121,0,0,0,0,0,0,0,0,128,3,0,234,15,0,
    12,114,0,26,255,0,0,0,112,82,244,3,0,216,15,0,71,169,0,0,
    0,230,255,255,255,255,131,3,0,234,15,0,77,121,0,0,0,0,0,0,
    0,0,128,3,0,234,15,0,71,121,0,0,240,255,255,255,255,255,131,3,
    0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,
    24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,
    0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,
    0,0,0,0,0,192,15,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,3,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,64,0,0,0,
    0,0,0,0,60,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,11,0,0,0,
    3,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    124,1,0,0,0,0,0,0,77,1,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    19,0,0,0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,208,2,0,0,0,0,0,0,216,0,0,0,0,0,0,0,
    2,0,0,0,8,0,0,0,8,0,0,0,0,0,0,0,24,0,0,0,
    0,0,0,0,225,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,168,3,0,0,0,0,0,0,112,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,41,0,0,0,7,0,0,0,0,0,0,2,
    0,0,0,0,0,0,0,0,0,0,0,0,24,4,0,0,0,0,0,0,
    164,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,4,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,57,0,0,0,7,0,0,0,
    0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,188,4,0,0,
    0,0,0,0,32,0,0,0,0,0,0,0,5,0,0,0,0,0,0,0,
    4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,73,0,0,0,
    0,0,0,112,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    220,4,0,0,0,0,0,0,36,0,0,0,0,0,0,0,3,0,0,0,
    0,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    105,0,0,0,0,0,0,112,64,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,5,0,0,0,0,0,0,180,0,0,0,0,0,0,0,
    3,0,0,0,13,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,17,1,0,0,1,0,0,112,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,180,5,0,0,0,0,0,0,32,0,0,0,
    0,0,0,0,3,0,0,0,0,0,0,0,4,0,0,0,0,0,0,0,
    8,0,0,0,0,0,0,0,45,1,0,0,11,0,0,112,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,216,5,0,0,0,0,0,0,
    16,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,8,0,0,0,
    0,0,0,0,8,0,0,0,0,0,0,0,238,0,0,0,9,0,0,0,
    64,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,232,5,0,0,
    0,0,0,0,16,0,0,0,0,0,0,0,3,0,0,0,4,0,0,0,
    8,0,0,0,0,0,0,0,16,0,0,0,0,0,0,0,159,0,0,0,
    1,0,0,0,66,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    248,5,0,0,0,0,0,0,144,1,0,0,0,0,0,0,0,0,0,0,
    13,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    82,0,0,0,1,0,0,0,6,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,8,0,0,0,0,0,0,128,62,0,0,0,0,0,0,
    3,0,0,0,8,0,0,46,128,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,6,0,0,0,5,0,0,0,0,74,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,168,0,0,0,
    0,0,0,0,168,0,0,0,0,0,0,0,8,0,0,0,0,0,0,0,
    1,0,0,0,5,0,0,0,248,5,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,136,64,0,0,0,0,0,0,
    136,64,0,0,0,0,0,0,8,0,0,0,0,0,0,0,1,0,0,0,
    5,0,0,0,0,74,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,168,0,0,0,0,0,0,0,168,0,0,0,
    0,0,0,0,8,0,0,0,0,0,0,0,2,0,1,1,64,0,0,0,
    168,65,0,0,0,0,0,0,0,0,0,0,0,0,0,0,8,0,1,0,
    80,0,0,0,0,0,0,0,0,0,0,0,17,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,127,69,76,70,
    2,1,1,65,8,0,0,0,0,0,0,0,2,0,190,0,1,0,0,0,
    0,0,0,0,0,0,0,0,0,65,0,0,0,0,0,0,128,61,0,0,
    0,0,0,0,4,80,0,6,64,0,56,0,3,0,64,0,14,0,1,0,
    0,46,115,104,115,116,114,116,97,98,0,46,115,116,114,116,97,98,0,46,
    115,121,109,116,97,98,0,46,115,121,109,116,97,98,95,115,104,110,100,120,
    0,46,110,111,116,101,46,110,118,46,116,107,105,110,102,111,0,46,110,111,
    116,101,46,110,118,46,99,117,105,110,102,111,0,46,110,118,46,105,110,102,
    111,0,46,116,101,120,116,46,100,100,112,95,99,111,110,118,101,114,116,95,
    99,111,112,121,0,46,110,118,46,105,110,102,111,46,100,100,112,95,99,111,
    110,118,101,114,116,95,99,111,112,121,0,46,110,118,46,115,104,97,114,101,
    100,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,
    110,118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,95,99,111,110,
    118,101,114,116,95,99,111,112,121,0,46,114,101,108,46,110,118,46,99,111,
    110,115,116,97,110,116,48,46,100,100,112,95,99,111,110,118,101,114,116,95,
    99,111,112,121,0,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,
    101,108,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,101,108,97,
    46,100,101,98,117,103,95,102,114,97,109,101,0,46,110,118,46,99,97,108,
    108,103,114,97,112,104,0,46,110,118,46,112,114,111,116,111,116,121,112,101,
    0,46,110,118,46,114,101,108,46,97,99,116,105,111,110,0,0,46,115,104,
    115,116,114,116,97,98,0,46,115,116,114,116,97,98,0,46,115,121,109,116,
    97,98,0,46,115,121,109,116,97,98,95,115,104,110,100,120,0,46,110,111,
    116,101,46,110,118,46,116,107,105,110,102,111,0,46,110,111,116,101,46,110,
    118,46,99,117,105,110,102,111,0,46,110,118,46,105,110,102,111,0,46,116,
    101,120,116,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,
    0,46,110,118,46,105,110,102,111,46,100,100,112,95,99,111,110,118,101,114,
    116,95,99,111,112,121,0,46,110,118,46,115,104,97,114,101,100,46,100,100,
    112,95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,114,101,108,46,
    110,118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,95,99,111,110,
    118,101,114,116,95,99,111,112,121,0,46,110,118,46,99,111,110,115,116,97,
    110,116,48,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,
    0,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,101,108,46,100,
    101,98,117,103,95,102,114,97,109,101,0,46,114,101,108,97,46,100,101,98,
    117,103,95,102,114,97,109,101,0,46,110,118,46,99,97,108,108,103,114,97,
    112,104,0,46,110,118,46,112,114,111,116,111,116,121,112,101,0,46,110,118,
    46,114,101,108,46,97,99,116,105,111,110,0,100,100,112,95,99,111,110,118,
    101,114,116,95,99,111,112,121,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    41,0,0,0,3,0,5,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,57,0,0,0,3,0,6,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,82,0,0,0,3,0,13,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,194,0,0,0,3,0,12,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,225,0,0,0,
    3,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    17,1,0,0,3,0,9,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,45,1,0,0,3,0,10,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,60,1,0,0,18,16,13,0,0,0,0,0,
    0,0,0,0,0,54,0,0,0,0,0,0,255,255,255,255,36,0,0,0,
    0,0,0,0,255,255,255,255,255,255,255,255,3,0,4,124,255,255,255,255,
    15,12,129,128,128,40,0,8,255,129,128,40,8,129,128,128,40,0,0,0,
    255,255,255,255,52,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,54,0,0,0,0,0,0,4,4,0,0,
    0,4,32,0,0,0,12,129,128,128,40,0,4,28,13,0,0,0,0,0,
    0,0,0,0,12,0,0,0,140,0,0,0,208,7,0,0,78,86,73,68,
    73,65,32,67,111,114,112,0,2,0,0,0,0,0,0,0,1,0,0,0,
    7,0,0,0,54,0,0,0,96,0,0,0,0,112,116,120,97,115,0,67,
    117,100,97,32,99,111,109,112,105,108,97,116,105,111,110,32,116,111,111,108,
    115,44,32,114,101,108,101,97,115,101,32,49,51,46,48,44,32,86,49,51,
    46,48,46,56,56,0,66,117,105,108,100,32,99,117,100,97,95,49,51,46,
    48,46,114,49,51,46,48,47,99,111,109,112,105,108,101,114,46,51,54,52,
    50,52,55,49,52,95,48,0,45,97,114,99,104,32,115,109,95,56,48,32,
    45,109,32,54,52,32,0,0,12,0,0,0,8,0,0,0,232,3,0,0,
    78,86,73,68,73,65,32,67,111,114,112,0,2,0,80,0,130,0,0,0,
    4,47,8,0,8,0,0,0,32,0,0,0,4,17,8,0,8,0,0,0,
    0,0,0,0,4,18,8,0,8,0,0,0,0,0,0,0,4,55,4,0,
    130,0,0,0,1,53,0,0,4,10,8,0,4,0,0,0,96,1,48,0,
    3,25,48,0,4,23,12,0,0,0,0,0,6,0,40,0,0,240,33,0,
    4,23,12,0,0,0,0,0,5,0,36,0,0,240,17,0,4,23,12,0,
    0,0,0,0,4,0,32,0,0,240,17,0,4,23,12,0,0,0,0,0,
    3,0,24,0,0,240,33,0,4,23,12,0,0,0,0,0,2,0,16,0,
    0,240,33,0,4,23,12,0,0,0,0,0,1,0,8,0,0,240,33,0,
    4,23,12,0,0,0,0,0,0,0,0,0,0,240,33,0,3,27,255,0,
    3,95,0,0,4,28,16,0,224,0,0,0,80,30,0,0,176,30,0,0,
    0,53,0,0,4,30,4,0,0,0,0,0,0,0,0,0,255,255,255,255,
    0,0,0,0,254,255,255,255,0,0,0,0,253,255,255,255,0,0,0,0,
    252,255,255,255,115,0,0,0,0,0,0,0,0,0,0,17,37,0,5,54,
    68,0,0,0,0,0,0,0,2,0,0,0,8,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,36,118,1,255,
    0,10,0,0,255,0,142,7,0,228,15,0,130,120,4,0,1,0,0,0,
    0,0,0,0,0,228,15,0,185,122,6,0,0,96,0,0,0,10,0,0,
    0,228,15,0,140,114,0,4,7,0,0,0,112,82,244,11,0,228,15,0,
    140,114,0,4,6,0,0,0,112,82,246,11,0,228,15,0,140,114,0,4,
    6,0,0,0,112,38,112,13,0,228,15,0,185,122,12,0,0,70,0,0,
    0,10,0,0,0,200,15,0,28,120,0,0,0,0,0,0,8,240,240,3,
    0,218,15,0,71,9,0,0,208,29,0,0,0,0,128,3,0,234,15,0,
    195,121,4,0,0,0,0,0,0,37,0,0,0,34,14,0,185,122,6,0,
    0,92,0,0,0,10,0,0,0,228,15,0,140,114,0,4,6,0,0,0,
    112,96,240,11,0,200,31,0,140,114,0,63,7,0,0,0,0,97,240,11,
    0,204,15,0,28,120,0,0,0,0,0,0,8,240,240,3,0,218,15,0,
    77,9,0,0,0,0,0,0,0,0,128,3,0,234,15,0,25,121,2,0,
    0,0,0,0,0,33,0,0,0,34,14,0,16,123,0,0,0,98,0,0,
    0,16,48,0,0,98,14,0,185,122,6,0,0,96,0,0,0,10,0,0,
    0,228,15,0,140,114,0,63,6,0,0,0,112,82,240,11,0,228,15,0,
    140,114,0,63,7,0,0,0,112,82,242,11,0,228,15,0,130,120,8,0,
    4,0,0,0,0,0,0,0,0,228,15,0,135,120,14,8,2,0,0,0,
    0,0,0,12,0,196,15,0,130,124,9,0,4,0,0,0,0,0,0,8,
    0,228,15,0,135,120,8,8,2,0,0,0,0,0,128,12,0,228,15,0,
    130,124,4,0,63,0,0,0,0,0,0,8,0,228,15,0,185,122,6,0,
    0,90,0,0,0,10,0,0,0,228,15,0,145,114,5,9,6,0,0,0,
    63,32,128,15,0,226,15,0,36,116,13,255,24,0,0,0,255,0,142,7,
    0,226,31,0,185,122,15,0,0,3,0,0,0,8,0,0,0,228,15,0,
    145,114,6,9,7,0,0,0,4,36,15,8,0,196,15,0,36,126,8,255,
    5,0,0,0,255,0,142,15,0,226,15,2,185,122,10,0,0,94,0,0,
    0,10,0,0,0,228,15,0,185,122,22,0,0,92,0,0,0,10,0,0,
    0,226,15,0,36,126,9,255,6,0,0,0,255,0,142,15,0,202,15,0,
    129,121,10,8,12,0,0,0,0,27,30,12,0,168,78,0,129,121,20,8,
    12,8,0,0,0,27,30,12,0,226,14,0,37,118,12,10,0,88,0,0,
    13,0,142,7,0,200,79,0,36,120,11,11,24,0,0,0,255,2,142,7,
    0,228,15,0,36,114,10,255,255,0,0,0,12,0,142,7,0,228,15,0,
    36,120,11,13,1,0,0,0,11,2,142,7,0,202,15,0,129,121,18,10,
    12,16,0,0,0,27,30,12,0,168,14,0,129,121,12,10,12,0,0,0,
    0,27,30,12,0,40,15,0,129,121,14,10,12,8,0,0,0,27,30,12,
    0,98,15,0,194,115,20,20,0,0,0,0,0,0,14,0,0,240,142,0,
    194,115,21,21,0,0,0,0,0,0,14,0,0,98,14,0,36,118,4,255,
    0,97,0,0,255,0,142,7,0,226,15,0,144,114,9,9,15,0,0,0,
    63,224,249,15,0,200,15,0,18,122,255,4,0,96,0,0,255,252,128,7,
    0,226,15,0,144,114,4,63,4,0,0,0,63,228,127,10,0,226,15,0,
    69,121,0,0,0,27,0,0,0,0,128,3,0,226,15,0,194,115,6,18,
    0,0,0,0,0,0,14,0,0,240,78,0,194,115,7,19,0,0,0,0,
    0,0,14,0,0,98,14,0,144,114,5,6,20,0,0,128,63,224,241,15,
    0,200,143,0,140,114,0,5,10,0,0,0,112,16,242,11,0,228,15,0,
    144,114,6,7,21,0,0,128,63,228,127,8,0,228,47,0,140,114,0,9,
    22,0,0,0,112,96,240,11,0,228,15,0,140,114,0,6,11,0,0,0,
    16,17,242,11,0,226,15,0,194,115,16,12,0,0,0,0,0,0,14,0,
    0,162,2,1,140,114,0,4,23,0,0,0,0,97,240,11,0,228,15,0,
    135,114,7,5,10,0,0,0,0,0,128,8,0,196,15,0,135,114,6,6,
    11,0,0,0,0,0,128,8,0,198,15,0,194,115,17,13,0,0,0,0,
    0,0,14,0,0,240,2,0,194,115,18,14,0,0,0,0,0,0,14,0,
    0,48,3,2,194,115,19,15,0,0,0,0,0,0,14,0,0,36,2,0,
    71,9,0,0,144,0,0,0,0,0,128,3,0,234,255,1,153,120,5,20,
    2,0,0,0,63,6,0,8,0,200,15,0,144,114,15,16,5,0,0,0,
    63,224,249,15,0,228,15,0,144,114,10,18,5,0,0,0,63,224,251,15,
    0,228,15,0,153,120,5,20,2,0,0,0,21,2,1,8,0,228,15,0,
    146,120,63,10,15,0,0,0,15,200,130,15,0,228,15,0,144,114,22,17,
    5,0,0,0,63,228,127,10,0,228,15,0,144,114,5,19,5,0,0,0,
    63,228,255,10,0,196,15,0,28,120,0,0,0,0,0,0,24,240,240,3,
    0,218,15,0,71,137,0,0,144,17,0,0,0,0,128,3,0,234,15,0,
    36,126,4,255,6,0,0,0,255,0,142,15,0,226,15,0,12,124,0,2,
    7,0,0,0,112,16,240,11,0,200,15,0,12,114,0,4,255,0,0,0,
    0,65,240,3,0,218,15,0,71,137,0,0,48,25,0,0,0,0,128,3,
    0,234,15,0,36,126,9,255,14,0,0,0,255,0,142,15,0,226,15,0,
    164,114,5,21,14,0,0,0,63,2,142,15,0,226,15,0,36,126,12,255,
    16,0,0,0,255,0,142,15,0,226,15,0,164,114,10,21,8,0,0,0,
    63,2,142,15,0,226,15,0,36,126,13,255,17,0,0,0,255,0,142,15,
    0,226,15,0,69,121,1,0,224,16,0,0,0,0,128,3,0,226,15,0,
    36,126,15,255,8,0,0,0,255,0,142,15,0,228,15,0,36,126,10,255,
    18,0,0,0,255,0,142,15,0,228,15,0,36,126,11,255,19,0,0,0,
    255,0,142,15,0,196,15,0,37,124,12,9,20,0,0,0,12,0,142,15,
    0,200,15,0,37,124,10,15,20,0,0,0,10,0,142,15,0,226,15,0,
    16,124,6,13,5,0,0,0,255,224,255,15,0,198,15,0,36,114,4,255,
    255,0,0,0,2,0,142,7,0,226,15,0,16,124,8,11,10,0,0,0,
    255,224,255,15,0,226,15,0,36,114,9,255,255,0,0,0,255,0,142,7,
    0,198,15,0,16,122,25,4,0,0,0,0,255,224,241,7,0,226,15,0,
    69,121,2,0,144,7,0,0,0,0,128,3,0,226,15,0,28,120,0,0,
    0,0,0,0,56,232,242,3,0,198,15,0,36,114,16,255,255,0,0,0,
    9,6,14,0,0,226,15,0,16,122,27,25,0,0,0,0,255,224,241,7,
    0,202,15,0,36,114,24,255,255,0,0,0,16,6,14,0,0,226,15,0,
    16,122,29,27,0,0,0,0,255,224,241,7,0,202,15,0,36,114,26,255,
    255,0,0,0,24,6,14,0,0,226,15,0,17,114,18,29,12,0,0,0,
    255,8,128,7,0,200,15,0,17,114,19,29,6,0,0,0,26,12,15,0,
    0,226,15,0,71,25,0,0,80,5,0,0,0,0,128,3,0,234,79,0,
    36,118,14,255,0,96,0,0,255,0,142,7,0,202,15,0,12,120,0,14,
    2,0,0,0,112,82,240,3,0,218,15,0,71,137,0,0,96,3,0,0,
    0,0,128,3,0,234,15,0,12,120,0,14,3,0,0,0,112,82,240,3,
    0,218,15,0,71,9,0,0,192,1,0,0,0,0,128,3,0,234,15,0,
    12,124,0,4,7,0,0,0,112,96,240,11,0,228,15,0,12,124,0,25,
    7,0,0,0,112,96,242,11,0,228,15,0,12,124,0,9,6,0,0,0,
    0,97,240,11,0,228,15,0,12,124,0,16,6,0,0,0,16,97,242,11,
    0,228,15,0,12,124,0,27,7,0,0,0,112,96,244,11,0,200,15,0,
    12,124,0,24,6,0,0,0,32,97,244,11,0,202,15,0,17,130,14,4,
    12,0,0,0,255,8,134,7,0,228,15,12,17,146,21,25,12,0,0,0,
    255,8,136,7,0,228,15,4,17,130,15,4,6,0,0,0,9,12,143,1,
    0,228,15,8,17,146,22,25,6,0,0,0,16,12,15,2,0,198,15,0,
    128,137,20,14,12,0,0,0,0,21,16,12,0,164,0,0,36,146,15,255,
    255,0,0,0,22,0,142,7,0,226,31,0,17,162,22,27,12,0,0,0,
    255,8,134,7,0,226,15,0,36,146,14,255,255,0,0,0,21,0,142,7,
    0,198,15,0,17,162,23,27,6,0,0,0,24,12,143,1,0,228,15,0,
    128,153,21,14,12,0,0,0,0,21,16,12,0,228,0,0,36,162,14,255,
    255,0,0,0,22,0,142,7,0,228,31,0,36,162,15,255,255,0,0,0,
    23,0,142,7,0,202,15,0,128,169,22,14,12,0,0,0,0,21,16,12,
    0,34,15,0,12,124,0,29,7,0,0,0,112,96,246,11,0,200,15,0,
    12,124,0,26,6,0,0,0,48,97,246,11,0,228,15,0,22,136,17,255,
    16,84,0,0,20,0,0,0,0,228,79,0,22,152,3,255,16,84,0,0,
    21,0,0,0,0,228,143,0,22,168,5,255,16,84,0,0,22,0,0,0,
    0,206,15,1,71,57,0,0,16,5,0,0,0,0,128,3,0,234,15,0,
    128,121,7,18,12,0,0,0,0,21,16,12,0,164,14,0,22,120,7,255,
    16,84,0,0,7,0,0,0,0,226,79,0,71,121,0,0,224,4,0,0,
    0,0,128,3,0,234,15,0,12,124,0,4,7,0,0,0,112,96,240,11,
    0,228,15,0,12,124,0,27,7,0,0,0,112,96,244,11,0,228,15,0,
    12,124,0,9,6,0,0,0,0,97,240,11,0,228,15,0,12,124,0,24,
    6,0,0,0,32,97,244,11,0,228,15,0,12,124,0,25,7,0,0,0,
    112,96,242,11,0,200,15,0,12,124,0,16,6,0,0,0,16,97,242,11,
    0,202,15,0,17,130,14,4,12,0,0,0,255,16,134,7,0,228,15,12,
    17,162,20,27,12,0,0,0,255,16,136,7,0,228,15,4,17,130,15,4,
    6,0,0,0,9,20,143,1,0,228,15,8,17,162,21,27,6,0,0,0,
    24,20,15,2,0,228,15,0,17,146,18,25,12,0,0,0,255,16,134,7,
    0,226,15,4,128,137,17,14,12,0,0,0,0,25,16,12,0,102,1,0,
    17,146,19,25,6,0,0,0,16,20,143,1,0,202,15,0,128,153,3,18,
    12,0,0,0,0,25,16,12,0,98,3,0,36,162,14,255,255,0,0,0,
    20,0,142,7,0,228,31,0,36,162,15,255,255,0,0,0,21,0,142,7,
    0,202,15,0,128,169,5,14,12,0,0,0,0,25,16,12,0,98,3,0,
    12,124,0,29,7,0,0,0,112,96,246,11,0,200,15,0,12,124,0,26,
    6,0,0,0,48,97,246,11,0,218,15,0,71,57,0,0,160,3,0,0,
    0,0,128,3,0,234,15,0,17,114,14,29,12,0,0,0,255,16,136,7,
    0,200,47,0,17,114,15,29,6,0,0,0,26,20,15,2,0,202,15,0,
    128,121,7,14,12,0,0,0,0,25,16,12,0,98,1,0,71,121,0,0,
    96,3,0,0,0,0,128,3,0,234,15,0,12,124,0,4,7,0,0,0,
    112,96,240,11,0,228,15,0,12,124,0,25,7,0,0,0,112,96,242,11,
    0,228,15,0,12,124,0,9,6,0,0,0,0,97,240,11,0,228,15,0,
    12,124,0,16,6,0,0,0,16,97,242,11,0,228,15,0,12,124,0,27,
    7,0,0,0,112,96,244,11,0,200,15,0,12,124,0,24,6,0,0,0,
    32,97,244,11,0,202,15,0,17,130,14,4,12,0,0,0,255,8,134,7,
    0,228,15,12,17,146,21,25,12,0,0,0,255,8,136,7,0,228,15,4,
    17,130,15,4,6,0,0,0,9,12,143,1,0,228,15,8,17,146,22,25,
    6,0,0,0,16,12,15,2,0,198,15,0,128,137,20,14,12,0,0,0,
    0,21,16,12,0,164,0,0,36,146,15,255,255,0,0,0,22,0,142,7,
    0,226,31,0,17,162,22,27,12,0,0,0,255,8,134,7,0,226,15,0,
    36,146,14,255,255,0,0,0,21,0,142,7,0,198,15,0,17,162,23,27,
    6,0,0,0,24,12,143,1,0,228,15,0,128,153,21,14,12,0,0,0,
    0,21,16,12,0,228,0,0,36,162,14,255,255,0,0,0,22,0,142,7,
    0,228,31,0,36,162,15,255,255,0,0,0,23,0,142,7,0,202,15,0,
    128,169,22,14,12,0,0,0,0,21,16,12,0,34,15,0,12,124,0,29,
    7,0,0,0,112,96,246,11,0,200,15,0,12,124,0,26,6,0,0,0,
    48,97,246,11,0,226,15,0,48,130,17,255,20,0,0,32,0,65,0,0,
    0,228,79,0,48,146,3,255,21,0,0,32,0,65,0,0,0,228,143,0,
    48,162,5,255,22,0,0,32,0,65,0,0,0,208,15,1,71,57,0,0,
    208,1,0,0,0,0,128,3,0,234,15,0,128,121,7,18,12,0,0,0,
    0,21,16,12,0,164,14,0,48,114,7,255,7,0,0,32,0,65,0,0,
    0,226,79,0,71,121,0,0,160,1,0,0,0,0,128,3,0,234,15,0,
    12,124,0,4,7,0,0,0,112,96,240,11,0,200,15,0,12,124,0,9,
    6,0,0,0,0,97,240,11,0,218,15,0,17,130,14,4,12,0,0,0,
    255,24,130,7,0,200,15,0,17,130,15,4,6,0,0,0,9,28,143,0,
    0,204,15,0,128,137,14,14,12,0,0,0,0,27,16,12,0,162,14,0,
    12,124,0,29,7,0,0,0,112,96,246,11,0,228,15,0,12,124,0,25,
    7,0,0,0,112,96,242,11,0,228,15,0,12,124,0,26,6,0,0,0,
    48,97,246,11,0,228,15,0,12,124,0,27,7,0,0,0,112,96,244,11,
    0,228,15,0,12,124,0,16,6,0,0,0,16,97,242,11,0,228,15,0,
    12,124,0,24,6,0,0,0,32,97,244,11,0,206,15,0,17,178,22,29,
    12,0,0,0,255,24,140,7,0,200,15,0,17,178,23,29,6,0,0,0,
    26,28,15,3,0,228,15,0,17,146,20,25,12,0,0,0,255,24,136,7,
    0,228,15,8,17,162,18,27,12,0,0,0,255,24,138,7,0,228,15,0,
    17,146,21,25,6,0,0,0,16,28,15,2,0,228,15,8,17,162,19,27,
    6,0,0,0,24,28,143,2,0,200,15,0,128,153,20,20,12,0,0,0,
    0,27,16,12,0,232,14,0,128,169,18,18,12,0,0,0,0,27,16,12,
    0,34,15,0,16,131,17,0,14,0,0,0,0,16,48,0,0,100,64,0,
    36,178,14,255,255,0,0,0,22,0,142,7,0,228,31,0,36,178,15,255,
    255,0,0,0,23,0,142,7,0,204,15,0,128,185,14,14,12,0,0,0,
    0,27,16,12,0,162,14,0,16,147,3,0,20,0,0,0,0,16,48,0,
    0,240,128,0,16,163,5,0,18,0,0,0,0,16,48,0,0,48,1,1,
    16,179,7,0,14,0,0,0,0,16,48,0,0,164,64,0,65,121,2,0,
    0,0,0,0,0,0,128,3,0,234,175,1,28,120,0,0,0,0,0,0,
    40,232,248,3,0,226,15,0,69,121,2,0,208,7,0,0,0,0,128,3,
    0,216,15,0,71,73,0,0,144,5,0,0,0,0,128,3,0,234,15,0,
    36,118,28,255,0,97,0,0,255,0,142,7,0,226,15,0,17,114,14,4,
    10,0,0,0,255,8,140,7,0,228,31,8,17,114,18,25,10,0,0,0,
    255,8,136,7,0,228,15,4,12,120,0,28,2,0,0,0,112,82,250,3,
    0,228,15,0,17,114,15,4,8,0,0,0,9,12,15,3,0,228,15,8,
    17,114,19,25,8,0,0,0,16,12,15,2,0,228,15,0,17,114,20,27,
    10,0,0,0,255,8,140,7,0,196,15,0,17,114,22,29,10,0,0,0,
    255,8,136,7,0,228,15,0,17,114,21,27,8,0,0,0,24,12,15,3,
    0,228,15,8,17,114,23,29,8,0,0,0,26,12,15,2,0,226,15,0,
    71,217,0,0,128,3,0,0,0,0,128,3,0,234,15,0,12,120,0,28,
    3,0,0,0,112,82,248,3,0,218,15,0,71,73,0,0,160,1,0,0,
    0,0,128,3,0,234,15,0,11,120,0,0,0,0,128,63,0,208,248,3,
    0,218,15,0,71,73,0,0,160,0,0,0,0,0,128,3,0,234,15,0,
    62,130,16,255,17,0,0,0,255,16,0,0,0,228,15,2,62,146,24,255,
    3,0,0,0,255,16,0,0,0,228,15,0,62,162,25,255,5,0,0,0,
    255,16,0,0,0,226,15,0,133,137,0,14,16,0,0,0,12,21,16,12,
    0,232,1,0,133,153,0,18,24,0,0,0,12,21,16,12,0,232,1,0,
    133,169,0,20,25,0,0,0,12,21,16,12,0,226,1,0,71,57,0,0,
    80,6,0,0,0,0,128,3,0,234,15,0,62,114,14,255,7,0,0,0,
    255,16,0,0,0,202,95,0,133,121,0,22,14,0,0,0,12,21,16,12,
    0,226,1,0,71,121,0,0,32,6,0,0,0,0,128,3,0,234,15,0,
    32,130,16,17,0,0,0,0,0,0,64,0,0,228,15,10,32,146,24,3,
    0,0,0,0,0,0,64,0,0,228,15,8,32,162,25,5,0,0,0,0,
    0,0,64,0,0,226,15,0,62,130,16,255,16,0,0,0,255,16,0,0,
    0,228,15,0,62,146,24,255,24,0,0,0,255,16,0,0,0,228,15,0,
    62,162,25,255,25,0,0,0,255,16,0,0,0,226,15,0,133,137,0,14,
    16,0,0,0,12,21,16,12,0,232,1,0,133,153,0,18,24,0,0,0,
    12,21,16,12,0,232,1,0,133,169,0,20,25,0,0,0,12,21,16,12,
    0,226,1,0,71,57,0,0,128,5,0,0,0,0,128,3,0,234,15,0,
    32,114,14,7,0,0,0,0,0,0,64,0,0,202,95,0,62,114,14,255,
    14,0,0,0,255,16,0,0,0,202,15,0,133,121,0,22,14,0,0,0,
    12,21,16,12,0,226,1,0,71,121,0,0,64,5,0,0,0,0,128,3,
    0,234,15,0,32,130,18,17,0,0,0,0,0,0,64,0,0,226,15,2,
    17,130,14,4,10,0,0,0,255,16,136,7,0,226,15,0,32,146,22,3,
    0,0,0,0,0,0,64,0,0,226,15,8,11,136,0,0,0,0,128,63,
    0,208,250,3,0,226,15,0,32,162,28,5,0,0,0,0,0,0,64,0,
    0,226,15,0,17,130,15,4,8,0,0,0,9,20,15,2,0,228,15,0,
    8,130,19,18,17,0,0,0,0,0,128,2,0,228,15,0,11,152,0,0,
    0,0,128,63,0,208,248,3,0,196,15,0,17,146,18,25,10,0,0,0,
    255,16,138,7,0,226,15,8,133,137,0,14,19,0,0,0,12,25,16,12,
    0,226,1,0,17,162,20,27,10,0,0,0,255,16,128,7,0,228,15,4,
    11,168,0,0,0,0,128,63,0,208,252,3,0,228,15,0,17,162,27,27,
    8,0,0,0,24,20,15,0,0,228,15,0,8,146,21,22,3,0,0,0,
    0,0,0,2,0,228,15,0,8,162,23,28,5,0,0,0,0,0,0,3,
    0,196,15,0,17,146,19,25,8,0,0,0,16,20,143,2,0,226,31,0,
    36,162,14,255,255,0,0,0,20,0,142,7,0,228,15,0,36,162,15,255,
    255,0,0,0,27,0,142,7,0,228,15,0,133,153,0,18,21,0,0,0,
    12,25,16,12,0,232,1,0,133,169,0,14,23,0,0,0,12,25,16,12,
    0,226,1,0,71,57,0,0,240,3,0,0,0,0,128,3,0,234,15,0,
    32,114,16,7,0,0,0,0,0,0,64,0,0,226,79,0,17,114,14,29,
    10,0,0,0,255,16,128,7,0,196,31,0,11,120,0,0,0,0,128,63,
    0,208,242,3,0,228,15,0,17,114,15,29,8,0,0,0,26,20,15,0,
    0,228,15,0,8,114,19,16,7,0,0,0,0,0,128,0,0,202,15,0,
    133,121,0,14,19,0,0,0,12,25,16,12,0,226,1,0,71,121,0,0,
    128,3,0,0,0,0,128,3,0,234,15,0,32,130,16,17,0,0,0,0,
    0,0,64,0,0,226,15,10,11,136,0,0,0,0,128,63,0,208,248,3,
    0,226,15,4,32,146,24,3,0,0,0,0,0,0,64,0,0,226,15,8,
    11,152,0,0,0,0,128,63,0,208,250,3,0,226,15,4,32,162,26,5,
    0,0,0,0,0,0,64,0,0,226,15,0,11,168,0,0,0,0,128,63,
    0,208,252,3,0,228,15,0,8,130,16,16,17,0,0,0,0,0,0,2,
    0,228,15,0,8,146,24,24,3,0,0,0,0,0,128,2,0,196,15,0,
    8,162,25,26,5,0,0,0,0,0,0,3,0,228,15,0,62,130,16,255,
    16,0,0,0,255,0,0,0,0,228,15,0,62,146,24,255,24,0,0,0,
    255,0,0,0,0,228,15,0,62,162,25,255,25,0,0,0,255,0,0,0,
    0,226,15,0,133,137,0,14,16,0,0,0,12,21,16,12,0,232,1,0,
    133,153,0,18,24,0,0,0,12,21,16,12,0,232,1,0,133,169,0,20,
    25,0,0,0,12,21,16,12,0,226,1,0,71,57,0,0,128,2,0,0,
    0,0,128,3,0,234,15,0,32,114,14,7,0,0,0,0,0,0,64,0,
    0,226,95,0,11,120,0,0,0,0,128,63,0,208,240,3,0,200,15,0,
    8,114,14,14,7,0,0,0,0,0,0,0,0,200,15,0,62,114,14,255,
    14,0,0,0,255,0,0,0,0,202,15,0,133,121,0,22,14,0,0,0,
    12,21,16,12,0,226,1,0,71,121,0,0,32,2,0,0,0,0,128,3,
    0,234,15,0,32,130,14,17,0,0,0,0,0,0,64,0,0,226,31,10,
    11,136,0,0,0,0,128,63,0,208,248,3,0,226,15,4,32,146,20,3,
    0,0,0,0,0,0,64,0,0,226,15,8,11,152,0,0,0,0,128,63,
    0,208,250,3,0,226,15,0,32,162,22,5,0,0,0,0,0,0,64,0,
    0,226,15,0,8,130,18,14,17,0,0,0,0,0,0,2,0,228,15,0,
    17,130,14,4,10,0,0,0,255,24,136,7,0,228,15,0,8,146,20,20,
    3,0,0,0,0,0,128,2,0,196,15,0,16,131,18,0,18,0,0,0,
    0,24,32,0,0,34,14,0,17,130,15,4,8,0,0,0,9,28,15,2,
    0,228,15,0,11,168,0,0,0,0,128,63,0,208,248,3,0,200,15,0,
    8,162,22,22,5,0,0,0,0,0,0,2,0,226,15,0,16,147,20,0,
    20,0,0,0,0,24,32,0,0,98,14,0,11,184,0,0,0,0,128,63,
    0,208,248,3,0,226,15,0,133,137,0,14,18,0,0,0,12,27,16,12,
    0,226,17,0,17,146,28,25,10,0,0,0,255,24,128,7,0,202,15,0,
    16,163,22,0,22,0,0,0,0,24,32,0,0,226,14,0,17,146,25,25,
    8,0,0,0,16,28,15,0,0,226,15,0,32,178,14,7,0,0,0,0,
    0,0,64,0,0,200,95,0,36,146,15,255,255,0,0,0,25,0,142,7,
    0,226,15,0,17,162,25,27,10,0,0,0,255,24,128,7,0,228,15,4,
    8,178,16,14,7,0,0,0,0,0,0,2,0,226,15,0,36,146,14,255,
    255,0,0,0,28,0,142,7,0,226,15,0,17,162,24,27,8,0,0,0,
    24,28,15,0,0,228,15,0,16,179,18,0,16,0,0,0,0,24,32,0,
    0,164,0,0,133,153,0,14,20,0,0,0,12,27,16,12,0,226,35,0,
    17,178,16,29,10,0,0,0,255,24,130,7,0,200,31,0,17,178,29,29,
    8,0,0,0,26,28,143,0,0,226,15,0,36,162,20,255,255,0,0,0,
    25,0,142,7,0,228,47,0,36,162,21,255,255,0,0,0,24,0,142,7,
    0,228,15,0,36,178,14,255,255,0,0,0,16,0,142,7,0,228,15,0,
    36,178,15,255,255,0,0,0,29,0,142,7,0,226,15,0,133,169,0,20,
    22,0,0,0,12,27,16,12,0,232,129,0,133,185,0,14,18,0,0,0,
    12,27,16,12,0,228,65,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,36,116,19,255,4,0,0,0,255,0,142,7,0,228,31,0,
    36,114,14,255,255,0,0,0,4,0,142,7,0,196,15,0,36,114,15,255,
    255,0,0,0,9,0,142,7,0,200,15,0,37,122,14,19,0,0,0,0,
    14,0,142,7,0,200,15,0,36,114,4,255,255,0,0,0,14,0,142,7,
    0,226,15,0,12,124,0,14,7,0,0,0,112,96,240,11,0,226,15,0,
    36,114,9,255,255,0,0,0,15,0,142,7,0,198,15,0,12,124,0,15,
    6,0,0,0,0,97,240,11,0,218,15,0,68,9,0,0,16,0,0,0,
    0,0,192,3,0,226,15,0,71,121,0,0,192,239,255,255,255,255,131,3,
    0,234,15,0,65,121,1,0,0,0,0,0,0,0,128,3,0,234,15,0,
    71,121,0,0,224,7,0,0,0,0,128,3,0,234,15,0,153,120,16,63,
    2,0,0,0,6,22,1,8,0,226,15,0,69,121,1,0,96,5,0,0,
    0,0,128,3,0,226,15,0,153,120,11,7,2,0,0,0,6,18,0,8,
    0,200,15,0,36,126,4,255,16,0,0,0,255,0,142,15,0,228,15,0,
    12,124,0,2,11,0,0,0,112,16,240,11,0,200,15,0,12,114,0,4,
    255,0,0,0,0,65,240,3,0,218,15,0,71,137,0,0,0,5,0,0,
    0,0,128,3,0,234,15,0,11,120,0,0,0,0,128,63,0,208,240,3,
    0,218,15,0,71,9,0,0,48,2,0,0,0,0,128,3,0,234,15,0,
    69,121,2,0,16,2,0,0,0,0,128,3,0,226,15,0,36,114,4,255,
    255,0,0,0,2,0,142,7,0,228,15,0,36,114,27,255,255,0,0,0,
    255,0,142,7,0,228,15,0,36,118,25,255,0,0,0,0,255,0,142,7,
    0,228,15,0,36,120,16,4,16,0,0,0,255,0,142,7,0,226,15,4,
    25,120,20,4,4,0,0,0,27,2,1,0,0,200,15,0,16,124,18,16,
    15,0,0,0,255,224,241,15,0,200,15,0,16,124,19,20,22,0,0,0,
    255,228,127,8,0,202,15,0,128,121,8,18,12,0,0,0,0,29,16,12,
    0,162,14,0,16,122,4,4,0,0,0,0,255,224,241,7,0,202,15,0,
    36,114,6,255,255,0,0,0,27,6,14,0,0,226,15,0,12,124,0,4,
    11,0,0,0,112,96,240,11,0,200,15,0,12,124,0,6,16,0,0,0,
    0,97,240,11,0,218,15,0,36,134,13,255,0,0,0,0,255,0,142,7,
    0,226,15,0,17,130,22,25,18,0,0,0,255,32,130,7,0,200,15,0,
    17,130,23,13,19,0,0,0,255,36,143,0,0,226,15,0,36,114,12,255,
    255,0,0,0,8,0,142,7,0,228,79,0,36,114,13,255,255,0,0,0,
    9,0,142,7,0,228,15,0,36,114,14,255,255,0,0,0,10,0,142,7,
    0,228,15,0,36,114,15,255,255,0,0,0,11,0,142,7,0,204,15,0,
    128,137,12,22,12,0,0,0,0,29,16,12,0,162,14,0,16,124,18,16,
    10,0,0,0,255,224,243,15,0,226,15,0,36,134,21,255,0,0,0,0,
    255,0,142,7,0,198,15,0,16,124,19,20,5,0,0,0,255,228,255,8,
    0,228,15,0,17,130,20,21,18,0,0,0,255,32,130,7,0,198,15,0,
    133,121,0,18,8,0,0,0,12,29,16,12,0,226,1,0,17,130,21,21,
    19,0,0,0,255,36,143,0,0,202,15,0,133,137,0,20,12,0,0,0,
    12,29,16,12,0,226,65,0,16,122,4,4,0,0,0,0,255,224,241,7,
    0,202,15,0,36,114,27,255,255,0,0,0,6,6,14,0,0,226,15,0,
    12,124,0,4,11,0,0,0,112,96,240,11,0,200,15,0,12,124,0,27,
    16,0,0,0,0,97,240,11,0,218,15,0,71,137,0,0,48,254,255,255,
    255,255,131,3,0,234,31,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,121,0,0,176,2,0,0,0,0,128,3,0,234,15,0,
    36,114,6,255,255,0,0,0,2,0,142,7,0,228,15,0,36,114,21,255,
    255,0,0,0,255,0,142,7,0,228,15,0,36,118,4,255,0,0,0,0,
    255,0,142,7,0,228,15,0,36,120,16,6,16,0,0,0,255,0,142,7,
    0,226,15,4,25,120,20,6,4,0,0,0,21,2,1,0,0,200,15,0,
    16,124,18,16,15,0,0,0,255,224,241,15,0,200,31,0,16,124,19,20,
    22,0,0,0,255,228,127,8,0,202,15,0,128,121,12,18,12,0,0,0,
    0,29,16,12,0,162,0,0,16,122,6,6,0,0,0,0,255,224,241,7,
    0,202,15,0,36,114,21,255,255,0,0,0,21,6,14,0,0,226,15,0,
    12,124,0,6,11,0,0,0,112,96,240,11,0,200,15,0,12,124,0,21,
    16,0,0,0,0,97,242,11,0,218,15,0,36,150,9,255,0,0,0,0,
    255,0,142,7,0,226,15,2,17,146,22,4,18,0,0,0,255,32,128,7,
    0,200,15,0,17,146,23,9,19,0,0,0,255,36,15,0,0,228,15,0,
    16,124,18,16,10,0,0,0,255,224,241,15,0,200,31,0,16,124,19,20,
    5,0,0,0,255,228,127,8,0,228,15,0,16,122,6,6,0,0,0,0,
    255,224,245,7,0,226,15,0,69,121,2,0,112,1,0,0,0,0,128,3,
    0,230,15,0,12,124,0,6,11,0,0,0,112,96,240,11,0,226,15,0,
    36,114,21,255,255,0,0,0,21,6,14,1,0,202,15,0,12,124,0,21,
    16,0,0,0,0,97,240,11,0,226,15,0,36,114,8,255,255,0,0,0,
    12,0,142,7,0,228,79,0,36,114,9,255,255,0,0,0,13,0,142,7,
    0,228,15,0,36,114,10,255,255,0,0,0,14,0,142,7,0,228,15,0,
    36,114,11,255,255,0,0,0,15,0,142,7,0,228,15,0,32,114,15,15,
    0,0,0,0,0,0,64,0,0,228,15,8,32,114,14,14,0,0,0,0,
    0,0,64,0,0,196,15,0,32,114,13,13,0,0,0,0,0,0,64,0,
    0,226,15,8,128,153,8,22,12,0,0,0,0,29,16,12,0,98,1,0,
    32,114,12,12,0,0,0,0,0,0,64,0,0,202,15,0,133,121,0,18,
    12,0,0,0,12,29,16,12,0,226,1,0,71,25,0,0,128,0,0,0,
    0,0,128,3,0,234,15,0,36,118,13,255,0,0,0,0,255,0,142,7,
    0,228,31,0,32,114,11,11,0,0,0,0,0,0,64,0,0,228,15,10,
    32,114,10,10,0,0,0,0,0,0,64,0,0,226,15,0,17,114,12,13,
    18,0,0,0,255,32,130,7,0,226,15,0,32,114,9,9,0,0,0,0,
    0,0,64,0,0,228,15,8,32,114,8,8,0,0,0,0,0,0,64,0,
    0,226,15,0,17,114,13,13,19,0,0,0,255,36,143,0,0,202,15,0,
    133,121,0,12,8,0,0,0,12,29,16,12,0,232,1,0,65,121,2,0,
    0,0,0,0,0,0,128,3,0,234,15,0,71,137,0,0,128,253,255,255,
    255,255,131,3,0,234,15,0,65,121,1,0,0,0,0,0,0,0,128,3,
    0,234,15,0,146,120,11,7,252,255,255,255,63,192,142,15,0,204,15,0,
    16,124,4,2,11,0,0,0,255,224,243,15,0,200,15,0,12,124,0,4,
    7,0,0,0,112,96,240,11,0,226,15,0,36,126,15,255,6,0,0,0,
    255,6,142,8,0,202,31,0,12,124,0,15,6,0,0,0,0,97,240,11,
    0,218,15,0,71,9,0,0,0,2,0,0,0,0,128,3,0,234,15,0,
    11,120,0,0,0,0,128,63,0,208,240,3,0,218,15,0,71,9,0,0,
    0,1,0,0,0,0,128,3,0,234,15,0,69,121,1,0,224,0,0,0,
    0,0,128,3,0,228,15,0,36,120,10,4,4,0,0,0,255,0,142,7,
    0,226,31,6,25,120,6,4,2,0,0,0,15,2,1,0,0,200,15,0,
    16,124,8,10,15,0,0,0,255,224,241,15,0,200,15,0,16,124,9,6,
    22,0,0,0,255,228,127,8,0,204,15,0,128,121,9,8,12,0,0,0,
    0,25,16,12,0,162,14,0,16,124,10,10,10,0,0,0,255,224,241,15,
    0,200,15,0,16,124,11,6,5,0,0,0,255,228,127,8,0,228,15,0,
    16,122,4,4,0,0,0,0,255,224,241,7,0,202,15,0,36,114,15,255,
    255,0,0,0,15,6,14,0,0,226,15,0,12,124,0,4,7,0,0,0,
    112,96,240,11,0,200,15,0,12,124,0,15,6,0,0,0,0,97,240,11,
    0,226,15,0,133,121,0,10,9,0,0,0,12,25,16,12,0,216,65,0,
    71,137,0,0,48,255,255,255,255,255,131,3,0,234,15,0,65,121,1,0,
    0,0,0,0,0,0,128,3,0,234,15,0,71,121,0,0,224,0,0,0,
    0,0,128,3,0,234,15,0,36,120,10,4,4,0,0,0,255,0,142,7,
    0,226,31,6,25,120,6,4,2,0,0,0,15,2,1,0,0,200,15,0,
    16,124,8,10,15,0,0,0,255,224,241,15,0,200,15,0,16,124,9,6,
    22,0,0,0,255,228,127,8,0,204,15,0,128,121,9,8,12,0,0,0,
    0,25,16,12,0,162,14,0,16,124,10,10,10,0,0,0,255,224,241,15,
    0,200,15,0,16,124,11,6,5,0,0,0,255,228,127,8,0,228,15,0,
    16,122,4,4,0,0,0,0,255,224,241,7,0,202,15,0,36,114,15,255,
    255,0,0,0,15,6,14,0,0,226,15,0,12,124,0,4,7,0,0,0,
    112,96,240,11,0,200,15,0,12,124,0,15,6,0,0,0,0,97,240,11,
    0,226,15,0,32,114,13,9,0,0,0,0,0,0,64,0,0,202,79,0,
    133,121,0,10,13,0,0,0,12,25,16,12,0,238,1,0,71,137,0,0,
    32,255,255,255,255,255,131,3,0,234,15,0,65,121,0,0,0,0,0,0,
    0,0,128,3,0,234,15,0,28,120,0,0,0,0,0,0,8,232,240,3,
    0,218,15,0,68,137,0,0,16,0,0,0,0,0,192,3,0,226,15,0,
    71,121,0,0,64,227,255,255,255,255,131,3,0,234,15,0,77,121,0,0,
    0,0,0,0,0,0,128,3,0,234,15,0,195,121,10,0,0,0,0,0,
    0,37,0,0,0,34,14,0,185,122,4,0,0,92,0,0,0,10,0,0,
    0,228,15,0,140,114,0,10,4,0,0,0,112,96,240,11,0,200,31,0,
    140,114,0,63,5,0,0,0,0,97,240,11,0,204,15,0,28,120,0,0,
    0,0,0,0,8,240,240,3,0,218,15,0,77,9,0,0,0,0,0,0,
    0,0,128,3,0,234,15,0,25,121,0,0,0,0,0,0,0,33,0,0,
    0,34,14,0,185,122,4,0,0,96,0,0,0,10,0,0,0,228,15,0,
    140,114,0,63,4,0,0,0,112,82,240,11,0,228,15,0,140,114,0,63,
    5,0,0,0,112,82,242,11,0,228,15,0,130,120,4,0,4,0,0,0,
    0,0,0,0,0,228,15,0,135,120,9,4,2,0,0,0,0,0,0,12,
    0,228,15,0,135,120,8,4,2,0,0,0,0,0,128,12,0,196,15,0,
    135,120,9,9,8,0,0,0,0,0,128,9,0,228,15,0,135,120,8,8,
    8,0,0,0,0,0,0,9,0,228,15,0,130,124,4,0,63,0,0,0,
    0,0,0,8,0,228,15,0,185,122,6,0,0,90,0,0,0,10,0,0,
    0,228,15,0,145,114,5,10,6,0,0,0,63,32,128,15,0,226,15,0,
    36,116,7,255,24,0,0,0,255,0,142,7,0,226,15,0,185,122,14,0,
    0,94,0,0,0,10,0,0,0,228,15,0,145,114,6,10,7,0,0,0,
    4,36,15,8,0,196,15,0,36,126,2,255,5,0,0,0,255,0,142,15,
    0,200,15,0,36,126,3,255,6,0,0,0,255,0,142,15,0,202,15,0,
    129,121,4,2,12,0,0,0,0,27,30,12,0,168,14,0,129,121,8,2,
    12,8,0,0,0,27,30,12,0,226,14,0,37,118,6,4,0,88,0,0,
    7,0,142,7,0,200,79,0,36,120,5,5,24,0,0,0,255,2,142,7,
    0,200,15,0,36,120,7,7,1,0,0,0,5,2,142,7,0,202,15,0,
    129,121,4,6,12,16,0,0,0,27,30,12,0,162,14,0,194,115,16,8,
    0,0,0,0,0,0,14,0,0,112,142,0,194,115,17,9,0,0,0,0,
    0,0,14,0,0,226,14,0,69,121,0,0,112,20,0,0,0,0,128,3,
    0,238,15,0,194,115,6,4,0,0,0,0,0,0,14,0,0,112,78,0,
    194,115,7,5,0,0,0,0,0,0,14,0,0,226,14,0,144,114,5,6,
    16,0,0,128,63,224,241,15,0,200,47,0,144,114,6,7,17,0,0,128,
    63,228,127,8,0,228,143,0,140,114,0,5,14,0,0,0,112,16,240,11,
    0,200,15,0,140,114,0,6,15,0,0,0,0,17,240,11,0,200,15,0,
    135,114,6,6,15,0,0,0,0,0,0,8,0,228,15,0,135,114,5,5,
    14,0,0,0,0,0,0,8,0,228,15,0,185,122,7,0,0,3,0,0,
    0,8,0,0,0,228,15,0,36,126,2,255,6,0,0,0,255,0,142,15,
    0,226,15,0,185,122,14,0,0,92,0,0,0,10,0,0,0,226,15,0,
    12,124,0,0,5,0,0,0,112,16,240,11,0,200,31,0,12,114,0,2,
    255,0,0,0,0,65,240,3,0,226,15,0,144,114,10,10,7,0,0,0,
    63,224,243,15,0,200,15,0,144,114,4,63,4,0,0,0,63,228,255,8,
    0,228,15,0,140,114,0,10,14,0,0,0,112,96,240,11,0,200,15,0,
    140,114,0,4,15,0,0,0,0,97,240,11,0,228,15,0,71,137,0,0,
    64,19,0,0,0,0,128,3,0,234,15,2,129,121,10,6,12,0,0,0,
    0,27,30,12,0,168,14,0,129,121,8,6,12,8,0,0,0,27,30,12,
    0,226,14,0,36,126,2,255,16,0,0,0,255,0,142,15,0,226,15,0,
    164,114,7,17,9,0,0,0,63,2,142,15,0,226,15,0,36,126,3,255,
    17,0,0,0,255,0,142,15,0,226,15,0,164,114,11,17,8,0,0,0,
    63,2,142,15,0,226,15,0,36,114,3,255,255,0,0,0,255,0,142,7,
    0,196,15,0,37,124,10,2,9,0,0,0,10,0,142,15,0,200,79,0,
    37,124,8,2,8,0,0,0,8,0,142,15,0,226,143,0,16,124,4,11,
    7,0,0,0,255,224,255,15,0,198,15,0,36,114,2,255,255,0,0,0,
    0,0,142,7,0,226,15,0,16,124,5,9,11,0,0,0,255,224,255,15,
    0,228,15,0,28,120,0,0,0,0,0,0,56,232,244,3,0,226,15,0,
    69,121,1,0,224,7,0,0,0,0,128,3,0,226,15,0,16,122,27,2,
    0,0,0,0,255,224,241,7,0,200,15,0,16,122,6,27,0,0,0,0,
    255,224,243,7,0,226,15,0,36,114,23,255,255,0,0,0,3,6,14,0,
    0,198,15,0,16,122,7,6,0,0,0,0,255,224,241,7,0,226,15,0,
    36,114,25,255,255,0,0,0,23,6,142,0,0,200,15,0,36,114,24,255,
    255,0,0,0,25,6,14,0,0,226,15,0,71,41,0,0,224,5,0,0,
    0,0,128,3,0,234,15,2,36,118,20,255,0,96,0,0,255,0,142,7,
    0,202,15,0,12,120,0,20,2,0,0,0,112,82,240,3,0,218,15,0,
    71,137,0,0,192,3,0,0,0,0,128,3,0,234,15,0,12,120,0,20,
    3,0,0,0,112,82,240,3,0,218,15,0,71,9,0,0,224,1,0,0,
    0,0,128,3,0,234,15,0,12,124,0,2,5,0,0,0,112,96,240,11,
    0,200,15,0,12,124,0,3,6,0,0,0,0,97,240,11,0,218,15,0,
    17,130,20,2,10,0,0,0,255,8,130,7,0,200,15,0,17,130,21,2,
    4,0,0,0,3,12,143,0,0,228,15,0,12,124,0,27,5,0,0,0,
    112,96,242,11,0,228,15,0,12,124,0,6,5,0,0,0,112,96,244,11,
    0,226,15,0,128,137,26,20,12,0,0,0,0,21,16,12,0,162,0,0,
    12,124,0,23,6,0,0,0,16,97,242,11,0,228,15,0,12,124,0,25,
    6,0,0,0,32,97,244,11,0,214,15,0,17,146,20,27,10,0,0,0,
    255,8,134,7,0,200,31,0,17,146,21,27,4,0,0,0,23,12,143,1,
    0,202,15,0,128,153,22,20,12,0,0,0,0,21,16,12,0,228,0,0,
    17,162,20,6,10,0,0,0,255,8,134,7,0,200,31,0,17,162,21,6,
    4,0,0,0,25,12,143,1,0,202,15,0,128,169,28,20,12,0,0,0,
    0,21,16,12,0,34,15,0,12,124,0,7,5,0,0,0,112,96,246,11,
    0,200,15,0,12,124,0,24,6,0,0,0,48,97,246,11,0,228,15,0,
    22,136,26,255,16,84,0,0,26,0,0,0,0,200,79,0,16,131,12,0,
    26,0,0,0,0,24,32,0,0,98,0,0,22,152,22,255,16,84,0,0,
    22,0,0,0,0,206,143,0,16,147,14,0,22,0,0,0,0,24,32,0,
    0,162,0,0,22,168,28,255,16,84,0,0,28,0,0,0,0,206,15,1,
    16,163,16,0,28,0,0,0,0,24,32,0,0,226,0,0,71,57,0,0,
    144,5,0,0,0,0,128,3,0,234,15,0,17,114,20,7,10,0,0,0,
    255,8,136,7,0,200,111,0,17,114,21,7,4,0,0,0,24,12,15,2,
    0,202,15,0,128,121,20,20,12,0,0,0,0,21,16,12,0,164,14,0,
    22,120,20,255,16,84,0,0,20,0,0,0,0,200,79,0,16,115,18,0,
    20,0,0,0,0,24,32,0,0,162,2,0,71,121,0,0,48,5,0,0,
    0,0,128,3,0,234,15,0,12,124,0,2,5,0,0,0,112,96,240,11,
    0,200,15,0,12,124,0,3,6,0,0,0,0,97,240,11,0,228,15,0,
    12,124,0,6,5,0,0,0,112,96,244,11,0,214,15,0,17,130,20,2,
    10,0,0,0,255,16,130,7,0,200,15,0,17,130,21,2,4,0,0,0,
    3,20,143,0,0,228,15,0,12,124,0,27,5,0,0,0,112,96,242,11,
    0,228,15,0,12,124,0,25,6,0,0,0,32,97,244,11,0,226,15,0,
    128,137,26,20,12,0,0,0,0,25,16,12,0,162,0,0,12,124,0,23,
    6,0,0,0,16,97,242,11,0,218,15,0,17,146,20,27,10,0,0,0,
    255,16,134,7,0,200,31,0,17,146,21,27,4,0,0,0,23,20,143,1,
    0,228,15,0,17,162,28,6,10,0,0,0,255,16,134,7,0,198,15,0,
    128,153,22,20,12,0,0,0,0,25,16,12,0,226,0,0,17,162,29,6,
    4,0,0,0,25,20,143,1,0,226,15,0,36,162,20,255,255,0,0,0,
    28,0,142,7,0,200,31,0,36,162,21,255,255,0,0,0,29,0,142,7,
    0,202,15,0,128,169,28,20,12,0,0,0,0,25,16,12,0,34,15,0,
    12,124,0,7,5,0,0,0,112,96,246,11,0,200,15,0,12,124,0,24,
    6,0,0,0,48,97,246,11,0,226,15,0,16,131,12,0,26,0,0,0,
    0,24,32,0,0,112,64,0,16,147,14,0,22,0,0,0,0,24,32,0,
    0,176,128,0,16,163,16,0,28,0,0,0,0,24,32,0,0,226,0,1,
    71,57,0,0,192,3,0,0,0,0,128,3,0,234,15,0,17,114,20,7,
    10,0,0,0,255,16,136,7,0,200,111,0,17,114,21,7,4,0,0,0,
    24,20,15,2,0,202,15,0,128,121,20,20,12,0,0,0,0,25,16,12,
    0,164,14,0,16,115,18,0,20,0,0,0,0,24,32,0,0,162,66,0,
    71,121,0,0,112,3,0,0,0,0,128,3,0,234,15,0,12,124,0,2,
    5,0,0,0,112,96,240,11,0,200,15,0,12,124,0,3,6,0,0,0,
    0,97,240,11,0,218,15,0,17,130,20,2,10,0,0,0,255,8,130,7,
    0,200,15,0,17,130,21,2,4,0,0,0,3,12,143,0,0,202,15,0,
    128,137,20,20,12,0,0,0,0,21,16,12,0,162,0,0,12,124,0,27,
    5,0,0,0,112,96,242,11,0,228,15,0,12,124,0,6,5,0,0,0,
    112,96,244,11,0,228,15,0,12,124,0,23,6,0,0,0,16,97,242,11,
    0,228,15,0,12,124,0,25,6,0,0,0,32,97,244,11,0,214,15,0,
    17,146,22,27,10,0,0,0,255,8,134,7,0,200,15,0,17,146,21,27,
    4,0,0,0,23,12,143,1,0,226,31,0,48,130,26,255,20,0,0,32,
    0,65,0,0,0,226,79,0,36,146,20,255,255,0,0,0,22,0,142,7,
    0,202,15,0,128,153,22,20,12,0,0,0,0,21,16,12,0,162,0,0,
    16,131,12,0,26,0,0,0,0,24,32,0,0,226,2,0,17,162,20,6,
    10,0,0,0,255,8,134,7,0,200,31,0,17,162,21,6,4,0,0,0,
    25,12,143,1,0,202,15,0,128,169,28,20,12,0,0,0,0,21,16,12,
    0,34,15,0,12,124,0,7,5,0,0,0,112,96,246,11,0,200,15,0,
    12,124,0,24,6,0,0,0,48,97,246,11,0,226,15,0,48,146,22,255,
    22,0,0,32,0,65,0,0,0,200,79,0,16,147,14,0,22,0,0,0,
    0,24,32,0,0,34,2,0,48,162,28,255,28,0,0,32,0,65,0,0,
    0,206,15,1,16,163,16,0,28,0,0,0,0,24,32,0,0,162,2,0,
    71,57,0,0,224,1,0,0,0,0,128,3,0,234,15,0,17,114,20,7,
    10,0,0,0,255,8,136,7,0,200,159,0,17,114,21,7,4,0,0,0,
    24,12,15,2,0,202,15,0,128,121,18,20,12,0,0,0,0,21,16,12,
    0,228,14,0,48,114,18,255,18,0,0,32,0,65,0,0,0,204,143,0,
    16,115,18,0,18,0,0,0,0,24,32,0,0,34,14,0,71,121,0,0,
    128,1,0,0,0,0,128,3,0,234,15,0,12,124,0,2,5,0,0,0,
    112,96,240,11,0,228,15,0,12,124,0,27,5,0,0,0,112,96,242,11,
    0,228,15,0,12,124,0,3,6,0,0,0,0,97,240,11,0,228,15,0,
    12,124,0,23,6,0,0,0,16,97,242,11,0,214,15,0,17,130,20,2,
    10,0,0,0,255,24,132,7,0,200,15,0,17,130,21,2,4,0,0,0,
    3,28,15,1,0,228,15,0,12,124,0,6,5,0,0,0,112,96,244,11,
    0,198,15,0,128,137,12,20,12,0,0,0,0,27,16,12,0,98,1,0,
    12,124,0,25,6,0,0,0,32,97,244,11,0,228,15,0,17,146,20,27,
    10,0,0,0,255,24,134,7,0,200,31,0,17,146,21,27,4,0,0,0,
    23,28,143,1,0,228,15,0,12,124,0,7,5,0,0,0,112,96,246,11,
    0,202,15,0,17,162,22,6,10,0,0,0,255,24,136,7,0,226,15,0,
    128,153,14,20,12,0,0,0,0,27,16,12,0,98,1,0,12,124,0,24,
    6,0,0,0,48,97,246,11,0,228,15,0,17,162,29,6,4,0,0,0,
    25,28,15,2,0,226,15,0,36,162,20,255,255,0,0,0,22,0,142,7,
    0,200,31,0,36,162,21,255,255,0,0,0,29,0,142,7,0,204,15,0,
    17,178,22,7,10,0,0,0,255,24,136,7,0,226,15,4,128,169,16,20,
    12,0,0,0,0,27,16,12,0,102,1,0,17,178,29,7,4,0,0,0,
    24,28,15,2,0,226,15,0,36,178,20,255,255,0,0,0,22,0,142,7,
    0,200,31,0,36,178,21,255,255,0,0,0,29,0,142,7,0,202,15,0,
    128,185,18,20,12,0,0,0,0,27,16,12,0,100,1,0,65,121,1,0,
    0,0,0,0,0,0,128,3,0,234,255,0,28,120,0,0,0,0,0,0,
    40,232,248,3,0,226,15,0,69,121,1,0,0,10,0,0,0,0,128,3,
    0,216,15,0,71,73,0,0,0,8,0,0,0,0,128,3,0,234,15,0,
    36,118,26,255,0,97,0,0,255,0,142,7,0,226,15,0,17,114,20,7,
    8,0,0,0,255,8,138,7,0,200,15,0,12,120,0,26,2,0,0,0,
    112,82,248,3,0,228,15,0,17,114,21,7,5,0,0,0,24,12,143,2,
    0,214,15,0,71,73,0,0,80,3,0,0,0,0,128,3,0,234,15,0,
    69,121,2,0,208,0,0,0,0,0,128,3,0,226,15,0,71,9,0,0,
    176,0,0,0,0,0,128,3,0,234,15,0,36,118,28,255,0,98,0,0,
    255,0,142,7,0,228,15,0,36,118,29,255,0,99,0,0,255,0,142,7,
    0,204,15,0,42,116,0,28,0,0,240,63,0,208,240,3,0,200,15,0,
    40,122,28,12,0,98,0,0,0,0,0,0,0,20,14,2,8,114,28,28,
    12,0,0,0,0,0,0,0,0,228,31,0,8,114,29,29,13,0,0,0,
    0,0,0,0,0,200,15,0,16,115,28,0,28,0,0,0,0,16,48,0,
    0,36,14,0,62,114,7,255,28,0,0,0,255,0,0,0,0,228,31,0,
    17,114,28,2,8,0,0,0,255,8,128,7,0,200,15,0,17,114,29,2,
    5,0,0,0,3,12,15,0,0,202,15,0,133,121,0,28,7,0,0,0,
    12,21,16,12,0,232,1,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,69,121,2,0,208,0,0,0,0,0,128,3,0,226,15,0,
    71,25,0,0,176,0,0,0,0,0,128,3,0,234,15,0,36,118,28,255,
    0,98,0,0,255,0,142,7,0,226,31,0,17,114,22,27,8,0,0,0,
    255,8,128,7,0,226,15,0,36,118,29,255,0,99,0,0,255,0,142,7,
    0,198,15,0,17,114,23,27,5,0,0,0,23,12,15,0,0,198,15,0,
    42,116,0,28,0,0,240,63,0,208,242,3,0,200,15,0,40,122,28,14,
    0,98,0,0,0,0,0,0,0,20,14,2,8,114,26,28,14,0,0,0,
    0,0,128,0,0,228,31,0,8,114,27,29,15,0,0,0,0,0,128,0,
    0,200,15,0,16,115,26,0,26,0,0,0,0,16,48,0,0,36,14,0,
    62,114,7,255,26,0,0,0,255,0,0,0,0,202,31,0,133,121,0,22,
    7,0,0,0,12,21,16,12,0,228,1,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,69,121,2,0,208,0,0,0,0,0,128,3,
    0,226,15,0,71,41,0,0,176,0,0,0,0,0,128,3,0,234,15,0,
    36,118,22,255,0,98,0,0,255,0,142,7,0,226,31,0,40,122,26,16,
    0,98,0,0,0,0,0,0,0,226,15,2,36,118,23,255,0,99,0,0,
    255,0,142,7,0,204,15,0,42,116,0,22,0,0,240,63,0,208,240,3,
    0,12,14,0,8,114,26,26,16,0,0,0,0,0,0,0,0,228,31,0,
    8,114,27,27,17,0,0,0,0,0,0,0,0,228,15,0,17,114,22,6,
    8,0,0,0,255,8,128,7,0,228,15,4,16,115,26,0,26,0,0,0,
    0,16,48,0,0,36,14,0,17,114,23,6,5,0,0,0,25,12,15,0,
    0,228,15,0,62,114,7,255,26,0,0,0,255,0,0,0,0,202,31,0,
    133,121,0,22,7,0,0,0,12,21,16,12,0,228,1,0,65,121,2,0,
    0,0,0,0,0,0,128,3,0,234,15,0,71,57,0,0,224,6,0,0,
    0,0,128,3,0,234,15,0,36,118,22,255,0,98,0,0,255,0,142,7,
    0,226,31,0,40,122,6,18,0,98,0,0,0,0,0,0,0,226,15,2,
    36,118,23,255,0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,22,
    0,0,240,63,0,208,240,3,0,12,14,0,8,114,6,6,18,0,0,0,
    0,0,0,0,0,228,31,0,8,114,7,7,19,0,0,0,0,0,0,0,
    0,200,15,0,16,115,6,0,6,0,0,0,0,16,48,0,0,36,14,0,
    62,114,7,255,6,0,0,0,255,0,0,0,0,202,31,0,133,121,0,20,
    7,0,0,0,12,21,16,12,0,226,1,0,71,121,0,0,64,6,0,0,
    0,0,128,3,0,234,15,0,69,121,2,0,16,1,0,0,0,0,128,3,
    0,226,15,0,71,9,0,0,240,0,0,0,0,0,128,3,0,234,15,0,
    36,118,28,255,0,98,0,0,255,0,142,7,0,228,15,0,36,118,29,255,
    0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,28,0,0,240,63,
    0,208,240,3,0,200,15,0,40,122,28,12,0,98,0,0,0,0,0,0,
    0,20,14,2,8,114,28,28,12,0,0,0,0,0,0,0,0,228,31,0,
    8,114,29,29,13,0,0,0,0,0,0,0,0,228,15,0,12,120,0,26,
    3,0,0,0,112,82,240,3,0,228,15,0,16,115,22,0,28,0,0,0,
    0,16,48,0,0,118,0,0,17,2,28,2,8,0,0,0,255,16,136,7,
    0,200,31,0,17,2,29,2,5,0,0,0,3,20,15,2,0,202,15,0,
    133,9,0,28,22,0,0,0,12,25,16,12,0,228,33,0,17,130,28,2,
    8,0,0,0,255,8,136,7,0,228,15,4,62,130,22,255,22,0,0,0,
    255,16,0,0,0,228,15,0,17,130,29,2,5,0,0,0,3,12,15,2,
    0,202,15,0,133,137,0,28,22,0,0,0,12,21,16,12,0,232,1,0,
    65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,69,121,2,0,
    16,1,0,0,0,0,128,3,0,226,15,0,71,25,0,0,240,0,0,0,
    0,0,128,3,0,234,15,0,36,118,28,255,0,98,0,0,255,0,142,7,
    0,226,31,0,12,120,0,26,3,0,0,0,112,82,242,3,0,226,15,0,
    36,118,29,255,0,99,0,0,255,0,142,7,0,204,15,0,42,116,0,28,
    0,0,240,63,0,208,240,3,0,200,15,0,40,122,28,14,0,98,0,0,
    0,0,0,0,0,20,14,2,8,114,28,28,14,0,0,0,0,0,0,0,
    0,228,31,0,8,114,29,29,15,0,0,0,0,0,0,0,0,200,15,0,
    16,115,22,0,28,0,0,0,0,16,48,0,0,100,0,0,17,18,28,27,
    8,0,0,0,255,16,128,7,0,200,31,0,17,18,29,27,5,0,0,0,
    23,20,15,0,0,202,15,0,133,25,0,28,22,0,0,0,12,25,16,12,
    0,228,33,0,62,146,29,255,22,0,0,0,255,16,0,0,0,228,15,0,
    17,146,22,27,8,0,0,0,255,8,128,7,0,200,15,0,17,146,23,27,
    5,0,0,0,23,12,15,0,0,202,15,0,133,153,0,22,29,0,0,0,
    12,21,16,12,0,232,1,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,69,121,2,0,32,1,0,0,0,0,128,3,0,226,15,0,
    71,41,0,0,0,1,0,0,0,0,128,3,0,234,15,0,36,118,22,255,
    0,98,0,0,255,0,142,7,0,226,31,0,12,120,0,26,3,0,0,0,
    112,82,242,3,0,226,15,0,36,118,23,255,0,99,0,0,255,0,142,7,
    0,204,15,0,42,116,0,22,0,0,240,63,0,208,240,3,0,200,15,0,
    40,122,22,16,0,98,0,0,0,0,0,0,0,20,14,2,8,114,28,22,
    16,0,0,0,0,0,0,0,0,228,31,0,8,114,29,23,17,0,0,0,
    0,0,0,0,0,200,15,0,16,115,27,0,28,0,0,0,0,16,48,0,
    0,100,0,0,17,18,28,6,8,0,0,0,255,16,128,7,0,200,31,0,
    17,18,29,6,5,0,0,0,25,20,15,0,0,228,15,4,17,146,22,6,
    8,0,0,0,255,8,128,7,0,198,15,0,133,25,0,28,27,0,0,0,
    12,25,16,12,0,232,33,0,17,146,23,6,5,0,0,0,25,12,15,0,
    0,228,15,0,62,146,27,255,27,0,0,0,255,16,0,0,0,200,15,0,
    22,120,6,27,16,118,0,0,6,0,0,0,0,202,15,0,133,153,0,22,
    6,0,0,0,12,21,16,12,0,228,1,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,71,57,0,0,192,2,0,0,0,0,128,3,
    0,234,15,0,36,118,22,255,0,98,0,0,255,0,142,7,0,226,31,0,
    40,122,28,18,0,98,0,0,0,0,0,0,0,226,15,2,36,118,23,255,
    0,99,0,0,255,0,142,7,0,226,15,0,12,120,0,26,3,0,0,0,
    112,82,242,3,0,202,15,0,42,116,0,22,0,0,240,63,0,208,240,3,
    0,12,14,0,8,114,22,28,18,0,0,0,0,0,0,0,0,228,31,0,
    8,114,23,29,19,0,0,0,0,0,0,0,0,228,15,0,17,18,6,7,
    8,0,0,0,255,16,128,7,0,228,15,4,16,115,25,0,22,0,0,0,
    0,16,48,0,0,36,14,0,17,18,7,7,5,0,0,0,24,20,15,0,
    0,228,15,0,62,146,23,255,25,0,0,0,255,16,0,0,0,198,31,0,
    133,25,0,6,25,0,0,0,12,25,16,12,0,232,1,0,133,153,0,20,
    23,0,0,0,12,21,16,12,0,226,1,0,71,121,0,0,224,1,0,0,
    0,0,128,3,0,234,15,0,36,118,20,255,0,98,0,0,255,0,142,7,
    0,226,15,0,17,114,28,6,8,0,0,0,255,24,138,7,0,226,15,0,
    36,118,21,255,0,99,0,0,255,0,142,7,0,198,15,0,17,114,29,6,
    5,0,0,0,25,28,143,2,0,228,15,8,17,114,6,7,8,0,0,0,
    255,24,140,7,0,226,15,8,42,116,0,20,0,0,240,63,0,208,248,3,
    0,100,0,0,17,114,20,27,8,0,0,0,255,24,138,7,0,228,31,0,
    17,114,7,7,5,0,0,0,24,28,15,3,0,228,15,8,17,114,21,27,
    5,0,0,0,23,28,143,2,0,208,15,0,71,73,0,0,128,0,0,0,
    0,0,128,3,0,234,47,0,17,130,22,2,8,0,0,0,255,24,136,7,
    0,200,15,0,17,130,23,2,5,0,0,0,3,28,15,2,0,202,15,0,
    133,137,0,22,12,0,0,0,12,27,16,12,0,232,1,2,133,153,0,20,
    14,0,0,0,12,27,16,12,0,232,1,0,133,169,0,28,16,0,0,0,
    12,27,16,12,0,226,1,0,71,57,0,0,224,0,0,0,0,0,128,3,
    0,234,15,0,133,121,0,6,18,0,0,0,12,27,16,12,0,226,3,0,
    71,121,0,0,192,0,0,0,0,0,128,3,0,234,15,0,17,130,22,2,
    8,0,0,0,255,24,136,7,0,226,15,0,40,138,24,12,0,98,0,0,
    0,0,0,0,0,6,14,2,17,130,23,2,5,0,0,0,3,28,15,2,
    0,226,15,0,40,170,26,16,0,98,0,0,0,0,0,0,0,200,15,0,
    133,137,0,22,24,0,0,0,12,27,16,12,0,228,17,0,40,154,22,14,
    0,98,0,0,0,0,0,0,0,34,30,0,36,146,24,255,255,0,0,0,
    20,0,142,7,0,228,15,0,36,146,25,255,255,0,0,0,21,0,142,7,
    0,226,15,0,40,186,20,18,0,98,0,0,0,0,0,0,0,72,14,0,
    133,153,0,24,22,0,0,0,12,27,16,12,0,232,17,0,133,169,0,28,
    26,0,0,0,12,27,16,12,0,232,1,0,133,185,0,6,20,0,0,0,
    12,27,16,12,0,228,33,0,65,121,1,0,0,0,0,0,0,0,128,3,
    0,234,15,0,36,118,7,255,0,0,0,0,255,0,142,7,0,200,63,0,
    37,120,2,7,4,0,0,0,2,0,142,7,0,202,15,0,12,124,0,2,
    5,0,0,0,112,96,240,11,0,200,15,0,12,124,0,3,6,0,0,0,
    0,97,240,11,0,218,15,0,68,9,0,0,16,0,0,0,0,0,192,3,
    0,226,15,0,71,121,0,0,128,237,255,255,255,255,131,3,0,234,15,0,
    65,121,0,0,0,0,0,0,0,0,128,3,0,234,15,0,28,120,0,0,
    0,0,0,0,8,232,240,3,0,218,15,0,68,137,0,0,16,0,0,0,
    0,0,192,3,0,226,15,0,71,121,0,0,96,234,255,255,255,255,131,3,
    0,234,15,0,77,121,0,0,0,0,0,0,0,0,128,3,0,234,15,0,
    71,121,0,0,240,255,255,255,255,255,131,3,0,192,15,0,24,121,0,0,
    0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,
    0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,
    0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,
    24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,
    0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,
    0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,
    0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,
    24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,
    0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,
    0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,
    0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,1,0,0,0,3,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,64,0,0,0,0,0,0,0,60,1,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,11,0,0,0,3,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,124,1,0,0,0,0,0,0,
    77,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,19,0,0,0,2,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,208,2,0,0,
    0,0,0,0,216,0,0,0,0,0,0,0,2,0,0,0,8,0,0,0,
    8,0,0,0,0,0,0,0,24,0,0,0,0,0,0,0,225,0,0,0,
    1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    168,3,0,0,0,0,0,0,112,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    41,0,0,0,7,0,0,0,0,0,0,2,0,0,0,0,0,0,0,0,
    0,0,0,0,24,4,0,0,0,0,0,0,164,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,57,0,0,0,7,0,0,0,0,0,0,1,0,0,0,0,
    0,0,0,0,0,0,0,0,188,4,0,0,0,0,0,0,32,0,0,0,
    0,0,0,0,5,0,0,0,0,0,0,0,4,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,73,0,0,0,0,0,0,112,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,220,4,0,0,0,0,0,0,
    36,0,0,0,0,0,0,0,3,0,0,0,0,0,0,0,4,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,105,0,0,0,0,0,0,112,
    64,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,5,0,0,
    0,0,0,0,176,0,0,0,0,0,0,0,3,0,0,0,13,0,0,0,
    4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,17,1,0,0,
    1,0,0,112,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    176,5,0,0,0,0,0,0,32,0,0,0,0,0,0,0,3,0,0,0,
    0,0,0,0,4,0,0,0,0,0,0,0,8,0,0,0,0,0,0,0,
    45,1,0,0,11,0,0,112,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,208,5,0,0,0,0,0,0,16,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,8,0,0,0,0,0,0,0,8,0,0,0,
    0,0,0,0,238,0,0,0,9,0,0,0,64,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,224,5,0,0,0,0,0,0,16,0,0,0,
    0,0,0,0,3,0,0,0,4,0,0,0,8,0,0,0,0,0,0,0,
    16,0,0,0,0,0,0,0,159,0,0,0,1,0,0,0,66,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,240,5,0,0,0,0,0,0,
    144,1,0,0,0,0,0,0,0,0,0,0,13,0,0,0,4,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,82,0,0,0,1,0,0,0,
    6,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,128,7,0,0,
    0,0,0,0,0,54,0,0,0,0,0,0,3,0,0,0,8,0,0,32,
    128,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,6,0,0,0,
    5,0,0,0,0,65,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,168,0,0,0,0,0,0,0,168,0,0,0,
    0,0,0,0,8,0,0,0,0,0,0,0,1,0,0,0,5,0,0,0,
    240,5,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,144,55,0,0,0,0,0,0,144,55,0,0,0,0,0,0,
    8,0,0,0,0,0,0,0,1,0,0,0,5,0,0,0,0,65,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    168,0,0,0,0,0,0,0,168,0,0,0,0,0,0,0,8,0,0,0,
    0,0,0,0,2,0,1,1,64,0,0,0,152,66,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,8,0,1,0,90,0,0,0,0,0,0,0,
    0,0,0,0,17,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,127,69,76,70,2,1,1,65,8,0,0,0,
    0,0,0,0,2,0,190,0,1,0,0,0,0,0,0,0,0,0,0,0,
    128,65,0,0,0,0,0,0,192,61,0,0,0,0,0,0,4,90,0,6,
    64,0,56,0,5,0,64,0,15,0,1,0,0,46,115,104,115,116,114,116,
    97,98,0,46,115,116,114,116,97,98,0,46,115,121,109,116,97,98,0,46,
    115,121,109,116,97,98,95,115,104,110,100,120,0,46,110,111,116,101,46,110,
    118,46,116,107,105,110,102,111,0,46,110,111,116,101,46,110,118,46,99,117,
    105,110,102,111,0,46,110,118,46,105,110,102,111,0,46,110,118,46,99,111,
    109,112,97,116,0,46,116,101,120,116,46,100,100,112,95,99,111,110,118,101,
    114,116,95,99,111,112,121,0,46,110,118,46,105,110,102,111,46,100,100,112,
    95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,110,118,46,115,104,
    97,114,101,100,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,
    121,0,46,110,118,46,115,104,97,114,101,100,46,114,101,115,101,114,118,101,
    100,46,48,0,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,101,
    108,46,100,101,98,117,103,95,102,114,97,109,101,0,46,114,101,108,97,46,
    100,101,98,117,103,95,102,114,97,109,101,0,46,110,118,46,99,97,108,108,
    103,114,97,112,104,0,46,110,118,46,112,114,111,116,111,116,121,112,101,0,
    46,110,118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,95,99,111,
    110,118,101,114,116,95,99,111,112,121,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    46,115,104,115,116,114,116,97,98,0,46,115,116,114,116,97,98,0,46,115,
    121,109,116,97,98,0,46,115,121,109,116,97,98,95,115,104,110,100,120,0,
    46,110,111,116,101,46,110,118,46,116,107,105,110,102,111,0,46,110,111,116,
    101,46,110,118,46,99,117,105,110,102,111,0,46,110,118,46,105,110,102,111,
    0,46,110,118,46,99,111,109,112,97,116,0,46,116,101,120,116,46,100,100,
    112,95,99,111,110,118,101,114,116,95,99,111,112,121,0,46,110,118,46,105,
    110,102,111,46,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,
    0,46,110,118,46,115,104,97,114,101,100,46,100,100,112,95,99,111,110,118,
    101,114,116,95,99,111,112,121,0,46,110,118,46,114,101,115,101,114,118,101,
    100,83,109,101,109,46,111,102,102,115,101,116,48,0,46,110,118,46,115,104,
    97,114,101,100,46,114,101,115,101,114,118,101,100,46,48,0,95,95,110,118,
    95,114,101,115,101,114,118,101,100,83,77,69,77,95,111,102,102,115,101,116,
    95,48,95,97,108,105,97,115,0,46,100,101,98,117,103,95,102,114,97,109,
    101,0,46,114,101,108,46,100,101,98,117,103,95,102,114,97,109,101,0,46,
    114,101,108,97,46,100,101,98,117,103,95,102,114,97,109,101,0,46,110,118,
    46,99,97,108,108,103,114,97,112,104,0,46,110,118,46,112,114,111,116,111,
    116,121,112,101,0,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,
    121,0,46,110,118,46,99,111,110,115,116,97,110,116,48,46,100,100,112,95,
    99,111,110,118,101,114,116,95,99,111,112,121,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,41,0,0,0,3,0,5,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,57,0,0,0,3,0,6,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,93,0,0,0,3,0,12,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,170,0,0,0,
    33,0,0,0,0,0,0,0,0,0,0,0,4,0,0,0,0,0,0,0,
    217,0,0,0,32,160,13,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,250,0,0,0,3,0,4,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,42,1,0,0,3,0,10,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,70,1,0,0,18,16,12,0,
    0,0,0,0,0,0,0,0,0,53,0,0,0,0,0,0,87,1,0,0,
    3,0,14,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    255,255,255,255,36,0,0,0,0,0,0,0,255,255,255,255,255,255,255,255,
    3,0,4,124,255,255,255,255,15,12,129,128,128,40,0,8,255,129,128,40,
    8,129,128,128,40,0,0,0,255,255,255,255,44,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,53,0,0,
    0,0,0,0,4,32,0,0,0,12,129,128,128,40,0,4,244,12,0,0,
    0,0,0,0,12,0,0,0,140,0,0,0,208,7,0,0,78,86,73,68,
    73,65,32,67,111,114,112,0,2,0,0,0,0,0,0,0,1,0,0,0,
    7,0,0,0,54,0,0,0,96,0,0,0,0,112,116,120,97,115,0,67,
    117,100,97,32,99,111,109,112,105,108,97,116,105,111,110,32,116,111,111,108,
    115,44,32,114,101,108,101,97,115,101,32,49,51,46,48,44,32,86,49,51,
    46,48,46,56,56,0,66,117,105,108,100,32,99,117,100,97,95,49,51,46,
    48,46,114,49,51,46,48,47,99,111,109,112,105,108,101,114,46,51,54,52,
    50,52,55,49,52,95,48,0,45,97,114,99,104,32,115,109,95,57,48,32,
    45,109,32,54,52,32,0,0,12,0,0,0,8,0,0,0,232,3,0,0,
    78,86,73,68,73,65,32,67,111,114,112,0,2,0,90,0,130,0,0,0,
    4,47,8,0,8,0,0,0,34,0,0,0,4,17,8,0,8,0,0,0,
    0,0,0,0,4,18,8,0,8,0,0,0,0,0,0,0,2,9,0,0,
    2,2,1,0,2,5,5,0,3,7,1,1,2,3,0,0,2,6,1,0,
    4,11,8,0,0,0,0,0,0,0,0,0,4,55,4,0,130,0,0,0,
    4,23,12,0,0,0,0,0,6,0,40,0,0,240,33,0,4,23,12,0,
    0,0,0,0,5,0,36,0,0,240,17,0,4,23,12,0,0,0,0,0,
    4,0,32,0,0,240,17,0,4,23,12,0,0,0,0,0,3,0,24,0,
    0,240,33,0,4,23,12,0,0,0,0,0,2,0,16,0,0,240,33,0,
    4,23,12,0,0,0,0,0,1,0,8,0,0,240,33,0,4,23,12,0,
    0,0,0,0,0,0,0,0,0,240,33,0,3,80,0,0,3,27,255,0,
    3,95,1,1,4,28,16,0,192,0,0,0,32,29,0,0,112,29,0,0,
    80,52,0,0,4,30,4,0,0,0,0,0,3,25,48,0,4,10,8,0,
    9,0,0,0,16,2,48,0,4,54,4,0,8,0,0,0,0,0,0,0,
    255,255,255,255,0,0,0,0,254,255,255,255,0,0,0,0,253,255,255,255,
    0,0,0,0,252,255,255,255,0,0,0,0,68,0,0,0,0,0,0,0,
    2,0,0,0,8,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,130,123,1,255,0,10,0,0,
    0,8,0,0,0,226,15,0,185,122,4,0,0,140,0,0,0,10,0,0,
    0,226,15,0,185,122,12,0,0,130,0,0,0,10,0,0,0,226,15,0,
    140,120,0,5,1,0,0,0,112,82,244,11,0,228,15,0,140,120,0,4,
    1,0,0,0,112,82,246,11,0,228,15,0,140,120,0,4,1,0,0,0,
    112,38,112,13,0,204,15,0,28,120,0,0,0,0,0,0,8,240,240,3,
    0,218,15,0,71,9,44,0,28,0,0,0,0,0,128,3,0,234,15,0,
    195,121,4,0,0,0,0,0,0,37,0,0,0,48,14,0,130,123,2,255,
    0,136,0,0,0,10,0,0,0,36,14,0,12,124,0,2,4,0,0,0,
    112,48,240,11,0,200,31,0,12,114,0,255,3,0,0,0,0,97,240,3,
    0,218,15,0,77,9,0,0,0,0,0,0,0,0,128,3,0,234,15,0,
    25,121,6,0,0,0,0,0,0,33,0,0,0,34,14,0,185,122,6,0,
    0,142,0,0,0,10,0,0,0,226,15,0,130,124,8,0,4,0,0,0,
    0,0,0,8,0,226,15,0,16,125,0,0,6,0,0,0,0,16,48,8,
    0,98,14,0,185,122,9,0,0,3,0,0,0,8,0,0,0,226,15,0,
    130,124,4,0,63,0,0,0,0,0,0,8,0,226,15,0,185,122,14,0,
    0,0,0,0,0,8,0,0,0,202,15,0,185,122,6,0,0,134,0,0,
    0,10,0,0,0,226,15,0,130,123,8,255,0,132,0,0,0,10,0,0,
    0,162,30,2,145,114,5,8,6,0,0,0,63,32,128,15,0,226,15,0,
    185,122,10,0,0,138,0,0,0,10,0,0,0,226,15,0,185,122,18,0,
    0,136,0,0,0,10,0,0,0,228,15,0,145,114,6,8,7,0,0,0,
    4,36,15,8,0,228,15,0,36,126,2,255,5,0,0,0,255,0,142,15,
    0,200,15,0,36,126,3,255,6,0,0,0,255,0,142,15,0,202,15,0,
    129,121,4,2,12,0,0,0,0,27,30,12,0,232,14,0,129,121,14,2,
    12,8,0,0,0,27,30,12,0,34,15,0,36,120,11,5,24,0,0,0,
    255,2,142,7,0,228,143,0,37,120,4,4,24,0,0,0,8,0,142,7,
    0,200,79,0,36,120,5,5,1,0,0,0,11,2,142,7,0,202,15,0,
    129,121,12,4,12,16,0,0,0,27,30,12,0,168,14,0,129,121,8,4,
    12,0,0,0,0,27,30,12,0,104,7,0,129,121,10,4,12,8,0,0,
    0,27,30,12,0,98,7,0,202,114,16,14,0,0,0,0,0,0,14,0,
    0,228,15,1,202,114,17,15,0,0,0,0,0,0,14,0,0,226,15,0,
    144,114,8,9,8,0,0,0,63,224,243,15,0,200,15,0,144,114,4,63,
    4,0,0,0,63,228,255,8,0,228,15,0,140,114,0,8,18,0,0,0,
    112,96,242,11,0,226,15,0,69,121,1,0,96,26,0,0,0,0,128,3,
    0,230,15,0,140,114,0,4,19,0,0,0,16,97,242,11,0,226,15,0,
    202,114,6,12,0,0,0,0,0,0,14,0,0,228,79,0,202,114,7,13,
    0,0,0,0,0,0,14,0,0,228,15,0,130,123,12,255,0,140,0,0,
    0,10,0,0,0,178,14,0,144,114,5,6,16,0,0,128,63,224,241,15,
    0,200,15,0,144,114,6,7,17,0,0,128,63,228,127,8,0,228,15,0,
    140,114,0,5,10,0,0,0,112,16,240,11,0,226,15,0,18,114,255,13,
    12,0,0,0,255,252,128,7,0,198,79,0,140,114,0,6,11,0,0,0,
    0,17,240,11,0,200,15,0,135,114,10,5,10,0,0,0,0,0,0,8,
    0,228,15,0,135,114,11,6,11,0,0,0,0,0,0,8,0,200,15,0,
    71,9,32,0,0,0,0,0,0,0,128,3,0,240,143,0,153,120,5,16,
    2,0,0,0,63,6,0,8,0,204,15,0,16,124,2,8,5,0,0,0,
    255,224,243,15,0,228,15,2,16,124,3,10,5,0,0,0,255,224,245,15,
    0,226,15,0,153,120,5,16,2,0,0,0,17,2,1,8,0,198,15,0,
    18,120,255,3,15,0,0,0,2,200,128,7,0,198,15,0,16,124,4,9,
    5,0,0,0,255,228,255,8,0,228,15,0,16,124,5,11,5,0,0,0,
    255,228,127,9,0,208,15,0,71,137,80,0,16,0,0,0,0,0,128,3,
    0,234,15,0,36,126,2,255,11,0,0,0,255,0,142,15,0,226,15,0,
    12,124,0,6,10,0,0,0,112,16,240,11,0,200,31,0,12,114,0,2,
    255,0,0,0,0,65,240,3,0,218,15,0,71,137,52,0,24,0,0,0,
    0,0,128,3,0,234,15,0,185,122,6,0,0,140,0,0,0,10,0,0,
    0,226,15,0,130,120,5,0,4,0,0,0,0,0,0,0,0,226,15,0,
    140,114,0,6,63,0,0,0,112,82,248,11,0,226,15,0,69,121,0,0,
    176,16,0,0,0,0,128,3,0,226,15,0,140,114,0,7,63,0,0,0,
    112,82,240,11,0,226,15,0,36,114,2,255,255,0,0,0,6,0,142,7,
    0,226,15,0,135,120,7,5,2,0,0,0,0,0,0,14,0,228,15,0,
    135,120,6,5,2,0,0,0,0,0,0,12,0,228,15,0,164,114,5,17,
    7,0,0,0,63,2,142,15,0,196,15,0,36,126,3,255,7,0,0,0,
    255,0,142,15,0,228,15,0,36,126,5,255,6,0,0,0,255,0,142,15,
    0,226,15,0,164,114,6,17,6,0,0,0,63,2,142,15,0,226,15,0,
    37,124,8,3,16,0,0,0,8,0,142,15,0,200,15,2,37,124,4,5,
    16,0,0,0,10,0,142,15,0,200,15,0,36,114,3,255,255,0,0,0,
    255,0,142,7,0,228,15,0,54,124,19,9,5,0,0,0,0,0,0,8,
    0,228,15,0,54,124,22,5,6,0,0,0,0,0,0,8,0,206,15,0,
    16,124,23,2,14,0,0,0,255,224,241,15,0,226,15,0,69,121,2,0,
    144,7,0,0,0,0,128,3,0,226,15,0,28,120,0,0,0,0,0,0,
    56,232,242,3,0,198,15,0,36,114,24,255,255,0,0,0,3,6,14,0,
    0,226,15,0,16,124,25,23,14,0,0,0,255,224,241,15,0,202,15,0,
    36,114,26,255,255,0,0,0,24,6,14,0,0,226,15,0,16,124,27,25,
    14,0,0,0,255,224,241,15,0,202,15,0,36,114,28,255,255,0,0,0,
    26,6,14,0,0,226,15,0,17,114,12,27,8,0,0,0,255,8,128,7,
    0,200,15,0,17,114,13,27,19,0,0,0,28,12,15,0,0,226,15,0,
    71,25,84,0,4,0,0,0,0,0,128,3,0,240,15,0,130,123,10,255,
    0,140,0,0,0,8,0,0,0,36,14,0,12,120,0,10,2,0,0,0,
    112,82,240,3,0,218,31,0,71,137,216,0,0,0,0,0,0,0,128,3,
    0,234,15,0,12,120,0,10,3,0,0,0,112,82,240,3,0,218,15,0,
    71,9,112,0,0,0,0,0,0,0,128,3,0,234,15,0,12,124,0,2,
    10,0,0,0,112,96,240,11,0,228,15,0,12,124,0,23,10,0,0,0,
    112,96,242,11,0,228,15,0,12,124,0,3,11,0,0,0,0,97,240,11,
    0,228,15,0,12,124,0,24,11,0,0,0,16,97,242,11,0,228,15,0,
    12,124,0,25,10,0,0,0,112,96,244,11,0,200,15,0,12,124,0,26,
    11,0,0,0,32,97,244,11,0,202,15,0,17,130,10,2,8,0,0,0,
    255,8,134,7,0,228,15,12,17,146,15,23,8,0,0,0,255,8,136,7,
    0,228,15,4,17,130,11,2,19,0,0,0,3,12,143,1,0,228,15,8,
    17,146,20,23,19,0,0,0,24,12,15,2,0,198,15,0,128,137,14,10,
    12,0,0,0,0,21,16,12,0,164,0,0,36,146,11,255,255,0,0,0,
    20,0,142,7,0,226,31,0,17,162,20,25,8,0,0,0,255,8,134,7,
    0,226,15,0,36,146,10,255,255,0,0,0,15,0,142,7,0,198,15,0,
    17,162,21,25,19,0,0,0,26,12,143,1,0,228,15,0,128,153,15,10,
    12,0,0,0,0,21,16,12,0,228,0,0,36,162,10,255,255,0,0,0,
    20,0,142,7,0,228,31,0,36,162,11,255,255,0,0,0,21,0,142,7,
    0,202,15,0,128,169,20,10,12,0,0,0,0,21,16,12,0,34,15,0,
    12,124,0,27,10,0,0,0,112,96,246,11,0,200,15,0,12,124,0,28,
    11,0,0,0,48,97,246,11,0,226,15,0,36,136,18,14,0,0,1,0,
    255,0,142,7,0,228,79,0,36,152,17,15,0,0,1,0,255,0,142,7,
    0,228,143,0,36,168,16,20,0,0,1,0,255,0,142,7,0,208,15,1,
    71,57,68,0,4,0,0,0,0,0,128,3,0,234,15,0,128,121,7,12,
    12,0,0,0,0,21,16,12,0,164,14,0,36,120,7,7,0,0,1,0,
    255,0,142,7,0,226,79,0,71,121,56,0,4,0,0,0,0,0,128,3,
    0,236,15,0,12,124,0,2,10,0,0,0,112,96,240,11,0,228,15,0,
    12,124,0,25,10,0,0,0,112,96,244,11,0,228,15,0,12,124,0,3,
    11,0,0,0,0,97,240,11,0,228,15,0,12,124,0,26,11,0,0,0,
    32,97,244,11,0,228,15,0,12,124,0,23,10,0,0,0,112,96,242,11,
    0,200,15,0,12,124,0,24,11,0,0,0,16,97,242,11,0,202,15,0,
    17,130,10,2,8,0,0,0,255,16,134,7,0,228,15,12,17,162,14,25,
    8,0,0,0,255,16,136,7,0,228,15,12,17,130,11,2,19,0,0,0,
    3,20,143,1,0,228,15,8,17,162,15,25,19,0,0,0,26,20,15,2,
    0,228,15,8,17,146,12,23,8,0,0,0,255,16,134,7,0,226,15,4,
    128,137,18,10,12,0,0,0,0,25,16,12,0,102,1,0,17,146,13,23,
    19,0,0,0,24,20,143,1,0,202,15,0,128,153,17,12,12,0,0,0,
    0,25,16,12,0,98,5,0,36,162,10,255,255,0,0,0,14,0,142,7,
    0,228,31,0,36,162,11,255,255,0,0,0,15,0,142,7,0,202,15,0,
    128,169,16,10,12,0,0,0,0,25,16,12,0,98,5,0,12,124,0,27,
    10,0,0,0,112,96,246,11,0,200,15,0,12,124,0,28,11,0,0,0,
    48,97,246,11,0,218,15,0,71,57,232,0,0,0,0,0,0,0,128,3,
    0,234,79,0,17,114,10,27,8,0,0,0,255,16,136,7,0,200,15,0,
    17,114,11,27,19,0,0,0,28,20,15,2,0,202,15,0,128,121,7,10,
    12,0,0,0,0,25,16,12,0,98,5,0,71,121,216,0,0,0,0,0,
    0,0,128,3,0,234,15,0,12,124,0,2,10,0,0,0,112,96,240,11,
    0,228,15,0,12,124,0,23,10,0,0,0,112,96,242,11,0,228,15,0,
    12,124,0,3,11,0,0,0,0,97,240,11,0,228,15,0,12,124,0,24,
    11,0,0,0,16,97,242,11,0,228,15,0,12,124,0,25,10,0,0,0,
    112,96,244,11,0,200,15,0,12,124,0,26,11,0,0,0,32,97,244,11,
    0,202,15,0,17,130,10,2,8,0,0,0,255,8,134,7,0,228,15,12,
    17,146,15,23,8,0,0,0,255,8,136,7,0,228,15,4,17,130,11,2,
    19,0,0,0,3,12,143,1,0,228,15,8,17,146,20,23,19,0,0,0,
    24,12,15,2,0,198,15,0,128,137,14,10,12,0,0,0,0,21,16,12,
    0,164,0,0,36,146,11,255,255,0,0,0,20,0,142,7,0,226,31,0,
    17,162,20,25,8,0,0,0,255,8,134,7,0,226,15,0,36,146,10,255,
    255,0,0,0,15,0,142,7,0,198,15,0,17,162,21,25,19,0,0,0,
    26,12,143,1,0,228,15,0,128,153,15,10,12,0,0,0,0,21,16,12,
    0,228,0,0,36,162,10,255,255,0,0,0,20,0,142,7,0,228,31,0,
    36,162,11,255,255,0,0,0,21,0,142,7,0,202,15,0,128,169,20,10,
    12,0,0,0,0,21,16,12,0,34,15,0,12,124,0,27,10,0,0,0,
    112,96,246,11,0,200,15,0,12,124,0,28,11,0,0,0,48,97,246,11,
    0,226,15,0,48,130,18,255,14,0,0,32,0,65,0,0,0,228,79,0,
    48,146,17,255,15,0,0,32,0,65,0,0,0,228,143,0,48,162,16,255,
    20,0,0,32,0,65,0,0,0,208,15,1,71,57,116,0,0,0,0,0,
    0,0,128,3,0,234,15,0,128,121,7,12,12,0,0,0,0,21,16,12,
    0,164,14,0,48,114,7,255,7,0,0,32,0,65,0,0,0,226,79,0,
    71,121,104,0,0,0,0,0,0,0,128,3,0,236,15,0,12,124,0,2,
    10,0,0,0,112,96,240,11,0,200,15,0,12,124,0,3,11,0,0,0,
    0,97,240,11,0,218,15,0,17,130,10,2,8,0,0,0,255,24,130,7,
    0,200,15,0,17,130,11,2,19,0,0,0,3,28,143,0,0,204,15,0,
    128,137,10,10,12,0,0,0,0,27,16,12,0,162,14,0,12,124,0,27,
    10,0,0,0,112,96,246,11,0,228,15,0,12,124,0,23,10,0,0,0,
    112,96,242,11,0,228,15,0,12,124,0,28,11,0,0,0,48,97,246,11,
    0,228,15,0,12,124,0,25,10,0,0,0,112,96,244,11,0,228,15,0,
    12,124,0,24,11,0,0,0,16,97,242,11,0,228,15,0,12,124,0,26,
    11,0,0,0,32,97,244,11,0,206,15,0,17,178,20,27,8,0,0,0,
    255,24,140,7,0,200,15,0,17,178,21,27,19,0,0,0,28,28,15,3,
    0,228,15,8,17,146,14,23,8,0,0,0,255,24,136,7,0,228,15,8,
    17,162,12,25,8,0,0,0,255,24,138,7,0,228,15,0,17,146,15,23,
    19,0,0,0,24,28,15,2,0,228,15,8,17,162,13,25,19,0,0,0,
    26,28,143,2,0,200,15,0,128,153,14,14,12,0,0,0,0,27,16,12,
    0,232,14,0,128,169,12,12,12,0,0,0,0,27,16,12,0,34,15,0,
    16,131,18,0,10,0,0,0,0,16,48,0,0,164,64,0,36,178,10,255,
    255,0,0,0,20,0,142,7,0,228,31,0,36,178,11,255,255,0,0,0,
    21,0,142,7,0,204,15,0,128,185,10,10,12,0,0,0,0,27,16,12,
    0,98,15,0,16,147,17,0,14,0,0,0,0,16,48,0,0,240,128,0,
    16,163,16,0,12,0,0,0,0,16,48,0,0,48,1,1,16,179,7,0,
    10,0,0,0,0,16,48,0,0,36,192,3,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,28,120,0,0,0,0,0,0,40,232,248,3,
    0,226,15,0,69,121,2,0,176,7,0,0,0,0,128,3,0,216,15,0,
    71,73,100,0,4,0,0,0,0,0,128,3,0,234,15,0,130,123,29,255,
    0,141,0,0,0,8,0,0,0,226,14,0,17,114,10,2,4,0,0,0,
    255,8,138,7,0,228,95,12,17,114,12,23,4,0,0,0,255,8,136,7,
    0,228,15,4,17,114,11,2,22,0,0,0,3,12,143,2,0,228,15,8,
    17,114,13,23,22,0,0,0,24,12,15,2,0,228,15,0,17,114,14,25,
    4,0,0,0,255,8,140,7,0,228,15,8,17,114,20,27,4,0,0,0,
    255,8,136,7,0,196,15,0,17,114,15,25,22,0,0,0,26,12,15,3,
    0,228,15,8,17,114,21,27,22,0,0,0,28,12,15,2,0,228,15,0,
    12,120,0,29,2,0,0,0,112,82,250,3,0,218,143,0,71,217,224,0,
    0,0,0,0,0,0,128,3,0,234,15,0,12,120,0,29,3,0,0,0,
    112,82,248,3,0,218,15,0,71,73,104,0,0,0,0,0,0,0,128,3,
    0,234,15,0,11,120,0,0,0,0,128,63,0,208,248,3,0,218,47,0,
    71,73,40,0,0,0,0,0,0,0,128,3,0,234,15,0,62,130,23,255,
    18,0,0,0,255,16,0,0,0,228,15,2,62,146,24,255,17,0,0,0,
    255,16,0,0,0,228,15,0,62,162,25,255,16,0,0,0,255,16,0,0,
    0,226,15,0,133,137,0,10,23,0,0,0,12,21,16,12,0,232,1,0,
    133,153,0,12,24,0,0,0,12,21,16,12,0,232,1,0,133,169,0,14,
    25,0,0,0,12,21,16,12,0,226,1,0,71,57,140,0,4,0,0,0,
    0,0,128,3,0,234,15,0,62,114,10,255,7,0,0,0,255,16,0,0,
    0,202,31,0,133,121,0,20,10,0,0,0,12,21,16,12,0,226,1,0,
    71,121,128,0,4,0,0,0,0,0,128,3,0,234,15,0,32,130,23,18,
    0,0,0,0,0,0,64,0,0,226,15,10,32,146,24,17,0,0,0,0,
    0,0,64,0,0,226,15,8,32,162,25,16,0,0,0,0,0,0,64,0,
    0,198,15,0,62,130,23,255,23,0,0,0,255,16,0,0,0,228,15,0,
    62,146,24,255,24,0,0,0,255,16,0,0,0,228,15,0,62,162,25,255,
    25,0,0,0,255,16,0,0,0,226,15,0,133,137,0,10,23,0,0,0,
    12,21,16,12,0,232,9,0,133,153,0,12,24,0,0,0,12,21,16,12,
    0,232,9,0,133,169,0,14,25,0,0,0,12,21,16,12,0,226,9,0,
    71,57,88,0,4,0,0,0,0,0,128,3,0,234,15,0,32,114,10,7,
    0,0,0,0,0,0,64,0,0,202,15,1,62,114,10,255,10,0,0,0,
    255,16,0,0,0,202,15,0,133,121,0,20,10,0,0,0,12,21,16,12,
    0,226,1,0,71,121,72,0,4,0,0,0,0,0,128,3,0,234,15,0,
    32,130,13,18,0,0,0,0,0,0,64,0,0,226,47,2,17,130,10,2,
    4,0,0,0,255,16,136,7,0,226,15,0,32,146,20,17,0,0,0,0,
    0,0,64,0,0,226,15,8,11,136,0,0,0,0,128,63,0,208,250,3,
    0,226,15,0,32,162,21,16,0,0,0,0,0,0,64,0,0,226,15,0,
    17,130,11,2,22,0,0,0,3,20,15,2,0,228,15,0,8,130,13,13,
    18,0,0,0,0,0,128,2,0,228,15,0,11,152,0,0,0,0,128,63,
    0,208,248,3,0,228,15,0,17,146,12,23,4,0,0,0,255,16,138,7,
    0,226,15,8,133,137,0,10,13,0,0,0,12,25,16,12,0,226,1,0,
    17,162,14,25,4,0,0,0,255,16,128,7,0,196,15,0,11,168,0,0,
    0,0,128,63,0,208,252,3,0,228,15,0,17,162,25,25,22,0,0,0,
    26,20,15,0,0,228,15,0,8,146,15,20,17,0,0,0,0,0,0,2,
    0,228,15,0,8,162,21,21,16,0,0,0,0,0,0,3,0,228,15,0,
    17,146,13,23,22,0,0,0,24,20,143,2,0,226,31,0,36,162,10,255,
    255,0,0,0,14,0,142,7,0,228,15,0,36,162,11,255,255,0,0,0,
    25,0,142,7,0,196,15,0,133,153,0,12,15,0,0,0,12,25,16,12,
    0,232,5,0,133,169,0,10,21,0,0,0,12,25,16,12,0,226,5,0,
    71,57,244,0,0,0,0,0,0,0,128,3,0,234,15,0,32,114,12,7,
    0,0,0,0,0,0,64,0,0,226,79,0,17,114,10,27,4,0,0,0,
    255,16,128,7,0,228,15,4,11,120,0,0,0,0,128,63,0,208,242,3,
    0,228,15,0,17,114,11,27,22,0,0,0,28,20,15,0,0,228,15,0,
    8,114,13,12,7,0,0,0,0,0,128,0,0,202,15,0,133,121,0,10,
    13,0,0,0,12,25,16,12,0,226,7,0,71,121,216,0,0,0,0,0,
    0,0,128,3,0,234,15,0,32,130,23,18,0,0,0,0,0,0,64,0,
    0,226,47,10,11,136,0,0,0,0,128,63,0,208,248,3,0,226,15,4,
    32,146,24,17,0,0,0,0,0,0,64,0,0,226,15,8,11,152,0,0,
    0,0,128,63,0,208,250,3,0,226,15,0,32,162,25,16,0,0,0,0,
    0,0,64,0,0,226,15,0,11,168,0,0,0,0,128,63,0,208,252,3,
    0,228,15,0,8,130,23,23,18,0,0,0,0,0,0,2,0,228,15,0,
    8,146,24,24,17,0,0,0,0,0,128,2,0,228,15,0,8,162,25,25,
    16,0,0,0,0,0,0,3,0,196,15,0,62,130,23,255,23,0,0,0,
    255,0,0,0,0,228,15,0,62,146,24,255,24,0,0,0,255,0,0,0,
    0,228,15,0,62,162,25,255,25,0,0,0,255,0,0,0,0,226,15,0,
    133,137,0,10,23,0,0,0,12,21,16,12,0,232,1,0,133,153,0,12,
    24,0,0,0,12,21,16,12,0,232,1,0,133,169,0,14,25,0,0,0,
    12,21,16,12,0,226,1,0,71,57,152,0,0,0,0,0,0,0,128,3,
    0,234,15,0,32,114,10,7,0,0,0,0,0,0,64,0,0,226,31,0,
    11,120,0,0,0,0,128,63,0,208,240,3,0,200,15,0,8,114,10,10,
    7,0,0,0,0,0,0,0,0,200,15,0,62,114,10,255,10,0,0,0,
    255,0,0,0,0,202,15,0,133,121,0,20,10,0,0,0,12,21,16,12,
    0,226,3,0,71,121,128,0,0,0,0,0,0,0,128,3,0,234,15,0,
    32,130,11,18,0,0,0,0,0,0,64,0,0,226,127,10,11,136,0,0,
    0,0,128,63,0,208,248,3,0,226,15,4,32,146,14,17,0,0,0,0,
    0,0,64,0,0,226,15,8,11,152,0,0,0,0,128,63,0,208,250,3,
    0,226,15,0,32,162,15,16,0,0,0,0,0,0,64,0,0,226,15,0,
    8,130,12,11,18,0,0,0,0,0,0,2,0,226,15,0,32,178,30,7,
    0,0,0,0,0,0,64,0,0,226,15,0,17,130,10,2,4,0,0,0,
    255,24,136,7,0,228,15,0,8,146,29,14,17,0,0,0,0,0,128,2,
    0,228,15,0,16,131,12,0,12,0,0,0,0,24,32,0,0,34,14,0,
    17,130,11,2,22,0,0,0,3,28,15,2,0,196,15,0,11,168,0,0,
    0,0,128,63,0,208,248,3,0,200,15,0,8,162,15,15,16,0,0,0,
    0,0,0,2,0,228,15,0,11,184,0,0,0,0,128,63,0,208,248,3,
    0,200,15,0,8,178,30,30,7,0,0,0,0,0,0,2,0,226,15,0,
    16,163,14,0,15,0,0,0,0,24,32,0,0,226,15,0,133,137,0,10,
    12,0,0,0,12,27,16,12,0,226,17,0,17,146,20,23,4,0,0,0,
    255,24,128,7,0,200,15,0,17,146,21,23,22,0,0,0,24,28,15,0,
    0,228,15,0,16,147,10,0,29,0,0,0,0,24,32,0,0,34,30,0,
    36,146,12,255,255,0,0,0,20,0,142,7,0,226,15,0,17,162,20,25,
    4,0,0,0,255,24,128,7,0,226,15,0,36,146,13,255,255,0,0,0,
    21,0,142,7,0,198,15,0,17,162,21,25,22,0,0,0,26,28,15,0,
    0,228,15,0,133,153,0,12,10,0,0,0,12,27,16,12,0,226,17,0,
    17,178,23,27,4,0,0,0,255,24,130,7,0,198,15,0,133,169,0,20,
    14,0,0,0,12,27,16,12,0,226,3,0,17,178,28,27,22,0,0,0,
    28,28,143,0,0,226,15,0,16,179,10,0,30,0,0,0,0,24,32,0,
    0,34,30,0,36,178,12,255,255,0,0,0,23,0,142,7,0,198,15,0,
    36,178,13,255,255,0,0,0,28,0,142,7,0,202,15,0,133,185,0,12,
    10,0,0,0,12,27,16,12,0,228,19,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,36,126,11,255,14,0,0,0,255,0,142,15,
    0,200,255,1,37,120,2,11,4,0,0,0,2,0,142,7,0,198,15,0,
    12,124,0,2,10,0,0,0,112,96,240,11,0,200,15,0,12,124,0,3,
    11,0,0,0,0,97,240,11,0,218,15,0,71,137,12,0,240,255,255,255,
    255,255,131,3,0,234,15,0,65,121,0,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,121,244,0,4,0,0,0,0,0,128,3,0,234,15,0,
    153,120,6,63,2,0,0,0,11,22,1,8,0,226,15,0,69,121,0,0,
    80,5,0,0,0,0,128,3,0,226,15,0,153,120,5,10,2,0,0,0,
    11,18,0,8,0,200,15,0,36,126,8,255,6,0,0,0,255,0,142,15,
    0,228,15,0,12,124,0,6,5,0,0,0,112,16,240,11,0,200,31,0,
    12,114,0,8,255,0,0,0,0,65,240,3,0,218,15,0,71,137,60,0,
    4,0,0,0,0,0,128,3,0,234,15,0,11,120,0,0,0,0,128,63,
    0,208,240,3,0,218,47,0,71,9,144,0,0,0,0,0,0,0,128,3,
    0,234,15,0,69,121,2,0,32,2,0,0,0,0,128,3,0,226,15,0,
    36,114,19,255,255,0,0,0,6,0,142,7,0,228,15,0,36,114,24,255,
    255,0,0,0,255,0,142,7,0,206,15,0,36,120,22,19,16,0,0,0,
    255,0,142,7,0,226,15,4,25,120,23,19,4,0,0,0,24,2,1,0,
    0,200,15,0,16,114,14,2,22,0,0,0,255,224,241,7,0,202,15,0,
    36,120,15,4,1,0,0,0,23,6,14,0,0,202,15,0,128,121,8,14,
    12,0,0,0,0,29,16,12,0,162,14,0,16,124,19,19,14,0,0,0,
    255,224,241,15,0,226,15,0,36,126,21,255,14,0,0,0,255,0,142,15,
    0,228,15,0,36,126,13,255,14,0,0,0,255,0,142,15,0,228,15,0,
    36,114,24,255,255,0,0,0,24,6,14,0,0,226,15,0,12,124,0,19,
    5,0,0,0,112,96,240,11,0,200,15,0,12,124,0,24,6,0,0,0,
    0,97,240,11,0,218,15,0,17,130,20,21,14,0,0,0,255,32,130,7,
    0,200,15,0,17,130,21,13,15,0,0,0,255,36,143,0,0,226,15,0,
    36,114,12,255,255,0,0,0,8,0,142,7,0,228,79,0,36,114,13,255,
    255,0,0,0,9,0,142,7,0,228,15,0,36,114,14,255,255,0,0,0,
    10,0,142,7,0,228,15,0,36,114,15,255,255,0,0,0,11,0,142,7,
    0,204,15,0,128,137,12,20,12,0,0,0,0,29,16,12,0,162,0,0,
    16,114,22,3,22,0,0,0,255,224,243,7,0,226,15,0,36,126,25,255,
    14,0,0,0,255,0,142,15,0,228,15,0,36,126,27,255,14,0,0,0,
    255,0,142,15,0,228,15,0,36,120,23,5,1,0,0,0,23,6,142,0,
    0,226,15,0,17,130,20,25,22,0,0,0,255,32,130,7,0,200,31,0,
    133,121,0,22,8,0,0,0,12,29,16,12,0,226,1,0,17,130,21,27,
    23,0,0,0,255,36,143,0,0,202,15,0,133,137,0,20,12,0,0,0,
    12,29,16,12,0,226,65,0,16,124,19,19,14,0,0,0,255,224,241,15,
    0,202,15,0,36,114,24,255,255,0,0,0,24,6,14,0,0,226,15,0,
    12,124,0,19,5,0,0,0,112,96,240,11,0,200,15,0,12,124,0,24,
    6,0,0,0,0,97,240,11,0,218,15,0,71,137,132,0,252,255,255,255,
    255,255,131,3,0,234,31,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,121,164,0,0,0,0,0,0,0,128,3,0,234,15,0,
    36,114,20,255,255,0,0,0,6,0,142,7,0,228,15,0,36,114,19,255,
    255,0,0,0,255,0,142,7,0,206,15,0,36,120,24,20,16,0,0,0,
    255,0,142,7,0,226,15,4,25,120,21,20,4,0,0,0,19,2,1,0,
    0,200,15,0,16,114,8,2,24,0,0,0,255,224,241,7,0,202,15,0,
    36,120,9,4,1,0,0,0,21,6,14,0,0,202,15,0,128,121,12,8,
    12,0,0,0,0,29,16,12,0,162,14,0,16,124,20,20,14,0,0,0,
    255,224,241,15,0,226,15,0,36,126,23,255,14,0,0,0,255,0,142,15,
    0,228,15,0,36,126,11,255,14,0,0,0,255,0,142,15,0,228,15,0,
    36,114,19,255,255,0,0,0,19,6,14,0,0,226,15,0,12,124,0,20,
    5,0,0,0,112,96,240,11,0,200,15,0,12,124,0,19,6,0,0,0,
    0,97,240,11,0,218,15,0,17,130,22,23,8,0,0,0,255,32,130,7,
    0,200,15,0,17,130,23,11,9,0,0,0,255,36,143,0,0,226,15,0,
    36,114,8,255,255,0,0,0,12,0,142,7,0,228,79,0,36,114,9,255,
    255,0,0,0,13,0,142,7,0,228,15,0,36,114,10,255,255,0,0,0,
    14,0,142,7,0,228,15,0,36,114,11,255,255,0,0,0,15,0,142,7,
    0,204,15,0,128,137,8,22,12,0,0,0,0,29,16,12,0,162,0,0,
    16,114,24,3,24,0,0,0,255,224,243,7,0,226,15,0,36,126,27,255,
    14,0,0,0,255,0,142,15,0,228,15,0,32,114,15,15,0,0,0,0,
    0,0,64,0,0,226,15,8,36,126,29,255,14,0,0,0,255,0,142,15,
    0,228,15,0,32,114,14,14,0,0,0,0,0,0,64,0,0,226,15,8,
    36,120,25,5,1,0,0,0,21,6,142,0,0,228,15,0,32,114,13,13,
    0,0,0,0,0,0,64,0,0,226,15,8,32,114,12,12,0,0,0,0,
    0,0,64,0,0,226,15,0,17,130,22,27,24,0,0,0,255,32,130,7,
    0,200,31,0,133,121,0,24,12,0,0,0,12,29,16,12,0,226,1,0,
    17,130,23,29,25,0,0,0,255,36,143,0,0,226,15,0,32,130,11,11,
    0,0,0,0,0,0,64,0,0,226,79,8,32,130,10,10,0,0,0,0,
    0,0,64,0,0,226,15,8,32,130,9,9,0,0,0,0,0,0,64,0,
    0,226,15,8,32,130,8,8,0,0,0,0,0,0,64,0,0,202,15,0,
    133,137,0,22,8,0,0,0,12,29,16,12,0,226,1,0,16,124,20,20,
    14,0,0,0,255,224,241,15,0,202,15,0,36,114,19,255,255,0,0,0,
    19,6,14,0,0,226,15,0,12,124,0,20,5,0,0,0,112,96,240,11,
    0,200,15,0,12,124,0,19,6,0,0,0,0,97,240,11,0,218,15,0,
    71,137,100,0,252,255,255,255,255,255,131,3,0,234,31,0,65,121,0,0,
    0,0,0,0,0,0,128,3,0,234,15,0,146,120,5,10,252,255,255,255,
    63,192,142,15,0,204,15,0,16,124,12,6,5,0,0,0,255,224,243,15,
    0,200,15,0,12,124,0,12,10,0,0,0,112,96,240,11,0,226,15,0,
    36,126,15,255,11,0,0,0,255,6,142,8,0,202,15,0,12,124,0,15,
    11,0,0,0,0,97,240,11,0,218,15,0,71,9,128,0,0,0,0,0,
    0,0,128,3,0,234,15,0,11,120,0,0,0,0,128,63,0,208,240,3,
    0,218,47,0,71,9,64,0,0,0,0,0,0,0,128,3,0,234,15,0,
    69,121,0,0,224,0,0,0,0,0,128,3,0,226,15,0,36,120,10,12,
    4,0,0,0,255,0,142,7,0,226,31,4,25,120,11,12,2,0,0,0,
    15,2,1,0,0,200,15,0,16,114,8,2,10,0,0,0,255,224,241,7,
    0,202,15,0,36,120,9,4,1,0,0,0,11,6,14,0,0,204,15,0,
    128,121,9,8,12,0,0,0,0,25,16,12,0,162,14,0,16,114,10,3,
    10,0,0,0,255,224,241,7,0,202,15,0,36,120,11,5,1,0,0,0,
    11,6,14,0,0,226,15,0,16,124,12,12,14,0,0,0,255,224,241,15,
    0,202,15,0,36,114,15,255,255,0,0,0,15,6,14,0,0,226,15,0,
    12,124,0,12,10,0,0,0,112,96,240,11,0,200,15,0,12,124,0,15,
    11,0,0,0,0,97,240,11,0,226,15,0,133,121,0,10,9,0,0,0,
    12,25,16,12,0,216,65,0,71,137,204,0,252,255,255,255,255,255,131,3,
    0,234,15,0,65,121,0,0,0,0,0,0,0,0,128,3,0,234,15,0,
    71,121,56,0,0,0,0,0,0,0,128,3,0,234,15,0,36,120,8,12,
    4,0,0,0,255,0,142,7,0,226,31,4,25,120,9,12,2,0,0,0,
    15,2,1,0,0,200,15,0,16,114,10,2,8,0,0,0,255,224,241,7,
    0,202,15,0,36,120,11,4,1,0,0,0,9,6,14,0,0,204,15,0,
    128,121,11,10,12,0,0,0,0,25,16,12,0,162,14,0,16,114,8,3,
    8,0,0,0,255,224,241,7,0,202,15,0,36,120,9,5,1,0,0,0,
    9,6,14,0,0,226,15,0,16,124,12,12,14,0,0,0,255,224,241,15,
    0,202,15,0,36,114,15,255,255,0,0,0,15,6,14,0,0,226,15,0,
    12,124,0,12,10,0,0,0,112,96,240,11,0,200,15,0,12,124,0,15,
    11,0,0,0,0,97,240,11,0,226,15,0,32,114,13,11,0,0,0,0,
    0,0,64,0,0,202,79,0,133,121,0,8,13,0,0,0,12,25,16,12,
    0,238,1,0,71,137,200,0,252,255,255,255,255,255,131,3,0,234,15,0,
    65,121,1,0,0,0,0,0,0,0,128,3,0,234,15,0,28,120,0,0,
    0,0,0,0,24,232,240,3,0,218,15,0,71,9,8,0,228,255,255,255,
    255,255,131,3,0,234,15,0,77,121,0,0,0,0,0,0,0,0,128,3,
    0,234,15,0,195,121,8,0,0,0,0,0,0,37,0,0,0,48,14,0,
    130,123,2,255,0,136,0,0,0,10,0,0,0,36,14,0,12,124,0,2,
    8,0,0,0,112,48,240,11,0,200,31,0,12,114,0,255,3,0,0,0,
    0,97,240,3,0,218,15,0,77,9,0,0,0,0,0,0,0,0,128,3,
    0,234,15,0,185,122,14,0,0,3,0,0,0,8,0,0,0,226,15,0,
    130,124,4,0,63,0,0,0,0,0,0,8,0,226,15,0,185,122,15,0,
    0,0,0,0,0,8,0,0,0,202,15,0,185,122,6,0,0,134,0,0,
    0,10,0,0,0,226,15,0,130,123,6,255,0,132,0,0,0,10,0,0,
    0,34,14,0,145,114,5,8,6,0,0,0,63,32,128,15,0,226,15,0,
    25,121,0,0,0,0,0,0,0,33,0,0,0,98,46,0,185,122,10,0,
    0,138,0,0,0,10,0,0,0,228,15,0,145,114,6,8,7,0,0,0,
    4,36,15,8,0,228,15,0,36,126,2,255,5,0,0,0,255,0,142,15,
    0,200,15,0,36,126,3,255,6,0,0,0,255,0,142,15,0,202,15,0,
    129,121,4,2,12,0,0,0,0,27,30,12,0,164,14,0,36,120,9,5,
    24,0,0,0,255,2,142,7,0,228,79,0,37,120,4,4,24,0,0,0,
    6,0,142,7,0,200,31,0,36,120,5,5,1,0,0,0,9,2,142,7,
    0,228,15,0,129,121,8,2,12,8,0,0,0,27,30,12,0,168,14,0,
    129,121,6,4,12,16,0,0,0,27,30,12,0,226,142,0,69,121,0,0,
    144,21,0,0,0,0,128,3,0,226,15,0,202,114,16,8,0,0,0,0,
    0,0,14,0,0,228,79,0,202,114,17,9,0,0,0,0,0,0,14,0,
    0,196,15,0,202,114,6,6,0,0,0,0,0,0,14,0,0,228,143,0,
    202,114,7,7,0,0,0,0,0,0,14,0,0,214,15,0,144,114,5,6,
    16,0,0,128,63,224,241,15,0,200,15,0,144,114,6,7,17,0,0,128,
    63,228,127,8,0,228,15,0,140,114,0,5,10,0,0,0,112,16,240,11,
    0,200,15,0,140,114,0,6,11,0,0,0,0,17,240,11,0,200,15,0,
    135,114,9,6,11,0,0,0,0,0,0,8,0,228,15,0,135,114,7,5,
    10,0,0,0,0,0,0,8,0,228,15,0,144,114,8,14,8,0,0,0,
    63,224,241,15,0,228,15,0,36,126,2,255,9,0,0,0,255,0,142,15,
    0,226,15,0,185,122,10,0,0,136,0,0,0,10,0,0,0,226,15,0,
    12,124,0,0,7,0,0,0,112,16,240,11,0,226,47,0,144,114,4,63,
    4,0,0,0,63,228,127,8,0,228,15,0,140,114,0,8,10,0,0,0,
    112,96,240,11,0,226,15,0,12,114,0,2,255,0,0,0,0,65,240,3,
    0,198,15,0,140,114,0,4,11,0,0,0,0,97,240,11,0,212,15,0,
    71,137,20,0,20,0,0,0,0,0,128,3,0,234,15,3,129,121,8,4,
    12,0,0,0,0,27,30,12,0,162,14,0,185,122,10,0,0,140,0,0,
    0,10,0,0,0,198,15,0,129,121,10,4,12,8,0,0,0,27,30,12,
    0,226,14,0,140,114,0,10,63,0,0,0,112,82,242,11,0,226,15,0,
    36,114,2,255,255,0,0,0,255,0,142,7,0,226,15,0,140,114,0,11,
    63,0,0,0,112,82,248,11,0,226,15,0,130,120,5,0,4,0,0,0,
    0,0,0,0,0,228,15,0,135,120,6,5,2,0,0,0,0,0,128,12,
    0,228,15,0,135,120,5,5,2,0,0,0,0,0,0,14,0,228,15,0,
    135,120,6,6,8,0,0,0,0,0,128,9,0,196,15,0,135,120,10,5,
    8,0,0,0,0,0,0,9,0,228,15,0,164,114,5,17,6,0,0,0,
    63,2,142,15,0,228,15,0,36,126,3,255,6,0,0,0,255,0,142,15,
    0,226,15,0,164,114,6,17,10,0,0,0,63,2,142,15,0,228,15,0,
    36,126,7,255,10,0,0,0,255,0,142,15,0,228,15,0,37,124,8,3,
    16,0,0,0,8,0,142,15,0,200,79,0,37,124,10,7,16,0,0,0,
    10,0,142,15,0,200,143,0,54,124,3,9,5,0,0,0,0,0,0,8,
    0,228,15,0,54,124,4,11,6,0,0,0,0,0,0,8,0,206,15,0,
    28,120,0,0,0,0,0,0,56,232,244,3,0,226,15,0,69,121,1,0,
    144,8,0,0,0,0,128,3,0,226,15,0,16,124,26,0,15,0,0,0,
    255,224,241,15,0,200,15,0,16,124,22,26,15,0,0,0,255,224,243,15,
    0,226,47,0,36,114,25,255,255,0,0,0,2,6,14,0,0,198,15,0,
    16,124,5,22,15,0,0,0,255,224,241,15,0,226,15,0,36,114,6,255,
    255,0,0,0,25,6,142,0,0,200,15,0,36,114,7,255,255,0,0,0,
    6,6,14,0,0,226,15,0,71,41,156,0,4,0,0,0,0,0,128,3,
    0,238,143,3,130,123,20,255,0,140,0,0,0,8,0,0,0,36,14,0,
    12,120,0,20,2,0,0,0,112,82,240,3,0,218,31,0,71,137,8,0,
    4,0,0,0,0,0,128,3,0,234,15,0,12,120,0,20,3,0,0,0,
    112,82,240,3,0,218,15,0,71,9,136,0,0,0,0,0,0,0,128,3,
    0,234,15,0,12,124,0,0,7,0,0,0,112,96,240,11,0,228,15,0,
    12,124,0,26,7,0,0,0,112,96,242,11,0,228,15,0,12,124,0,2,
    9,0,0,0,0,97,240,11,0,228,15,0,12,124,0,25,9,0,0,0,
    16,97,242,11,0,228,15,0,12,124,0,22,7,0,0,0,112,96,244,11,
    0,200,15,0,12,124,0,6,9,0,0,0,32,97,244,11,0,202,15,0,
    17,130,20,0,8,0,0,0,255,8,134,7,0,228,15,8,17,146,24,26,
    8,0,0,0,255,8,136,7,0,228,15,0,17,130,21,0,3,0,0,0,
    2,12,143,1,0,228,15,8,17,146,27,26,3,0,0,0,25,12,15,2,
    0,198,15,0,128,137,23,20,12,0,0,0,0,21,16,12,0,164,0,0,
    36,146,21,255,255,0,0,0,27,0,142,7,0,226,31,0,17,162,27,22,
    8,0,0,0,255,8,134,7,0,226,15,0,36,146,20,255,255,0,0,0,
    24,0,142,7,0,198,15,0,17,162,28,22,3,0,0,0,6,12,143,1,
    0,228,15,0,128,153,24,20,12,0,0,0,0,21,16,12,0,228,0,0,
    36,162,20,255,255,0,0,0,27,0,142,7,0,228,31,0,36,162,21,255,
    255,0,0,0,28,0,142,7,0,202,15,0,128,169,27,20,12,0,0,0,
    0,21,16,12,0,34,15,0,12,124,0,5,7,0,0,0,112,96,246,11,
    0,200,15,0,12,124,0,7,9,0,0,0,48,97,246,11,0,226,15,0,
    36,136,23,23,0,0,1,0,255,0,142,7,0,200,79,0,16,131,12,0,
    23,0,0,0,0,24,32,0,0,98,0,0,36,152,24,24,0,0,1,0,
    255,0,142,7,0,206,143,0,16,147,14,0,24,0,0,0,0,24,32,0,
    0,162,0,0,36,168,27,27,0,0,1,0,255,0,142,7,0,206,15,1,
    16,163,16,0,27,0,0,0,0,24,32,0,0,226,0,0,71,57,128,0,
    4,0,0,0,0,0,128,3,0,234,111,0,17,114,18,5,8,0,0,0,
    255,8,136,7,0,200,15,0,17,114,19,5,3,0,0,0,7,12,15,2,
    0,202,15,0,128,121,18,18,12,0,0,0,0,21,16,12,0,164,14,0,
    36,120,20,18,0,0,1,0,255,0,142,7,0,200,79,0,16,115,18,0,
    20,0,0,0,0,24,32,0,0,162,2,0,71,121,104,0,4,0,0,0,
    0,0,128,3,0,234,15,0,12,124,0,0,7,0,0,0,112,96,240,11,
    0,228,15,0,12,124,0,26,7,0,0,0,112,96,242,11,0,228,15,0,
    12,124,0,2,9,0,0,0,0,97,240,11,0,228,15,0,12,124,0,25,
    9,0,0,0,16,97,242,11,0,228,15,0,12,124,0,22,7,0,0,0,
    112,96,244,11,0,200,15,0,12,124,0,6,9,0,0,0,32,97,244,11,
    0,202,15,0,17,130,20,0,8,0,0,0,255,16,134,7,0,228,15,8,
    17,146,24,26,8,0,0,0,255,16,136,7,0,228,15,0,17,130,21,0,
    3,0,0,0,2,20,143,1,0,228,15,8,17,146,27,26,3,0,0,0,
    25,20,15,2,0,198,15,0,128,137,23,20,12,0,0,0,0,25,16,12,
    0,164,0,0,36,146,21,255,255,0,0,0,27,0,142,7,0,226,31,0,
    17,162,27,22,8,0,0,0,255,16,134,7,0,226,15,0,36,146,20,255,
    255,0,0,0,24,0,142,7,0,198,15,0,17,162,28,22,3,0,0,0,
    6,20,143,1,0,228,15,0,128,153,24,20,12,0,0,0,0,25,16,12,
    0,228,0,0,36,162,20,255,255,0,0,0,27,0,142,7,0,228,31,0,
    36,162,21,255,255,0,0,0,28,0,142,7,0,202,15,0,128,169,27,20,
    12,0,0,0,0,25,16,12,0,34,15,0,12,124,0,5,7,0,0,0,
    112,96,246,11,0,200,15,0,12,124,0,7,9,0,0,0,48,97,246,11,
    0,226,15,0,16,131,12,0,23,0,0,0,0,24,32,0,0,112,64,0,
    16,147,14,0,24,0,0,0,0,24,32,0,0,176,128,0,16,163,16,0,
    27,0,0,0,0,24,32,0,0,226,0,1,71,57,4,0,4,0,0,0,
    0,0,128,3,0,234,111,0,17,114,18,5,8,0,0,0,255,16,136,7,
    0,200,15,0,17,114,19,5,3,0,0,0,7,20,15,2,0,202,15,0,
    128,121,18,18,12,0,0,0,0,25,16,12,0,164,14,0,16,115,18,0,
    18,0,0,0,0,24,32,0,0,98,78,0,71,121,240,0,0,0,0,0,
    0,0,128,3,0,234,15,0,12,124,0,0,7,0,0,0,112,96,240,11,
    0,228,15,0,12,124,0,26,7,0,0,0,112,96,242,11,0,228,15,0,
    12,124,0,2,9,0,0,0,0,97,240,11,0,228,15,0,12,124,0,25,
    9,0,0,0,16,97,242,11,0,228,15,0,12,124,0,22,7,0,0,0,
    112,96,244,11,0,200,15,0,12,124,0,6,9,0,0,0,32,97,244,11,
    0,202,15,0,17,130,20,0,8,0,0,0,255,8,134,7,0,228,15,8,
    17,146,24,26,8,0,0,0,255,8,136,7,0,228,15,0,17,130,21,0,
    3,0,0,0,2,12,143,1,0,228,15,8,17,146,27,26,3,0,0,0,
    25,12,15,2,0,198,15,0,128,137,23,20,12,0,0,0,0,21,16,12,
    0,164,0,0,36,146,21,255,255,0,0,0,27,0,142,7,0,226,31,0,
    17,162,27,22,8,0,0,0,255,8,134,7,0,226,15,0,36,146,20,255,
    255,0,0,0,24,0,142,7,0,198,15,0,17,162,28,22,3,0,0,0,
    6,12,143,1,0,228,15,0,128,153,24,20,12,0,0,0,0,21,16,12,
    0,228,0,0,36,162,20,255,255,0,0,0,27,0,142,7,0,228,31,0,
    36,162,21,255,255,0,0,0,28,0,142,7,0,202,15,0,128,169,27,20,
    12,0,0,0,0,21,16,12,0,34,15,0,12,124,0,5,7,0,0,0,
    112,96,246,11,0,200,15,0,12,124,0,7,9,0,0,0,48,97,246,11,
    0,226,15,0,48,130,23,255,23,0,0,32,0,65,0,0,0,200,79,0,
    16,131,12,0,23,0,0,0,0,24,32,0,0,162,2,0,48,146,24,255,
    24,0,0,32,0,65,0,0,0,206,143,0,16,147,14,0,24,0,0,0,
    0,24,32,0,0,226,2,0,48,162,27,255,27,0,0,32,0,65,0,0,
    0,206,15,1,16,163,16,0,27,0,0,0,0,24,32,0,0,34,3,0,
    71,57,128,0,0,0,0,0,0,0,128,3,0,234,207,0,17,114,18,5,
    8,0,0,0,255,8,136,7,0,200,15,0,17,114,19,5,3,0,0,0,
    7,12,15,2,0,202,15,0,128,121,18,18,12,0,0,0,0,21,16,12,
    0,164,14,0,48,114,20,255,18,0,0,32,0,65,0,0,0,200,79,0,
    16,115,18,0,20,0,0,0,0,24,32,0,0,226,4,0,71,121,104,0,
    0,0,0,0,0,0,128,3,0,234,15,0,12,124,0,0,7,0,0,0,
    112,96,240,11,0,228,15,0,12,124,0,26,7,0,0,0,112,96,242,11,
    0,228,15,0,12,124,0,2,9,0,0,0,0,97,240,11,0,228,15,0,
    12,124,0,25,9,0,0,0,16,97,242,11,0,228,15,0,12,124,0,22,
    7,0,0,0,112,96,244,11,0,228,15,0,12,124,0,5,7,0,0,0,
    112,96,246,11,0,196,15,0,12,124,0,6,9,0,0,0,32,97,244,11,
    0,228,15,0,12,124,0,7,9,0,0,0,48,97,246,11,0,198,15,0,
    17,130,20,0,8,0,0,0,255,24,136,7,0,228,15,8,17,146,23,26,
    8,0,0,0,255,24,138,7,0,228,15,8,17,130,21,0,3,0,0,0,
    2,28,15,2,0,228,15,8,17,146,24,26,3,0,0,0,25,28,143,2,
    0,228,15,8,17,162,27,22,8,0,0,0,255,24,136,7,0,226,15,4,
    128,137,12,20,12,0,0,0,0,27,16,12,0,102,1,0,17,162,28,22,
    3,0,0,0,6,28,15,2,0,226,15,0,36,146,20,255,255,0,0,0,
    23,0,142,7,0,196,31,0,36,146,21,255,255,0,0,0,24,0,142,7,
    0,226,15,0,17,178,23,5,8,0,0,0,255,24,138,7,0,200,15,0,
    128,153,14,20,12,0,0,0,0,27,16,12,0,98,1,0,17,178,24,5,
    3,0,0,0,7,28,143,2,0,226,15,0,36,162,20,255,255,0,0,0,
    27,0,142,7,0,228,31,0,36,162,21,255,255,0,0,0,28,0,142,7,
    0,202,15,0,128,169,16,20,12,0,0,0,0,27,16,12,0,100,1,0,
    36,178,20,255,255,0,0,0,23,0,142,7,0,228,31,0,36,178,21,255,
    255,0,0,0,24,0,142,7,0,202,15,0,128,185,18,20,12,0,0,0,
    0,27,16,12,0,100,1,0,65,121,1,0,0,0,0,0,0,0,128,3,
    0,234,15,0,28,120,0,0,0,0,0,0,40,232,248,3,0,226,15,0,
    69,121,1,0,192,9,0,0,0,0,128,3,0,216,15,0,71,73,244,0,
    4,0,0,0,0,0,128,3,0,234,15,0,130,123,24,255,0,141,0,0,
    0,8,0,0,0,34,62,0,17,114,20,5,10,0,0,0,255,8,138,7,
    0,200,79,0,17,114,21,5,4,0,0,0,7,12,143,2,0,228,15,0,
    12,120,0,24,2,0,0,0,112,82,248,3,0,218,31,0,71,73,192,0,
    0,0,0,0,0,0,128,3,0,234,15,0,69,121,2,0,192,0,0,0,
    0,0,128,3,0,232,15,0,71,9,40,0,0,0,0,0,0,0,128,3,
    0,234,15,0,130,123,28,255,0,142,0,0,0,10,0,0,0,36,14,0,
    40,114,30,12,28,0,0,0,0,0,0,0,0,228,31,2,42,116,0,28,
    0,0,240,63,0,208,240,3,0,208,15,0,8,114,29,31,13,0,0,0,
    0,0,0,0,0,228,15,0,8,114,28,30,12,0,0,0,0,0,0,0,
    0,200,15,0,16,115,29,0,28,0,0,0,0,16,48,0,0,100,0,0,
    17,114,28,0,10,0,0,0,255,8,128,7,0,228,31,4,62,114,5,255,
    29,0,0,0,255,0,0,0,0,228,47,0,17,114,29,0,4,0,0,0,
    2,12,15,0,0,202,15,0,133,121,0,28,5,0,0,0,12,21,16,12,
    0,232,1,0,65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,
    69,121,2,0,192,0,0,0,0,0,128,3,0,232,15,0,71,25,40,0,
    0,0,0,0,0,0,128,3,0,234,15,0,130,123,28,255,0,142,0,0,
    0,10,0,0,0,36,30,0,40,114,30,14,28,0,0,0,0,0,0,0,
    0,228,31,2,42,116,0,28,0,0,240,63,0,208,240,3,0,208,15,0,
    8,114,28,30,14,0,0,0,0,0,0,0,0,228,15,0,8,114,29,31,
    15,0,0,0,0,0,0,0,0,228,15,0,17,114,24,26,10,0,0,0,
    255,8,128,7,0,228,15,4,16,115,28,0,28,0,0,0,0,16,48,0,
    0,36,14,0,17,114,25,26,4,0,0,0,25,12,15,0,0,228,15,0,
    62,114,5,255,28,0,0,0,255,0,0,0,0,202,31,0,133,121,0,24,
    5,0,0,0,12,21,16,12,0,228,3,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,130,123,24,255,0,142,0,0,0,10,0,0,
    0,98,46,0,69,121,2,0,176,0,0,0,0,0,128,3,0,232,15,0,
    71,41,36,0,0,0,0,0,0,0,128,3,0,234,15,0,40,114,26,16,
    24,0,0,0,0,0,0,0,0,228,175,3,42,116,0,24,0,0,240,63,
    0,208,240,3,0,208,15,0,8,114,27,27,17,0,0,0,0,0,0,0,
    0,228,15,0,8,114,26,26,16,0,0,0,0,0,0,0,0,200,15,0,
    16,115,27,0,26,0,0,0,0,16,48,0,0,36,2,0,17,114,26,22,
    10,0,0,0,255,8,128,7,0,228,47,4,62,114,5,255,27,0,0,0,
    255,0,0,0,0,228,31,0,17,114,27,22,4,0,0,0,6,12,15,0,
    0,202,15,0,133,121,0,26,5,0,0,0,12,21,16,12,0,232,5,0,
    65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,71,57,180,0,
    4,0,0,0,0,0,128,3,0,234,15,0,40,114,6,18,24,0,0,0,
    0,0,0,0,0,228,175,2,42,116,0,24,0,0,240,63,0,208,240,3,
    0,208,15,0,8,114,6,6,18,0,0,0,0,0,0,0,0,228,15,0,
    8,114,7,7,19,0,0,0,0,0,0,0,0,200,15,0,16,115,6,0,
    6,0,0,0,0,16,48,0,0,36,14,0,62,114,5,255,6,0,0,0,
    255,0,0,0,0,202,95,0,133,121,0,20,5,0,0,0,12,21,16,12,
    0,226,1,0,71,121,148,0,4,0,0,0,0,0,128,3,0,234,15,0,
    69,121,2,0,16,1,0,0,0,0,128,3,0,232,15,0,71,9,60,0,
    0,0,0,0,0,0,128,3,0,234,15,0,130,123,22,255,0,142,0,0,
    0,10,0,0,0,36,14,0,42,116,0,22,0,0,240,63,0,208,240,3,
    0,228,31,0,40,114,22,12,22,0,0,0,0,0,0,0,0,212,15,2,
    8,114,22,22,12,0,0,0,0,0,0,0,0,228,15,0,8,114,23,23,
    13,0,0,0,0,0,0,0,0,228,15,0,12,120,0,24,3,0,0,0,
    112,82,240,3,0,228,15,0,16,115,27,0,22,0,0,0,0,16,48,0,
    0,118,0,0,17,2,22,0,10,0,0,0,255,16,136,7,0,200,31,0,
    17,2,23,0,4,0,0,0,2,20,15,2,0,202,15,0,133,9,0,22,
    27,0,0,0,12,25,16,12,0,226,33,0,62,130,23,255,27,0,0,0,
    255,16,0,0,0,228,15,0,17,130,22,0,10,0,0,0,255,8,136,7,
    0,228,15,4,22,120,28,23,16,118,0,0,28,0,0,0,0,228,15,0,
    17,130,23,0,4,0,0,0,2,12,15,2,0,202,15,0,133,137,0,22,
    28,0,0,0,12,21,16,12,0,232,1,0,65,121,2,0,0,0,0,0,
    0,0,128,3,0,234,15,0,69,121,2,0,0,1,0,0,0,0,128,3,
    0,232,15,0,71,25,56,0,0,0,0,0,0,0,128,3,0,234,15,0,
    130,123,22,255,0,142,0,0,0,10,0,0,0,34,30,0,12,120,0,24,
    3,0,0,0,112,82,242,3,0,226,15,0,42,116,0,22,0,0,240,63,
    0,208,240,3,0,228,31,0,40,114,22,14,22,0,0,0,0,0,0,0,
    0,212,15,2,8,114,22,22,14,0,0,0,0,0,0,0,0,228,15,0,
    8,114,23,23,15,0,0,0,0,0,0,0,0,200,15,0,16,115,29,0,
    22,0,0,0,0,16,48,0,0,100,0,0,17,18,22,26,10,0,0,0,
    255,16,128,7,0,200,31,0,17,18,23,26,4,0,0,0,25,20,15,0,
    0,228,15,0,62,146,27,255,29,0,0,0,255,16,0,0,0,198,47,0,
    133,25,0,22,29,0,0,0,12,25,16,12,0,226,3,0,17,146,22,26,
    10,0,0,0,255,8,128,7,0,200,15,0,17,146,23,26,4,0,0,0,
    25,12,15,0,0,202,15,0,133,153,0,22,27,0,0,0,12,21,16,12,
    0,232,3,0,65,121,2,0,0,0,0,0,0,0,128,3,0,234,15,0,
    69,121,2,0,32,1,0,0,0,0,128,3,0,232,15,0,71,41,64,0,
    0,0,0,0,0,0,128,3,0,234,15,0,130,123,26,255,0,142,0,0,
    0,10,0,0,0,226,62,0,12,120,0,24,3,0,0,0,112,82,242,3,
    0,226,15,0,54,124,25,0,15,0,0,0,0,0,0,8,0,200,15,0,
    54,124,29,25,15,0,0,0,0,0,0,8,0,226,15,0,40,114,22,16,
    26,0,0,0,0,0,0,0,0,228,143,3,42,116,0,26,0,0,240,63,
    0,208,240,3,0,208,15,0,8,114,22,22,16,0,0,0,0,0,0,0,
    0,228,15,0,8,114,23,23,17,0,0,0,0,0,0,0,0,200,15,0,
    16,115,27,0,22,0,0,0,0,16,48,0,0,100,0,0,17,18,22,29,
    10,0,0,0,255,16,128,7,0,200,31,0,17,18,23,29,4,0,0,0,
    6,20,15,0,0,228,15,0,62,146,25,255,27,0,0,0,255,16,0,0,
    0,198,47,0,133,25,0,22,27,0,0,0,12,25,16,12,0,226,5,0,
    17,146,22,29,10,0,0,0,255,8,128,7,0,200,15,0,17,146,23,29,
    4,0,0,0,6,12,15,0,0,202,15,0,133,153,0,22,25,0,0,0,
    12,21,16,12,0,232,5,0,65,121,2,0,0,0,0,0,0,0,128,3,
    0,234,15,0,71,57,184,0,0,0,0,0,0,0,128,3,0,234,15,0,
    130,123,26,255,0,142,0,0,0,10,0,0,0,226,126,0,12,120,0,24,
    3,0,0,0,112,82,242,3,0,226,15,0,54,124,6,0,15,0,0,0,
    0,0,0,8,0,200,15,0,54,124,20,6,15,0,0,0,0,0,0,8,
    0,200,15,0,54,124,25,20,15,0,0,0,0,0,0,8,0,200,15,0,
    36,120,20,25,2,0,0,0,10,0,142,7,0,226,15,0,40,114,22,18,
    26,0,0,0,0,0,0,0,0,228,143,2,42,116,0,26,0,0,240,63,
    0,208,240,3,0,208,15,0,8,114,23,23,19,0,0,0,0,0,0,0,
    0,228,15,0,8,114,22,22,18,0,0,0,0,0,0,0,0,228,15,0,
    17,18,6,5,10,0,0,0,255,16,128,7,0,228,15,4,16,115,23,0,
    22,0,0,0,0,16,48,0,0,36,14,0,17,18,7,5,4,0,0,0,
    7,20,15,0,0,228,15,0,62,146,24,255,23,0,0,0,255,16,0,0,
    0,198,31,0,133,25,0,6,23,0,0,0,12,25,16,12,0,232,1,0,
    133,153,0,20,24,0,0,0,12,21,16,12,0,226,1,0,71,121,116,0,
    0,0,0,0,0,0,128,3,0,234,15,0,130,123,20,255,0,142,0,0,
    0,10,0,0,0,34,126,0,54,124,22,0,15,0,0,0,0,0,0,8,
    0,200,15,0,54,124,27,22,15,0,0,0,0,0,0,8,0,226,15,0,
    17,114,22,5,10,0,0,0,255,24,138,7,0,200,15,0,17,114,23,5,
    4,0,0,0,7,28,143,2,0,228,15,0,17,114,28,27,10,0,0,0,
    255,24,136,7,0,200,15,0,17,114,29,27,4,0,0,0,6,28,15,2,
    0,228,15,0,17,114,6,26,10,0,0,0,255,24,136,7,0,200,15,0,
    17,114,7,26,4,0,0,0,25,28,15,2,0,226,15,0,42,116,0,20,
    0,0,240,63,0,208,250,3,0,220,31,0,71,89,32,0,0,0,0,0,
    0,0,128,3,0,234,15,0,17,130,20,0,10,0,0,0,255,24,136,7,
    0,200,15,0,17,130,21,0,4,0,0,0,2,28,15,2,0,202,15,0,
    133,137,0,20,12,0,0,0,12,27,16,12,0,232,1,2,133,153,0,6,
    14,0,0,0,12,27,16,12,0,232,1,0,133,169,0,28,16,0,0,0,
    12,27,16,12,0,226,129,1,71,57,48,0,0,0,0,0,0,0,128,3,
    0,234,15,0,133,121,0,22,18,0,0,0,12,27,16,12,0,226,3,0,
    71,121,40,0,0,0,0,0,0,0,128,3,0,234,15,0,17,130,24,0,
    10,0,0,0,255,24,136,7,0,226,15,4,40,130,26,12,20,0,0,0,
    0,0,0,0,0,228,15,10,40,162,30,16,20,0,0,0,0,0,0,0,
    0,226,143,1,17,130,25,0,4,0,0,0,2,28,15,2,0,202,15,0,
    133,137,0,24,26,0,0,0,12,27,16,12,0,228,1,0,40,146,24,14,
    20,0,0,0,0,0,0,0,0,228,31,8,40,178,20,18,20,0,0,0,
    0,0,0,0,0,202,15,0,133,153,0,6,24,0,0,0,12,27,16,12,
    0,232,1,0,133,169,0,28,30,0,0,0,12,27,16,12,0,232,1,0,
    133,185,0,22,20,0,0,0,12,27,16,12,0,228,1,0,65,121,1,0,
    0,0,0,0,0,0,128,3,0,234,15,0,36,126,5,255,15,0,0,0,
    255,0,142,15,0,228,95,0,36,114,6,255,255,0,0,0,0,0,142,7,
    0,228,15,0,36,114,7,255,255,0,0,0,2,0,142,7,0,228,15,0,
    37,120,6,5,4,0,0,0,6,0,142,7,0,200,15,0,36,114,0,255,
    255,0,0,0,6,0,142,7,0,226,15,0,12,124,0,6,7,0,0,0,
    112,96,240,11,0,226,15,0,36,114,2,255,255,0,0,0,7,0,142,7,
    0,198,15,0,12,124,0,7,9,0,0,0,0,97,240,11,0,218,15,0,
    71,137,56,0,236,255,255,255,255,255,131,3,0,234,15,0,65,121,0,0,
    0,0,0,0,0,0,128,3,0,234,15,0,28,120,0,0,0,0,0,0,
    8,232,240,3,0,218,15,0,71,9,88,0,232,255,255,255,255,255,131,3,
    0,234,15,0,77,121,0,0,0,0,0,0,0,0,128,3,0,234,15,0,
    71,121,252,0,252,255,255,255,255,255,131,3,0,192,15,0,24,121,0,0,
    0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,
    0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,
    0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,
    24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,
    0,0,0,0,0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,
    0,0,0,0,0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,
    0,192,15,0,24,121,0,0,0,0,0,0,0,0,0,0,0,192,15,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    1,0,0,0,3,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,64,0,0,0,0,0,0,0,43,1,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,11,0,0,0,3,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,155,1,0,0,0,0,0,0,118,1,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,19,0,0,0,2,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,24,3,0,0,0,0,0,0,
    240,0,0,0,0,0,0,0,2,0,0,0,10,0,0,0,8,0,0,0,
    0,0,0,0,24,0,0,0,0,0,0,0,192,0,0,0,1,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,8,4,0,0,
    0,0,0,0,104,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,41,0,0,0,
    7,0,0,0,0,0,0,2,0,0,0,0,0,0,0,0,0,0,0,0,
    112,4,0,0,0,0,0,0,164,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    57,0,0,0,7,0,0,0,64,0,0,1,0,0,0,0,0,0,0,0,
    0,0,0,0,20,5,0,0,0,0,0,0,32,0,0,0,0,0,0,0,
    5,0,0,0,8,0,0,0,4,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,73,0,0,0,0,0,0,112,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,52,5,0,0,0,0,0,0,36,0,0,0,
    0,0,0,0,3,0,0,0,0,0,0,0,4,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,82,0,0,0,134,0,0,112,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,88,5,0,0,0,0,0,0,
    36,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,4,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,116,0,0,0,0,0,0,112,
    64,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,124,5,0,0,
    0,0,0,0,184,0,0,0,0,0,0,0,3,0,0,0,12,0,0,0,
    4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,240,0,0,0,
    1,0,0,112,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    52,6,0,0,0,0,0,0,32,0,0,0,0,0,0,0,3,0,0,0,
    0,0,0,0,4,0,0,0,0,0,0,0,8,0,0,0,0,0,0,0,
    222,0,0,0,4,0,0,0,64,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,88,6,0,0,0,0,0,0,24,0,0,0,0,0,0,0,
    3,0,0,0,4,0,0,0,8,0,0,0,0,0,0,0,24,0,0,0,
    0,0,0,0,93,0,0,0,1,0,0,0,6,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,128,6,0,0,0,0,0,0,0,53,0,0,
    0,0,0,0,3,0,0,0,8,0,0,0,128,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,170,0,0,0,8,0,0,0,3,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,128,59,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,12,1,0,0,1,0,0,0,
    66,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,128,59,0,0,
    0,0,0,0,64,2,0,0,0,0,0,0,0,0,0,0,12,0,0,0,
    4,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,6,0,0,0,
    4,0,0,0,128,65,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,24,1,0,0,0,0,0,0,24,1,0,0,
    0,0,0,0,8,0,0,0,0,0,0,0,1,0,0,0,4,0,0,0,
    128,65,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,24,1,0,0,0,0,0,0,24,1,0,0,0,0,0,0,
    8,0,0,0,0,0,0,0,1,0,0,0,5,0,0,0,128,6,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,53,0,0,0,0,0,0,0,53,0,0,0,0,0,0,8,0,0,0,
    0,0,0,0,1,0,0,0,6,0,0,0,128,59,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,8,0,0,0,0,0,0,0,
    1,0,0,0,4,0,0,0,128,59,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,64,2,0,0,0,0,0,0,
    64,2,0,0,0,0,0,0,8,0,0,0,0,0,0,0,1,0,1,1,
    80,0,0,0,248,111,0,0,0,0,0,0,0,0,0,0,64,0,0,0,
    0,0,8,0,75,0,0,0,0,0,0,0,0,0,0,0,17,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    72,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,10,10,10,10,
    10,10,10,10,46,118,101,114,115,105,111,110,32,56,46,48,10,46,116,97,
    114,103,101,116,32,115,109,95,55,53,10,46,97,100,100,114,101,115,115,95,
    115,105,122,101,32,54,52,10,10,10,10,46,118,105,115,105,98,108,101,32,
    46,101,110,116,114,121,32,100,100,112,95,99,111,110,118,101,114,116,95,99,
    111,112,121,40,10,46,112,97,114,97,109,32,46,117,54,52,32,100,100,112,
    95,99,111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,
    48,44,10,46,112,97,114,97,109,32,46,117,54,52,32,100,100,112,95,99,
    111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,49,44,
    10,46,112,97,114,97,109,32,46,117,54,52,32,100,100,112,95,99,111,110,
    118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,50,44,10,46,
    112,97,114,97,109,32,46,117,54,52,32,100,100,112,95,99,111,110,118,101,
    114,116,95,99,111,112,121,95,112,97,114,97,109,95,51,44,10,46,112,97,
    114,97,109,32,46,117,51,50,32,100,100,112,95,99,111,110,118,101,114,116,
    95,99,111,112,121,95,112,97,114,97,109,95,52,44,10,46,112,97,114,97,
    109,32,46,117,51,50,32,100,100,112,95,99,111,110,118,101,114,116,95,99,
    111,112,121,95,112,97,114,97,109,95,53,44,10,46,112,97,114,97,109,32,
    46,102,54,52,32,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,
    121,95,112,97,114,97,109,95,54,10,41,10,123,10,46,114,101,103,32,46,
    112,114,101,100,32,37,112,60,50,48,57,62,59,10,46,114,101,103,32,46,
    98,49,54,32,37,114,115,60,49,48,49,62,59,10,46,114,101,103,32,46,
    102,51,50,32,37,102,60,49,52,49,62,59,10,46,114,101,103,32,46,98,
    51,50,32,37,114,60,49,50,53,62,59,10,46,114,101,103,32,46,102,54,
    52,32,37,102,100,60,57,49,62,59,10,46,114,101,103,32,46,98,54,52,
    32,37,114,100,60,51,49,48,62,59,10,10,10,108,100,46,112,97,114,97,
    109,46,117,54,52,32,37,114,100,49,49,55,44,32,91,100,100,112,95,99,
    111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,48,93,
    59,10,108,100,46,112,97,114,97,109,46,117,54,52,32,37,114,100,49,49,
    56,44,32,91,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,
    95,112,97,114,97,109,95,49,93,59,10,108,100,46,112,97,114,97,109,46,
    117,54,52,32,37,114,100,49,49,53,44,32,91,100,100,112,95,99,111,110,
    118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,50,93,59,10,
    108,100,46,112,97,114,97,109,46,117,51,50,32,37,114,53,48,44,32,91,
    100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,
    97,109,95,52,93,59,10,108,100,46,112,97,114,97,109,46,117,51,50,32,
    37,114,53,49,44,32,91,100,100,112,95,99,111,110,118,101,114,116,95,99,
    111,112,121,95,112,97,114,97,109,95,53,93,59,10,108,100,46,112,97,114,
    97,109,46,102,54,52,32,37,102,100,51,55,44,32,91,100,100,112,95,99,
    111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,54,93,
    59,10,99,118,116,97,46,116,111,46,103,108,111,98,97,108,46,117,54,52,
    32,37,114,100,49,44,32,37,114,100,49,49,55,59,10,99,118,116,97,46,
    116,111,46,103,108,111,98,97,108,46,117,54,52,32,37,114,100,50,44,32,
    37,114,100,49,49,56,59,10,115,101,116,112,46,101,113,46,115,51,50,32,
    37,112,49,44,32,37,114,53,49,44,32,49,59,10,115,101,116,112,46,101,
    113,46,115,51,50,32,37,112,50,44,32,37,114,53,48,44,32,49,59,10,
    111,114,46,112,114,101,100,32,37,112,51,44,32,37,112,50,44,32,37,112,
    49,59,10,64,37,112,51,32,98,114,97,32,36,76,95,95,66,66,48,95,
    49,51,57,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,
    95,49,59,10,10,36,76,95,95,66,66,48,95,49,51,57,58,10,109,111,
    118,46,117,51,50,32,37,114,56,53,44,32,37,99,116,97,105,100,46,120,
    59,10,99,118,116,46,117,54,52,46,117,51,50,32,37,114,100,51,48,56,
    44,32,37,114,56,53,59,10,115,101,116,112,46,103,101,46,117,54,52,32,
    37,112,49,50,56,44,32,37,114,100,51,48,56,44,32,37,114,100,49,49,
    53,59,10,64,37,112,49,50,56,32,98,114,97,32,36,76,95,95,66,66,
    48,95,50,50,54,59,10,10,115,101,116,112,46,101,113,46,115,51,50,32,
    37,112,49,51,48,44,32,37,114,53,48,44,32,48,59,10,115,101,108,112,
    46,98,54,52,32,37,114,100,49,57,52,44,32,52,44,32,50,44,32,37,
    112,49,51,48,59,10,115,101,108,112,46,98,54,52,32,37,114,100,55,51,
    44,32,56,44,32,37,114,100,49,57,52,44,32,37,112,50,59,10,115,101,
    116,112,46,101,113,46,115,51,50,32,37,112,49,51,50,44,32,37,114,53,
    49,44,32,48,59,10,115,101,108,112,46,98,54,52,32,37,114,100,49,57,
    53,44,32,52,44,32,50,44,32,37,112,49,51,50,59,10,115,101,108,112,
    46,98,54,52,32,37,114,100,55,52,44,32,56,44,32,37,114,100,49,57,
    53,44,32,37,112,49,59,10,109,111,118,46,117,51,50,32,37,114,56,54,
    44,32,37,116,105,100,46,120,59,10,99,118,116,46,117,54,52,46,117,51,
    50,32,37,114,100,55,53,44,32,37,114,56,54,59,10,109,111,118,46,117,
    51,50,32,37,114,56,55,44,32,37,110,99,116,97,105,100,46,120,59,10,
    99,118,116,46,117,54,52,46,117,51,50,32,37,114,100,55,54,44,32,37,
    114,56,55,59,10,109,111,118,46,117,51,50,32,37,114,56,56,44,32,37,
    110,116,105,100,46,120,59,10,99,118,116,46,117,54,52,46,117,51,50,32,
    37,114,100,55,55,44,32,37,114,56,56,59,10,109,117,108,46,119,105,100,
    101,46,117,51,50,32,37,114,100,55,56,44,32,37,114,56,56,44,32,52,
    59,10,10,36,76,95,95,66,66,48,95,49,52,49,58,10,108,100,46,112,
    97,114,97,109,46,117,54,52,32,37,114,100,50,53,51,44,32,91,100,100,
    112,95,99,111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,
    95,51,93,59,10,115,104,108,46,98,54,52,32,37,114,100,49,57,54,44,
    32,37,114,100,51,48,56,44,32,52,59,10,97,100,100,46,115,54,52,32,
    37,114,100,49,57,55,44,32,37,114,100,50,44,32,37,114,100,49,57,54,
    59,10,108,100,46,103,108,111,98,97,108,46,117,54,52,32,37,114,100,49,
    57,56,44,32,91,37,114,100,49,57,55,93,59,10,109,117,108,46,108,111,
    46,115,54,52,32,37,114,100,49,57,57,44,32,37,114,100,49,57,56,44,
    32,50,52,59,10,97,100,100,46,115,54,52,32,37,114,100,56,48,44,32,
    37,114,100,49,44,32,37,114,100,49,57,57,59,10,108,100,46,103,108,111,
    98,97,108,46,117,54,52,32,37,114,100,50,48,48,44,32,91,37,114,100,
    56,48,43,49,54,93,59,10,108,100,46,103,108,111,98,97,108,46,117,54,
    52,32,37,114,100,56,49,44,32,91,37,114,100,49,57,55,43,56,93,59,
    10,115,117,98,46,115,54,52,32,37,114,100,50,48,49,44,32,37,114,100,
    50,48,48,44,32,37,114,100,56,49,59,10,109,105,110,46,117,54,52,32,
    37,114,100,56,50,44,32,37,114,100,50,48,49,44,32,37,114,100,50,53,
    51,59,10,115,101,116,112,46,108,101,46,117,54,52,32,37,112,49,51,51,
    44,32,37,114,100,56,50,44,32,37,114,100,55,53,59,10,64,37,112,49,
    51,51,32,98,114,97,32,36,76,95,95,66,66,48,95,50,50,53,59,10,
    10,108,100,46,103,108,111,98,97,108,46,117,54,52,32,37,114,100,50,48,
    50,44,32,91,37,114,100,56,48,93,59,10,109,117,108,46,108,111,46,115,
    54,52,32,37,114,100,50,48,51,44,32,37,114,100,56,49,44,32,37,114,
    100,55,51,59,10,97,100,100,46,115,54,52,32,37,114,100,56,51,44,32,
    37,114,100,50,48,50,44,32,37,114,100,50,48,51,59,10,108,100,46,103,
    108,111,98,97,108,46,117,54,52,32,37,114,100,50,48,52,44,32,91,37,
    114,100,56,48,43,56,93,59,10,109,117,108,46,108,111,46,115,54,52,32,
    37,114,100,50,48,53,44,32,37,114,100,56,49,44,32,37,114,100,55,52,
    59,10,97,100,100,46,115,54,52,32,37,114,100,56,52,44,32,37,114,100,
    50,48,52,44,32,37,114,100,50,48,53,59,10,109,111,118,46,117,54,52,
    32,37,114,100,51,48,57,44,32,37,114,100,55,53,59,10,10,36,76,95,
    95,66,66,48,95,49,52,51,58,10,97,100,100,46,115,54,52,32,37,114,
    100,56,55,44,32,37,114,100,51,48,57,44,32,37,114,100,55,55,59,10,
    97,100,100,46,115,54,52,32,37,114,100,56,57,44,32,37,114,100,56,55,
    44,32,37,114,100,55,55,59,10,97,100,100,46,115,54,52,32,37,114,100,
    57,49,44,32,37,114,100,56,57,44,32,37,114,100,55,55,59,10,64,37,
    112,50,32,98,114,97,32,36,76,95,95,66,66,48,95,49,54,50,59,10,
    10,115,101,116,112,46,101,113,46,115,51,50,32,37,112,49,51,53,44,32,
    37,114,53,48,44,32,50,59,10,64,37,112,49,51,53,32,98,114,97,32,
    36,76,95,95,66,66,48,95,49,53,52,59,10,10,115,101,116,112,46,110,
    101,46,115,51,50,32,37,112,49,51,54,44,32,37,114,53,48,44,32,51,
    59,10,64,37,112,49,51,54,32,98,114,97,32,36,76,95,95,66,66,48,
    95,49,55,48,59,10,10,115,101,116,112,46,103,101,46,117,54,52,32,37,
    112,49,51,55,44,32,37,114,100,51,48,57,44,32,37,114,100,56,50,59,
    10,64,37,112,49,51,55,32,98,114,97,32,36,76,95,95,66,66,48,95,
    49,52,56,59,10,10,115,104,108,46,98,54,52,32,37,114,100,50,53,53,
    44,32,37,114,100,51,48,57,44,32,49,59,10,97,100,100,46,115,54,52,
    32,37,114,100,50,53,52,44,32,37,114,100,56,51,44,32,37,114,100,50,
    53,53,59,10,108,100,46,117,49,54,32,37,114,115,54,57,44,32,91,37,
    114,100,50,53,52,93,59,10,10,123,32,109,111,118,46,98,51,50,32,37,
    102,49,49,55,44,32,123,48,44,37,114,115,54,57,125,59,125,10,10,10,
    99,118,116,46,102,54,52,46,102,51,50,32,37,102,100,57,48,44,32,37,
    102,49,49,55,59,10,10,36,76,95,95,66,66,48,95,49,52,56,58,10,
    115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,51,56,44,32,37,
    114,100,56,55,44,32,37,114,100,56,50,59,10,64,37,112,49,51,56,32,
    98,114,97,32,36,76,95,95,66,66,48,95,49,53,48,59,10,10,115,104,
    108,46,98,54,52,32,37,114,100,50,55,51,44,32,37,114,100,56,55,44,
    32,49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,55,50,44,32,
    37,114,100,56,51,44,32,37,114,100,50,55,51,59,10,108,100,46,117,49,
    54,32,37,114,115,55,48,44,32,91,37,114,100,50,55,50,93,59,10,10,
    123,32,109,111,118,46,98,51,50,32,37,102,49,49,56,44,32,123,48,44,
    37,114,115,55,48,125,59,125,10,10,10,99,118,116,46,102,54,52,46,102,
    51,50,32,37,102,100,56,57,44,32,37,102,49,49,56,59,10,10,36,76,
    95,95,66,66,48,95,49,53,48,58,10,115,101,116,112,46,103,101,46,117,
    54,52,32,37,112,49,51,57,44,32,37,114,100,56,57,44,32,37,114,100,
    56,50,59,10,64,37,112,49,51,57,32,98,114,97,32,36,76,95,95,66,
    66,48,95,49,53,50,59,10,10,115,104,108,46,98,54,52,32,37,114,100,
    50,55,49,44,32,37,114,100,56,57,44,32,49,59,10,97,100,100,46,115,
    54,52,32,37,114,100,50,55,48,44,32,37,114,100,56,51,44,32,37,114,
    100,50,55,49,59,10,108,100,46,117,49,54,32,37,114,115,55,49,44,32,
    91,37,114,100,50,55,48,93,59,10,10,123,32,109,111,118,46,98,51,50,
    32,37,102,49,49,57,44,32,123,48,44,37,114,115,55,49,125,59,125,10,
    10,10,99,118,116,46,102,54,52,46,102,51,50,32,37,102,100,56,56,44,
    32,37,102,49,49,57,59,10,10,36,76,95,95,66,66,48,95,49,53,50,
    58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,52,48,44,
    32,37,114,100,57,49,44,32,37,114,100,56,50,59,10,64,37,112,49,52,
    48,32,98,114,97,32,36,76,95,95,66,66,48,95,49,55,56,59,10,10,
    115,104,108,46,98,54,52,32,37,114,100,50,54,57,44,32,37,114,100,57,
    49,44,32,49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,54,56,
    44,32,37,114,100,56,51,44,32,37,114,100,50,54,57,59,10,108,100,46,
    117,49,54,32,37,114,115,55,50,44,32,91,37,114,100,50,54,56,93,59,
    10,10,123,32,109,111,118,46,98,51,50,32,37,102,49,50,48,44,32,123,
    48,44,37,114,115,55,50,125,59,125,10,10,10,99,118,116,46,102,54,52,
    46,102,51,50,32,37,102,100,56,55,44,32,37,102,49,50,48,59,10,98,
    114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,49,55,56,59,10,
    10,36,76,95,95,66,66,48,95,49,54,50,58,10,115,101,116,112,46,103,
    101,46,117,54,52,32,37,112,49,52,53,44,32,37,114,100,51,48,57,44,
    32,37,114,100,56,50,59,10,64,37,112,49,52,53,32,98,114,97,32,36,
    76,95,95,66,66,48,95,49,54,52,59,10,10,115,104,108,46,98,54,52,
    32,37,114,100,50,49,49,44,32,37,114,100,51,48,57,44,32,51,59,10,
    97,100,100,46,115,54,52,32,37,114,100,50,49,50,44,32,37,114,100,56,
    51,44,32,37,114,100,50,49,49,59,10,108,100,46,102,54,52,32,37,102,
    100,57,48,44,32,91,37,114,100,50,49,50,93,59,10,10,36,76,95,95,
    66,66,48,95,49,54,52,58,10,115,101,116,112,46,103,101,46,117,54,52,
    32,37,112,49,52,54,44,32,37,114,100,56,55,44,32,37,114,100,56,50,
    59,10,64,37,112,49,52,54,32,98,114,97,32,36,76,95,95,66,66,48,
    95,49,54,54,59,10,10,115,104,108,46,98,54,52,32,37,114,100,50,49,
    51,44,32,37,114,100,56,55,44,32,51,59,10,97,100,100,46,115,54,52,
    32,37,114,100,50,49,52,44,32,37,114,100,56,51,44,32,37,114,100,50,
    49,51,59,10,108,100,46,102,54,52,32,37,102,100,56,57,44,32,91,37,
    114,100,50,49,52,93,59,10,10,36,76,95,95,66,66,48,95,49,54,54,
    58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,52,55,44,
    32,37,114,100,56,57,44,32,37,114,100,56,50,59,10,64,37,112,49,52,
    55,32,98,114,97,32,36,76,95,95,66,66,48,95,49,54,56,59,10,10,
    115,104,108,46,98,54,52,32,37,114,100,50,49,53,44,32,37,114,100,56,
    57,44,32,51,59,10,97,100,100,46,115,54,52,32,37,114,100,50,49,54,
    44,32,37,114,100,56,51,44,32,37,114,100,50,49,53,59,10,108,100,46,
    102,54,52,32,37,102,100,56,56,44,32,91,37,114,100,50,49,54,93,59,
    10,10,36,76,95,95,66,66,48,95,49,54,56,58,10,115,101,116,112,46,
    103,101,46,117,54,52,32,37,112,49,52,56,44,32,37,114,100,57,49,44,
    32,37,114,100,56,50,59,10,64,37,112,49,52,56,32,98,114,97,32,36,
    76,95,95,66,66,48,95,49,55,56,59,10,10,115,104,108,46,98,54,52,
    32,37,114,100,50,49,55,44,32,37,114,100,57,49,44,32,51,59,10,97,
    100,100,46,115,54,52,32,37,114,100,50,49,56,44,32,37,114,100,56,51,
    44,32,37,114,100,50,49,55,59,10,108,100,46,102,54,52,32,37,102,100,
    56,55,44,32,91,37,114,100,50,49,56,93,59,10,98,114,97,46,117,110,
    105,32,36,76,95,95,66,66,48,95,49,55,56,59,10,10,36,76,95,95,
    66,66,48,95,49,53,52,58,10,115,101,116,112,46,103,101,46,117,54,52,
    32,37,112,49,52,49,44,32,37,114,100,51,48,57,44,32,37,114,100,56,
    50,59,10,64,37,112,49,52,49,32,98,114,97,32,36,76,95,95,66,66,
    48,95,49,53,54,59,10,10,115,104,108,46,98,54,52,32,37,114,100,50,
    53,55,44,32,37,114,100,51,48,57,44,32,49,59,10,97,100,100,46,115,
    54,52,32,37,114,100,50,53,54,44,32,37,114,100,56,51,44,32,37,114,
    100,50,53,55,59,10,108,100,46,117,49,54,32,37,114,115,55,51,44,32,
    91,37,114,100,50,53,54,93,59,10,10,123,32,99,118,116,46,102,51,50,
    46,102,49,54,32,37,102,49,50,49,44,32,37,114,115,55,51,59,125,10,
    10,10,99,118,116,46,102,54,52,46,102,51,50,32,37,102,100,57,48,44,
    32,37,102,49,50,49,59,10,10,36,76,95,95,66,66,48,95,49,53,54,
    58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,52,50,44,
    32,37,114,100,56,55,44,32,37,114,100,56,50,59,10,64,37,112,49,52,
    50,32,98,114,97,32,36,76,95,95,66,66,48,95,49,53,56,59,10,10,
    115,104,108,46,98,54,52,32,37,114,100,50,55,57,44,32,37,114,100,56,
    55,44,32,49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,55,56,
    44,32,37,114,100,56,51,44,32,37,114,100,50,55,57,59,10,108,100,46,
    117,49,54,32,37,114,115,55,52,44,32,91,37,114,100,50,55,56,93,59,
    10,10,123,32,99,118,116,46,102,51,50,46,102,49,54,32,37,102,49,50,
    50,44,32,37,114,115,55,52,59,125,10,10,10,99,118,116,46,102,54,52,
    46,102,51,50,32,37,102,100,56,57,44,32,37,102,49,50,50,59,10,10,
    36,76,95,95,66,66,48,95,49,53,56,58,10,115,101,116,112,46,103,101,
    46,117,54,52,32,37,112,49,52,51,44,32,37,114,100,56,57,44,32,37,
    114,100,56,50,59,10,64,37,112,49,52,51,32,98,114,97,32,36,76,95,
    95,66,66,48,95,49,54,48,59,10,10,115,104,108,46,98,54,52,32,37,
    114,100,50,55,55,44,32,37,114,100,56,57,44,32,49,59,10,97,100,100,
    46,115,54,52,32,37,114,100,50,55,54,44,32,37,114,100,56,51,44,32,
    37,114,100,50,55,55,59,10,108,100,46,117,49,54,32,37,114,115,55,53,
    44,32,91,37,114,100,50,55,54,93,59,10,10,123,32,99,118,116,46,102,
    51,50,46,102,49,54,32,37,102,49,50,51,44,32,37,114,115,55,53,59,
    125,10,10,10,99,118,116,46,102,54,52,46,102,51,50,32,37,102,100,56,
    56,44,32,37,102,49,50,51,59,10,10,36,76,95,95,66,66,48,95,49,
    54,48,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,52,
    52,44,32,37,114,100,57,49,44,32,37,114,100,56,50,59,10,64,37,112,
    49,52,52,32,98,114,97,32,36,76,95,95,66,66,48,95,49,55,56,59,
    10,10,115,104,108,46,98,54,52,32,37,114,100,50,55,53,44,32,37,114,
    100,57,49,44,32,49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,
    55,52,44,32,37,114,100,56,51,44,32,37,114,100,50,55,53,59,10,108,
    100,46,117,49,54,32,37,114,115,55,54,44,32,91,37,114,100,50,55,52,
    93,59,10,10,123,32,99,118,116,46,102,51,50,46,102,49,54,32,37,102,
    49,50,52,44,32,37,114,115,55,54,59,125,10,10,10,99,118,116,46,102,
    54,52,46,102,51,50,32,37,102,100,56,55,44,32,37,102,49,50,52,59,
    10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,49,55,56,
    59,10,10,36,76,95,95,66,66,48,95,49,55,48,58,10,115,101,116,112,
    46,103,101,46,117,54,52,32,37,112,49,52,57,44,32,37,114,100,51,48,
    57,44,32,37,114,100,56,50,59,10,64,37,112,49,52,57,32,98,114,97,
    32,36,76,95,95,66,66,48,95,49,55,50,59,10,10,115,104,108,46,98,
    54,52,32,37,114,100,50,49,57,44,32,37,114,100,51,48,57,44,32,50,
    59,10,97,100,100,46,115,54,52,32,37,114,100,50,50,48,44,32,37,114,
    100,56,51,44,32,37,114,100,50,49,57,59,10,108,100,46,102,51,50,32,
    37,102,49,50,53,44,32,91,37,114,100,50,50,48,93,59,10,99,118,116,
    46,102,54,52,46,102,51,50,32,37,102,100,57,48,44,32,37,102,49,50,
    53,59,10,10,36,76,95,95,66,66,48,95,49,55,50,58,10,115,101,116,
    112,46,103,101,46,117,54,52,32,37,112,49,53,48,44,32,37,114,100,56,
    55,44,32,37,114,100,56,50,59,10,64,37,112,49,53,48,32,98,114,97,
    32,36,76,95,95,66,66,48,95,49,55,52,59,10,10,115,104,108,46,98,
    54,52,32,37,114,100,50,50,49,44,32,37,114,100,56,55,44,32,50,59,
    10,97,100,100,46,115,54,52,32,37,114,100,50,50,50,44,32,37,114,100,
    56,51,44,32,37,114,100,50,50,49,59,10,108,100,46,102,51,50,32,37,
    102,49,50,54,44,32,91,37,114,100,50,50,50,93,59,10,99,118,116,46,
    102,54,52,46,102,51,50,32,37,102,100,56,57,44,32,37,102,49,50,54,
    59,10,10,36,76,95,95,66,66,48,95,49,55,52,58,10,115,101,116,112,
    46,103,101,46,117,54,52,32,37,112,49,53,49,44,32,37,114,100,56,57,
    44,32,37,114,100,56,50,59,10,64,37,112,49,53,49,32,98,114,97,32,
    36,76,95,95,66,66,48,95,49,55,54,59,10,10,115,104,108,46,98,54,
    52,32,37,114,100,50,50,51,44,32,37,114,100,56,57,44,32,50,59,10,
    97,100,100,46,115,54,52,32,37,114,100,50,50,52,44,32,37,114,100,56,
    51,44,32,37,114,100,50,50,51,59,10,108,100,46,102,51,50,32,37,102,
    49,50,55,44,32,91,37,114,100,50,50,52,93,59,10,99,118,116,46,102,
    54,52,46,102,51,50,32,37,102,100,56,56,44,32,37,102,49,50,55,59,
    10,10,36,76,95,95,66,66,48,95,49,55,54,58,10,115,101,116,112,46,
    103,101,46,117,54,52,32,37,112,49,53,50,44,32,37,114,100,57,49,44,
    32,37,114,100,56,50,59,10,64,37,112,49,53,50,32,98,114,97,32,36,
    76,95,95,66,66,48,95,49,55,56,59,10,10,115,104,108,46,98,54,52,
    32,37,114,100,50,50,53,44,32,37,114,100,57,49,44,32,50,59,10,97,
    100,100,46,115,54,52,32,37,114,100,50,50,54,44,32,37,114,100,56,51,
    44,32,37,114,100,50,50,53,59,10,108,100,46,102,51,50,32,37,102,49,
    50,56,44,32,91,37,114,100,50,50,54,93,59,10,99,118,116,46,102,54,
    52,46,102,51,50,32,37,102,100,56,55,44,32,37,102,49,50,56,59,10,
    10,36,76,95,95,66,66,48,95,49,55,56,58,10,115,104,108,46,98,54,
    52,32,37,114,100,50,53,49,44,32,37,114,100,57,49,44,32,49,59,10,
    97,100,100,46,115,54,52,32,37,114,100,49,48,55,44,32,37,114,100,56,
    52,44,32,37,114,100,50,53,49,59,10,64,37,112,49,32,98,114,97,32,
    36,76,95,95,66,66,48,95,49,56,56,59,10,10,115,101,116,112,46,110,
    101,46,115,51,50,32,37,112,49,53,52,44,32,37,114,53,49,44,32,50,
    59,10,64,37,112,49,53,52,32,98,114,97,32,36,76,95,95,66,66,48,
    95,49,57,54,59,10,10,115,101,116,112,46,103,101,46,117,54,52,32,37,
    112,49,53,53,44,32,37,114,100,51,48,57,44,32,37,114,100,56,50,59,
    10,64,37,112,49,53,53,32,98,114,97,32,36,76,95,95,66,66,48,95,
    49,56,50,59,10,10,115,104,108,46,98,54,52,32,37,114,100,50,56,57,
    44,32,37,114,100,51,48,57,44,32,49,59,10,97,100,100,46,115,54,52,
    32,37,114,100,50,56,56,44,32,37,114,100,56,52,44,32,37,114,100,50,
    56,57,59,10,115,101,116,112,46,110,101,117,46,102,54,52,32,37,112,49,
    53,54,44,32,37,102,100,51,55,44,32,48,100,51,70,70,48,48,48,48,
    48,48,48,48,48,48,48,48,48,59,10,109,117,108,46,102,54,52,32,37,
    102,100,52,55,44,32,37,102,100,57,48,44,32,37,102,100,51,55,59,10,
    115,101,108,112,46,102,54,52,32,37,102,100,52,56,44,32,37,102,100,52,
    55,44,32,37,102,100,57,48,44,32,37,112,49,53,54,59,10,99,118,116,
    46,114,110,46,102,51,50,46,102,54,52,32,37,102,49,50,57,44,32,37,
    102,100,52,56,59,10,10,123,32,99,118,116,46,114,110,46,102,49,54,46,
    102,51,50,32,37,114,115,55,55,44,32,37,102,49,50,57,59,125,10,10,
    10,115,116,46,117,49,54,32,91,37,114,100,50,56,56,93,44,32,37,114,
    115,55,55,59,10,10,36,76,95,95,66,66,48,95,49,56,50,58,10,115,
    101,116,112,46,103,101,46,117,54,52,32,37,112,49,53,55,44,32,37,114,
    100,56,55,44,32,37,114,100,56,50,59,10,64,37,112,49,53,55,32,98,
    114,97,32,36,76,95,95,66,66,48,95,49,56,52,59,10,10,115,104,108,
    46,98,54,52,32,37,114,100,50,57,51,44,32,37,114,100,56,55,44,32,
    49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,57,50,44,32,37,
    114,100,56,52,44,32,37,114,100,50,57,51,59,10,115,101,116,112,46,110,
    101,117,46,102,54,52,32,37,112,49,53,56,44,32,37,102,100,51,55,44,
    32,48,100,51,70,70,48,48,48,48,48,48,48,48,48,48,48,48,48,59,
    10,109,117,108,46,102,54,52,32,37,102,100,52,57,44,32,37,102,100,56,
    57,44,32,37,102,100,51,55,59,10,115,101,108,112,46,102,54,52,32,37,
    102,100,53,48,44,32,37,102,100,52,57,44,32,37,102,100,56,57,44,32,
    37,112,49,53,56,59,10,99,118,116,46,114,110,46,102,51,50,46,102,54,
    52,32,37,102,49,51,48,44,32,37,102,100,53,48,59,10,10,123,32,99,
    118,116,46,114,110,46,102,49,54,46,102,51,50,32,37,114,115,55,56,44,
    32,37,102,49,51,48,59,125,10,10,10,115,116,46,117,49,54,32,91,37,
    114,100,50,57,50,93,44,32,37,114,115,55,56,59,10,10,36,76,95,95,
    66,66,48,95,49,56,52,58,10,115,101,116,112,46,103,101,46,117,54,52,
    32,37,112,49,53,57,44,32,37,114,100,56,57,44,32,37,114,100,56,50,
    59,10,64,37,112,49,53,57,32,98,114,97,32,36,76,95,95,66,66,48,
    95,49,56,54,59,10,10,115,104,108,46,98,54,52,32,37,114,100,50,57,
    49,44,32,37,114,100,56,57,44,32,49,59,10,97,100,100,46,115,54,52,
    32,37,114,100,50,57,48,44,32,37,114,100,56,52,44,32,37,114,100,50,
    57,49,59,10,115,101,116,112,46,110,101,117,46,102,54,52,32,37,112,49,
    54,48,44,32,37,102,100,51,55,44,32,48,100,51,70,70,48,48,48,48,
    48,48,48,48,48,48,48,48,48,59,10,109,117,108,46,102,54,52,32,37,
    102,100,53,49,44,32,37,102,100,56,56,44,32,37,102,100,51,55,59,10,
    115,101,108,112,46,102,54,52,32,37,102,100,53,50,44,32,37,102,100,53,
    49,44,32,37,102,100,56,56,44,32,37,112,49,54,48,59,10,99,118,116,
    46,114,110,46,102,51,50,46,102,54,52,32,37,102,49,51,49,44,32,37,
    102,100,53,50,59,10,10,123,32,99,118,116,46,114,110,46,102,49,54,46,
    102,51,50,32,37,114,115,55,57,44,32,37,102,49,51,49,59,125,10,10,
    10,115,116,46,117,49,54,32,91,37,114,100,50,57,48,93,44,32,37,114,
    115,55,57,59,10,10,36,76,95,95,66,66,48,95,49,56,54,58,10,115,
    101,116,112,46,103,101,46,117,54,52,32,37,112,49,54,49,44,32,37,114,
    100,57,49,44,32,37,114,100,56,50,59,10,64,37,112,49,54,49,32,98,
    114,97,32,36,76,95,95,66,66,48,95,50,50,52,59,10,10,115,101,116,
    112,46,110,101,117,46,102,54,52,32,37,112,49,54,50,44,32,37,102,100,
    51,55,44,32,48,100,51,70,70,48,48,48,48,48,48,48,48,48,48,48,
    48,48,59,10,109,117,108,46,102,54,52,32,37,102,100,53,51,44,32,37,
    102,100,56,55,44,32,37,102,100,51,55,59,10,115,101,108,112,46,102,54,
    52,32,37,102,100,53,52,44,32,37,102,100,53,51,44,32,37,102,100,56,
    55,44,32,37,112,49,54,50,59,10,99,118,116,46,114,110,46,102,51,50,
    46,102,54,52,32,37,102,49,51,50,44,32,37,102,100,53,52,59,10,10,
    123,32,99,118,116,46,114,110,46,102,49,54,46,102,51,50,32,37,114,115,
    56,48,44,32,37,102,49,51,50,59,125,10,10,10,115,116,46,117,49,54,
    32,91,37,114,100,49,48,55,93,44,32,37,114,115,56,48,59,10,98,114,
    97,46,117,110,105,32,36,76,95,95,66,66,48,95,50,50,52,59,10,10,
    36,76,95,95,66,66,48,95,49,56,56,58,10,115,101,116,112,46,103,101,
    46,117,54,52,32,37,112,49,54,51,44,32,37,114,100,51,48,57,44,32,
    37,114,100,56,50,59,10,64,37,112,49,54,51,32,98,114,97,32,36,76,
    95,95,66,66,48,95,49,57,48,59,10,10,109,117,108,46,102,54,52,32,
    37,102,100,53,53,44,32,37,102,100,57,48,44,32,37,102,100,51,55,59,
    10,115,101,116,112,46,110,101,117,46,102,54,52,32,37,112,49,54,52,44,
    32,37,102,100,51,55,44,32,48,100,51,70,70,48,48,48,48,48,48,48,
    48,48,48,48,48,48,59,10,115,101,108,112,46,102,54,52,32,37,102,100,
    53,54,44,32,37,102,100,53,53,44,32,37,102,100,57,48,44,32,37,112,
    49,54,52,59,10,115,104,108,46,98,54,52,32,37,114,100,50,51,50,44,
    32,37,114,100,51,48,57,44,32,51,59,10,97,100,100,46,115,54,52,32,
    37,114,100,50,51,51,44,32,37,114,100,56,52,44,32,37,114,100,50,51,
    50,59,10,115,116,46,102,54,52,32,91,37,114,100,50,51,51,93,44,32,
    37,102,100,53,54,59,10,10,36,76,95,95,66,66,48,95,49,57,48,58,
    10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,54,53,44,32,
    37,114,100,56,55,44,32,37,114,100,56,50,59,10,64,37,112,49,54,53,
    32,98,114,97,32,36,76,95,95,66,66,48,95,49,57,50,59,10,10,109,
    117,108,46,102,54,52,32,37,102,100,53,55,44,32,37,102,100,56,57,44,
    32,37,102,100,51,55,59,10,115,101,116,112,46,110,101,117,46,102,54,52,
    32,37,112,49,54,54,44,32,37,102,100,51,55,44,32,48,100,51,70,70,
    48,48,48,48,48,48,48,48,48,48,48,48,48,59,10,115,101,108,112,46,
    102,54,52,32,37,102,100,53,56,44,32,37,102,100,53,55,44,32,37,102,
    100,56,57,44,32,37,112,49,54,54,59,10,115,104,108,46,98,54,52,32,
    37,114,100,50,51,52,44,32,37,114,100,56,55,44,32,51,59,10,97,100,
    100,46,115,54,52,32,37,114,100,50,51,53,44,32,37,114,100,56,52,44,
    32,37,114,100,50,51,52,59,10,115,116,46,102,54,52,32,91,37,114,100,
    50,51,53,93,44,32,37,102,100,53,56,59,10,10,36,76,95,95,66,66,
    48,95,49,57,50,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,
    112,49,54,55,44,32,37,114,100,56,57,44,32,37,114,100,56,50,59,10,
    64,37,112,49,54,55,32,98,114,97,32,36,76,95,95,66,66,48,95,49,
    57,52,59,10,10,109,117,108,46,102,54,52,32,37,102,100,53,57,44,32,
    37,102,100,56,56,44,32,37,102,100,51,55,59,10,115,101,116,112,46,110,
    101,117,46,102,54,52,32,37,112,49,54,56,44,32,37,102,100,51,55,44,
    32,48,100,51,70,70,48,48,48,48,48,48,48,48,48,48,48,48,48,59,
    10,115,101,108,112,46,102,54,52,32,37,102,100,54,48,44,32,37,102,100,
    53,57,44,32,37,102,100,56,56,44,32,37,112,49,54,56,59,10,115,104,
    108,46,98,54,52,32,37,114,100,50,51,54,44,32,37,114,100,56,57,44,
    32,51,59,10,97,100,100,46,115,54,52,32,37,114,100,50,51,55,44,32,
    37,114,100,56,52,44,32,37,114,100,50,51,54,59,10,115,116,46,102,54,
    52,32,91,37,114,100,50,51,55,93,44,32,37,102,100,54,48,59,10,10,
    36,76,95,95,66,66,48,95,49,57,52,58,10,115,101,116,112,46,103,101,
    46,117,54,52,32,37,112,49,54,57,44,32,37,114,100,57,49,44,32,37,
    114,100,56,50,59,10,64,37,112,49,54,57,32,98,114,97,32,36,76,95,
    95,66,66,48,95,50,50,52,59,10,10,109,117,108,46,102,54,52,32,37,
    102,100,54,49,44,32,37,102,100,56,55,44,32,37,102,100,51,55,59,10,
    115,101,116,112,46,110,101,117,46,102,54,52,32,37,112,49,55,48,44,32,
    37,102,100,51,55,44,32,48,100,51,70,70,48,48,48,48,48,48,48,48,
    48,48,48,48,48,59,10,115,101,108,112,46,102,54,52,32,37,102,100,54,
    50,44,32,37,102,100,54,49,44,32,37,102,100,56,55,44,32,37,112,49,
    55,48,59,10,115,104,108,46,98,54,52,32,37,114,100,50,51,56,44,32,
    37,114,100,57,49,44,32,51,59,10,97,100,100,46,115,54,52,32,37,114,
    100,50,51,57,44,32,37,114,100,56,52,44,32,37,114,100,50,51,56,59,
    10,115,116,46,102,54,52,32,91,37,114,100,50,51,57,93,44,32,37,102,
    100,54,50,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,
    95,50,50,52,59,10,10,36,76,95,95,66,66,48,95,49,57,54,58,10,
    115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,55,49,44,32,37,
    114,100,51,48,57,44,32,37,114,100,56,50,59,10,64,37,112,49,55,49,
    32,98,114,97,32,36,76,95,95,66,66,48,95,50,48,51,59,10,10,115,
    101,116,112,46,101,113,46,115,51,50,32,37,112,49,55,50,44,32,37,114,
    53,49,44,32,51,59,10,109,117,108,46,102,54,52,32,37,102,100,54,51,
    44,32,37,102,100,57,48,44,32,37,102,100,51,55,59,10,115,101,116,112,
    46,110,101,117,46,102,54,52,32,37,112,49,55,51,44,32,37,102,100,51,
    55,44,32,48,100,51,70,70,48,48,48,48,48,48,48,48,48,48,48,48,
    48,59,10,115,101,108,112,46,102,54,52,32,37,102,100,54,52,44,32,37,
    102,100,54,51,44,32,37,102,100,57,48,44,32,37,112,49,55,51,59,10,
    99,118,116,46,114,110,46,102,51,50,46,102,54,52,32,37,102,51,48,44,
    32,37,102,100,54,52,59,10,64,37,112,49,55,50,32,98,114,97,32,36,
    76,95,95,66,66,48,95,49,57,57,59,10,98,114,97,46,117,110,105,32,
    36,76,95,95,66,66,48,95,49,57,56,59,10,10,36,76,95,95,66,66,
    48,95,49,57,57,58,10,109,111,118,46,98,51,50,32,37,114,56,57,44,
    32,37,102,51,48,59,10,97,110,100,46,98,51,50,32,37,114,57,48,44,
    32,37,114,56,57,44,32,50,49,52,55,52,56,51,54,52,55,59,10,115,
    101,116,112,46,103,116,46,117,51,50,32,37,112,49,55,52,44,32,37,114,
    57,48,44,32,50,49,51,57,48,57,53,48,52,48,59,10,115,104,108,46,
    98,51,50,32,37,114,57,49,44,32,37,114,56,57,44,32,49,54,59,10,
    115,104,114,46,117,51,50,32,37,114,57,50,44,32,37,114,56,57,44,32,
    49,54,59,10,99,118,116,46,117,49,54,46,117,51,50,32,37,114,115,56,
    49,44,32,37,114,57,50,59,10,115,101,108,112,46,98,51,50,32,37,114,
    52,54,44,32,48,44,32,37,114,57,49,44,32,37,112,49,55,52,59,10,
    115,101,108,112,46,98,49,54,32,37,114,115,57,55,44,32,51,50,55,54,
    55,44,32,37,114,115,56,49,44,32,37,112,49,55,52,59,10,115,101,116,
    112,46,103,116,46,117,51,50,32,37,112,49,55,53,44,32,37,114,52,54,
    44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,64,37,112,49,55,
    53,32,98,114,97,32,36,76,95,95,66,66,48,95,50,48,49,59,10,10,
    115,101,116,112,46,110,101,46,115,51,50,32,37,112,49,55,54,44,32,37,
    114,52,54,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,97,110,
    100,46,98,49,54,32,37,114,115,56,50,44,32,37,114,115,57,55,44,32,
    49,59,10,115,101,116,112,46,101,113,46,98,49,54,32,37,112,49,55,55,
    44,32,37,114,115,56,50,44,32,49,59,10,110,111,116,46,112,114,101,100,
    32,37,112,49,55,56,44,32,37,112,49,55,55,59,10,111,114,46,112,114,
    101,100,32,37,112,49,55,57,44,32,37,112,49,55,54,44,32,37,112,49,
    55,56,59,10,64,37,112,49,55,57,32,98,114,97,32,36,76,95,95,66,
    66,48,95,50,48,50,59,10,10,36,76,95,95,66,66,48,95,50,48,49,
    58,10,97,100,100,46,115,49,54,32,37,114,115,57,55,44,32,37,114,115,
    57,55,44,32,49,59,10,10,36,76,95,95,66,66,48,95,50,48,50,58,
    10,115,104,108,46,98,54,52,32,37,114,100,50,57,53,44,32,37,114,100,
    51,48,57,44,32,49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,
    57,52,44,32,37,114,100,56,52,44,32,37,114,100,50,57,53,59,10,115,
    116,46,117,49,54,32,91,37,114,100,50,57,52,93,44,32,37,114,115,57,
    55,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,50,
    48,51,59,10,10,36,76,95,95,66,66,48,95,49,57,56,58,10,115,104,
    108,46,98,54,52,32,37,114,100,50,52,48,44,32,37,114,100,51,48,57,
    44,32,50,59,10,97,100,100,46,115,54,52,32,37,114,100,50,52,49,44,
    32,37,114,100,56,52,44,32,37,114,100,50,52,48,59,10,115,116,46,102,
    51,50,32,91,37,114,100,50,52,49,93,44,32,37,102,51,48,59,10,10,
    36,76,95,95,66,66,48,95,50,48,51,58,10,115,101,116,112,46,103,101,
    46,117,54,52,32,37,112,49,56,48,44,32,37,114,100,56,55,44,32,37,
    114,100,56,50,59,10,64,37,112,49,56,48,32,98,114,97,32,36,76,95,
    95,66,66,48,95,50,49,48,59,10,10,115,101,116,112,46,101,113,46,115,
    51,50,32,37,112,49,56,49,44,32,37,114,53,49,44,32,51,59,10,109,
    117,108,46,102,54,52,32,37,102,100,54,53,44,32,37,102,100,56,57,44,
    32,37,102,100,51,55,59,10,115,101,116,112,46,110,101,117,46,102,54,52,
    32,37,112,49,56,50,44,32,37,102,100,51,55,44,32,48,100,51,70,70,
    48,48,48,48,48,48,48,48,48,48,48,48,48,59,10,115,101,108,112,46,
    102,54,52,32,37,102,100,54,54,44,32,37,102,100,54,53,44,32,37,102,
    100,56,57,44,32,37,112,49,56,50,59,10,99,118,116,46,114,110,46,102,
    51,50,46,102,54,52,32,37,102,51,49,44,32,37,102,100,54,54,59,10,
    64,37,112,49,56,49,32,98,114,97,32,36,76,95,95,66,66,48,95,50,
    48,54,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,
    50,48,53,59,10,10,36,76,95,95,66,66,48,95,50,48,54,58,10,109,
    111,118,46,98,51,50,32,37,114,57,51,44,32,37,102,51,49,59,10,97,
    110,100,46,98,51,50,32,37,114,57,52,44,32,37,114,57,51,44,32,50,
    49,52,55,52,56,51,54,52,55,59,10,115,101,116,112,46,103,116,46,117,
    51,50,32,37,112,49,56,51,44,32,37,114,57,52,44,32,50,49,51,57,
    48,57,53,48,52,48,59,10,115,104,108,46,98,51,50,32,37,114,57,53,
    44,32,37,114,57,51,44,32,49,54,59,10,115,104,114,46,117,51,50,32,
    37,114,57,54,44,32,37,114,57,51,44,32,49,54,59,10,99,118,116,46,
    117,49,54,46,117,51,50,32,37,114,115,56,51,44,32,37,114,57,54,59,
    10,115,101,108,112,46,98,51,50,32,37,114,52,55,44,32,48,44,32,37,
    114,57,53,44,32,37,112,49,56,51,59,10,115,101,108,112,46,98,49,54,
    32,37,114,115,57,56,44,32,51,50,55,54,55,44,32,37,114,115,56,51,
    44,32,37,112,49,56,51,59,10,115,101,116,112,46,103,116,46,117,51,50,
    32,37,112,49,56,52,44,32,37,114,52,55,44,32,45,50,49,52,55,52,
    56,51,54,52,56,59,10,64,37,112,49,56,52,32,98,114,97,32,36,76,
    95,95,66,66,48,95,50,48,56,59,10,10,115,101,116,112,46,110,101,46,
    115,51,50,32,37,112,49,56,53,44,32,37,114,52,55,44,32,45,50,49,
    52,55,52,56,51,54,52,56,59,10,97,110,100,46,98,49,54,32,37,114,
    115,56,52,44,32,37,114,115,57,56,44,32,49,59,10,115,101,116,112,46,
    101,113,46,98,49,54,32,37,112,49,56,54,44,32,37,114,115,56,52,44,
    32,49,59,10,110,111,116,46,112,114,101,100,32,37,112,49,56,55,44,32,
    37,112,49,56,54,59,10,111,114,46,112,114,101,100,32,37,112,49,56,56,
    44,32,37,112,49,56,53,44,32,37,112,49,56,55,59,10,64,37,112,49,
    56,56,32,98,114,97,32,36,76,95,95,66,66,48,95,50,48,57,59,10,
    10,36,76,95,95,66,66,48,95,50,48,56,58,10,97,100,100,46,115,49,
    54,32,37,114,115,57,56,44,32,37,114,115,57,56,44,32,49,59,10,10,
    36,76,95,95,66,66,48,95,50,48,57,58,10,115,104,108,46,98,54,52,
    32,37,114,100,50,57,57,44,32,37,114,100,56,55,44,32,49,59,10,97,
    100,100,46,115,54,52,32,37,114,100,50,57,56,44,32,37,114,100,56,52,
    44,32,37,114,100,50,57,57,59,10,115,116,46,117,49,54,32,91,37,114,
    100,50,57,56,93,44,32,37,114,115,57,56,59,10,98,114,97,46,117,110,
    105,32,36,76,95,95,66,66,48,95,50,49,48,59,10,10,36,76,95,95,
    66,66,48,95,50,48,53,58,10,115,104,108,46,98,54,52,32,37,114,100,
    50,52,50,44,32,37,114,100,56,55,44,32,50,59,10,97,100,100,46,115,
    54,52,32,37,114,100,50,52,51,44,32,37,114,100,56,52,44,32,37,114,
    100,50,52,50,59,10,115,116,46,102,51,50,32,91,37,114,100,50,52,51,
    93,44,32,37,102,51,49,59,10,10,36,76,95,95,66,66,48,95,50,49,
    48,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,56,57,
    44,32,37,114,100,56,57,44,32,37,114,100,56,50,59,10,64,37,112,49,
    56,57,32,98,114,97,32,36,76,95,95,66,66,48,95,50,49,55,59,10,
    10,115,101,116,112,46,101,113,46,115,51,50,32,37,112,49,57,48,44,32,
    37,114,53,49,44,32,51,59,10,109,117,108,46,102,54,52,32,37,102,100,
    54,55,44,32,37,102,100,56,56,44,32,37,102,100,51,55,59,10,115,101,
    116,112,46,110,101,117,46,102,54,52,32,37,112,49,57,49,44,32,37,102,
    100,51,55,44,32,48,100,51,70,70,48,48,48,48,48,48,48,48,48,48,
    48,48,48,59,10,115,101,108,112,46,102,54,52,32,37,102,100,54,56,44,
    32,37,102,100,54,55,44,32,37,102,100,56,56,44,32,37,112,49,57,49,
    59,10,99,118,116,46,114,110,46,102,51,50,46,102,54,52,32,37,102,51,
    50,44,32,37,102,100,54,56,59,10,64,37,112,49,57,48,32,98,114,97,
    32,36,76,95,95,66,66,48,95,50,49,51,59,10,98,114,97,46,117,110,
    105,32,36,76,95,95,66,66,48,95,50,49,50,59,10,10,36,76,95,95,
    66,66,48,95,50,49,51,58,10,109,111,118,46,98,51,50,32,37,114,57,
    55,44,32,37,102,51,50,59,10,97,110,100,46,98,51,50,32,37,114,57,
    56,44,32,37,114,57,55,44,32,50,49,52,55,52,56,51,54,52,55,59,
    10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,49,57,50,44,32,
    37,114,57,56,44,32,50,49,51,57,48,57,53,48,52,48,59,10,115,104,
    108,46,98,51,50,32,37,114,57,57,44,32,37,114,57,55,44,32,49,54,
    59,10,115,104,114,46,117,51,50,32,37,114,49,48,48,44,32,37,114,57,
    55,44,32,49,54,59,10,99,118,116,46,117,49,54,46,117,51,50,32,37,
    114,115,56,53,44,32,37,114,49,48,48,59,10,115,101,108,112,46,98,51,
    50,32,37,114,52,56,44,32,48,44,32,37,114,57,57,44,32,37,112,49,
    57,50,59,10,115,101,108,112,46,98,49,54,32,37,114,115,57,57,44,32,
    51,50,55,54,55,44,32,37,114,115,56,53,44,32,37,112,49,57,50,59,
    10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,49,57,51,44,32,
    37,114,52,56,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,64,
    37,112,49,57,51,32,98,114,97,32,36,76,95,95,66,66,48,95,50,49,
    53,59,10,10,115,101,116,112,46,110,101,46,115,51,50,32,37,112,49,57,
    52,44,32,37,114,52,56,44,32,45,50,49,52,55,52,56,51,54,52,56,
    59,10,97,110,100,46,98,49,54,32,37,114,115,56,54,44,32,37,114,115,
    57,57,44,32,49,59,10,115,101,116,112,46,101,113,46,98,49,54,32,37,
    112,49,57,53,44,32,37,114,115,56,54,44,32,49,59,10,110,111,116,46,
    112,114,101,100,32,37,112,49,57,54,44,32,37,112,49,57,53,59,10,111,
    114,46,112,114,101,100,32,37,112,49,57,55,44,32,37,112,49,57,52,44,
    32,37,112,49,57,54,59,10,64,37,112,49,57,55,32,98,114,97,32,36,
    76,95,95,66,66,48,95,50,49,54,59,10,10,36,76,95,95,66,66,48,
    95,50,49,53,58,10,97,100,100,46,115,49,54,32,37,114,115,57,57,44,
    32,37,114,115,57,57,44,32,49,59,10,10,36,76,95,95,66,66,48,95,
    50,49,54,58,10,115,104,108,46,98,54,52,32,37,114,100,50,57,55,44,
    32,37,114,100,56,57,44,32,49,59,10,97,100,100,46,115,54,52,32,37,
    114,100,50,57,54,44,32,37,114,100,56,52,44,32,37,114,100,50,57,55,
    59,10,115,116,46,117,49,54,32,91,37,114,100,50,57,54,93,44,32,37,
    114,115,57,57,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,
    48,95,50,49,55,59,10,10,36,76,95,95,66,66,48,95,50,49,50,58,
    10,115,104,108,46,98,54,52,32,37,114,100,50,52,52,44,32,37,114,100,
    56,57,44,32,50,59,10,97,100,100,46,115,54,52,32,37,114,100,50,52,
    53,44,32,37,114,100,56,52,44,32,37,114,100,50,52,52,59,10,115,116,
    46,102,51,50,32,91,37,114,100,50,52,53,93,44,32,37,102,51,50,59,
    10,10,36,76,95,95,66,66,48,95,50,49,55,58,10,115,101,116,112,46,
    103,101,46,117,54,52,32,37,112,49,57,56,44,32,37,114,100,57,49,44,
    32,37,114,100,56,50,59,10,64,37,112,49,57,56,32,98,114,97,32,36,
    76,95,95,66,66,48,95,50,50,52,59,10,10,115,101,116,112,46,101,113,
    46,115,51,50,32,37,112,49,57,57,44,32,37,114,53,49,44,32,51,59,
    10,109,117,108,46,102,54,52,32,37,102,100,54,57,44,32,37,102,100,56,
    55,44,32,37,102,100,51,55,59,10,115,101,116,112,46,110,101,117,46,102,
    54,52,32,37,112,50,48,48,44,32,37,102,100,51,55,44,32,48,100,51,
    70,70,48,48,48,48,48,48,48,48,48,48,48,48,48,59,10,115,101,108,
    112,46,102,54,52,32,37,102,100,55,48,44,32,37,102,100,54,57,44,32,
    37,102,100,56,55,44,32,37,112,50,48,48,59,10,99,118,116,46,114,110,
    46,102,51,50,46,102,54,52,32,37,102,51,51,44,32,37,102,100,55,48,
    59,10,64,37,112,49,57,57,32,98,114,97,32,36,76,95,95,66,66,48,
    95,50,50,48,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,
    48,95,50,49,57,59,10,10,36,76,95,95,66,66,48,95,50,50,48,58,
    10,109,111,118,46,98,51,50,32,37,114,49,48,49,44,32,37,102,51,51,
    59,10,97,110,100,46,98,51,50,32,37,114,49,48,50,44,32,37,114,49,
    48,49,44,32,50,49,52,55,52,56,51,54,52,55,59,10,115,101,116,112,
    46,103,116,46,117,51,50,32,37,112,50,48,49,44,32,37,114,49,48,50,
    44,32,50,49,51,57,48,57,53,48,52,48,59,10,115,104,108,46,98,51,
    50,32,37,114,49,48,51,44,32,37,114,49,48,49,44,32,49,54,59,10,
    115,104,114,46,117,51,50,32,37,114,49,48,52,44,32,37,114,49,48,49,
    44,32,49,54,59,10,99,118,116,46,117,49,54,46,117,51,50,32,37,114,
    115,56,55,44,32,37,114,49,48,52,59,10,115,101,108,112,46,98,51,50,
    32,37,114,52,57,44,32,48,44,32,37,114,49,48,51,44,32,37,112,50,
    48,49,59,10,115,101,108,112,46,98,49,54,32,37,114,115,49,48,48,44,
    32,51,50,55,54,55,44,32,37,114,115,56,55,44,32,37,112,50,48,49,
    59,10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,50,48,50,44,
    32,37,114,52,57,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,
    64,37,112,50,48,50,32,98,114,97,32,36,76,95,95,66,66,48,95,50,
    50,50,59,10,10,115,101,116,112,46,110,101,46,115,51,50,32,37,112,50,
    48,51,44,32,37,114,52,57,44,32,45,50,49,52,55,52,56,51,54,52,
    56,59,10,97,110,100,46,98,49,54,32,37,114,115,56,56,44,32,37,114,
    115,49,48,48,44,32,49,59,10,115,101,116,112,46,101,113,46,98,49,54,
    32,37,112,50,48,52,44,32,37,114,115,56,56,44,32,49,59,10,110,111,
    116,46,112,114,101,100,32,37,112,50,48,53,44,32,37,112,50,48,52,59,
    10,111,114,46,112,114,101,100,32,37,112,50,48,54,44,32,37,112,50,48,
    51,44,32,37,112,50,48,53,59,10,64,37,112,50,48,54,32,98,114,97,
    32,36,76,95,95,66,66,48,95,50,50,51,59,10,10,36,76,95,95,66,
    66,48,95,50,50,50,58,10,97,100,100,46,115,49,54,32,37,114,115,49,
    48,48,44,32,37,114,115,49,48,48,44,32,49,59,10,10,36,76,95,95,
    66,66,48,95,50,50,51,58,10,115,104,108,46,98,54,52,32,37,114,100,
    51,48,49,44,32,37,114,100,57,49,44,32,49,59,10,97,100,100,46,115,
    54,52,32,37,114,100,51,48,48,44,32,37,114,100,56,52,44,32,37,114,
    100,51,48,49,59,10,115,116,46,117,49,54,32,91,37,114,100,51,48,48,
    93,44,32,37,114,115,49,48,48,59,10,98,114,97,46,117,110,105,32,36,
    76,95,95,66,66,48,95,50,50,52,59,10,10,36,76,95,95,66,66,48,
    95,50,49,57,58,10,115,104,108,46,98,54,52,32,37,114,100,50,52,54,
    44,32,37,114,100,57,49,44,32,50,59,10,97,100,100,46,115,54,52,32,
    37,114,100,50,52,55,44,32,37,114,100,56,52,44,32,37,114,100,50,52,
    54,59,10,115,116,46,102,51,50,32,91,37,114,100,50,52,55,93,44,32,
    37,102,51,51,59,10,10,36,76,95,95,66,66,48,95,50,50,52,58,10,
    97,100,100,46,115,54,52,32,37,114,100,51,48,57,44,32,37,114,100,51,
    48,57,44,32,37,114,100,55,56,59,10,115,101,116,112,46,108,116,46,117,
    54,52,32,37,112,50,48,55,44,32,37,114,100,51,48,57,44,32,37,114,
    100,56,50,59,10,64,37,112,50,48,55,32,98,114,97,32,36,76,95,95,
    66,66,48,95,49,52,51,59,10,10,36,76,95,95,66,66,48,95,50,50,
    53,58,10,108,100,46,112,97,114,97,109,46,117,54,52,32,37,114,100,50,
    53,50,44,32,91,100,100,112,95,99,111,110,118,101,114,116,95,99,111,112,
    121,95,112,97,114,97,109,95,50,93,59,10,97,100,100,46,115,54,52,32,
    37,114,100,51,48,56,44,32,37,114,100,51,48,56,44,32,37,114,100,55,
    54,59,10,115,101,116,112,46,108,116,46,117,54,52,32,37,112,50,48,56,
    44,32,37,114,100,51,48,56,44,32,37,114,100,50,53,50,59,10,64,37,
    112,50,48,56,32,98,114,97,32,36,76,95,95,66,66,48,95,49,52,49,
    59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,50,50,
    54,59,10,10,36,76,95,95,66,66,48,95,49,58,10,99,118,116,46,114,
    110,46,102,51,50,46,102,54,52,32,37,102,49,44,32,37,102,100,51,55,
    59,10,109,111,118,46,117,51,50,32,37,114,53,50,44,32,37,99,116,97,
    105,100,46,120,59,10,99,118,116,46,117,54,52,46,117,51,50,32,37,114,
    100,51,48,50,44,32,37,114,53,50,59,10,115,101,116,112,46,103,101,46,
    117,54,52,32,37,112,52,44,32,37,114,100,51,48,50,44,32,37,114,100,
    49,49,53,59,10,64,37,112,52,32,98,114,97,32,36,76,95,95,66,66,
    48,95,50,50,54,59,10,10,109,111,118,46,117,51,50,32,37,114,53,51,
    44,32,37,110,99,116,97,105,100,46,120,59,10,99,118,116,46,117,54,52,
    46,117,51,50,32,37,114,100,52,44,32,37,114,53,51,59,10,115,101,116,
    112,46,101,113,46,115,51,50,32,37,112,53,44,32,37,114,53,48,44,32,
    48,59,10,115,101,108,112,46,98,54,52,32,37,114,100,53,44,32,52,44,
    32,50,44,32,37,112,53,59,10,115,101,116,112,46,101,113,46,115,51,50,
    32,37,112,54,44,32,37,114,53,49,44,32,48,59,10,115,101,108,112,46,
    98,54,52,32,37,114,100,54,44,32,52,44,32,50,44,32,37,112,54,59,
    10,109,111,118,46,117,51,50,32,37,114,53,52,44,32,37,116,105,100,46,
    120,59,10,99,118,116,46,117,54,52,46,117,51,50,32,37,114,100,55,44,
    32,37,114,53,52,59,10,109,111,118,46,117,51,50,32,37,114,53,53,44,
    32,37,110,116,105,100,46,120,59,10,99,118,116,46,117,54,52,46,117,51,
    50,32,37,114,100,56,44,32,37,114,53,53,59,10,109,117,108,46,119,105,
    100,101,46,117,51,50,32,37,114,100,57,44,32,37,114,53,53,44,32,52,
    59,10,111,114,46,98,51,50,32,37,114,49,44,32,37,114,53,49,44,32,
    37,114,53,48,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,
    48,95,51,59,10,10,36,76,95,95,66,66,48,95,49,50,48,58,10,115,
    104,114,46,117,54,52,32,37,114,100,53,53,44,32,37,114,100,49,52,44,
    32,50,59,10,115,101,116,112,46,108,101,46,117,54,52,32,37,112,49,49,
    53,44,32,37,114,100,53,53,44,32,37,114,100,55,59,10,64,37,112,49,
    49,53,32,98,114,97,32,36,76,95,95,66,66,48,95,49,51,52,59,10,
    10,115,101,116,112,46,110,101,117,46,102,51,50,32,37,112,49,49,54,44,
    32,37,102,49,44,32,48,102,51,70,56,48,48,48,48,48,59,10,64,37,
    112,49,49,54,32,98,114,97,32,36,76,95,95,66,66,48,95,49,50,56,
    59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,49,50,
    50,59,10,10,36,76,95,95,66,66,48,95,49,50,56,58,10,109,111,118,
    46,117,54,52,32,37,114,100,51,48,53,44,32,37,114,100,55,59,10,10,
    36,76,95,95,66,66,48,95,49,50,57,58,10,115,104,108,46,98,54,52,
    32,37,114,100,49,56,49,44,32,37,114,100,51,48,53,44,32,52,59,10,
    97,100,100,46,115,54,52,32,37,114,100,54,50,44,32,37,114,100,49,53,
    44,32,37,114,100,49,56,49,59,10,108,100,46,118,52,46,102,51,50,32,
    123,37,102,57,56,44,32,37,102,57,57,44,32,37,102,49,48,48,44,32,
    37,102,49,48,49,125,44,32,91,37,114,100,54,50,93,59,10,97,100,100,
    46,115,54,52,32,37,114,100,54,51,44,32,37,114,100,51,48,53,44,32,
    37,114,100,56,59,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,
    49,50,48,44,32,37,114,100,54,51,44,32,37,114,100,53,53,59,10,109,
    111,118,46,102,51,50,32,37,102,49,51,55,44,32,37,102,57,56,59,10,
    109,111,118,46,102,51,50,32,37,102,49,51,56,44,32,37,102,57,57,59,
    10,109,111,118,46,102,51,50,32,37,102,49,51,57,44,32,37,102,49,48,
    48,59,10,109,111,118,46,102,51,50,32,37,102,49,52,48,44,32,37,102,
    49,48,49,59,10,64,37,112,49,50,48,32,98,114,97,32,36,76,95,95,
    66,66,48,95,49,51,49,59,10,10,115,104,108,46,98,54,52,32,37,114,
    100,49,56,50,44,32,37,114,100,56,44,32,52,59,10,97,100,100,46,115,
    54,52,32,37,114,100,49,56,51,44,32,37,114,100,54,50,44,32,37,114,
    100,49,56,50,59,10,108,100,46,118,52,46,102,51,50,32,123,37,102,49,
    51,55,44,32,37,102,49,51,56,44,32,37,102,49,51,57,44,32,37,102,
    49,52,48,125,44,32,91,37,114,100,49,56,51,93,59,10,10,36,76,95,
    95,66,66,48,95,49,51,49,58,10,97,100,100,46,115,54,52,32,37,114,
    100,54,52,44,32,37,114,100,49,54,44,32,37,114,100,49,56,49,59,10,
    109,117,108,46,102,51,50,32,37,102,49,48,54,44,32,37,102,49,48,49,
    44,32,37,102,49,59,10,109,117,108,46,102,51,50,32,37,102,49,48,55,
    44,32,37,102,49,48,48,44,32,37,102,49,59,10,109,117,108,46,102,51,
    50,32,37,102,49,48,56,44,32,37,102,57,57,44,32,37,102,49,59,10,
    109,117,108,46,102,51,50,32,37,102,49,48,57,44,32,37,102,57,56,44,
    32,37,102,49,59,10,115,116,46,118,52,46,102,51,50,32,91,37,114,100,
    54,52,93,44,32,123,37,102,49,48,57,44,32,37,102,49,48,56,44,32,
    37,102,49,48,55,44,32,37,102,49,48,54,125,59,10,64,37,112,49,50,
    48,32,98,114,97,32,36,76,95,95,66,66,48,95,49,51,51,59,10,10,
    115,104,108,46,98,54,52,32,37,114,100,49,56,53,44,32,37,114,100,56,
    44,32,52,59,10,97,100,100,46,115,54,52,32,37,114,100,49,56,54,44,
    32,37,114,100,54,52,44,32,37,114,100,49,56,53,59,10,109,117,108,46,
    102,51,50,32,37,102,49,49,48,44,32,37,102,49,52,48,44,32,37,102,
    49,59,10,109,117,108,46,102,51,50,32,37,102,49,49,49,44,32,37,102,
    49,51,57,44,32,37,102,49,59,10,109,117,108,46,102,51,50,32,37,102,
    49,49,50,44,32,37,102,49,51,56,44,32,37,102,49,59,10,109,117,108,
    46,102,51,50,32,37,102,49,49,51,44,32,37,102,49,51,55,44,32,37,
    102,49,59,10,115,116,46,118,52,46,102,51,50,32,91,37,114,100,49,56,
    54,93,44,32,123,37,102,49,49,51,44,32,37,102,49,49,50,44,32,37,
    102,49,49,49,44,32,37,102,49,49,48,125,59,10,10,36,76,95,95,66,
    66,48,95,49,51,51,58,10,97,100,100,46,115,54,52,32,37,114,100,51,
    48,53,44,32,37,114,100,54,51,44,32,37,114,100,56,59,10,115,101,116,
    112,46,108,116,46,117,54,52,32,37,112,49,50,50,44,32,37,114,100,51,
    48,53,44,32,37,114,100,53,53,59,10,64,37,112,49,50,50,32,98,114,
    97,32,36,76,95,95,66,66,48,95,49,50,57,59,10,98,114,97,46,117,
    110,105,32,36,76,95,95,66,66,48,95,49,51,52,59,10,10,36,76,95,
    95,66,66,48,95,49,50,50,58,10,109,111,118,46,117,54,52,32,37,114,
    100,51,48,52,44,32,37,114,100,55,59,10,10,36,76,95,95,66,66,48,
    95,49,50,51,58,10,115,104,108,46,98,54,52,32,37,114,100,49,55,53,
    44,32,37,114,100,51,48,52,44,32,52,59,10,97,100,100,46,115,54,52,
    32,37,114,100,53,55,44,32,37,114,100,49,53,44,32,37,114,100,49,55,
    53,59,10,108,100,46,118,52,46,102,51,50,32,123,37,102,57,48,44,32,
    37,102,57,49,44,32,37,102,57,50,44,32,37,102,57,51,125,44,32,91,
    37,114,100,53,55,93,59,10,97,100,100,46,115,54,52,32,37,114,100,53,
    56,44,32,37,114,100,51,48,52,44,32,37,114,100,56,59,10,115,101,116,
    112,46,103,101,46,117,54,52,32,37,112,49,49,55,44,32,37,114,100,53,
    56,44,32,37,114,100,53,53,59,10,109,111,118,46,102,51,50,32,37,102,
    49,51,51,44,32,37,102,57,48,59,10,109,111,118,46,102,51,50,32,37,
    102,49,51,52,44,32,37,102,57,49,59,10,109,111,118,46,102,51,50,32,
    37,102,49,51,53,44,32,37,102,57,50,59,10,109,111,118,46,102,51,50,
    32,37,102,49,51,54,44,32,37,102,57,51,59,10,64,37,112,49,49,55,
    32,98,114,97,32,36,76,95,95,66,66,48,95,49,50,53,59,10,10,115,
    104,108,46,98,54,52,32,37,114,100,49,55,54,44,32,37,114,100,56,44,
    32,52,59,10,97,100,100,46,115,54,52,32,37,114,100,49,55,55,44,32,
    37,114,100,53,55,44,32,37,114,100,49,55,54,59,10,108,100,46,118,52,
    46,102,51,50,32,123,37,102,49,51,51,44,32,37,102,49,51,52,44,32,
    37,102,49,51,53,44,32,37,102,49,51,54,125,44,32,91,37,114,100,49,
    55,55,93,59,10,10,36,76,95,95,66,66,48,95,49,50,53,58,10,97,
    100,100,46,115,54,52,32,37,114,100,53,57,44,32,37,114,100,49,54,44,
    32,37,114,100,49,55,53,59,10,115,116,46,118,52,46,102,51,50,32,91,
    37,114,100,53,57,93,44,32,123,37,102,57,48,44,32,37,102,57,49,44,
    32,37,102,57,50,44,32,37,102,57,51,125,59,10,64,37,112,49,49,55,
    32,98,114,97,32,36,76,95,95,66,66,48,95,49,50,55,59,10,10,115,
    104,108,46,98,54,52,32,37,114,100,49,55,57,44,32,37,114,100,56,44,
    32,52,59,10,97,100,100,46,115,54,52,32,37,114,100,49,56,48,44,32,
    37,114,100,53,57,44,32,37,114,100,49,55,57,59,10,115,116,46,118,52,
    46,102,51,50,32,91,37,114,100,49,56,48,93,44,32,123,37,102,49,51,
    51,44,32,37,102,49,51,52,44,32,37,102,49,51,53,44,32,37,102,49,
    51,54,125,59,10,10,36,76,95,95,66,66,48,95,49,50,55,58,10,97,
    100,100,46,115,54,52,32,37,114,100,51,48,52,44,32,37,114,100,53,56,
    44,32,37,114,100,56,59,10,115,101,116,112,46,108,116,46,117,54,52,32,
    37,112,49,49,57,44,32,37,114,100,51,48,52,44,32,37,114,100,53,53,
    59,10,64,37,112,49,49,57,32,98,114,97,32,36,76,95,95,66,66,48,
    95,49,50,51,59,10,10,36,76,95,95,66,66,48,95,49,51,52,58,10,
    97,110,100,46,98,54,52,32,37,114,100,49,56,55,44,32,37,114,100,49,
    52,44,32,45,52,59,10,97,100,100,46,115,54,52,32,37,114,100,51,48,
    54,44,32,37,114,100,49,56,55,44,32,37,114,100,55,59,10,115,101,116,
    112,46,103,101,46,117,54,52,32,37,112,49,50,51,44,32,37,114,100,51,
    48,54,44,32,37,114,100,49,52,59,10,64,37,112,49,50,51,32,98,114,
    97,32,36,76,95,95,66,66,48,95,49,51,56,59,10,10,115,101,116,112,
    46,110,101,117,46,102,51,50,32,37,112,49,50,52,44,32,37,102,49,44,
    32,48,102,51,70,56,48,48,48,48,48,59,10,64,37,112,49,50,52,32,
    98,114,97,32,36,76,95,95,66,66,48,95,49,51,55,59,10,98,114,97,
    46,117,110,105,32,36,76,95,95,66,66,48,95,49,51,54,59,10,10,36,
    76,95,95,66,66,48,95,49,51,55,58,10,115,104,108,46,98,54,52,32,
    37,114,100,49,57,49,44,32,37,114,100,51,48,54,44,32,50,59,10,97,
    100,100,46,115,54,52,32,37,114,100,49,57,50,44,32,37,114,100,49,53,
    44,32,37,114,100,49,57,49,59,10,108,100,46,102,51,50,32,37,102,49,
    49,53,44,32,91,37,114,100,49,57,50,93,59,10,109,117,108,46,102,51,
    50,32,37,102,49,49,54,44,32,37,102,49,49,53,44,32,37,102,49,59,
    10,97,100,100,46,115,54,52,32,37,114,100,49,57,51,44,32,37,114,100,
    49,54,44,32,37,114,100,49,57,49,59,10,115,116,46,102,51,50,32,91,
    37,114,100,49,57,51,93,44,32,37,102,49,49,54,59,10,97,100,100,46,
    115,54,52,32,37,114,100,51,48,54,44,32,37,114,100,51,48,54,44,32,
    37,114,100,56,59,10,115,101,116,112,46,108,116,46,117,54,52,32,37,112,
    49,50,54,44,32,37,114,100,51,48,54,44,32,37,114,100,49,52,59,10,
    64,37,112,49,50,54,32,98,114,97,32,36,76,95,95,66,66,48,95,49,
    51,55,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,
    49,51,56,59,10,10,36,76,95,95,66,66,48,95,49,51,54,58,10,115,
    104,108,46,98,54,52,32,37,114,100,49,56,56,44,32,37,114,100,51,48,
    54,44,32,50,59,10,97,100,100,46,115,54,52,32,37,114,100,49,56,57,
    44,32,37,114,100,49,53,44,32,37,114,100,49,56,56,59,10,108,100,46,
    102,51,50,32,37,102,49,49,52,44,32,91,37,114,100,49,56,57,93,59,
    10,97,100,100,46,115,54,52,32,37,114,100,49,57,48,44,32,37,114,100,
    49,54,44,32,37,114,100,49,56,56,59,10,115,116,46,102,51,50,32,91,
    37,114,100,49,57,48,93,44,32,37,102,49,49,52,59,10,97,100,100,46,
    115,54,52,32,37,114,100,51,48,54,44,32,37,114,100,51,48,54,44,32,
    37,114,100,56,59,10,115,101,116,112,46,108,116,46,117,54,52,32,37,112,
    49,50,53,44,32,37,114,100,51,48,54,44,32,37,114,100,49,52,59,10,
    64,37,112,49,50,53,32,98,114,97,32,36,76,95,95,66,66,48,95,49,
    51,54,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,
    49,51,56,59,10,10,36,76,95,95,66,66,48,95,51,58,10,108,100,46,
    112,97,114,97,109,46,117,54,52,32,37,114,100,50,54,51,44,32,91,100,
    100,112,95,99,111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,
    109,95,51,93,59,10,115,104,108,46,98,54,52,32,37,114,100,49,49,57,
    44,32,37,114,100,51,48,50,44,32,52,59,10,97,100,100,46,115,54,52,
    32,37,114,100,49,50,48,44,32,37,114,100,50,44,32,37,114,100,49,49,
    57,59,10,108,100,46,103,108,111,98,97,108,46,117,54,52,32,37,114,100,
    49,50,49,44,32,91,37,114,100,49,50,48,93,59,10,109,117,108,46,108,
    111,46,115,54,52,32,37,114,100,49,50,50,44,32,37,114,100,49,50,49,
    44,32,50,52,59,10,97,100,100,46,115,54,52,32,37,114,100,49,50,51,
    44,32,37,114,100,49,44,32,37,114,100,49,50,50,59,10,108,100,46,103,
    108,111,98,97,108,46,117,54,52,32,37,114,100,49,49,44,32,91,37,114,
    100,49,50,51,93,59,10,108,100,46,103,108,111,98,97,108,46,117,54,52,
    32,37,114,100,49,50,44,32,91,37,114,100,49,50,51,43,56,93,59,10,
    108,100,46,103,108,111,98,97,108,46,117,54,52,32,37,114,100,49,50,52,
    44,32,91,37,114,100,49,50,51,43,49,54,93,59,10,108,100,46,103,108,
    111,98,97,108,46,117,54,52,32,37,114,100,49,51,44,32,91,37,114,100,
    49,50,48,43,56,93,59,10,115,117,98,46,115,54,52,32,37,114,100,49,
    50,53,44,32,37,114,100,49,50,52,44,32,37,114,100,49,51,59,10,109,
    105,110,46,117,54,52,32,37,114,100,49,52,44,32,37,114,100,49,50,53,
    44,32,37,114,100,50,54,51,59,10,115,101,116,112,46,110,101,46,115,51,
    50,32,37,112,55,44,32,37,114,49,44,32,48,59,10,64,37,112,55,32,
    98,114,97,32,36,76,95,95,66,66,48,95,53,59,10,10,115,104,108,46,
    98,54,52,32,37,114,100,49,50,54,44,32,37,114,100,49,51,44,32,50,
    59,10,97,100,100,46,115,54,52,32,37,114,100,49,53,44,32,37,114,100,
    49,49,44,32,37,114,100,49,50,54,59,10,97,100,100,46,115,54,52,32,
    37,114,100,49,54,44,32,37,114,100,49,50,44,32,37,114,100,49,50,54,
    59,10,111,114,46,98,54,52,32,37,114,100,49,50,55,44,32,37,114,100,
    49,54,44,32,37,114,100,49,53,59,10,97,110,100,46,98,54,52,32,37,
    114,100,49,50,56,44,32,37,114,100,49,50,55,44,32,49,53,59,10,115,
    101,116,112,46,101,113,46,115,54,52,32,37,112,56,44,32,37,114,100,49,
    50,56,44,32,48,59,10,64,37,112,56,32,98,114,97,32,36,76,95,95,
    66,66,48,95,49,50,48,59,10,10,36,76,95,95,66,66,48,95,53,58,
    10,109,117,108,46,108,111,46,115,54,52,32,37,114,100,49,50,57,44,32,
    37,114,100,49,51,44,32,37,114,100,53,59,10,97,100,100,46,115,54,52,
    32,37,114,100,49,55,44,32,37,114,100,49,49,44,32,37,114,100,49,50,
    57,59,10,109,117,108,46,108,111,46,115,54,52,32,37,114,100,49,51,48,
    44,32,37,114,100,49,51,44,32,37,114,100,54,59,10,97,100,100,46,115,
    54,52,32,37,114,100,49,56,44,32,37,114,100,49,50,44,32,37,114,100,
    49,51,48,59,10,115,101,116,112,46,108,101,46,117,54,52,32,37,112,57,
    44,32,37,114,100,49,52,44,32,37,114,100,55,59,10,64,37,112,57,32,
    98,114,97,32,36,76,95,95,66,66,48,95,49,51,56,59,10,10,109,111,
    118,46,117,54,52,32,37,114,100,51,48,51,44,32,37,114,100,55,59,10,
    10,36,76,95,95,66,66,48,95,55,58,10,97,100,100,46,115,54,52,32,
    37,114,100,50,49,44,32,37,114,100,51,48,51,44,32,37,114,100,56,59,
    10,97,100,100,46,115,54,52,32,37,114,100,50,51,44,32,37,114,100,50,
    49,44,32,37,114,100,56,59,10,97,100,100,46,115,54,52,32,37,114,100,
    50,53,44,32,37,114,100,50,51,44,32,37,114,100,56,59,10,115,104,108,
    46,98,54,52,32,37,114,100,49,51,52,44,32,37,114,100,50,53,44,32,
    49,59,10,97,100,100,46,115,54,52,32,37,114,100,50,54,44,32,37,114,
    100,49,55,44,32,37,114,100,49,51,52,59,10,64,37,112,50,32,98,114,
    97,32,36,76,95,95,66,66,48,95,50,54,59,10,10,115,101,116,112,46,
    101,113,46,115,51,50,32,37,112,49,49,44,32,37,114,53,48,44,32,50,
    59,10,64,37,112,49,49,32,98,114,97,32,36,76,95,95,66,66,48,95,
    49,56,59,10,10,115,101,116,112,46,110,101,46,115,51,50,32,37,112,49,
    50,44,32,37,114,53,48,44,32,51,59,10,64,37,112,49,50,32,98,114,
    97,32,36,76,95,95,66,66,48,95,51,52,59,10,10,115,101,116,112,46,
    103,101,46,117,54,52,32,37,112,49,51,44,32,37,114,100,51,48,51,44,
    32,37,114,100,49,52,59,10,64,37,112,49,51,32,98,114,97,32,36,76,
    95,95,66,66,48,95,49,50,59,10,10,115,104,108,46,98,54,52,32,37,
    114,100,50,54,53,44,32,37,114,100,51,48,51,44,32,49,59,10,97,100,
    100,46,115,54,52,32,37,114,100,50,54,52,44,32,37,114,100,49,55,44,
    32,37,114,100,50,54,53,59,10,108,100,46,117,49,54,32,37,114,115,51,
    55,44,32,91,37,114,100,50,54,52,93,59,10,10,123,32,109,111,118,46,
    98,51,50,32,37,102,51,52,44,32,123,48,44,37,114,115,51,55,125,59,
    125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,50,52,44,32,37,
    102,51,52,59,10,10,36,76,95,95,66,66,48,95,49,50,58,10,115,101,
    116,112,46,103,101,46,117,54,52,32,37,112,49,52,44,32,37,114,100,50,
    49,44,32,37,114,100,49,52,59,10,64,37,112,49,52,32,98,114,97,32,
    36,76,95,95,66,66,48,95,49,52,59,10,10,115,104,108,46,98,54,52,
    32,37,114,100,50,56,51,44,32,37,114,100,50,49,44,32,49,59,10,97,
    100,100,46,115,54,52,32,37,114,100,50,56,50,44,32,37,114,100,49,55,
    44,32,37,114,100,50,56,51,59,10,108,100,46,117,49,54,32,37,114,115,
    51,56,44,32,91,37,114,100,50,56,50,93,59,10,10,123,32,109,111,118,
    46,98,51,50,32,37,102,51,53,44,32,123,48,44,37,114,115,51,56,125,
    59,125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,50,51,44,32,
    37,102,51,53,59,10,10,36,76,95,95,66,66,48,95,49,52,58,10,115,
    101,116,112,46,103,101,46,117,54,52,32,37,112,49,53,44,32,37,114,100,
    50,51,44,32,37,114,100,49,52,59,10,64,37,112,49,53,32,98,114,97,
    32,36,76,95,95,66,66,48,95,49,54,59,10,10,115,104,108,46,98,54,
    52,32,37,114,100,50,56,49,44,32,37,114,100,50,51,44,32,49,59,10,
    97,100,100,46,115,54,52,32,37,114,100,50,56,48,44,32,37,114,100,49,
    55,44,32,37,114,100,50,56,49,59,10,108,100,46,117,49,54,32,37,114,
    115,51,57,44,32,91,37,114,100,50,56,48,93,59,10,10,123,32,109,111,
    118,46,98,51,50,32,37,102,51,54,44,32,123,48,44,37,114,115,51,57,
    125,59,125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,50,50,44,
    32,37,102,51,54,59,10,10,36,76,95,95,66,66,48,95,49,54,58,10,
    115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,54,44,32,37,114,
    100,50,53,44,32,37,114,100,49,52,59,10,64,37,112,49,54,32,98,114,
    97,32,36,76,95,95,66,66,48,95,52,50,59,10,10,108,100,46,117,49,
    54,32,37,114,115,52,48,44,32,91,37,114,100,50,54,93,59,10,10,123,
    32,109,111,118,46,98,51,50,32,37,102,51,55,44,32,123,48,44,37,114,
    115,52,48,125,59,125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,
    50,49,44,32,37,102,51,55,59,10,98,114,97,46,117,110,105,32,36,76,
    95,95,66,66,48,95,52,50,59,10,10,36,76,95,95,66,66,48,95,50,
    54,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,50,49,44,
    32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,112,50,
    49,32,98,114,97,32,36,76,95,95,66,66,48,95,50,56,59,10,10,115,
    104,108,46,98,54,52,32,37,114,100,49,51,54,44,32,37,114,100,51,48,
    51,44,32,51,59,10,97,100,100,46,115,54,52,32,37,114,100,49,51,55,
    44,32,37,114,100,49,55,44,32,37,114,100,49,51,54,59,10,108,100,46,
    102,54,52,32,37,102,100,51,56,44,32,91,37,114,100,49,51,55,93,59,
    10,99,118,116,46,114,110,46,102,51,50,46,102,54,52,32,37,102,52,50,
    44,32,37,102,100,51,56,59,10,109,111,118,46,98,51,50,32,37,114,49,
    50,52,44,32,37,102,52,50,59,10,10,36,76,95,95,66,66,48,95,50,
    56,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,50,50,44,
    32,37,114,100,50,49,44,32,37,114,100,49,52,59,10,64,37,112,50,50,
    32,98,114,97,32,36,76,95,95,66,66,48,95,51,48,59,10,10,115,104,
    108,46,98,54,52,32,37,114,100,49,51,56,44,32,37,114,100,50,49,44,
    32,51,59,10,97,100,100,46,115,54,52,32,37,114,100,49,51,57,44,32,
    37,114,100,49,55,44,32,37,114,100,49,51,56,59,10,108,100,46,102,54,
    52,32,37,102,100,51,57,44,32,91,37,114,100,49,51,57,93,59,10,99,
    118,116,46,114,110,46,102,51,50,46,102,54,52,32,37,102,52,51,44,32,
    37,102,100,51,57,59,10,109,111,118,46,98,51,50,32,37,114,49,50,51,
    44,32,37,102,52,51,59,10,10,36,76,95,95,66,66,48,95,51,48,58,
    10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,50,51,44,32,37,
    114,100,50,51,44,32,37,114,100,49,52,59,10,64,37,112,50,51,32,98,
    114,97,32,36,76,95,95,66,66,48,95,51,50,59,10,10,115,104,108,46,
    98,54,52,32,37,114,100,49,52,48,44,32,37,114,100,50,51,44,32,51,
    59,10,97,100,100,46,115,54,52,32,37,114,100,49,52,49,44,32,37,114,
    100,49,55,44,32,37,114,100,49,52,48,59,10,108,100,46,102,54,52,32,
    37,102,100,52,48,44,32,91,37,114,100,49,52,49,93,59,10,99,118,116,
    46,114,110,46,102,51,50,46,102,54,52,32,37,102,52,52,44,32,37,102,
    100,52,48,59,10,109,111,118,46,98,51,50,32,37,114,49,50,50,44,32,
    37,102,52,52,59,10,10,36,76,95,95,66,66,48,95,51,50,58,10,115,
    101,116,112,46,103,101,46,117,54,52,32,37,112,50,52,44,32,37,114,100,
    50,53,44,32,37,114,100,49,52,59,10,64,37,112,50,52,32,98,114,97,
    32,36,76,95,95,66,66,48,95,52,50,59,10,10,115,104,108,46,98,54,
    52,32,37,114,100,49,52,50,44,32,37,114,100,50,53,44,32,51,59,10,
    97,100,100,46,115,54,52,32,37,114,100,49,52,51,44,32,37,114,100,49,
    55,44,32,37,114,100,49,52,50,59,10,108,100,46,102,54,52,32,37,102,
    100,52,49,44,32,91,37,114,100,49,52,51,93,59,10,99,118,116,46,114,
    110,46,102,51,50,46,102,54,52,32,37,102,52,53,44,32,37,102,100,52,
    49,59,10,109,111,118,46,98,51,50,32,37,114,49,50,49,44,32,37,102,
    52,53,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,
    52,50,59,10,10,36,76,95,95,66,66,48,95,49,56,58,10,115,101,116,
    112,46,103,101,46,117,54,52,32,37,112,49,55,44,32,37,114,100,51,48,
    51,44,32,37,114,100,49,52,59,10,64,37,112,49,55,32,98,114,97,32,
    36,76,95,95,66,66,48,95,50,48,59,10,10,115,104,108,46,98,54,52,
    32,37,114,100,50,54,55,44,32,37,114,100,51,48,51,44,32,49,59,10,
    97,100,100,46,115,54,52,32,37,114,100,50,54,54,44,32,37,114,100,49,
    55,44,32,37,114,100,50,54,55,59,10,108,100,46,117,49,54,32,37,114,
    115,52,49,44,32,91,37,114,100,50,54,54,93,59,10,10,123,32,99,118,
    116,46,102,51,50,46,102,49,54,32,37,102,51,56,44,32,37,114,115,52,
    49,59,125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,50,52,44,
    32,37,102,51,56,59,10,10,36,76,95,95,66,66,48,95,50,48,58,10,
    115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,56,44,32,37,114,
    100,50,49,44,32,37,114,100,49,52,59,10,64,37,112,49,56,32,98,114,
    97,32,36,76,95,95,66,66,48,95,50,50,59,10,10,115,104,108,46,98,
    54,52,32,37,114,100,50,56,55,44,32,37,114,100,50,49,44,32,49,59,
    10,97,100,100,46,115,54,52,32,37,114,100,50,56,54,44,32,37,114,100,
    49,55,44,32,37,114,100,50,56,55,59,10,108,100,46,117,49,54,32,37,
    114,115,52,50,44,32,91,37,114,100,50,56,54,93,59,10,10,123,32,99,
    118,116,46,102,51,50,46,102,49,54,32,37,102,51,57,44,32,37,114,115,
    52,50,59,125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,50,51,
    44,32,37,102,51,57,59,10,10,36,76,95,95,66,66,48,95,50,50,58,
    10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,57,44,32,37,
    114,100,50,51,44,32,37,114,100,49,52,59,10,64,37,112,49,57,32,98,
    114,97,32,36,76,95,95,66,66,48,95,50,52,59,10,10,115,104,108,46,
    98,54,52,32,37,114,100,50,56,53,44,32,37,114,100,50,51,44,32,49,
    59,10,97,100,100,46,115,54,52,32,37,114,100,50,56,52,44,32,37,114,
    100,49,55,44,32,37,114,100,50,56,53,59,10,108,100,46,117,49,54,32,
    37,114,115,52,51,44,32,91,37,114,100,50,56,52,93,59,10,10,123,32,
    99,118,116,46,102,51,50,46,102,49,54,32,37,102,52,48,44,32,37,114,
    115,52,51,59,125,10,10,10,109,111,118,46,98,51,50,32,37,114,49,50,
    50,44,32,37,102,52,48,59,10,10,36,76,95,95,66,66,48,95,50,52,
    58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,50,48,44,32,
    37,114,100,50,53,44,32,37,114,100,49,52,59,10,64,37,112,50,48,32,
    98,114,97,32,36,76,95,95,66,66,48,95,52,50,59,10,10,108,100,46,
    117,49,54,32,37,114,115,52,52,44,32,91,37,114,100,50,54,93,59,10,
    10,123,32,99,118,116,46,102,51,50,46,102,49,54,32,37,102,52,49,44,
    32,37,114,115,52,52,59,125,10,10,10,109,111,118,46,98,51,50,32,37,
    114,49,50,49,44,32,37,102,52,49,59,10,98,114,97,46,117,110,105,32,
    36,76,95,95,66,66,48,95,52,50,59,10,10,36,76,95,95,66,66,48,
    95,51,52,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,50,
    53,44,32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,
    112,50,53,32,98,114,97,32,36,76,95,95,66,66,48,95,51,54,59,10,
    10,115,104,108,46,98,54,52,32,37,114,100,49,52,52,44,32,37,114,100,
    51,48,51,44,32,50,59,10,97,100,100,46,115,54,52,32,37,114,100,49,
    52,53,44,32,37,114,100,49,55,44,32,37,114,100,49,52,52,59,10,108,
    100,46,117,51,50,32,37,114,49,50,52,44,32,91,37,114,100,49,52,53,
    93,59,10,10,36,76,95,95,66,66,48,95,51,54,58,10,115,101,116,112,
    46,103,101,46,117,54,52,32,37,112,50,54,44,32,37,114,100,50,49,44,
    32,37,114,100,49,52,59,10,64,37,112,50,54,32,98,114,97,32,36,76,
    95,95,66,66,48,95,51,56,59,10,10,115,104,108,46,98,54,52,32,37,
    114,100,49,52,54,44,32,37,114,100,50,49,44,32,50,59,10,97,100,100,
    46,115,54,52,32,37,114,100,49,52,55,44,32,37,114,100,49,55,44,32,
    37,114,100,49,52,54,59,10,108,100,46,117,51,50,32,37,114,49,50,51,
    44,32,91,37,114,100,49,52,55,93,59,10,10,36,76,95,95,66,66,48,
    95,51,56,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,50,
    55,44,32,37,114,100,50,51,44,32,37,114,100,49,52,59,10,64,37,112,
    50,55,32,98,114,97,32,36,76,95,95,66,66,48,95,52,48,59,10,10,
    115,104,108,46,98,54,52,32,37,114,100,49,52,56,44,32,37,114,100,50,
    51,44,32,50,59,10,97,100,100,46,115,54,52,32,37,114,100,49,52,57,
    44,32,37,114,100,49,55,44,32,37,114,100,49,52,56,59,10,108,100,46,
    117,51,50,32,37,114,49,50,50,44,32,91,37,114,100,49,52,57,93,59,
    10,10,36,76,95,95,66,66,48,95,52,48,58,10,115,101,116,112,46,103,
    101,46,117,54,52,32,37,112,50,56,44,32,37,114,100,50,53,44,32,37,
    114,100,49,52,59,10,64,37,112,50,56,32,98,114,97,32,36,76,95,95,
    66,66,48,95,52,50,59,10,10,115,104,108,46,98,54,52,32,37,114,100,
    49,53,48,44,32,37,114,100,50,53,44,32,50,59,10,97,100,100,46,115,
    54,52,32,37,114,100,49,53,49,44,32,37,114,100,49,55,44,32,37,114,
    100,49,53,48,59,10,108,100,46,117,51,50,32,37,114,49,50,49,44,32,
    91,37,114,100,49,53,49,93,59,10,10,36,76,95,95,66,66,48,95,52,
    50,58,10,115,104,108,46,98,54,52,32,37,114,100,50,54,49,44,32,37,
    114,100,50,53,44,32,49,59,10,115,104,108,46,98,54,52,32,37,114,100,
    50,54,48,44,32,37,114,100,50,51,44,32,49,59,10,115,104,108,46,98,
    54,52,32,37,114,100,50,53,57,44,32,37,114,100,50,49,44,32,49,59,
    10,115,104,108,46,98,54,52,32,37,114,100,50,53,56,44,32,37,114,100,
    51,48,51,44,32,49,59,10,97,100,100,46,115,54,52,32,37,114,100,51,
    53,44,32,37,114,100,49,56,44,32,37,114,100,50,53,56,59,10,97,100,
    100,46,115,54,52,32,37,114,100,51,55,44,32,37,114,100,49,56,44,32,
    37,114,100,50,53,57,59,10,97,100,100,46,115,54,52,32,37,114,100,51,
    57,44,32,37,114,100,49,56,44,32,37,114,100,50,54,48,59,10,97,100,
    100,46,115,54,52,32,37,114,100,52,49,44,32,37,114,100,49,56,44,32,
    37,114,100,50,54,49,59,10,64,37,112,49,32,98,114,97,32,36,76,95,
    95,66,66,48,95,49,48,51,59,10,10,115,101,116,112,46,101,113,46,115,
    51,50,32,37,112,51,48,44,32,37,114,53,49,44,32,50,59,10,64,37,
    112,51,48,32,98,114,97,32,36,76,95,95,66,66,48,95,56,54,59,10,
    10,115,101,116,112,46,110,101,46,115,51,50,32,37,112,51,49,44,32,37,
    114,53,49,44,32,51,59,10,64,37,112,51,49,32,98,114,97,32,36,76,
    95,95,66,66,48,95,49,49,49,59,10,10,115,101,116,112,46,110,101,117,
    46,102,51,50,32,37,112,51,50,44,32,37,102,49,44,32,48,102,51,70,
    56,48,48,48,48,48,59,10,64,37,112,51,50,32,98,114,97,32,36,76,
    95,95,66,66,48,95,54,54,59,10,98,114,97,46,117,110,105,32,36,76,
    95,95,66,66,48,95,52,54,59,10,10,36,76,95,95,66,66,48,95,54,
    54,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,54,49,44,
    32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,112,54,
    49,32,98,114,97,32,36,76,95,95,66,66,48,95,55,49,59,10,10,109,
    111,118,46,98,51,50,32,37,102,52,54,44,32,37,114,49,50,52,59,10,
    109,117,108,46,102,51,50,32,37,102,52,55,44,32,37,102,52,54,44,32,
    37,102,49,59,10,109,111,118,46,98,51,50,32,37,114,54,57,44,32,37,
    102,52,55,59,10,97,110,100,46,98,51,50,32,37,114,55,48,44,32,37,
    114,54,57,44,32,50,49,52,55,52,56,51,54,52,55,59,10,115,101,116,
    112,46,103,116,46,117,51,50,32,37,112,54,50,44,32,37,114,55,48,44,
    32,50,49,51,57,48,57,53,48,52,48,59,10,115,104,108,46,98,51,50,
    32,37,114,55,49,44,32,37,114,54,57,44,32,49,54,59,10,115,104,114,
    46,117,51,50,32,37,114,55,50,44,32,37,114,54,57,44,32,49,54,59,
    10,99,118,116,46,117,49,54,46,117,51,50,32,37,114,115,53,51,44,32,
    37,114,55,50,59,10,115,101,108,112,46,98,51,50,32,37,114,52,50,44,
    32,48,44,32,37,114,55,49,44,32,37,112,54,50,59,10,115,101,108,112,
    46,98,49,54,32,37,114,115,57,51,44,32,51,50,55,54,55,44,32,37,
    114,115,53,51,44,32,37,112,54,50,59,10,115,101,116,112,46,103,116,46,
    117,51,50,32,37,112,54,51,44,32,37,114,52,50,44,32,45,50,49,52,
    55,52,56,51,54,52,56,59,10,64,37,112,54,51,32,98,114,97,32,36,
    76,95,95,66,66,48,95,54,57,59,10,10,115,101,116,112,46,110,101,46,
    115,51,50,32,37,112,54,52,44,32,37,114,52,50,44,32,45,50,49,52,
    55,52,56,51,54,52,56,59,10,97,110,100,46,98,49,54,32,37,114,115,
    53,52,44,32,37,114,115,57,51,44,32,49,59,10,115,101,116,112,46,101,
    113,46,98,49,54,32,37,112,54,53,44,32,37,114,115,53,52,44,32,49,
    59,10,110,111,116,46,112,114,101,100,32,37,112,54,54,44,32,37,112,54,
    53,59,10,111,114,46,112,114,101,100,32,37,112,54,55,44,32,37,112,54,
    52,44,32,37,112,54,54,59,10,64,37,112,54,55,32,98,114,97,32,36,
    76,95,95,66,66,48,95,55,48,59,10,10,36,76,95,95,66,66,48,95,
    54,57,58,10,97,100,100,46,115,49,54,32,37,114,115,57,51,44,32,37,
    114,115,57,51,44,32,49,59,10,10,36,76,95,95,66,66,48,95,55,48,
    58,10,115,116,46,117,49,54,32,91,37,114,100,51,53,93,44,32,37,114,
    115,57,51,59,10,10,36,76,95,95,66,66,48,95,55,49,58,10,115,101,
    116,112,46,103,101,46,117,54,52,32,37,112,54,56,44,32,37,114,100,50,
    49,44,32,37,114,100,49,52,59,10,64,37,112,54,56,32,98,114,97,32,
    36,76,95,95,66,66,48,95,55,54,59,10,10,109,111,118,46,98,51,50,
    32,37,102,52,56,44,32,37,114,49,50,51,59,10,109,117,108,46,102,51,
    50,32,37,102,52,57,44,32,37,102,52,56,44,32,37,102,49,59,10,109,
    111,118,46,98,51,50,32,37,114,55,51,44,32,37,102,52,57,59,10,97,
    110,100,46,98,51,50,32,37,114,55,52,44,32,37,114,55,51,44,32,50,
    49,52,55,52,56,51,54,52,55,59,10,115,101,116,112,46,103,116,46,117,
    51,50,32,37,112,54,57,44,32,37,114,55,52,44,32,50,49,51,57,48,
    57,53,48,52,48,59,10,115,104,108,46,98,51,50,32,37,114,55,53,44,
    32,37,114,55,51,44,32,49,54,59,10,115,104,114,46,117,51,50,32,37,
    114,55,54,44,32,37,114,55,51,44,32,49,54,59,10,99,118,116,46,117,
    49,54,46,117,51,50,32,37,114,115,53,53,44,32,37,114,55,54,59,10,
    115,101,108,112,46,98,51,50,32,37,114,52,51,44,32,48,44,32,37,114,
    55,53,44,32,37,112,54,57,59,10,115,101,108,112,46,98,49,54,32,37,
    114,115,57,52,44,32,51,50,55,54,55,44,32,37,114,115,53,53,44,32,
    37,112,54,57,59,10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,
    55,48,44,32,37,114,52,51,44,32,45,50,49,52,55,52,56,51,54,52,
    56,59,10,64,37,112,55,48,32,98,114,97,32,36,76,95,95,66,66,48,
    95,55,52,59,10,10,115,101,116,112,46,110,101,46,115,51,50,32,37,112,
    55,49,44,32,37,114,52,51,44,32,45,50,49,52,55,52,56,51,54,52,
    56,59,10,97,110,100,46,98,49,54,32,37,114,115,53,54,44,32,37,114,
    115,57,52,44,32,49,59,10,115,101,116,112,46,101,113,46,98,49,54,32,
    37,112,55,50,44,32,37,114,115,53,54,44,32,49,59,10,110,111,116,46,
    112,114,101,100,32,37,112,55,51,44,32,37,112,55,50,59,10,111,114,46,
    112,114,101,100,32,37,112,55,52,44,32,37,112,55,49,44,32,37,112,55,
    51,59,10,64,37,112,55,52,32,98,114,97,32,36,76,95,95,66,66,48,
    95,55,53,59,10,10,36,76,95,95,66,66,48,95,55,52,58,10,97,100,
    100,46,115,49,54,32,37,114,115,57,52,44,32,37,114,115,57,52,44,32,
    49,59,10,10,36,76,95,95,66,66,48,95,55,53,58,10,115,116,46,117,
    49,54,32,91,37,114,100,51,55,93,44,32,37,114,115,57,52,59,10,10,
    36,76,95,95,66,66,48,95,55,54,58,10,115,101,116,112,46,103,101,46,
    117,54,52,32,37,112,55,53,44,32,37,114,100,50,51,44,32,37,114,100,
    49,52,59,10,64,37,112,55,53,32,98,114,97,32,36,76,95,95,66,66,
    48,95,56,49,59,10,10,109,111,118,46,98,51,50,32,37,102,53,48,44,
    32,37,114,49,50,50,59,10,109,117,108,46,102,51,50,32,37,102,53,49,
    44,32,37,102,53,48,44,32,37,102,49,59,10,109,111,118,46,98,51,50,
    32,37,114,55,55,44,32,37,102,53,49,59,10,97,110,100,46,98,51,50,
    32,37,114,55,56,44,32,37,114,55,55,44,32,50,49,52,55,52,56,51,
    54,52,55,59,10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,55,
    54,44,32,37,114,55,56,44,32,50,49,51,57,48,57,53,48,52,48,59,
    10,115,104,108,46,98,51,50,32,37,114,55,57,44,32,37,114,55,55,44,
    32,49,54,59,10,115,104,114,46,117,51,50,32,37,114,56,48,44,32,37,
    114,55,55,44,32,49,54,59,10,99,118,116,46,117,49,54,46,117,51,50,
    32,37,114,115,53,55,44,32,37,114,56,48,59,10,115,101,108,112,46,98,
    51,50,32,37,114,52,52,44,32,48,44,32,37,114,55,57,44,32,37,112,
    55,54,59,10,115,101,108,112,46,98,49,54,32,37,114,115,57,53,44,32,
    51,50,55,54,55,44,32,37,114,115,53,55,44,32,37,112,55,54,59,10,
    115,101,116,112,46,103,116,46,117,51,50,32,37,112,55,55,44,32,37,114,
    52,52,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,64,37,112,
    55,55,32,98,114,97,32,36,76,95,95,66,66,48,95,55,57,59,10,10,
    115,101,116,112,46,110,101,46,115,51,50,32,37,112,55,56,44,32,37,114,
    52,52,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,97,110,100,
    46,98,49,54,32,37,114,115,53,56,44,32,37,114,115,57,53,44,32,49,
    59,10,115,101,116,112,46,101,113,46,98,49,54,32,37,112,55,57,44,32,
    37,114,115,53,56,44,32,49,59,10,110,111,116,46,112,114,101,100,32,37,
    112,56,48,44,32,37,112,55,57,59,10,111,114,46,112,114,101,100,32,37,
    112,56,49,44,32,37,112,55,56,44,32,37,112,56,48,59,10,64,37,112,
    56,49,32,98,114,97,32,36,76,95,95,66,66,48,95,56,48,59,10,10,
    36,76,95,95,66,66,48,95,55,57,58,10,97,100,100,46,115,49,54,32,
    37,114,115,57,53,44,32,37,114,115,57,53,44,32,49,59,10,10,36,76,
    95,95,66,66,48,95,56,48,58,10,115,116,46,117,49,54,32,91,37,114,
    100,51,57,93,44,32,37,114,115,57,53,59,10,10,36,76,95,95,66,66,
    48,95,56,49,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,
    56,50,44,32,37,114,100,50,53,44,32,37,114,100,49,52,59,10,64,37,
    112,56,50,32,98,114,97,32,36,76,95,95,66,66,48,95,49,49,57,59,
    10,10,109,111,118,46,98,51,50,32,37,102,53,50,44,32,37,114,49,50,
    49,59,10,109,117,108,46,102,51,50,32,37,102,53,51,44,32,37,102,53,
    50,44,32,37,102,49,59,10,109,111,118,46,98,51,50,32,37,114,56,49,
    44,32,37,102,53,51,59,10,97,110,100,46,98,51,50,32,37,114,56,50,
    44,32,37,114,56,49,44,32,50,49,52,55,52,56,51,54,52,55,59,10,
    115,101,116,112,46,103,116,46,117,51,50,32,37,112,56,51,44,32,37,114,
    56,50,44,32,50,49,51,57,48,57,53,48,52,48,59,10,115,104,108,46,
    98,51,50,32,37,114,56,51,44,32,37,114,56,49,44,32,49,54,59,10,
    115,104,114,46,117,51,50,32,37,114,56,52,44,32,37,114,56,49,44,32,
    49,54,59,10,99,118,116,46,117,49,54,46,117,51,50,32,37,114,115,53,
    57,44,32,37,114,56,52,59,10,115,101,108,112,46,98,51,50,32,37,114,
    52,53,44,32,48,44,32,37,114,56,51,44,32,37,112,56,51,59,10,115,
    101,108,112,46,98,49,54,32,37,114,115,57,54,44,32,51,50,55,54,55,
    44,32,37,114,115,53,57,44,32,37,112,56,51,59,10,115,101,116,112,46,
    103,116,46,117,51,50,32,37,112,56,52,44,32,37,114,52,53,44,32,45,
    50,49,52,55,52,56,51,54,52,56,59,10,64,37,112,56,52,32,98,114,
    97,32,36,76,95,95,66,66,48,95,56,52,59,10,10,115,101,116,112,46,
    110,101,46,115,51,50,32,37,112,56,53,44,32,37,114,52,53,44,32,45,
    50,49,52,55,52,56,51,54,52,56,59,10,97,110,100,46,98,49,54,32,
    37,114,115,54,48,44,32,37,114,115,57,54,44,32,49,59,10,115,101,116,
    112,46,101,113,46,98,49,54,32,37,112,56,54,44,32,37,114,115,54,48,
    44,32,49,59,10,110,111,116,46,112,114,101,100,32,37,112,56,55,44,32,
    37,112,56,54,59,10,111,114,46,112,114,101,100,32,37,112,56,56,44,32,
    37,112,56,53,44,32,37,112,56,55,59,10,64,37,112,56,56,32,98,114,
    97,32,36,76,95,95,66,66,48,95,56,53,59,10,10,36,76,95,95,66,
    66,48,95,56,52,58,10,97,100,100,46,115,49,54,32,37,114,115,57,54,
    44,32,37,114,115,57,54,44,32,49,59,10,10,36,76,95,95,66,66,48,
    95,56,53,58,10,115,116,46,117,49,54,32,91,37,114,100,52,49,93,44,
    32,37,114,115,57,54,59,10,98,114,97,46,117,110,105,32,36,76,95,95,
    66,66,48,95,49,49,57,59,10,10,36,76,95,95,66,66,48,95,49,48,
    51,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,57,56,44,
    32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,112,57,
    56,32,98,114,97,32,36,76,95,95,66,66,48,95,49,48,53,59,10,10,
    109,111,118,46,98,51,50,32,37,102,54,54,44,32,37,114,49,50,52,59,
    10,109,117,108,46,102,51,50,32,37,102,54,55,44,32,37,102,54,54,44,
    32,37,102,49,59,10,115,101,116,112,46,110,101,117,46,102,51,50,32,37,
    112,57,57,44,32,37,102,49,44,32,48,102,51,70,56,48,48,48,48,48,
    59,10,115,101,108,112,46,102,51,50,32,37,102,54,56,44,32,37,102,54,
    55,44,32,37,102,54,54,44,32,37,112,57,57,59,10,99,118,116,46,102,
    54,52,46,102,51,50,32,37,102,100,52,50,44,32,37,102,54,56,59,10,
    115,104,108,46,98,54,52,32,37,114,100,49,53,57,44,32,37,114,100,51,
    48,51,44,32,51,59,10,97,100,100,46,115,54,52,32,37,114,100,49,54,
    48,44,32,37,114,100,49,56,44,32,37,114,100,49,53,57,59,10,115,116,
    46,102,54,52,32,91,37,114,100,49,54,48,93,44,32,37,102,100,52,50,
    59,10,10,36,76,95,95,66,66,48,95,49,48,53,58,10,115,101,116,112,
    46,103,101,46,117,54,52,32,37,112,49,48,48,44,32,37,114,100,50,49,
    44,32,37,114,100,49,52,59,10,64,37,112,49,48,48,32,98,114,97,32,
    36,76,95,95,66,66,48,95,49,48,55,59,10,10,109,111,118,46,98,51,
    50,32,37,102,54,57,44,32,37,114,49,50,51,59,10,109,117,108,46,102,
    51,50,32,37,102,55,48,44,32,37,102,54,57,44,32,37,102,49,59,10,
    115,101,116,112,46,110,101,117,46,102,51,50,32,37,112,49,48,49,44,32,
    37,102,49,44,32,48,102,51,70,56,48,48,48,48,48,59,10,115,101,108,
    112,46,102,51,50,32,37,102,55,49,44,32,37,102,55,48,44,32,37,102,
    54,57,44,32,37,112,49,48,49,59,10,99,118,116,46,102,54,52,46,102,
    51,50,32,37,102,100,52,51,44,32,37,102,55,49,59,10,115,104,108,46,
    98,54,52,32,37,114,100,49,54,49,44,32,37,114,100,50,49,44,32,51,
    59,10,97,100,100,46,115,54,52,32,37,114,100,49,54,50,44,32,37,114,
    100,49,56,44,32,37,114,100,49,54,49,59,10,115,116,46,102,54,52,32,
    91,37,114,100,49,54,50,93,44,32,37,102,100,52,51,59,10,10,36,76,
    95,95,66,66,48,95,49,48,55,58,10,115,101,116,112,46,103,101,46,117,
    54,52,32,37,112,49,48,50,44,32,37,114,100,50,51,44,32,37,114,100,
    49,52,59,10,64,37,112,49,48,50,32,98,114,97,32,36,76,95,95,66,
    66,48,95,49,48,57,59,10,10,109,111,118,46,98,51,50,32,37,102,55,
    50,44,32,37,114,49,50,50,59,10,109,117,108,46,102,51,50,32,37,102,
    55,51,44,32,37,102,55,50,44,32,37,102,49,59,10,115,101,116,112,46,
    110,101,117,46,102,51,50,32,37,112,49,48,51,44,32,37,102,49,44,32,
    48,102,51,70,56,48,48,48,48,48,59,10,115,101,108,112,46,102,51,50,
    32,37,102,55,52,44,32,37,102,55,51,44,32,37,102,55,50,44,32,37,
    112,49,48,51,59,10,99,118,116,46,102,54,52,46,102,51,50,32,37,102,
    100,52,52,44,32,37,102,55,52,59,10,115,104,108,46,98,54,52,32,37,
    114,100,49,54,51,44,32,37,114,100,50,51,44,32,51,59,10,97,100,100,
    46,115,54,52,32,37,114,100,49,54,52,44,32,37,114,100,49,56,44,32,
    37,114,100,49,54,51,59,10,115,116,46,102,54,52,32,91,37,114,100,49,
    54,52,93,44,32,37,102,100,52,52,59,10,10,36,76,95,95,66,66,48,
    95,49,48,57,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,
    49,48,52,44,32,37,114,100,50,53,44,32,37,114,100,49,52,59,10,64,
    37,112,49,48,52,32,98,114,97,32,36,76,95,95,66,66,48,95,49,49,
    57,59,10,10,109,111,118,46,98,51,50,32,37,102,55,53,44,32,37,114,
    49,50,49,59,10,109,117,108,46,102,51,50,32,37,102,55,54,44,32,37,
    102,55,53,44,32,37,102,49,59,10,115,101,116,112,46,110,101,117,46,102,
    51,50,32,37,112,49,48,53,44,32,37,102,49,44,32,48,102,51,70,56,
    48,48,48,48,48,59,10,115,101,108,112,46,102,51,50,32,37,102,55,55,
    44,32,37,102,55,54,44,32,37,102,55,53,44,32,37,112,49,48,53,59,
    10,99,118,116,46,102,54,52,46,102,51,50,32,37,102,100,52,53,44,32,
    37,102,55,55,59,10,115,104,108,46,98,54,52,32,37,114,100,49,54,53,
    44,32,37,114,100,50,53,44,32,51,59,10,97,100,100,46,115,54,52,32,
    37,114,100,49,54,54,44,32,37,114,100,49,56,44,32,37,114,100,49,54,
    53,59,10,115,116,46,102,54,52,32,91,37,114,100,49,54,54,93,44,32,
    37,102,100,52,53,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,
    66,48,95,49,49,57,59,10,10,36,76,95,95,66,66,48,95,56,54,58,
    10,115,101,116,112,46,110,101,117,46,102,51,50,32,37,112,56,57,44,32,
    37,102,49,44,32,48,102,51,70,56,48,48,48,48,48,59,10,64,37,112,
    56,57,32,98,114,97,32,36,76,95,95,66,66,48,95,57,53,59,10,98,
    114,97,46,117,110,105,32,36,76,95,95,66,66,48,95,56,55,59,10,10,
    36,76,95,95,66,66,48,95,57,53,58,10,115,101,116,112,46,103,101,46,
    117,54,52,32,37,112,57,52,44,32,37,114,100,51,48,51,44,32,37,114,
    100,49,52,59,10,64,37,112,57,52,32,98,114,97,32,36,76,95,95,66,
    66,48,95,57,55,59,10,10,109,111,118,46,98,51,50,32,37,102,53,57,
    44,32,37,114,49,50,52,59,10,109,117,108,46,102,51,50,32,37,102,53,
    56,44,32,37,102,53,57,44,32,37,102,49,59,10,10,123,32,99,118,116,
    46,114,110,46,102,49,54,46,102,51,50,32,37,114,115,54,53,44,32,37,
    102,53,56,59,125,10,10,10,115,116,46,117,49,54,32,91,37,114,100,51,
    53,93,44,32,37,114,115,54,53,59,10,10,36,76,95,95,66,66,48,95,
    57,55,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,57,53,
    44,32,37,114,100,50,49,44,32,37,114,100,49,52,59,10,64,37,112,57,
    53,32,98,114,97,32,36,76,95,95,66,66,48,95,57,57,59,10,10,109,
    111,118,46,98,51,50,32,37,102,54,49,44,32,37,114,49,50,51,59,10,
    109,117,108,46,102,51,50,32,37,102,54,48,44,32,37,102,54,49,44,32,
    37,102,49,59,10,10,123,32,99,118,116,46,114,110,46,102,49,54,46,102,
    51,50,32,37,114,115,54,54,44,32,37,102,54,48,59,125,10,10,10,115,
    116,46,117,49,54,32,91,37,114,100,51,55,93,44,32,37,114,115,54,54,
    59,10,10,36,76,95,95,66,66,48,95,57,57,58,10,115,101,116,112,46,
    103,101,46,117,54,52,32,37,112,57,54,44,32,37,114,100,50,51,44,32,
    37,114,100,49,52,59,10,64,37,112,57,54,32,98,114,97,32,36,76,95,
    95,66,66,48,95,49,48,49,59,10,10,109,111,118,46,98,51,50,32,37,
    102,54,51,44,32,37,114,49,50,50,59,10,109,117,108,46,102,51,50,32,
    37,102,54,50,44,32,37,102,54,51,44,32,37,102,49,59,10,10,123,32,
    99,118,116,46,114,110,46,102,49,54,46,102,51,50,32,37,114,115,54,55,
    44,32,37,102,54,50,59,125,10,10,10,115,116,46,117,49,54,32,91,37,
    114,100,51,57,93,44,32,37,114,115,54,55,59,10,10,36,76,95,95,66,
    66,48,95,49,48,49,58,10,115,101,116,112,46,103,101,46,117,54,52,32,
    37,112,57,55,44,32,37,114,100,50,53,44,32,37,114,100,49,52,59,10,
    64,37,112,57,55,32,98,114,97,32,36,76,95,95,66,66,48,95,49,49,
    57,59,10,10,109,111,118,46,98,51,50,32,37,102,54,53,44,32,37,114,
    49,50,49,59,10,109,117,108,46,102,51,50,32,37,102,54,52,44,32,37,
    102,54,53,44,32,37,102,49,59,10,10,123,32,99,118,116,46,114,110,46,
    102,49,54,46,102,51,50,32,37,114,115,54,56,44,32,37,102,54,52,59,
    125,10,10,10,115,116,46,117,49,54,32,91,37,114,100,52,49,93,44,32,
    37,114,115,54,56,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,
    66,48,95,49,49,57,59,10,10,36,76,95,95,66,66,48,95,49,49,49,
    58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,48,54,44,
    32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,112,49,
    48,54,32,98,114,97,32,36,76,95,95,66,66,48,95,49,49,51,59,10,
    10,109,111,118,46,98,51,50,32,37,102,55,56,44,32,37,114,49,50,52,
    59,10,109,117,108,46,102,51,50,32,37,102,55,57,44,32,37,102,55,56,
    44,32,37,102,49,59,10,115,101,116,112,46,110,101,117,46,102,51,50,32,
    37,112,49,48,55,44,32,37,102,49,44,32,48,102,51,70,56,48,48,48,
    48,48,59,10,115,101,108,112,46,102,51,50,32,37,102,56,48,44,32,37,
    102,55,57,44,32,37,102,55,56,44,32,37,112,49,48,55,59,10,115,104,
    108,46,98,54,52,32,37,114,100,49,54,55,44,32,37,114,100,51,48,51,
    44,32,50,59,10,97,100,100,46,115,54,52,32,37,114,100,49,54,56,44,
    32,37,114,100,49,56,44,32,37,114,100,49,54,55,59,10,115,116,46,102,
    51,50,32,91,37,114,100,49,54,56,93,44,32,37,102,56,48,59,10,10,
    36,76,95,95,66,66,48,95,49,49,51,58,10,115,101,116,112,46,103,101,
    46,117,54,52,32,37,112,49,48,56,44,32,37,114,100,50,49,44,32,37,
    114,100,49,52,59,10,64,37,112,49,48,56,32,98,114,97,32,36,76,95,
    95,66,66,48,95,49,49,53,59,10,10,109,111,118,46,98,51,50,32,37,
    102,56,49,44,32,37,114,49,50,51,59,10,109,117,108,46,102,51,50,32,
    37,102,56,50,44,32,37,102,56,49,44,32,37,102,49,59,10,115,101,116,
    112,46,110,101,117,46,102,51,50,32,37,112,49,48,57,44,32,37,102,49,
    44,32,48,102,51,70,56,48,48,48,48,48,59,10,115,101,108,112,46,102,
    51,50,32,37,102,56,51,44,32,37,102,56,50,44,32,37,102,56,49,44,
    32,37,112,49,48,57,59,10,115,104,108,46,98,54,52,32,37,114,100,49,
    54,57,44,32,37,114,100,50,49,44,32,50,59,10,97,100,100,46,115,54,
    52,32,37,114,100,49,55,48,44,32,37,114,100,49,56,44,32,37,114,100,
    49,54,57,59,10,115,116,46,102,51,50,32,91,37,114,100,49,55,48,93,
    44,32,37,102,56,51,59,10,10,36,76,95,95,66,66,48,95,49,49,53,
    58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,49,49,48,44,
    32,37,114,100,50,51,44,32,37,114,100,49,52,59,10,64,37,112,49,49,
    48,32,98,114,97,32,36,76,95,95,66,66,48,95,49,49,55,59,10,10,
    109,111,118,46,98,51,50,32,37,102,56,52,44,32,37,114,49,50,50,59,
    10,109,117,108,46,102,51,50,32,37,102,56,53,44,32,37,102,56,52,44,
    32,37,102,49,59,10,115,101,116,112,46,110,101,117,46,102,51,50,32,37,
    112,49,49,49,44,32,37,102,49,44,32,48,102,51,70,56,48,48,48,48,
    48,59,10,115,101,108,112,46,102,51,50,32,37,102,56,54,44,32,37,102,
    56,53,44,32,37,102,56,52,44,32,37,112,49,49,49,59,10,115,104,108,
    46,98,54,52,32,37,114,100,49,55,49,44,32,37,114,100,50,51,44,32,
    50,59,10,97,100,100,46,115,54,52,32,37,114,100,49,55,50,44,32,37,
    114,100,49,56,44,32,37,114,100,49,55,49,59,10,115,116,46,102,51,50,
    32,91,37,114,100,49,55,50,93,44,32,37,102,56,54,59,10,10,36,76,
    95,95,66,66,48,95,49,49,55,58,10,115,101,116,112,46,103,101,46,117,
    54,52,32,37,112,49,49,50,44,32,37,114,100,50,53,44,32,37,114,100,
    49,52,59,10,64,37,112,49,49,50,32,98,114,97,32,36,76,95,95,66,
    66,48,95,49,49,57,59,10,10,109,111,118,46,98,51,50,32,37,102,56,
    55,44,32,37,114,49,50,49,59,10,109,117,108,46,102,51,50,32,37,102,
    56,56,44,32,37,102,56,55,44,32,37,102,49,59,10,115,101,116,112,46,
    110,101,117,46,102,51,50,32,37,112,49,49,51,44,32,37,102,49,44,32,
    48,102,51,70,56,48,48,48,48,48,59,10,115,101,108,112,46,102,51,50,
    32,37,102,56,57,44,32,37,102,56,56,44,32,37,102,56,55,44,32,37,
    112,49,49,51,59,10,115,104,108,46,98,54,52,32,37,114,100,49,55,51,
    44,32,37,114,100,50,53,44,32,50,59,10,97,100,100,46,115,54,52,32,
    37,114,100,49,55,52,44,32,37,114,100,49,56,44,32,37,114,100,49,55,
    51,59,10,115,116,46,102,51,50,32,91,37,114,100,49,55,52,93,44,32,
    37,102,56,57,59,10,98,114,97,46,117,110,105,32,36,76,95,95,66,66,
    48,95,49,49,57,59,10,10,36,76,95,95,66,66,48,95,52,54,58,10,
    115,101,116,112,46,103,101,46,117,54,52,32,37,112,51,51,44,32,37,114,
    100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,112,51,51,32,98,
    114,97,32,36,76,95,95,66,66,48,95,53,49,59,10,10,97,110,100,46,
    98,51,50,32,37,114,53,55,44,32,37,114,49,50,52,44,32,50,49,52,
    55,52,56,51,54,52,55,59,10,115,101,116,112,46,103,116,46,117,51,50,
    32,37,112,51,52,44,32,37,114,53,55,44,32,50,49,51,57,48,57,53,
    48,52,48,59,10,115,104,114,46,117,51,50,32,37,114,53,56,44,32,37,
    114,49,50,52,44,32,49,54,59,10,99,118,116,46,117,49,54,46,117,51,
    50,32,37,114,115,52,53,44,32,37,114,53,56,59,10,115,104,108,46,98,
    51,50,32,37,114,53,57,44,32,37,114,49,50,52,44,32,49,54,59,10,
    115,101,108,112,46,98,51,50,32,37,114,51,56,44,32,48,44,32,37,114,
    53,57,44,32,37,112,51,52,59,10,115,101,108,112,46,98,49,54,32,37,
    114,115,56,57,44,32,51,50,55,54,55,44,32,37,114,115,52,53,44,32,
    37,112,51,52,59,10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,
    51,53,44,32,37,114,51,56,44,32,45,50,49,52,55,52,56,51,54,52,
    56,59,10,64,37,112,51,53,32,98,114,97,32,36,76,95,95,66,66,48,
    95,52,57,59,10,10,115,101,116,112,46,110,101,46,115,51,50,32,37,112,
    51,54,44,32,37,114,51,56,44,32,45,50,49,52,55,52,56,51,54,52,
    56,59,10,97,110,100,46,98,49,54,32,37,114,115,52,54,44,32,37,114,
    115,56,57,44,32,49,59,10,115,101,116,112,46,101,113,46,98,49,54,32,
    37,112,51,55,44,32,37,114,115,52,54,44,32,49,59,10,110,111,116,46,
    112,114,101,100,32,37,112,51,56,44,32,37,112,51,55,59,10,111,114,46,
    112,114,101,100,32,37,112,51,57,44,32,37,112,51,54,44,32,37,112,51,
    56,59,10,64,37,112,51,57,32,98,114,97,32,36,76,95,95,66,66,48,
    95,53,48,59,10,10,36,76,95,95,66,66,48,95,52,57,58,10,97,100,
    100,46,115,49,54,32,37,114,115,56,57,44,32,37,114,115,56,57,44,32,
    49,59,10,10,36,76,95,95,66,66,48,95,53,48,58,10,115,116,46,117,
    49,54,32,91,37,114,100,51,53,93,44,32,37,114,115,56,57,59,10,10,
    36,76,95,95,66,66,48,95,53,49,58,10,115,101,116,112,46,103,101,46,
    117,54,52,32,37,112,52,48,44,32,37,114,100,50,49,44,32,37,114,100,
    49,52,59,10,64,37,112,52,48,32,98,114,97,32,36,76,95,95,66,66,
    48,95,53,54,59,10,10,97,110,100,46,98,51,50,32,37,114,54,48,44,
    32,37,114,49,50,51,44,32,50,49,52,55,52,56,51,54,52,55,59,10,
    115,101,116,112,46,103,116,46,117,51,50,32,37,112,52,49,44,32,37,114,
    54,48,44,32,50,49,51,57,48,57,53,48,52,48,59,10,115,104,114,46,
    117,51,50,32,37,114,54,49,44,32,37,114,49,50,51,44,32,49,54,59,
    10,99,118,116,46,117,49,54,46,117,51,50,32,37,114,115,52,55,44,32,
    37,114,54,49,59,10,115,104,108,46,98,51,50,32,37,114,54,50,44,32,
    37,114,49,50,51,44,32,49,54,59,10,115,101,108,112,46,98,51,50,32,
    37,114,51,57,44,32,48,44,32,37,114,54,50,44,32,37,112,52,49,59,
    10,115,101,108,112,46,98,49,54,32,37,114,115,57,48,44,32,51,50,55,
    54,55,44,32,37,114,115,52,55,44,32,37,112,52,49,59,10,115,101,116,
    112,46,103,116,46,117,51,50,32,37,112,52,50,44,32,37,114,51,57,44,
    32,45,50,49,52,55,52,56,51,54,52,56,59,10,64,37,112,52,50,32,
    98,114,97,32,36,76,95,95,66,66,48,95,53,52,59,10,10,115,101,116,
    112,46,110,101,46,115,51,50,32,37,112,52,51,44,32,37,114,51,57,44,
    32,45,50,49,52,55,52,56,51,54,52,56,59,10,97,110,100,46,98,49,
    54,32,37,114,115,52,56,44,32,37,114,115,57,48,44,32,49,59,10,115,
    101,116,112,46,101,113,46,98,49,54,32,37,112,52,52,44,32,37,114,115,
    52,56,44,32,49,59,10,110,111,116,46,112,114,101,100,32,37,112,52,53,
    44,32,37,112,52,52,59,10,111,114,46,112,114,101,100,32,37,112,52,54,
    44,32,37,112,52,51,44,32,37,112,52,53,59,10,64,37,112,52,54,32,
    98,114,97,32,36,76,95,95,66,66,48,95,53,53,59,10,10,36,76,95,
    95,66,66,48,95,53,52,58,10,97,100,100,46,115,49,54,32,37,114,115,
    57,48,44,32,37,114,115,57,48,44,32,49,59,10,10,36,76,95,95,66,
    66,48,95,53,53,58,10,115,116,46,117,49,54,32,91,37,114,100,51,55,
    93,44,32,37,114,115,57,48,59,10,10,36,76,95,95,66,66,48,95,53,
    54,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,52,55,44,
    32,37,114,100,50,51,44,32,37,114,100,49,52,59,10,64,37,112,52,55,
    32,98,114,97,32,36,76,95,95,66,66,48,95,54,49,59,10,10,97,110,
    100,46,98,51,50,32,37,114,54,51,44,32,37,114,49,50,50,44,32,50,
    49,52,55,52,56,51,54,52,55,59,10,115,101,116,112,46,103,116,46,117,
    51,50,32,37,112,52,56,44,32,37,114,54,51,44,32,50,49,51,57,48,
    57,53,48,52,48,59,10,115,104,114,46,117,51,50,32,37,114,54,52,44,
    32,37,114,49,50,50,44,32,49,54,59,10,99,118,116,46,117,49,54,46,
    117,51,50,32,37,114,115,52,57,44,32,37,114,54,52,59,10,115,104,108,
    46,98,51,50,32,37,114,54,53,44,32,37,114,49,50,50,44,32,49,54,
    59,10,115,101,108,112,46,98,51,50,32,37,114,52,48,44,32,48,44,32,
    37,114,54,53,44,32,37,112,52,56,59,10,115,101,108,112,46,98,49,54,
    32,37,114,115,57,49,44,32,51,50,55,54,55,44,32,37,114,115,52,57,
    44,32,37,112,52,56,59,10,115,101,116,112,46,103,116,46,117,51,50,32,
    37,112,52,57,44,32,37,114,52,48,44,32,45,50,49,52,55,52,56,51,
    54,52,56,59,10,64,37,112,52,57,32,98,114,97,32,36,76,95,95,66,
    66,48,95,53,57,59,10,10,115,101,116,112,46,110,101,46,115,51,50,32,
    37,112,53,48,44,32,37,114,52,48,44,32,45,50,49,52,55,52,56,51,
    54,52,56,59,10,97,110,100,46,98,49,54,32,37,114,115,53,48,44,32,
    37,114,115,57,49,44,32,49,59,10,115,101,116,112,46,101,113,46,98,49,
    54,32,37,112,53,49,44,32,37,114,115,53,48,44,32,49,59,10,110,111,
    116,46,112,114,101,100,32,37,112,53,50,44,32,37,112,53,49,59,10,111,
    114,46,112,114,101,100,32,37,112,53,51,44,32,37,112,53,48,44,32,37,
    112,53,50,59,10,64,37,112,53,51,32,98,114,97,32,36,76,95,95,66,
    66,48,95,54,48,59,10,10,36,76,95,95,66,66,48,95,53,57,58,10,
    97,100,100,46,115,49,54,32,37,114,115,57,49,44,32,37,114,115,57,49,
    44,32,49,59,10,10,36,76,95,95,66,66,48,95,54,48,58,10,115,116,
    46,117,49,54,32,91,37,114,100,51,57,93,44,32,37,114,115,57,49,59,
    10,10,36,76,95,95,66,66,48,95,54,49,58,10,115,101,116,112,46,103,
    101,46,117,54,52,32,37,112,53,52,44,32,37,114,100,50,53,44,32,37,
    114,100,49,52,59,10,64,37,112,53,52,32,98,114,97,32,36,76,95,95,
    66,66,48,95,49,49,57,59,10,10,97,110,100,46,98,51,50,32,37,114,
    54,54,44,32,37,114,49,50,49,44,32,50,49,52,55,52,56,51,54,52,
    55,59,10,115,101,116,112,46,103,116,46,117,51,50,32,37,112,53,53,44,
    32,37,114,54,54,44,32,50,49,51,57,48,57,53,48,52,48,59,10,115,
    104,114,46,117,51,50,32,37,114,54,55,44,32,37,114,49,50,49,44,32,
    49,54,59,10,99,118,116,46,117,49,54,46,117,51,50,32,37,114,115,53,
    49,44,32,37,114,54,55,59,10,115,104,108,46,98,51,50,32,37,114,54,
    56,44,32,37,114,49,50,49,44,32,49,54,59,10,115,101,108,112,46,98,
    51,50,32,37,114,52,49,44,32,48,44,32,37,114,54,56,44,32,37,112,
    53,53,59,10,115,101,108,112,46,98,49,54,32,37,114,115,57,50,44,32,
    51,50,55,54,55,44,32,37,114,115,53,49,44,32,37,112,53,53,59,10,
    115,101,116,112,46,103,116,46,117,51,50,32,37,112,53,54,44,32,37,114,
    52,49,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,64,37,112,
    53,54,32,98,114,97,32,36,76,95,95,66,66,48,95,54,52,59,10,10,
    115,101,116,112,46,110,101,46,115,51,50,32,37,112,53,55,44,32,37,114,
    52,49,44,32,45,50,49,52,55,52,56,51,54,52,56,59,10,97,110,100,
    46,98,49,54,32,37,114,115,53,50,44,32,37,114,115,57,50,44,32,49,
    59,10,115,101,116,112,46,101,113,46,98,49,54,32,37,112,53,56,44,32,
    37,114,115,53,50,44,32,49,59,10,110,111,116,46,112,114,101,100,32,37,
    112,53,57,44,32,37,112,53,56,59,10,111,114,46,112,114,101,100,32,37,
    112,54,48,44,32,37,112,53,55,44,32,37,112,53,57,59,10,64,37,112,
    54,48,32,98,114,97,32,36,76,95,95,66,66,48,95,54,53,59,10,10,
    36,76,95,95,66,66,48,95,54,52,58,10,97,100,100,46,115,49,54,32,
    37,114,115,57,50,44,32,37,114,115,57,50,44,32,49,59,10,10,36,76,
    95,95,66,66,48,95,54,53,58,10,115,116,46,117,49,54,32,91,37,114,
    100,52,49,93,44,32,37,114,115,57,50,59,10,98,114,97,46,117,110,105,
    32,36,76,95,95,66,66,48,95,49,49,57,59,10,10,36,76,95,95,66,
    66,48,95,56,55,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,
    112,57,48,44,32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,
    64,37,112,57,48,32,98,114,97,32,36,76,95,95,66,66,48,95,56,57,
    59,10,10,109,111,118,46,98,51,50,32,37,102,53,52,44,32,37,114,49,
    50,52,59,10,10,123,32,99,118,116,46,114,110,46,102,49,54,46,102,51,
    50,32,37,114,115,54,49,44,32,37,102,53,52,59,125,10,10,10,115,116,
    46,117,49,54,32,91,37,114,100,51,53,93,44,32,37,114,115,54,49,59,
    10,10,36,76,95,95,66,66,48,95,56,57,58,10,115,101,116,112,46,103,
    101,46,117,54,52,32,37,112,57,49,44,32,37,114,100,50,49,44,32,37,
    114,100,49,52,59,10,64,37,112,57,49,32,98,114,97,32,36,76,95,95,
    66,66,48,95,57,49,59,10,10,109,111,118,46,98,51,50,32,37,102,53,
    53,44,32,37,114,49,50,51,59,10,10,123,32,99,118,116,46,114,110,46,
    102,49,54,46,102,51,50,32,37,114,115,54,50,44,32,37,102,53,53,59,
    125,10,10,10,115,116,46,117,49,54,32,91,37,114,100,51,55,93,44,32,
    37,114,115,54,50,59,10,10,36,76,95,95,66,66,48,95,57,49,58,10,
    115,101,116,112,46,103,101,46,117,54,52,32,37,112,57,50,44,32,37,114,
    100,50,51,44,32,37,114,100,49,52,59,10,64,37,112,57,50,32,98,114,
    97,32,36,76,95,95,66,66,48,95,57,51,59,10,10,109,111,118,46,98,
    51,50,32,37,102,53,54,44,32,37,114,49,50,50,59,10,10,123,32,99,
    118,116,46,114,110,46,102,49,54,46,102,51,50,32,37,114,115,54,51,44,
    32,37,102,53,54,59,125,10,10,10,115,116,46,117,49,54,32,91,37,114,
    100,51,57,93,44,32,37,114,115,54,51,59,10,10,36,76,95,95,66,66,
    48,95,57,51,58,10,115,101,116,112,46,103,101,46,117,54,52,32,37,112,
    57,51,44,32,37,114,100,50,53,44,32,37,114,100,49,52,59,10,64,37,
    112,57,51,32,98,114,97,32,36,76,95,95,66,66,48,95,49,49,57,59,
    10,10,109,111,118,46,98,51,50,32,37,102,53,55,44,32,37,114,49,50,
    49,59,10,10,123,32,99,118,116,46,114,110,46,102,49,54,46,102,51,50,
    32,37,114,115,54,52,44,32,37,102,53,55,59,125,10,10,10,115,116,46,
    117,49,54,32,91,37,114,100,52,49,93,44,32,37,114,115,54,52,59,10,
    10,36,76,95,95,66,66,48,95,49,49,57,58,10,97,100,100,46,115,54,
    52,32,37,114,100,51,48,51,44,32,37,114,100,51,48,51,44,32,37,114,
    100,57,59,10,115,101,116,112,46,108,116,46,117,54,52,32,37,112,49,49,
    52,44,32,37,114,100,51,48,51,44,32,37,114,100,49,52,59,10,64,37,
    112,49,49,52,32,98,114,97,32,36,76,95,95,66,66,48,95,55,59,10,
    10,36,76,95,95,66,66,48,95,49,51,56,58,10,108,100,46,112,97,114,
    97,109,46,117,54,52,32,37,114,100,50,54,50,44,32,91,100,100,112,95,
    99,111,110,118,101,114,116,95,99,111,112,121,95,112,97,114,97,109,95,50,
    93,59,10,97,100,100,46,115,54,52,32,37,114,100,51,48,50,44,32,37,
    114,100,51,48,50,44,32,37,114,100,52,59,10,115,101,116,112,46,108,116,
    46,117,54,52,32,37,112,49,50,55,44,32,37,114,100,51,48,50,44,32,
    37,114,100,50,54,50,59,10,64,37,112,49,50,55,32,98,114,97,32,36,
    76,95,95,66,66,48,95,51,59,10,10,36,76,95,95,66,66,48,95,50,
    50,54,58,10,114,101,116,59,10,10,125,10,10,0,0,0,0,0,0,0,
};
// clang-format on

// Where the PTX, NUL-terminated text, starts in kernels_fatbin.
inline constexpr std::size_t kernels_fatbin_ptx = 53256;

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_KERNELS_FATBIN_HPP
// ---- end ddp/detail/cuda/kernels_fatbin.hpp ----
// ---- begin ddp/detail/cuda/runtime.hpp ----
// Small owners of CUDA runtime objects (device and pinned buffers, streams,
// events), the one place CUDA return codes become ddp::errors, and host waits
// with a deadline. Host code here never dereferences device memory.
#ifndef DDP_DETAIL_CUDA_RUNTIME_HPP
#define DDP_DETAIL_CUDA_RUNTIME_HPP


#include <cuda.h> // types only (CUresult, CUdevice): driver calls go through cudaGetDriverEntryPoint
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// Turns a CUDA return code into a ddp::error naming the call and what to do.
inline void check(cudaError_t e, const char* call, int rank = -1) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); // clear the sticky non-fatal error so later calls report their own
  throw error(
      error_kind::backend,
      (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + call +
          " failed: " + cudaGetErrorString(e) +
          " (check that a CUDA device is visible and that the device pointers given to ddp (gradients, "
          "device_span tensors) belong to this process's device)",
      rank);
}

/// The calling thread's current device.
inline int current_device(int rank = -1) {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice", rank);
  return d;
}

/// The current device, or -1 where it cannot be read (noexcept: for owners
/// that remember where they were created).
inline int current_device_or_none() noexcept {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

/// Whether `device`'s primary context exists. Switching a thread back to a
/// device without one would create it (cudaSetDevice initialises the context
/// since CUDA 12): hundreds of MiB on a GPU this process never used, for every
/// rank of a node whose own GPU is not device 0 (threads start on device 0).
/// PyTorch's MaybeSetDevice makes the same check. The runtime has no such call:
/// the driver's cuDevicePrimaryCtxGetState is fetched through the runtime
/// (cudaGetDriverEntryPointByVersion, or cudaGetDriverEntryPoint before CUDA
/// 12.5), so nothing links libcuda. When it cannot
/// be asked (an old driver): true, and callers restore as before.
inline bool primary_context_active(int device) noexcept {
  using device_get = CUresult (*)(CUdevice*, int);
  using state_get = CUresult (*)(CUdevice, unsigned int*, int*);
  struct driver {
    device_get get = nullptr;
    state_get state = nullptr;
  };
  static const driver fns = [] {
    driver d;
    auto fetch = [](const char* name) -> void* {
      void* fn = nullptr;
#if CUDART_VERSION >= 12050
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess)
        fn = nullptr;
#else
      // Before 12.5, which added ByVersion and deprecated this form: both
      // functions are the same in every CUDA the runtime can be built for.
      if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) fn = nullptr;
#endif
      cudaGetLastError();
      return fn;
    };
    d.get = reinterpret_cast<device_get>(fetch("cuDeviceGet"));
    d.state = reinterpret_cast<state_get>(fetch("cuDevicePrimaryCtxGetState"));
    return d;
  }();
  if (!fns.get || !fns.state) return true;
  CUdevice handle{};
  unsigned int flags = 0;
  int active = 1;
  if (fns.get(&handle, device) != CUDA_SUCCESS || fns.state(handle, &flags, &active) != CUDA_SUCCESS)
    return true;
  return active != 0;
}

/// Makes `device` the calling thread's current device for its lifetime, then
/// restores the one it found (ddp's objects live on one device; a user thread
/// may have switched to another since), unless that one has no context yet:
/// restoring would create one (primary_context_active).
class device_guard {
public:
  device_guard(int device, int rank = -1) {
    const int was = current_device(rank);
    if (was == device) return;
    check(cudaSetDevice(device), "cudaSetDevice", rank);
    if (primary_context_active(was)) restore_ = was;
  }
  /// For destructors: never throws. Where `device` (-1: unknown) cannot be made
  /// current (no driver left at exit, an invalid id) nothing changes, and the
  /// destroy call that follows reports into the void as before. Only this
  /// guard's own failures are cleared: a recoverable error the user's code has
  /// not read yet (a launch it queued) stays for the user to read.
  device_guard(int device, std::nothrow_t) noexcept {
    const int was = current_device_or_none();
    if (device < 0 || was < 0 || was == device) return;
    if (cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (primary_context_active(was)) restore_ = was;
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    if (restore_ >= 0) cudaSetDevice(restore_);
  }

private:
  int restore_ = -1;
};

// The owners below remember the device current at their creation and make it
// current again to free what they own: an object may be destroyed on a thread
// or after a guard that left another device current (a process driving
// several GPUs), and a stream or event belongs to its device's context.

/// Device memory, allocated once and kept.
class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaMalloc (a device bucket buffer)") {
    if (bytes) check(cudaMalloc(&p_, bytes), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~device_buffer() {
    if (!p_) return;
    device_guard on(device_, std::nothrow);
    cudaFree(p_);
  }
  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

/// Page-locked host memory (cudaHostAlloc): copies to and from the device run
/// several times faster than from pageable memory (docs/performance.md, On a
/// GPU). Allocated once and kept across steps.
class pinned_buffer {
public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaHostAlloc (a pinned staging buffer)") {
    if (bytes) check(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  pinned_buffer(pinned_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~pinned_buffer() {
    if (!p_) return;
    // Portable memory frees from any context, but a thread that never used CUDA
    // would create one on device 0 for the call (PyTorch guards its event
    // destructor for the same stray context).
    device_guard on(device_, std::nothrow);
    cudaFreeHost(p_);
  }
  std::byte* get() const noexcept { return static_cast<std::byte*>(p_); }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

class stream {
public:
  explicit stream(int rank = -1) {
    check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (!s_) return;
    device_guard on(device_, std::nothrow);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const noexcept { return s_; }

private:
  cudaStream_t s_ = nullptr;
  int device_ = -1;
};

class event {
public:
  explicit event(int rank = -1) {
    check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)), device_(o.device_) {}
  event& operator=(event&& o) noexcept {
    std::swap(e_, o.e_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~event() {
    if (!e_) return;
    device_guard on(device_, std::nothrow);
    cudaEventDestroy(e_);
  }
  cudaEvent_t get() const noexcept { return e_; }

private:
  cudaEvent_t e_ = nullptr;
  int device_ = -1;
};

/// Events reused instead of created and destroyed for each use (microseconds
/// of host time each, per collective). An acquired event is its holder's alone
/// until released: no other record can move the point its waiters wait for.
class event_pool {
public:
  explicit event_pool(int rank = -1) : rank_(rank) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  /// A free event, or a new one on the current device (callers make the
  /// pool's device current: its events belong there).
  cudaEvent_t acquire() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        const cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    event fresh(rank_); // outside the lock: creating one takes microseconds
    const cudaEvent_t e = fresh.get();
    std::lock_guard lock(mu_);
    free_.reserve(all_.size() + 1); // so that release() never allocates
    all_.push_back(std::move(fresh));
    return e;
  }

  /// Gives back an event acquire() returned; a record still pending on it is
  /// fine (the next holder records it anew). One never given back (a job
  /// dropped when its group failed) stays owned here.
  void release(cudaEvent_t e) noexcept {
    std::lock_guard lock(mu_);
    free_.push_back(e);
  }

  /// How many events the pool created: as many as were in use at once, not one per use.
  std::size_t created() const {
    std::lock_guard lock(mu_);
    return all_.size();
  }

private:
  int rank_;
  mutable std::mutex mu_;
  std::vector<event> all_;
  std::vector<cudaEvent_t> free_;
};

/// Makes `waiter` wait (on the device) for what is queued on `producer` so far.
inline void order_after(cudaStream_t waiter, cudaStream_t producer, cudaEvent_t scratch, int rank) {
  check(cudaEventRecord(scratch, producer), "cudaEventRecord", rank);
  check(cudaStreamWaitEvent(waiter, scratch, 0), "cudaStreamWaitEvent", rank);
}

/// Waits on the host for everything queued on `s`, polling until `timeout`:
/// a stream that never drains (a kernel stuck, a user stream that waits
/// forever) is a timeout error naming `what`, never a hang.
inline void wait_stream(cudaStream_t s, std::chrono::milliseconds timeout, const std::string& what,
                        int rank) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, ("cudaStreamQuery (" + what + ")").c_str(), rank);
    if (std::chrono::steady_clock::now() > deadline)
      throw error(error_kind::timeout,
                  "rank " + std::to_string(rank) + ": " + what + " did not finish on the GPU within " +
                      std::to_string(timeout.count()) +
                      " ms (a kernel stuck, or a stream it follows blocked: the compute stream given to "
                      "ddp_options, or the legacy default stream)",
                  rank);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// How many CUDA devices this process sees (0 where the driver or a GPU is missing).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_RUNTIME_HPP
// ---- end ddp/detail/cuda/runtime.hpp ----

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// One run of elements to copy; layout matches ddp_copy_entry in cuda/kernels.cu.
struct copy_entry {
  const void* src;
  void* dst;
  unsigned long long count;
};
static_assert(sizeof(copy_entry) == 24);

/// A block's unit of work: up to copy_tile_elements elements of one run, from
/// `offset`; layout matches ddp_copy_tile in cuda/kernels.cu.
struct copy_tile {
  unsigned long long entry;
  unsigned long long offset;
};
static_assert(sizeof(copy_tile) == 16);

/// Elements in a full tile: large enough that a block's lookup of its tile is
/// small beside the copy, small enough that a bucket of a few large tensors
/// still fills every multiprocessor (docs/gpu.md, "The copy kernel").
inline constexpr unsigned long long copy_tile_elements = 16384;

/// A copy table in the kernel's form: the runs, their tiles, and the elements in all.
struct copy_table {
  std::vector<copy_entry> entries;
  std::vector<copy_tile> tiles;
  std::size_t total = 0;
};

/// Cuts each run into tiles (a run of no elements gets none), so that a
/// block's work is at most one tile whatever the runs' sizes.
inline copy_table make_copy_table(std::vector<copy_entry> entries) {
  copy_table t;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    for (unsigned long long at = 0; at < entries[k].count; at += copy_tile_elements)
      t.tiles.push_back({k, at});
    t.total += entries[k].count;
  }
  t.entries = std::move(entries);
  return t;
}

/// A copy table in device memory: its runs, then its tiles, in one allocation.
class device_copy_table {
public:
  device_copy_table() = default;
  /// Uploads `t` on stream `s`, so the kernels queued after it there read it
  /// (a pageable source is staged before cudaMemcpyAsync returns: `t` may go at once).
  device_copy_table(const copy_table& t, cudaStream_t s, int rank)
      : bytes_(tiles_at(t.entries.size()) + t.tiles.size() * sizeof(copy_tile), rank,
               "cudaMalloc (a bucket's copy table)"),
        entries_(t.entries.size()), tiles_(t.tiles.size()) {
    if (bytes_.bytes() == 0) return;
    std::vector<std::byte> image(bytes_.bytes());
    std::memcpy(image.data(), t.entries.data(), t.entries.size() * sizeof(copy_entry));
    std::memcpy(image.data() + tiles_at(entries_), t.tiles.data(), t.tiles.size() * sizeof(copy_tile));
    check(cudaMemcpyAsync(bytes_.get(), image.data(), image.size(), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync (a bucket's copy table)", rank);
  }
  const copy_entry* entries() const { return static_cast<const copy_entry*>(bytes_.get()); }
  const copy_tile* tiles() const {
    return reinterpret_cast<const copy_tile*>(static_cast<const std::byte*>(bytes_.get()) +
                                              tiles_at(entries_));
  }
  std::size_t tile_count() const { return tiles_; }

private:
  static std::size_t tiles_at(std::size_t entries) { return (entries * sizeof(copy_entry) + 15) / 16 * 16; }
  device_buffer bytes_;
  std::size_t entries_ = 0, tiles_ = 0;
};

/// The kernel handle, loaded once per process (cudaLibrary_t is
/// context-independent: valid on every device). Only a success is kept: a
/// failed load (out of memory while the user's model filled the GPU, a driver
/// not yet initialised) throws, and the next use tries again instead of
/// rethrowing the first failure for the life of the process.
inline cudaKernel_t convert_copy_kernel(int rank) {
  static std::atomic<cudaKernel_t> loaded{nullptr};
  static std::mutex loading;
  if (cudaKernel_t k = loaded.load(std::memory_order_acquire)) return k; // every launch: no lock
  std::lock_guard lock(loading);
  if (cudaKernel_t k = loaded.load(std::memory_order_relaxed)) return k;
  // One attempt: load, find the kernel and load it into the current context
  // (cudaFuncGetAttributes): with lazy loading a refused cubin shows only there.
  auto attempt = [](const void* image, cudaKernel_t& k) {
    cudaLibrary_t lib = nullptr;
    cudaError_t e = cudaLibraryLoadData(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&k, lib, "ddp_convert_copy");
    cudaFuncAttributes attributes{};
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(k));
    if (e != cudaSuccess) {
      if (lib) cudaLibraryUnload(lib); // the next try loads it afresh
      cudaGetLastError();
    }
    return e; // on success the library stays loaded for the life of the process
  };
  cudaKernel_t k = nullptr;
  cudaError_t e = attempt(kernels_fatbin, k);
  if (e != cudaSuccess && e != cudaErrorMemoryAllocation) // a driver older than CUDA 13 may refuse
    e = attempt(kernels_fatbin + kernels_fatbin_ptx, k);  // nvcc 13's cubins: JIT the PTX alone
  check(e,
        "loading ddp's embedded kernels (cudaLibraryLoadData, also of their PTX alone: SASS for sm_75, "
        "sm_80 and sm_90, PTX of ISA 8.0 for the rest; needs a GPU of compute capability >= 7.5 and a "
        "driver of CUDA >= 12.0)",
        rank);
  loaded.store(k, std::memory_order_release);
  return k;
}

/// Loads the kernel into the current device's context now, not at its first
/// launch: with lazy loading (CUDA's default since 12.2) that launch would be
/// inside a step, and loading a module may wait for work already queued on
/// the device (CUDA C++ Programming Guide, "Lazy Loading": possible issues),
/// e.g. behind a compute stream the user is still filling.
inline void preload_convert_copy(int rank) {
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(convert_copy_kernel(rank))),
        "cudaFuncGetAttributes(ddp_convert_copy) (loading ddp's kernel)", rank);
}

/// The kernel handles the floating types only (gradients are floating point).
inline int kernel_type(dtype d) {
  switch (d) {
  case dtype::f32: return 0;
  case dtype::f64: return 1;
  case dtype::f16: return 2;
  case dtype::bf16: return 3;
  default:
    throw error(error_kind::config, "device gradients of type " + std::string(to_string(d)) +
                                        " are not supported (floating point only)");
  }
}

/// Queues the copy `t` describes on `s`: element type `from` -> `to`, times `scale`.
inline void launch_convert_copy(const device_copy_table& t, dtype from, dtype to, double scale,
                                cudaStream_t s, int rank) {
  if (t.tile_count() == 0) return;
  cudaKernel_t k = convert_copy_kernel(rank);
  int src_type = kernel_type(from), dst_type = kernel_type(to);
  const copy_entry* entries = t.entries();
  const copy_tile* tiles = t.tiles();
  unsigned long long count = t.tile_count(), tile = copy_tile_elements;
  // A block per tile up to the cap (several waves on any GPU); past it blocks
  // take tiles in turn.
  const auto blocks = static_cast<unsigned>(std::min<unsigned long long>(count, 16384));
  void* args[] = {&entries, &tiles, &count, &tile, &src_type, &dst_type, &scale};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(blocks), dim3(256), args, 0, s),
        "cudaLaunchKernel(ddp_convert_copy)", rank);
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_KERNELS_HPP
// ---- end ddp/detail/cuda/kernels.hpp ----

#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// A device communicator that orders a collective after an event on the
/// device (ddp::nccl): the caller's thread does not wait for its own stream.
template <class C>
concept event_ordered_communicator = device_communicator<C> &&
    requires(C& c, void* p, std::size_t n, dtype dt, op o, cudaEvent_t ready) {
  { c.all_reduce(device_memory, p, n, dt, o, ready, false) } -> std::same_as<work>;
  { c.broadcast(device_memory, p, n, dt, 0, ready, false) } -> std::same_as<work>;
};

/// Runs `f`, this rank's own part before a collective its peers will wait in;
/// if it throws, the group is failed first (`fail_group`: peers fail now and
/// name this rank and `what()`, not at their deadline), then it is rethrown. A
/// failure of the group itself (a refused submission) leaves it as it is:
/// process_group::abort does nothing once the group has failed.
template <class Describe, class F>
decltype(auto) run_before_collective(const std::function<void(const std::string&)>& fail_group,
                                     Describe&& what, F&& f) {
  try {
    return f();
  } catch (const error& e) {
    fail_group(what() + " failed before its collective: " + std::string(e.message()));
    throw;
  } catch (const std::exception& e) {
    fail_group(what() + " failed before its collective: " + e.what());
    throw;
  }
}

template <communicator Comm> class device_bucket_engine {
  static constexpr bool device_comm = device_communicator<Comm>;

public:
  /// No fragments: a bucket is in place (contiguous) or packed on the device.
  static constexpr plan_capabilities capabilities{.fragments = false};
  /// Every bucket launches at once, stream-ordered: nothing waits for synchronize().
  static constexpr bool defers_last_bucket = false;

  /// `compute_stream`: the user's stream that produces the gradients (null:
  /// the legacy default stream). `fail_group(why)`: fails the group at once
  /// (this rank's own work before a collective failed), noexcept.
  device_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params,
                       cudaStream_t compute_stream, std::function<void(const std::string&)> fail_group)
      : device_bucket_engine(comm, plan, params, compute_stream, std::move(fail_group),
                             cuda::device_guard(engine_device(comm), comm.rank())) {}
  device_bucket_engine(const device_bucket_engine&) = delete;
  device_bucket_engine& operator=(const device_bucket_engine&) = delete;
  ~device_bucket_engine() {
    cuda::device_guard on(device_, std::nothrow); // the streams and events below belong to it
    wait_in_flight_quietly();
    unchecked_.log_all(); // the last step's collectives: nobody else would hear of a failure
    try {                 // buffers are freed below: nothing queued may still use them
      cuda::wait_stream(stream_.get(), comm_.timeout(), "the last unpacking (destruction)", rank());
    } catch (...) {}
  }

  /// Buffers and copy tables for the plan's current paths and gradient
  /// addresses; call again when they changed. Synchronous (construction and
  /// moved storage only).
  void layout() {
    cuda::device_guard on(device_, rank());
    // The buffers replaced below are freed with cudaFree and cudaFreeHost,
    // which wait for the whole device: the engine's own stream first, with
    // the deadline, so that they find nothing of ddp's left to wait for.
    cuda::wait_stream(stream_.get(), comm_.timeout(), "the previous step's unpacking (before a re-layout)",
                      rank());
    std::byte* staged = nullptr;
    if constexpr (!device_comm) {
      std::size_t total = 0;
      for (auto& b : plan_.buckets)
        total += staging_slice(b);
      if (staging_.bytes() < total) staging_ = cuda::pinned_buffer(total, rank());
      staged = staging_.get();
    }
    for (std::size_t i = 0; i < state_.size(); ++i) {
      auto& b = plan_.buckets[i];
      auto& s = state_[i];
      const std::size_t wbytes = b.elements * size_of(b.wire_type);
      s = runtime{};
      if constexpr (event_ordered_communicator<Comm>) s.ready.emplace(rank());
      if constexpr (!device_comm) {
        s.pinned = staged;
        staged += staging_slice(b);
      }
      if (b.path != bucket_path::packed) {
        // A host communicator sums (no uses_avg): a mean is scaled here first (scale_in_place).
        if constexpr (!device_comm) {
          void* grads = params_[b.params.front()].grad;
          s.scale_table = upload(cuda::make_copy_table({{grads, grads, b.elements}}));
        }
        continue;
      }
      s.packed = cuda::device_buffer(wbytes, rank());
      std::vector<cuda::copy_entry> pack, unpack;
      auto* base = static_cast<std::byte*>(s.packed.get());
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        auto& p = params_[b.params[k]];
        void* slot = base + b.offsets[k] * size_of(b.wire_type);
        pack.push_back({p.grad, slot, p.count});
        unpack.push_back({slot, p.grad, p.count});
      }
      s.pack_table = upload(cuda::make_copy_table(std::move(pack)));
      s.unpack_table = upload(cuda::make_copy_table(std::move(unpack)));
    }
  }

  /// A gradient with no contribution this step: zeroed on the engine's stream,
  /// after what the compute stream has queued.
  void zero(const tensor_slot& p) {
    cuda::device_guard on(device_, rank());
    before_collective([&] { return "zeroing the unused gradient of '" + p.name + "'"; },
                      [&] {
                        follow_compute_stream();
                        check(cudaMemsetAsync(p.grad, 0, p.count * size_of(p.type), stream_.get()),
                              "cudaMemsetAsync (mark_unused)");
                      });
  }

  /// Starts the all-reduce of bucket i; `scale` is 1/W for a mean, else 1.
  /// The caller never waits here (`caller_waits` is the host engine's): the
  /// collective is queued on streams either way.
  void launch(std::size_t i, double scale, bool /*caller_waits*/ = false) {
    cuda::device_guard on(device_, rank());
    before_collective([&] { return "launching bucket " + std::to_string(i); },
                      [&] { launch_unguarded(i, scale); });
  }

  /// Waits for bucket i's collective, so that unpack(i) follows it; false
  /// when it was not launched. A device communicator's collective is waited
  /// for on the engine's stream (over NCCL the host waits only until it is
  /// queued) and kept until finish_step() checks it; t_done is then when it
  /// was queued, not when it ended (DDP_DEBUG=DETAIL's step timing says so).
  bool wait(std::size_t i) {
    auto& s = state_[i];
    if (!s.in_flight) return false;
    auto w = std::move(*s.in_flight);
    s.in_flight.reset();
    if constexpr (device_comm) {
      cuda::device_guard on(device_, rank());
      unchecked_.stream_wait(w, stream_.get());
    } else {
      w.wait();
    }
    s.t_done = std::chrono::steady_clock::now();
    return true;
  }

  /// Queues the copy of bucket i's result into its gradients (after wait).
  void unpack(std::size_t i) {
    cuda::device_guard on(device_, rank());
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    if constexpr (!device_comm) {
      void* target = b.path == bucket_path::packed ? s.packed.get() : params_[b.params.front()].grad;
      check(cudaMemcpyAsync(target, s.pinned, b.elements * size_of(b.wire_type), cudaMemcpyHostToDevice,
                            stream_.get()),
            "cudaMemcpyAsync (pinned staging -> device)");
    }
    if (b.path == bucket_path::packed)
      cuda::launch_convert_copy(s.unpack_table, b.wire_type, b.param_type, 1.0, stream_.get(), rank());
  }

  /// The end of synchronize(): the compute stream waits for the unpacking
  /// (stream-ordered), or the host waits for it with the communicator's deadline.
  void finish_step(bool blocking) {
    cuda::device_guard on(device_, rank());
    if (blocking || !user_) {
      unchecked_.wait_all(); // first: a stalled collective is reported by its own deadline and name
      cuda::wait_stream(stream_.get(), comm_.timeout(), "unpacking the reduced gradients", rank());
      return;
    }
    cuda::order_after(user_, stream_.get(), ordered_.get(), rank());
    unchecked_.check(); // failures known by now (this step's or the last one's)
  }

  /// Before the first stand-in, outside any step: a zeros buffer for each
  /// in-place bucket, so that join neither allocates inside a step nor
  /// overwrites this rank's own gradients (a packed bucket's buffer serves).
  void prepare_join() {
    if constexpr (device_comm) {
      cuda::device_guard on(device_, rank());
      for (std::size_t i = 0; i < state_.size(); ++i) {
        const auto& b = plan_.buckets[i];
        const std::size_t bytes = b.elements * size_of(b.wire_type);
        if (b.path != bucket_path::packed && state_[i].zeros.bytes() != bytes)
          state_[i].zeros = cuda::device_buffer(bytes, rank(), "cudaMalloc (join's zeros)");
      }
    }
  }

  /// A joined rank's stand-in for bucket i: the same collective on zeros.
  work reduce_zeros(std::size_t i, double scale) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    const std::size_t bytes = b.elements * size_of(b.wire_type);
    if constexpr (device_comm) {
      cuda::device_guard on(device_, rank());
      return before_collective(
          [&] { return "join's stand-in for bucket " + std::to_string(i); },
          [&] {
            // Nothing allocated inside a step (prepare_join did), and this
            // rank's gradients are left as they are.
            void* zeros = b.path == bucket_path::packed ? s.packed.get() : s.zeros.get();
            follow_compute_stream(); // the packed buffer's last readers follow it
            check(cudaMemsetAsync(zeros, 0, bytes, stream_.get()), "cudaMemsetAsync (join's zeros)");
            return hand_over(s, zeros, b.elements, b.wire_type, uses_avg(b, scale) ? op::avg : op::sum,
                             "zeroing join's stand-in bucket " + std::to_string(i));
          });
    } else {
      s.host_zeros.assign(bytes, std::byte{0});
      return comm_.all_reduce(s.host_zeros.data(), b.elements, b.wire_type, op::sum, false);
    }
  }

  /// On a step's error path (that error is being thrown): every collective
  /// waited for, failures dropped.
  void wait_all_quietly() {
    wait_in_flight_quietly();
    try {
      unchecked_.wait_all();
    } catch (...) {}
  }

  double last_duration_ms(std::size_t i) const {
    return std::chrono::duration<double, std::milli>(state_[i].t_done - state_[i].t_launch).count();
  }

private:
  /// Runs while `on` (a temporary of the delegating constructor) holds the
  /// engine's device current: the stream and events are created on it.
  device_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params,
                       cudaStream_t compute_stream, std::function<void(const std::string&)> fail_group,
                       const cuda::device_guard& /*on*/)
      : comm_(comm), plan_(plan), params_(params), user_(compute_stream), fail_group_(std::move(fail_group)),
        device_(cuda::current_device(comm.rank())), stream_(comm.rank()), ordered_(comm.rank()),
        state_(plan.buckets.size()), unchecked_(comm.rank()) {
    cuda::preload_convert_copy(rank());
    layout();
  }

  struct runtime {
    cuda::device_buffer packed;           ///< the wire-typed bucket (packed path)
    cuda::device_copy_table pack_table;   ///< gradients -> packed
    cuda::device_copy_table unpack_table; ///< packed -> gradients
    cuda::device_copy_table scale_table;  ///< the bucket onto itself (in place, host communicators)
    std::byte* pinned = nullptr;          ///< its slice of staging_ (host communicators)
    cuda::device_buffer zeros;            ///< join's stand-in for an in-place bucket (prepare_join)
    std::vector<std::byte> host_zeros;
    std::optional<cuda::event> ready; ///< recorded after packing (event-ordered communicators)
    std::optional<work> in_flight;
    std::chrono::steady_clock::time_point t_launch, t_done;
  };

  int rank() const { return comm_.rank(); }
  void check(cudaError_t e, const char* call) const { cuda::check(e, call, rank()); }

  template <class Describe, class F> decltype(auto) before_collective(Describe&& what, F&& f) {
    return run_before_collective(fail_group_, std::forward<Describe>(what), std::forward<F>(f));
  }

  void launch_unguarded(std::size_t i, double scale) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    s.t_launch = std::chrono::steady_clock::now();
    follow_compute_stream();
    const bool avg = uses_avg(b, scale);
    const double pre = avg ? 1.0 : scale;
    void* data = nullptr;
    if (b.path == bucket_path::packed) {
      cuda::launch_convert_copy(s.pack_table, b.param_type, b.wire_type, pre, stream_.get(), rank());
      data = s.packed.get();
    } else {
      data = params_[b.params.front()].grad;
      if (pre != 1.0) scale_in_place(s, b.param_type, pre);
    }
    s.in_flight = reduce(i, data, avg);
  }

  void wait_in_flight_quietly() {
    for (auto& s : state_)
      wait_quietly(s.in_flight);
  }

  /// ncclAvg where the communicator is on the device and no conversion packs
  /// the bucket; the same answer on every rank (same plan, same scale).
  static bool uses_avg(const planned_bucket& b, double scale) {
    return device_comm && scale != 1.0 && b.wire_type == b.param_type;
  }

  /// Bucket b's part of the pinned staging buffer: its wire bytes, rounded up
  /// so that each slice starts 256-byte aligned, as an allocation of its own did.
  static std::size_t staging_slice(const planned_bucket& b) {
    constexpr std::size_t align = 256;
    return (b.elements * size_of(b.wire_type) + align - 1) / align * align;
  }

  /// The engine's stream continues after what the compute stream queued so far.
  void follow_compute_stream() { cuda::order_after(stream_.get(), user_, ordered_.get(), rank()); }

  /// On the engine's stream, so the kernels queued after it read it: a
  /// pageable cudaMemcpy may return before its DMA reached the device, and it
  /// is on the legacy stream, which the engine's stream does not follow. A
  /// pageable source is staged before cudaMemcpyAsync returns (CUDA runtime
  /// API, "API synchronization behavior"), so `table` may go at once.
  cuda::device_copy_table upload(const cuda::copy_table& table) {
    return cuda::device_copy_table(table, stream_.get(), rank());
  }

  /// The device every call here runs on: the communicator's (NCCL), else the
  /// one current at construction (the gradients'). A step may come from a
  /// thread whose current device differs (threads start on device 0).
  static int engine_device(Comm& comm) {
    if constexpr (device_comm)
      return comm.device();
    else
      return cuda::current_device(comm.rank());
  }

  void scale_in_place(runtime& s, dtype t, double scale) {
    cuda::launch_convert_copy(s.scale_table, t, t, scale, stream_.get(), rank());
  }

  /// Hands bucket i's device data to the communicator: directly (after the
  /// engine's stream drained: the communicator's stream does not see it), or
  /// through the pinned buffer.
  work reduce(std::size_t i, void* data, bool avg) {
    auto& b = plan_.buckets[i];
    const std::string what = "packing bucket " + std::to_string(i);
    if constexpr (device_comm) {
      return hand_over(state_[i], data, b.elements, b.wire_type, avg ? op::avg : op::sum, what);
    } else {
      auto& s = state_[i];
      check(cudaMemcpyAsync(s.pinned, data, b.elements * size_of(b.wire_type), cudaMemcpyDeviceToHost,
                            stream_.get()),
            "cudaMemcpyAsync (device -> pinned staging)");
      cuda::wait_stream(stream_.get(), comm_.timeout(), what + " and copying it to pinned memory", rank());
      return comm_.all_reduce(s.pinned, b.elements, b.wire_type, op::sum, false);
    }
  }

  /// Gives device data queued on the engine's stream to a device communicator:
  /// with an event it waits for on the device, or after the host waited.
  work hand_over(runtime& s, void* data, std::size_t n, dtype t, op o, const std::string& what) {
    if constexpr (event_ordered_communicator<Comm>) {
      (void)what;
      if (!s.ready) s.ready.emplace(rank());
      check(cudaEventRecord(s.ready->get(), stream_.get()), "cudaEventRecord (a bucket's ready event)");
      return comm_.all_reduce(device_memory, data, n, t, o, s.ready->get(), false);
    } else {
      cuda::wait_stream(stream_.get(), comm_.timeout(), what, rank());
      return comm_.all_reduce(device_memory, data, n, t, o, false);
    }
  }

  Comm& comm_;
  const bucket_plan& plan_;
  const std::vector<tensor_slot>& params_;
  cudaStream_t user_;
  std::function<void(const std::string&)> fail_group_;
  int device_; ///< the stream, events and buffers below belong to it
  cuda::stream stream_;
  cuda::event ordered_; ///< recorded for each cross-stream wait (re-recording is allowed)
  std::vector<runtime> state_;
  unchecked_works unchecked_;   ///< collectives waited for on the device, not yet on the host
  cuda::pinned_buffer staging_; ///< host communicators: every bucket's slice, one allocation (layout())
};

/// Broadcasts device tensors from rank 0 over a host-only communicator
/// (ddp::gloo): device -> pinned, broadcast, pinned -> device, on its own
/// stream after the compute stream. One pinned buffer, grown to the largest
/// tensor and kept. Synchronous: construction and sync_buffers() only.
template <communicator Comm> class staged_broadcaster {
public:
  /// `fail_group(why)`: as the engine's; rank 0's copy to pinned memory is
  /// its own part before the broadcast the others wait in.
  staged_broadcaster(Comm& comm, cudaStream_t compute_stream,
                     std::function<void(const std::string&)> fail_group)
      : comm_(comm), user_(compute_stream), fail_group_(std::move(fail_group)),
        device_(cuda::current_device(comm.rank())), stream_(comm.rank()), ordered_(comm.rank()) {}

  void operator()(const tensor_slot& s) {
    const int r = comm_.rank();
    cuda::device_guard on(device_, r); // the stream and event belong to it
    const std::size_t bytes = s.count * size_of(s.type);
    if (bytes == 0) return;
    if (pinned_.bytes() < bytes) pinned_ = cuda::pinned_buffer(bytes, r);
    const std::string what = "staging '" + s.name + "' for the broadcast from rank 0";
    if (r == 0)
      run_before_collective(
          fail_group_, [&] { return what; },
          [&] {
            cuda::order_after(stream_.get(), user_, ordered_.get(), r);
            cuda::check(cudaMemcpyAsync(pinned_.get(), s.value, bytes, cudaMemcpyDeviceToHost, stream_.get()),
                        "cudaMemcpyAsync (device -> pinned, broadcast)", r);
            cuda::wait_stream(stream_.get(), comm_.timeout(), what, r);
          });
    comm_.broadcast(pinned_.get(), s.count, s.type, 0, true).wait();
    if (r != 0) {
      cuda::order_after(stream_.get(), user_, ordered_.get(), r);
      cuda::check(cudaMemcpyAsync(s.value, pinned_.get(), bytes, cudaMemcpyHostToDevice, stream_.get()),
                  "cudaMemcpyAsync (pinned -> device, broadcast)", r);
      cuda::wait_stream(stream_.get(), comm_.timeout(), what, r);
    }
  }

private:
  Comm& comm_;
  cudaStream_t user_;
  std::function<void(const std::string&)> fail_group_;
  int device_; ///< current at construction (DDP's construction: the model's device)
  cuda::stream stream_;
  cuda::event ordered_;
  cuda::pinned_buffer pinned_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_DEVICE_BUCKET_ENGINE_HPP
// ---- end ddp/detail/data_parallel/device_bucket_engine.hpp ----
#define DDP_DETAIL_DEVICE_ENGINE 1
#elif DDP_DETAIL_ABI_CUDA
#error "ddp: DDP_WITH_CUDA (DDP_WITH_NCCL) undefined after the first ddp header saw it"
#endif

#include <concepts>
#include <functional>
#include <string>
#include <variant>

struct CUstream_st;

DDP_BEGIN_NAMESPACE
namespace detail {

/// Whether ddp was compiled with its CUDA engine.
inline constexpr bool cuda_engine_available =
#ifdef DDP_DETAIL_DEVICE_ENGINE
    true;
#else
    false;
#endif

/// What distributed_data_parallel asks of a bucket engine. `defers_last_bucket`:
/// whether the step's last bucket waits for synchronize() to launch it (host
/// gradients, so the caller may run it itself); `launch(i, scale, caller_waits)`:
/// caller_waits marks that bucket.
template <class E>
concept bucket_engine_for = requires(E& e, const E& ce, std::size_t i, double scale, bool flag,
                                     const tensor_slot& p) {
  { E::capabilities } -> std::convertible_to<plan_capabilities>;
  { E::defers_last_bucket } -> std::convertible_to<bool>;
  e.layout();
  e.zero(p);
  e.launch(i, scale, flag);
  { e.wait(i) } -> std::same_as<bool>;
  e.unpack(i);
  e.finish_step(flag);
  e.prepare_join();
  { e.reduce_zeros(i, scale) } -> std::same_as<work>;
  e.wait_all_quietly();
  { ce.last_duration_ms(i) } -> std::convertible_to<double>;
};

/// The engines of this build; a DDP holds the one for its gradients' memory.
template <communicator Comm>
using bucket_engine = std::variant<host_bucket_engine<Comm>
#ifdef DDP_DETAIL_DEVICE_ENGINE
                                   ,
                                   device_bucket_engine<Comm>
#endif
                                   >;

/// What the bucket plan may use with the engine for `on_device` gradients.
template <communicator Comm> plan_capabilities bucket_engine_capabilities([[maybe_unused]] bool on_device) {
  static_assert(bucket_engine_for<host_bucket_engine<Comm>>);
#ifdef DDP_DETAIL_DEVICE_ENGINE
  static_assert(bucket_engine_for<device_bucket_engine<Comm>>);
  if (on_device) return device_bucket_engine<Comm>::capabilities;
#endif
  return host_bucket_engine<Comm>::capabilities;
}

/// The engine for `on_device` gradients (the caller checked that it is
/// compiled in). `fail_group(why)`: the device engine's own work before a
/// collective failed (process_group::abort); noexcept. Engines neither copy
/// nor move: the variant is made in place, where the caller's member is.
template <communicator Comm>
bucket_engine<Comm>
make_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params,
                   [[maybe_unused]] bool on_device, [[maybe_unused]] CUstream_st* compute_stream,
                   [[maybe_unused]] std::function<void(const std::string&)> fail_group) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
  if (on_device)
    return bucket_engine<Comm>(std::in_place_type<device_bucket_engine<Comm>>, comm, plan, params,
                               compute_stream, std::move(fail_group));
#endif
  return bucket_engine<Comm>(std::in_place_type<host_bucket_engine<Comm>>, comm, plan, params);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_ENGINE_HPP
// ---- end ddp/detail/data_parallel/bucket_engine.hpp ----
// ---- begin ddp/detail/data_parallel/debug.hpp ----
// DDP_DEBUG diagnostics for distributed_data_parallel, kept apart from it:
// INFO logs the bucket layout once, DETAIL adds per-step bucket timings and a
// cross-rank check before every bucket that all ranks launch the same one.
#ifndef DDP_DETAIL_DATA_PARALLEL_DEBUG_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEBUG_HPP


#include <cstdint>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void log_bucket_layout(const bucket_plan& plan, const std::vector<tensor_slot>& params);

template <class Engine> void log_step_timing(const Engine& engine, std::size_t buckets) {
  // Host time: until the host saw the collective done, or, for device
  // gradients over NCCL (stream-ordered), until it was queued there.
  std::string s = "step timing (ms from launch to done, or to queued on the device):";
  for (std::size_t i = 0; i < buckets; ++i)
    s += " b" + std::to_string(i) + "=" + std::to_string(engine.last_duration_ms(i));
  log_line("rank 0", s);
}

/// Every rank must be launching the same bucket; say who is not.
template <communicator Comm>
void check_same_bucket_everywhere(Comm& comm, std::size_t index, const planned_bucket& b) {
  const auto w = static_cast<std::size_t>(comm.size());
  std::int64_t mine[3] = {static_cast<std::int64_t>(index), static_cast<std::int64_t>(b.elements),
                          static_cast<std::int64_t>(b.wire_type)};
  std::vector<std::int64_t> all(3 * w);
  comm.all_gather(mine, all.data(), 3, dtype::i64, true).wait();
  for (std::size_t r = 1; r < w; ++r)
    if (all[3 * r] != all[0] || all[3 * r + 1] != all[1] || all[3 * r + 2] != all[2])
      throw error(error_kind::mismatch,
                  "collective mismatch: rank 0 launches bucket " + std::to_string(all[0]) + " (" +
                      std::to_string(all[1]) + " elements) but rank " + std::to_string(r) +
                      " launches bucket " + std::to_string(all[3 * r]) + " (" +
                      std::to_string(all[3 * r + 1]) +
                      " elements): the ranks disagree on this step's gradients",
                  static_cast<int>(r));
}

} // namespace detail
DDP_END_NAMESPACE


#endif // DDP_DETAIL_DATA_PARALLEL_DEBUG_HPP
// ---- end ddp/detail/data_parallel/debug.hpp ----
// ---- begin ddp/detail/data_parallel/device_broadcasts.hpp ----
// How DDP's broadcasts from rank 0 (construction, sync_buffers()) carry
// device tensors. Over a host-only communicator (ddp::gloo) they go through
// pinned memory (staged_broadcaster), never as device pointers. Over a device
// communicator (ddp::nccl) they go directly, after what the compute stream
// queued: stream-ordered where the communicator takes an event (NCCL's stream
// waits for the compute stream on the device, then the compute stream for the
// broadcasts: synchronize() does not block the host for buffers), otherwise
// the host waits for the compute stream first and for the broadcasts after.
// Without ddp's CUDA engine a device tensor here is a clear error.
#ifndef DDP_DETAIL_DATA_PARALLEL_DEVICE_BROADCASTS_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEVICE_BROADCASTS_HPP


#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct CUstream_st;

DDP_BEGIN_NAMESPACE
namespace detail {

/// One round of broadcasts (parameter_registry::broadcast_from_rank0):
/// begin(), broadcast(slot) for each device tensor, complete(works) for all.
template <communicator Comm> class device_broadcasts {
public:
  /// `fail_group(why)`: rank 0's staging copy before a broadcast over a
  /// host-only communicator failed (process_group::abort); noexcept.
  device_broadcasts(Comm& comm, CUstream_st* compute_stream,
                    std::function<void(const std::string&)> fail_group)
      : comm_(comm), stream_(compute_stream), fail_group_(std::move(fail_group)), unchecked_(comm.rank()) {}

  /// Before a round with device tensors. `stream_ordered`: the caller lets
  /// the compute stream, not the host, wait for the result (synchronize()
  /// with a compute stream); honoured where the communicator takes an event.
  void begin([[maybe_unused]] bool stream_ordered) {
    ordered_ = false;
    unchecked_.check(); // the last stream-ordered round's failures, if known by now
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if constexpr (event_ordered_communicator<Comm>) {
      if (stream_ordered && stream_) {
        if (!ready_) { // on the communicator's device, which the compute stream is on
          cuda::device_guard on(comm_.device(), comm_.rank());
          ready_.emplace(comm_.rank());
        }
        cuda::check(cudaEventRecord(ready_->get(), stream_),
                    "cudaEventRecord (the compute stream, before broadcasting device tensors)", comm_.rank());
        ordered_ = true;
        return;
      }
    }
    if constexpr (device_communicator<Comm>) // its stream does not follow the compute stream
      cuda::wait_stream(stream_, comm_.timeout(), "the compute stream (before broadcasting device tensors)",
                        comm_.rank());
#endif
  }

  /// Broadcasts device tensor `s` from rank 0: queued on a device
  /// communicator, done before it returns over a host-only one (empty work).
  work broadcast(const tensor_slot& s) {
#ifdef DDP_DETAIL_DEVICE_ENGINE
    if constexpr (event_ordered_communicator<Comm>) {
      if (ordered_) return comm_.broadcast(device_memory, s.value, s.count, s.type, 0, ready_->get(), false);
    }
    if constexpr (device_communicator<Comm>) {
      return comm_.broadcast(device_memory, s.value, s.count, s.type, 0, false);
    } else {
      if (!staged_) staged_ = std::make_unique<staged_broadcaster<Comm>>(comm_, stream_, fail_group_);
      (*staged_)(s);
      return work{};
    }
#else
    throw error(error_kind::config, "rank " + std::to_string(comm_.rank()) + ": '" + s.name +
                                        "' lives in device memory but ddp was compiled without CUDA: link "
                                        "ddp::cuda or ddp::nccl (they define DDP_WITH_CUDA)");
#endif
  }

  /// Ends the round: the compute stream (stream-ordered; the host waits only
  /// until each broadcast is queued, and re-recording the ready event is safe
  /// after that; the works are checked at the next round) or the host waits
  /// for every broadcast, host tensors' too.
  void complete(std::vector<work>& ws) {
    const bool ordered = std::exchange(ordered_, false);
    for (auto& w : ws) {
      if (!ordered) {
        w.wait();
        continue;
      }
      unchecked_.stream_wait(w, stream_);
    }
  }

private:
  Comm& comm_;
  CUstream_st* stream_;
  std::function<void(const std::string&)> fail_group_;
  bool ordered_ = false; ///< this round waits on the compute stream, not the host
  unchecked_works unchecked_;
#ifdef DDP_DETAIL_DEVICE_ENGINE
  std::optional<cuda::event> ready_; ///< the compute stream's point the broadcasts follow
  std::unique_ptr<staged_broadcaster<Comm>> staged_;
#endif
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_DEVICE_BROADCASTS_HPP
// ---- end ddp/detail/data_parallel/device_broadcasts.hpp ----
// ---- begin ddp/detail/data_parallel/parameter_registry.hpp ----
// The model as distributed_data_parallel sees it: its parameters and buffers
// walked into type-erased slots, found by name or by gradient address, checked
// against the other ranks, and followed when their storage moves.
#ifndef DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP
#define DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP


#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Model> class parameter_registry {
public:
  explicit parameter_registry(Model& m)
      : model_(m), params_(collect_parameters(m)), buffers_(collect_buffers(m)) {
    check_unique_names(params_, "parameters");
    check_unique_names(buffers_, "buffers");
    index_gradients();
  }

  const std::vector<tensor_slot>& parameters() const noexcept { return params_; }
  const std::vector<tensor_slot>& buffers() const noexcept { return buffers_; }
  std::size_t size() const noexcept { return params_.size(); }
  const tensor_slot& operator[](std::size_t i) const { return params_[i]; }

  /// The index of the parameter called `name`.
  std::size_t index(std::string_view name) const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return i;
    throw error(error_kind::config, "no parameter named '" + std::string(name) + "'");
  }

  /// The index of the parameter whose gradient starts at `grad`, as of the last walk.
  std::optional<std::size_t> find_gradient(const void* grad) const {
    auto it = by_grad_.find(grad);
    if (it == by_grad_.end()) return std::nullopt;
    return it->second;
  }

  /// Walks the model again when storage moved since the last walk (a resized
  /// Eigen matrix), refusing changed names, sizes or counts. Cheap when nothing
  /// moved (no allocation): it runs at the start of every step. True if it moved.
  bool refresh(int rank) {
    if (same_storage(model_, params_, buffers_)) return false;
    auto params = collect_parameters(model_);
    auto buffers = collect_buffers(model_);
    check_unchanged(params, params_, "parameter", rank);
    check_unchanged(buffers, buffers_, "buffer", rank);
    params_ = std::move(params);
    buffers_ = std::move(buffers);
    index_gradients();
    return true;
  }

  /// Every rank must hold the same parameters and buffers (names, order,
  /// dtypes, sizes): the first difference from rank 0 is an error naming the
  /// rank and the parameter, on every rank.
  template <communicator C> void verify_across_ranks(C& comm) const {
    const std::string desc = describe(params_, buffers_);
    const auto w = static_cast<std::size_t>(comm.size());
    std::int64_t len = static_cast<std::int64_t>(desc.size());
    std::vector<std::int64_t> lens(w);
    comm.all_gather(&len, lens.data(), 1, dtype::i64, true).wait();
    std::size_t longest = 0;
    for (auto l : lens)
      longest = std::max(longest, static_cast<std::size_t>(l));
    std::vector<std::uint8_t> mine(longest, 0), all(longest * w);
    std::memcpy(mine.data(), desc.data(), desc.size());
    comm.all_gather(mine.data(), all.data(), longest, dtype::u8, true).wait();
    auto of = [&](std::size_t r) {
      return std::string(reinterpret_cast<const char*>(all.data() + r * longest),
                         static_cast<std::size_t>(lens[r]));
    };
    const std::string d0 = of(0);
    for (std::size_t r = 1; r < w; ++r) {
      auto diff = first_difference(d0, of(r), static_cast<int>(r));
      if (!diff.empty())
        throw error(error_kind::mismatch,
                    "the model differs between ranks: " + diff +
                        ". Every rank must build the same model (same parameters, in the "
                        "same order, with the same dtypes and sizes).",
                    static_cast<int>(r));
    }
  }

  /// Copies rank 0's parameters and buffers (or only its buffers) to every rank.
  /// Device tensors go through `device` (device_broadcasts: never a device
  /// pointer handed to host code), which also ends the round.
  template <communicator C, class Device>
  void broadcast_from_rank0(C& comm, bool buffers_only, Device& device) const {
    std::vector<work> ws;
    for (auto* list : {&params_, &buffers_}) {
      if (buffers_only && list == &params_) continue;
      for (auto& s : *list)
        ws.push_back(s.on_device ? device.broadcast(s) : comm.broadcast(s.value, s.count, s.type, 0, false));
    }
    device.complete(ws);
  }

  /// Whether the gradients are in device memory; all of them or none.
  bool gradients_on_device(int rank) const {
    for (auto& p : params_)
      if (p.on_device != params_.front().on_device)
        throw error(error_kind::config,
                    "rank " + std::to_string(rank) + ": parameter '" + p.name + "' lives in " +
                        (p.on_device ? "device" : "host") + " memory but parameter '" + params_.front().name +
                        "' does not: distributed_data_parallel needs every gradient in one memory space",
                    rank);
    return !params_.empty() && params_.front().on_device;
  }

  /// Whether any parameter or buffer lives in device memory.
  bool any_on_device() const {
    for (auto* list : {&params_, &buffers_})
      for (auto& s : *list)
        if (s.on_device) return true;
    return false;
  }

private:
  void index_gradients() {
    by_grad_.clear();
    for (std::size_t i = 0; i < params_.size(); ++i)
      by_grad_[params_[i].grad] = i;
  }

  /// Storage may move between steps; names, sizes and count may not.
  static void check_unchanged(const std::vector<tensor_slot>& now, const std::vector<tensor_slot>& before,
                              const char* what, int rank) {
    for (std::size_t i = 0; i < before.size(); ++i)
      if (i >= now.size() || now[i].count != before[i].count || now[i].name != before[i].name)
        throw error(error_kind::config,
                    "rank " + std::to_string(rank) + ": " + what + " '" + before[i].name +
                        "' changed its name or size after distributed_data_parallel was built");
    if (now.size() != before.size())
      throw error(error_kind::config, std::string("the model's ") + what +
                                          " count changed after distributed_data_parallel was built");
  }

  Model& model_;
  std::vector<tensor_slot> params_, buffers_;
  std::unordered_map<const void*, std::size_t> by_grad_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP
// ---- end ddp/detail/data_parallel/parameter_registry.hpp ----
// ---- begin ddp/detail/data_parallel/policy_diagnostics.hpp ----
// The one readable message per misuse that distributed_data_parallel and
// sharded_data_parallel give for a wrong model type or policy: their primary
// templates derive from this, so its static_asserts fire once, in order.
#ifndef DDP_DETAIL_DATA_PARALLEL_POLICY_DIAGNOSTICS_HPP
#define DDP_DETAIL_DATA_PARALLEL_POLICY_DIAGNOSTICS_HPP

// ---- begin ddp/reduction.hpp ----
// Reduction policies (PyTorch's communication hooks): how a bucket is averaged
// and in which dtype it travels.
//
// Error of the compressed ones, per element, for gradients g_r on W ranks:
// each g_r / W is rounded once to the wire type (error <= eps * max|g| / W
// each) and the ring rounds each of the W - 1 partial sums (<= max|g| in
// magnitude, error <= eps * max|g| each), so |result - mean| <= W * eps *
// max_r |g_r|, with eps = 2^-11 (fp16) or 2^-8 (bf16): about 3 (fp16) or 2
// (bf16) significant decimal digits. At W <= 4 the error stays under
// 2 * eps * max_r |g_r|, which tests/dist/test_data_parallel.cpp checks.
// fp16 overflows above 65504: use bf16 for gradients that large.
#ifndef DDP_REDUCTION_HPP
#define DDP_REDUCTION_HPP


#include <concepts>

DDP_BEGIN_NAMESPACE

template <class R>
concept reduction_policy = requires(dtype d) {
  { R::average } -> std::convertible_to<bool>;
  { R::wire(d) } -> std::same_as<dtype>;
};

namespace reduction {

/// The average over ranks. The division is fused into a pass that touches the
/// data anyway: the last reduction step of ddp's ring (Gloo, unpacked buckets)
/// or the packing copy; only a contiguous bucket on a backend without the ring
/// (NCCL) is scaled in place before sending.
struct mean {
  static constexpr bool average = true;
  static constexpr dtype wire(dtype d) { return d; }
};

/// The plain sum over ranks.
struct sum {
  static constexpr bool average = false;
  static constexpr dtype wire(dtype d) { return d; }
};

/// Mean, sent as IEEE fp16: half the bytes of float32.
struct fp16_compressed_mean {
  static constexpr bool average = true;
  static constexpr dtype wire(dtype d) { return d == dtype::bf16 ? d : dtype::f16; }
};

/// Mean, sent as bfloat16: float32's range, fewer digits.
struct bf16_compressed_mean {
  static constexpr bool average = true;
  static constexpr dtype wire(dtype d) { return d == dtype::f16 ? d : dtype::bf16; }
};

} // namespace reduction
DDP_END_NAMESPACE

#endif // DDP_REDUCTION_HPP
// ---- end ddp/reduction.hpp ----

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Model, class Backend, class Bucketing, class Reduction> struct policy_diagnostics {
  static_assert(
      model<Model>,
      "ddp: the model type must provide `template <class F> void for_each_parameter(F&& f)` calling "
      "f(name, value, grad) for each parameter in registration order, or specialize "
      "ddp::model_traits<Model> with a static for_each_parameter(Model&, F&&).");
  static_assert(!model<Model> || backend_policy<Backend>,
                "ddp: Backend must be a backend policy such as ddp::gloo or ddp::nccl.");
  static_assert(!model<Model> || !backend_policy<Backend> || bucketing_policy<Bucketing>,
                "ddp: Bucketing must be a bucketing policy: a type with `static "
                "std::vector<std::vector<std::size_t>> assign(std::span<const ddp::parameter_desc>)` "
                "(see ddp::bucketing::size_capped, per_tensor, single_buffer).");
  static_assert(!model<Model> || !backend_policy<Backend> || !bucketing_policy<Bucketing> ||
                    reduction_policy<Reduction>,
                "ddp: Reduction must be a reduction policy: a type with `static constexpr bool average` and "
                "`static constexpr ddp::dtype wire(ddp::dtype)` (see ddp::reduction::mean, sum, "
                "fp16_compressed_mean, bf16_compressed_mean).");
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_POLICY_DIAGNOSTICS_HPP
// ---- end ddp/detail/data_parallel/policy_diagnostics.hpp ----
// ---- begin ddp/detail/data_parallel/step_driver.hpp ----
// One step of a data-parallel class (distributed_data_parallel,
// sharded_data_parallel), from its first mark to the end of synchronize():
// marks by index or by gradient, no_sync(), strict_marking, the uneven-inputs
// flag and join()'s checks. Both classes hold one, so that a step begins and
// ends in one place and a check on it holds for both. What differs between
// them, their collectives, stays in the owner, behind three private hooks
// this class reaches as the owner's friend:
//   void storage_moved()                 the registry walked moved gradient storage again
//   void zero_gradient(std::size_t i)    gradient i is being marked unused: make it contribute zeros
//   void gradient_marked(std::size_t i, mark_state how)   recorded: launch the buckets now complete
// A member, not a base: its step state sizes itself from the bucket plan, which
// the owner builds after its registry.
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP

// ---- begin ddp/detail/data_parallel/join.hpp ----
// Uneven inputs (PyTorch's Join, with divide_by_initial_world_size): every
// step, training ranks all-reduce a "still training" flag; a rank that ran out
// of data answers those rounds with zeros until the flag reads zero.
#ifndef DDP_DETAIL_DATA_PARALLEL_JOIN_HPP
#define DDP_DETAIL_DATA_PARALLEL_JOIN_HPP


#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

template <communicator Comm> class join_tracker {
public:
  explicit join_tracker(Comm& comm) : comm_(comm) {}
  join_tracker(const join_tracker&) = delete;
  join_tracker& operator=(const join_tracker&) = delete;
  ~join_tracker() { end_step(); }

  /// A training rank's step begins: joined ranks are waiting on this flag.
  void begin_step() {
    flag_ = 1;
    pending_ = comm_.all_reduce(&flag_, 1, dtype::i32, op::sum, false);
  }

  /// Waits for the flag's all-reduce (its failure is the step's, reported there).
  void end_step() {
    try {
      pending_.wait();
    } catch (...) {}
    pending_ = work{};
  }

  /// A joined rank: while some rank still trains, calls shadow_step() — which
  /// must issue exactly the collectives of one training step, on zeros.
  template <class F> void shadow_until_all_joined(F&& shadow_step) {
    for (;;) {
      std::int32_t active = 0;
      comm_.all_reduce(&active, 1, dtype::i32, op::sum, true).wait();
      if (active == 0) return;
      shadow_step();
    }
  }

private:
  Comm& comm_;
  std::int32_t flag_ = 1;
  // A default work is done: waiting on it returns at once. (Not std::optional:
  // GCC 12 then warns maybe-uninitialized in ~optional, a false positive, when
  // the collectives' inlining shifts.)
  work pending_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_JOIN_HPP
// ---- end ddp/detail/data_parallel/join.hpp ----
// ---- begin ddp/detail/data_parallel/step_state.hpp ----
// One step of distributed_data_parallel as a state machine: which gradients
// are marked (ready, or unused on this rank), how many each bucket still
// waits for, and which bucket launches next — strictly in bucket order, so
// every rank issues the same collectives in the same order.
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_STATE_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_STATE_HPP


#include <algorithm>
#include <cstdint>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class mark_state : std::uint8_t { pending, ready, unused };

class step_state {
public:
  explicit step_state(const bucket_plan& plan) : plan_(plan) {
    marks_.assign(plan.bucket_of.size(), mark_state::pending);
    pending_.resize(plan.buckets.size());
    reset();
  }

  bool started() const noexcept { return started_; }
  /// Whether a bucket of this step has been launched (its collective is in flight).
  bool launched_any() const noexcept { return next_launch_ > 0; }
  /// How many of this step's buckets have been launched.
  std::size_t launched() const noexcept { return next_launch_; }
  void start() noexcept { started_ = true; }
  bool is_pending(std::size_t param) const { return marks_[param] == mark_state::pending; }

  /// Records the mark (the caller checked it was pending).
  void mark(std::size_t param, mark_state how) {
    marks_[param] = how;
    --pending_[plan_.bucket_of[param]];
  }

  /// Calls launch(bucket) for every bucket below `limit` that is complete, in
  /// bucket order, stopping at the first that is not.
  template <class F> void launch_ready(F&& launch, std::size_t limit) {
    limit = std::min(limit, pending_.size());
    while (next_launch_ < limit && pending_[next_launch_] == 0)
      launch(next_launch_++);
  }

  void reset() {
    std::fill(marks_.begin(), marks_.end(), mark_state::pending);
    for (std::size_t i = 0; i < pending_.size(); ++i)
      pending_[i] = plan_.buckets[i].params.size();
    next_launch_ = 0;
    started_ = false;
  }

private:
  const bucket_plan& plan_;
  std::vector<mark_state> marks_;
  std::vector<std::size_t> pending_; ///< per bucket: gradients not yet marked
  std::size_t next_launch_ = 0;
  bool started_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_STATE_HPP
// ---- end ddp/detail/data_parallel/step_state.hpp ----

#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Owner, communicator Comm, class Model> class step_driver {
public:
  using registry_type = parameter_registry<typename attached_model<Model>::walked_type>;

  step_driver(Owner& owner, Comm& comm, const ddp_options& opts, attached_model<Model>& attached,
              registry_type& registry, const bucket_plan& plan)
      : owner_(owner), comm_(comm), opts_(opts), attached_(attached), registry_(registry), step_(plan),
        join_(comm) {}
  step_driver(const step_driver&) = delete;
  step_driver& operator=(const step_driver&) = delete;

  bool started() const noexcept { return step_.started(); }
  /// How many of this step's buckets have been launched (0 outside a step).
  std::size_t launched() const noexcept { return step_.launched(); }
  /// Whether gradient `index` was marked (ready or unused) in the step under way.
  bool marked(std::size_t index) const {
    return step_.started() && index < registry_.size() && !step_.is_pending(index);
  }
  /// Inside no_sync(): marks are ignored and synchronize() communicates nothing.
  bool accumulating() const noexcept { return no_sync_depth_ > 0; }

  /// The counter a new no_sync_guard increments (and its end decrements);
  /// refused in the middle of a step.
  int& no_sync_depth() {
    if (step_.started())
      throw error(error_kind::config, "no_sync() entered in the middle of a step (gradients already marked): "
                                      "enter it before backward");
    return no_sync_depth_;
  }

  /// Gradient `index` is final for this step (ready, or unused on this rank).
  /// Ignored inside no_sync(); the first mark begins the step.
  void mark(std::size_t index, mark_state how) {
    if (index >= registry_.size())
      throw error(error_kind::config, "rank " + std::to_string(rank()) + ": parameter index " +
                                          std::to_string(index) + " is out of range (" +
                                          std::to_string(registry_.size()) + " parameters)");
    if (accumulating()) return;
    begin_step();
    if (!step_.is_pending(index))
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) + ": gradient of parameter '" + registry_[index].name +
                      "' was marked twice in one step",
                  rank());
    if (how == mark_state::unused) owner_.zero_gradient(index);
    step_.mark(index, how);
    owner_.gradient_marked(index, how);
  }

  /// The index of the parameter whose gradient is `grad`.
  template <tensor G> std::size_t index_of(const G& grad) {
    const void* p = as_span(const_cast<G&>(grad)).data();
    auto i = registry_.find_gradient(p);
    // The storage may have moved since the last walk; once a bucket of this step is in flight
    // it must not be re-laid out (its collective still uses the old buffers).
    if (!i && !step_.launched_any()) {
      refresh();
      i = registry_.find_gradient(p);
    }
    if (!i)
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) +
                      ": mark_grad_ready/mark_unused got a tensor that is not the gradient "
                      "of any parameter (pass the gradient tensor itself, or an index)" +
                      (step_.launched_any()
                           ? "; if its storage moved, move it before backward: buckets of this "
                             "step already launched with the old addresses"
                           : ""),
                  rank());
    return *i;
  }

  /// Calls launch(b) for every complete bucket below `limit`, in bucket order (step_state).
  template <class F> void launch_ready(F&& launch, std::size_t limit) {
    step_.launch_ready(std::forward<F>(launch), limit);
  }

  /// Follows moved gradient storage: the registry walks the model again and,
  /// if anything moved, the owner lays out what depends on the addresses.
  void refresh() {
    if (registry_.refresh(rank())) owner_.storage_moved();
  }

  /// synchronize(): inside no_sync() it only ends the step (false). Otherwise
  /// it begins the step if no mark did, lets the model's adapter mark what it
  /// knows, counts the gradients still unmarked as ready (an error under
  /// strict_marking), runs `complete` (launch what is left, wait), and ends
  /// the step even when that throws, after `on_failure` (wait out what is in
  /// flight). True when the step communicated.
  template <class Complete, class OnFailure> bool synchronize(Complete&& complete, OnFailure&& on_failure) {
    if (accumulating()) {
      end_step();
      return false;
    }
    begin_step();
    try {
      attached_.before_synchronize(gradient_sink(owner_));
      mark_the_rest_ready();
      complete();
    } catch (...) {
      on_failure();
      end_step();
      throw;
    }
    end_step();
    return true;
  }

  /// join() for uneven inputs: refused without ddp_options::uneven_inputs or
  /// in the middle of a step; then prepare(), and shadow_step() for every
  /// step the ranks still training take (join_tracker).
  template <class Prepare, class Shadow> void join(Prepare&& prepare, Shadow&& shadow_step) {
    if (!opts_.uneven_inputs)
      throw error(error_kind::config, "join() needs ddp_options::uneven_inputs = true on every rank");
    if (step_.started()) throw error(error_kind::config, "join() called in the middle of a step");
    prepare();
    join_.shadow_until_all_joined(std::forward<Shadow>(shadow_step));
  }

private:
  int rank() const { return comm_.rank(); }

  void begin_step() {
    if (step_.started()) return;
    step_.start();
    refresh();
    if (opts_.uneven_inputs) join_.begin_step();
  }

  void end_step() {
    join_.end_step();
    step_.reset();
  }

  void mark_the_rest_ready() {
    for (std::size_t i = 0; i < registry_.size(); ++i) {
      if (!step_.is_pending(i)) continue;
      if (opts_.strict_marking)
        throw error(error_kind::config,
                    "rank " + std::to_string(rank()) + ": gradient of parameter '" + registry_[i].name +
                        "' was not marked ready before synchronize() (strict_marking is on: "
                        "call mark_grad_ready or mark_unused for it)",
                    rank());
      step_.mark(i, mark_state::ready);
    }
  }

  Owner& owner_;
  Comm& comm_;
  const ddp_options& opts_;
  attached_model<Model>& attached_;
  registry_type& registry_;
  step_state step_;
  join_tracker<Comm> join_;
  int no_sync_depth_ = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
// ---- end ddp/detail/data_parallel/step_driver.hpp ----
// ---- begin ddp/detail/data_parallel/timeline.hpp ----
// What distributed_data_parallel tells the timeline (DDP_TRACE, see
// ddp/detail/common/trace.hpp): gradients marked, buckets launched, waited
// for, unpacked and completed, one synchronize() per step. Kept apart from the
// reducer, as c10d keeps its timer and logger apart: the reducer calls one probe
// per point, and each probe is one predictable branch when tracing is off.
#ifndef DDP_DETAIL_DATA_PARALLEL_TIMELINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_TIMELINE_HPP

// ---- begin ddp/detail/common/trace.hpp ----
// The timeline: with DDP_TRACE=DIR, each rank records what its threads do —
// gradients marked ready, buckets launched, waited for and completed, every
// collective of its process groups — and writes DIR/rank_<r>.json in Chrome's
// trace event format (Perfetto, chrome://tracing; scripts/plot-timeline draws
// one step of all ranks) when its last process group goes away.
//
// Off (the default), a probe costs one load of a global flag and a branch that
// is always predicted; define DDP_TRACE_DISABLED to remove even that. On, each
// thread appends 64-byte events to a ring of its own, allocated once, with no
// lock (DDP_TRACE_EVENTS per thread, default 131072 = 8 MiB: about 10 000 steps
// of the example, whose compute thread records 13 events a step); when it is
// full the newest events win and the file says how many were dropped.
// Timestamps are steady_clock (CLOCK_MONOTONIC: one clock for every process of
// a host, so ranks of one host line up), written in µs.
#ifndef DDP_DETAIL_COMMON_TRACE_HPP
#define DDP_DETAIL_COMMON_TRACE_HPP


#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::trace {

/// What an event is; fixes its phase and the names of its arguments.
enum class kind : std::uint8_t {
  mark_grad_ready, ///< instant: parameter, unused (1 when marked unused)
  bucket_launch,   ///< span: the launch call (packing, submission): bucket, bytes
  bucket_begin,    ///< async begin of "bucket in flight": bucket, bytes
  bucket_end,      ///< async end of it
  bucket_complete, ///< instant: bucket, bytes, launch_to_complete_us
  synchronize,     ///< span: the whole synchronize() call: step
  wait,            ///< span: synchronize() blocked on a bucket's collective: bucket, step
  unpack,          ///< span: copying a packed bucket back into the gradients: bucket, bytes
  collective,      ///< span on the thread that ran it: seq, bytes, bucket, queued_us
};

struct kind_info {
  const char* name;
  char phase; ///< Chrome trace phase: X span, i instant, b/e async begin/end
  const char* args[4];
};

inline const kind_info& info(kind k) noexcept {
  static constexpr kind_info table[] = {
      {"mark_grad_ready", 'i', {"parameter", "unused", nullptr, nullptr}},
      {"bucket_launch", 'X', {"bucket", "bytes", nullptr, nullptr}},
      {"bucket in flight", 'b', {"bucket", "bytes", nullptr, nullptr}},
      {"bucket in flight", 'e', {"bucket", nullptr, nullptr, nullptr}},
      {"bucket_complete", 'i', {"bucket", "bytes", "launch_to_complete_us", nullptr}},
      {"synchronize", 'X', {"step", nullptr, nullptr, nullptr}},
      {"wait", 'X', {"bucket", "step", nullptr, nullptr}},
      {"unpack", 'X', {"bucket", "bytes", nullptr, nullptr}},
      {"collective", 'X', {"seq", "bytes", "bucket", "queued_us"}},
  };
  return table[static_cast<std::size_t>(k)];
}

struct event {
  std::int64_t ts_ns;  ///< steady_clock
  std::int64_t dur_ns; ///< spans only
  const char* label;   ///< a string literal that overrides the kind's name (a collective's kind), or null
  kind what;
  std::int64_t arg[4];
};
static_assert(sizeof(event) <= 64);

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One thread's ring. Only its thread writes; the writer publishes the count
/// after the slot, so a reader sees whole events below the count it loads.
struct thread_ring {
  std::unique_ptr<event[]> slots; ///< not zeroed: pages are touched only as events arrive
  std::size_t capacity = 0;
  std::atomic<std::uint64_t> count{0};
  int tid = 0;
  std::string name;
};

/// The flag every probe reads: set while a traced process group exists.
inline std::atomic<bool> active_flag{false};

/// The one branch a probe costs when tracing is off.
inline bool on() noexcept {
#ifdef DDP_TRACE_DISABLED
  return false;
#else
  return active_flag.load(std::memory_order_relaxed);
#endif
}

/// Set by a thread that wants its row named ("comm" for a group's worker).
inline thread_local const char* thread_label = nullptr;
inline thread_local thread_ring* my_ring = nullptr;
/// The DDP bucket whose collective this thread is submitting (-1: none):
/// lets the collective's event name its bucket without a new parameter on
/// every backend's all_reduce.
inline thread_local int submitting_bucket = -1;

class recorder {
public:
  /// Never destroyed: a thread may still record while the process exits.
  static recorder& get() {
    static recorder* r = new recorder;
    return *r;
  }

  /// A process group starts: with DDP_TRACE set, tracing turns on (the first
  /// group names the file with its rank). Returns whether this group traces.
  bool open(int rank) {
    auto dir = getenv_str("DDP_TRACE");
    if (!dir || dir->empty() || *dir == "0") return false;
    std::lock_guard lock(mu_);
    if (sessions_++ == 0 && dir_.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(*dir, ec);
      if (!std::filesystem::is_directory(*dir)) {
        --sessions_;
        throw error(error_kind::config,
                    "rank " + std::to_string(rank) + ": DDP_TRACE=" + *dir +
                        " is not a directory that can be created (" + ec.message() +
                        "); point DDP_TRACE at a writable directory or unset it",
                    rank);
      }
      dir_ = *dir;
      rank_ = rank;
      capacity_ = static_cast<std::size_t>(
          env_int("DDP_TRACE_EVENTS", 64, std::int64_t{1} << 26).value_or(std::int64_t{1} << 17));
    }
    active_flag.store(true, std::memory_order_relaxed);
    return true;
  }

  /// A traced process group ends: when it was the last one, the trace is
  /// written (its threads have stopped; events recorded so far are kept, so a
  /// later group's file holds both).
  void close() {
    std::unique_lock lock(mu_);
    if (sessions_ == 0 || --sessions_ > 0) return;
    active_flag.store(false, std::memory_order_relaxed);
    write_locked();
  }

  thread_ring& ring_of_this_thread() {
    if (my_ring) return *my_ring;
    std::lock_guard lock(mu_);
    auto r = std::make_unique<thread_ring>();
    r->capacity = capacity_ ? capacity_ : std::size_t{1} << 17;
    r->slots.reset(new event[r->capacity]);
    r->tid = static_cast<int>(rings_.size());
    r->name = thread_label ? thread_label : "compute";
    rings_.push_back(std::move(r));
    my_ring = rings_.back().get();
    return *my_ring;
  }

  /// The path the trace goes to ("" before a traced group opened).
  std::string path() const {
    std::lock_guard lock(mu_);
    return dir_.empty() ? std::string() : dir_ + "/rank_" + std::to_string(rank_) + ".json";
  }

private:
  void write_locked() {
    const std::string path = dir_ + "/rank_" + std::to_string(rank_) + ".json";
    const std::string tmp = path + ".tmp";
    std::string j = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":" + std::to_string(rank_) +
                    ",\"clock\":\"steady_clock\",\"dropped\":";
    std::uint64_t dropped = 0;
    for (auto& r : rings_) {
      auto n = r->count.load(std::memory_order_acquire);
      if (n > r->capacity) dropped += n - r->capacity;
    }
    j += std::to_string(dropped) + "},\"traceEvents\":[\n";
    const std::string pid = std::to_string(rank_);
    j += R"({"ph":"M","name":"process_name","pid":)" + pid + R"(,"tid":0,"args":{"name":"rank )" + pid +
         "\"}},\n";
    j += R"({"ph":"M","name":"process_sort_index","pid":)" + pid + R"(,"tid":0,"args":{"sort_index":)" + pid +
         "}}";
    for (auto& r : rings_) {
      const std::string tid = std::to_string(r->tid);
      j += ",\n" + std::string(R"({"ph":"M","name":"thread_name","pid":)") + pid + ",\"tid\":" + tid +
           R"(,"args":{"name":")" + r->name + "\"}}";
      const auto n = r->count.load(std::memory_order_acquire);
      const std::uint64_t first = n > r->capacity ? n - r->capacity : 0;
      for (std::uint64_t s = first; s < n; ++s)
        append(j, r->slots[s % r->capacity], pid, tid);
    }
    j += "\n]}\n";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    bool ok = f && std::fwrite(j.data(), 1, j.size(), f) == j.size();
    if (f) ok = (std::fclose(f) == 0) && ok;
    std::error_code ec;
    if (ok) std::filesystem::rename(tmp, path, ec);
    if (!ok || ec)
      log_line("rank " + std::to_string(rank_),
               "DDP_TRACE: could not write " + path + " (is the directory still there and writable?)");
  }

  static void append_us(std::string& j, std::int64_t ns) {
    char b[32];
    std::snprintf(b, sizeof b, "%lld.%03lld", static_cast<long long>(ns / 1000),
                  static_cast<long long>(ns % 1000));
    j += b;
  }

  static void append(std::string& j, const event& e, const std::string& pid, const std::string& tid) {
    const auto& k = info(e.what);
    j += ",\n{\"name\":\"";
    j += e.label ? e.label : k.name;
    j += "\",\"cat\":\"";
    j += e.what == kind::collective ? "collective" : "ddp";
    j += "\",\"ph\":\"";
    j += k.phase;
    j += "\",\"ts\":";
    append_us(j, e.ts_ns);
    if (k.phase == 'X') {
      j += ",\"dur\":";
      append_us(j, e.dur_ns);
    }
    if (k.phase == 'i') j += ",\"s\":\"t\"";
    if (k.phase == 'b' || k.phase == 'e') j += ",\"id\":" + std::to_string(e.arg[0]);
    j += ",\"pid\":" + pid + ",\"tid\":" + tid + ",\"args\":{";
    for (int a = 0; a < 4 && k.args[a]; ++a) {
      if (a) j += ",";
      j += "\"";
      j += k.args[a];
      j += "\":";
      if (std::string_view(k.args[a]).ends_with("_us"))
        append_us(j, e.arg[a]);
      else
        j += std::to_string(e.arg[a]);
    }
    j += "}}";
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<thread_ring>> rings_;
  std::string dir_;
  int rank_ = 0;
  int sessions_ = 0;
  std::size_t capacity_ = 0;
};

/// Appends one event to this thread's ring (call only when on()).
inline void record(kind what, std::int64_t ts_ns, std::int64_t dur_ns, std::int64_t a0 = 0,
                   std::int64_t a1 = 0, std::int64_t a2 = 0, std::int64_t a3 = 0,
                   const char* label = nullptr) noexcept {
  thread_ring* r = my_ring;
  if (!r) {
    try {
      r = &recorder::get().ring_of_this_thread();
    } catch (...) { return; } // out of memory: lose the event, not the step
  }
  const auto n = r->count.load(std::memory_order_relaxed);
  r->slots[n % r->capacity] = event{ts_ns, dur_ns, label, what, {a0, a1, a2, a3}};
  r->count.store(n + 1, std::memory_order_release);
}

inline void instant(kind what, std::int64_t a0 = 0, std::int64_t a1 = 0, std::int64_t a2 = 0) noexcept {
  if (on()) record(what, now_ns(), 0, a0, a1, a2);
}

/// Records a span from its construction to its destruction (when on() at construction).
class span {
public:
  explicit span(kind what, std::int64_t a0 = 0, std::int64_t a1 = 0) noexcept
      : what_(what), a0_(a0), a1_(a1), start_(on() ? now_ns() : -1) {}
  span(const span&) = delete;
  span& operator=(const span&) = delete;
  ~span() {
    if (start_ >= 0) record(what_, start_, now_ns() - start_, a0_, a1_);
  }

private:
  kind what_;
  std::int64_t a0_, a1_;
  std::int64_t start_;
};

/// Holds tracing on for the life of a process group (opened with its rank).
class session {
public:
  explicit session(int rank) : open_(recorder::get().open(rank)) {}
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() {
    if (open_) recorder::get().close();
  }

private:
  bool open_;
};

} // namespace detail::trace
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_TRACE_HPP
// ---- end ddp/detail/common/trace.hpp ----

#include <cstdint>
#include <optional>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class step_timeline {
public:
  explicit step_timeline(const bucket_plan& plan) : plan_(plan), launched_ns_(plan.buckets.size(), 0) {}

  void marked(std::size_t param, bool unused) {
    trace::instant(trace::kind::mark_grad_ready, static_cast<std::int64_t>(param), unused ? 1 : 0);
  }

  /// Around the launch of bucket b: the span of the call (packing and
  /// submission), the start of "bucket in flight", and the bucket's index
  /// handed to the collective it submits.
  class launch_probe {
  public:
    launch_probe(step_timeline& t, std::size_t b) : t_(t), b_(b), start_(trace::on() ? trace::now_ns() : -1) {
      if (start_ < 0) return;
      t_.launched_ns_[b] = start_;
      trace::record(trace::kind::bucket_begin, start_, 0, index(), t_.bytes(b));
      trace::submitting_bucket = static_cast<int>(b);
    }
    launch_probe(const launch_probe&) = delete;
    launch_probe& operator=(const launch_probe&) = delete;
    ~launch_probe() {
      if (start_ < 0) return;
      trace::submitting_bucket = -1;
      trace::record(trace::kind::bucket_launch, start_, trace::now_ns() - start_, index(), t_.bytes(b_));
    }

  private:
    std::int64_t index() const { return static_cast<std::int64_t>(b_); }
    step_timeline& t_;
    std::size_t b_;
    std::int64_t start_;
  };
  launch_probe launching(std::size_t b) { return launch_probe(*this, b); }

  /// synchronize() as a whole: one step; none inside no_sync(), where it communicates nothing.
  std::optional<trace::span> synchronizing(bool communicates) {
    if (!communicates) return std::nullopt;
    return std::optional<trace::span>(std::in_place, trace::kind::synchronize, step_);
  }
  /// synchronize() blocked on bucket b's collective.
  trace::span waiting(std::size_t b) {
    return trace::span(trace::kind::wait, static_cast<std::int64_t>(b), step_);
  }
  trace::span unpacking(std::size_t b) {
    const bool packed = plan_.buckets[b].path == bucket_path::packed;
    return trace::span(trace::kind::unpack, static_cast<std::int64_t>(b), packed ? bytes(b) : 0);
  }

  /// Bucket b's gradients hold the average.
  void completed(std::size_t b) {
    if (!trace::on() || launched_ns_[b] == 0) return;
    const auto t = trace::now_ns();
    const auto i = static_cast<std::int64_t>(b);
    trace::record(trace::kind::bucket_end, t, 0, i);
    trace::record(trace::kind::bucket_complete, t, 0, i, bytes(b), t - launched_ns_[b]);
    launched_ns_[b] = 0;
  }

  /// A step (a synchronize() that communicated) ended.
  void step_done() { ++step_; }

private:
  std::int64_t bytes(std::size_t b) const {
    auto& k = plan_.buckets[b];
    return static_cast<std::int64_t>(k.elements * size_of(k.wire_type));
  }

  const bucket_plan& plan_;
  std::vector<std::int64_t> launched_ns_; ///< per bucket, 0 when not in flight (or not traced)
  std::int64_t step_ = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_TIMELINE_HPP
// ---- end ddp/detail/data_parallel/timeline.hpp ----

#include <functional>
#include <string>
#include <utility>
#include <variant>

DDP_BEGIN_NAMESPACE

/// The primary template only diagnoses: it is chosen when an argument is not
/// what it should be, and says which one and how to fix it, once.
template <class Model, class Backend, class Bucketing = bucketing::size_capped<>,
          class Reduction = reduction::mean>
class distributed_data_parallel : detail::policy_diagnostics<Model, Backend, Bucketing, Reduction> {
public:
  template <class... Args> explicit distributed_data_parallel(Args&&...) {}
};

template <class Model, class Backend, class Bucketing, class Reduction>
requires model<Model> && backend_policy<Backend> && bucketing_policy<Bucketing> && reduction_policy<Reduction>
class distributed_data_parallel<Model, Backend, Bucketing, Reduction> {
  using comm_type = typename Backend::communicator;

public:
  using model_type = Model;
  using backend_type = Backend;

  /// Verifies the model across ranks (names, dtypes, sizes), then copies rank 0's
  /// parameters and buffers to every rank.
  distributed_data_parallel(Model& m, process_group<Backend>& pg, ddp_options o = {})
      : model_(m), pg_(pg), opts_(o), attached_(m), registry_(attached_.walked()),
        on_device_(gradients_on_device()), broadcasts_(pg.communicator(), o.compute_stream, fail_group()),
        plan_(verify_then_plan()), timeline_(plan_),
        engine_(detail::make_bucket_engine(pg.communicator(), plan_, registry_.parameters(), on_device_,
                                           o.compute_stream, fail_group())),
        step_(*this, pg.communicator(), opts_, attached_, registry_, plan_) {
    if (detail::debug() >= detail::debug_level::info && pg_.rank() == 0)
      detail::log_bucket_layout(plan_, registry_.parameters());
    attached_.connect(gradient_sink(*this));
  }
  distributed_data_parallel(const distributed_data_parallel&) = delete;
  distributed_data_parallel& operator=(const distributed_data_parallel&) = delete;

  Model& module() noexcept { return model_; }
  process_group<Backend>& group() noexcept { return pg_; }
  std::size_t num_parameters() const noexcept { return registry_.size(); }
  const std::string& parameter_name(std::size_t i) const { return registry_.parameters().at(i).name; }
  /// The index of the parameter called `name`.
  std::size_t parameter_index(std::string_view name) const { return registry_.index(name); }

  std::vector<bucket_info> buckets() const {
    std::vector<bucket_info> out;
    for (auto& b : plan_.buckets)
      out.push_back({b.params, b.param_type, b.wire_type, b.elements, b.path});
    return out;
  }
  /// How many of this step's buckets have started their collective so far (0
  /// outside a step): a bucket launched while backward still runs shows here.
  std::size_t buckets_launched() const noexcept { return step_.launched(); }

  /// Gradient `index` (registration order) is final for this step; a bucket
  /// whose gradients are all final starts its all-reduce, in bucket order.
  void mark_grad_ready(std::size_t index) { step_.mark(index, detail::mark_state::ready); }
  template <tensor G> void mark_grad_ready(const G& grad) {
    step_.mark(step_.index_of(grad), detail::mark_state::ready);
  }

  /// This rank has no gradient for `index` this step (a branch it did not take):
  /// its gradient is zeroed, contributes zeros, and still receives the average.
  void mark_unused(std::size_t index) { step_.mark(index, detail::mark_state::unused); }
  /// Whether gradient `index` was marked (ready or unused) in the step under way.
  bool marked(std::size_t index) const { return step_.marked(index); }
  template <tensor G> void mark_unused(const G& grad) {
    step_.mark(step_.index_of(grad), detail::mark_state::unused);
  }

  /// Launches what is left (unmarked gradients count as ready unless
  /// strict_marking), waits, and leaves the reduced gradients in the model's
  /// gradient tensors on every rank. Inside no_sync(), does nothing but end the step.
  /// Device gradients with ddp_options::compute_stream: stream-ordered, the
  /// compute stream waits on the device for the reduced gradients. Over
  /// ddp::nccl the host waits for none of it (only until each bucket's
  /// collective is queued; a failure found later is thrown by the next
  /// synchronize() or collective, or logged when this object goes; device
  /// buffers are broadcast the same way); over ddp::gloo it waits for each
  /// bucket's collective (it runs on the host), not for the copies back.
  void synchronize() { synchronize_impl(/*blocking=*/false); }

  /// synchronize(), and the host also waits until the reduced gradients are in
  /// place in device memory (the same as synchronize() for host gradients).
  void synchronize_blocking() { synchronize_impl(/*blocking=*/true); }

private:
  void synchronize_impl(bool blocking) {
    auto traced = timeline_.synchronizing(/*communicates=*/!step_.accumulating());
    const bool communicated = step_.synchronize(
        [&] {
          launch_ready(/*in_synchronize=*/true);
          for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
            finish(b);
          engine([&](auto& e) { e.finish_step(blocking); });
          if (opts_.broadcast_buffers && !registry_.buffers().empty())
            broadcast_buffers(/*stream_ordered=*/!blocking);
          if (detail::debug() >= detail::debug_level::detail && pg_.rank() == 0)
            engine([&](auto& e) { detail::log_step_timing(e, plan_.buckets.size()); });
        },
        [&] { engine([](auto& e) { e.wait_all_quietly(); }); });
    if (communicated) timeline_.step_done();
  }

public:
  /// While the guard lives, gradients accumulate locally: marks are ignored
  /// and synchronize() communicates nothing.
  using no_sync_guard = ddp::no_sync_guard;
  [[nodiscard]] no_sync_guard no_sync() { return no_sync_guard(step_.no_sync_depth()); }

  /// Copies rank 0's buffers (running statistics and such) to every rank;
  /// returns once they are in place (device buffers too).
  void sync_buffers() { broadcast_buffers(/*stream_ordered=*/false); }

  /// For uneven inputs (options.uneven_inputs on every rank): a rank that has
  /// run out of data calls join(). Until every rank has joined, it shadows the
  /// others' steps, contributing zero gradients, so their collectives complete.
  /// Averages keep dividing by the full world size: joined ranks count as zeros.
  void join() {
    auto shadow_step = [&] {
      std::vector<work> ws;
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
        if (detail::debug() >= detail::debug_level::detail)
          detail::check_same_bucket_everywhere(comm(), b, plan_.buckets[b]); // as launch does
        // The ring averages the chunks this rank owns, as in a step.
        ws.push_back(engine([&](auto& e) { return e.reduce_zeros(b, mean_scale()); }));
      }
      for (auto& w : ws)
        w.wait();
      if (opts_.broadcast_buffers && !registry_.buffers().empty()) sync_buffers();
    };
    step_.join(/*prepare=*/[&] { engine([](auto& e) { e.prepare_join(); }); }, shadow_step);
  }

private:
  comm_type& comm() noexcept { return pg_.communicator(); }
  /// Calls `f` with the engine of the gradients' memory space.
  template <class F> decltype(auto) engine(F&& f) { return std::visit(std::forward<F>(f), engine_); }

  /// For this rank's own device work before a collective (packing, staging
  /// copies): when it fails, the peers waiting in that collective are told
  /// at once (process_group::abort) instead of at their deadline.
  std::function<void(const std::string&)> fail_group() {
    return [&pg = pg_](const std::string& why) { pg.abort(why); };
  }

  /// `stream_ordered`: the compute stream, not the host, waits for device
  /// buffers (synchronize() with a compute stream, over ddp::nccl).
  void broadcast_buffers(bool stream_ordered) {
    if (!step_.started()) step_.refresh(); // inside a step, its beginning did
    if (registry_.any_on_device()) broadcasts_.begin(stream_ordered);
    registry_.broadcast_from_rank0(comm(), /*buffers_only=*/true, broadcasts_);
  }
  double mean_scale() const { return Reduction::average ? 1.0 / pg_.size() : 1.0; }

  /// Where the gradients live picks the bucket engine: all on the host or all
  /// on the device (the CUDA engine, where ddp was compiled with it).
  bool gradients_on_device() const {
    const bool dev = registry_.gradients_on_device(pg_.rank());
    if (registry_.any_on_device() && !detail::cuda_engine_available)
      throw error(
          error_kind::config,
          "rank " + std::to_string(pg_.rank()) +
              ": the model has tensors in device memory but ddp was compiled without its CUDA engine: "
              "link ddp::cuda or ddp::nccl (they define DDP_WITH_CUDA)",
          pg_.rank());
    return dev;
  }

  /// Construction, in order: the model is checked (the same on every rank;
  /// descriptions only, no tensor data), rank 0's state is copied everywhere,
  /// then the buckets are planned.
  detail::bucket_plan verify_then_plan() {
    if (opts_.verify_model) registry_.verify_across_ranks(comm());
    if (registry_.any_on_device())
      broadcasts_.begin(/*stream_ordered=*/false); // a failure is the constructor's
    registry_.broadcast_from_rank0(comm(), /*buffers_only=*/false, broadcasts_);
    auto descs = detail::describe_for_bucketing(registry_.parameters());
    return detail::make_bucket_plan(
        Bucketing::assign(std::span<const parameter_desc>(descs)), registry_.parameters(),
        [](dtype d) { return Reduction::wire(d); },
        detail::bucket_engine_capabilities<comm_type>(on_device_));
  }

  // The step driver's hooks (detail/data_parallel/step_driver.hpp).
  friend detail::step_driver<distributed_data_parallel, comm_type, Model>;
  /// Moved gradient storage: new addresses, maybe new bucket paths.
  void storage_moved() {
    detail::choose_paths(plan_, registry_.parameters(),
                         detail::bucket_engine_capabilities<comm_type>(on_device_));
    engine([](auto& e) { e.layout(); });
  }
  void zero_gradient(std::size_t index) {
    engine([&](auto& e) { e.zero(registry_[index]); });
  }
  void gradient_marked(std::size_t index, detail::mark_state how) {
    timeline_.marked(index, how == detail::mark_state::unused);
    launch_ready();
  }

  /// Waits for bucket b (if launched) and unpacks it into the gradients.
  void finish(std::size_t b) {
    {
      auto traced = timeline_.waiting(b);
      if (!engine([&](auto& e) { return e.wait(b); })) return;
    }
    {
      auto traced = timeline_.unpacking(b);
      engine([&](auto& e) { e.unpack(b); });
    }
    timeline_.completed(b);
  }

  /// Starts every complete bucket, strictly in bucket order. With host
  /// gradients the step's last bucket waits for synchronize(), which waits for
  /// it at once: the communicator may then run it on the caller's thread (when
  /// its queue is idle), without the two thread hand-offs of a queued
  /// collective. Those cost a scheduler slice each on a busy host, a large part
  /// of a small step (docs/performance.md, Training). Nothing
  /// runs after the last gradient but the caller's own code before
  /// synchronize(), so only that code loses the overlap.
  void launch_ready(bool in_synchronize = false) {
    const std::size_t n = plan_.buckets.size(), last = n == 0 ? 0 : n - 1;
    engine([&]<class E>(E& e) {
      constexpr bool defer_last = E::defers_last_bucket;
      step_.launch_ready(
          [&](std::size_t b) {
            if (detail::debug() >= detail::debug_level::detail)
              detail::check_same_bucket_everywhere(comm(), b, plan_.buckets[b]);
            auto traced = timeline_.launching(b);
            e.launch(b, mean_scale(), /*caller_waits=*/defer_last && b == last);
          },
          in_synchronize || !defer_last ? n : last);
    });
  }

  Model& model_;
  process_group<Backend>& pg_;
  ddp_options opts_;
  detail::attached_model<Model> attached_; ///< what registry_ walks: the model, or its traits' adapter
  detail::parameter_registry<typename detail::attached_model<Model>::walked_type> registry_;
  bool on_device_;                                  ///< gradients in device memory: the CUDA engine
  detail::device_broadcasts<comm_type> broadcasts_; ///< device tensors in broadcasts from rank 0
  detail::bucket_plan plan_;
  detail::step_timeline timeline_;
  detail::bucket_engine<comm_type> engine_;
  detail::step_driver<distributed_data_parallel, comm_type, Model> step_; ///< marks, no_sync, join
};

template <class M, class B>
distributed_data_parallel(M&, process_group<B>&) -> distributed_data_parallel<M, B>;
template <class M, class B>
distributed_data_parallel(M&, process_group<B>&, ddp_options) -> distributed_data_parallel<M, B>;

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_HPP
// ---- end ddp/data_parallel.hpp ----
// ---- begin ddp/optim/adam.hpp ----
// ddp::optim::adam — torch.optim.Adam's update (bias correction, eps added
// after the square root, L2 weight decay) on this rank's shard of a
// sharded_data_parallel model; step() then all-gathers the parameters.
#ifndef DDP_OPTIM_ADAM_HPP
#define DDP_OPTIM_ADAM_HPP

// ---- begin ddp/optim/shard_state.hpp ----
// Per-element optimizer state for this rank's shard (Adam's two moments,
// SGD's momentum), one array per bucket in the bucket's dtype, and its
// checkpoint: each rank saves and loads its own file, `<path>.rank<r>`.
#ifndef DDP_OPTIM_SHARD_STATE_HPP
#define DDP_OPTIM_SHARD_STATE_HPP


#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace optim {

class shard_state {
public:
  /// `slots` arrays per bucket, sized as the sharded model's shard of it.
  template <class Sharded>
  shard_state(Sharded& s, std::size_t slots)
      : rank_(s.group().rank()), world_(s.group().size()), data_(slots) {
    for (std::size_t b = 0; b < s.num_buckets(); ++b) {
      types_.push_back(s.bucket_type(b));
      sizes_.push_back(s.shard_size(b));
    }
    for (auto& slot : data_)
      for (std::size_t b = 0; b < types_.size(); ++b)
        slot.emplace_back(sizes_[b] * size_of(types_[b]), std::byte{0});
  }

  /// Slot `k`'s elements for a range of bucket `bucket` starting at `offset`.
  template <class T> T* at(std::size_t k, std::size_t bucket, std::size_t offset) {
    return reinterpret_cast<T*>(data_[k][bucket].data()) + offset;
  }

  std::size_t bytes() const {
    std::size_t n = 0;
    for (auto& slot : data_)
      for (auto& b : slot)
        n += b.size();
    return n;
  }

  /// Writes `<path>.rank<r>` (through a temporary file, renamed when complete).
  void save(const std::string& path, std::uint64_t step, const std::string& kind) const {
    const std::string file = path + ".rank" + std::to_string(rank_), tmp = file + ".tmp";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io_error(tmp, "cannot open it for writing");
    std::string head = header(step, kind);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (auto& slot : data_)
      for (auto& b : slot)
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    out.close();
    if (!out) throw io_error(tmp, "could not write it completely");
    if (std::rename(tmp.c_str(), file.c_str()) != 0)
      throw io_error(file, "could not rename " + tmp + " to it");
  }

  /// Reads `<path>.rank<r>`; the job must have the world size, buckets and
  /// optimizer it was saved with. Returns the saved step count.
  std::uint64_t load(const std::string& path, const std::string& kind) {
    const std::string file = path + ".rank" + std::to_string(rank_);
    std::ifstream in(file, std::ios::binary);
    if (!in) throw io_error(file, "cannot open it");
    std::string magic(8, '\0');
    std::uint32_t world = 0;
    in.read(magic.data(), 8);
    in.read(reinterpret_cast<char*>(&world), sizeof world);
    if (!in || magic != "DDPOPTV1")
      throw error(error_kind::data, "optimizer checkpoint " + file + " is not one ddp::optim wrote");
    if (world != static_cast<std::uint32_t>(world_))
      throw error(error_kind::config,
                  "optimizer checkpoint " + file + " was saved by a job of " + std::to_string(world) +
                      " ranks; this job has " + std::to_string(world_) +
                      ": each rank's file holds its 1/W of the state, so resume with " +
                      std::to_string(world) + " ranks (or start the optimizer afresh)",
                  rank_);
    std::string rest_expected = header(0, kind).substr(12);
    std::string rest(rest_expected.size(), '\0');
    in.read(rest.data(), static_cast<std::streamsize>(rest.size()));
    std::uint64_t step = 0;
    std::memcpy(&step, rest.data(), sizeof step);
    std::memcpy(rest.data(), rest_expected.data(), sizeof step); // compare all but the step
    if (!in || rest != rest_expected)
      throw error(error_kind::config,
                  "optimizer checkpoint " + file +
                      " does not match this job (another optimizer, rank, "
                      "model, bucketing or dtype): load it with the job that saved it",
                  rank_);
    auto loaded = data_; // read aside: a bad file leaves the state as it was
    for (auto& slot : loaded)
      for (auto& b : slot)
        in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!in || in.peek() != std::char_traits<char>::eof())
      throw error(error_kind::data, "optimizer checkpoint " + file + " is truncated or too long", rank_);
    data_ = std::move(loaded);
    return step;
  }

  /// Every rank must have loaded the same step: files from different saves are refused.
  template <class Group>
  static void require_same_step(Group& group, std::uint64_t step, const std::string& path) {
    std::vector<std::int64_t> lo{static_cast<std::int64_t>(step)}, hi{static_cast<std::int64_t>(step)};
    group.all_reduce(lo, op::min);
    group.all_reduce(hi, op::max);
    if (lo[0] != hi[0])
      throw error(error_kind::mismatch,
                  "the ranks loaded optimizer checkpoints of different steps (" + std::to_string(lo[0]) +
                      " to " + std::to_string(hi[0]) + "): the files " + path +
                      ".rank* come from different saves; load one save's files on every rank",
                  group.rank());
  }

private:
  /// magic, world, step, rank, optimizer, slots, then each bucket's dtype and size.
  std::string header(std::uint64_t step, const std::string& kind) const {
    std::string h = "DDPOPTV1";
    auto put = [&](auto v) { h.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(static_cast<std::uint32_t>(world_));
    put(step);
    put(static_cast<std::uint32_t>(rank_));
    put(static_cast<std::uint32_t>(kind.size()));
    h += kind;
    put(static_cast<std::uint32_t>(data_.size()));
    put(static_cast<std::uint32_t>(types_.size()));
    for (std::size_t b = 0; b < types_.size(); ++b) {
      put(static_cast<std::uint8_t>(types_[b]));
      put(static_cast<std::uint64_t>(sizes_[b]));
    }
    return h;
  }

  error io_error(const std::string& file, const std::string& what) const {
    return error(error_kind::data,
                 "optimizer checkpoint " + file + ": " + what + " (" + std::strerror(errno) + ")", rank_);
  }

  int rank_, world_;
  std::vector<dtype> types_;
  std::vector<std::size_t> sizes_;
  std::vector<std::vector<std::vector<std::byte>>> data_; ///< [slot][bucket] bytes
};

} // namespace optim
DDP_END_NAMESPACE

#endif // DDP_OPTIM_SHARD_STATE_HPP
// ---- end ddp/optim/shard_state.hpp ----

#include <cmath>
#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace optim {

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

template <class Sharded> class adam {
public:
  adam(Sharded& model, adam_options o = {}) : model_(model), o_(o), state_(model, 2) {}

  /// One update of this rank's shard with its averaged gradient (after
  /// synchronize()), then every rank's parameters are whole again.
  void step() {
    const std::uint64_t t = step_ + 1; // counted once the update is done
    const double bias1 = 1 - std::pow(o_.beta1, static_cast<double>(t));
    const double bias2_sqrt = std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(t)));
    model_.update_shards([&](auto& r) {
      using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
      T* m = state_.template at<T>(0, r.bucket, r.state_offset);
      T* v = state_.template at<T>(1, r.bucket, r.state_offset);
      const T b1 = static_cast<T>(o_.beta1), b2 = static_cast<T>(o_.beta2), eps = static_cast<T>(o_.eps);
      const T wd = static_cast<T>(o_.weight_decay), one_b1 = static_cast<T>(1 - o_.beta1),
              one_b2 = static_cast<T>(1 - o_.beta2), bc2 = static_cast<T>(bias2_sqrt),
              step_size = static_cast<T>(o_.lr / bias1);
      for (std::size_t i = 0; i < r.value.size(); ++i) {
        const T g = o_.weight_decay != 0 ? r.grad[i] + wd * r.value[i] : r.grad[i];
        m[i] = m[i] * b1 + one_b1 * g;
        v[i] = v[i] * b2 + one_b2 * g * g;
        const T denom = std::sqrt(v[i]) / bc2 + eps;
        r.value[i] -= step_size * (m[i] / denom);
      }
    });
    step_ = t;
  }

  adam_options& options() noexcept { return o_; }
  std::uint64_t steps() const noexcept { return step_; }
  /// This rank's optimizer memory: two values per owned element.
  std::size_t state_bytes() const noexcept { return state_.bytes(); }

  /// Each rank writes its own shard of the state to `<path>.rank<r>`.
  void save(const std::string& path) const { state_.save(path, step_, "adam"); }
  /// Collective: every rank loads its own file, and all must be of one save.
  void load(const std::string& path) {
    const auto step = state_.load(path, "adam");
    shard_state::require_same_step(model_.group(), step, path);
    step_ = step;
  }

private:
  Sharded& model_;
  adam_options o_;
  shard_state state_;
  std::uint64_t step_ = 0;
};

template <class S> adam(S&, adam_options) -> adam<S>;
template <class S> adam(S&) -> adam<S>;

} // namespace optim
DDP_END_NAMESPACE

#endif // DDP_OPTIM_ADAM_HPP
// ---- end ddp/optim/adam.hpp ----
// ---- begin ddp/optim/sgd.hpp ----
// ddp::optim::sgd — torch.optim.SGD's update (momentum with dampening,
// Nesterov, L2 weight decay) on this rank's shard of a sharded_data_parallel
// model; step() then all-gathers the parameters.
#ifndef DDP_OPTIM_SGD_HPP
#define DDP_OPTIM_SGD_HPP


#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace optim {

struct sgd_options {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

template <class Sharded> class sgd {
public:
  sgd(Sharded& model, sgd_options o = {})
      : model_(model), o_(o), state_(model, o.momentum != 0 ? 1 : 0), has_momentum_(o.momentum != 0) {
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      throw error(error_kind::config, "optim::sgd: Nesterov momentum needs a momentum and zero dampening");
  }

  void step() {
    if (o_.momentum != 0 && !has_momentum_)
      throw error(error_kind::config, "optim::sgd: momentum was 0 when the optimizer was built, so it keeps "
                                      "no momentum buffers: build it with the momentum you will use");
    if (o_.nesterov && (o_.momentum <= 0 || o_.dampening != 0))
      throw error(error_kind::config, "optim::sgd: Nesterov momentum needs a momentum and zero dampening");
    const std::uint64_t t = step_ + 1; // counted once the update is done
    model_.update_shards([&](auto& r) {
      using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
      const T lr = static_cast<T>(o_.lr), mu = static_cast<T>(o_.momentum),
              wd = static_cast<T>(o_.weight_decay), keep = static_cast<T>(1 - o_.dampening);
      T* buf =
          has_momentum_ && o_.momentum != 0 ? state_.template at<T>(0, r.bucket, r.state_offset) : nullptr;
      for (std::size_t i = 0; i < r.value.size(); ++i) {
        T d = o_.weight_decay != 0 ? r.grad[i] + wd * r.value[i] : r.grad[i];
        if (buf) {
          buf[i] = t == 1 ? d : buf[i] * mu + keep * d; // the first step clones, as PyTorch's does
          d = o_.nesterov ? d + mu * buf[i] : buf[i];
        }
        r.value[i] -= lr * d;
      }
    });
    step_ = t;
  }

  sgd_options& options() noexcept { return o_; }
  std::uint64_t steps() const noexcept { return step_; }
  /// This rank's optimizer memory: one value per owned element with momentum, else none.
  std::size_t state_bytes() const noexcept { return state_.bytes(); }

  void save(const std::string& path) const { state_.save(path, step_, "sgd"); }
  /// Collective: every rank loads its own file, and all must be of one save.
  void load(const std::string& path) {
    const auto step = state_.load(path, "sgd");
    shard_state::require_same_step(model_.group(), step, path);
    step_ = step;
  }

private:
  Sharded& model_;
  sgd_options o_;
  shard_state state_;
  bool has_momentum_; ///< momentum buffers exist (momentum was set at construction)
  std::uint64_t step_ = 0;
};

template <class S> sgd(S&, sgd_options) -> sgd<S>;
template <class S> sgd(S&) -> sgd<S>;

} // namespace optim
DDP_END_NAMESPACE

#endif // DDP_OPTIM_SGD_HPP
// ---- end ddp/optim/sgd.hpp ----
// ---- begin ddp/sampler.hpp ----
// ddp::distributed_sampler — which sample indices this rank visits each epoch.
// `shuffled` and `sequential` are index-identical to PyTorch's
// torch.utils.data.DistributedSampler (shuffle=True/False) for every
// (n, num_replicas, rank, seed, epoch, drop_last). PyTorch 2.6 changed
// torch.randperm for n >= 214,748,364; `sampler_options::randperm` says which
// PyTorch `shuffled` follows there (2.6 and later by default). Needs neither
// Gloo nor NCCL.
#ifndef DDP_SAMPLER_HPP
#define DDP_SAMPLER_HPP


#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <new>
#include <numeric>
#include <random>
#include <ranges>
#include <span>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

DDP_BEGIN_NAMESPACE

/// Which PyTorch's torch.randperm `sampling::shuffled` reproduces. Every version
/// gives the same permutation for n < 214,748,364 = (2^32 - 1) / 20. From there
/// on PyTorch 2.6 shuffles differently (pytorch/pytorch#143682, in the 2.6
/// release through #144735): the same seed gives another order.
enum class torch_randperm : std::uint8_t {
  since_2_6,  ///< PyTorch 2.6 and later (the default)
  before_2_6, ///< PyTorch up to 2.5, e.g. Debian 12's python3-torch 1.13
};

struct sampler_options {
  std::uint64_t seed = 0;
  bool drop_last = false;
  torch_randperm randperm = torch_randperm::since_2_6; ///< only matters for n >= 214,748,364
};

/// Everything a sampling policy needs to pick this rank's indices.
struct sampler_context {
  std::size_t n = 0; ///< data set size
  int num_replicas = 1;
  int rank = 0;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  bool drop_last = false;
  torch_randperm randperm = torch_randperm::since_2_6;
  std::size_t num_samples = 0; ///< indices per rank (PyTorch's num_samples)
  std::size_t total_size = 0;  ///< num_samples * num_replicas
};

/// A sampling policy writes exactly ctx.num_samples indices for ctx.rank.
template <class P>
concept sampling_policy = requires(const sampler_context& ctx, std::vector<std::int64_t>& out) {
  {P::rank_indices(ctx, out)};
};

namespace detail {

/// From this n on, PyTorch 2.6+ uses the inside-out shuffle below:
/// `n < std::numeric_limits<uint32_t>::max() / 20` in randperm_cpu
/// (aten/src/ATen/native/TensorFactories.cpp), integer division: 214,748,364.
inline constexpr std::size_t randperm_inside_out_from = std::size_t{0xffffffffu} / 20;

inline void prefetch_for_write([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1);
#endif
}

/// Allocator for the permutation buffer: from 2 MiB up, memory on a 2 MiB
/// boundary that Linux is asked to back with transparent huge pages
/// (madvise; the kernel may decline). A shuffle reads and writes all over the
/// buffer, and with 4 KiB pages nearly every step also misses the TLB
/// (docs/performance.md, Sampler). Elsewhere, or for small buffers, plain
/// operator new.
template <class T> struct shuffle_buffer_allocator {
  using value_type = T;
  static constexpr std::size_t huge_page = std::size_t{2} << 20;

  shuffle_buffer_allocator() = default;
  template <class U> shuffle_buffer_allocator(const shuffle_buffer_allocator<U>&) noexcept {}

  T* allocate(std::size_t count) {
    if (count > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = count * sizeof(T);
    if (bytes < huge_page) return static_cast<T*>(::operator new(bytes));
    void* p = ::operator new (bytes, std::align_val_t{huge_page});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    ::madvise(p, bytes / huge_page * huge_page, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t count) noexcept {
    if (count * sizeof(T) < huge_page)
      ::operator delete(p);
    else
      ::operator delete (p, std::align_val_t{huge_page});
  }
  template <class U> bool operator==(const shuffle_buffer_allocator<U>&) const noexcept { return true; }
};
template <class Index> using shuffle_buffer = std::vector<Index, shuffle_buffer_allocator<Index>>;

/// Runs step(i, z_i) for i in [0, steps), where z_i = draw(i) is drawn in order
/// of i. The draws do not depend on the array being shuffled, so each z is
/// drawn `Ahead` steps early and the element it names prefetched
/// (target(k, z_k)): a shuffle of a large array is otherwise one cache miss per
/// step (docs/performance.md, Sampler). The order of draws, and so the result,
/// is unchanged.
template <std::size_t Ahead, class Draw, class Target, class Step>
void shuffle_with_lookahead(std::size_t steps, Draw&& draw, Target&& target, Step&& step) {
  using z_type = decltype(draw(std::size_t{0}));
  std::array<z_type, Ahead> ring{};
  for (std::size_t k = 0; k < std::min(Ahead, steps); ++k) {
    ring[k] = draw(k);
    prefetch_for_write(target(k, ring[k]));
  }
  for (std::size_t i = 0; i < steps; ++i) {
    const z_type z = ring[i % Ahead];
    if (i + Ahead < steps) {
      const std::size_t k = i + Ahead;
      ring[i % Ahead] = draw(k);
      prefetch_for_write(target(k, ring[i % Ahead]));
    }
    step(i, z);
  }
}

/// Forward Fisher–Yates with one 32-bit draw per step, as PyTorch's randperm_cpu
/// (aten/src/ATen/native/TensorFactories.cpp) for every n up to 2.5 and below
/// randperm_inside_out_from since 2.6:
///   for i in [0, n-1): z = random() % (n-i); swap(r[i], r[i+z])
/// The modulo of a 32-bit draw is biased for large n, and for n > 2^32 never
/// reaches past i + 2^32 - 1; reproduced as is. Checked against PyTorch 1.13 by
/// tests/reference/compare_live_large.sh below the switch.
template <class Index, class Alloc>
void randperm_forward(std::vector<Index, Alloc>& r, std::size_t n, std::mt19937& gen) {
  r.resize(n);
  std::iota(r.begin(), r.end(), Index{0});
  if (n < 2) return;
  auto swap_step = [&](std::size_t i, std::size_t z) { std::swap(r[i], r[i + z]); };
  auto target = [&](std::size_t k, std::size_t z) { return r.data() + k + z; };
  if (n <= 0xffffffffu) {
    // n - k fits in 32 bits: a 32-bit modulo, same result, faster.
    const auto n32 = static_cast<std::uint32_t>(n);
    shuffle_with_lookahead<64>(
        n - 1,
        [&](std::size_t k) {
          return std::size_t{static_cast<std::uint32_t>(gen()) % (n32 - static_cast<std::uint32_t>(k))};
        },
        target, swap_step);
  } else {
    shuffle_with_lookahead<64>(
        n - 1,
        [&](std::size_t k) {
          return static_cast<std::size_t>(std::uint64_t{static_cast<std::uint32_t>(gen())} % (n - k));
        },
        target, swap_step);
  }
}

/// "Inside-out" Fisher–Yates with one 64-bit draw per element, as PyTorch 2.6+'s
/// randperm_cpu from randperm_inside_out_from on:
///   for i in [0, n): z = random64() % (i+1); r[i] = r[z]; r[z] = i
/// random64() = (first 32-bit draw << 32) | second draw (CPUGeneratorImpl::random64
/// in aten/src/ATen/CPUGeneratorImpl.cpp); i = 0 draws too. Debian 12's PyTorch
/// is 1.13, so unit tests check it against a Python model of the source
/// (tests/reference/randperm_model.py); tests/reference/compare_live_large.sh
/// checks it against a PyTorch 2.6 or later where one is installed (scripts/dev/gpu-check
/// runs it with the GPU machine's, up to n = 250,000,000: docs/gpu.md).
template <class Index, class Alloc>
void randperm_inside_out(std::vector<Index, Alloc>& r, std::size_t n, std::mt19937& gen) {
  r.assign(n, Index{0}); // every entry is written before it is read; r[0] = 0 stands for i = 0
  shuffle_with_lookahead<32>(
      n,
      [&](std::size_t k) {
        const std::uint64_t hi = static_cast<std::uint32_t>(gen());
        const std::uint64_t x = (hi << 32) | static_cast<std::uint32_t>(gen());
        return static_cast<std::size_t>(x % (std::uint64_t{k} + 1));
      },
      [&](std::size_t, std::size_t z) { return r.data() + z; },
      [&](std::size_t i, std::size_t z) {
        r[i] = r[z];
        r[z] = static_cast<Index>(i);
      });
}

/// PyTorch's torch.randperm(n, generator) on the CPU, with the generator seeded
/// by `seed`: MT19937 (std::mt19937 gives the same numbers; its result_type may
/// be wider than 32 bits, so draws are cast), seeded with the low 32 bits of the
/// seed, then one of the two shuffles above. Index must hold n - 1 (32 bits are
/// enough below 2^32: half the memory).
template <class Index, class Alloc>
void randperm(std::vector<Index, Alloc>& r, std::size_t n, std::uint64_t seed,
              torch_randperm version = torch_randperm::since_2_6) {
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  if (version == torch_randperm::since_2_6 && n >= randperm_inside_out_from)
    randperm_inside_out(r, n, gen);
  else
    randperm_forward(r, n, gen);
}

/// Rank r's share of a global order, PyTorch style: the order padded with its
/// own head (repeated as needed) or truncated to total_size, then every
/// num_replicas-th element starting at rank. `order(j)` gives element j < n.
template <class Order>
void strided_share(const sampler_context& c, std::vector<std::int64_t>& out, Order&& order) {
  out.resize(c.num_samples);
  for (std::size_t k = 0; k < c.num_samples; ++k) {
    std::size_t j = static_cast<std::size_t>(c.rank) + k * static_cast<std::size_t>(c.num_replicas);
    if (j >= c.n) j %= c.n; // only when padding: repeats the head
    out[k] = static_cast<std::int64_t>(order(j));
  }
}

} // namespace detail

namespace sampling {

/// PyTorch's DistributedSampler(shuffle=True): a fresh permutation per
/// (seed + epoch), interleaved over ranks.
struct shuffled {
  static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
    if (c.n == 0) {
      out.clear();
      return;
    }
    // The permutation is the one O(n) buffer besides `out`; 32-bit entries
    // when they fit (n <= 2^32 - 1), which halves it: 4n + 8n/num_replicas
    // bytes at the peak. It cannot be avoided: in either shuffle an element's
    // final value depends on swaps with positions anywhere in the array, so a
    // rank's share needs the whole permutation.
    if (c.n <= 0xffffffffu) {
      detail::shuffle_buffer<std::uint32_t> perm;
      detail::randperm(perm, c.n, c.seed + c.epoch, c.randperm);
      detail::strided_share(c, out, [&](std::size_t j) { return perm[j]; });
    } else {
      detail::shuffle_buffer<std::uint64_t> perm;
      detail::randperm(perm, c.n, c.seed + c.epoch, c.randperm);
      detail::strided_share(c, out, [&](std::size_t j) { return perm[j]; });
    }
  }
};

/// PyTorch's DistributedSampler(shuffle=False): 0..n-1 interleaved over ranks.
struct sequential {
  static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
    if (c.n == 0) {
      out.clear();
      return;
    }
    detail::strided_share(c, out, [](std::size_t j) { return j; });
  }
};

/// Each rank reads one contiguous block of the (padded or truncated) index
/// range: rank r gets [r * num_samples, (r + 1) * num_samples). Prefer it for
/// streamed or memory-mapped data, where sequential reads matter more than
/// mixing; same sizes and padding as `shuffled`. With ShuffleBlocks, which
/// rank reads which block changes every epoch (a permutation of the ranks
/// seeded by seed + epoch); the order inside a block stays sequential.
template <bool ShuffleBlocks = false> struct basic_contiguous {
  static void rank_indices(const sampler_context& c, std::vector<std::int64_t>& out) {
    out.resize(c.num_samples);
    if (c.n == 0) return;
    std::size_t block = static_cast<std::size_t>(c.rank);
    if constexpr (ShuffleBlocks) {
      std::vector<std::uint32_t> perm;
      detail::randperm(perm, static_cast<std::size_t>(c.num_replicas), c.seed + c.epoch);
      block = perm[block];
    }
    for (std::size_t k = 0; k < c.num_samples; ++k)
      out[k] = static_cast<std::int64_t>((block * c.num_samples + k) % c.n);
  }
};
using contiguous = basic_contiguous<false>;
using contiguous_shuffled_blocks = basic_contiguous<true>;

} // namespace sampling

/// The primary template only diagnoses a policy that is not one, once.
template <class Policy = sampling::shuffled> class distributed_sampler {
  static_assert(sampling_policy<Policy>,
                "ddp: distributed_sampler<P> needs a sampling policy: a type with "
                "`static void rank_indices(const ddp::sampler_context&, std::vector<std::int64_t>& out)` "
                "(see ddp::sampling::shuffled, sequential, contiguous).");

public:
  template <class... Args> explicit distributed_sampler(Args&&...) {}
};

template <sampling_policy Policy> class distributed_sampler<Policy> {
public:
  using policy_type = Policy;

  distributed_sampler(std::size_t n, int num_replicas, int rank, sampler_options o = {}) {
    if (num_replicas < 1)
      throw error(error_kind::config, "distributed_sampler: num_replicas=" + std::to_string(num_replicas) +
                                          " must be at least 1");
    if (rank < 0 || rank >= num_replicas)
      throw error(error_kind::config, "distributed_sampler: rank=" + std::to_string(rank) +
                                          " must be in [0, num_replicas=" + std::to_string(num_replicas) +
                                          ")");
    ctx_.n = n;
    ctx_.num_replicas = num_replicas;
    ctx_.rank = rank;
    ctx_.seed = o.seed;
    ctx_.drop_last = o.drop_last;
    ctx_.randperm = o.randperm;
    const auto r = static_cast<std::size_t>(num_replicas);
    ctx_.num_samples = o.drop_last ? n / r : (n + r - 1) / r;
    ctx_.total_size = ctx_.num_samples * r;
  }

  /// From a process group (anything with rank() and size()).
  template <class Group>
  requires requires(const Group& g) {
    { g.rank() } -> std::convertible_to<int>;
    { g.size() } -> std::convertible_to<int>;
  }
  distributed_sampler(std::size_t n, const Group& group, sampler_options o = {})
      : distributed_sampler(n, group.size(), group.rank(), o) {}

  /// Like PyTorch: call before each epoch so every epoch is shuffled differently.
  void set_epoch(std::uint64_t epoch) {
    if (epoch != ctx_.epoch) {
      ctx_.epoch = epoch;
      valid_ = false;
    }
  }
  std::uint64_t epoch() const noexcept { return ctx_.epoch; }

  /// Indices this rank visits per epoch (PyTorch's len(sampler)).
  std::size_t size() const noexcept { return ctx_.num_samples; }
  std::size_t total_size() const noexcept { return ctx_.total_size; }
  const sampler_context& context() const noexcept { return ctx_; }

  /// This rank's indices for the current epoch; computed once per epoch.
  std::span<const std::int64_t> indices() const {
    if (!valid_) {
      Policy::rank_indices(ctx_, cache_);
      if (cache_.size() != ctx_.num_samples)
        throw error(error_kind::config, "sampling policy produced " + std::to_string(cache_.size()) +
                                            " indices for rank " + std::to_string(ctx_.rank) + ", expected " +
                                            std::to_string(ctx_.num_samples));
      valid_ = true;
    }
    return cache_;
  }

  auto begin() const { return indices().begin(); }
  auto end() const { return indices().end(); }

private:
  sampler_context ctx_;
  mutable std::vector<std::int64_t> cache_;
  mutable bool valid_ = false;
};

/// Consecutive batches of a sampler's indices, as spans into its index list:
/// no allocation per batch. The last batch is short unless drop_last.
class batch_range {
public:
  batch_range(std::span<const std::int64_t> all, std::size_t batch_size, bool drop_last)
      : all_(all), batch_(batch_size), drop_last_(drop_last) {
    if (batch_size == 0) throw error(error_kind::config, "batches: batch_size must be at least 1");
  }

  class iterator {
  public:
    using value_type = std::span<const std::int64_t>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(std::span<const std::int64_t> all, std::size_t batch, std::size_t pos)
        : all_(all), batch_(batch), pos_(pos) {}
    value_type operator*() const { return all_.subspan(pos_, std::min(batch_, all_.size() - pos_)); }
    iterator& operator++() {
      pos_ += batch_;
      return *this;
    }
    iterator operator++(int) {
      auto t = *this;
      ++*this;
      return t;
    }
    bool operator==(const iterator& o) const { return pos_ == o.pos_; }

  private:
    std::span<const std::int64_t> all_;
    std::size_t batch_ = 1, pos_ = 0;
  };

  /// Number of batches this range yields (those of the epoch from first() on).
  std::size_t size() const { return epoch_batches() - first_; }
  /// Number of batches in the whole epoch.
  std::size_t epoch_batches() const {
    return drop_last_ ? all_.size() / batch_ : (all_.size() + batch_ - 1) / batch_;
  }
  /// Index within the epoch of the first batch this range yields.
  std::size_t first() const { return first_; }
  iterator begin() const { return {all_, batch_, first_ * batch_}; }
  iterator end() const { return {all_, batch_, epoch_batches() * batch_}; }

  /// The same epoch's batches from batch `first` on: resuming mid-epoch, the
  /// sampler's position is (epoch, batches done), and the batches that follow
  /// are exactly those an uninterrupted epoch would have seen.
  batch_range from(std::size_t first) const {
    if (first > epoch_batches())
      throw error(error_kind::config, "batches: cannot start at batch " + std::to_string(first) +
                                          " of an epoch of " + std::to_string(epoch_batches()) +
                                          " batches (was the position saved with another batch size, "
                                          "data set size or world size?)");
    batch_range r = *this;
    r.first_ = first;
    return r;
  }

private:
  std::span<const std::int64_t> all_;
  std::size_t batch_;
  bool drop_last_;
  std::size_t first_ = 0;
};

template <sampling_policy Policy>
batch_range batches(const distributed_sampler<Policy>& s, std::size_t batch_size, bool drop_last = false) {
  return batch_range(s.indices(), batch_size, drop_last);
}

DDP_END_NAMESPACE

#endif // DDP_SAMPLER_HPP
// ---- end ddp/sampler.hpp ----
// ---- begin ddp/sharded_data_parallel.hpp ----
// ddp::sharded_data_parallel — ZeRO stage 1: gradients are reduce-scattered
// in buckets that launch while backward runs, each rank keeps and updates
// only its 1/W of the parameters' elements (and so of the optimizer's state),
// and the updated shards are all-gathered so that every rank holds the whole
// model again. Same models, policies and options as distributed_data_parallel
// (its step driver: marks, no_sync, strict_marking, join), except
// compute_stream, for device gradients; the optimizers that go with it are in
// ddp/optim/.
#ifndef DDP_SHARDED_DATA_PARALLEL_HPP
#define DDP_SHARDED_DATA_PARALLEL_HPP

// ---- begin ddp/detail/sharded/shard_engine.hpp ----
// The collectives of sharded_data_parallel on host memory: per bucket, a
// reduce-scatter of the packed gradients (converted and scaled in the packing
// pass) into this rank's averaged gradient shard, and after the optimizer
// step an all-gather of every rank's updated shard back into the parameters.
#ifndef DDP_DETAIL_SHARDED_SHARD_ENGINE_HPP
#define DDP_DETAIL_SHARDED_SHARD_ENGINE_HPP

// ---- begin ddp/detail/sharded/shard_layout.hpp ----
// Which elements of each bucket a rank owns under sharded_data_parallel, and
// where they travel. A bucket of n elements is cut into W contiguous shards
// whose sizes differ by at most one (the first n % W ranks own one more); on
// the wire each shard is padded to c = ceil(n / W) elements, since the
// backends' reduce_scatter and all_gather move equal blocks. A pure function
// of the plan, the world size and the rank (tests/unit/test_shard_layout.cpp).
#ifndef DDP_DETAIL_SHARDED_SHARD_LAYOUT_HPP
#define DDP_DETAIL_SHARDED_SHARD_LAYOUT_HPP


#include <algorithm>
#include <cstddef>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// A run of one parameter's elements inside one shard.
struct shard_run {
  std::size_t param;        ///< registration index
  std::size_t param_offset; ///< first element within the parameter
  std::size_t padded;       ///< its position in the padded wire layout (W blocks of `block`)
  std::size_t count;
  int owner; ///< the rank whose shard holds it
};

struct bucket_shards {
  std::size_t block = 0;        ///< c: elements per rank on the wire
  std::size_t begin = 0;        ///< this rank's first element of the bucket
  std::size_t size = 0;         ///< this rank's elements (block or block - 1, or 0)
  std::vector<shard_run> runs;  ///< every run, in bucket order
  std::vector<shard_run> owned; ///< this rank's runs
};

inline std::size_t shard_begin(std::size_t n, std::size_t world, std::size_t r) {
  return r * (n / world) + std::min(r, n % world);
}

inline bucket_shards shard_bucket(const planned_bucket& b, const std::vector<std::size_t>& counts, int world,
                                  int rank) {
  const auto w = static_cast<std::size_t>(world), n = b.elements;
  bucket_shards s;
  s.block = (n + w - 1) / w;
  s.begin = shard_begin(n, w, static_cast<std::size_t>(rank));
  s.size = shard_begin(n, w, static_cast<std::size_t>(rank) + 1) - s.begin;
  for (std::size_t k = 0; k < b.params.size(); ++k) {
    const std::size_t first = b.offsets[k], last = first + counts[b.params[k]];
    for (std::size_t r = 0; r < w; ++r) {
      const std::size_t lo = std::max(first, shard_begin(n, w, r)),
                        hi = std::min(last, shard_begin(n, w, r + 1));
      if (lo >= hi) continue;
      shard_run run{b.params[k], lo - first, r * s.block + (lo - shard_begin(n, w, r)), hi - lo,
                    static_cast<int>(r)};
      s.runs.push_back(run);
      if (static_cast<int>(r) == rank) s.owned.push_back(run);
    }
  }
  return s;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHARDED_SHARD_LAYOUT_HPP
// ---- end ddp/detail/sharded/shard_layout.hpp ----

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

template <communicator Comm> class shard_engine {
public:
  shard_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params)
      : comm_(comm), plan_(plan), params_(params) {
    std::vector<std::size_t> counts;
    for (auto& p : params)
      counts.push_back(p.count);
    for (auto& b : plan.buckets) {
      bucket_state s;
      s.shards = shard_bucket(b, counts, comm.size(), comm.rank());
      const std::size_t padded = s.shards.block * static_cast<std::size_t>(comm.size());
      // The reduce-scatter's input and the all-gather's output are never live at
      // once (synchronize() ends one before step() starts the other): one buffer.
      s.staging.assign(padded * std::max(size_of(b.wire_type), size_of(b.param_type)), std::byte{0});
      s.recv.assign(s.shards.block * size_of(b.wire_type), std::byte{0});
      if (b.wire_type != b.param_type) s.grad.assign(s.shards.size * size_of(b.param_type), std::byte{0});
      s.gather_in.assign(s.shards.block * size_of(b.param_type), std::byte{0});
      state_.push_back(std::move(s));
    }
  }
  shard_engine(const shard_engine&) = delete;
  shard_engine& operator=(const shard_engine&) = delete;
  ~shard_engine() { wait_all_quietly(); }

  const bucket_shards& shards(std::size_t b) const { return state_[b].shards; }
  /// This rank's averaged gradient of bucket b (param type, shards(b).size
  /// elements): the reduce-scatter's output itself where no conversion is needed.
  std::byte* grad_shard(std::size_t b) {
    auto& s = state_[b];
    return plan_.buckets[b].wire_type == plan_.buckets[b].param_type ? s.recv.data() : s.grad.data();
  }

  /// Bytes this engine holds for its collectives (staging, not optimizer state).
  std::size_t buffer_bytes() const {
    std::size_t n = 0;
    for (auto& s : state_)
      n += s.staging.size() + s.recv.size() + s.grad.size() + s.gather_in.size() + s.shadow.size();
    return n;
  }

  static void zero(const tensor_slot& p) { std::memset(p.grad, 0, p.count * size_of(p.type)); }

  /// Packs bucket b's gradients (times `scale`, in the wire type) and starts
  /// its reduce-scatter.
  void launch(std::size_t b, double scale) {
    auto& bk = plan_.buckets[b];
    auto& s = state_[b];
    const std::size_t ws = size_of(bk.wire_type), ps = size_of(bk.param_type);
    // Packing writes only the runs: a block's padding holds whatever staging
    // held, and its sum lands past the owner's shard, where nobody reads it.
    for (auto& r : s.shards.runs) {
      auto& p = params_[r.param];
      copy_scaled(s.staging.data() + r.padded * ws, bk.wire_type,
                  static_cast<std::byte*>(p.grad) + r.param_offset * ps, p.type, r.count, scale);
    }
    s.in_flight = reduce(b, s.staging.data());
  }

  /// A joined rank's stand-in: the same reduce-scatter, on zeros.
  void launch_zeros(std::size_t b) {
    auto& s = state_[b];
    s.shadow.assign(s.shards.block * static_cast<std::size_t>(comm_.size()) *
                        size_of(plan_.buckets[b].wire_type),
                    std::byte{0});
    s.in_flight = reduce(b, s.shadow.data());
  }

  /// Waits for bucket b's reduce-scatter and keeps this rank's shard of it.
  void finish(std::size_t b) {
    auto& s = state_[b];
    if (!s.in_flight) return;
    auto w = std::move(*s.in_flight);
    s.in_flight.reset();
    w.wait();
    auto& bk = plan_.buckets[b];
    if (bk.wire_type != bk.param_type)
      copy_scaled(s.grad.data(), bk.param_type, s.recv.data(), bk.wire_type, s.shards.size, 1.0);
  }

  /// Starts bucket b's all-gather of this rank's (updated) parameter shard.
  void start_gather(std::size_t b) {
    auto& bk = plan_.buckets[b];
    auto& s = state_[b];
    const std::size_t ps = size_of(bk.param_type);
    const std::size_t mine = static_cast<std::size_t>(comm_.rank()) * s.shards.block;
    for (auto& r : s.shards.owned)
      std::memcpy(s.gather_in.data() + (r.padded - mine) * ps,
                  static_cast<const std::byte*>(params_[r.param].value) + r.param_offset * ps, r.count * ps);
    s.gathering =
        comm_.all_gather(s.gather_in.data(), s.staging.data(), s.shards.block, bk.param_type, false);
  }

  /// Waits for bucket b's all-gather and writes every rank's shard into the parameters.
  void finish_gather(std::size_t b) {
    auto& s = state_[b];
    if (!s.gathering) return;
    auto w = std::move(*s.gathering);
    s.gathering.reset();
    w.wait();
    const std::size_t ps = size_of(plan_.buckets[b].param_type);
    for (auto& r : s.shards.runs)
      std::memcpy(static_cast<std::byte*>(params_[r.param].value) + r.param_offset * ps,
                  s.staging.data() + r.padded * ps, r.count * ps);
  }

  void wait_all_quietly() {
    for (auto& s : state_) {
      wait_quietly(s.in_flight);
      wait_quietly(s.gathering);
    }
  }

private:
  struct bucket_state {
    bucket_shards shards;
    std::vector<std::byte> staging; ///< packed gradients (wire type), then gathered parameters
    std::vector<std::byte> recv, grad, gather_in, shadow;
    std::optional<work> in_flight, gathering;
  };

  work reduce(std::size_t b, std::byte* data) {
    auto& s = state_[b];
    return comm_.reduce_scatter(data, s.recv.data(), s.shards.block, plan_.buckets[b].wire_type, op::sum,
                                false);
  }

  Comm& comm_;
  const bucket_plan& plan_;
  const std::vector<tensor_slot>& params_;
  std::vector<bucket_state> state_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHARDED_SHARD_ENGINE_HPP
// ---- end ddp/detail/sharded/shard_engine.hpp ----

#include <cmath>
#include <span>
#include <string>

DDP_BEGIN_NAMESPACE

/// One range of parameter elements this rank owns: what an optimizer updates.
template <class T> struct shard_range {
  std::size_t parameter;    ///< registration index
  std::size_t offset;       ///< first element within the parameter
  std::span<T> value;       ///< the parameter's elements, updated in place
  std::span<const T> grad;  ///< their gradient, averaged over all ranks
  std::size_t bucket;       ///< the bucket it belongs to
  std::size_t state_offset; ///< its position in this rank's shard of that bucket (for optimizer state)
};

/// The primary template only diagnoses, as distributed_data_parallel's does.
template <class Model, class Backend, class Bucketing = bucketing::size_capped<>,
          class Reduction = reduction::mean>
class sharded_data_parallel : detail::policy_diagnostics<Model, Backend, Bucketing, Reduction> {
public:
  template <class... Args> explicit sharded_data_parallel(Args&&...) {}
};

template <class Model, class Backend, class Bucketing, class Reduction>
requires model<Model> && backend_policy<Backend> && bucketing_policy<Bucketing> && reduction_policy<Reduction>
class sharded_data_parallel<Model, Backend, Bucketing, Reduction> {
  using comm_type = typename Backend::communicator;

public:
  using model_type = Model;
  using backend_type = Backend;

  /// Verifies the model across ranks, copies rank 0's parameters and buffers
  /// to every rank, and cuts each bucket into W shards. The options are
  /// distributed_data_parallel's; compute_stream, for device gradients, is refused.
  sharded_data_parallel(Model& m, process_group<Backend>& pg, ddp_options o = {})
      : model_(m), pg_(pg), opts_(o), attached_(m), registry_(attached_.walked()), plan_(verify_then_plan()),
        engine_(pg.communicator(), plan_, registry_.parameters()),
        step_(*this, pg.communicator(), opts_, attached_, registry_, plan_) {
    attached_.connect(gradient_sink(*this));
  }
  sharded_data_parallel(const sharded_data_parallel&) = delete;
  sharded_data_parallel& operator=(const sharded_data_parallel&) = delete;

  Model& module() noexcept { return model_; }
  process_group<Backend>& group() noexcept { return pg_; }
  std::size_t num_parameters() const noexcept { return registry_.size(); }
  const std::string& parameter_name(std::size_t i) const { return registry_.parameters().at(i).name; }
  std::size_t num_buckets() const noexcept { return plan_.buckets.size(); }
  /// This rank's elements of bucket b (the parameters' dtype: float or double).
  std::size_t shard_size(std::size_t b) const { return engine_.shards(b).size; }
  dtype bucket_type(std::size_t b) const { return plan_.buckets.at(b).param_type; }
  /// This rank's elements over all buckets: 1/W of the model, within one per bucket.
  /// Bytes held for the collectives: the packing/gathering buffers (about one
  /// model's worth in the wire or parameter dtype, whichever is wider) and the shards.
  std::size_t buffer_bytes() const { return engine_.buffer_bytes(); }
  std::size_t shard_elements() const {
    std::size_t n = 0;
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      n += engine_.shards(b).size;
    return n;
  }

  /// As distributed_data_parallel's: gradient `index` (or `grad`) is final
  /// for this step; a bucket whose gradients are all final starts its reduce-scatter.
  void mark_grad_ready(std::size_t index) { step_.mark(index, detail::mark_state::ready); }
  template <tensor G> void mark_grad_ready(const G& grad) {
    step_.mark(step_.index_of(grad), detail::mark_state::ready);
  }
  /// This rank has no gradient for `index` this step: it contributes zeros.
  void mark_unused(std::size_t index) { step_.mark(index, detail::mark_state::unused); }
  /// Whether gradient `index` was marked (ready or unused) in the step under way.
  bool marked(std::size_t index) const { return step_.marked(index); }
  template <tensor G> void mark_unused(const G& grad) {
    step_.mark(step_.index_of(grad), detail::mark_state::unused);
  }

  /// Launches what is left (unmarked gradients count as ready unless
  /// strict_marking) and waits: each rank then holds the averaged gradient of
  /// its shard, for for_each_shard(). The model's own gradients are left as
  /// backward made them. Inside no_sync(), does nothing but end the step.
  /// After one that failed, the optimizer's step is refused.
  void synchronize() {
    synchronized_ = false;
    const bool communicated = step_.synchronize(
        [&] {
          launch_ready();
          for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
            engine_.finish(b);
          if (opts_.broadcast_buffers && !registry_.buffers().empty())
            registry_.broadcast_from_rank0(pg_.communicator(), /*buffers_only=*/true, host_only_);
        },
        [&] { engine_.wait_all_quietly(); });
    synchronized_ = communicated;
  }

  /// Calls f(shard_range<T>&) for every range this rank owns (T: float or
  /// double, the parameter's type), bucket by bucket.
  template <class F> void for_each_shard(F&& f) {
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      visit_bucket(b, f);
  }

  /// Scales the averaged gradient shards so that the whole gradient's 2-norm
  /// (over all ranks) is at most `max_norm` (torch.nn.utils.clip_grad_norm_);
  /// returns the norm before clipping. Between synchronize() and the step: the
  /// model's own gradients are not the averaged ones here.
  double clip_grad_norm(double max_norm) {
    if (!synchronized_)
      throw error(error_kind::config, "rank " + std::to_string(pg_.rank()) +
                                          ": clip_grad_norm() before synchronize(): the shards hold no "
                                          "averaged gradient yet");
    std::vector<double> sum{0.0};
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      with_grad_shard(b, [&](auto* g, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
          sum[0] += static_cast<double>(g[i]) * static_cast<double>(g[i]);
      });
    pg_.all_reduce(sum);
    const double norm = std::sqrt(sum[0]), factor = max_norm / (norm + 1e-6);
    if (factor < 1.0)
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        with_grad_shard(b, [&](auto* g, std::size_t n) {
          using T = std::remove_pointer_t<decltype(g)>;
          for (std::size_t i = 0; i < n; ++i)
            g[i] = static_cast<T>(g[i] * static_cast<T>(factor));
        });
    return norm;
  }

  /// Copies every rank's shard of the parameters to every rank.
  void gather_parameters() {
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      engine_.start_gather(b);
    finish_gathers();
  }

  /// for_each_shard(f), starting each bucket's all-gather as soon as its
  /// ranges are updated (it overlaps the updates of the next bucket); returns
  /// with the parameters whole on every rank. What ddp::optim's step() calls.
  template <class F> void update_shards(F&& f) {
    if (!synchronized_)
      throw error(error_kind::config, "rank " + std::to_string(pg_.rank()) +
                                          ": an optimizer step before synchronize(): the shards hold no "
                                          "averaged gradient yet");
    synchronized_ = false; // a failed update is not retried on the same gradients
    try {
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
        visit_bucket(b, f);
        engine_.start_gather(b);
      }
    } catch (const std::exception& e) {
      // Peers wait in this step's later all-gathers: fail them now, not at their deadline.
      pg_.abort("rank " + std::to_string(pg_.rank()) + ": the optimizer step failed: " + e.what());
      engine_.wait_all_quietly();
      throw;
    }
    finish_gathers();
  }

  /// While the guard lives, gradients accumulate locally: marks are ignored
  /// and synchronize() communicates nothing.
  using no_sync_guard = ddp::no_sync_guard;
  [[nodiscard]] no_sync_guard no_sync() { return no_sync_guard(step_.no_sync_depth()); }

  /// For uneven inputs (options.uneven_inputs on every rank): a rank out of
  /// data calls join(optimizer). Until every rank has joined it shadows the
  /// others' steps: zeros into their reduce-scatters, and its optimizer's
  /// step on its own shard, whose all-gather the others wait for.
  template <class Optimizer> void join(Optimizer& opt) {
    auto shadow_step = [&] {
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        engine_.launch_zeros(b);
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        engine_.finish(b);
      if (opts_.broadcast_buffers && !registry_.buffers().empty()) // as synchronize() does
        registry_.broadcast_from_rank0(pg_.communicator(), /*buffers_only=*/true, host_only_);
      synchronized_ = true;
      opt.step();
    };
    step_.join(/*prepare=*/[] {}, shadow_step);
  }

private:
  /// Buffers are host memory here: broadcast directly.
  struct host_broadcasts {
    static work broadcast(const detail::tensor_slot&) {
      throw error(error_kind::config, "sharded_data_parallel: device tensors are not supported yet");
    }
    static void complete(std::vector<work>& ws) {
      for (auto& w : ws)
        w.wait();
    }
  };

  template <class F> void with_grad_shard(std::size_t b, F&& f) {
    if (plan_.buckets[b].param_type == dtype::f32)
      f(reinterpret_cast<float*>(engine_.grad_shard(b)), engine_.shards(b).size);
    else
      f(reinterpret_cast<double*>(engine_.grad_shard(b)), engine_.shards(b).size);
  }

  template <class F> void visit_bucket(std::size_t b, F& f) {
    auto& bk = plan_.buckets[b];
    auto& sh = engine_.shards(b);
    auto visit = [&](auto* grad_shard) {
      using T = std::remove_pointer_t<decltype(grad_shard)>;
      for (auto& r : sh.owned) {
        auto& p = registry_[r.param];
        const std::size_t at = r.padded - static_cast<std::size_t>(pg_.rank()) * sh.block;
        shard_range<T> range{r.param,
                             r.param_offset,
                             std::span<T>(static_cast<T*>(p.value) + r.param_offset, r.count),
                             std::span<const T>(grad_shard + at, r.count),
                             b,
                             at};
        f(range);
      }
    };
    if (bk.param_type == dtype::f32)
      visit(reinterpret_cast<float*>(engine_.grad_shard(b)));
    else
      visit(reinterpret_cast<double*>(engine_.grad_shard(b)));
  }

  void finish_gathers() {
    try {
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        engine_.finish_gather(b);
    } catch (...) {
      engine_.wait_all_quietly();
      throw;
    }
  }

  detail::bucket_plan verify_then_plan() {
    if (opts_.compute_stream)
      throw error(error_kind::config,
                  "rank " + std::to_string(pg_.rank()) +
                      ": ddp_options::compute_stream is for gradients in device memory, and "
                      "sharded_data_parallel takes host tensors: leave it null (use "
                      "distributed_data_parallel on the GPU)",
                  pg_.rank());
    for (auto& p : registry_.parameters()) {
      if (p.on_device)
        throw error(error_kind::config, "rank " + std::to_string(pg_.rank()) + ": parameter '" + p.name +
                                            "' lives in device memory: sharded_data_parallel takes host "
                                            "tensors for now (use distributed_data_parallel on the GPU)");
      if (p.type != dtype::f32 && p.type != dtype::f64)
        throw error(error_kind::config,
                    "rank " + std::to_string(pg_.rank()) + ": parameter '" + p.name + "' is " +
                        std::string(to_string(p.type)) +
                        ": sharded_data_parallel updates float32 or float64 parameters (keep half-precision "
                        "parameters as float32 and use reduction::fp16_compressed_mean or "
                        "bf16_compressed_mean to halve the traffic)");
    }
    for (auto& s : registry_.buffers())
      if (s.on_device)
        throw error(error_kind::config, "buffer '" + s.name + "' lives in device memory: not supported yet");
    if (opts_.verify_model) registry_.verify_across_ranks(pg_.communicator());
    registry_.broadcast_from_rank0(pg_.communicator(), /*buffers_only=*/false, host_only_);
    auto descs = detail::describe_for_bucketing(registry_.parameters());
    return detail::make_bucket_plan(Bucketing::assign(std::span<const parameter_desc>(descs)),
                                    registry_.parameters(), [](dtype d) { return Reduction::wire(d); }, {});
  }

  double mean_scale() const { return Reduction::average ? 1.0 / pg_.size() : 1.0; }

  // The step driver's hooks (detail/data_parallel/step_driver.hpp).
  friend detail::step_driver<sharded_data_parallel, comm_type, Model>;
  /// The shard engine reads the registry's addresses at every launch: nothing to lay out again.
  void storage_moved() {}
  void zero_gradient(std::size_t index) { engine_.zero(registry_[index]); }
  void gradient_marked(std::size_t, detail::mark_state) { launch_ready(); }

  void launch_ready() {
    step_.launch_ready([&](std::size_t b) { engine_.launch(b, mean_scale()); }, plan_.buckets.size());
  }

  Model& model_;
  process_group<Backend>& pg_;
  ddp_options opts_;
  detail::attached_model<Model> attached_;
  detail::parameter_registry<typename detail::attached_model<Model>::walked_type> registry_;
  host_broadcasts host_only_;
  detail::bucket_plan plan_;
  detail::shard_engine<comm_type> engine_;
  detail::step_driver<sharded_data_parallel, comm_type, Model> step_; ///< marks, no_sync, join
  bool synchronized_ = false; ///< the shards hold this step's averaged gradients
};

template <class M, class B> sharded_data_parallel(M&, process_group<B>&) -> sharded_data_parallel<M, B>;
template <class M, class B>
sharded_data_parallel(M&, process_group<B>&, ddp_options) -> sharded_data_parallel<M, B>;

DDP_END_NAMESPACE

#endif // DDP_SHARDED_DATA_PARALLEL_HPP
// ---- end ddp/sharded_data_parallel.hpp ----
// The NCCL backend joins when the build says so (target ddp::nccl defines DDP_WITH_NCCL).
#if defined(DDP_WITH_NCCL)
// ---- begin ddp/backend/nccl.hpp ----
// The NCCL backend policy: GPU collectives, host tensors staged through the
// device. Its communicator is detail/nccl/communicator.hpp. Needs <nccl.h> and
// the CUDA runtime: link ddp::nccl.
#ifndef DDP_BACKEND_NCCL_HPP
#define DDP_BACKEND_NCCL_HPP

// ---- begin ddp/detail/nccl/communicator.hpp ----
// The NCCL communicator behind ddp::nccl (backend/nccl.hpp): GPU collectives.
// Tensors in device memory (ddp::device_span, passed with the device_memory
// tag: known at compile time) go to NCCL directly; host tensors are staged
// through a pinned host buffer and a device buffer kept across calls.
// Collectives are queued in submission order by one worker thread on one CUDA
// stream. A device collective's job does not wait for it: it records an event
// after it and hands the work to a watcher thread (completion_watch.hpp) that
// finishes it when the event completes, so a step's collectives reach NCCL
// back to back, and work::stream_wait(stream) makes a caller's stream wait for
// that event without blocking the caller. A host collective's job waits for
// the stream (the copy back needs it). Every wait polls with a deadline and
// aborts the communicator on timeout or error, so a dead or stalled peer is an
// error naming the collective, not a hang.
#ifndef DDP_DETAIL_NCCL_COMMUNICATOR_HPP
#define DDP_DETAIL_NCCL_COMMUNICATOR_HPP

// ---- begin ddp/detail/backend/collective_queue.hpp ----
// What every backend shares: one ordered queue of collectives per group (so
// ranks stay in lock-step and an async bucket never crosses a blocking call),
// each collective described once — "rank 1: all_reduce #12 (4096 x float32)" —
// so that a timeout or a failure names it, and the first failure poisoning the
// group. Every collective passes through the flight recorder on its way, and
// onto the timeline (DDP_TRACE) when that is on.
#ifndef DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP
#define DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP

// ---- begin ddp/detail/backend/ordered_queue.hpp ----
// One worker thread that runs a process group's collectives strictly in
// submission order. The first failure poisons the queue: every pending and
// every later task fails at once with that same error, so no rank waits on a
// collective its peers will never join.
#ifndef DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP
#define DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP


#include <deque>
#include <functional>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

class ordered_queue {
public:
  /// Gets its own work's state: a collective that completes on a device
  /// stream publishes how to wait for it there (work_state::queued_on_device).
  using task = std::function<void(work_state&)>;

private:
  struct item {
    task fn;
    std::shared_ptr<work_state> state;
  };

public:
  ordered_queue() : thread_([this] { run(); }) {}
  ordered_queue(const ordered_queue&) = delete;
  ordered_queue& operator=(const ordered_queue&) = delete;
  ~ordered_queue() { stop(); }

  /// Runs (or fails) what is queued, then ends the worker; later submissions
  /// fail at once. abort() and poisoned() keep working.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

  /// Queues `fn`; the returned work completes when it ran (or failed), or,
  /// where `fn` deferred its completion, when its backend says so.
  /// With `inline_if_idle`, a caller that is about to wait anyway runs `fn`
  /// itself when nothing is queued or running: same order, no thread hand-off.
  work submit(task fn, std::string what, std::chrono::milliseconds timeout, bool inline_if_idle = false) {
    auto st = std::make_shared<work_state>();
    st->what = std::move(what);
    st->timeout = timeout;
    {
      std::lock_guard lock(mu_);
      if (poison_ || stop_) {
        st->finish(poison_ ? poison_
                           : std::make_exception_ptr(error(
                                 error_kind::backend, st->what + ": the process group is shutting down")));
        return work(st);
      }
      if (!inline_if_idle || busy_ || !q_.empty()) {
        q_.push_back({std::move(fn), st});
        cv_.notify_one();
        return work(st);
      }
      busy_ = true;
    }
    execute(item{std::move(fn), st});
    return work(st);
  }

  /// The error that poisoned the queue, if any.
  std::exception_ptr poisoned() const {
    std::lock_guard lock(mu_);
    return poison_;
  }

  /// Poisons the queue with `why` (unless already poisoned): what is queued
  /// fails now, later submissions fail at once; a running task is not touched.
  void abort(std::exception_ptr why) {
    std::deque<item> failed;
    {
      std::lock_guard lock(mu_);
      if (!poison_) poison_ = std::move(why);
      why = poison_;
      failed.swap(q_);
    }
    for (auto& f : failed)
      f.state->finish(why);
    idle_cv_.notify_all();
  }

  /// Blocks until everything queued so far has run.
  void drain() {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return q_.empty() && !busy_; });
  }

private:
  void run() {
    trace::thread_label = "comm"; // its row on the timeline
    for (;;) {
      item it;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !busy_ && (stop_ || !q_.empty()); });
        if (q_.empty()) return; // stop_ and nothing left
        it = std::move(q_.front());
        q_.pop_front();
        busy_ = true;
      }
      execute(std::move(it));
    }
  }

  /// Runs one item; the caller has set busy_.
  void execute(item it) {
    std::exception_ptr failure;
    try {
      it.fn(*it.state);
    } catch (...) { failure = std::current_exception(); }
    std::deque<item> failed;
    {
      std::lock_guard lock(mu_);
      if (failure && !poison_) {
        poison_ = failure;
        failed.swap(q_);
      }
      busy_ = false;
      // Notified under the lock: once the works below finish, a waiting thread
      // may destroy this queue, so nothing here may touch it after that.
      idle_cv_.notify_all();
      // The worker only when items queued behind an inline run (or a stop
      // waited for it): waking the idle worker after every inline collective
      // cost a futex wake and a context switch each; a 4 KiB all-reduce over
      // shm at 2 ranks took 13 us (median of 3000) that way, 2-4.6 us without.
      if (!q_.empty() || stop_) cv_.notify_one();
    }
    // A task whose collective completes on a device stream (work_state::
    // queued_on_device) is finished by its backend when the device is done.
    if (failure || !it.state->is_deferred()) it.state->finish(failure);
    for (auto& f : failed)
      f.state->finish(failure);
  }

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<item> q_;
  std::exception_ptr poison_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP
// ---- end ddp/detail/backend/ordered_queue.hpp ----
// ---- begin ddp/detail/fault/flight_recorder.hpp ----
// The flight recorder: each rank keeps its last 64 collectives (sequence
// number, kind, dtype, count, bucket when known, state, times), like PyTorch's
// NCCL flight recorder. When a collective times out or loses a peer, the
// survivors compare how far each rank got (the desync report, gloo.hpp), and
// DDP_FLIGHT_RECORDER=DIR writes each rank's record to DIR/rank_<r>.json.
#ifndef DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP
#define DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP


#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class flight_state : std::uint8_t { queued, running, done, failed };

constexpr std::string_view to_string(flight_state s) noexcept {
  switch (s) {
  case flight_state::queued: return "queued";
  case flight_state::running: return "running";
  case flight_state::done: return "done";
  case flight_state::failed: return "failed";
  }
  return "unknown";
}

struct flight_entry {
  std::uint64_t seq = 0;
  std::string kind; ///< "all_reduce", "broadcast", ...
  dtype dt = dtype::u8;
  std::size_t count = 0;
  int bucket = -1; ///< -1: not a DDP bucket, or not known
  flight_state state = flight_state::queued;
  /// Wall-clock microseconds since the epoch (comparable across ranks of one
  /// machine); 0 when that step has not happened.
  std::int64_t queued_us = 0, started_us = 0, finished_us = 0;
};

/// How far one rank got: the latest collective that started (or, when none
/// did, nothing). Published through the store for the desync report.
struct flight_progress {
  std::int64_t seq = -1; ///< -1: no collective started yet
  std::string kind;
  flight_state state = flight_state::queued;

  std::string encode() const {
    return std::to_string(seq) + " " + (kind.empty() ? "-" : kind) + " " + std::string(to_string(state));
  }
  static flight_progress decode(std::string_view s) {
    flight_progress p;
    auto a = s.find(' ');
    auto b = a == std::string_view::npos ? a : s.find(' ', a + 1);
    if (b == std::string_view::npos) return p;
    p.seq = parse_int(s.substr(0, a)).value_or(-1);
    p.kind = std::string(s.substr(a + 1, b - a - 1));
    auto st = s.substr(b + 1);
    for (auto x : {flight_state::queued, flight_state::running, flight_state::done, flight_state::failed})
      if (st == to_string(x)) p.state = x;
    return p;
  }
  std::string describe() const {
    if (seq < 0) return "no collective started yet";
    return kind + " #" + std::to_string(seq) + " (" + std::string(to_string(state)) + ")";
  }
};

class flight_recorder {
public:
  static constexpr std::size_t capacity = 64;

  void queued(std::uint64_t seq, std::string_view kind, dtype dt, std::size_t count, int bucket = -1) {
    std::lock_guard lock(mu_);
    auto& e = ring_[seq % capacity];
    e = flight_entry{seq, std::string(kind), dt, count, bucket, flight_state::queued, now_us(), 0, 0};
    if (seq + 1 > total_) total_ = seq + 1;
  }
  void running(std::uint64_t seq) {
    std::lock_guard lock(mu_);
    if (auto* e = find(seq)) {
      e->state = flight_state::running;
      e->started_us = now_us();
      if (static_cast<std::int64_t>(seq) > last_started_) last_started_ = static_cast<std::int64_t>(seq);
    }
  }
  void finished(std::uint64_t seq, bool ok) {
    std::lock_guard lock(mu_);
    if (auto* e = find(seq)) {
      e->state = ok ? flight_state::done : flight_state::failed;
      e->finished_us = now_us();
    }
  }
  /// A line about the failure (the desync report) for the JSON record.
  void note(std::string text) {
    std::lock_guard lock(mu_);
    note_ = std::move(text);
  }

  /// The retained entries, oldest first.
  std::vector<flight_entry> snapshot() const {
    std::lock_guard lock(mu_);
    std::vector<flight_entry> out;
    std::uint64_t first = total_ > capacity ? total_ - capacity : 0;
    for (std::uint64_t s = first; s < total_; ++s)
      out.push_back(ring_[s % capacity]);
    return out;
  }

  flight_progress progress() const {
    std::lock_guard lock(mu_);
    flight_progress p;
    if (last_started_ < 0) return p;
    const auto& e = ring_[static_cast<std::uint64_t>(last_started_) % capacity];
    p.seq = last_started_;
    p.kind = e.kind;
    p.state = e.state;
    return p;
  }

  std::string to_json(int rank) const {
    auto entries = snapshot();
    std::string note;
    {
      std::lock_guard lock(mu_);
      note = note_;
    }
    std::string j = "{\n  \"rank\": " + std::to_string(rank) +
                    ",\n  \"capacity\": " + std::to_string(capacity) + ",\n  \"note\": \"" +
                    json_escape(note) + "\",\n  \"entries\": [";
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      j += std::string(i ? "," : "") + "\n    {\"seq\": " + std::to_string(e.seq) + ", \"kind\": \"" +
           json_escape(e.kind) + "\", \"dtype\": \"" + std::string(to_string(e.dt)) +
           "\", \"count\": " + std::to_string(e.count) +
           ", \"bucket\": " + (e.bucket < 0 ? std::string("null") : std::to_string(e.bucket)) +
           ", \"state\": \"" + std::string(to_string(e.state)) +
           "\", \"queued_us\": " + std::to_string(e.queued_us) +
           ", \"started_us\": " + std::to_string(e.started_us) +
           ", \"finished_us\": " + std::to_string(e.finished_us) + "}";
    }
    j += "\n  ]\n}\n";
    return j;
  }

  /// With DDP_FLIGHT_RECORDER=DIR, writes DIR/rank_<rank>.json (once per
  /// process: the first failure is the one worth reading). Returns the path, or
  /// "" when not asked or not written (a warning says why).
  std::string dump_if_asked(int rank) {
    auto dir = getenv_str("DDP_FLIGHT_RECORDER");
    if (!dir || dir->empty()) return {};
    {
      std::lock_guard lock(mu_);
      if (dumped_) return {};
      dumped_ = true;
    }
    std::string path = *dir + "/rank_" + std::to_string(rank) + ".json";
    std::string body = to_json(rank);
    std::FILE* f = std::fopen(path.c_str(), "w");
    bool ok = f && std::fwrite(body.data(), 1, body.size(), f) == body.size();
    if (f) ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
      std::string line = "[ddp rank " + std::to_string(rank) + "] DDP_FLIGHT_RECORDER: could not write " +
                         path + " (does the directory exist and is it writable?)\n";
      std::fwrite(line.data(), 1, line.size(), stderr);
      return {};
    }
    return path;
  }

private:
  static std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  flight_entry* find(std::uint64_t seq) {
    auto& e = ring_[seq % capacity];
    return e.seq == seq ? &e : nullptr;
  }
  static std::string json_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buf;
      } else {
        out += c;
      }
    }
    return out;
  }

  mutable std::mutex mu_;
  std::array<flight_entry, capacity> ring_{};
  std::uint64_t total_ = 0;
  std::int64_t last_started_ = -1;
  std::string note_;
  bool dumped_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP
// ---- end ddp/detail/fault/flight_recorder.hpp ----

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

class collective_queue {
public:
  /// `note` is appended to every description (", NCCL").
  collective_queue(int rank, std::chrono::milliseconds timeout, std::string note = {})
      : trace_(rank), rank_(rank), timeout_(timeout), note_(std::move(note)) {}

  /// A collective's work: body(what, state), `state` the returned work's.
  using body_type = std::function<void(const std::string& what, work_state& state)>;

  /// Queues `body(what, state)` behind every collective submitted before it.
  /// With `blocking`, a caller about to wait anyway runs it inline when the queue is idle. `bucket`: the DDP
  /// bucket this collective reduces, when the caller knows it (else the one distributed_data_parallel is
  /// launching on this thread, if any). Not a template: one copy of this code, whatever the body
  /// (a template on the body's type compiled once per kind of collective).
  work submit(std::string_view name, std::size_t n, dtype dt, bool blocking, body_type body,
              int bucket = -1) {
    const std::uint64_t seq = seq_++;
    std::string what = "rank " + std::to_string(rank_) + ": " + std::string(name) + " #" +
                       std::to_string(seq) + " (" + std::to_string(n) + " x " + std::string(to_string(dt)) +
                       note_ + ")";
    if (bucket < 0) bucket = trace::submitting_bucket;
    recorder_.queued(seq, name, dt, n, bucket);
    traced t{-1, 0, bucket, nullptr};
    if (trace::on())
      t = {trace::now_ns(), static_cast<std::int64_t>(n * size_of(dt)), bucket, trace_label(name)};
    return queue_->submit(
        [this, body = std::move(body), what, seq, t](work_state& self) mutable {
          const std::int64_t start = t.queued_ns >= 0 ? trace::now_ns() : -1;
          recorder_.running(seq);
          auto done = [this, seq, t, start](bool ok) {
            recorder_.finished(seq, ok);
            t.record(seq, start);
            if (!ok) recorder_.dump_if_asked(rank_);
          };
          try {
            body(what, self);
          } catch (...) {
            done(false);
            throw;
          }
          if (self.is_deferred())
            self.after_deferred_finish(done); // NCCL's device collectives: when the device is done
          else
            done(true);
        },
        what, timeout_, blocking);
  }

  /// The last collectives of this rank (the desync report reads it).
  flight_recorder& recorder() noexcept { return recorder_; }

  /// Fails everything queued but not started with `why` and refuses later
  /// collectives; the one running (if any) finishes on its own. For a rank
  /// leaving on an error of its own, before it closes its connections.
  void abort(std::exception_ptr why) { queue_->abort(std::move(why)); }

  /// The error that poisoned the group, if any.
  std::exception_ptr poisoned() const { return queue_->poisoned(); }
  /// Blocks until every collective submitted so far has run.
  void drain() { queue_->drain(); }
  /// Finishes (or fails) what is queued and stops the worker: a backend calls
  /// this before it frees what its collectives use.
  /// abort() and poisoned() still work afterwards (a backend whose collectives
  /// finish later, on another thread, may fail the group then).
  void stop() { queue_->stop(); }

private:
  /// What the timeline keeps of a collective: when it was queued, its size and
  /// bucket, its kind as a string literal.
  struct traced {
    std::int64_t queued_ns; ///< -1: not traced
    std::int64_t bytes;
    int bucket;
    const char* label;
    void record(std::uint64_t seq, std::int64_t start) const {
      if (start < 0) return;
      trace::record(trace::kind::collective, start, trace::now_ns() - start, static_cast<std::int64_t>(seq),
                    bytes, bucket, start - queued_ns, label);
    }
  };
  static const char* trace_label(std::string_view name) {
    for (const char* k : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"})
      if (name == k) return k;
    return "collective";
  }

  trace::session trace_; // first: the trace is written after the worker stopped
  int rank_;
  std::chrono::milliseconds timeout_;
  std::string note_;
  std::atomic<std::uint64_t> seq_{0};
  flight_recorder recorder_; // before queue_: the worker records into it until it stops
  std::unique_ptr<ordered_queue> queue_ = std::make_unique<ordered_queue>();
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP
// ---- end ddp/detail/backend/collective_queue.hpp ----
// ---- begin ddp/detail/backend/completion_watch.hpp ----
// Finishes the works of collectives that complete on a device stream (NCCL,
// device tensors), from a thread of its own, in the order they were queued.
// The communicator's worker queues such a collective, records an event after
// it and hands both here instead of waiting: so it queues the next one at once
// (a step's buckets reach NCCL back to back, and work::stream_wait returns as
// soon as its collective is queued, not after those before it ended), while
// every collective keeps its deadline. PyTorch's NCCL watchdog does this job.
//
// The watcher polls the oldest outstanding completion (one stream: they
// complete in order), the communicator's health (`health(what)`: its
// asynchronous error, or the group's error once it was aborted: an aborted
// NCCL communicator's kernels exit, so its events complete, and that is not
// a success) and the deadline. The first failure poisons the group, fails
// every outstanding work, then aborts the communicator; so does fail_all(),
// for a failure the communicator's worker found.
//
// `Completion` is a device event's handle: `bool ready() const` (throws a
// ddp::error when the device reported an error). CUDA-free, so tests/unit
// drives it with completions of their own.
#ifndef DDP_DETAIL_BACKEND_COMPLETION_WATCH_HPP
#define DDP_DETAIL_BACKEND_COMPLETION_WATCH_HPP


#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Completion> class completion_watch {
public:
  using clock = std::chrono::steady_clock;

  /// Called on whichever thread found the failure, with no lock of this
  /// class held; none may call fail_all().
  struct hooks {
    std::function<void()> on_start;                               ///< on the watcher thread (cudaSetDevice)
    std::function<std::exception_ptr(const std::string&)> health; ///< see above
    /// Refuses later collectives with the group's error and returns it: the
    /// first failure poisons the group (this one, or one the worker's job
    /// reported meanwhile); the works fail with the same error.
    std::function<std::exception_ptr(std::exception_ptr)> poison;
    std::function<void()> abort; ///< once, after the works failed (an abort may block: cudaFree)
    /// How often `health` runs while nothing completes (it also runs at every
    /// completion): each call takes the communicator's lock its worker
    /// enqueues under.
    std::chrono::microseconds health_every{1000};
  };

  completion_watch(int rank, std::chrono::milliseconds timeout, hooks h)
      : rank_(rank), timeout_(timeout), hooks_(std::move(h)), thread_([this] { run(); }) {}
  completion_watch(const completion_watch&) = delete;
  completion_watch& operator=(const completion_watch&) = delete;
  ~completion_watch() { stop(); }

  /// Takes over `st` (its task called queued_on_device): finished when `done`
  /// is ready, failed at `deadline` (counted from when it was queued, so it
  /// includes the device's backlog ahead of it, as PyTorch's does). Called by
  /// the communicator's worker. Beyond `capacity` outstanding this waits,
  /// bounded by the oldest one's deadline, which the watcher enforces.
  void watch(std::shared_ptr<work_state> st, Completion done, clock::time_point deadline,
             std::string what) noexcept {
    std::unique_lock lock(mu_);
    room_.wait_for(lock, timeout_ + std::chrono::seconds(30),
                   [&] { return failed_ || stop_ || q_.size() < capacity; });
    if (failed_ || stop_) {
      auto why = failed_ ? failed_ : shutting_down(what);
      lock.unlock();
      st->finish(why);
      return;
    }
    q_.push_back(std::make_shared<outstanding>(
        outstanding{std::move(st), std::move(done), deadline, std::move(what)}));
    lock.unlock();
    work_.notify_one();
  }

  /// Fails the group (once: poison, the works, then abort) and every
  /// outstanding work with `why`; later watch() calls fail at once. From any
  /// thread but inside a hook.
  void fail_all(std::exception_ptr why) {
    if (hooks_.poison) why = hooks_.poison(why); // the group's error, whoever failed first
    std::deque<std::shared_ptr<outstanding>> failed;
    bool first = false;
    {
      std::lock_guard lock(mu_);
      first = !failed_;
      if (first) failed_ = why;
      why = failed_;
      failed.swap(q_);
    }
    room_.notify_all();
    for (auto& o : failed)
      o->state->finish(why);
    if (first && hooks_.abort) hooks_.abort();
  }

  /// Blocks until every collective handed over so far completed or failed
  /// (each is bounded by its deadline; this wait too).
  void drain() {
    std::unique_lock lock(mu_);
    room_.wait_for(lock, timeout_ + std::chrono::seconds(30), [&] { return q_.empty(); });
  }

  /// Waits for what is outstanding (as drain()), then ends the thread.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    work_.notify_all();
    room_.notify_all();
    if (thread_.get_id() != std::this_thread::get_id())
      thread_.join();
    else
      thread_.detach(); // from a finish on the watcher itself: nothing may touch this object after
  }

  /// At most this many collectives outstanding on the device: far more than
  /// a step's buckets; it bounds the events alive at once.
  static constexpr std::size_t capacity = 4096;

private:
  struct outstanding {
    std::shared_ptr<work_state> state;
    Completion done;
    clock::time_point deadline;
    std::string what;
  };

  std::exception_ptr shutting_down(const std::string& what) const {
    return std::make_exception_ptr(
        error(error_kind::backend, what + ": the communicator is shutting down", rank_));
  }

  void run() {
    trace::thread_label = "comm (device)";
    if (hooks_.on_start) hooks_.on_start();
    auto last_health = clock::now();
    for (;;) {
      std::shared_ptr<outstanding> front; // a copy: fail_all() may empty q_ from another thread
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return; // stop_, and nothing left
        front = q_.front();
      }
      const auto now = clock::now();
      std::exception_ptr why;
      bool ready = false;
      try {
        ready = front->done.ready();
      } catch (...) { why = std::current_exception(); }
      // The communicator's health: at every completion (an aborted
      // communicator's events complete too), else once a millisecond (each
      // check takes the communicator's lock its worker enqueues under).
      if (!why && (ready || now - last_health > hooks_.health_every)) {
        last_health = now;
        if (hooks_.health) why = hooks_.health(front->what);
      }
      if (!why && !ready && now > front->deadline)
        why = std::make_exception_ptr(error(error_kind::timeout,
                                            front->what + " timed out after " +
                                                std::to_string(timeout_.count()) +
                                                " ms: a rank stalled, died or skipped this collective; the "
                                                "NCCL communicator was aborted",
                                            -1));
      if (why) {
        fail_all(why);
        continue;
      }
      if (!ready) {
        // 20 us while the oldest is young (a small collective's work is not
        // held up by a coarse sleep), then 200 us: a collective that runs for
        // milliseconds gets noticed a fraction later and this thread stays
        // off the cores backward computes on.
        const bool young = now - front->deadline + timeout_ < std::chrono::milliseconds(2);
        std::this_thread::sleep_for(std::chrono::microseconds(young ? 20 : 200));
        continue;
      }
      {
        std::lock_guard lock(mu_);
        if (q_.empty() || q_.front() != front) continue; // fail_all() took it meanwhile
        q_.pop_front();
      }
      room_.notify_all();
      front->state->finish(nullptr);
    }
  }

  int rank_;
  std::chrono::milliseconds timeout_;
  hooks hooks_;
  std::mutex mu_;
  std::condition_variable work_, room_;
  std::deque<std::shared_ptr<outstanding>> q_;
  std::exception_ptr failed_;
  bool stop_ = false;
  std::thread thread_; // last: started once the rest exists
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_COMPLETION_WATCH_HPP
// ---- end ddp/detail/backend/completion_watch.hpp ----
// ---- begin ddp/detail/cuda/runtime.hpp ----
// Small owners of CUDA runtime objects (device and pinned buffers, streams,
// events), the one place CUDA return codes become ddp::errors, and host waits
// with a deadline. Host code here never dereferences device memory.
#ifndef DDP_DETAIL_CUDA_RUNTIME_HPP
#define DDP_DETAIL_CUDA_RUNTIME_HPP


#include <cuda.h> // types only (CUresult, CUdevice): driver calls go through cudaGetDriverEntryPoint
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// Turns a CUDA return code into a ddp::error naming the call and what to do.
inline void check(cudaError_t e, const char* call, int rank = -1) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); // clear the sticky non-fatal error so later calls report their own
  throw error(
      error_kind::backend,
      (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string()) + call +
          " failed: " + cudaGetErrorString(e) +
          " (check that a CUDA device is visible and that the device pointers given to ddp (gradients, "
          "device_span tensors) belong to this process's device)",
      rank);
}

/// The calling thread's current device.
inline int current_device(int rank = -1) {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice", rank);
  return d;
}

/// The current device, or -1 where it cannot be read (noexcept: for owners
/// that remember where they were created).
inline int current_device_or_none() noexcept {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

/// Whether `device`'s primary context exists. Switching a thread back to a
/// device without one would create it (cudaSetDevice initialises the context
/// since CUDA 12): hundreds of MiB on a GPU this process never used, for every
/// rank of a node whose own GPU is not device 0 (threads start on device 0).
/// PyTorch's MaybeSetDevice makes the same check. The runtime has no such call:
/// the driver's cuDevicePrimaryCtxGetState is fetched through the runtime
/// (cudaGetDriverEntryPointByVersion, or cudaGetDriverEntryPoint before CUDA
/// 12.5), so nothing links libcuda. When it cannot
/// be asked (an old driver): true, and callers restore as before.
inline bool primary_context_active(int device) noexcept {
  using device_get = CUresult (*)(CUdevice*, int);
  using state_get = CUresult (*)(CUdevice, unsigned int*, int*);
  struct driver {
    device_get get = nullptr;
    state_get state = nullptr;
  };
  static const driver fns = [] {
    driver d;
    auto fetch = [](const char* name) -> void* {
      void* fn = nullptr;
#if CUDART_VERSION >= 12050
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess)
        fn = nullptr;
#else
      // Before 12.5, which added ByVersion and deprecated this form: both
      // functions are the same in every CUDA the runtime can be built for.
      if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault) != cudaSuccess) fn = nullptr;
#endif
      cudaGetLastError();
      return fn;
    };
    d.get = reinterpret_cast<device_get>(fetch("cuDeviceGet"));
    d.state = reinterpret_cast<state_get>(fetch("cuDevicePrimaryCtxGetState"));
    return d;
  }();
  if (!fns.get || !fns.state) return true;
  CUdevice handle{};
  unsigned int flags = 0;
  int active = 1;
  if (fns.get(&handle, device) != CUDA_SUCCESS || fns.state(handle, &flags, &active) != CUDA_SUCCESS)
    return true;
  return active != 0;
}

/// Makes `device` the calling thread's current device for its lifetime, then
/// restores the one it found (ddp's objects live on one device; a user thread
/// may have switched to another since), unless that one has no context yet:
/// restoring would create one (primary_context_active).
class device_guard {
public:
  device_guard(int device, int rank = -1) {
    const int was = current_device(rank);
    if (was == device) return;
    check(cudaSetDevice(device), "cudaSetDevice", rank);
    if (primary_context_active(was)) restore_ = was;
  }
  /// For destructors: never throws. Where `device` (-1: unknown) cannot be made
  /// current (no driver left at exit, an invalid id) nothing changes, and the
  /// destroy call that follows reports into the void as before. Only this
  /// guard's own failures are cleared: a recoverable error the user's code has
  /// not read yet (a launch it queued) stays for the user to read.
  device_guard(int device, std::nothrow_t) noexcept {
    const int was = current_device_or_none();
    if (device < 0 || was < 0 || was == device) return;
    if (cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (primary_context_active(was)) restore_ = was;
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    if (restore_ >= 0) cudaSetDevice(restore_);
  }

private:
  int restore_ = -1;
};

// The owners below remember the device current at their creation and make it
// current again to free what they own: an object may be destroyed on a thread
// or after a guard that left another device current (a process driving
// several GPUs), and a stream or event belongs to its device's context.

/// Device memory, allocated once and kept.
class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaMalloc (a device bucket buffer)") {
    if (bytes) check(cudaMalloc(&p_, bytes), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~device_buffer() {
    if (!p_) return;
    device_guard on(device_, std::nothrow);
    cudaFree(p_);
  }
  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

/// Page-locked host memory (cudaHostAlloc): copies to and from the device run
/// several times faster than from pageable memory (docs/performance.md, On a
/// GPU). Allocated once and kept across steps.
class pinned_buffer {
public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t bytes, int rank = -1,
                         const char* call = "cudaHostAlloc (a pinned staging buffer)") {
    if (bytes) check(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable), call, rank);
    bytes_ = bytes;
    device_ = current_device_or_none();
  }
  pinned_buffer(pinned_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), device_(o.device_) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~pinned_buffer() {
    if (!p_) return;
    // Portable memory frees from any context, but a thread that never used CUDA
    // would create one on device 0 for the call (PyTorch guards its event
    // destructor for the same stray context).
    device_guard on(device_, std::nothrow);
    cudaFreeHost(p_);
  }
  std::byte* get() const noexcept { return static_cast<std::byte*>(p_); }
  std::size_t bytes() const noexcept { return bytes_; }

private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = -1;
};

class stream {
public:
  explicit stream(int rank = -1) {
    check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (!s_) return;
    device_guard on(device_, std::nothrow);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const noexcept { return s_; }

private:
  cudaStream_t s_ = nullptr;
  int device_ = -1;
};

class event {
public:
  explicit event(int rank = -1) {
    check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreateWithFlags", rank);
    device_ = current_device_or_none();
  }
  event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)), device_(o.device_) {}
  event& operator=(event&& o) noexcept {
    std::swap(e_, o.e_);
    std::swap(device_, o.device_);
    return *this;
  }
  ~event() {
    if (!e_) return;
    device_guard on(device_, std::nothrow);
    cudaEventDestroy(e_);
  }
  cudaEvent_t get() const noexcept { return e_; }

private:
  cudaEvent_t e_ = nullptr;
  int device_ = -1;
};

/// Events reused instead of created and destroyed for each use (microseconds
/// of host time each, per collective). An acquired event is its holder's alone
/// until released: no other record can move the point its waiters wait for.
class event_pool {
public:
  explicit event_pool(int rank = -1) : rank_(rank) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  /// A free event, or a new one on the current device (callers make the
  /// pool's device current: its events belong there).
  cudaEvent_t acquire() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        const cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    event fresh(rank_); // outside the lock: creating one takes microseconds
    const cudaEvent_t e = fresh.get();
    std::lock_guard lock(mu_);
    free_.reserve(all_.size() + 1); // so that release() never allocates
    all_.push_back(std::move(fresh));
    return e;
  }

  /// Gives back an event acquire() returned; a record still pending on it is
  /// fine (the next holder records it anew). One never given back (a job
  /// dropped when its group failed) stays owned here.
  void release(cudaEvent_t e) noexcept {
    std::lock_guard lock(mu_);
    free_.push_back(e);
  }

  /// How many events the pool created: as many as were in use at once, not one per use.
  std::size_t created() const {
    std::lock_guard lock(mu_);
    return all_.size();
  }

private:
  int rank_;
  mutable std::mutex mu_;
  std::vector<event> all_;
  std::vector<cudaEvent_t> free_;
};

/// Makes `waiter` wait (on the device) for what is queued on `producer` so far.
inline void order_after(cudaStream_t waiter, cudaStream_t producer, cudaEvent_t scratch, int rank) {
  check(cudaEventRecord(scratch, producer), "cudaEventRecord", rank);
  check(cudaStreamWaitEvent(waiter, scratch, 0), "cudaStreamWaitEvent", rank);
}

/// Waits on the host for everything queued on `s`, polling until `timeout`:
/// a stream that never drains (a kernel stuck, a user stream that waits
/// forever) is a timeout error naming `what`, never a hang.
inline void wait_stream(cudaStream_t s, std::chrono::milliseconds timeout, const std::string& what,
                        int rank) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, ("cudaStreamQuery (" + what + ")").c_str(), rank);
    if (std::chrono::steady_clock::now() > deadline)
      throw error(error_kind::timeout,
                  "rank " + std::to_string(rank) + ": " + what + " did not finish on the GPU within " +
                      std::to_string(timeout.count()) +
                      " ms (a kernel stuck, or a stream it follows blocked: the compute stream given to "
                      "ddp_options, or the legacy default stream)",
                  rank);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// How many CUDA devices this process sees (0 where the driver or a GPU is missing).
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_RUNTIME_HPP
// ---- end ddp/detail/cuda/runtime.hpp ----

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// An event recorded after a collective on NCCL's stream, as completion_watch
/// polls it. The event goes back to its pool when the watcher drops this, after
/// the work finished: work::stream_wait no longer asks for it by then.
class event_completion {
public:
  event_completion(cuda::event_pool& pool, cudaEvent_t event, int rank) noexcept
      : pool_(&pool), event_(event), rank_(rank) {}
  event_completion(event_completion&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), event_(o.event_), rank_(o.rank_) {}
  event_completion& operator=(event_completion&&) = delete;
  ~event_completion() {
    if (pool_) pool_->release(event_);
  }
  bool ready() const {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    cuda::check(e, "cudaEventQuery (a collective's completion, on NCCL's stream)", rank_);
    return true;
  }

private:
  cuda::event_pool* pool_;
  cudaEvent_t event_;
  int rank_;
};

inline ncclDataType_t nccl_type(dtype d) {
  switch (d) {
  case dtype::f32: return ncclFloat32;
  case dtype::f64: return ncclFloat64;
  case dtype::f16: return ncclFloat16;
  case dtype::bf16: return ncclBfloat16;
  case dtype::i32: return ncclInt32;
  case dtype::i64: return ncclInt64;
  case dtype::u8: return ncclUint8;
  case dtype::i8: return ncclInt8;
  }
  return ncclFloat32;
}

inline ncclRedOp_t nccl_op(op o) {
  switch (o) {
  case op::sum: return ncclSum;
  case op::avg: return ncclAvg;
  case op::min: return ncclMin;
  case op::max: return ncclMax;
  case op::product: return ncclProd;
  }
  return ncclSum;
}

class nccl_communicator {
public:
  explicit nccl_communicator(const rendezvous& rv)
      : rank_(rv.topo.rank), size_(rv.topo.world_size), timeout_(rv.timeout), store_(rv.store),
        events_(rank_), queue_(rank_, timeout_, ", NCCL") {
    if (!store_)
      throw error(error_kind::config,
                  "the NCCL backend needs env:// or tcp:// initialisation (file:// has no store)");
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0)
      throw error(error_kind::backend,
                  "rank " + std::to_string(rank_) + ": no usable CUDA device for NCCL (cudaGetDeviceCount: " +
                      (ce != cudaSuccess ? std::string(cudaGetErrorString(ce)) : std::string("0 devices")) +
                      "). On machines without a GPU use ddp::gloo.",
                  rank_);
    device_ = cuda_device_for(rv.topo, count); // LOCAL_RANK within the visible devices
    cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) {
      nccl_call(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store_->set("ddp/nccl/unique_id", std::string_view(reinterpret_cast<const char*>(&id), sizeof id));
    } else {
      auto bytes = store_->get("ddp/nccl/unique_id");
      if (bytes.size() != sizeof id)
        throw error(error_kind::backend, "malformed NCCL unique id in the store");
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // so that every wait below can time out
    nccl_call(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig");
    // Not the collectives' timeout alone: init loads NCCL's kernels and reads the topology
    // before any peer matters, about 0.5-1.1 s on one GPU (NCCL's "Init timings" lines in
    // public logs: 0.66 s, 0.96 s, 1.08 s), so a short DDP_TIMEOUT (1 s in gpu.nccl.timeout)
    // would fail init itself.
    const auto init_limit = std::max<std::chrono::milliseconds>(timeout_, std::chrono::seconds(60));
    await_comm("ncclCommInitRankConfig", clock::now() + init_limit, init_limit);
    grow_scratch(initial_scratch_bytes, initial_scratch_bytes);
    cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    watch_.emplace(rank_, timeout_,
                   watch_type::hooks{.on_start = [this] { watcher_on_device(); },
                                     .health = [this](const std::string& what) { return async_error(what); },
                                     .poison =
                                         [this](std::exception_ptr why) {
                                           queue_.abort(why);
                                           return queue_.poisoned();
                                         },
                                     .abort = [this] { abort(); }});
  }

  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;

  ~nccl_communicator() {
    queue_.stop();  // finish or fail what is queued, stop the worker
    watch_.reset(); // then what the device still runs (each until its deadline)
    cuda::device_guard on(device_,
                          std::nothrow); // the stream and scratch belong to it; the caller's may differ
    // The communicator first (finalized within its deadline, else aborted):
    // until then NCCL may still use its stream and the staging buffers.
    if (comm_ && !aborted_) {
      ncclCommFinalize(comm_);
      ncclResult_t state = ncclInProgress;
      auto deadline = clock::now() + std::chrono::seconds(10);
      while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
             clock::now() < deadline)
        std::this_thread::yield();
      if (state == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    }
    scratch_ = {};
    pinned_ = {};
    outgrown_.clear();
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::exception_ptr poisoned() const { return queue_.poisoned(); }
  /// This rank failed on its own (process_group::abort): later collectives are
  /// refused with `reason`, outstanding ones fail, the communicator is aborted.
  /// NCCL has no way to tell the peers: they learn it from the store
  /// (process_group's peer_failure_watch, then fail_for_peer).
  void abort_for_failure(const std::string& reason) {
    fail_group(std::make_exception_ptr(error(error_kind::backend, reason, rank_)));
  }
  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it and the communicator is
  /// aborted, so collectives waiting on it end now, not at their deadline.
  void fail_for_peer(const lost_rank& lost) {
    if (queue_.poisoned()) return; // the group failed already: its error stands
    fail_group(std::make_exception_ptr(error(
        lost.silent ? error_kind::timeout : error_kind::peer_lost,
        "rank " + std::to_string(rank_) + ": " + lost_news(lost) +
            " (this rank heard it from the rendezvous store): its NCCL communicator is aborted and every "
            "collective of this group fails",
        lost.rank)));
  }
  /// How many CUDA events this communicator created: pooled, so a few per
  /// collective in flight at once, not one per collective (tests read it).
  std::size_t events_created() const { return events_.created(); }
  /// Until every collective submitted so far completed (device ones included).
  void drain() {
    queue_.drain();
    if (watch_) watch_->drain();
  }

  // Host memory: staged through the device scratch buffer.

  work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    return submit("all_reduce", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt);
      auto* d = static_cast<char*>(scratch(bytes));
      stage_in(d, 0, data, bytes);
      enqueue([&] { return ncclAllReduce(d, d, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclAllReduce");
      stage_out(d, 0, bytes);
      sync();
      unstage(data, 0, bytes);
    });
  }

  work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt);
      auto* d = static_cast<char*>(scratch(bytes));
      stage_in(d, 0, data, bytes);
      enqueue([&] { return ncclBroadcast(d, d, n, nccl_type(dt), root, comm_, stream_); }, "ncclBroadcast");
      stage_out(d, 0, bytes);
      sync();
      unstage(data, 0, bytes);
    });
  }

  work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false) {
    return submit("all_gather", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
      auto* d = static_cast<char*>(scratch(total + bytes));
      stage_in(d, total, in, bytes);
      enqueue([&] { return ncclAllGather(d + total, d, n, nccl_type(dt), comm_, stream_); }, "ncclAllGather");
      stage_out(d, 0, total);
      sync();
      unstage(out, 0, total);
    });
  }

  work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o, bool blocking = false) {
    return submit("reduce_scatter", n, dt, blocking, [=, this] {
      const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
      auto* d = static_cast<char*>(scratch(total + bytes));
      stage_in(d, 0, in, total);
      enqueue([&] { return ncclReduceScatter(d, d + total, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclReduceScatter");
      stage_out(d, total, bytes);
      sync();
      unstage(out, total, bytes);
    });
  }

  // Device memory: straight to NCCL. The tensors were produced on the caller's
  // streams while NCCL's own stream is non-blocking: each of these collectives
  // first waits, on the device, for what the legacy default stream had queued
  // when it was submitted (what cudaMemcpy follows). Work on streams created
  // with cudaStreamNonBlocking is the caller's to finish (or use DDP's
  // compute_stream, which hands NCCL an event of that stream instead). Costs
  // one record of a pooled event per call, and the record on the legacy
  // stream waits for every blocking stream of the device; it also invalidates
  // a CUDA graph capture in global mode.

  work all_reduce(device_memory_t, void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    return submit("all_reduce", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclAllReduce(data, data, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclAllReduce");
      complete_on_device();
    });
  }

  /// Stream-ordered: NCCL's stream first waits, on the device, for `ready`, an
  /// event the caller recorded on its own stream after producing `data` (the
  /// caller's thread never blocks on that). The caller must not re-record
  /// `ready` before this work was queued (work::stream_wait returned, or the work
  /// completed): NCCL's stream takes the record it finds then. Used by the
  /// CUDA bucket engine.
  work all_reduce(device_memory_t, void* data, std::size_t n, dtype dt, op o, cudaEvent_t ready,
                  bool blocking = false) {
    return submit("all_reduce", n, dt, blocking, [=, this] {
      cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent (the bucket's ready event)");
      enqueue([&] { return ncclAllReduce(data, data, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclAllReduce");
      complete_on_device();
    });
  }

  /// Stream-ordered like the all_reduce above: after `ready`, on the device.
  work broadcast(device_memory_t, void* data, std::size_t n, dtype dt, int root, cudaEvent_t ready,
                 bool blocking = false) {
    return submit("broadcast", n, dt, blocking, [=, this] {
      cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent (the compute stream's ready event)");
      enqueue([&] { return ncclBroadcast(data, data, n, nccl_type(dt), root, comm_, stream_); },
              "ncclBroadcast");
      complete_on_device();
    });
  }

  work broadcast(device_memory_t, void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclBroadcast(data, data, n, nccl_type(dt), root, comm_, stream_); },
              "ncclBroadcast");
      complete_on_device();
    });
  }

  work all_gather(device_memory_t, const void* in, void* out, std::size_t n, dtype dt,
                  bool blocking = false) {
    return submit("all_gather", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclAllGather(in, out, n, nccl_type(dt), comm_, stream_); }, "ncclAllGather");
      complete_on_device();
    });
  }

  work reduce_scatter(device_memory_t, const void* in, void* out, std::size_t n, dtype dt, op o,
                      bool blocking = false) {
    return submit("reduce_scatter", n, dt, blocking, [=, this, after = default_stream_point(n)] {
      follow(after);
      enqueue([&] { return ncclReduceScatter(in, out, n, nccl_type(dt), nccl_op(o), comm_, stream_); },
              "ncclReduceScatter");
      complete_on_device();
    });
  }

  work barrier(bool blocking = false) {
    return submit("barrier", 1, dtype::i32, blocking, [this] {
      auto* d = scratch(sizeof(std::int32_t));
      enqueue([&] { return ncclAllReduce(d, d, 1, ncclInt32, ncclSum, comm_, stream_); },
              "ncclAllReduce (barrier)");
      sync();
    });
  }

private:
  using clock = std::chrono::steady_clock;

  /// An event recorded now, on the caller's thread, on this device's legacy
  /// default stream (the thread's current device is restored); null for an
  /// empty collective, whose job returns before follow(). Taken from the pool
  /// until follow() waited on it: a shared event re-recorded by a later
  /// submission could make an earlier collective wait for work queued after it.
  cudaEvent_t default_stream_point(std::size_t n) {
    if (n == 0 || queue_.poisoned()) return nullptr; // a poisoned group fails it with its own error
    detail::cuda::device_guard on(device_, rank_);
    const cudaEvent_t point = events_.acquire();
    if (const cudaError_t e = cudaEventRecord(point, cudaStreamLegacy); e != cudaSuccess) {
      events_.release(point);
      cuda(e, "cudaEventRecord (the legacy default stream, before a collective of device tensors)");
    }
    return point;
  }

  /// The end of a device collective's job, after enqueue(): an event is
  /// recorded after it on NCCL's stream and published to the work
  /// (work::stream_wait), and the work goes to the watcher, which finishes it
  /// when the device is done, or fails it at its deadline. This thread does
  /// not wait: the next collective is queued at once. The event is the
  /// work's alone until the watcher finished it (a pooled one, given back
  /// then): re-recording it earlier would move the point its waiters wait for.
  void complete_on_device() {
    cudaEvent_t done = nullptr;
    try {
      done = events_.acquire();
    } catch (const error& e) { fail_group_and_throw(e); }
    event_completion completion(events_, done, rank_); // gives the event back on every path
    cuda(cudaEventRecord(done, stream_), "cudaEventRecord (after a collective, on NCCL's stream)");
    work_state* self = running_; // owns the function below: valid whenever it runs
    self->queued_on_device([done, self](CUstream_st* waiter) {
      // -1: `what` names the rank already
      detail::cuda::check(cudaStreamWaitEvent(waiter, done, 0),
                          ("cudaStreamWaitEvent (a stream waiting for " + self->what + ")").c_str(), -1);
    });
    watch_->watch(self->shared_from_this(), std::move(completion), deadline_, current_); // noexcept
  }

  /// Queues one NCCL operation on stream_ (`op` returns its ncclResult_t) and
  /// waits, with the deadline, until NCCL really did: a non-blocking
  /// communicator may return ncclInProgress and launch it later (while it
  /// connects to a peer), and nothing may be queued behind it on stream_
  /// before that (the copy back of a host tensor, the completion event).
  template <class F> void enqueue(F&& op, const char* name) {
    nccl_call(comm_call(std::forward<F>(op)), name);
    await_comm(name, deadline_, timeout_);
  }

  /// In a job: NCCL's stream waits for the point default_stream_point()
  /// recorded. The wait takes the record it finds now, so the event goes back at once.
  void follow(cudaEvent_t point) {
    if (!point) return;
    const cudaError_t e = cudaStreamWaitEvent(stream_, point, 0);
    events_.release(point);
    cuda(e, "cudaStreamWaitEvent (the legacy default stream)");
  }

  template <class F> work submit(const char* name, std::size_t n, dtype dt, bool blocking, F body) {
    return queue_.submit(
        name, n, dt, blocking,
        [this, body = std::move(body), n](const std::string& what, work_state& self) mutable {
          if (n == 0) return;
          current_ = what;
          running_ = &self;
          deadline_ = clock::now() + timeout_; // the job's one deadline: queueing, completion, copies
          // A blocking job may run inline on the caller's thread: its current device is restored.
          std::optional<cuda::device_guard> on;
          try {
            on.emplace(device_, rank_);
          } catch (const error& e) { fail_group_and_throw(e); }
          body();
        });
  }

  /// The device staging buffer and its pinned host mirror, grown together to
  /// at least twice their size (between host-memory collectives: each one
  /// ends with sync()).
  void* scratch(std::size_t bytes) {
    if (bytes > scratch_.bytes()) grow_scratch(bytes, std::max(bytes, 2 * scratch_.bytes()));
    return scratch_.get();
  }

  /// Nothing is freed inside a job: cudaFree and cudaFreeHost wait for the
  /// whole device, the user's streams too, with no deadline. An outgrown pair
  /// stays until the destructor; doubling keeps them all smaller than the
  /// current one. Where the doubled size does not fit, exactly `needed` is
  /// tried before the group fails.
  void grow_scratch(std::size_t needed, std::size_t wanted) {
    std::optional<cuda::device_buffer> device;
    std::optional<cuda::pinned_buffer> host;
    for (std::size_t bytes : {wanted, needed}) {
      try {
        device.emplace(bytes, rank_, "cudaMalloc of the staging buffer");
        host.emplace(bytes, rank_, "cudaHostAlloc of the pinned staging buffer");
        break;
      } catch (const error& e) {
        device.reset();
        host.reset();
        if (bytes == needed) fail_group_and_throw(e);
      }
    }
    if (scratch_.get()) outgrown_.emplace_back(std::move(scratch_), std::move(pinned_));
    scratch_ = std::move(*device);
    pinned_ = std::move(*host);
  }

  // Host tensors travel through a pinned buffer that mirrors the device
  // scratch (same offsets), kept across calls: DMA from pinned memory runs
  // several times faster than from pageable memory, at the cost of one host
  // memcpy each way (docs/performance.md, On a GPU).
  // Call scratch() with the full size first: it sizes the pinned mirror too, so
  // nothing is reallocated while a copy from it is in flight.
  void stage_in(char* device, std::size_t offset, const void* host, std::size_t bytes) {
    std::memcpy(pinned_.get() + offset, host, bytes);
    cuda(cudaMemcpyAsync(device + offset, pinned_.get() + offset, bytes, cudaMemcpyHostToDevice, stream_),
         "cudaMemcpyAsync (pinned -> device)");
  }
  void stage_out(const char* device, std::size_t offset, std::size_t bytes) {
    cuda(cudaMemcpyAsync(pinned_.get() + offset, device + offset, bytes, cudaMemcpyDeviceToHost, stream_),
         "cudaMemcpyAsync (device -> pinned)");
  }
  /// After sync(): the result from the pinned buffer into the user's tensor.
  void unstage(void* host, std::size_t offset, std::size_t bytes) {
    std::memcpy(host, pinned_.get() + offset, bytes);
  }

  /// Waits for the stream with a deadline; a communicator error or a timeout
  /// fails the group. A drained stream after an abort (by the watcher) is not
  /// a result: the communicator's state is checked once more at the end.
  void sync(const char* waiting_for = nullptr) {
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e != cudaSuccess && e != cudaErrorNotReady) cuda(e, ("cudaStreamQuery (" + current_ + ")").c_str());
      ncclResult_t async = ncclSuccess;
      comm_call([&] { return ncclCommGetAsyncError(comm_, &async); }); // throws once aborted
      if (async != ncclSuccess && async != ncclInProgress) fail_nccl(async, current_.c_str());
      if (e == cudaSuccess) return;
      if (clock::now() > deadline_)
        fail_group_and_throw(error(error_kind::timeout,
                                   current_ +
                                       (waiting_for ? std::string(": waiting for ") + waiting_for : "") +
                                       ": timed out after " + std::to_string(timeout_.count()) +
                                       " ms: a rank stalled, died or skipped a collective; the NCCL "
                                       "communicator was aborted",
                                   -1));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  /// Polls until the communicator's last call (init, or an operation that
  /// returned ncclInProgress) is done; a failure or the deadline fails the group.
  void await_comm(const char* what, clock::time_point deadline, std::chrono::milliseconds limit) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      nccl_call(comm_call([&] { return ncclCommGetAsyncError(comm_, &state); }), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail_nccl(state, what);
      if (clock::now() > deadline)
        fail_group_and_throw(
            error(error_kind::timeout,
                  (current_.empty() ? "rank " + std::to_string(rank_) : current_) + ": " + what +
                      ": NCCL did not finish within " + std::to_string(limit.count()) +
                      " ms (a rank did not join, or stalled?); the NCCL communicator was aborted",
                  -1));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  /// For the watcher (its own thread): the communicator's asynchronous error
  /// while `what` runs, if any.
  std::exception_ptr async_error(const std::string& what) noexcept {
    try {
      ncclResult_t state = ncclSuccess;
      std::string last;
      comm_call([&] {
        ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
        if (state != ncclSuccess && state != ncclInProgress)
          if (const char* l = ncclGetLastError(comm_); l && *l) last = l;
        return r;
      });
      if (state == ncclSuccess || state == ncclInProgress) return nullptr;
      return std::make_exception_ptr(error(
          state == ncclRemoteError ? error_kind::peer_lost : error_kind::backend,
          what + " failed: " + ncclGetErrorString(state) +
              (last.empty() ? std::string() : " (" + last + ")") + "; the NCCL communicator was aborted",
          -1));
    } catch (...) { return std::current_exception(); }
  }

  /// Every use of comm_ once the watcher runs: under comm_mu_, and none once
  /// it was aborted (ncclCommAbort frees it; the watcher may abort it from
  /// its own thread while this one polls).
  template <class F> ncclResult_t comm_call(F&& f) {
    std::lock_guard lock(comm_mu_);
    if (aborted_) {
      if (auto why = queue_.poisoned()) std::rethrow_exception(why);
      throw error(error_kind::backend,
                  "rank " + std::to_string(rank_) +
                      ": the NCCL communicator was aborted after an earlier failure",
                  rank_);
    }
    return f();
  }

  void nccl_call(ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    fail_nccl(r, what);
  }

  [[noreturn]] void fail_nccl(ncclResult_t r, const char* what) {
    std::string text = std::string(what) + " failed: " + ncclGetErrorString(r);
    {
      std::lock_guard lock(comm_mu_);
      if (comm_ && !aborted_)
        if (const char* last = ncclGetLastError(comm_); last && *last) text += " (" + std::string(last) + ")";
    }
    fail_group_and_throw(error(r == ncclRemoteError ? error_kind::peer_lost : error_kind::backend,
                               "rank " + std::to_string(rank_) + ": " + text, -1));
  }

  /// A failure this thread found: the group is poisoned with it, the works the
  /// watcher holds fail with it (an aborted communicator's events complete:
  /// they must not read as results), the communicator is aborted; then it is
  /// thrown. Before the watcher exists (construction), only the abort.
  [[noreturn]] void fail_group_and_throw(const error& e) {
    fail_group(std::make_exception_ptr(e));
    if (auto group = queue_.poisoned()) std::rethrow_exception(group); // whoever failed first
    throw e;
  }

  void fail_group(std::exception_ptr why) {
    if (watch_) {
      watch_->fail_all(why); // poison, the watched works, abort (unless something failed first)
    } else {
      queue_.abort(why);
      abort();
    }
  }

  /// A CUDA error fails the group too (peers would otherwise wait for this
  /// rank until their deadline, and the communicator would be finalized).
  void cuda(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError(); // clear a sticky non-fatal error so later calls report their own
    fail_group_and_throw(
        error(error_kind::backend,
              "rank " + std::to_string(rank_) + ": " + what + " failed: " + cudaGetErrorString(e), rank_));
  }

  /// Once, from either thread (the worker or the watcher). ncclCommAbort may
  /// block (it frees device memory: cudaFree waits for the device), so it
  /// runs outside the lock: once aborted_ is set nothing else touches comm_,
  /// and every poll gets the group's error at once instead of waiting here.
  void abort() {
    ncclComm_t doomed = nullptr;
    {
      std::lock_guard lock(comm_mu_);
      if (!comm_ || aborted_) return;
      aborted_ = true;
      doomed = comm_;
    }
    // ncclCommAbort sets the device on the calling thread (any thread); it aborts
    // even where the caller's device cannot be restored.
    cuda::device_guard on(device_, std::nothrow);
    ncclCommAbort(doomed);
  }

  /// The watcher thread's start. It only queries events (cudaEventQuery works
  /// from any device), so a device it cannot select is worth a line, not a
  /// failure: the error is cleared so no later call on the thread reports it.
  void watcher_on_device() {
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      cudaGetLastError();
      log_line("rank " + std::to_string(rank_),
               std::string("warning: NCCL's completion watcher could not select "
                           "CUDA device ") +
                   std::to_string(device_) + " (" + cudaGetErrorString(e) +
                   "); it polls events from the default device");
    }
  }

  int rank_, size_, device_ = 0;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  /// Host-memory collectives' staging: join's flag, a barrier and other small
  /// ones never allocate inside a job.
  static constexpr std::size_t initial_scratch_bytes = std::size_t{64} << 10;
  cuda::device_buffer scratch_; ///< device staging (worker thread only)
  cuda::pinned_buffer pinned_;  ///< host staging, mirrors scratch_ (worker thread only)
  std::vector<std::pair<cuda::device_buffer, cuda::pinned_buffer>> outgrown_; ///< see grow_scratch
  bool aborted_ = false;          ///< under comm_mu_ (the destructor reads it alone)
  std::mutex comm_mu_;            ///< comm_'s calls against its abort (see comm_call)
  std::string current_;           ///< the running collective's description (worker thread)
  work_state* running_ = nullptr; ///< the running collective's work (worker thread)
  clock::time_point deadline_;    ///< the running collective's (worker thread)
  cuda::event_pool events_;       ///< before queue_ and watch_: their jobs and completions give events back
  collective_queue queue_;
  using watch_type = completion_watch<event_completion>;
  std::optional<watch_type> watch_; ///< after queue_: destroyed first (it fails into queue_)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NCCL_COMMUNICATOR_HPP
// ---- end ddp/detail/nccl/communicator.hpp ----

#include <string_view>

DDP_BEGIN_NAMESPACE

/// Backend policy: NCCL, for GPU tensors (host tensors are staged).
struct nccl {
  static constexpr std::string_view name = "nccl";
  using communicator = detail::nccl_communicator;
};

DDP_END_NAMESPACE

#endif // DDP_BACKEND_NCCL_HPP
// ---- end ddp/backend/nccl.hpp ----
#endif

#endif // DDP_DDP_HPP
// ---- end ddp/ddp.hpp ----

// The runtime's definitions: header-only, or the one file that defines it
// (ddp/detail/common/linkage.hpp).
#if DDP_DETAIL_DEFINE_RUNTIME
// ---- begin ddp/store-inl.hpp ----
// The definitions behind store.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_STORE_INL_HPP
#define DDP_STORE_INL_HPP

// ---- begin ddp/detail/store/handshake.hpp ----
// The client's side of the rendezvous store's handshake (the exchange and why
// it is safe: auth.hpp), and the deadline the server gives it.
#ifndef DDP_DETAIL_STORE_HANDSHAKE_HPP
#define DDP_DETAIL_STORE_HANDSHAKE_HPP

// ---- begin ddp/detail/store/auth.hpp ----
// Mutual challenge-response authentication between a rank and the rendezvous
// store, keyed by the job token (DDP_TOKEN), with HMAC-SHA256 from OpenSSL's
// libcrypto. The token itself never crosses the wire.
//
// The handshake (K: the token; Nc, Ns: 32 bytes each from RAND_bytes, drawn
// afresh for every connection; r: the rank the client claims; || joins):
//
//   client -> server  hello      r, Nc
//   server -> client  challenge  Ns, Ps = HMAC(K, "ddp store auth v1: server" || Nc || Ns || r)
//   client            checks Ps; on a mismatch it sends bye (no content) and closes
//   client -> server  proof      Pc = HMAC(K, "ddp store auth v1: client" || Nc || Ns || r)
//   server -> client  ok | refused
//
// Why this is safe:
// - The token never travels: only nonces, the rank and MACs do, and a MAC does
//   not give up its key. A process squatting on MASTER_PORT receives a hello
//   (a rank and a random nonce) and a content-free bye, because the client checks the
//   server's proof before it sends its own.
// - Replay: each proof covers the nonce the *other* side has just drawn, so a
//   proof recorded on one connection verifies on no other (a nonce repeats with
//   probability 2^-256).
// - Reflection: the two proofs carry different labels. The server only ever
//   computes server-labelled MACs, so connecting to it (with any Nc one likes)
//   never yields a valid client proof; clients compute client-labelled MACs
//   only for a server that has already proven it holds K.
// - Fields are fixed-width (labels of equal length, 32-byte nonces, a 4-byte
//   rank), so no two different tuples hash the same message.
// - Comparisons are constant-time (CRYPTO_memcmp).
// Limits: the frames after the handshake are neither encrypted nor
// integrity-protected, so a party that can relay or rewrite traffic between a
// rank and the store (on-path) is out of scope. Anyone who can reach the store
// can obtain a server proof for a nonce of their choice and test guesses of
// the token offline: the token must be unguessable (ddprun draws 128 random
// bits; by hand, DDP_TOKEN=$(openssl rand -hex 16)). An empty token is
// accepted, and then authenticates nothing.
#ifndef DDP_DETAIL_STORE_AUTH_HPP
#define DDP_DETAIL_STORE_AUTH_HPP


#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t auth_nonce_size = 32;
inline constexpr std::size_t auth_mac_size = 32; // SHA-256
using auth_nonce = std::array<unsigned char, auth_nonce_size>;
using auth_mac = std::array<unsigned char, auth_mac_size>; // the same type as auth_nonce

enum class auth_role { server, client };

inline std::string openssl_error_text() {
  char buf[256] = "unknown error";
  if (unsigned long e = ::ERR_get_error()) ::ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

/// A fresh nonce from OpenSSL's CSPRNG.
inline auth_nonce auth_random_nonce() {
  auth_nonce n{};
  if (::RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throw error(error_kind::backend,
                "OpenSSL RAND_bytes failed to draw a nonce for the rendezvous store handshake: " +
                    openssl_error_text());
  return n;
}

/// The proof `who` sends: HMAC-SHA256 keyed by the token over a label naming
/// the direction, both nonces and the rank.
inline auth_mac auth_proof(std::string_view token, auth_role who, const auth_nonce& client_nonce,
                           const auth_nonce& server_nonce, std::int32_t rank) {
  // Equal lengths, so the message layout is fixed.
  static constexpr char server_label[] = "ddp store auth v1: server";
  static constexpr char client_label[] = "ddp store auth v1: client";
  static_assert(sizeof server_label == sizeof client_label);
  std::array<unsigned char, sizeof server_label + 2 * auth_nonce_size + 4> msg{};
  unsigned char* p = msg.data();
  std::memcpy(p, who == auth_role::server ? server_label : client_label, sizeof server_label);
  p += sizeof server_label;
  std::memcpy(p, client_nonce.data(), auth_nonce_size);
  p += auth_nonce_size;
  std::memcpy(p, server_nonce.data(), auth_nonce_size);
  p += auth_nonce_size;
  auto r = static_cast<std::uint32_t>(rank);
  for (int i = 0; i < 4; ++i) // little-endian, as every integer on the wire
    *p++ = static_cast<unsigned char>(r >> (8 * i));
  if (token.size() > INT_MAX)
    throw error(error_kind::config, "DDP_TOKEN is too long (" + std::to_string(token.size()) + " bytes)");
  static const unsigned char no_key = 0; // OpenSSL wants a non-null key pointer even for an empty key
  auth_mac out{};
  unsigned int len = 0;
  const void* key = token.empty() ? static_cast<const void*>(&no_key) : token.data();
  if (!::HMAC(::EVP_sha256(), key, static_cast<int>(token.size()), msg.data(), msg.size(), out.data(),
              &len) ||
      len != out.size())
    throw error(error_kind::backend,
                "OpenSSL HMAC-SHA256 failed in the rendezvous store handshake: " + openssl_error_text());
  return out;
}

/// Whether `got` (as received) equals `expected`, in time independent of the contents.
inline bool auth_proof_matches(const auth_mac& expected, std::string_view got) {
  return got.size() == expected.size() && ::CRYPTO_memcmp(expected.data(), got.data(), expected.size()) == 0;
}

/// A nonce or a MAC (the same type) as the bytes that go on the wire.
inline std::string_view as_view(const auth_nonce& n) {
  return {reinterpret_cast<const char*>(n.data()), n.size()};
}

/// Reads a nonce received as bytes; false when the size is wrong.
inline bool to_nonce(std::string_view s, auth_nonce& out) {
  if (s.size() != out.size()) return false;
  std::memcpy(out.data(), s.data(), out.size());
  return true;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_AUTH_HPP
// ---- end ddp/detail/store/auth.hpp ----

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// How long the server lets a connection take to authenticate, from accept to
/// proof. A rank sends its hello as soon as it connects and needs one round
/// trip more, so a few seconds is ample even on a loaded machine; a silent
/// connection holds a descriptor no longer than this (docs/design-notes.md,
/// "Note [store under descriptor pressure]").
inline constexpr std::chrono::seconds store_handshake_timeout{5};

/// Handshake frames are small; a larger one during the handshake is malformed.
inline constexpr std::uint32_t store_max_handshake_frame = 4096;

enum class handshake_result {
  ok,              ///< both sides proved they hold the token
  refused,         ///< the server did not accept this client's proof
  server_unproven, ///< the server's proof is wrong: it does not hold this job's token
  malformed,       ///< the peer does not speak this protocol
  closed,          ///< the peer closed before the end (a server shedding load does this)
  timeout,         ///< no answer before the deadline
};

/// Reads one frame of at most `max` bytes.
inline handshake_result recv_handshake_frame(int fd, std::string& body, clock::time_point deadline) {
  std::uint32_t n = 0;
  auto st = recv_all(fd, &n, 4, deadline);
  if (st == io_status::ok) {
    if (n == 0 || n > store_max_handshake_frame) return handshake_result::malformed;
    body.assign(n, '\0');
    st = recv_all(fd, body.data(), n, deadline);
  }
  if (st == io_status::ok) return handshake_result::ok;
  return st == io_status::timeout ? handshake_result::timeout : handshake_result::closed;
}

inline handshake_result send_handshake_frame(int fd, const std::vector<char>& f, clock::time_point deadline) {
  auto st = send_all(fd, f.data(), f.size(), deadline);
  if (st == io_status::ok) return handshake_result::ok;
  return st == io_status::timeout ? handshake_result::timeout : handshake_result::closed;
}

/// Runs the client's side on a connected socket: hello, check the server's
/// proof, send ours, read the verdict. Sends nothing derived from the token
/// unless the server has proven it holds the token.
inline handshake_result client_handshake(int fd, std::string_view token, std::int32_t rank,
                                         clock::time_point deadline) {
  const auth_nonce client_nonce = auth_random_nonce();
  auto res = send_handshake_frame(
      fd, frame_writer(store_op::hello).i32(rank).bytes(as_view(client_nonce)).finish(), deadline);
  if (res != handshake_result::ok) return res;
  std::string body;
  if ((res = recv_handshake_frame(fd, body, deadline)) != handshake_result::ok) return res;
  frame_reader r(std::string_view(body).substr(1));
  auth_nonce server_nonce{};
  std::string nonce = r.bytes(), server_proof = r.bytes();
  if (static_cast<store_status>(body[0]) != store_status::ok || !r.ok() || !r.at_end() ||
      !to_nonce(nonce, server_nonce))
    return handshake_result::malformed;
  if (!auth_proof_matches(auth_proof(token, auth_role::server, client_nonce, server_nonce, rank),
                          server_proof)) {
    // A bye, nothing derived from the token: the store tells a token that differs from a client
    // that gave up for another reason, and its peers stop waiting for this rank.
    send_handshake_frame(fd, frame_writer(store_op::bye).finish(),
                         std::min(deadline, clock::now() + std::chrono::milliseconds(100)));
    return handshake_result::server_unproven;
  }
  auto proof = auth_proof(token, auth_role::client, client_nonce, server_nonce, rank);
  if ((res = send_handshake_frame(fd, frame_writer(store_op::proof).bytes(as_view(proof)).finish(),
                                  deadline)) != handshake_result::ok)
    return res;
  if ((res = recv_handshake_frame(fd, body, deadline)) != handshake_result::ok) return res;
  if (body.size() != 1) return handshake_result::malformed;
  switch (static_cast<store_status>(body[0])) {
  case store_status::ok: return handshake_result::ok;
  case store_status::refused: return handshake_result::refused;
  default: return handshake_result::malformed;
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_HANDSHAKE_HPP
// ---- end ddp/detail/store/handshake.hpp ----
// ---- begin ddp/detail/store/server.hpp ----
// The rendezvous store's server, run on one background thread by ddprun on
// node 0 when it launched the job, else by rank 0.
// One poll() loop serves every connection: a connection must first complete
// the handshake of auth.hpp (both sides prove they hold the job token) within
// store_handshake_timeout; a wrong proof, a malformed or an oversized frame
// closes that connection only. Connections still in their handshake are
// capped, and are shed first when descriptors run short, so silent or hostile
// connections cannot lock the ranks out or make the loop spin. A rank whose
// connection drops without saying goodbye is recorded under `store_lost_key`,
// so survivors can name the rank they lost, and every pending wait is answered
// at once with "lost, rank r": the keys a dead rank would have set never come,
// so nobody waits out the timeout. A connection may declare a scope (a key
// prefix: a restart round's "r<k>/", see store_op::scope): its loss is then
// recorded under scope + store_lost_key and ends only that scope's waits.
//
// Under ddprun the server lives in the launcher on node 0 and outlives every
// rank. Otherwise it lives in rank 0's process, so when rank 0 leaves, the store goes
// and the survivors of a failure could no longer ask it who was lost (they used
// to blame rank 0 for it). So on teardown it lingers, still serving, until
// every other rank has disconnected or said goodbye, bounded by `set_linger()`:
// "store gone" then really means "rank 0 died". A rank the survivors' desync
// report found stopped (store_stalled_prefix) is not waited for: it would
// never read the report, and held rank 0 for the whole linger. A rank 0 that
// failed itself lingers briefly (it recorded its failure first; see process_group).
#ifndef DDP_DETAIL_STORE_SERVER_HPP
#define DDP_DETAIL_STORE_SERVER_HPP


#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Connections still in their handshake, at most. Legitimate fan-in stays far
/// below: a rank's handshake takes one round trip after accept, so even 1024+
/// ranks connecting at once never have this many pending.
inline constexpr std::size_t store_max_pending_handshakes = 4096;

/// Under pressure (the cap above, or descriptors nearly spent), a pending
/// handshake at least this old is closed to make room. Long enough for a rank
/// on a loaded machine to answer its challenge; a rank that is cut off anyway
/// connects again.
inline constexpr std::chrono::milliseconds store_shed_min_age{500};

/// How long the listener is left alone after accept fails for want of
/// descriptors (EMFILE/ENFILE) with nothing to shed: retrying at once spins
/// (docs/design-notes.md, "Note [store under descriptor pressure]").
inline constexpr std::chrono::milliseconds store_accept_backoff{100};

/// Descriptors kept free for the rest of the process (rank 0's own client,
/// Gloo's pairs): pending handshakes are shed before they take these.
inline constexpr long store_fd_reserve_max = 64;
inline int store_fd_reserve(long soft_limit) {
  return static_cast<int>(std::clamp(soft_limit / 16, 16L, store_fd_reserve_max));
}

/// Replies a connection may have waiting to be sent before the server stops
/// handling its requests until it reads some: a client pipelining gets of
/// large values (tcp_store::multi_get) is served a part at a time, between
/// the other connections, and the memory a connection holds stays bounded.
inline constexpr std::size_t store_reply_backlog = 256 * 1024;

/// A connection whose replies wait this long without the client taking any
/// of them is closed (its rank recorded lost): the process is stopped, or its
/// host cut off. Sending never blocks the server: a blocking send would stall
/// every other rank for up to this deadline
/// (docs/design-notes.md, "Note [store reply queue]").
inline constexpr std::chrono::seconds store_reply_stall{10};

/// A rank whose claim was refused for a wrong token and that has not joined
/// this long after is recorded lost: the rank that was refused exits, and its
/// peers would otherwise wait for it until DDP_TIMEOUT. A process of another
/// job claiming a rank that is merely late is given this long for the real
/// one to arrive.
inline constexpr std::chrono::milliseconds store_refusal_grace{2000};

/// Rate limit for the log lines that unauthenticated peers can cause, so a
/// flood of connections cannot flood stderr: 10 lines per 10 s, then a count.
class log_throttle {
public:
  void line(const std::string& text, clock::time_point now) {
    if (now - window_ > std::chrono::seconds(10)) {
      if (suppressed_ > 0)
        log_line("store",
                 std::to_string(suppressed_) + " more such message(s) in the last 10 s were not shown");
      window_ = now;
      shown_ = 0;
      suppressed_ = 0;
    }
    if (shown_ < 10) {
      ++shown_;
      log_line("store", text);
    } else
      ++suppressed_;
  }

private:
  clock::time_point window_{};
  int shown_ = 0;
  long suppressed_ = 0;
};

class store_server {
public:
  /// Serves on `host:port`; a temporary DNS failure resolving `host` is
  /// retried until `resolve_deadline` (default: not retried). With a
  /// `peer_timeout`, a connection fails once its peer's host has acknowledged
  /// nothing for that long (set_keepalive), so a rank cut off by the network is
  /// recorded lost, with that reason, like one that exited (0: off). Given here,
  /// before the loop starts, so that no connection is accepted without it.
  store_server(const std::string& host, int port, std::string token, clock::time_point resolve_deadline = {},
               std::chrono::milliseconds peer_timeout = {})
      : listener_(listen_tcp(host, port, resolve_deadline)), token_(std::move(token)),
        peer_timeout_ms_(std::max<std::int64_t>(0, peer_timeout.count())) {
    port_ = local_port(listener_.get());
    // Non-blocking, so the loop can accept a burst of connections at once.
    if (int fl = ::fcntl(listener_.get(), F_GETFL);
        fl < 0 || ::fcntl(listener_.get(), F_SETFL, fl | O_NONBLOCK) != 0)
      throw error(error_kind::backend,
                  "fcntl(O_NONBLOCK) on the store's listener failed: " + errno_text(errno));
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
      throw error(error_kind::backend, "pipe2 failed: " + errno_text(errno));
    wake_r_.reset(p[0]);
    wake_w_.reset(p[1]);
    thread_ = std::thread([this] { loop(); });
  }
  store_server(const store_server&) = delete;
  store_server& operator=(const store_server&) = delete;
  ~store_server() {
    linger_until_ = clock::now() + std::chrono::milliseconds(linger_ms_.load());
    arrivals_until_ = clock::now() + std::chrono::milliseconds(arrivals_ms_.load());
    stop_ = true;
    char c = 1;
    [[maybe_unused]] auto r = ::write(wake_w_.get(), &c, 1);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

  /// Serves an already connected socket (a socketpair end, one accepted
  /// elsewhere) exactly like an accepted connection: it must authenticate.
  void adopt(unique_fd fd) {
    {
      std::lock_guard lock(adopt_mu_);
      adopted_.push_back(std::move(fd));
    }
    char c = 1;
    [[maybe_unused]] auto r = ::write(wake_w_.get(), &c, 1);
  }

  /// How long teardown may wait for the other ranks to disconnect (0: not at all).
  void set_linger(std::chrono::milliseconds d) { linger_ms_ = std::max<std::int64_t>(0, d.count()); }

  /// Teardown also serves, for up to `d`, until ranks 0..`ranks`-1 have all
  /// connected once: a rank starting after the job already failed in its
  /// rendezvous then reads who was lost at once, where it would have found
  /// no store and waited its timeout to say so.
  void serve_late_arrivals(int ranks, std::chrono::milliseconds d) {
    arrivals_expected_ = ranks;
    arrivals_ms_ = std::max<std::int64_t>(0, d.count());
  }

private:
  struct connection : std::enable_shared_from_this<connection> {
    unique_fd fd;
    std::string peer;
    std::string in;
    bool authed = false;
    bool said_bye = false;
    int rank = -1;
    int owner = -1;    ///< the rank whose process holds this rank-less connection (store_op::owner)
    std::string scope; ///< key prefix of this connection's rank (store_op::scope)
    clock::time_point accepted;
    clock::time_point hello_deadline;
    // The handshake (auth.hpp): after the hello, the nonces its proofs cover.
    bool challenged = false;
    auth_nonce client_nonce{}, server_nonce{};
    // A pending wait: replied to when all keys exist or the deadline passes.
    std::vector<std::string> wait_keys;
    clock::time_point wait_deadline;
    bool waiting = false;
    std::size_t wait_missing = 0; ///< keys of the pending wait still absent (a repeated key counts twice)
    std::uint64_t wait_seq = 0;   ///< tells the pending wait from earlier ones in waiters_
    // Replies not sent yet: those to the frames of one read go out together
    // once the frames are handled (replies_held), and what the socket does
    // not take at once is sent as the client reads (POLLOUT).
    std::vector<char> out;
    std::size_t out_sent = 0;
    bool replies_held = false;
    bool peer_gone = false;      ///< a send failed, or it hung up: replies are dropped, not queued
    int send_error = 0;          ///< errno of the failed send (it, not the read after, may say ETIMEDOUT)
    clock::time_point out_moved; ///< when replies last went out, or began to wait
    int kernel_queued = 0;       ///< bytes in its socket's send queue at the last look (SIOCOUTQ)
  };

  /// A wait registered under one of its missing keys (see waiters_).
  struct waiter {
    std::weak_ptr<connection> conn;
    std::uint64_t seq = 0;
  };

  void loop() {
    std::vector<pollfd> fds;
    while (!stop_ || (others_connected() && clock::now() < linger_until_) ||
           (arrivals_missing() && clock::now() < arrivals_until_)) {
      // Requests read earlier but left while their connection's replies
      // backed up, which may have gone out since (by POLLOUT, or all at once):
      // one part each, then the others' turn. A connection still ready after
      // its part keeps the poll from sleeping, or a reader's replies would go
      // out one part per poll timeout
      // (docs/design-notes.md, "Note [store reply queue]").
      bool work_left = false;
      for (std::size_t i = 0; i < conns_.size(); ++i)
        if (ready_to_handle(*conns_[i])) {
          handle_frames(*conns_[i], false);
          work_left = work_left || ready_to_handle(*conns_[i]);
        }
      fds.clear();
      fds.push_back({wake_r_.get(), POLLIN, 0});
      // Negative: poll() skips the listener while accepting is backed off.
      fds.push_back({clock::now() < listen_paused_until_ ? -1 : listener_.get(), POLLIN, 0});
      for (auto& c : conns_) {
        // A connection whose replies back up is not read until it takes them
        // (one whose sends failed is, to see it leave).
        short events = backed_up(*c) && !c->peer_gone ? 0 : POLLIN;
        if (replies_pending(*c)) events |= POLLOUT;
        fds.push_back({c->fd.get(), events, 0});
      }
      int rc = ::poll(fds.data(), fds.size(), work_left ? 0 : poll_timeout_ms(clock::now()));
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN)
        take_adopted(); // also drains the wake-up bytes (a lingering loop would spin)
      if (fds[1].revents & POLLIN) accept_ready(clock::now());
      for (std::size_t i = 2; i < fds.size(); ++i) {
        auto& c = *conns_[i - 2];
        // Reading first: a client that left is seen leaving (its goodbye, or
        // why its host went), not only as a failed send.
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
        if (fds[i].revents & POLLOUT) send_replies(c);
      }
      expire(clock::now());
      std::erase_if(conns_, [](const auto& c) { return !c->fd; });
    }
  }

  /// At most 100 ms (handshake deadlines, linger, stop), and no later than the
  /// earliest pending wait's deadline: a short wait (the failure paths' 1 s
  /// grace, a try_wait of a few ms) times out when asked, not up to 100 ms late.
  int poll_timeout_ms(clock::time_point now) const {
    auto t = std::chrono::milliseconds(100);
    for (auto& c : conns_)
      if (c->waiting && c->fd)
        t = std::min(t, std::chrono::ceil<std::chrono::milliseconds>(c->wait_deadline - now));
    return static_cast<int>(std::max<std::int64_t>(0, t.count()));
  }

  std::size_t pending_handshakes() const {
    return static_cast<std::size_t>(
        std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->fd && !c->authed; }));
  }

  /// Accepts what is queued (a burst at most, then the loop serves the rest).
  void accept_ready(clock::time_point now) {
    rlimit lim{};
    long soft = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                    ? static_cast<long>(std::min<rlim_t>(lim.rlim_cur, 1L << 30))
                    : 1L << 30;
    const long crowded_fd = soft - store_fd_reserve(soft);
    std::size_t pending = pending_handshakes();
    for (int burst = 0; burst < 256; ++burst) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        int e = errno;
        if (e == EINTR || e == ECONNABORTED) continue;
        if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
          // Out of descriptors: free one a pending handshake holds and try
          // again, or leave the listener alone for a while.
          if (shed_pending(now, std::chrono::milliseconds(0))) {
            --pending;
            continue;
          }
          pause_accepting(now, "accept failed (" + errno_text(e) + ") and no pending handshake to close");
        }
        return; // EAGAIN: nothing more queued
      }
      add_connection(unique_fd(fd), now);
      ++pending;
      if (pending > store_max_pending_handshakes || fd >= crowded_fd) {
        // Crowded: close the oldest pending handshake (not this newest one).
        if (shed_pending(now, store_shed_min_age)) {
          --pending;
        } else {
          pause_accepting(now, pending > store_max_pending_handshakes
                                   ? std::to_string(pending) + " connections are in their handshake"
                                   : "descriptors nearly spent (RLIMIT_NOFILE " + std::to_string(soft) + ")");
          return;
        }
      }
    }
  }

  void add_connection(unique_fd fd, clock::time_point now) {
    set_nodelay(fd.get());
    if (peer_timeout_ms_ > 0) set_keepalive(fd.get(), std::chrono::milliseconds(peer_timeout_ms_));
    auto c = std::make_shared<connection>();
    c->peer = peer_name(fd.get());
    c->fd = std::move(fd);
    c->accepted = now;
    c->hello_deadline = now + store_handshake_timeout;
    conns_.push_back(std::move(c));
  }

  void take_adopted() {
    char buf[256];
    while (::read(wake_r_.get(), buf, sizeof buf) > 0) {}
    std::vector<unique_fd> fds;
    {
      std::lock_guard lock(adopt_mu_);
      fds.swap(adopted_);
    }
    for (auto& fd : fds)
      add_connection(std::move(fd), clock::now());
  }

  /// Closes the pending handshake to shed: at least `min_age` old, silent
  /// ones (nothing received yet) first, then the oldest. False when none.
  bool shed_pending(clock::time_point now, std::chrono::milliseconds min_age) {
    connection* victim = nullptr;
    for (auto& c : conns_) {
      if (!c->fd || c->authed || now - c->accepted < min_age) continue;
      bool silent = !c->challenged && c->in.empty();
      bool victim_silent = victim && !victim->challenged && victim->in.empty();
      if (!victim || (silent && !victim_silent) ||
          (silent == victim_silent && c->accepted < victim->accepted))
        victim = c.get();
    }
    if (!victim) return false;
    drop_pending(*victim, "closed to make room (too many connections in their handshake, or descriptors "
                          "nearly spent)");
    return true;
  }

  void pause_accepting(clock::time_point now, const std::string& why) {
    listen_paused_until_ = now + store_accept_backoff;
    auth_log_.line("not accepting connections for " + std::to_string(store_accept_backoff.count()) +
                       " ms: " + why + ". If ranks are many, raise the open-files limit (ulimit -n).",
                   now);
  }

  /// Closes a connection that has not authenticated, through the log throttle.
  void drop_pending(connection& c, const std::string& why) {
    auth_log_.line("closing connection from " + c.peer + " during the handshake: " + why, clock::now());
    c.fd.reset();
  }

  /// Why an authenticated rank is about to be recorded lost other than by
  /// exiting (store_unreachable_prefix): said before the loss is recorded, so
  /// that whoever reads the loss reads why.
  void say_why_lost(connection& c, const std::string& why) {
    if (!c.authed || c.said_bye || c.rank < 0) return;
    if (auto [at, fresh] =
            data_.try_emplace(c.scope + std::string(store_unreachable_prefix) + std::to_string(c.rank), why);
        fresh)
      key_added(at->first);
  }

  void drop(connection& c, const std::string& why) {
    if (!why.empty()) log_line("store", "closing connection from " + c.peer + ": " + why);
    if (c.authed && !c.said_bye && c.rank >= 0) record_lost(c.scope, c.rank);
    c.fd.reset();
  }

  void record_lost(const std::string& scope, int rank) {
    auto& lost = lost_[scope];
    if (std::find(lost.begin(), lost.end(), rank) != lost.end()) return; // failed, then dropped
    lost.push_back(rank);
    const std::string key = scope + store_lost_key;
    auto [it, fresh] = data_.try_emplace(key);
    if (!fresh) it->second += ",";
    it->second += std::to_string(rank);
    if (fresh) key_added(key);
    for (auto& c : conns_) // every other wait of that scope is answered "lost" now
      if (c->scope == scope) try_finish_wait(*c);
  }

  /// serve_late_arrivals: some rank of 0..ranks-1 has not connected yet
  /// (a rank of a larger world, started by mistake, does not count).
  bool arrivals_missing() const {
    const int expected = arrivals_expected_.load();
    return std::distance(arrived_.begin(), arrived_.lower_bound(expected)) < expected;
  }

  /// True while a rank other than a goodbye-sayer still holds a connection,
  /// unless survivors found that rank stopped.
  bool others_connected() const {
    return std::any_of(conns_.begin(), conns_.end(), [this](const auto& c) {
      return c->fd && c->authed && !c->said_bye && !found_stalled(*c);
    });
  }

  /// A survivor's desync report named this connection's rank silent, and it
  /// has published no progress since (a slow rank that reports late is waited
  /// for again).
  bool found_stalled(const connection& c) const {
    const int r = c.rank >= 0 ? c.rank : c.owner;
    if (r < 0) return false;
    const std::string who = std::to_string(r);
    return data_.count(c.scope + std::string(store_stalled_prefix) + who) &&
           !data_.count(c.scope + std::string(store_progress_prefix) + who);
  }

  /// Waits on the lost key or on diagnostics are how survivors learn about a
  /// failure: a lost rank must not cut them short.
  static bool waits_through_loss(const std::vector<std::string>& keys, const std::string& scope) {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) {
      std::string_view v = k;
      if (!v.starts_with(scope)) return false;
      v.remove_prefix(scope.size());
      return v == store_lost_key || v.starts_with(store_fault_prefix);
    });
  }

  void read_from(connection& c) {
    if (!c.fd) return; // shed this round
    char buf[65536];
    bool eof = false, unreachable = false;
    for (;;) {
      ssize_t k = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (k > 0) {
        c.in.append(buf, static_cast<std::size_t>(k));
        if (!c.authed && c.in.size() > 2 * (4 + std::size_t{store_max_handshake_frame}))
          break; // enough to judge
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      unreachable = k < 0 && errno_is_unreachable(errno);
      eof = true; // closed or reset: still handle what arrived first (a goodbye, say)
      break;
    }
    const bool replies_waited = replies_pending(c) || c.peer_gone;
    unreachable = unreachable || (eof && errno_is_unreachable(c.send_error));
    handle_frames(c, eof);
    if (eof && c.fd && !c.authed && c.challenged)
      // A rank whose token differs says so before it hangs up (handshake()); one
      // that hangs up without a word gave up for another reason.
      auth_log_.line("connection from " + c.peer + " (claiming rank " + std::to_string(c.rank) +
                         ") closed after the challenge without its proof: it gave up waiting for the store "
                         "(a loaded machine), ran out of file descriptors, or is a ddp too old to say why",
                     clock::now());
    if (eof && c.fd && unreachable)
      // Its host stopped acknowledging (set_keepalive): a cut link or a host down, not
      // an exit. With replies waiting, the kernel ends a connection whose reader takes
      // nothing (a zero window) after the same time: the process may be stopped.
      say_why_lost(
          c, (replies_waited
                  ? "is unreachable or stopped: it took none of the store's replies for "
                  : "is unreachable: its host acknowledged nothing on its connection to the store for ") +
                 std::to_string(peer_timeout_ms_) + " ms (" + (replies_waited ? "process stopped, " : "") +
                 "network cut or host down)");
    if (eof && c.fd) drop(c, "");
  }

  /// Handles the whole frames read from `c`, in order, and sends their
  /// replies together (a client's pipelined requests: tcp_store::multi_get);
  /// stops early, leaving the rest for later rounds of the loop, while the
  /// replies back up (store_reply_backlog). `client_left`: it closed its end;
  /// every frame is handled (its goodbye may be the last) and the replies go
  /// nowhere.
  void handle_frames(connection& c, bool client_left) {
    if (client_left) {
      c.peer_gone = true; // its replies would go nowhere: not even built up in memory
      c.out.clear();
      c.out_sent = 0;
    }
    std::size_t handled = 0;
    c.replies_held = true;
    while (c.fd && c.in.size() - handled >= 4 && (client_left || !backed_up(c))) {
      std::uint32_t n;
      std::memcpy(&n, c.in.data() + handled, 4);
      if (n == 0 || n > store_max_frame || (!c.authed && n > store_max_handshake_frame)) {
        std::string why = "oversized or empty frame (" + std::to_string(n) + " bytes)";
        if (c.authed)
          drop(c, why);
        else
          drop_pending(c, why);
        break;
      }
      if (c.in.size() - handled < 4 + std::size_t{n}) break;
      std::string body = c.in.substr(handled + 4, n);
      handled += 4 + std::size_t{n};
      handle(c, body);
    }
    c.replies_held = false;
    c.in.erase(0, handled); // once, not per frame: a read may hold a thousand
    if (c.in.empty() && c.in.capacity() > store_reply_backlog) std::string().swap(c.in);
    if (!client_left) send_replies(c);
  }

  /// Whether `c` holds a whole frame not handled yet.
  static bool frame_ready(const connection& c) {
    if (c.in.size() < 4) return false;
    std::uint32_t n;
    std::memcpy(&n, c.in.data(), 4);
    return n == 0 || n > store_max_frame || c.in.size() >= 4 + std::size_t{n}; // a bad one is handled too
  }

  /// Whether `c`'s unsent replies are enough that its requests wait.
  static bool backed_up(const connection& c) { return c.out.size() - c.out_sent >= store_reply_backlog; }

  static bool replies_pending(const connection& c) { return c.out_sent < c.out.size(); }

  /// Whether `c` has a request to handle now.
  static bool ready_to_handle(const connection& c) { return c.fd && !backed_up(c) && frame_ready(c); }

  void reply(connection& c, const std::vector<char>& frame) {
    if (!c.fd || c.peer_gone) return;
    if (!replies_pending(c)) c.out_moved = clock::now(); // the stall clock starts now
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    if (!c.replies_held) send_replies(c);
  }

  /// Sends what the socket takes now of `c`'s replies, without waiting.
  void send_replies(connection& c) {
    while (c.fd && replies_pending(c)) {
      const ssize_t k = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) {
        c.out_sent += static_cast<std::size_t>(k);
        c.out_moved = clock::now();
        if (c.out_sent >= store_reply_backlog && c.out_sent * 2 >= c.out.size()) { // drop what went out
          c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_sent));
          c.out_sent = 0;
        }
      } else if (k < 0 && errno == EINTR) {
        continue;
      } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return; // the rest when the client reads (POLLOUT)
      } else {
        // Reset, or timed out (TCP_USER_TIMEOUT): the read side says how it
        // went, and handles what the client sent last (a goodbye), at the
        // loop's next look (POLLHUP/POLLERR).
        c.peer_gone = true;
        c.send_error = errno;
        c.out.clear();
        c.out_sent = 0;
        return;
      }
    }
    c.out_sent = 0;
    c.out.clear();
    if (c.out.capacity() > store_reply_backlog) std::vector<char>().swap(c.out);
  }

  void handle(connection& c, const std::string& body) {
    auto op = static_cast<store_op>(static_cast<std::uint8_t>(body[0]));
    frame_reader r(std::string_view(body).substr(1));
    if (!c.authed) return handshake(c, op, r);
    switch (op) {
    case store_op::set: {
      std::string key = r.bytes(), value = r.bytes();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed set");
      // A rank announcing its own failure counts as lost from now on (it will
      // say goodbye later, but its peers must not wait for it).
      bool failed = c.rank >= 0 && key == c.scope + std::string(store_failed_prefix) + std::to_string(c.rank);
      bool fresh = data_.insert_or_assign(key, std::move(value)).second;
      reply(c, frame_writer(store_status::ok).finish());
      if (fresh) key_added(key);
      if (failed) record_lost(c.scope, c.rank);
      return;
    }
    case store_op::get: {
      std::string key = r.bytes();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed get");
      auto it = data_.find(key);
      if (it == data_.end()) return reply(c, frame_writer(store_status::missing).finish());
      return reply(c, frame_writer(store_status::ok).bytes(it->second).finish());
    }
    case store_op::add: {
      std::string key = r.bytes();
      std::int64_t delta = r.i64();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed add");
      auto [it, fresh] = data_.try_emplace(key);
      auto& v = it->second;
      // Wraps around at 2^63 like a machine counter (as PyTorch's TCPStore does in
      // practice); computed unsigned, since signed overflow is undefined (found by tests/fuzz).
      std::int64_t now =
          static_cast<std::int64_t>(static_cast<std::uint64_t>(v.empty() ? 0 : parse_int(v).value_or(0)) +
                                    static_cast<std::uint64_t>(delta));
      v = std::to_string(now);
      reply(c, frame_writer(store_status::ok).i64(now).finish());
      if (fresh) key_added(key);
      return;
    }
    case store_op::wait:
    case store_op::check: {
      std::uint32_t count = r.u32();
      if (!r.ok() || count > store_max_keys_per_frame) return drop(c, "malformed key list");
      std::vector<std::string> keys;
      for (std::uint32_t i = 0; i < count && r.ok(); ++i)
        keys.push_back(r.bytes());
      std::uint64_t timeout_ms = op == store_op::wait ? r.u64() : 0;
      if (!r.ok() || !r.at_end()) return drop(c, "malformed key list");
      if (op == store_op::check)
        return reply(c, frame_writer(store_status::ok).u8(all_present(keys) ? 1 : 0).finish());
      c.wait_keys = std::move(keys);
      c.wait_deadline =
          clock::now() + std::chrono::milliseconds(std::min<std::uint64_t>(timeout_ms, 1ull << 40));
      c.waiting = true;
      return begin_wait(c);
    }
    case store_op::scope: {
      std::string scope = r.bytes();
      if (!r.ok() || !r.at_end() || scope.size() > 256) return drop(c, "malformed scope");
      c.scope = std::move(scope);
      return reply(c, frame_writer(store_status::ok).finish());
    }
    case store_op::owner: {
      std::int32_t owner = r.i32();
      if (!r.ok() || !r.at_end() || c.rank >= 0 || owner < 0) return drop(c, "malformed owner");
      c.owner = owner;
      return reply(c, frame_writer(store_status::ok).finish());
    }
    case store_op::bye: c.said_bye = true; return;
    default: return drop(c, "unknown opcode " + std::to_string(static_cast<int>(op)));
    }
  }

  /// The server's side of auth.hpp's exchange: hello -> challenge, proof -> verdict.
  void handshake(connection& c, store_op op, frame_reader& r) {
    try {
      if (!c.challenged) {
        if (op != store_op::hello) return drop_pending(c, "the first message is not a hello");
        std::int32_t rank = r.i32();
        std::string nonce = r.bytes();
        if (!r.ok() || !r.at_end() || !to_nonce(nonce, c.client_nonce))
          return drop_pending(c, "malformed hello (a ddp rank of another version, or not a ddp rank)");
        c.rank = rank;
        c.server_nonce = auth_random_nonce();
        c.challenged = true;
        auto proof = auth_proof(token_, auth_role::server, c.client_nonce, c.server_nonce, rank);
        return reply(
            c, frame_writer(store_status::ok).bytes(as_view(c.server_nonce)).bytes(as_view(proof)).finish());
      }
      if (op == store_op::bye) { // the client found the store's proof wrong (handshake.hpp)
        auth_log_.line("refused a connection from " + c.peer + " (claiming rank " + std::to_string(c.rank) +
                           "): it found the store's proof wrong, so its job token differs (a process of "
                           "another job, or DDP_TOKEN differs between ranks)",
                       clock::now());
        note_refusal(c);
        c.fd.reset();
        return;
      }
      if (op != store_op::proof) return drop_pending(c, "expected the handshake's proof");
      std::string proof = r.bytes();
      if (!r.ok() || !r.at_end()) return drop_pending(c, "malformed proof");
      if (!auth_proof_matches(auth_proof(token_, auth_role::client, c.client_nonce, c.server_nonce, c.rank),
                              proof)) {
        auth_log_.line("refused a connection from " + c.peer + " (claiming rank " + std::to_string(c.rank) +
                           "): it could not prove it knows the job token (a process of another job, or "
                           "DDP_TOKEN differs between ranks)",
                       clock::now());
        note_refusal(c);
        reply(c, frame_writer(store_status::refused).finish());
        c.replies_held = false;
        send_replies(c); // before the connection closes (a fresh socket takes a few bytes)
        c.fd.reset();
        return;
      }
      c.authed = true;
      if (c.rank >= 0) {
        arrived_.insert(c.rank);
        refused_.erase(c.rank); // the real one came: the refused claim was another process's
      }
      reply(c, frame_writer(store_status::ok).finish());
    } catch (const error& e) { // OpenSSL failed: this connection cannot be served
      drop_pending(c, e.what());
    }
  }

  bool all_present(const std::vector<std::string>& keys) const {
    for (auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  }

  /// Registers a new wait under each key it still misses, then answers it if
  /// it can be answered now. Waits are indexed by key so that a set wakes only
  /// the waits on that key: rechecking every wait on every set cost O(N) waits
  /// x O(N) keys per set at N ranks waiting for ddp/arrived/0..N-1
  /// (docs/performance.md, Rendezvous and the Gloo mesh).
  void begin_wait(connection& c) {
    ++c.wait_seq;
    c.wait_missing = 0;
    for (auto& k : c.wait_keys) {
      if (data_.count(k)) continue;
      ++c.wait_missing;
      auto& list = waiters_[k];
      // Waits that ended (timed out, answered "lost", connection gone) leave
      // entries under keys that may never come: prune them now and then.
      if (list.size() >= 64 && (list.size() & (list.size() - 1)) == 0)
        std::erase_if(list, [](const waiter& w) {
          auto p = w.conn.lock();
          return !p || !p->fd || !p->waiting || p->wait_seq != w.seq;
        });
      list.push_back({c.weak_from_this(), c.wait_seq});
    }
    try_finish_wait(c);
  }

  /// `key` has just come into existence: count it off the waits that miss it.
  void key_added(const std::string& key) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) return;
    auto list = std::move(it->second);
    waiters_.erase(it);
    for (auto& w : list) {
      auto c = w.conn.lock();
      if (!c || !c->fd || !c->waiting || c->wait_seq != w.seq) continue; // that wait is over
      if (c->wait_missing > 0) --c->wait_missing;
      try_finish_wait(*c);
    }
  }

  void try_finish_wait(connection& c) {
    if (!c.waiting || !c.fd) return;
    if (c.wait_missing == 0) {
      c.waiting = false;
      reply(c, frame_writer(store_status::ok).finish());
    } else if (auto it = lost_.find(c.scope);
               it != lost_.end() && !it->second.empty() && !waits_through_loss(c.wait_keys, c.scope)) {
      c.waiting = false;
      reply(c, frame_writer(store_status::lost).i32(it->second.front()).finish());
    }
  }

  /// `c` claimed a rank with a wrong token: that rank is recorded lost unless it joins soon.
  void note_refusal(const connection& c) {
    if (c.rank >= 0 && !arrived_.count(c.rank))
      refused_.try_emplace(c.rank, refusal{clock::now() + store_refusal_grace, c.peer});
  }

  /// Records lost, in the scope of every rank connected, each rank refused for a wrong token that
  /// has not joined within store_refusal_grace, with why (store_unreachable_prefix).
  void expire_refusals(clock::time_point now) {
    for (auto it = refused_.begin(); it != refused_.end();) {
      if (now < it->second.due) {
        ++it;
        continue;
      }
      const int rank = it->first;
      const std::string why = "was refused by the rendezvous store: its connection (from " + it->second.peer +
                              ") could not prove it knows the job token, and no process of rank " +
                              std::to_string(rank) +
                              " with the right token came (set the same DDP_TOKEN on every rank, or let "
                              "the launcher set it)";
      std::set<std::string> scopes; // the ranks' (a launcher's own waits are in no round)
      for (auto& c : conns_)
        if (c->fd && c->authed && c->rank >= 0) scopes.insert(c->scope);
      for (auto& scope : scopes) {
        if (auto [at, fresh] =
                data_.try_emplace(scope + std::string(store_unreachable_prefix) + std::to_string(rank), why);
            fresh)
          key_added(at->first);
        record_lost(scope, rank);
      }
      it = refused_.erase(it);
    }
  }

  void expire(clock::time_point now) {
    expire_refusals(now);
    for (auto& c : conns_) {
      if (c->fd && replies_pending(*c)) {
        // The client reading slowly frees the socket's queue a little at a
        // time, too little for POLLOUT (a third of the buffer): progress too.
        int queued = 0;
        if (::ioctl(c->fd.get(), SIOCOUTQ, &queued) == 0) {
          if (queued < c->kernel_queued) c->out_moved = now;
          c->kernel_queued = queued;
        }
      }
      if (c->fd && replies_pending(*c) && now - c->out_moved >= store_reply_stall) {
        say_why_lost(*c, "is stopped or unreachable: it took none of the store's replies for " +
                             std::to_string(store_reply_stall.count()) +
                             " s (process stopped, or network cut)");
        drop(*c, "client does not read its replies (" + std::to_string(c->out.size() - c->out_sent) +
                     " bytes waited " + std::to_string(store_reply_stall.count()) +
                     " s): it is stopped, or its host is cut off");
      }
      if (!c->fd) continue;
      if (!c->authed && now > c->hello_deadline)
        drop_pending(*c, "no handshake within " + std::to_string(store_handshake_timeout.count()) + " s");
      else if (c->waiting && now >= c->wait_deadline) {
        c->waiting = false;
        reply(*c, frame_writer(store_status::timeout).finish());
      }
    }
  }

  unique_fd listener_;
  unique_fd wake_r_, wake_w_;
  std::string token_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> linger_ms_{0};
  const std::int64_t peer_timeout_ms_;
  clock::time_point linger_until_{};      // set before stop_, read by the loop after it
  std::atomic<int> arrivals_expected_{0}; // serve_late_arrivals
  std::atomic<std::int64_t> arrivals_ms_{0};
  clock::time_point arrivals_until_{}; // like linger_until_
  std::set<int> arrived_;              // ranks that authenticated once (the loop's own)
  struct refusal {
    clock::time_point due; ///< recorded lost from then on, unless the rank joins first
    std::string peer;
  };
  std::map<int, refusal> refused_;                         // ranks refused for a wrong token, not joined yet
  std::unordered_map<std::string, std::vector<int>> lost_; // per scope: ranks recorded lost, in order
  std::vector<std::shared_ptr<connection>> conns_;         // shared: waiters_ holds weak references
  clock::time_point listen_paused_until_{};
  log_throttle auth_log_;
  std::mutex adopt_mu_;
  std::vector<unique_fd> adopted_;
  std::unordered_map<std::string, std::string> data_;
  /// Pending waits by a key they miss (each wait appears under every such key).
  std::unordered_map<std::string, std::vector<waiter>> waiters_;
  std::thread thread_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_SERVER_HPP
// ---- end ddp/detail/store/server.hpp ----

DDP_BEGIN_NAMESPACE

DDP_INLINE tcp_store::tcp_store(const tcp_store_options& o) : opts_(o) {
  if (o.port < 0 || o.port > 65535 || (!o.serve && o.port == 0))
    throw error(error_kind::config, "tcp_store: port " + std::to_string(o.port) +
                                        " is not a valid port to connect to (1..65535)");
  auto deadline = detail::clock::now() + o.timeout;
  if (o.serve) {
    server_ =
        std::make_unique<detail::store_server>(o.host, o.port, o.token, deadline, peer_timeout(o.timeout));
    opts_.port = server_->port();
    server_->set_linger(o.linger.value_or(default_linger(o.timeout)));
  }
  open_connection(deadline);
}

DDP_INLINE void tcp_store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (!try_wait(keys, timeout)) {
    // The keys still missing say which rank did not arrive: the first few
    // are named (a mesh waits for a key per peer), the rest left unchecked.
    std::vector<std::string> missing;
    std::size_t looked = 0;
    for (; looked < keys.size() && missing.size() < keys_named; ++looked) {
      bool present = false;
      try {
        present = keys.size() > 1 && check({keys[looked]});
      } catch (const ddp::error&) {}
      if (!present) missing.push_back(keys[looked]);
    }
    std::string names = name_keys(missing);
    if (looked < keys.size())
      names += " (and maybe some of the " + std::to_string(keys.size() - looked) + " after)";
    throw error(error_kind::timeout, "waited " + std::to_string(timeout.count()) + " ms for store key(s) " +
                                         names + " at " + where() +
                                         ": a rank did not arrive (crashed, stuck, or started with other "
                                         "arguments). Raise DDP_TIMEOUT if startup is just slow.");
  }
}

DDP_INLINE tcp_store::~tcp_store() {
  if (fd_ && !broken_) {
    auto f = detail::frame_writer(detail::store_op::bye).finish();
    detail::send_all(fd_.get(), f.data(), f.size(), detail::clock::now() + std::chrono::seconds(1));
  }
}

DDP_INLINE void tcp_store::set(const std::string& key, std::string_view value,
                               std::optional<std::chrono::milliseconds> io_timeout) {
  request(detail::frame_writer(detail::store_op::set).bytes(scoped(key)).bytes(value), "set '" + key + "'",
          io_timeout);
}

DDP_INLINE std::string tcp_store::get(const std::string& key) {
  wait({key});
  auto v = try_get(key);
  if (!v) throw error(error_kind::backend, "store key '" + key + "' vanished");
  return *v;
}

DDP_INLINE std::optional<std::string>
tcp_store::try_get(const std::string& key, std::optional<std::chrono::milliseconds> io_timeout) {
  auto r = request(detail::frame_writer(detail::store_op::get).bytes(scoped(key)), "get '" + key + "'",
                   io_timeout);
  if (static_cast<detail::store_status>(r[0]) == detail::store_status::missing) return std::nullopt;
  detail::frame_reader fr(std::string_view(r).substr(1));
  auto v = fr.bytes();
  if (!fr.ok()) throw protocol_error("get");
  return v;
}

DDP_INLINE std::vector<std::string> tcp_store::multi_get(const std::vector<std::string>& keys,
                                                         std::chrono::milliseconds timeout) {
  wait(keys, timeout);
  std::vector<std::vector<char>> frames;
  frames.reserve(keys.size());
  for (auto& k : keys)
    frames.push_back(detail::frame_writer(detail::store_op::get).bytes(scoped(k)).finish());
  std::vector<std::string> values;
  values.reserve(keys.size());
  const auto replies = pipelined(frames, "get " + name_keys(keys));
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (static_cast<detail::store_status>(replies[i][0]) == detail::store_status::missing)
      throw error(error_kind::backend, "store key '" + keys[i] + "' vanished");
    detail::frame_reader fr(std::string_view(replies[i]).substr(1));
    values.push_back(fr.bytes());
    if (!fr.ok()) throw protocol_error("get");
  }
  return values;
}

DDP_INLINE void tcp_store::multi_set(const std::vector<std::string>& keys,
                                     const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    throw error(error_kind::config, "tcp_store::multi_set: " + std::to_string(keys.size()) + " keys but " +
                                        std::to_string(values.size()) + " values");
  std::vector<std::vector<char>> frames;
  frames.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    frames.push_back(
        detail::frame_writer(detail::store_op::set).bytes(scoped(keys[i])).bytes(values[i]).finish());
  const auto replies = pipelined(frames, "set " + name_keys(keys));
  for (std::size_t i = 0; i < replies.size(); ++i)
    if (static_cast<detail::store_status>(replies[i][0]) != detail::store_status::ok)
      throw protocol_error(("set '" + keys[i] + "'").c_str());
}

DDP_INLINE std::int64_t tcp_store::add(const std::string& key, std::int64_t delta) {
  auto r =
      request(detail::frame_writer(detail::store_op::add).bytes(scoped(key)).i64(delta), "add '" + key + "'");
  detail::frame_reader fr(std::string_view(r).substr(1));
  auto v = fr.i64();
  if (!fr.ok()) throw protocol_error("add");
  return v;
}

DDP_INLINE bool tcp_store::check(const std::vector<std::string>& keys) {
  return every_frame_part(keys, [&](std::span<const std::string> part) {
    detail::frame_writer w(detail::store_op::check);
    w.u32(static_cast<std::uint32_t>(part.size()));
    for (auto& k : part)
      w.bytes(scoped(k));
    auto r = request(w, "check");
    return r.size() >= 2 && r[1] == 1;
  });
}

DDP_INLINE bool tcp_store::try_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                                    std::chrono::milliseconds slack) {
  if (keys.size() <= detail::store_max_keys_per_frame) return try_wait_frame(keys, keys, timeout, slack);
  // More keys than a frame holds: one wait per part, the whole within `timeout`
  // (clamped as the store clamps it, so that the deadline cannot overflow).
  const auto deadline = detail::clock::now() + std::min(timeout, std::chrono::milliseconds(1LL << 40));
  return every_frame_part(keys, [&](std::span<const std::string> part) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::ceil<std::chrono::milliseconds>(deadline - detail::clock::now()));
    return try_wait_frame(part, keys, left, slack);
  });
}

DDP_INLINE bool tcp_store::try_wait_frame(std::span<const std::string> keys,
                                          const std::vector<std::string>& all_keys,
                                          std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds slack) {
  detail::frame_writer w(detail::store_op::wait);
  w.u32(static_cast<std::uint32_t>(keys.size()));
  for (auto& k : keys)
    w.bytes(scoped(k));
  w.u64(static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count())));
  auto r = request(w, "wait for " + name_keys(keys), timeout + slack);
  auto st = static_cast<detail::store_status>(r[0]);
  if (st == detail::store_status::lost) {
    detail::frame_reader fr(std::string_view(r).substr(1));
    int lost = fr.i32();
    if (!fr.ok()) throw protocol_error("wait");
    throw error(error_kind::peer_lost,
                "rank " + std::to_string(lost) + " " + describe_lost(lost) + " while rank " +
                    std::to_string(opts_.rank) + " waited for store key(s) " + name_keys(all_keys) + " at " +
                    where() + ": it will never set them. Look at rank " + std::to_string(lost) +
                    "'s output first.",
                lost);
  }
  return st == detail::store_status::ok;
}

DDP_INLINE std::vector<int> tcp_store::lost_ranks() {
  std::vector<int> out;
  auto v = try_get(detail::store_lost_key, fault_slack);
  if (!v) return out;
  std::string_view s = *v;
  while (!s.empty()) {
    auto comma = s.find(',');
    if (auto r = detail::parse_int(s.substr(0, comma))) out.push_back(static_cast<int>(*r));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

DDP_INLINE lost_rank tcp_store::wait_for_lost_rank(std::chrono::milliseconds grace) {
  try {
    if (!try_wait({detail::store_lost_key}, grace, fault_slack)) return {};
    auto lost = lost_ranks();
    if (lost.empty()) return {};
    return {lost.front(), describe_lost(lost.front())};
  } catch (const ddp::error& e) {
    if (unreachable_) // our own connection timed out: the store's host is cut off, not just slow
      return {0, std::string("is unreachable: its host acknowledged nothing on the connection to the "
                             "rendezvous store ") +
                     (opts_.served_by_launcher ? "its node's ddprun serves" : "it serves") + " for " +
                     std::to_string(peer_timeout(opts_.timeout).count()) + " ms (network cut or host down)"};
    if (opts_.served_by_launcher) // the launcher died, not a rank: no rank to name, but news
      return e.kind() == error_kind::peer_lost ? lost_rank{-1, launcher_gone(), false} : lost_rank{};
    if (e.kind() == error_kind::timeout)
      return {0,
              "does not answer: the rendezvous store it serves did not reply within " +
                  std::to_string((grace + fault_slack).count()) + " ms (rank 0 is stopped or hung)",
              true};
    return {0, "exited: the rendezvous store it serves is gone"};
  }
}

DDP_INLINE std::string tcp_store::launcher_gone() const {
  return "the rendezvous store at " + where() +
         ", which ddprun serves on the master node, closed its connection: the launcher is gone (killed by "
         "SIGKILL, the OOM killer or the job's time limit), so no rank of this job can go on. Look at how "
         "ddprun ended";
}

DDP_INLINE bool tcp_store::report_failure(std::string_view reason) noexcept {
  try {
    auto frame = [&] {
      return detail::frame_writer(detail::store_op::set)
          .bytes(scoped(std::string(detail::store_failed_prefix) + std::to_string(opts_.rank)))
          .bytes(reason);
    };
    {
      // Polled with try_lock, not a timed_mutex: GCC 12's TSan does not see
      // timed_mutex's lock (pthread_mutex_clocklock) and reports its unlock.
      std::unique_lock lock(mu_, std::defer_lock);
      const auto give_up = detail::clock::now() + report_patience;
      while (!lock.try_lock() && detail::clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (lock.owns_lock()) {
        auto w = frame();
        request_holding_lock(w, "report failure", fault_slack);
        return true;
      }
    }
    tcp_store_options o = opts_;
    o.serve = false;
    o.linger.reset();
    o.timeout = fault_slack;
    tcp_store alone(o);
    auto w = frame();
    alone.request(w, "report failure", fault_slack);
    return true;
  } catch (...) { return false; }
}

DDP_INLINE void tcp_store::serve_late_arrivals(int world_size) {
  if (server_) server_->serve_late_arrivals(world_size, late_arrival_linger);
}

DDP_INLINE void tcp_store::stop_serving_at_once() {
  if (server_) server_->set_linger(std::chrono::milliseconds(0));
}

DDP_INLINE void tcp_store::linger_briefly() {
  if (server_) server_->set_linger(own_failure_linger);
}

DDP_INLINE std::unique_ptr<tcp_store> tcp_store::connect_again(std::chrono::milliseconds timeout) const {
  tcp_store_options o = opts_;
  o.serve = false;
  o.rank = -1;
  o.linger.reset();
  o.timeout = timeout;
  auto again = std::make_unique<tcp_store>(o);
  // Only rank 0's store lingers; a launcher's, maybe of another ddp version, is not asked.
  if (opts_.rank >= 0 && !opts_.served_by_launcher) again->declare_owner(opts_.rank);
  return again;
}

DDP_INLINE void tcp_store::shutdown_connection() noexcept {
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

DDP_INLINE std::string tcp_store::request(detail::frame_writer& w, const std::string& what,
                                          std::optional<std::chrono::milliseconds> io_timeout) {
  std::lock_guard lock(mu_);
  return request_holding_lock(w, what, io_timeout);
}

DDP_INLINE std::string tcp_store::request_holding_lock(detail::frame_writer& w, const std::string& what,
                                                       std::optional<std::chrono::milliseconds> io_timeout) {
  throw_if_broken();
  auto deadline = detail::clock::now() + io_timeout.value_or(opts_.timeout);
  send_frame(w.finish(), deadline);
  return recv_frame(deadline, what);
}

DDP_INLINE std::string tcp_store::name_keys(std::span<const std::string> keys) {
  std::string names;
  for (std::size_t i = 0; i < keys.size() && i < keys_named; ++i)
    names += (names.empty() ? "'" : ", '") + keys[i] + "'";
  if (keys.size() > keys_named) names += " and " + std::to_string(keys.size() - keys_named) + " more";
  return names;
}

DDP_INLINE std::string tcp_store::describe_lost(int rank) {
  try {
    auto cut = try_get(std::string(detail::store_unreachable_prefix) + std::to_string(rank), fault_slack);
    if (cut) return *cut;
    auto why = try_get(std::string(detail::store_failed_prefix) + std::to_string(rank), fault_slack);
    if (why) return "failed: " + *why;
  } catch (const ddp::error&) {}
  return "exited or lost its connection";
}

DDP_INLINE std::chrono::milliseconds tcp_store::default_linger(std::chrono::milliseconds timeout) {
  return timeout + std::chrono::seconds(10);
}

DDP_INLINE std::chrono::milliseconds tcp_store::peer_timeout(std::chrono::milliseconds timeout) {
  return std::max(timeout / 2, std::chrono::milliseconds(1000));
}

DDP_INLINE void tcp_store::open_connection(detail::clock::time_point deadline) {
  using detail::handshake_result;
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    fd_ = detail::connect_tcp(opts_.host, opts_.port, deadline);
    detail::set_keepalive(fd_.get(), peer_timeout(opts_.timeout));
    // Twice the server's own deadline: a store that takes longer is not going to answer.
    auto attempt = std::min(deadline, detail::clock::now() + 2 * detail::store_handshake_timeout);
    auto res = detail::client_handshake(fd_.get(), opts_.token, opts_.rank, attempt);
    if (res == handshake_result::ok) return declare_scope(deadline);
    fd_.reset();
    if (res == handshake_result::refused)
      throw error(error_kind::config, "the rendezvous store at " + where() +
                                          " refused this process: its job token differs (set the same "
                                          "DDP_TOKEN on every rank, or let the launcher set it)");
    if (res == handshake_result::server_unproven || res == handshake_result::malformed)
      throw error(error_kind::config,
                  "the process listening on " + where() + " is not this job's rendezvous store: it " +
                      (res == handshake_result::malformed ? "does not speak ddp's store protocol"
                                                          : "could not prove it knows the job token") +
                      ". DDP_TOKEN differs between this rank and rank 0, or another program holds the "
                      "port (check MASTER_ADDR/MASTER_PORT; the token was not sent)");
    if (detail::clock::now() + backoff > deadline)
      throw error(error_kind::timeout,
                  "the rendezvous store at " + where() + " accepted the connection but " +
                      (res == handshake_result::closed ? "closed it" : "did not answer") +
                      " during the handshake, until the timeout. Is that rank 0's store (check "
                      "MASTER_ADDR/MASTER_PORT), and is rank 0 alive and not out of file descriptors?");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

DDP_INLINE void tcp_store::declare_scope(detail::clock::time_point deadline) {
  if (opts_.scope.empty()) return;
  send_frame(detail::frame_writer(detail::store_op::scope).bytes(opts_.scope).finish(), deadline);
  auto r = recv_frame(deadline, "scope");
  if (static_cast<detail::store_status>(r[0]) != detail::store_status::ok) throw protocol_error("scope");
}

DDP_INLINE void tcp_store::declare_owner(int rank) {
  detail::frame_writer w(detail::store_op::owner);
  auto r = request(w.i32(rank), "declare its owner");
  if (static_cast<detail::store_status>(r[0]) != detail::store_status::ok) throw protocol_error("owner");
}

DDP_INLINE std::string tcp_store::server_name() const {
  return opts_.served_by_launcher ? "ddprun on the master node, which serves it,"
                                  : "rank 0, which serves it,";
}

DDP_INLINE error tcp_store::protocol_error(const char* what) const {
  return error(error_kind::backend, std::string("malformed reply from the rendezvous store to ") + what);
}

DDP_INLINE std::vector<std::string> tcp_store::pipelined(const std::vector<std::vector<char>>& frames,
                                                         const std::string& what) {
  std::lock_guard lock(mu_);
  throw_if_broken();
  const auto deadline = detail::clock::now() + opts_.timeout;
  std::vector<std::string> replies;
  replies.reserve(frames.size());
  std::vector<char> piece;
  for (std::size_t next = 0; next < frames.size();) {
    piece.clear();
    const std::size_t first = next;
    while (next < frames.size() &&
           (piece.empty() || piece.size() + frames[next].size() <= pipeline_piece_bytes)) {
      piece.insert(piece.end(), frames[next].begin(), frames[next].end());
      ++next;
    }
    send_frame(piece, deadline);
    for (std::size_t i = first; i < next; ++i)
      replies.push_back(recv_frame(deadline, what));
  }
  return replies;
}

DDP_INLINE void tcp_store::throw_if_broken() const {
  if (broken_)
    throw error(broken_kind_,
                "the rendezvous store at " + where() + " is gone or silent (" + server_name() +
                    " exited or stopped)",
                opts_.served_by_launcher ? -1 : 0);
}

DDP_INLINE void tcp_store::send_frame(const std::vector<char>& f, detail::clock::time_point deadline) {
  auto st = detail::send_all(fd_.get(), f.data(), f.size(), deadline);
  if (st != detail::io_status::ok) fail(st, "sending");
}

DDP_INLINE std::string tcp_store::recv_frame(detail::clock::time_point deadline, const std::string& what) {
  std::uint32_t n = 0;
  auto st = detail::recv_all(fd_.get(), &n, 4, deadline);
  if (st != detail::io_status::ok) fail(st, what);
  if (n == 0 || n > detail::store_max_frame) {
    broken_ = true;
    throw protocol_error(what.c_str());
  }
  std::string body(n, '\0');
  st = detail::recv_all(fd_.get(), body.data(), n, deadline);
  if (st != detail::io_status::ok) fail(st, what);
  return body;
}

DDP_INLINE void tcp_store::fail(detail::io_status st, const std::string& what) {
  broken_ = true;
  if (st == detail::io_status::unreachable) {
    unreachable_ = true;
    throw error(error_kind::peer_lost,
                "lost the connection to the rendezvous store at " + where() + " (" + what +
                    "): the host of rank 0, which serves it, acknowledged nothing for " +
                    std::to_string(peer_timeout(opts_.timeout).count()) +
                    " ms (network cut or host down; check the link and GLOO_SOCKET_IFNAME)",
                0);
  }
  broken_kind_ = st == detail::io_status::timeout ? error_kind::timeout : error_kind::peer_lost;
  if (st == detail::io_status::timeout)
    throw error(error_kind::timeout,
                "the rendezvous store at " + where() + " did not answer (" + what + ") within the timeout");
  throw error(error_kind::peer_lost,
              "lost the connection to the rendezvous store at " + where() + " (" + what +
                  "): " + server_name() + " has probably exited",
              opts_.served_by_launcher ? -1 : 0);
}

DDP_END_NAMESPACE

#endif // DDP_STORE_INL_HPP
// ---- end ddp/store-inl.hpp ----
// ---- begin ddp/detail/gloo/communicator-inl.hpp ----
// The definitions of gloo_communicator (communicator.hpp): each hands the call
// to the implementation it points to. Compiled in every translation unit that
// includes it when ddp is header-only, once in the runtime when it is compiled
// separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_GLOO_COMMUNICATOR_INL_HPP
#define DDP_DETAIL_GLOO_COMMUNICATOR_INL_HPP

// ---- begin ddp/detail/gloo/communicator_impl.hpp ----
// What the Gloo communicator (communicator.hpp) holds and does, behind its
// pointer: CPU tensors over TCP. Collectives run one at a time, in submission order, on a worker thread
// (Gloo has no non-blocking collectives), each with a fresh tag. The first
// failure closes every connection, so peers fail fast too, and poisons the
// group. It connects, dispatches and aborts; the mesh, the collectives, the
// shared-memory path and the blame are its parts in this folder.
#ifndef DDP_DETAIL_GLOO_COMMUNICATOR_IMPL_HPP
#define DDP_DETAIL_GLOO_COMMUNICATOR_IMPL_HPP

// ---- begin ddp/detail/backend/collective_queue.hpp ----
// What every backend shares: one ordered queue of collectives per group (so
// ranks stay in lock-step and an async bucket never crosses a blocking call),
// each collective described once — "rank 1: all_reduce #12 (4096 x float32)" —
// so that a timeout or a failure names it, and the first failure poisoning the
// group. Every collective passes through the flight recorder on its way, and
// onto the timeline (DDP_TRACE) when that is on.
#ifndef DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP
#define DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP

// ---- begin ddp/detail/backend/ordered_queue.hpp ----
// One worker thread that runs a process group's collectives strictly in
// submission order. The first failure poisons the queue: every pending and
// every later task fails at once with that same error, so no rank waits on a
// collective its peers will never join.
#ifndef DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP
#define DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP


#include <deque>
#include <functional>
#include <thread>

DDP_BEGIN_NAMESPACE
namespace detail {

class ordered_queue {
public:
  /// Gets its own work's state: a collective that completes on a device
  /// stream publishes how to wait for it there (work_state::queued_on_device).
  using task = std::function<void(work_state&)>;

private:
  struct item {
    task fn;
    std::shared_ptr<work_state> state;
  };

public:
  ordered_queue() : thread_([this] { run(); }) {}
  ordered_queue(const ordered_queue&) = delete;
  ordered_queue& operator=(const ordered_queue&) = delete;
  ~ordered_queue() { stop(); }

  /// Runs (or fails) what is queued, then ends the worker; later submissions
  /// fail at once. abort() and poisoned() keep working.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

  /// Queues `fn`; the returned work completes when it ran (or failed), or,
  /// where `fn` deferred its completion, when its backend says so.
  /// With `inline_if_idle`, a caller that is about to wait anyway runs `fn`
  /// itself when nothing is queued or running: same order, no thread hand-off.
  work submit(task fn, std::string what, std::chrono::milliseconds timeout, bool inline_if_idle = false) {
    auto st = std::make_shared<work_state>();
    st->what = std::move(what);
    st->timeout = timeout;
    {
      std::lock_guard lock(mu_);
      if (poison_ || stop_) {
        st->finish(poison_ ? poison_
                           : std::make_exception_ptr(error(
                                 error_kind::backend, st->what + ": the process group is shutting down")));
        return work(st);
      }
      if (!inline_if_idle || busy_ || !q_.empty()) {
        q_.push_back({std::move(fn), st});
        cv_.notify_one();
        return work(st);
      }
      busy_ = true;
    }
    execute(item{std::move(fn), st});
    return work(st);
  }

  /// The error that poisoned the queue, if any.
  std::exception_ptr poisoned() const {
    std::lock_guard lock(mu_);
    return poison_;
  }

  /// Poisons the queue with `why` (unless already poisoned): what is queued
  /// fails now, later submissions fail at once; a running task is not touched.
  void abort(std::exception_ptr why) {
    std::deque<item> failed;
    {
      std::lock_guard lock(mu_);
      if (!poison_) poison_ = std::move(why);
      why = poison_;
      failed.swap(q_);
    }
    for (auto& f : failed)
      f.state->finish(why);
    idle_cv_.notify_all();
  }

  /// Blocks until everything queued so far has run.
  void drain() {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return q_.empty() && !busy_; });
  }

private:
  void run() {
    trace::thread_label = "comm"; // its row on the timeline
    for (;;) {
      item it;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !busy_ && (stop_ || !q_.empty()); });
        if (q_.empty()) return; // stop_ and nothing left
        it = std::move(q_.front());
        q_.pop_front();
        busy_ = true;
      }
      execute(std::move(it));
    }
  }

  /// Runs one item; the caller has set busy_.
  void execute(item it) {
    std::exception_ptr failure;
    try {
      it.fn(*it.state);
    } catch (...) { failure = std::current_exception(); }
    std::deque<item> failed;
    {
      std::lock_guard lock(mu_);
      if (failure && !poison_) {
        poison_ = failure;
        failed.swap(q_);
      }
      busy_ = false;
      // Notified under the lock: once the works below finish, a waiting thread
      // may destroy this queue, so nothing here may touch it after that.
      idle_cv_.notify_all();
      // The worker only when items queued behind an inline run (or a stop
      // waited for it): waking the idle worker after every inline collective
      // cost a futex wake and a context switch each; a 4 KiB all-reduce over
      // shm at 2 ranks took 13 us (median of 3000) that way, 2-4.6 us without.
      if (!q_.empty() || stop_) cv_.notify_one();
    }
    // A task whose collective completes on a device stream (work_state::
    // queued_on_device) is finished by its backend when the device is done.
    if (failure || !it.state->is_deferred()) it.state->finish(failure);
    for (auto& f : failed)
      f.state->finish(failure);
  }

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<item> q_;
  std::exception_ptr poison_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_ORDERED_QUEUE_HPP
// ---- end ddp/detail/backend/ordered_queue.hpp ----
// ---- begin ddp/detail/fault/flight_recorder.hpp ----
// The flight recorder: each rank keeps its last 64 collectives (sequence
// number, kind, dtype, count, bucket when known, state, times), like PyTorch's
// NCCL flight recorder. When a collective times out or loses a peer, the
// survivors compare how far each rank got (the desync report, gloo.hpp), and
// DDP_FLIGHT_RECORDER=DIR writes each rank's record to DIR/rank_<r>.json.
#ifndef DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP
#define DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP


#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class flight_state : std::uint8_t { queued, running, done, failed };

constexpr std::string_view to_string(flight_state s) noexcept {
  switch (s) {
  case flight_state::queued: return "queued";
  case flight_state::running: return "running";
  case flight_state::done: return "done";
  case flight_state::failed: return "failed";
  }
  return "unknown";
}

struct flight_entry {
  std::uint64_t seq = 0;
  std::string kind; ///< "all_reduce", "broadcast", ...
  dtype dt = dtype::u8;
  std::size_t count = 0;
  int bucket = -1; ///< -1: not a DDP bucket, or not known
  flight_state state = flight_state::queued;
  /// Wall-clock microseconds since the epoch (comparable across ranks of one
  /// machine); 0 when that step has not happened.
  std::int64_t queued_us = 0, started_us = 0, finished_us = 0;
};

/// How far one rank got: the latest collective that started (or, when none
/// did, nothing). Published through the store for the desync report.
struct flight_progress {
  std::int64_t seq = -1; ///< -1: no collective started yet
  std::string kind;
  flight_state state = flight_state::queued;

  std::string encode() const {
    return std::to_string(seq) + " " + (kind.empty() ? "-" : kind) + " " + std::string(to_string(state));
  }
  static flight_progress decode(std::string_view s) {
    flight_progress p;
    auto a = s.find(' ');
    auto b = a == std::string_view::npos ? a : s.find(' ', a + 1);
    if (b == std::string_view::npos) return p;
    p.seq = parse_int(s.substr(0, a)).value_or(-1);
    p.kind = std::string(s.substr(a + 1, b - a - 1));
    auto st = s.substr(b + 1);
    for (auto x : {flight_state::queued, flight_state::running, flight_state::done, flight_state::failed})
      if (st == to_string(x)) p.state = x;
    return p;
  }
  std::string describe() const {
    if (seq < 0) return "no collective started yet";
    return kind + " #" + std::to_string(seq) + " (" + std::string(to_string(state)) + ")";
  }
};

class flight_recorder {
public:
  static constexpr std::size_t capacity = 64;

  void queued(std::uint64_t seq, std::string_view kind, dtype dt, std::size_t count, int bucket = -1) {
    std::lock_guard lock(mu_);
    auto& e = ring_[seq % capacity];
    e = flight_entry{seq, std::string(kind), dt, count, bucket, flight_state::queued, now_us(), 0, 0};
    if (seq + 1 > total_) total_ = seq + 1;
  }
  void running(std::uint64_t seq) {
    std::lock_guard lock(mu_);
    if (auto* e = find(seq)) {
      e->state = flight_state::running;
      e->started_us = now_us();
      if (static_cast<std::int64_t>(seq) > last_started_) last_started_ = static_cast<std::int64_t>(seq);
    }
  }
  void finished(std::uint64_t seq, bool ok) {
    std::lock_guard lock(mu_);
    if (auto* e = find(seq)) {
      e->state = ok ? flight_state::done : flight_state::failed;
      e->finished_us = now_us();
    }
  }
  /// A line about the failure (the desync report) for the JSON record.
  void note(std::string text) {
    std::lock_guard lock(mu_);
    note_ = std::move(text);
  }

  /// The retained entries, oldest first.
  std::vector<flight_entry> snapshot() const {
    std::lock_guard lock(mu_);
    std::vector<flight_entry> out;
    std::uint64_t first = total_ > capacity ? total_ - capacity : 0;
    for (std::uint64_t s = first; s < total_; ++s)
      out.push_back(ring_[s % capacity]);
    return out;
  }

  flight_progress progress() const {
    std::lock_guard lock(mu_);
    flight_progress p;
    if (last_started_ < 0) return p;
    const auto& e = ring_[static_cast<std::uint64_t>(last_started_) % capacity];
    p.seq = last_started_;
    p.kind = e.kind;
    p.state = e.state;
    return p;
  }

  std::string to_json(int rank) const {
    auto entries = snapshot();
    std::string note;
    {
      std::lock_guard lock(mu_);
      note = note_;
    }
    std::string j = "{\n  \"rank\": " + std::to_string(rank) +
                    ",\n  \"capacity\": " + std::to_string(capacity) + ",\n  \"note\": \"" +
                    json_escape(note) + "\",\n  \"entries\": [";
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      j += std::string(i ? "," : "") + "\n    {\"seq\": " + std::to_string(e.seq) + ", \"kind\": \"" +
           json_escape(e.kind) + "\", \"dtype\": \"" + std::string(to_string(e.dt)) +
           "\", \"count\": " + std::to_string(e.count) +
           ", \"bucket\": " + (e.bucket < 0 ? std::string("null") : std::to_string(e.bucket)) +
           ", \"state\": \"" + std::string(to_string(e.state)) +
           "\", \"queued_us\": " + std::to_string(e.queued_us) +
           ", \"started_us\": " + std::to_string(e.started_us) +
           ", \"finished_us\": " + std::to_string(e.finished_us) + "}";
    }
    j += "\n  ]\n}\n";
    return j;
  }

  /// With DDP_FLIGHT_RECORDER=DIR, writes DIR/rank_<rank>.json (once per
  /// process: the first failure is the one worth reading). Returns the path, or
  /// "" when not asked or not written (a warning says why).
  std::string dump_if_asked(int rank) {
    auto dir = getenv_str("DDP_FLIGHT_RECORDER");
    if (!dir || dir->empty()) return {};
    {
      std::lock_guard lock(mu_);
      if (dumped_) return {};
      dumped_ = true;
    }
    std::string path = *dir + "/rank_" + std::to_string(rank) + ".json";
    std::string body = to_json(rank);
    std::FILE* f = std::fopen(path.c_str(), "w");
    bool ok = f && std::fwrite(body.data(), 1, body.size(), f) == body.size();
    if (f) ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
      std::string line = "[ddp rank " + std::to_string(rank) + "] DDP_FLIGHT_RECORDER: could not write " +
                         path + " (does the directory exist and is it writable?)\n";
      std::fwrite(line.data(), 1, line.size(), stderr);
      return {};
    }
    return path;
  }

private:
  static std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  flight_entry* find(std::uint64_t seq) {
    auto& e = ring_[seq % capacity];
    return e.seq == seq ? &e : nullptr;
  }
  static std::string json_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buf;
      } else {
        out += c;
      }
    }
    return out;
  }

  mutable std::mutex mu_;
  std::array<flight_entry, capacity> ring_{};
  std::uint64_t total_ = 0;
  std::int64_t last_started_ = -1;
  std::string note_;
  bool dumped_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_FLIGHT_RECORDER_HPP
// ---- end ddp/detail/fault/flight_recorder.hpp ----

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

class collective_queue {
public:
  /// `note` is appended to every description (", NCCL").
  collective_queue(int rank, std::chrono::milliseconds timeout, std::string note = {})
      : trace_(rank), rank_(rank), timeout_(timeout), note_(std::move(note)) {}

  /// A collective's work: body(what, state), `state` the returned work's.
  using body_type = std::function<void(const std::string& what, work_state& state)>;

  /// Queues `body(what, state)` behind every collective submitted before it.
  /// With `blocking`, a caller about to wait anyway runs it inline when the queue is idle. `bucket`: the DDP
  /// bucket this collective reduces, when the caller knows it (else the one distributed_data_parallel is
  /// launching on this thread, if any). Not a template: one copy of this code, whatever the body
  /// (a template on the body's type compiled once per kind of collective).
  work submit(std::string_view name, std::size_t n, dtype dt, bool blocking, body_type body,
              int bucket = -1) {
    const std::uint64_t seq = seq_++;
    std::string what = "rank " + std::to_string(rank_) + ": " + std::string(name) + " #" +
                       std::to_string(seq) + " (" + std::to_string(n) + " x " + std::string(to_string(dt)) +
                       note_ + ")";
    if (bucket < 0) bucket = trace::submitting_bucket;
    recorder_.queued(seq, name, dt, n, bucket);
    traced t{-1, 0, bucket, nullptr};
    if (trace::on())
      t = {trace::now_ns(), static_cast<std::int64_t>(n * size_of(dt)), bucket, trace_label(name)};
    return queue_->submit(
        [this, body = std::move(body), what, seq, t](work_state& self) mutable {
          const std::int64_t start = t.queued_ns >= 0 ? trace::now_ns() : -1;
          recorder_.running(seq);
          auto done = [this, seq, t, start](bool ok) {
            recorder_.finished(seq, ok);
            t.record(seq, start);
            if (!ok) recorder_.dump_if_asked(rank_);
          };
          try {
            body(what, self);
          } catch (...) {
            done(false);
            throw;
          }
          if (self.is_deferred())
            self.after_deferred_finish(done); // NCCL's device collectives: when the device is done
          else
            done(true);
        },
        what, timeout_, blocking);
  }

  /// The last collectives of this rank (the desync report reads it).
  flight_recorder& recorder() noexcept { return recorder_; }

  /// Fails everything queued but not started with `why` and refuses later
  /// collectives; the one running (if any) finishes on its own. For a rank
  /// leaving on an error of its own, before it closes its connections.
  void abort(std::exception_ptr why) { queue_->abort(std::move(why)); }

  /// The error that poisoned the group, if any.
  std::exception_ptr poisoned() const { return queue_->poisoned(); }
  /// Blocks until every collective submitted so far has run.
  void drain() { queue_->drain(); }
  /// Finishes (or fails) what is queued and stops the worker: a backend calls
  /// this before it frees what its collectives use.
  /// abort() and poisoned() still work afterwards (a backend whose collectives
  /// finish later, on another thread, may fail the group then).
  void stop() { queue_->stop(); }

private:
  /// What the timeline keeps of a collective: when it was queued, its size and
  /// bucket, its kind as a string literal.
  struct traced {
    std::int64_t queued_ns; ///< -1: not traced
    std::int64_t bytes;
    int bucket;
    const char* label;
    void record(std::uint64_t seq, std::int64_t start) const {
      if (start < 0) return;
      trace::record(trace::kind::collective, start, trace::now_ns() - start, static_cast<std::int64_t>(seq),
                    bytes, bucket, start - queued_ns, label);
    }
  };
  static const char* trace_label(std::string_view name) {
    for (const char* k : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"})
      if (name == k) return k;
    return "collective";
  }

  trace::session trace_; // first: the trace is written after the worker stopped
  int rank_;
  std::chrono::milliseconds timeout_;
  std::string note_;
  std::atomic<std::uint64_t> seq_{0};
  flight_recorder recorder_; // before queue_: the worker records into it until it stops
  std::unique_ptr<ordered_queue> queue_ = std::make_unique<ordered_queue>();
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_COLLECTIVE_QUEUE_HPP
// ---- end ddp/detail/backend/collective_queue.hpp ----
// ---- begin ddp/detail/gloo/blame.hpp ----
// Whom a failed Gloo collective or connect blames, and with which error: a
// rank the store recorded lost, else a rank that stalled (the desync report),
// else this rank's own failure inside Gloo.
#ifndef DDP_DETAIL_GLOO_BLAME_HPP
#define DDP_DETAIL_GLOO_BLAME_HPP

// ---- begin ddp/detail/fault/desync.hpp ----
// The desync report: after a collective timed out, or a peer closed its
// connections without any rank being recorded lost, each survivor publishes
// how far it got (its flight recorder's progress) to the store and reads the
// others'. A rank that publishes nothing within the window is stopped or hung
// (a dead rank would have been recorded lost): that is the rank to name. When
// every rank reports, the one furthest behind is named.
#ifndef DDP_DETAIL_FAULT_DESYNC_HPP
#define DDP_DETAIL_FAULT_DESYNC_HPP


#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct desync_result {
  int culprit = -1;    ///< the stalled or lagging rank; -1: cannot tell
  std::string verdict; ///< "rank 2 sent no progress report: it is stopped or hung"
  std::string table;   ///< one line per rank: "rank 1: all_reduce #57 (failed)"
};

inline std::string progress_key(int rank) {
  return std::string(store_progress_prefix) + std::to_string(rank);
}

/// `Store` is tcp_store (a template so that this internal header stays below
/// the public API). Survivors reach this at different moments: the ranks next
/// to a stalled one when their wait times out, the others when those close
/// their connections and a 1 s search for a lost rank finds none. So the first
/// window is 3 s (the spread is that 1 s plus scheduling delay); only when two or
/// more ranks are still silent does it wait one more window, to tell a slow
/// survivor from a second stalled rank. Ranks still silent then are marked
/// stalled in the store (store_stalled_prefix); a survivor that came late stops
/// waiting once every rank it has not heard from is so marked, or it would
/// outlast the others by its delay (rank 0 then held the job's last process).
/// Every store call is bounded.
template <class Store>
desync_result exchange_progress(Store& store, int rank, int size, const flight_progress& mine) {
  using namespace std::chrono_literals;
  constexpr auto window = 3000ms;
  constexpr auto slice = 250ms; // how often a late survivor looks for the others' marks
  desync_result out;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    keys.push_back(progress_key(r));
  std::vector<std::optional<flight_progress>> seen(static_cast<std::size_t>(size));
  std::vector<int> silent;
  auto stalled_key = [](int r) { return std::string(store_stalled_prefix) + std::to_string(r); };
  // Reads the reports not seen yet; the ranks still silent go to `silent`.
  auto sweep = [&] {
    silent.clear();
    for (int r = 0; r < size; ++r) {
      auto& s = seen[static_cast<std::size_t>(r)];
      if (!s)
        if (auto v = store.try_get(keys[static_cast<std::size_t>(r)], Store::fault_slack))
          s = flight_progress::decode(*v);
      if (!s) silent.push_back(r);
    }
  };
  // Until every rank reported, the window ends, or another survivor marked each silent one stalled.
  auto await_reports = [&] {
    const auto end = std::chrono::steady_clock::now() + window;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left <= 0ms ||
          store.try_wait(keys, std::min<std::chrono::milliseconds>(left, slice), Store::fault_slack))
        return;
      sweep();
      std::vector<std::string> marks;
      for (int r : silent)
        marks.push_back(stalled_key(r));
      if (marks.empty() || store.try_wait(marks, 0ms, Store::fault_slack)) return;
    }
  };
  try {
    store.set(progress_key(rank), mine.encode(), Store::fault_slack);
    for (int round = 0; round < 2; ++round) {
      await_reports();
      sweep();
      if (silent.size() <= 1) break;
    }
  } catch (const std::exception& e) {
    out.verdict = std::string("no desync report: the store did not answer (") + e.what() + ")";
    return out;
  }
  try { // so that rank 0's store, on teardown, does not linger for a process that never reads
    for (int r : silent)
      store.set(stalled_key(r), "named silent by rank " + std::to_string(rank) + "'s desync report",
                Store::fault_slack);
  } catch (const std::exception&) {} // the report stands without the mark
  for (int r = 0; r < size; ++r) {
    auto& s = seen[static_cast<std::size_t>(r)];
    out.table += "\n  rank " + std::to_string(r) + ": " +
                 (s ? s->describe() : std::string("no report (stopped, hung, or outside ddp)"));
  }
  if (silent.size() == 1) {
    out.culprit = silent.front();
    out.verdict = "rank " + std::to_string(out.culprit) +
                  " sent no progress report: it is stopped or hung (its connections are still open, so it "
                  "did not exit)";
  } else if (silent.empty()) {
    // Everyone is alive: the rank furthest behind skipped or never reached a collective.
    auto lowest = std::min_element(seen.begin(), seen.end(),
                                   [](const auto& a, const auto& b) { return a->seq < b->seq; });
    auto behind =
        std::count_if(seen.begin(), seen.end(), [&](const auto& s) { return s->seq == (*lowest)->seq; });
    if (behind == 1) {
      out.culprit = static_cast<int>(lowest - seen.begin());
      out.verdict = "rank " + std::to_string(out.culprit) + " is behind the others (at " +
                    (*lowest)->describe() + "): it skipped a collective or took another path";
    } else {
      out.verdict = "every rank reported and none is behind: the collectives themselves differ";
    }
  } else {
    std::string list;
    for (int r : silent)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    out.verdict = "ranks " + list + " sent no progress report: they are stopped or hung";
  }
  return out;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FAULT_DESYNC_HPP
// ---- end ddp/detail/fault/desync.hpp ----
// ---- begin ddp/detail/gloo/mesh.hpp ----
// ddp's own full mesh of Gloo TCP pairs, in place of Gloo's
// rendezvous::Context::connectFullMesh (Debian's Gloo, 2022-05), which
//  - stores each rank's N-1 pair addresses under one key and has every rank
//    read every key whole: the store serves ~136·N³ bytes (35 MB at 64 ranks,
//    281 MB at 128, 2.3 GB at 256: bench_gloo_mesh);
//  - first reads, one round trip each, the host name of every lower rank, for
//    a local rank its TCP transport never uses;
//  - connects its pairs in rank order, so a rank that listens for a peer waits
//    until that peer's own loop reaches it;
//  - reports a failed connection without saying to whom, after waiting five
//    times DDP_TIMEOUT for it.
// Here each rank stores one key per peer, "<from>/<to>": the address of its
// pair for that peer, so a rank reads N-1 addresses (~136·N² bytes served in
// all), all of them in one round trip through ddp's store (gloo_batch_store);
// it first dials the peers it connects to (each dial completes against
// a listener that exists since the peer published its address), then waits
// for those that dial it, for DDP_TIMEOUT at most; and a failure names the
// peer and its address. (With file://, Gloo's file store, each rank stores one
// list as Gloo did: see gloo_mesh_keys.)
#ifndef DDP_DETAIL_GLOO_MESH_HPP
#define DDP_DETAIL_GLOO_MESH_HPP

// ---- begin ddp/detail/gloo/batch_store.hpp ----
// A Gloo store that also sets and reads many keys in one round trip. Debian's
// Gloo (2022-05) declares only set, get and wait; later Gloo adds multi_set
// and multi_get behind has_v2_support(), for the same reason: a full mesh
// exchanges a key per pair. ddp's adapter of its tcp_store is one
// (detail/gloo/communicator_impl.hpp); gloo_mesh_context uses it where the store it
// is given is one, and one key at a time where not (Gloo's own stores, in
// tests).
#ifndef DDP_DETAIL_GLOO_BATCH_STORE_HPP
#define DDP_DETAIL_GLOO_BATCH_STORE_HPP


#include <chrono>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_batch_store {
public:
  /// Sets `keys[i]` to `values[i]`, for every i.
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::vector<char>>& values) = 0;
  /// Waits up to `timeout` for every key, then returns their values in order.
  virtual std::vector<std::vector<char>> multi_get(const std::vector<std::string>& keys,
                                                   std::chrono::milliseconds timeout) = 0;

protected:
  gloo_batch_store() = default;
  gloo_batch_store(const gloo_batch_store&) = default;
  gloo_batch_store& operator=(const gloo_batch_store&) = default;
  ~gloo_batch_store() = default; // not deleted through this interface
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_BATCH_STORE_HPP
// ---- end ddp/detail/gloo/batch_store.hpp ----
// ---- begin ddp/detail/gloo/loop_ticker.hpp ----
// Closing a Gloo TCP pair waits for its device's event loop to go round once
// (tcp::Loop::unregisterDescriptor, "to make sure the handler for this fd is
// not called once this function returns"), and the loop goes round when an
// event arrives or when its epoll_wait gives up, after 10 ms. Pairs close one
// after another, in a context's teardown and when Gloo fails a whole context
// (a wait that timed out: process_group::abort uses that), so a rank paid up
// to 10 ms per peer, which adds up in a large group's teardown
// (docs/performance.md, Rendezvous and the Gloo mesh).
//
// A gloo_loop_ticker registers an eventfd with the device's loop. While a
// gloo_loop_ticker::burst lives, a thread writes that eventfd every 50 µs, so
// the loop goes round at least that often and each close waits microseconds.
// Outside bursts the eventfd is quiet and costs the loop nothing. Stopping the
// loop itself, when its device goes, waits for a tick too: the ticker, holding
// the device last, lets it go during a burst.
//
// Being ddp's foothold on the loop's thread, the ticker also moves that thread
// to SCHED_BATCH, once, from its first event (docs/design-notes.md,
// "Note [Gloo's loop thread]"): a batch thread's wakeups do not preempt the
// running thread. The loop spins while a thread posting a send or receive
// holds the pair's lock, and a loop thread woken by that very post's loopback
// write preempted the poster inside its write: both then waited for the next
// scheduler tick (4 ms) instead of microseconds. Only where every peer is on
// this node by default: the stall is loopback's, and across nodes a batch loop
// would wait for a tick wherever every core computes.
#ifndef DDP_DETAIL_GLOO_LOOP_TICKER_HPP
#define DDP_DETAIL_GLOO_LOOP_TICKER_HPP


#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Whether a mesh's loop thread should run SCHED_BATCH: DDP_GLOO_LOOP_BATCH=0
/// or 1 decides; unset, only when the mesh's ranks share one node (`nnodes`).
inline bool gloo_loop_batch_wanted(int nnodes) {
  if (auto v = getenv_str("DDP_GLOO_LOOP_BATCH"); v && !v->empty()) return *v != "0";
  return nnodes == 1;
}

class gloo_loop_ticker final : ::gloo::transport::tcp::Handler {
public:
  /// How often a burst wakes the loop: a close then waits about this long
  /// instead of up to 10 ms (see the top of this file).
  static constexpr std::chrono::microseconds burst_period{50};

  /// Registers with `device`'s event loop; a device of another transport
  /// than TCP gets a ticker that does nothing. `batch_loop`: move the loop's
  /// thread to SCHED_BATCH (see the top of this file).
  explicit gloo_loop_ticker(const std::shared_ptr<::gloo::transport::Device>& device, bool batch_loop)
      : device_(std::dynamic_pointer_cast<::gloo::transport::tcp::Device>(device)), to_batch_(batch_loop) {
    if (!device_) return;
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0)
      throw std::runtime_error(std::string("cannot create an eventfd for Gloo's event loop: ") +
                               std::strerror(errno));
    try {
      std::lock_guard lock(mu_); // the loop's thread, started before fd_ was set, reads it under mu_
      device_->registerDescriptor(fd_, EPOLLIN, this);
    } catch (...) {
      ::close(fd_);
      throw;
    }
    if (batch_loop) {
      const std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one); // the first event sets the policy
    }
  }

  gloo_loop_ticker(const gloo_loop_ticker&) = delete;
  gloo_loop_ticker& operator=(const gloo_loop_ticker&) = delete;

  /// Where the ticker holds the device's last reference (a mesh context
  /// gives up its own first), the device goes with it, and so does its loop:
  /// tcp::Loop's destructor waits for the loop's thread to see it is done,
  /// after its next tick, which the burst brings at once; the eventfd leaves
  /// with the loop's epoll. Otherwise the eventfd is unregistered, which
  /// waits one plain tick: nothing wakes the loop for a descriptor it no
  /// longer watches. (Only a reference this ticker holds can become the
  /// last: another holder letting go meanwhile makes the unregistering
  /// needless, not wrong.)
  ~gloo_loop_ticker() {
    if (fd_ < 0) return;
    if (device_.use_count() > 1) {
      try {
        device_->unregisterDescriptor(fd_, this);
      } catch (const std::exception&) {} // epoll_ctl failed: the fd is closed below all the same
      device_.reset();
    } else {
      burst quick(*this);
      device_.reset();
    }
    {
      std::lock_guard lock(mu_); // after the loop's last call, which took mu_ (TSan sees the order)
      closed_ = true;
    }
    ::close(fd_);
  }

  /// While it lives, the loop goes round every burst_period. Bursts serve
  /// teardowns and failures, so one that cannot start its thread does
  /// nothing: closing is then as slow as Gloo's, not an error.
  class burst {
  public:
    explicit burst(gloo_loop_ticker& t) noexcept {
      const int fd = t.fd_;
      if (fd < 0) return;
      try {
        pump_ = std::thread([this, fd] {
          std::unique_lock lock(mu_);
          do {
            const std::uint64_t one = 1;
            [[maybe_unused]] auto n = ::write(fd, &one, sizeof one); // EAGAIN: one is pending already
          } while (!stop_cv_.wait_for(lock, burst_period, [this] { return stop_; }));
        });
      } catch (...) {} // no thread (std::system_error, std::bad_alloc): no burst
    }
    burst(const burst&) = delete;
    burst& operator=(const burst&) = delete;
    ~burst() {
      if (!pump_.joinable()) return;
      {
        std::lock_guard lock(mu_);
        stop_ = true;
      }
      stop_cv_.notify_one();
      pump_.join();
    }

  private:
    std::mutex mu_;
    std::condition_variable stop_cv_;
    bool stop_ = false;
    std::thread pump_; // last: started once the members it uses exist
  };

private:
  void handleEvents(int /*events*/) override { // on the loop's thread
    std::lock_guard lock(mu_);
    if (closed_) return;
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(fd_, &count, sizeof count); // empties it: the loop sleeps again
    if (to_batch_) {
      to_batch_ = false;
      // From the default policy only: a process run under a real-time policy
      // keeps it. Lowering needs no privilege; where it fails all the same (a
      // seccomp filter), the loop keeps Gloo's default: slower, not wrong.
      int policy = SCHED_OTHER;
      sched_param param{};
      if (::pthread_getschedparam(::pthread_self(), &policy, &param) == 0 && policy == SCHED_OTHER) {
        const sched_param normal{0};
        [[maybe_unused]] int rc = ::pthread_setschedparam(::pthread_self(), SCHED_BATCH, &normal);
      }
    }
  }

  std::shared_ptr<::gloo::transport::tcp::Device> device_;
  std::mutex mu_; ///< orders the loop's reads of fd_ after its setting, and before its closing
  int fd_ = -1;
  bool closed_ = false;
  bool to_batch_; ///< the loop's thread is still to move to SCHED_BATCH (under mu_ once registered)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_LOOP_TICKER_HPP
// ---- end ddp/detail/gloo/loop_ticker.hpp ----

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/address.h>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The store key under which rank `from` publishes its pair's address for `to`.
inline std::string gloo_mesh_key(int from, int to) { return std::to_string(from) + "/" + std::to_string(to); }

/// The IP part of a socket address: its family, address bytes and port (in
/// network byte order); an empty address for other families.
struct ip_parts {
  int family = AF_UNSPEC;
  const void* address = nullptr;
  std::size_t address_bytes = 0;
  in_port_t port = 0;
};

inline ip_parts ip_parts_of(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    return {AF_INET, &a.sin_addr, sizeof a.sin_addr, a.sin_port};
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    return {AF_INET6, &a.sin6_addr, sizeof a.sin6_addr, a.sin6_port};
  }
  return {};
}

/// Whether Gloo's TCP pair at `self` dials `peer` (rather than listening for
/// it): Gloo's own rule (tcp::Pair::connect), the larger address dials. Only
/// the order of the connect calls depends on it, never their outcome.
inline bool gloo_pair_dials(const std::vector<char>& self, const std::vector<char>& peer) {
  const ::gloo::transport::tcp::Address self_at(self), peer_at(peer);
  const ip_parts a = ip_parts_of(self_at.getSockaddr()), b = ip_parts_of(peer_at.getSockaddr());
  if (a.family != b.family || a.family == AF_UNSPEC) return false;
  int cmp = std::memcmp(a.address, b.address, a.address_bytes);
  if (cmp == 0) cmp = static_cast<int>(a.port) - static_cast<int>(b.port); // as Gloo: network byte order
  return cmp > 0;
}

/// "[address]:port" of a Gloo TCP address. Gloo's own Address::str() prints
/// the port in network byte order (40000 as 16540).
inline std::string gloo_address_text(const std::vector<char>& bytes) {
  const ::gloo::transport::tcp::Address at(bytes);
  const ip_parts ip = ip_parts_of(at.getSockaddr());
  char host[INET6_ADDRSTRLEN] = "?";
  if (ip.family != AF_UNSPEC) ::inet_ntop(ip.family, ip.address, host, sizeof host);
  // Appended, not "[" + std::string(host): g++ 12 at -O3 reports a false -Wrestrict inside that
  // operator+ (GCC bug 105329).
  std::string text = "[";
  text += host;
  text += "]:";
  text += std::to_string(ntohs(ip.port));
  return text;
}

/// Where the mesh's addresses go in the store. A key per pair suits ddp's
/// TCP store (a rank waits on all of its keys in one round trip and reads
/// N-1 addresses); Gloo's file store (file://) polls each key of a wait as a
/// file every 10 ms and keeps every key as a file, so there each rank stores
/// one list (N files, not N(N-1)) and waits for one peer's at a time.
enum class gloo_mesh_keys { per_pair, per_rank };

/// A wait for a peer's connection that ran its whole timeout: that peer (or
/// the network to it) is to blame, not this rank (process_group then reports
/// nothing in this rank's name).
class gloo_mesh_timeout : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A Gloo context whose pairs ddp connects (see the top of this file). Gloo's
/// algorithms and ddp's own use it like any gloo::Context.
class gloo_mesh_context final : public ::gloo::Context {
public:
  gloo_mesh_context(int this_rank, int ranks, std::chrono::milliseconds timeout)
      : ::gloo::Context(this_rank, ranks) {
    setTimeout(timeout);
  }

  gloo_mesh_context(const gloo_mesh_context&) = delete;
  gloo_mesh_context& operator=(const gloo_mesh_context&) = delete;

  /// Set before connect(): move the device's loop thread to SCHED_BATCH
  /// (gloo_loop_batch_wanted, detail/gloo/loop_ticker.hpp).
  bool batch_loop = false;

  /// Closes the pairs while the loop ticks fast (detail/gloo/loop_ticker.hpp), before
  /// Gloo's Context would close them one 10 ms tick at a time, then lets the
  /// ticker stop the device's loop (another tick). Where a Gloo buffer still
  /// holds the pairs' context, they are left to Gloo, to close when it goes.
  ~gloo_mesh_context() override {
    if (!ticker_) return; // never connected: nothing here is ddp's
    if (transportContext_ && transportContext_.use_count() == 1) close_pairs(*transportContext_);
    transportContext_.reset();
    device_.reset();
    ticker_.reset(); // holds the device last, unless another holder still does
  }

  /// Connects a pair to every other rank through `store` (keys relative to
  /// it). Throws std::runtime_error naming the peer whose connection failed;
  /// a store that times out throws what it throws (ddp::error for ddp's).
  /// A wait for a connection that ran its whole timeout throws
  /// gloo_mesh_timeout. A context that failed keeps its pairs until it goes
  /// (ddp::gloo first looks for a lost peer, for up to a second): a peer
  /// dialing this rank meanwhile still connects, rather than finding its dial
  /// refused and looking like the rank that failed.
  ///
  /// `interrupt` (may be null) brings the news of a rank lost meanwhile
  /// (detail/fault/connect_interrupt.hpp). Then a wait for the lost rank's dial ends (the
  /// listener here closes: see on_news), and the connections with the living
  /// peers go on forming; once they have (or when none has formed for
  /// `living_peers_grace`, a peer being stuck or failed too: then every pair
  /// fails), this throws, naming the lost rank and why it stopped (and this
  /// rank's own failure since, if any). Failing every pair at
  /// the news instead (Gloo's own failure path) closed listeners that living
  /// peers were dialing; a connection the kernel had queued there was reset,
  /// and a peer's Gloo loop that met the reset between two system calls of
  /// its connect threw on its own thread, which ended that process (3 runs in
  /// 25 of a test interrupting every rank 50 times, beside a CPU hog).
  /// `peer_step`: this mesh's rank r is the store's (global) rank r ×
  /// peer_step, so that the news names it (the nodes' leaders' mesh:
  /// LOCAL_WORLD_SIZE).
  void connect(::gloo::rendezvous::Store& store, const std::shared_ptr<::gloo::transport::Device>& device,
               gloo_mesh_keys keys = gloo_mesh_keys::per_pair, connect_interrupt* interrupt = nullptr,
               int peer_step = 1) {
    ticker_ = std::make_unique<gloo_loop_ticker>(device, batch_loop);
    device_ = device;
    transportContext_ = device->createContext(rank, size);
    connect_pairs(store, *transportContext_, keys, interrupt, std::max(1, peer_step));
  }

  /// Once a lost rank is reported during the connect, how long this rank's
  /// waits may go without one of them ending before they all fail: the
  /// living peers need only their own remaining connects then, each a
  /// handshake with a listener that exists, so they keep connections forming;
  /// a peer whose connection does not form is stuck or failed too. A grace
  /// from the news on, however many connects were left, fails living ranks of
  /// a large job on a loaded host
  /// (docs/design-notes.md, "Note [connect grace]").
  static constexpr std::chrono::milliseconds living_peers_grace{2000};

  /// How long a connect that failed waits for news before it counts as this
  /// rank's own failure: the news reaches every rank from one store answer,
  /// but a peer that heard it first may have connected and left already.
  static constexpr std::chrono::milliseconds news_look{250};

  /// Fails every connection of the context at once, from any thread, while a
  /// collective may be running on it (see fail_pairs).
  void fail_connections() noexcept {
    if (transportContext_) fail_pairs(*transportContext_);
  }

private:
  using addresses = std::vector<std::vector<char>>; ///< by peer rank; this rank's empty

  /// What the connect and its stop (on the thread bringing the news) share.
  struct connect_progress {
    std::mutex mu;
    std::condition_variable leaving_cv;
    int listening_for = -1; ///< the peer whose dial this rank's connect waits for now
    std::optional<connect_interrupt::news> news;
    int lost = -1; ///< the lost rank's rank in this mesh, if it is one of its peers
    std::chrono::steady_clock::time_point last_formed; ///< after the news: when a wait last ended
    std::string also_failed;                           ///< the first failure of a connect after the news
    bool exchanging = true;  ///< the addresses are on their way: the grace waits for them
    bool failed_all = false; ///< the grace ran out: every pair failed
    bool leaving = false;    ///< connect_pairs is returning: the stop does nothing more
    std::thread grace;       ///< after the news: fails the waits left once none ended for the grace
  };

  void connect_pairs(::gloo::rendezvous::Store& store, ::gloo::transport::Context& pairs, gloo_mesh_keys keys,
                     connect_interrupt* interrupt, int peer_step) {
    // Gloo waits five times a pair's timeout for its connection (tcp::Pair::
    // waitUntil, "a longer timeout when waiting for initial connect"): seen as
    // 30 s at DDP_TIMEOUT=6s for a rank whose peer never dialed. Pairs get a
    // fifth, so the wait is the timeout. Once connected, a pair's own timeout
    // serves only Gloo's sync mode, which ddp does not use; the context's,
    // restored below, is the default of the unbound buffers' waits.
    pairs.setTimeout(std::max(std::chrono::milliseconds(1), getTimeout() / 5));
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) pairs.createPair(peer);
    pairs.setTimeout(getTimeout());
    // This rank's pair addresses, read before they are published: once a peer
    // dials one, Gloo's loop rewrites it (to the connection's own address).
    addresses mine(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) mine[static_cast<std::size_t>(peer)] = pairs.getPair(peer)->address().bytes();
    connect_progress progress;
    // From here the pairs stay where they are, so another thread may close them.
    std::optional<connect_interrupt::registration> stop;
    if (interrupt)
      stop.emplace(*interrupt,
                   [&](const connect_interrupt::news& n) { on_news(pairs, progress, n, peer_step); });
    struct leave_on_return { // destroyed before `stop`: a stop running now returns, none starts a grace
      connect_progress& p;
      ~leave_on_return() {
        std::thread grace;
        {
          std::lock_guard lock(p.mu);
          p.leaving = true;
          grace = std::move(p.grace);
        }
        p.leaving_cv.notify_all();
        if (grace.joinable()) grace.join();
      }
    } leave{progress};
    auto address =
        keys == gloo_mesh_keys::per_pair ? exchange_per_pair(store, mine) : exchange_per_rank(store, mine);
    auto dials = [&](int peer) {
      return gloo_pair_dials(mine[static_cast<std::size_t>(peer)], address[static_cast<std::size_t>(peer)]);
    };
    auto failed = [&](int peer, const std::string& what) {
      return std::string(dials(peer) ? "connecting to" : "waiting for a connection from") + " rank " +
             std::to_string(peer) + " (its pair at " +
             gloo_address_text(address[static_cast<std::size_t>(peer)]) + ", this rank's at " +
             gloo_address_text(mine[static_cast<std::size_t>(peer)]) + "): " + what;
    };
    // The error once the news came: the lost rank's pair (this rank's own
    // failure after the news, if any, goes with it).
    auto stopped = [&](const std::string& what) {
      auto text = what;
      if (!progress.also_failed.empty()) text += "; before it stopped: " + progress.also_failed;
      return std::runtime_error(text);
    };
    {
      std::lock_guard lock(progress.mu);
      progress.exchanging = false;
      progress.last_formed = std::chrono::steady_clock::now(); // the exchange counts as progress
    }
    // Dial first, then listen: no rank waits on another's progress through its loop.
    for (bool dialing : {true, false})
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank || dials(peer) != dialing) continue;
        {
          std::lock_guard lock(progress.mu);
          if (peer == progress.lost) continue; // lost already: nothing to wait for
          progress.listening_for = dialing ? -1 : peer;
        }
        const auto started = std::chrono::steady_clock::now();
        std::string gloo_said;
        try {
          // Returns at once for a listening pair closed by on_news; throws
          // at once for a failed one.
          pairs.getPair(peer)->connect(address[static_cast<std::size_t>(peer)]);
        } catch (const std::exception& e) { gloo_said = e.what(); }
        std::unique_lock lock(progress.mu);
        progress.listening_for = -1;
        progress.last_formed = std::chrono::steady_clock::now();
        if (gloo_said.empty()) continue;
        if (!progress.news && interrupt) {
          // A living peer that heard the news first, connected and left closes
          // its connection: the news is near (the same store's answer, to
          // every rank), and with it this is no failure of this rank's own.
          lock.unlock();
          interrupt->wait_for_news(news_look);
          lock.lock();
        }
        if (progress.failed_all)
          throw stopped(failed(peer, "stopped: " + progress.news->why + ", and no connection formed in the " +
                                         std::to_string(grace().count()) + " ms after"));
        if (progress.news) {
          // The waits for the other peers go on, so that a living peer still
          // dialing this rank does not find its listener closed (see connect).
          if (peer != progress.lost && progress.also_failed.empty())
            progress.also_failed = failed(peer, gloo_said);
          continue;
        }
        // Gloo's "Connect timeout" (an IoException like any other) after the whole wait.
        if (std::chrono::steady_clock::now() - started >= getTimeout() * 9 / 10)
          throw gloo_mesh_timeout(failed(peer, gloo_said));
        throw std::runtime_error(failed(peer, gloo_said));
      }
    std::lock_guard lock(progress.mu);
    if (!progress.news) return;
    if (progress.lost >= 0) throw stopped(failed(progress.lost, "stopped: " + progress.news->why));
    throw stopped("stopped: " + progress.news->why); // a rank outside this mesh
  }

  std::chrono::milliseconds grace() const { return std::min(living_peers_grace, getTimeout()); }

  /// The stop: ends a wait for the lost rank's dial by closing this rank's
  /// listener for it (Pair::close), which could reset only a connection from
  /// the lost rank (one it dialed before it failed; or, were it alive but
  /// reported lost, as a rank 0 that stopped answering, one it dials now); the
  /// connect loop skips the lost rank's pair if it has not reached it. A dial
  /// to the lost rank ends by itself (connected to a listener the failed rank
  /// keeps, or refused once it is gone) or with the grace: closing it with
  /// Gloo's reset reached the lost rank's Gloo while it accepted, between two
  /// system calls, which ended that process
  /// (docs/design-notes.md, "Note [failing Gloo pairs]"). Then starts
  /// the grace for the rest (news naming no rank of this mesh only that).
  void on_news(::gloo::transport::Context& pairs, connect_progress& progress,
               const connect_interrupt::news& n, int peer_step) noexcept {
    std::lock_guard lock(progress.mu);
    if (progress.leaving || progress.news) return;
    progress.news = n;
    progress.last_formed = std::chrono::steady_clock::now();
    if (n.lost_rank >= 0 && n.lost_rank % peer_step == 0) {
      const int lost = n.lost_rank / peer_step;
      if (lost != rank && lost < size) {
        progress.lost = lost;
        if (progress.listening_for == lost) {
          gloo_loop_ticker::burst quick(*ticker_); // closing waits for the loop to go round
          try {
            pairs.getPair(lost)->close();
          } catch (const std::exception&) {}
        }
      }
    }
    try {
      progress.grace = std::thread([this, &pairs, &progress] {
        std::unique_lock wait(progress.mu);
        for (;;) { // the store's own timeout bounds the exchange
          const auto now = std::chrono::steady_clock::now();
          const auto until = (progress.exchanging ? now : progress.last_formed) + grace();
          if (progress.leaving_cv.wait_until(wait, until, [&] { return progress.leaving; })) return;
          if (!progress.exchanging && progress.last_formed + grace() <= std::chrono::steady_clock::now())
            break;
        }
        progress.failed_all = true;
        fail_pairs(pairs);
      });
    } catch (const std::system_error&) { // no thread: no grace
      progress.failed_all = true;
      fail_pairs(pairs);
    }
  }

  /// Fails every pair of `pairs` at once, from any thread: Gloo does this
  /// itself when a wait on one of its buffers times out (it sets an error on
  /// every pair, failing every send and receive still queued there and a
  /// wait for a connection, waking their waiters, and closes the sockets
  /// without SO_LINGER), so a wait of 1 ms on a buffer nothing is sent to
  /// does it, through Gloo's public API (Debian's Gloo lacks headers to reach
  /// a TCP pair's own failure). Closing alone (Pair::close) is no substitute:
  /// it wakes no collective (the running one, and the teardown behind it,
  /// then waited out the whole timeout), and its reset (SO_LINGER 0) reached
  /// peers' Gloo loops while they accepted those connections, whose
  /// getpeername then failed: an exception on Gloo's loop thread, which ends
  /// that process. A listener closed here still resets a connection the kernel
  /// queued but Gloo had not accepted; the peer's Gloo sees that in its
  /// connect (SO_ERROR) but for a window of two system calls, the same window
  /// any process exiting during Gloo's connect opens (docs/design-notes.md,
  /// "Note [failing Gloo pairs]").
  /// Gloo fails the pairs one after another, each waiting for its loop, so
  /// the loop ticks fast meanwhile.
  void fail_pairs(::gloo::transport::Context& pairs) noexcept {
    gloo_loop_ticker::burst quick(*ticker_);
    char nothing = 0;
    try {
      auto probe = pairs.createUnboundBuffer(&nothing, 1);
      probe->waitRecv(nullptr, std::chrono::milliseconds(1));
    } catch (const std::exception&) {} // the timeout it is for
  }

  /// Closes every pair of `pairs` while the loop ticks fast.
  void close_pairs(::gloo::transport::Context& pairs) noexcept {
    gloo_loop_ticker::burst quick(*ticker_);
    for (int peer = 0; peer < size; ++peer)
      pairs.getPair(peer).reset(); // this rank's own is empty already
  }

  /// Publishes `mine` (this rank's pair addresses, by peer) and returns the
  /// peers' for this rank. Through a gloo_batch_store (ddp's own store) that
  /// is three round trips (set all, wait for all, get all); through another
  /// Gloo store, 2(N-1) + 1.
  addresses exchange_per_pair(::gloo::rendezvous::Store& store, const addresses& mine) const {
    std::vector<std::string> my_keys, their_keys;
    std::vector<std::vector<char>> my_addresses;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      my_keys.push_back(gloo_mesh_key(rank, peer));
      my_addresses.push_back(mine[static_cast<std::size_t>(peer)]);
      their_keys.push_back(gloo_mesh_key(peer, rank));
    }
    std::vector<std::vector<char>> theirs;
    if (auto* batches = dynamic_cast<gloo_batch_store*>(&store)) {
      batches->multi_set(my_keys, my_addresses);
      theirs = batches->multi_get(their_keys, getTimeout());
    } else {
      for (std::size_t i = 0; i < my_keys.size(); ++i)
        store.set(my_keys[i], my_addresses[i]);
      store.wait(their_keys, getTimeout()); // one round trip for all of them
      for (auto& key : their_keys)
        theirs.push_back(store.get(key));
    }
    addresses at(static_cast<std::size_t>(size));
    for (int peer = 0, i = 0; peer < size; ++peer)
      if (peer != rank) at[static_cast<std::size_t>(peer)] = std::move(theirs[static_cast<std::size_t>(i++)]);
    return at;
  }

  addresses exchange_per_rank(::gloo::rendezvous::Store& store, const addresses& mine) const {
    std::vector<char> list_of_mine;
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) {
        const auto& a = mine[static_cast<std::size_t>(peer)];
        list_of_mine.insert(list_of_mine.end(), a.begin(), a.end());
      }
    store.set(std::to_string(rank), list_of_mine);
    addresses at(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      store.wait({std::to_string(peer)}, getTimeout());
      auto list = store.get(std::to_string(peer));
      const std::size_t entry = list.size() / static_cast<std::size_t>(size - 1);
      if (entry == 0 || entry * static_cast<std::size_t>(size - 1) != list.size())
        throw std::runtime_error("rank " + std::to_string(peer) + "'s list of pair addresses has " +
                                 std::to_string(list.size()) + " bytes, not one entry per peer");
      const std::size_t slot =
          static_cast<std::size_t>(rank < peer ? rank : rank - 1); // peers skip themselves
      at[static_cast<std::size_t>(peer)].assign(list.begin() + static_cast<std::ptrdiff_t>(slot * entry),
                                                list.begin() +
                                                    static_cast<std::ptrdiff_t>((slot + 1) * entry));
    }
    return at;
  }

  std::unique_ptr<gloo_loop_ticker> ticker_; ///< outlives the pairs: the destructor closes them first
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_MESH_HPP
// ---- end ddp/detail/gloo/mesh.hpp ----

#include <gloo/common/error.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_blame {
public:
  gloo_blame(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<tcp_store> store,
             collective_queue& queue)
      : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)), queue_(queue) {}

  /// Turns a collective's failure into the group's error; every path closes
  /// the connections first (`close_all(with_segment)`), so peers blocked on
  /// this rank fail now too. `reported()`: the peer failure the store
  /// reported to fail_for_peer, if that was the group's error.
  template <class CloseAll, class Reported>
  [[noreturn]] void collective(const std::string& what, std::exception_ptr failure, CloseAll&& close_all,
                               Reported&& reported) {
    // abort_for_failure or fail_for_peer interrupted this collective: their
    // reason is the error, not the closed connections they caused (nor a
    // search for whom to blame).
    if (auto why = queue_.poisoned()) {
      auto lost = reported();
      close_all(!lost); // a peer's failure: aborting the segment would name this rank
      if (lost)
        throw error(
            lost->silent ? error_kind::timeout : error_kind::peer_lost,
            what + " failed: " + lost_news(*lost) +
                " (this rank heard it from the rendezvous store while it waited, and closed its connections)",
            lost->rank);
      std::rethrow_exception(why);
    }
    try {
      std::rethrow_exception(failure);
    } catch (const ::gloo::IoException& e) {
      close_all(true);
      io(what, e.what());
    } catch (const ::gloo::EnforceNotMet& e) {
      close_all(true);
      throw error(error_kind::backend, what + " failed inside Gloo: " + e.what(), rank_);
    } catch (const ddp::error&) {
      close_all(true);
      throw;
    } catch (const std::exception& e) {
      close_all(true);
      throw error(error_kind::backend, what + " failed: " + e.what(), rank_);
    }
  }

  /// A collective failed on the wire, after the connections closed. Whom to
  /// blame: first a rank the store
  /// recorded lost (it dropped, or announced its own failure); else, since
  /// nobody died, a rank that stalled: the desync report finds the rank that
  /// cannot say how far it got. The report is printed, and kept in the flight
  /// recorder's JSON (DDP_FLIGHT_RECORDER).
  [[noreturn]] void io(const std::string& what, const std::string& gloo_text) {
    const bool timed_out = gloo_text.find("imed out") != std::string::npos;
    if (auto lost = find_lost_rank(timed_out)) {
      queue_.recorder().note("rank " + std::to_string(lost.rank) + " " + lost.reason);
      throw error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                  what + " failed: rank " + std::to_string(lost.rank) + " " + lost.reason +
                      ". Gloo: " + gloo_text,
                  lost.rank);
    }
    desync_result d;
    if (store_) {
      d = exchange_progress(*store_, rank_, size_, queue_.recorder().progress());
      log_line("rank " + std::to_string(rank_), "desync report: " + d.verdict + d.table);
      queue_.recorder().note(d.verdict + d.table);
    }
    std::string blame = d.verdict.empty() ? std::string() : " " + d.verdict + ".";
    if (timed_out)
      throw error(error_kind::timeout,
                  what + " timed out after " + std::to_string(timeout_.count()) + " ms waiting for a peer." +
                      blame +
                      " (A rank stalled, is far behind, or skipped this collective; raise DDP_TIMEOUT if "
                      "that is expected.) Gloo: " +
                      gloo_text,
                  d.culprit);
    throw error(error_kind::peer_lost,
                what + " failed: a peer closed its connection (it failed or timed out)." + blame +
                    " Gloo: " + gloo_text,
                d.culprit);
  }

  /// A mesh that did not form. A peer that died meanwhile refused or dropped
  /// a connection, or the connect stopped for it (detail/fault/connect_interrupt.hpp):
  /// named when the store saw it go.
  /// Otherwise a wait for a peer's connection that ran its whole timeout
  /// (gloo_mesh_timeout) is a timeout: that peer is to blame, and
  /// process_group does not report it as this rank's failure. `note` goes
  /// before Gloo's text.
  [[noreturn]] void mesh(const std::string& what, const std::string& note, const std::exception& gloo) {
    const std::string gloo_said = note + gloo.what();
    if (auto lost = find_lost_rank(false))
      throw error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                  what + ": rank " + std::to_string(lost.rank) + " " + lost.reason + ". Gloo: " + gloo_said,
                  lost.rank);
    const bool timed_out = dynamic_cast<const gloo_mesh_timeout*>(&gloo) != nullptr;
    throw error(timed_out ? error_kind::timeout : error_kind::backend, what + ": " + gloo_said, rank_);
  }

private:
  /// Asks the store which rank dropped without a goodbye or announced its own
  /// failure. After a closed connection the store notices a crash at about the
  /// moment we do, so it gets a second to record it; after a timeout whoever
  /// died did so long ago, so a look suffices.
  lost_rank find_lost_rank(bool timed_out) {
    if (!store_) return {};
    return store_->wait_for_lost_rank(std::chrono::milliseconds(timed_out ? 0 : 1000));
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  collective_queue& queue_; ///< the group's: whether it is poisoned, and its flight recorder
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_BLAME_HPP
// ---- end ddp/detail/gloo/blame.hpp ----
// ---- begin ddp/detail/gloo/collectives.hpp ----
// How each collective of the Gloo communicator runs over the group's mesh:
// the header round first (small tensors ride with it, and ranks that disagree
// fail with mismatch), then ddp's ring, chain or block exchange for larger ones.
#ifndef DDP_DETAIL_GLOO_COLLECTIVES_HPP
#define DDP_DETAIL_GLOO_COLLECTIVES_HPP

// ---- begin ddp/detail/gloo/chain.hpp ----
// A pipelined chain broadcast over Gloo's transport, on buffers ddp owns (so
// that another thread can end its waits: detail/gloo/waits.hpp). The ranks form a
// chain from the root in rank order (root, root+1, ..., wrapping around); the
// data goes down it in pieces, and a rank passes each piece on as soon as it
// has it. Every rank receives the data once and sends it at most once, so a
// broadcast costs about one transfer of the data plus (W-2) pieces, whatever
// the world size, where a tree costs log2(W) transfers (piece_for keeps the
// pieces small enough for a long chain).
// Every receive is posted at the start, straight into the caller's memory:
// nothing is copied, and no rank waits for room.
#ifndef DDP_DETAIL_GLOO_CHAIN_HPP
#define DDP_DETAIL_GLOO_CHAIN_HPP

// ---- begin ddp/detail/gloo/deadline.hpp ----
// One deadline for a whole Gloo collective that is made of many transport
// waits. Gloo's waitRecv/waitSend take a relative timeout each; passing the
// group's full timeout to every one of them would let a collective of N
// steps wait N times as long as the user asked for. The header round
// (detail/gloo/header.hpp) and the fragment ring (detail/gloo/ring.hpp) both count down
// from one absolute time point instead.
#ifndef DDP_DETAIL_GLOO_DEADLINE_HPP
#define DDP_DETAIL_GLOO_DEADLINE_HPP


#include <gloo/common/error.h>

#include <algorithm>
#include <chrono>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_deadline {
public:
  gloo_deadline() = default;
  explicit gloo_deadline(std::chrono::milliseconds timeout)
      : at_(std::chrono::steady_clock::now() + timeout) {}

  /// What is left, for the next transport wait. Never below 1 ms: a deadline
  /// that has passed still gets one short wait (data that already arrived is
  /// taken), and Gloo reads -1 ms as "use the context's timeout" (kUnsetTimeout).
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

  /// Turns a transport wait that returned false (timed out) into the
  /// IoException the rest of the backend already handles for Gloo's own
  /// collectives, so every timeout takes the same lost-rank path.
  static void check(bool ok, const char* what) {
    if (!ok) throw ::gloo::IoException(std::string("Timed out waiting for a ") + what);
  }

private:
  std::chrono::steady_clock::time_point at_{};
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_DEADLINE_HPP
// ---- end ddp/detail/gloo/deadline.hpp ----
// ---- begin ddp/detail/gloo/slots.hpp ----
// The slot prefixes of ddp's own collectives over Gloo's transport, in one
// place so that none collides with another's or with Gloo's (its own
// collectives use 0x01..0x08). A slot is a prefix and the collective's tag.
#ifndef DDP_DETAIL_GLOO_SLOTS_HPP
#define DDP_DETAIL_GLOO_SLOTS_HPP


#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint8_t ring_slot_prefix = 0x40;   ///< fragment_ring (detail/gloo/ring.hpp)
inline constexpr std::uint8_t header_slot_prefix = 0x41; ///< header_round (detail/gloo/header.hpp)
inline constexpr std::uint8_t chain_slot_prefix = 0x42;  ///< chain_broadcast (detail/gloo/chain.hpp)
inline constexpr std::uint8_t block_exchange_slot_prefix =
    0x43; ///< exchange_blocks (detail/gloo/exchange.hpp)

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_SLOTS_HPP
// ---- end ddp/detail/gloo/slots.hpp ----
// ---- begin ddp/detail/gloo/waits.hpp ----
// The transport buffers ddp's collectives over Gloo (the header round, the
// fragment ring, the chain broadcast, the block exchange) send from and
// receive into, kept where another thread can
// end their waits: when a group fails from outside (process_group::abort, or
// the store reporting another rank failed), failing every connection is not
// enough. Gloo then fails the operations still queued on a connection, but
// not a send or receive already under way, and closes the socket, so that
// wait runs to its timeout (docs/design-notes.md, "Note [Gloo waits]").
// Ending the waits themselves (UnboundBuffer::abortWaitSend/abortWaitRecv,
// Gloo's public API) makes them return false, which gloo_deadline::check turns
// into a failure.
// This is why ddp runs none of Gloo's own collectives (its ring all-reduce,
// broadcast, all-gather, all-to-all): they keep their buffers to themselves,
// so a wait already under way there ends with its data or at its timeout.
#ifndef DDP_DETAIL_GLOO_WAITS_HPP
#define DDP_DETAIL_GLOO_WAITS_HPP


#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_waits {
public:
  /// Unregisters, then frees, a buffer made by make().
  struct release {
    gloo_waits* owner;
    void operator()(::gloo::transport::UnboundBuffer* b) const noexcept {
      owner->remove(b);
      delete b;
    }
  };
  using buffer = std::unique_ptr<::gloo::transport::UnboundBuffer, release>;

  /// A transport buffer over [data, data + bytes), registered until it is
  /// freed. After interrupt_all(), a new one starts out interrupted.
  buffer make(::gloo::Context& ctx, void* data, std::size_t bytes) {
    buffer b(ctx.createUnboundBuffer(data, bytes).release(), release{this});
    std::lock_guard lock(mu_);
    live_.push_back(b.get());
    if (interrupted_) end_waits(*b);
    return b;
  }

  /// Ends every wait on every registered buffer now (they return false), and
  /// every later one. Call it after the connections failed, so that no
  /// transfer still writes into memory its collective is about to give back.
  void interrupt_all() noexcept {
    std::lock_guard lock(mu_);
    interrupted_ = true;
    for (auto* b : live_)
      end_waits(*b);
  }

private:
  static void end_waits(::gloo::transport::UnboundBuffer& b) noexcept {
    b.abortWaitSend();
    b.abortWaitRecv();
  }

  void remove(::gloo::transport::UnboundBuffer* b) noexcept {
    std::lock_guard lock(mu_);
    live_.erase(std::remove(live_.begin(), live_.end(), b), live_.end());
  }

  std::mutex mu_;
  std::vector<::gloo::transport::UnboundBuffer*> live_;
  bool interrupted_ = false;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_WAITS_HPP
// ---- end ddp/detail/gloo/waits.hpp ----

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

DDP_BEGIN_NAMESPACE
namespace detail {

class chain_broadcast {
public:
  /// The smallest piece worth its own message, when the data is cut finer to
  /// keep a long chain busy (below, per-message costs dominate on TCP).
  static constexpr std::size_t min_piece_bytes = std::size_t{64} << 10;

  /// The piece size: at most `max_piece_bytes`, and small enough that the
  /// chain's fill, (W-2) pieces, stays near one transfer of the data: with P
  /// pieces the broadcast costs (W+P-2)/P transfers of it, so P ~ W pieces
  /// keep it under 2 (a binomial tree: log2 W). Not below min_piece_bytes
  /// (unless max_piece_bytes is: tests cut pieces small). A model: piece sizes
  /// made no difference on the 2-core development machine (docs/performance.md,
  /// Collectives).
  static std::size_t piece_for(std::size_t bytes, int w, std::size_t max_piece_bytes) {
    const std::size_t most = std::max<std::size_t>(max_piece_bytes, 1);
    return std::clamp(bytes / static_cast<std::size_t>(std::max(w, 1)), std::min(min_piece_bytes, most),
                      most);
  }

  /// Copies `bytes` at `data` on rank `root` to `data` on every rank, in
  /// pieces of at most `max_piece_bytes` (piece_for). Throws
  /// gloo::IoException when a wait times out, is interrupted, or its
  /// connection fails.
  static void run(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, void* data,
                  std::size_t bytes, int root, std::uint32_t tag, std::size_t max_piece_bytes,
                  std::chrono::milliseconds timeout) {
    const int w = ctx->size, r = ctx->rank;
    if (w == 1 || bytes == 0) return;
    const gloo_deadline deadline(timeout);
    const auto slot = ::gloo::Slot::build(chain_slot_prefix, tag);
    const std::size_t piece = piece_for(bytes, w, max_piece_bytes);
    const std::size_t pieces = (bytes + piece - 1) / piece;
    auto at = [&](std::size_t k) { return k * piece; };
    auto len = [&](std::size_t k) { return std::min(piece, bytes - at(k)); };
    const int position = (r - root + w) % w; // in the chain
    const int from = (r - 1 + w) % w, to = (r + 1) % w;
    const bool receives = position != 0, sends = position + 1 != w;

    auto buf = waits.make(*ctx, data, bytes);
    if (receives)
      for (std::size_t k = 0; k < pieces; ++k)
        buf->recv(from, slot, at(k), len(k));
    for (std::size_t k = 0; k < pieces; ++k) {
      // Pieces from one peer in one slot arrive in the order they were sent.
      if (receives) gloo_deadline::check(buf->waitRecv(deadline.remaining()), "broadcast receive");
      if (sends) buf->send(to, slot, at(k), len(k));
    }
    if (sends)
      for (std::size_t k = 0; k < pieces; ++k)
        gloo_deadline::check(buf->waitSend(deadline.remaining()), "broadcast send");
  }
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_CHAIN_HPP
// ---- end ddp/detail/gloo/chain.hpp ----
// ---- begin ddp/detail/gloo/exchange.hpp ----
// A direct block exchange over Gloo's transport, on buffers ddp owns (so that
// another thread can end its waits: detail/gloo/waits.hpp): each rank sends a block
// of `bytes` to every peer and receives one from every peer. all_gather sends
// its own block to everyone; reduce_scatter sends each peer the block that
// peer reduces. Every rank sends and receives (W-1) blocks, as in a ring, but
// in one step: no rank waits for another to pass a block on.
#ifndef DDP_DETAIL_GLOO_EXCHANGE_HPP
#define DDP_DETAIL_GLOO_EXCHANGE_HPP


#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

DDP_BEGIN_NAMESPACE
namespace detail {

/// One side of the exchange: W blocks of `block_bytes`, block p at
/// base + p * block_bytes (or, for a send of the same block to everyone, one
/// block at base: `same_block` true).
struct block_layout {
  void* base;
  std::size_t block_bytes;
  bool same_block = false;

  std::size_t offset(int p) const { return same_block ? 0 : static_cast<std::size_t>(p) * block_bytes; }
  std::size_t span(int w) const {
    return same_block ? block_bytes : static_cast<std::size_t>(w) * block_bytes;
  }
};

/// Sends block p of `out` to each peer p and receives peer p's into block p of
/// `in` (this rank's own blocks are left alone). `out` and `in` may overlap
/// (all_gather sends its own block of the very memory it receives into). Throws gloo::IoException when a wait
/// times out, is interrupted, or its connection fails.
inline void exchange_blocks(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, block_layout out,
                            block_layout in, std::uint32_t tag, std::chrono::milliseconds timeout) {
  const int w = ctx->size, r = ctx->rank;
  if (w == 1 || in.block_bytes == 0) return;
  const gloo_deadline deadline(timeout);
  const auto slot = ::gloo::Slot::build(block_exchange_slot_prefix, tag);
  auto recv_buf = waits.make(*ctx, in.base, in.span(w));
  auto send_buf = waits.make(*ctx, out.base, out.span(w));
  for (int p = 0; p < w; ++p)
    if (p != r) recv_buf->recv(p, slot, in.offset(p), in.block_bytes);
  // Peers in turn from this rank's right, so that no rank gets every first send.
  for (int i = 1; i < w; ++i) {
    const int p = (r + i) % w;
    send_buf->send(p, slot, out.offset(p), out.block_bytes);
  }
  for (int i = 1; i < w; ++i)
    gloo_deadline::check(recv_buf->waitRecv(deadline.remaining()), "block receive");
  for (int i = 1; i < w; ++i)
    gloo_deadline::check(send_buf->waitSend(deadline.remaining()), "block send");
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_EXCHANGE_HPP
// ---- end ddp/detail/gloo/exchange.hpp ----
// ---- begin ddp/detail/gloo/header.hpp ----
// Before any data moves, every Gloo collective sends a small fixed-size header
// (kind, dtype, op, root, count, ring piece size) to every peer and receives
// theirs, so ranks that disagree fail with ddp::error(mismatch) naming both
// sides, on every rank, instead of Gloo aborting the process.
//
// Why a header and not just care: Gloo's TCP pair checks that an incoming
// message fits the receive posted for it (GLOO_ENFORCE_LE(op.preamble.length,
// op.nbytes) in tcp::Pair::prepareRead) on its own I/O thread, where the
// throw ends in std::terminate. Header messages cannot trip it: every rank
// posts receives of the same size (header + inline_cap(w)) and sends at most that
// much, whatever its count. After the headers agree, every rank computes the
// same message sizes, so the data steps cannot trip it either.
//
// The exchange is all-to-all, so every rank sees every header and names the
// same disagreement, and no rank closes its connections before its peers have
// its header. Payloads up to inline_cap(w) ride along with the header, so a small
// all_reduce, broadcast, all_gather or reduce_scatter is this one round and
// nothing else.
#ifndef DDP_DETAIL_GLOO_HEADER_HPP
#define DDP_DETAIL_GLOO_HEADER_HPP


#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class collective_kind : std::uint8_t { all_reduce = 1, broadcast, all_gather, reduce_scatter, barrier };

constexpr const char* to_string(collective_kind k) noexcept {
  switch (k) {
  case collective_kind::all_reduce: return "all_reduce";
  case collective_kind::broadcast: return "broadcast";
  case collective_kind::all_gather: return "all_gather";
  case collective_kind::reduce_scatter: return "reduce_scatter";
  case collective_kind::barrier: return "barrier";
  }
  return "unknown collective";
}

/// What a rank is about to do; sent as raw bytes, so fixed-size and padding-free.
struct collective_header {
  static constexpr std::uint32_t expected_magic = 0x48504444; // "DDPH"
  std::uint32_t magic = expected_magic;
  collective_kind kind = collective_kind::barrier;
  std::uint8_t dt = 0;       ///< ddp::dtype
  std::uint8_t reduce = 0;   ///< ddp::op (reductions only)
  std::uint8_t in_place = 0; ///< all_reduce of a shm array (root: its id; shm_shape: the byte offset)
  std::int32_t root = 0;     ///< broadcast's root; an in-place all_reduce's array id
  std::uint32_t tag = 0;     ///< the collective's sequence tag
  std::uint64_t count = 0;   ///< elements (per rank for all_gather/reduce_scatter blocks)
  std::uint64_t piece = 0;   ///< the ring's or chain's largest message: it shapes their messages
  std::uint64_t shm_shape =
      0; ///< shm: the step or half-area bytes (they shape the barriers), or the in-place offset

  bool operator==(const collective_header&) const = default;

  std::string describe() const {
    if (magic != expected_magic) return "something that is not a ddp collective header";
    std::string s = to_string(kind);
    if (kind == collective_kind::barrier) return s;
    s += " of " + std::to_string(count) + " x " + std::string(ddp::to_string(static_cast<dtype>(dt)));
    if (kind == collective_kind::all_reduce || kind == collective_kind::reduce_scatter)
      s += " (op " + std::string(ddp::to_string(static_cast<op>(reduce))) + ")";
    if (kind == collective_kind::broadcast) s += " from root " + std::to_string(root);
    if (kind == collective_kind::all_reduce && in_place)
      s += " in place in ddp::shm_array " + std::to_string(root) + " at byte " + std::to_string(shm_shape) +
           " (every rank must pass the same part of its own shm array)";
    else if (kind == collective_kind::all_reduce && shm_shape)
      s += " (shm step " + std::to_string(shm_shape) + " B)";
    else if ((kind == collective_kind::reduce_scatter || kind == collective_kind::all_gather) && shm_shape)
      s += " (through the node's shared memory)";
    if (piece) s += " (piece " + std::to_string(piece) + " B)";
    return s;
  }

  /// What to add to a mismatch message when the same collective differs only
  /// in how it travels: one rank in the node's shared memory and the other
  /// over TCP, or different ring pieces.
  std::string hint_against(const collective_header& theirs) const {
    const bool same_call = kind == theirs.kind && count == theirs.count && dt == theirs.dt &&
                           reduce == theirs.reduce && root == theirs.root;
    if (!same_call) return "";
    if ((shm_shape == 0) != (theirs.shm_shape == 0) && !in_place && !theirs.in_place)
      return " Some ranks take the node's shared memory and others TCP: call use_shm with the same value on "
             "every rank.";
    if (piece != theirs.piece)
      return " The ranks set different piece sizes: call set_ring_piece_bytes with the same value on every "
             "rank.";
    return "";
  }

  /// The error when rank `peer` runs `theirs` while this rank (`rank`) runs
  /// this collective; `what` names the collective.
  error mismatch(const std::string& what, int rank, int peer, const collective_header& theirs) const {
    return error(
        error_kind::mismatch,
        what + ": ranks called different collectives: this rank (" + std::to_string(rank) + ") called " +
            describe() + ", rank " + std::to_string(peer) + " called " + theirs.describe() +
            ". Every rank must call the same collectives in the same order with the same counts, "
            "dtypes, ops and roots." +
            hint_against(theirs) +
            " This group is unusable now: every later collective throws this error; create a new group.",
        peer);
  }
};
static_assert(sizeof(collective_header) == 40,
              "collective_header is sent as raw bytes: keep it padding-free");

/// One all-to-all round of headers, each followed by an optional payload of at
/// most inline_cap bytes. The buffers are kept across collectives (worker thread only).
class header_round {
public:
  /// The largest payload that travels with the header at world size w: 64 KiB
  /// up to 4 ranks, then less, so that a rank posts at most ~192 KiB of receive
  /// space and sends each peer's share directly only while that is cheaper than
  /// the ring's 2(W-1) steps (never under 4 KiB). Every rank computes the same.
  static constexpr std::size_t inline_cap(int w) {
    const std::size_t peers = w > 1 ? static_cast<std::size_t>(w - 1) : 1;
    // Whole cache lines, so that every payload after a 40-byte header stays
    // 8-byte aligned for the typed reductions (39321 B at 6 ranks was not).
    return std::max(std::size_t{4} << 10, std::min(std::size_t{64} << 10, (std::size_t{192} << 10) / peers)) /
           64 * 64;
  }
  static constexpr std::size_t slot_bytes(int w) { return sizeof(collective_header) + inline_cap(w); }

  /// Sends `mine` to every peer, each followed by payload_for(peer) (a
  /// {pointer, bytes} pair, bytes <= inline_cap(w)), and receives every peer's.
  /// Throws ddp::error(mismatch) if any peer's header differs from `mine`.
  /// `waits` registers the round's buffers, so that another thread can end its waits.
  template <class Payload>
  void run(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, const collective_header& mine,
           Payload&& payload_for, std::chrono::milliseconds timeout, const std::string& what) {
    const int w = ctx->size, r = ctx->rank;
    const auto slot = ::gloo::Slot::build(header_slot_prefix, mine.tag);
    const gloo_deadline deadline(timeout);
    slot_ = slot_bytes(w);
    const std::size_t total = static_cast<std::size_t>(w) * slot_;
    if (recv_.size() < total) recv_.resize(total);
    if (send_.size() < total) send_.resize(total);
    auto in = waits.make(*ctx, recv_.data(), total);
    auto out = waits.make(*ctx, send_.data(), total);
    for (int p = 0; p < w; ++p)
      if (p != r) in->recv(p, slot, at(p), slot_);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      auto [data, bytes] = payload_for(p);
      if (bytes > inline_cap(w))
        throw error(error_kind::backend, what + ": internal error: inline payload over the cap");
      char* dst = send_.data() + at(p);
      std::memcpy(dst, &mine, sizeof mine);
      if (bytes) std::memcpy(dst + sizeof mine, data, bytes);
      out->send(p, slot, at(p), sizeof mine + bytes);
    }
    for (int p = 0; p + 1 < w; ++p)
      gloo_deadline::check(in->waitRecv(deadline.remaining()), "header receive");
    for (int p = 0; p + 1 < w; ++p)
      gloo_deadline::check(out->waitSend(deadline.remaining()), "header send");
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      collective_header theirs;
      std::memcpy(&theirs, recv_.data() + at(p), sizeof theirs);
      if (theirs == mine) continue;
      throw mine.mismatch(what, r, p, theirs);
    }
  }

  /// The payload peer p sent, valid until the next run().
  const char* payload(int p) const { return recv_.data() + at(p) + sizeof(collective_header); }
  /// Room for one payload of this rank's own (e.g. to reduce all ranks' in rank order).
  char* own_slot(int r) { return recv_.data() + at(r) + sizeof(collective_header); }

private:
  std::size_t at(int p) const { return static_cast<std::size_t>(p) * slot_; }
  std::vector<char> recv_, send_;
  std::size_t slot_ = 0; // slot_bytes(w) of the last run
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_HEADER_HPP
// ---- end ddp/detail/gloo/header.hpp ----
// ---- begin ddp/detail/gloo/ring.hpp ----
// A ring all-reduce over Gloo's transport that works on the gradients where
// they are: a bucket is a list of fragments (one per tensor), sent from and
// received into the tensors themselves, so nothing is packed or unpacked, and
// the averaging is fused into the last reduction step instead of a pass of
// its own. Same schedule as Gloo's ring: W-1 reduce-scatter steps, then W-1
// all-gather steps, each chunk cut at tensor boundaries and into pieces of at
// most 1 MiB (the piece size is a parameter, so tests can cross it cheaply).
#ifndef DDP_DETAIL_GLOO_RING_HPP
#define DDP_DETAIL_GLOO_RING_HPP


#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class fragment_ring {
public:
  /// 1 MiB, as Gloo's own ring uses for its segments.
  static constexpr std::size_t default_piece_bytes = std::size_t{1} << 20;

  /// `waits` registers the ring's buffers, so that another thread can end its waits.
  fragment_ring(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits,
                const std::vector<fragment>& frags, dtype dt, std::vector<char>& scratch,
                std::size_t max_piece_bytes = default_piece_bytes, op o = op::sum)
      : ctx_(ctx), waits_(waits), frags_(frags), dt_(dt), es_(size_of(dt)), max_piece_bytes_(max_piece_bytes),
        reduce_(reduce_for(dt, o)), scratch_(scratch) {
    starts_.reserve(frags_.size() + 1);
    std::size_t at = 0;
    for (auto& f : frags_) {
      starts_.push_back(at);
      at += f.count;
      bufs_.push_back(f.count ? waits_.make(*ctx_, f.data, f.count * es_)
                              : gloo_waits::buffer(nullptr, {&waits_}));
    }
    starts_.push_back(at);
    total_ = at;
  }

  /// Reduces over ranks with the op given at construction (a sum by default),
  /// then multiplies by `scale` (1/W for a mean; sums only), in place.
  void run(std::uint32_t tag, double scale, std::chrono::milliseconds timeout) {
    const int w = ctx_->size, r = ctx_->rank;
    if (total_ == 0) return;
    if (w == 1) {
      if (scale != 1.0)
        for (auto& f : frags_)
          scale_in_place(f.data, f.count, dt_, scale);
      return;
    }
    deadline_ = gloo_deadline(timeout);
    slot_ = ::gloo::Slot::build(ring_slot_prefix, tag);
    const int right = (r + 1) % w, left = (r - 1 + w) % w;
    std::size_t largest = 0;
    for (int c = 0; c < w; ++c)
      largest = std::max(largest, end(c) - begin(c));
    scratch_.resize(largest * es_);
    auto tmp = waits_.make(*ctx_, scratch_.data(), scratch_.size());
    const auto reduce = reduce_;

    for (int s = 0; s + 1 < w; ++s) { // reduce-scatter: after it, rank r owns chunk r+1
      const int send_c = (r - s + w) % w, recv_c = (r - s - 1 + w) % w;
      const bool last = s + 2 == w;
      pieces(begin(recv_c), end(recv_c), [&](std::size_t, std::size_t, std::size_t n, std::size_t at) {
        tmp->recv(left, slot_, (at - begin(recv_c)) * es_, n * es_);
      });
      post_sends(right, send_c);
      pieces(begin(recv_c), end(recv_c), [&](std::size_t k, std::size_t off, std::size_t n, std::size_t at) {
        gloo_deadline::check(tmp->waitRecv(deadline_.remaining()), "ring receive");
        auto* dst = static_cast<char*>(frags_[k].data) + off * es_;
        const char* in = scratch_.data() + (at - begin(recv_c)) * es_;
        if (last && scale != 1.0)
          sum_scaled(dst, dst, in, n, dt_, scale); // averaging fused here
        else
          reduce(dst, dst, in, n);
      });
      wait_sends();
    }
    for (int s = 0; s + 1 < w; ++s) { // all-gather the owned, final chunks
      const int send_c = (r + 1 - s + w) % w, recv_c = (r - s + w) % w;
      std::vector<std::size_t> receivers;
      pieces(begin(recv_c), end(recv_c), [&](std::size_t k, std::size_t off, std::size_t n, std::size_t) {
        bufs_[k]->recv(left, slot_, off * es_, n * es_);
        receivers.push_back(k);
      });
      post_sends(right, send_c);
      for (auto k : receivers)
        gloo_deadline::check(bufs_[k]->waitRecv(deadline_.remaining()), "ring receive");
      wait_sends();
    }
  }

private:
  std::size_t begin(int c) const {
    return total_ * static_cast<std::size_t>(c) / static_cast<std::size_t>(ctx_->size);
  }
  std::size_t end(int c) const { return begin(c + 1); }

  /// Calls f(fragment, offset in fragment, count, offset in bucket) for the
  /// pieces of bucket elements [a, b): cut at fragment ends and at the piece size.
  template <class F> void pieces(std::size_t a, std::size_t b, F&& f) const {
    if (a >= b) return;
    std::size_t k =
        static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), a) - starts_.begin()) - 1;
    const std::size_t max_piece = std::max<std::size_t>(1, max_piece_bytes_ / es_);
    while (a < b) {
      while (starts_[k + 1] <= a)
        ++k;
      const std::size_t n = std::min({b, starts_[k + 1], a + max_piece}) - a;
      f(k, a - starts_[k], n, a);
      a += n;
    }
  }

  void post_sends(int right, int c) {
    pieces(begin(c), end(c), [&](std::size_t k, std::size_t off, std::size_t n, std::size_t) {
      bufs_[k]->send(right, slot_, off * es_, n * es_);
      senders_.push_back(k);
    });
  }

  void wait_sends() {
    for (auto k : senders_)
      gloo_deadline::check(bufs_[k]->waitSend(deadline_.remaining()), "ring send");
    senders_.clear();
  }

  std::shared_ptr<::gloo::Context> ctx_;
  gloo_waits& waits_;
  const std::vector<fragment>& frags_;
  dtype dt_;
  std::size_t es_;
  std::size_t max_piece_bytes_;
  reduce_fn reduce_;
  std::vector<char>& scratch_;
  std::vector<std::size_t> starts_;
  std::vector<gloo_waits::buffer> bufs_;
  std::vector<std::size_t> senders_;
  std::size_t total_ = 0;
  std::uint64_t slot_ = 0;
  gloo_deadline deadline_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_RING_HPP
// ---- end ddp/detail/gloo/ring.hpp ----

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_collectives {
public:
  /// Runs before every header round, on the worker thread.
  using exchange_hook = std::function<void(const collective_header& h, const std::string& what)>;

  /// `ctx`, `waits` and `scratch` are the communicator's, which outlives this.
  gloo_collectives(int rank, int size, std::chrono::milliseconds timeout,
                   const std::shared_ptr<gloo_mesh_context>& ctx, gloo_waits& waits,
                   std::vector<char>& scratch, exchange_hook before_exchange)
      : rank_(rank), size_(size), timeout_(timeout), ctx_(ctx), waits_(waits), scratch_(scratch),
        before_exchange_(std::move(before_exchange)) {}

  /// all_reduce over TCP, once `h` (kind, tag, count, dtype, op, piece) is filled in.
  void all_reduce(const collective_header& h, const std::string& what, void* data, std::size_t n, dtype dt,
                  op o) {
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(h, what, [&](int) { return payload{data, small ? bytes : 0}; });
    if (n == 0) return;
    const double scale = o == op::avg ? 1.0 / size_ : 1.0;
    if (!small) {
      std::vector<fragment> whole{{data, n}};
      fragment_ring(ctx_, waits_, whole, dt, scratch_, h.piece, o == op::avg ? op::sum : o)
          .run(h.tag, scale, timeout_);
      return;
    }
    // Every rank reduces the same contributions in the same (rank) order: same bits everywhere.
    std::memcpy(headers_.own_slot(rank_), data, bytes);
    std::memcpy(data, headers_.payload(0), bytes);
    const auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r) {
      if (r + 1 == size_ && scale != 1.0)
        sum_scaled(data, data, headers_.payload(r), n, dt, scale); // averaging fused
      else
        fn(data, data, headers_.payload(r), n);
    }
  }

  /// A bucket's fragments summed around ddp's ring, then scaled. Buckets skip
  /// the header round (a round trip each), but ranks with different pieces
  /// would cut the ring's messages differently: wrong data, or Gloo aborting
  /// the process. So the first bucket, and the first after a rank changed its
  /// piece, compare headers.
  void all_reduce_fragments(const collective_header& h, const std::string& what,
                            const std::vector<fragment>& frags, dtype dt, double scale) {
    if (h.piece != verified_piece_ && size_ > 1) {
      exchange_header(h, what);
      verified_piece_ = h.piece;
    }
    fragment_ring(ctx_, waits_, frags, dt, scratch_, h.piece).run(h.tag, scale, timeout_);
  }

  void broadcast(std::uint32_t tag, const std::string& what, void* data, std::size_t n, dtype dt, int root,
                 std::size_t piece) {
    if (size_ == 1) return;
    auto h = header(collective_kind::broadcast, tag, n, dt);
    h.root = root;
    h.piece = piece; // it cuts the chain's messages: ranks must agree on it
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(h, what, [&](int) { return payload{data, small && rank_ == root ? bytes : 0}; });
    if (n == 0) return;
    if (small) {
      if (rank_ != root) std::memcpy(data, headers_.payload(root), bytes);
      return;
    }
    chain_broadcast::run(ctx_, waits_, data, bytes, root, tag, piece, timeout_);
  }

  void all_gather(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n,
                  dtype dt) {
    const std::size_t bytes = n * size_of(dt);
    if (size_ == 1) {
      if (n) std::memmove(out, in, bytes);
      return;
    }
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(header(collective_kind::all_gather, tag, n, dt), what, [&](int) {
      return payload{in, small ? bytes : 0};
    });
    if (n == 0) return;
    auto* o = static_cast<char*>(out);
    auto* own = o + bytes * static_cast<std::size_t>(rank_);
    std::memmove(own, in, bytes);
    if (small) {
      for (int r = 0; r < size_; ++r)
        if (r != rank_) std::memcpy(o + bytes * static_cast<std::size_t>(r), headers_.payload(r), bytes);
      return;
    }
    // Own block to every peer, theirs straight into `out`.
    exchange_blocks(ctx_, waits_, {own, bytes, true}, {o, bytes}, tag, timeout_);
  }

  void reduce_scatter(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n,
                      dtype dt, op o) {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
    const bool small = bytes <= header_round::inline_cap(size_);
    const auto* blocks = static_cast<const char*>(in);
    auto block = [&](int r) { return blocks + bytes * static_cast<std::size_t>(r); };
    if (size_ > 1) {
      auto h = header(collective_kind::reduce_scatter, tag, n, dt);
      h.reduce = static_cast<std::uint8_t>(o);
      exchange(h, what, [&](int p) { return payload{block(p), small ? bytes : 0}; });
    }
    if (n == 0) return;
    // from(r): the block rank r sent for this rank. This rank's own is read
    // from a copy: `out` may overlap `in` (in place), and is written below.
    std::function<const char*(int)> from;
    if (size_ == 1) {
      from = [&](int) { return blocks; };
    } else if (small) {
      std::memcpy(headers_.own_slot(rank_), block(rank_), bytes);
      from = [&](int r) { return r == rank_ ? headers_.own_slot(rank_) : headers_.payload(r); };
    } else {
      scratch_.resize(total);
      auto* mine = scratch_.data() + bytes * static_cast<std::size_t>(rank_);
      std::memcpy(mine, block(rank_), bytes);
      exchange_blocks(ctx_, waits_, {const_cast<char*>(blocks), bytes}, {scratch_.data(), bytes}, tag,
                      timeout_);
      from = [&](int r) {
        return static_cast<const char*>(scratch_.data()) + bytes * static_cast<std::size_t>(r);
      };
    }
    std::memmove(out, from(0), bytes);
    auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r)
      fn(out, out, from(r), n);
    if (o == op::avg) scale_in_place(out, n, dt, 1.0 / size_);
  }

  struct payload {
    const void* data = nullptr;
    std::size_t bytes = 0;
  };

  static collective_header header(collective_kind kind, std::uint32_t tag, std::size_t n, dtype dt) {
    collective_header h;
    h.kind = kind;
    h.tag = tag;
    h.count = n;
    h.dt = static_cast<std::uint8_t>(dt);
    return h;
  }

  /// The header round every collective starts with (see detail/gloo/header.hpp):
  /// throws ddp::error(mismatch) on every rank when ranks disagree.
  template <class P> void exchange(const collective_header& h, const std::string& what, P&& payload_for) {
    if (before_exchange_) before_exchange_(h, what);
    headers_.run(
        ctx_, waits_, h,
        [&](int p) {
          payload pl = payload_for(p);
          return std::pair<const void*, std::size_t>{pl.data, pl.bytes};
        },
        timeout_, what);
  }

  /// The header round alone: no payload.
  void exchange_header(const collective_header& h, const std::string& what) {
    exchange(h, what, [](int) { return payload{}; });
  }

private:
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  const std::shared_ptr<gloo_mesh_context>& ctx_; ///< the communicator's, replaced on failure
  gloo_waits& waits_;
  std::vector<char>& scratch_;
  header_round headers_;
  exchange_hook before_exchange_;
  std::size_t verified_piece_ = 0; ///< the piece every rank's buckets last agreed on (worker thread only)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COLLECTIVES_HPP
// ---- end ddp/detail/gloo/collectives.hpp ----
// ---- begin ddp/detail/gloo/device.hpp ----
// Setting up Gloo's TCP transport: which local interface or address to use,
// and the process-wide SIGPIPE policy Gloo's sockets need.
#ifndef DDP_DETAIL_GLOO_DEVICE_HPP
#define DDP_DETAIL_GLOO_DEVICE_HPP


#include <gloo/transport/tcp/device.h>

#include <net/if.h>
#include <signal.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The local address that routes to `host`: what peers on other nodes can reach.
inline std::string local_address_towards(const std::string& host, int port) {
  addrinfo_list ai;
  resolve(host, port > 0 ? port : 1, false, ai);
  for (addrinfo* p = ai.head; p; p = p->ai_next) {
    unique_fd fd(::socket(p->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), p->ai_addr, p->ai_addrlen) != 0) continue; // UDP: sends nothing
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    char buf[NI_MAXHOST];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) ==
        0)
      return buf;
  }
  throw error(error_kind::config, "no local address routes to MASTER_ADDR=" + host +
                                      ": set GLOO_SOCKET_IFNAME to the interface to use");
}

/// Where this process's Gloo endpoint listens.
struct gloo_endpoint {
  int rank = 0;
  int local_rank = 0;
  std::string master_addr; ///< empty: loopback
  int master_port = 0;
};

/// GLOO_SOCKET_IFNAME (a list spreads a node's ranks over the interfaces),
/// else the local address that routes to MASTER_ADDR, else loopback.
inline std::shared_ptr<::gloo::transport::Device> make_gloo_device(const gloo_endpoint& at) {
  ::gloo::transport::tcp::attr attr;
  if (auto names = getenv_str("GLOO_SOCKET_IFNAME"); names && !names->empty()) {
    std::vector<std::string> list;
    std::string_view s = *names;
    while (!s.empty()) {
      auto comma = s.find(',');
      auto name = std::string(s.substr(0, comma));
      if (!name.empty()) {
        if (::if_nametoindex(name.c_str()) == 0)
          throw error(error_kind::config,
                      "GLOO_SOCKET_IFNAME='" + *names + "' names interface '" + name +
                          "', which this host does not have (see `ip link`)",
                      at.rank);
        list.push_back(name);
      }
      if (comma == std::string_view::npos) break;
      s.remove_prefix(comma + 1);
    }
    if (list.empty())
      throw error(error_kind::config, "GLOO_SOCKET_IFNAME='" + *names + "' names no interface");
    attr.iface = list[static_cast<std::size_t>(at.local_rank) % list.size()];
  } else if (!at.master_addr.empty()) {
    attr.hostname = local_address_towards(at.master_addr, at.master_port);
  } else {
    attr.hostname = "127.0.0.1";
  }
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw error(error_kind::config,
                std::string("cannot create the Gloo TCP device (") +
                    (attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface) +
                    "): " + e.what(),
                at.rank);
  }
}

/// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies mid-write
/// would kill this process with SIGPIPE instead of raising an error we can
/// report. Like Python (and so PyTorch) does at start-up, ignore SIGPIPE, but
/// only when nobody installed a handler of their own.
inline void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, nullptr);
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_DEVICE_HPP
// ---- end ddp/detail/gloo/device.hpp ----
// ---- begin ddp/detail/gloo/knobs.hpp ----
// The Gloo communicator's knobs for tests and benches, in one place: the
// piece size of ddp's ring and chain, whether all_reduce may take the node's
// shared memory, and how many collectives took which shared-memory path.
#ifndef DDP_DETAIL_GLOO_KNOBS_HPP
#define DDP_DETAIL_GLOO_KNOBS_HPP


#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

struct gloo_knobs {
  /// Larger pieces buy nothing, and sizes near SIZE_MAX would overflow the piece arithmetic.
  static constexpr std::size_t max_piece_bytes = std::size_t{1} << 30;

  /// gloo_communicator::set_ring_piece_bytes, checked for `rank`.
  void set_ring_piece_bytes(int rank, std::size_t bytes) {
    if (bytes == 0 || bytes > max_piece_bytes)
      throw error(error_kind::config, "rank " + std::to_string(rank) + ": set_ring_piece_bytes(" +
                                          std::to_string(bytes) + "): the piece size must be 1 B to " +
                                          std::to_string(max_piece_bytes) + " B (1 GiB)");
    ring_piece_bytes = bytes;
  }

  std::size_t ring_piece_bytes = fragment_ring::default_piece_bytes;
  /// use_shm(false): all_reduce, reduce_scatter and all_gather over TCP although the segment is there.
  bool shm_on = true;
  std::atomic<std::uint64_t> in_place_runs{0};  ///< all-reduces run in place in a shm array
  std::atomic<std::uint64_t> shm_block_runs{0}; ///< reduce_scatters and all_gathers run through the segment
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_KNOBS_HPP
// ---- end ddp/detail/gloo/knobs.hpp ----
// ---- begin ddp/detail/gloo/shm_path.hpp ----
// The Gloo communicator's shared-memory path: the vote that decides it, the
// node's segment (and, across nodes, the leaders' mesh), all_reduce through
// it, and the shm arrays an all_reduce runs in place in. The header round
// and the blame stay the communicator's: it hands them in as `exchange` and
// `fail_io`, so both paths agree and blame alike.
#ifndef DDP_DETAIL_GLOO_SHM_PATH_HPP
#define DDP_DETAIL_GLOO_SHM_PATH_HPP

// ---- begin ddp/detail/gloo/store_adapter.hpp ----
// Lets Gloo's rendezvous use ddp's token-gated tcp_store, under a key prefix:
// the communicator's mesh and, across nodes, the leaders' mesh connect through it.
#ifndef DDP_DETAIL_GLOO_STORE_ADAPTER_HPP
#define DDP_DETAIL_GLOO_STORE_ADAPTER_HPP


#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Lets Gloo's rendezvous use our token-gated tcp_store, under a key prefix.
class gloo_store_adapter final : public ::gloo::rendezvous::Store, public gloo_batch_store {
public:
  gloo_store_adapter(tcp_store& s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    s_.set(prefix_ + key, std::string_view(data.data(), data.size()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = s_.get(prefix_ + key);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, s_.timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    s_.wait(prefixed(keys), timeout);
  }
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::vector<char>>& values) override {
    std::vector<std::string> text;
    for (auto& v : values)
      text.emplace_back(v.begin(), v.end());
    s_.multi_set(prefixed(keys), text);
  }
  std::vector<std::vector<char>> multi_get(const std::vector<std::string>& keys,
                                           std::chrono::milliseconds timeout) override {
    std::vector<std::vector<char>> values;
    for (auto& v : s_.multi_get(prefixed(keys), timeout))
      values.emplace_back(v.begin(), v.end());
    return values;
  }

private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> full;
    for (auto& k : keys)
      full.push_back(prefix_ + k);
    return full;
  }

  tcp_store& s_;
  std::string prefix_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_STORE_ADAPTER_HPP
// ---- end ddp/detail/gloo/store_adapter.hpp ----
// ---- begin ddp/detail/shm/all_reduce.hpp ----
// All-reduce among the ranks of one node through their shared segment
// (detail/shm/segment.hpp). Within one node (run_pipelined) the data goes through in
// steps of 256 KiB, alternating between two halves of each area and of the
// result area, with one barrier per step: every local rank copies the parts of
// step k that the others reduce into its area (its own slice stays where it
// is), meets the others, copies step k-1's result out, and reduces its own
// slice of step k over all ranks, in local-rank order, the averaging fused
// into the last step. The steps are small enough that what one rank writes is
// still in cache when the others read it, which beat the earlier 4 MiB steps
// with two barriers each (docs/performance.md, Collectives).
// Across nodes (run_staged) the node's leader reduces each step with the other
// nodes' leaders over Gloo between the node's reduce and copy-out, so each step
// has three barriers and fills the whole area (fewer, larger TCP calls).
//
// Barriers: each rank bumps its sequence counter (for blame) and a shared
// arrival count; the last arriver advances the generation word, on which the
// others spin briefly, then sleep in futex waits of at most 2 ms (the waker
// calls futex_wake only when one sleeps). Between sleeps a waiter checks the
// group's deadline, whether a rank aborted, and whether the ranks it waits for
// are still alive (every 20 ms their pid, if in this PID namespace; the store's
// record of lost ranks ever less often, to every 0.5 s), so a rank that dies
// is named, no hang.
// Collectives over TCP on a one-node group meet here first too (agree), so a
// rank in either kind of collective sees the other.
#ifndef DDP_DETAIL_SHM_ALL_REDUCE_HPP
#define DDP_DETAIL_SHM_ALL_REDUCE_HPP

// ---- begin ddp/detail/shm/segment.hpp ----
// The POSIX shared-memory segment the ranks of one node share (see
// detail/shm/all_reduce.hpp for what travels through it).
//
// Naming: "/ddp-" + the first 128 bits of SHA-256 over the job token, the
// store's address and the node rank: never the token itself (/dev/shm is
// world-listable). Mode 0600.
// Lifetime: local rank 0 creates it (O_EXCL) during the process group's
// construction and publishes the name, or its failure, in the store; every
// other local rank maps it; the node's last rank to have tried unlinks the
// name (ENOENT is fine): from then on the segment lives only in the mappings,
// so a rank killed with SIGKILL leaks nothing: the kernel frees the memory
// when the last mapping goes. Every failure path unlinks the name too. Each
// rank then reports success or failure, and the last one to report decides for
// the whole job (shm_segment::setup): only when every rank of every node has
// mapped its segment is the shm path taken; otherwise every rank reduces over TCP.
// Which ranks share a node comes from the topology (node_rank), never the
// hostname: two network namespaces of one host share a hostname and /dev/shm.
#ifndef DDP_DETAIL_SHM_SEGMENT_HPP
#define DDP_DETAIL_SHM_SEGMENT_HPP


#include <openssl/evp.h>
#include <openssl/rand.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// One local rank's line in the control block (own cache lines: no false sharing).
struct alignas(128) shm_rank_line {
  std::uint64_t seq = 0;      ///< barriers this rank has arrived at (atomic_ref)
  std::int32_t global = -1;   ///< its global rank, for error messages
  std::int32_t pid = 0;       ///< for the liveness check while others wait
  std::uint64_t pidns = 0;    ///< its PID namespace (inode of /proc/self/ns/pid; 0: unknown)
  collective_header header{}; ///< what it is running now: ranks that disagree fail with mismatch
};

struct shm_control {
  static constexpr std::uint64_t expected_magic = 0x334d485350444444; // "DDDPSHM3": the header grew
  std::uint64_t magic = 0;
  std::uint32_t local_size = 0;
  std::uint32_t unused = 0;
  std::uint64_t area_bytes = 0; ///< bytes per area
  alignas(128) std::uint32_t arrived = 0;
  alignas(128) std::uint32_t generation = 0; ///< the futex word: bumped by the last arriver
  std::uint32_t sleepers = 0;                ///< ranks in a futex wait on it: 0 spares the wake
  alignas(128) std::int32_t aborted_by = -1; ///< global rank of a rank that failed inside a collective
  // followed by local_size shm_rank_line
};

/// The segment's name: a hash of the job's token and store, the node, and 128
/// random bits drawn by the node's local rank 0, who publishes the name through
/// the (token-authenticated) store. The random part means a name left behind by
/// a rank killed inside the setup window never blocks a restart round or a later
/// job with the same settings (O_EXCL would refuse it), and a local user cannot
/// pre-create the name of a job whose token is empty (torchrun, tcp://).
inline std::string shm_segment_name(const std::string& token, const std::string& store_where, int node_rank) {
  unsigned char nonce[16];
  if (::RAND_bytes(nonce, sizeof nonce) != 1)
    throw error(error_kind::backend, "OpenSSL RAND_bytes failed while naming the shm segment");
  const std::string msg = "ddp shm v2\n" + token + "\n" + store_where + "\n" + std::to_string(node_rank) +
                          "\n" + std::string(reinterpret_cast<const char*>(nonce), sizeof nonce);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (::EVP_Digest(msg.data(), msg.size(), md, &len, ::EVP_sha256(), nullptr) != 1 || len < 16)
    throw error(error_kind::backend, "OpenSSL EVP_Digest(SHA-256) failed while naming the shm segment");
  static constexpr char hex[] = "0123456789abcdef";
  std::string name = "/ddp-";
  for (unsigned i = 0; i < 16; ++i) {
    name += hex[md[i] >> 4];
    name += hex[md[i] & 15];
  }
  return name;
}

/// This process's PID namespace: the inode of /proc/self/ns/pid, 0 when it
/// cannot be read. A pid means something only within its namespace: ranks in
/// two containers that share /dev/shm must not judge each other's pids.
inline std::uint64_t own_pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

/// The inputs of shm_segment::setup, the same on every rank but rank and local_rank.
struct shm_setup {
  std::string token, store_where;
  int rank = 0, world_size = 1, node_rank = 0, local_rank = 0, local_size = 1;
  std::size_t area_bytes = 0; ///< bytes per area
  std::chrono::milliseconds timeout{};
  /// Areas after the control block: one per local rank, plus the result area
  /// of the all-reduce's segment (a shm array has none).
  bool result_area = true;
  /// The store keys of this segment's setup ("ddp/shm/": the all-reduce's;
  /// each shm array has its own).
  std::string key = "ddp/shm/";
  /// Said when the node's ranks asked for segments of different sizes.
  std::string size_mismatch_hint = "the node's ranks disagree on LOCAL_WORLD_SIZE or DDP_SHM_AREA_BYTES; "
                                   "start them with the same settings.";
};

/// Why shm_segment::setup did not give a segment: the first rank that failed
/// (-1: none), its error kind and message.
struct shm_setup_failure {
  int rank = -1;
  error_kind kind = error_kind::backend;
  std::string message;
};

inline long futex_call(void* addr, int op, std::uint32_t val, const timespec* ts) {
  return ::syscall(SYS_futex, addr, op, val, ts, nullptr, 0);
}

/// A mapped segment: control block (one line per local rank), local_size areas of
/// area_bytes bytes, and (the all-reduce's segment) one result area of
/// area_bytes bytes.
class shm_segment {
public:
  /// Collective over every rank of the group (all must call it): maps this
  /// node's segment, and returns it only when every rank of every node mapped
  /// its own; else nullptr on every rank, `failed` naming the first rank that
  /// failed and why (a full /dev/shm, a refused shm_open or mmap, ...). Throws
  /// ddp::error only when the store fails (a rank died or stalled meanwhile).
  template <class Store>
  static std::unique_ptr<shm_segment> setup(Store& store, const shm_setup& a, shm_setup_failure& failed) {
    const std::string node = a.key + std::to_string(a.node_rank) + "/";
    std::unique_ptr<shm_segment> seg(
        new shm_segment(a.local_rank, a.local_size, a.area_bytes, a.result_area));
    std::string mine; // this rank's failure, "" for none
    error_kind mine_kind = error_kind::backend;
    try {
      try {
        if (a.local_rank == 0) {
          seg->name_ = shm_segment_name(a.token, a.store_where, a.node_rank);
          seg->create(a.area_bytes);
          store.set(node + "created", "ok " + seg->name_);
        } else {
          store.wait({node + "created"}, a.timeout);
          const std::string v = store.get(node + "created");
          // "failed": local rank 0's own report names the cause; nothing to add here
          if (v.rfind("ok ", 0) == 0) {
            seg->name_ = v.substr(3);
            seg->open_existing(a.size_mismatch_hint);
          }
        }
      } catch (const error& e) {
        // A resource failure of this rank's own (not the store's): report it, decide below.
        if (e.kind() == error_kind::timeout || e.kind() == error_kind::peer_lost) throw;
        // Without "ddp <kind> error: ": the kind is said again when the outcome is reported.
        mine = "(node " + std::to_string(a.node_rank) + ", local rank " + std::to_string(a.local_rank) +
               ") " + std::string(e.message());
        mine_kind = e.kind();
        if (a.local_rank == 0) {
          seg->discard(); // nobody else will open it
          store.set(node + "created", "failed");
        } else {
          seg->unmap(); // the name stays until the node's last rank tried: others may still open it
        }
      }
      if (seg->base_) {
        auto& me = seg->line(a.local_rank);
        me.global = a.rank;
        me.pid = static_cast<std::int32_t>(::getpid());
        me.pidns = own_pid_namespace();
      }
      // The node's last rank to have tried (mapped or failed) unlinks the name
      // now: the job-wide decision below may wait up to the timeout for other
      // nodes, and a node whose ranks are all killed meanwhile must leak nothing.
      if (store.add(node + "tried", 1) == a.local_size) seg->unlink();
      // The job-wide decision: the last rank to report sets it. A failing rank
      // records its failure before it reports, so the last one sees it.
      if (!mine.empty() && store.add(a.key + "failures", 1) == 1)
        store.set(a.key + "first-failure",
                  std::to_string(a.rank) + " " + std::to_string(static_cast<int>(mine_kind)) + " " + mine);
      if (store.add(a.key + "reported", 1) == a.world_size)
        store.set(a.key + "outcome", store.add(a.key + "failures", 0) == 0
                                         ? "ok"
                                         : "failed " + store.get(a.key + "first-failure"));
      store.wait({a.key + "outcome"}, a.timeout);
      const std::string outcome = store.get(a.key + "outcome");
      seg->unlink(); // (done above by the node's last rank; again in case that rank failed first)
      if (outcome == "ok") return seg;
      seg->discard();
      // "failed <rank> <kind> <message>"
      std::size_t p1 = outcome.find(' ', 7), p2 = outcome.find(' ', p1 + 1);
      failed.rank = std::stoi(outcome.substr(7, p1 - 7));
      failed.kind = static_cast<error_kind>(std::stoi(outcome.substr(p1 + 1, p2 - p1 - 1)));
      failed.message = outcome.substr(p2 + 1);
      return nullptr;
    } catch (...) {
      seg->discard();
      throw;
    }
  }
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment() { unmap(); }

  const std::string& name() const { return name_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  std::size_t area_bytes() const { return ctl().area_bytes; }
  shm_control& ctl() const { return *static_cast<shm_control*>(base_); }
  shm_rank_line& line(int l) const {
    return reinterpret_cast<shm_rank_line*>(static_cast<char*>(base_) + sizeof(shm_control))[l];
  }
  char* data(int l) const {
    return static_cast<char*>(base_) + control_bytes(local_size_) +
           static_cast<std::size_t>(l) * ctl().area_bytes;
  }
  char* result() const { return data(local_size_); }
  /// Whether [p, p + bytes) lies in local rank l's area.
  bool in_area(int l, const void* p, std::size_t bytes) const {
    if (!base_) return false;
    // As integers: p may point into any object, and comparing pointers into different ones is undefined.
    const auto a = reinterpret_cast<std::uintptr_t>(data(l)), c = reinterpret_cast<std::uintptr_t>(p);
    const std::size_t cap = ctl().area_bytes;
    return c >= a && bytes <= cap && c - a <= cap - bytes;
  }

private:
  shm_segment(int local_rank, int local_size, std::size_t area_bytes, bool result_area)
      : local_rank_(local_rank), local_size_(local_size),
        bytes_(control_bytes(local_size) +
               (static_cast<std::size_t>(local_size) + (result_area ? 1 : 0)) * area_bytes) {}

  void unlink() {
    if (!name_.empty()) ::shm_unlink(name_.c_str());
  }
  /// Unlinks (local rank 0's, if still named) and unmaps: nothing of it stays.
  void discard() {
    unlink();
    unmap();
  }

  static std::size_t control_bytes(int local_size) {
    const std::size_t raw =
        sizeof(shm_control) + static_cast<std::size_t>(local_size) * sizeof(shm_rank_line);
    return (raw + 4095) / 4096 * 4096; // the data areas start page-aligned
  }

  [[noreturn]] void fail(const std::string& what, int err) const {
    throw error(error_kind::backend, what + " shared-memory segment /dev/shm" + name_ + " (" +
                                         std::to_string(bytes_) + " B): " + std::strerror(err));
  }

  void create(std::size_t area_bytes) {
    int fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) fail("cannot create", errno);
    // posix_fallocate, not ftruncate: a full /dev/shm fails here with ENOSPC,
    // not later with SIGBUS on first touch.
    int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
    if (e != 0) {
      ::close(fd);
      fail("cannot size", e);
    }
    map(fd);
    auto* c = new (base_) shm_control{};
    c->local_size = static_cast<std::uint32_t>(local_size_);
    c->area_bytes = area_bytes;
    for (int l = 0; l < local_size_; ++l)
      new (&line(l)) shm_rank_line{};
    std::atomic_ref<std::uint64_t>(c->magic).store(shm_control::expected_magic, std::memory_order_release);
  }

  void open_existing(const std::string& size_mismatch_hint) {
    int fd = ::shm_open(name_.c_str(), O_RDWR, 0600);
    if (fd < 0) fail("cannot open", errno);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)) {
      ::close(fd);
      throw error(error_kind::backend, "shared-memory segment " + name_ +
                                           " is not this user's private segment (owner or mode differ): "
                                           "refusing to use it");
    }
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes_) {
      ::close(fd);
      throw error(error_kind::mismatch, "shared-memory segment " + name_ + " has " +
                                            std::to_string(st.st_size) +
                                            " B, but the rank opening it expected " + std::to_string(bytes_) +
                                            " B: " + size_mismatch_hint);
    }
    map(fd);
    if (std::atomic_ref<std::uint64_t>(ctl().magic).load(std::memory_order_acquire) !=
        shm_control::expected_magic)
      throw error(error_kind::backend, "shared-memory segment " + name_ + " is not initialized");
  }

  void map(int fd) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) fail("cannot map", e);
    base_ = p;
  }

  void unmap() {
    if (base_) ::munmap(base_, bytes_);
    base_ = nullptr;
  }

  std::string name_;
  int local_rank_, local_size_;
  std::size_t bytes_ = 0;
  void* base_ = nullptr;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_SEGMENT_HPP
// ---- end ddp/detail/shm/segment.hpp ----

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class shm_all_reduce {
public:
  /// The default area size, per local rank, across nodes (12 MiB of /dev/shm
  /// at 2 ranks a node): the staged path's step. On one node the area holds
  /// two steps of the pipelined path (2 x default_step_bytes).
  static constexpr std::size_t default_area_bytes = std::size_t{4} << 20;
  /// The pipelined path's step: small steps keep the two buffers of every rank
  /// in L2 (the sweep: docs/performance.md, Collectives).
  static constexpr std::size_t default_step_bytes = std::size_t{256} << 10;

  /// A rank the rendezvous store saw lost: (-1, "") for none; (-1, reason): the launcher
  /// serving the store is gone.
  struct lost_peer {
    int rank = -1;
    std::string reason;
    bool silent = false;
    std::string news() const { return rank >= 0 ? "rank " + std::to_string(rank) + " " + reason : reason; }
  };
  /// `find_lost(grace)`: asks the store for a lost rank, waiting up to `grace`.
  using lost_finder = std::function<lost_peer(std::chrono::milliseconds grace)>;

  shm_all_reduce(std::unique_ptr<shm_segment> seg, lost_finder find_lost, int rank,
                 std::chrono::milliseconds timeout)
      : seg_(std::move(seg)), find_lost_(std::move(find_lost)), rank_(rank), timeout_(timeout) {}

  const shm_segment& segment() const { return *seg_; }
  /// Bytes per step (tests make it small to cross step ends); 0 restores the
  /// defaults. Every local rank must use the same value.
  void set_step_bytes(std::size_t b) { step_setting_ = b; }
  /// The step in effect: `staged` for the cross-node path, whose default is
  /// the whole area; the pipelined path's is at most half an area.
  std::size_t step_bytes(bool staged) const {
    const std::size_t cap = staged ? seg_->area_bytes() : half_area();
    const std::size_t want = step_setting_ ? step_setting_ : staged ? cap : default_step_bytes;
    return std::clamp<std::size_t>(want, 64, cap);
  }

  /// Reduces `frags` (op o; scale multiplies the sum, 1.0 for none) across the
  /// node's ranks. `between(result, m)`, when set, runs on local rank 0 on each
  /// step's reduced result before the others copy it out (the cross-node step).
  void run(const std::vector<fragment>& frags, dtype dt, op o, double scale, const collective_header& h,
           const std::string& what, const std::function<void(char*, std::size_t)>& between = {}) {
    begin(h, what);
    if (between)
      run_staged(frags, dt, o, scale, h, between);
    else
      run_pipelined(frags, dt, o, scale, h);
    what_ = nullptr;
  }

  /// All-reduce of a shm array in place (one node): `n` elements at byte
  /// `offset` of every local rank's area of `arr` (a segment of
  /// make_shm_array, one area per local rank, laid out alike). No copy in
  /// or out: after one barrier each rank reduces its own slice straight from
  /// the others' areas, in local-rank order (the same bits as the other
  /// paths), and writes the result into every rank's area; a second barrier
  /// ends it. Two barriers per collective, not one per step, so it beats the
  /// copying path, most on a busy host, where step barriers suffer when a rank is
  /// descheduled (docs/performance.md, Collectives).
  void run_in_place(const shm_segment& arr, std::size_t offset, std::size_t n, dtype dt, op o, double scale,
                    const collective_header& h, const std::string& what) {
    begin(h, what);
    barrier();
    check_headers(h);
    const std::size_t esz = size_of(dt);
    const slice cut = my_slice(n, esz, offset % 64 / esz); // areas start on a cache line
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int me = seg_->local_rank(), L = seg_->local_size();
    // Reduced into private scratch first: the destination may not be any
    // source (a rank's area is read again for later terms of the sum).
    const std::size_t step = std::max<std::size_t>(default_step_bytes / esz, 1);
    if (!scratch_)
      scratch_.reset(static_cast<char*>(::operator new (default_step_bytes, std::align_val_t{64})));
    for (std::size_t i = cut.a; i < cut.b; i += step) {
      const std::size_t k = std::min(step, cut.b - i), byte = offset + i * esz;
      reduce_areas(
          scratch_.get(), [&](int l) -> const char* { return arr.data(l) + byte; }, k, dt, fn, scale);
      for (int l = 0; l < L; ++l) // mine last: the others' copies read it from cache
        std::memcpy(arr.data((me + 1 + l) % L) + byte, scratch_.get(), k * esz);
    }
    barrier();
    what_ = nullptr;
  }

  /// The header check alone, for a collective that runs over TCP on a node
  /// whose all_reduce runs here: every rank publishes what it is about to run,
  /// meets the others at one barrier and compares. Without it a rank in the shm
  /// all_reduce and a rank in a TCP collective would wait for each other until
  /// the timeout; with it both fail at once with mismatch naming both. Sound:
  /// after the barrier no rank can overwrite its header before every rank has
  /// checked, since the TCP collective that follows needs every rank's header
  /// message, sent only after its check.
  void agree(const collective_header& h, const std::string& what) {
    begin(h, what);
    barrier();
    check_headers(h);
    what_ = nullptr;
  }

  /// A collective of pipelined steps through the halves of the areas
  /// (reduce_scatter and all_gather: detail/shm/block_collectives.hpp). Per
  /// step of at most `cap` of `n` elements, `write(off, m, buf)` fills this
  /// rank's half `buf`, the ranks meet at one barrier (the first also checks
  /// the headers), then `read(off, m, buf)` reads the others' halves. Safe
  /// because half `buf` of step k is written again by step k+2, after barrier
  /// k+1, which no rank passes before it finished reading step k; a last
  /// barrier keeps the next collective off a half still being read.
  template <class Write, class Read>
  void run_steps(const collective_header& h, const std::string& what, std::size_t n, std::size_t cap,
                 Write&& write, Read&& read) {
    begin(h, what);
    int buf = 0;
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap, buf ^= 1) {
      const std::size_t m = std::min(cap, n - off);
      write(off, m, buf);
      barrier();
      if (first) check_headers(h);
      first = false;
      if (m == 0) break; // nothing to move: the barrier still checked the headers
      read(off, m, buf);
    }
    barrier();
    what_ = nullptr;
  }
  /// Half `buf` (0 or 1) of local rank l's area, half_area_bytes() long and
  /// 64-byte aligned.
  char* area_half(int l, int buf) const { return data(l, buf); }
  std::size_t half_area_bytes() const { return half_area(); }

  /// Marks the segment aborted by this rank (its peers on the node stop waiting).
  void abort() noexcept {
    std::atomic_ref<std::int32_t> ab(seg_->ctl().aborted_by);
    std::int32_t none = -1;
    ab.compare_exchange_strong(none, rank_);
    std::atomic_ref<std::uint32_t>(seg_->ctl().generation).fetch_add(0); // a fence for the wake below
    futex_call(&seg_->ctl().generation, FUTEX_WAKE, INT32_MAX, nullptr);
  }

private:
  /// Elements [a, b) of a step of m: this rank's slice, the same cut on every
  /// rank, rounded to 64 B so that slices share no cache line.
  struct slice {
    std::size_t a, b;
  };
  /// `lead`: elements before the step's start back to the last 64 B boundary
  /// (in place, ranges start anywhere: the cuts then stay on cache lines).
  slice my_slice(std::size_t m, std::size_t esz, std::size_t lead = 0) const {
    const auto L = static_cast<std::size_t>(seg_->local_size()),
               me = static_cast<std::size_t>(seg_->local_rank());
    const std::size_t align = std::max<std::size_t>(64 / esz, 1);
    const std::size_t v = m + lead; // cut [0, v) from the boundary, then shift back
    const std::size_t per = (v + L - 1) / L;
    const std::size_t step = (per + align - 1) / align * align;
    const std::size_t a = std::min(v, step * me), b = std::min(v, a + step);
    return {a > lead ? a - lead : 0, b > lead ? b - lead : 0};
  }

  std::size_t half_area() const { return seg_->area_bytes() / 2 / 64 * 64; }
  /// Buffer `buf` (0 or 1) of local rank l's area, and of the result area.
  char* data(int l, int buf) const { return seg_->data(l) + static_cast<std::size_t>(buf) * half_area(); }
  char* result(int buf) const { return seg_->result() + static_cast<std::size_t>(buf) * half_area(); }

  /// out = src(0) op src(1) op ... op src(L-1) over k elements, in local-rank
  /// order (the same bits on every path), the last step scaled when scale != 1
  /// (the averaging, fused). `src(l)` gives local rank l's contribution.
  template <class Src>
  void reduce_areas(char* out, Src&& src, std::size_t k, dtype dt, reduce_fn fn, double scale) const {
    const int L = seg_->local_size();
    for (int l = 1; l < L; ++l) {
      const void* acc = l == 1 ? static_cast<const void*>(src(0)) : out;
      if (l + 1 == L && scale != 1.0)
        sum_scaled(out, acc, src(l), k, dt, scale);
      else
        fn(out, acc, src(l), k);
    }
  }

  /// One barrier per step, double-buffered. Per step k on every rank:
  ///   copy in k (area[k%2]); barrier k; copy out k-1 (result[(k-1)%2]);
  ///   reduce my slice of k into result[k%2];
  /// then a last barrier and the last copy-out. Why it is safe: area[k%2] is
  /// next written by copy-in k+2, after barrier k+1, which no rank reaches
  /// before finishing reduce k; result[k%2] is next written by reduce k+2,
  /// after barrier k+2, which no rank reaches before finishing copy-out k.
  void run_pipelined(const std::vector<fragment>& frags, dtype dt, op o, double scale,
                     const collective_header& h) {
    const std::size_t esz = size_of(dt), n = total_count(frags);
    const std::size_t cap = std::max<std::size_t>(step_bytes(false) / esz, 1);
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int me = seg_->local_rank();
    std::size_t prev_off = 0, prev_m = 0;
    int buf = 0, prev_buf = 0;
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap, buf ^= 1) {
      const std::size_t m = std::min(cap, n - off);
      const slice cut = my_slice(m, esz); // not a structured binding: lambdas capture these
      const std::size_t a = cut.a, b = cut.b;
      // My slice is read from my own memory below: only the others' parts go in.
      copy_in(frags, off, 0, a, esz, data(me, buf));
      copy_in(frags, off, b, m - b, esz, data(me, buf));
      barrier();
      if (first)
        check_headers(h);
      else
        copy_out(frags, prev_off, prev_m, esz, result(prev_buf));
      first = false;
      for_each_piece(frags, off + a, b - a, esz, [&](char* own, std::size_t at, std::size_t k) {
        const std::size_t byte = (a + at) * esz;
        reduce_areas(
            result(buf) + byte, [&](int l) -> const char* { return l == me ? own : data(l, buf) + byte; }, k,
            dt, fn, scale);
      });
      prev_off = off;
      prev_m = m;
      prev_buf = buf;
      if (m == 0) break; // nothing to reduce: the barriers still check headers
    }
    barrier();
    copy_out(frags, prev_off, prev_m, esz, result(prev_buf));
  }

  /// Three barriers per step (copy in; reduce; the leader's cross-node step;
  /// copy out), steps of the whole area: across nodes the TCP step dominates,
  /// and fewer, larger calls serve it best.
  void run_staged(const std::vector<fragment>& frags, dtype dt, op o, double scale,
                  const collective_header& h, const std::function<void(char*, std::size_t)>& between) {
    const std::size_t esz = size_of(dt), n = total_count(frags);
    const std::size_t cap = std::max<std::size_t>(step_bytes(true) / esz, 1);
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int me = seg_->local_rank();
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap) {
      const std::size_t m = std::min(cap, n - off);
      copy_in(frags, off, 0, m, esz, seg_->data(me));
      barrier();
      if (first) check_headers(h);
      first = false;
      const slice cut = my_slice(m, esz); // not a structured binding: lambdas capture these
      const std::size_t a = cut.a, b = cut.b;
      if (a < b)
        reduce_areas(
            seg_->result() + a * esz, [&](int l) -> const char* { return seg_->data(l) + a * esz; }, b - a,
            dt, fn, scale);
      barrier();
      if (me == 0) guard_leader([&] { between(seg_->result(), m); });
      barrier();
      copy_out(frags, off, m, esz, seg_->result());
      if (m == 0) break;
    }
  }

  /// Copies elements [off+at, off+at+k) of the fragments to `area` + at.
  static void copy_in(const std::vector<fragment>& frags, std::size_t off, std::size_t at, std::size_t k,
                      std::size_t esz, char* area) {
    for_each_piece(frags, off + at, k, esz, [&](char* p, std::size_t i, std::size_t c) {
      std::memcpy(area + (at + i) * esz, p, c * esz);
    });
  }

  /// Copies a step's result (elements [off, off+m)) back to the fragments.
  static void copy_out(const std::vector<fragment>& frags, std::size_t off, std::size_t m, std::size_t esz,
                       const char* res) {
    for_each_piece(frags, off, m, esz,
                   [&](char* p, std::size_t at, std::size_t k) { std::memcpy(p, res + at * esz, k * esz); });
  }

  /// A collective starts here: its deadline, its name for errors, and its
  /// header in this rank's line of the control block for the others to check.
  void begin(const collective_header& h, const std::string& what) {
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    what_ = &what;
    std::memcpy(&seg_->line(seg_->local_rank()).header, &h, sizeof h);
  }

  template <class F> void guard_leader(F&& f) {
    try {
      f();
    } catch (...) {
      abort();
      throw;
    }
  }

  void check_headers(const collective_header& mine) {
    for (int l = 0; l < seg_->local_size(); ++l) {
      collective_header theirs;
      std::memcpy(&theirs, &seg_->line(l).header, sizeof theirs);
      if (theirs == mine) continue;
      throw mine.mismatch(*what_, rank_, seg_->line(l).global, theirs);
    }
  }

  void barrier() {
    auto& c = seg_->ctl();
    const int L = seg_->local_size();
    ++epoch_;
    std::atomic_ref<std::uint64_t>(seg_->line(seg_->local_rank()).seq)
        .store(epoch_, std::memory_order_release);
    // A rank that aborted left the counts of an unfinished barrier behind: no
    // barrier may complete on them, so fail before arriving (every later
    // collective on this node throws; the aborting rank's group is poisoned).
    if (std::atomic_ref<std::int32_t>(c.aborted_by).load() >= 0) fail_aborted();
    std::atomic_ref<std::uint32_t> gen(c.generation), arrived(c.arrived);
    const std::uint32_t g = gen.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(L)) {
      arrived.store(0, std::memory_order_relaxed);
      gen.store(g + 1, std::memory_order_seq_cst);
      // Both sides seq_cst: either a sleeper's count is seen here, or it sees
      // the new generation (and FUTEX_WAIT refuses a changed word anyway). A
      // wake without sleepers is a syscall per barrier for nothing.
      if (std::atomic_ref<std::uint32_t>(c.sleepers).load(std::memory_order_seq_cst) != 0)
        futex_call(&c.generation, FUTEX_WAKE, INT32_MAX, nullptr);
      return;
    }
    // Spin ~20 us first: on an idle core the peer usually arrives within that
    // (the 4 KiB all-reduce), and a futex sleep plus wake costs ~10 us more.
    for (int i = 0; i < 400; ++i) {
      if (gen.load(std::memory_order_acquire) != g) return;
      pause();
    }
    // Then yield for up to ~100 us: on a busy host the peer may be waiting for
    // this very core, and a yield hands it over without the futex round trip.
    for (auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
         std::chrono::steady_clock::now() < until;) {
      if (gen.load(std::memory_order_acquire) != g) return;
      std::this_thread::yield();
    }
    // Pids are cheap to check (local syscalls), every 20 ms; the store is a
    // round trip, asked at the first check, then 20, 40, ... ms later, to
    // every 0.5 s: a rank that waits long here (a slow peer, a long agree
    // before a TCP collective) sends a few calls a second, not fifty.
    auto next_check = std::chrono::steady_clock::now();
    auto next_store = next_check;
    std::chrono::milliseconds store_every{20};
    while (gen.load(std::memory_order_acquire) == g) {
      const timespec ts{0, 2'000'000};
      std::atomic_ref<std::uint32_t> sleepers(c.sleepers);
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (gen.load(std::memory_order_seq_cst) == g) futex_call(&c.generation, FUTEX_WAIT, g, &ts);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (gen.load(std::memory_order_acquire) != g) return;
      const auto now = std::chrono::steady_clock::now();
      if (std::atomic_ref<std::int32_t>(c.aborted_by).load() >= 0) fail_aborted();
      if (now >= next_check) {
        const bool ask_store = now >= next_store;
        check_alive(ask_store);
        next_check = now + std::chrono::milliseconds(20);
        if (ask_store) {
          next_store = now + store_every;
          store_every = std::min(store_every * 2, std::chrono::milliseconds(500));
        }
      }
      if (now >= deadline_) fail_timeout();
    }
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  /// Local ranks that have not reached this rank's barrier yet.
  std::vector<int> missing() const {
    std::vector<int> out;
    for (int l = 0; l < seg_->local_size(); ++l)
      if (std::atomic_ref<std::uint64_t>(seg_->line(l).seq).load(std::memory_order_acquire) < epoch_)
        out.push_back(l);
    return out;
  }

public:
  /// Whether the rank of line `sl` has exited, judged by its pid: only when it
  /// lives in this process's PID namespace (`own_ns`), since a pid read across
  /// namespaces (containers sharing /dev/shm) names another process or none.
  /// Else the store's record of lost ranks is the only evidence.
  static bool peer_exited(const shm_rank_line& sl, std::uint64_t own_ns) {
    return sl.pidns != 0 && sl.pidns == own_ns && process_gone(sl.pid);
  }

private:
  static bool process_gone(int pid) {
    if (pid <= 0) return false;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A killed process its parent has not reaped yet is a zombie: gone too.
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(f, s);
    auto close = s.rfind(')');
    return close != std::string::npos && close + 2 < s.size() && (s[close + 2] == 'Z' || s[close + 2] == 'X');
  }

  void check_alive(bool ask_store = true) {
    for (int l : missing()) {
      const auto& sl = seg_->line(l);
      if (peer_exited(sl, own_pidns_)) {
        abort();
        throw error(error_kind::peer_lost,
                    *what_ + " failed: rank " + std::to_string(sl.global) + " (local rank " +
                        std::to_string(l) + ", pid " + std::to_string(sl.pid) + ") exited while rank " +
                        std::to_string(rank_) +
                        " waited for it at the node's shared-memory segment. Look at rank " +
                        std::to_string(sl.global) + "'s output first.",
                    sl.global);
      }
    }
    if (ask_store && find_lost_) {
      auto lost = find_lost_(std::chrono::milliseconds(0));
      if (lost.rank >= 0 || !lost.reason.empty()) { // no rank, with a reason: the launcher is gone
        abort();
        throw error(error_kind::peer_lost,
                    *what_ + " failed: " + lost.news() + " while rank " + std::to_string(rank_) +
                        " waited at the node's shared-memory segment.",
                    lost.rank);
      }
    }
  }

  [[noreturn]] void fail_aborted() {
    const int by = std::atomic_ref<std::int32_t>(seg_->ctl().aborted_by).load();
    check_alive(); // a dead rank is the better name
    // The aborting rank gave up waiting for a rank that is still missing here
    // too: blame that one, as a timeout (the caller's desync report follows).
    for (int l : missing())
      if (seg_->line(l).global != by) fail_timeout(by);
    if (find_lost_)
      if (auto lost = find_lost_(std::chrono::milliseconds(1000)); lost.rank >= 0 || !lost.reason.empty())
        throw error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                    *what_ + " failed: " + lost.news(), lost.rank);
    throw error(error_kind::peer_lost,
                *what_ + " failed: rank " + std::to_string(by) +
                    " failed inside this collective and left the node's shared-memory segment; look at its "
                    "output first.",
                by);
  }

  /// `gave_up_by`: the rank that aborted the collective, when not this one
  /// (this rank arrived later and found its abort; why it aborted, its own
  /// timeout or another failure, only its output says).
  [[noreturn]] void fail_timeout(int gave_up_by = -1) {
    abort();
    auto late = missing();
    int culprit = late.empty() ? -1 : seg_->line(late.front()).global;
    std::string names;
    for (int l : late)
      names += (names.empty() ? "" : ", ") + std::to_string(seg_->line(l).global);
    const std::string text =
        gave_up_by < 0 ? " timed out after " + std::to_string(timeout_.count()) + " ms waiting for rank(s) " +
                             names + " at the node's shared-memory segment"
                       : " failed: rank " + std::to_string(gave_up_by) +
                             " gave up on it (its own timeout or a failure: see its output) while rank(s) " +
                             names + " had not yet reached the node's shared-memory segment";
    throw error(error_kind::timeout,
                *what_ + text +
                    " (a rank stalled, is far behind, or skipped this collective; raise DDP_TIMEOUT if that "
                    "is expected).",
                culprit);
  }

  std::unique_ptr<shm_segment> seg_;
  lost_finder find_lost_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::size_t step_setting_ = 0; ///< 0: the defaults
  std::uint64_t own_pidns_ = own_pid_namespace();
  /// Barriers this rank has passed (one collective at a time: the group's
  /// worker thread, or the caller when it runs one inline).
  std::uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
  const std::string* what_ = nullptr;
  struct aligned_free {
    void operator()(char* p) const noexcept { ::operator delete (p, std::align_val_t{64}); }
  };
  std::unique_ptr<char[], aligned_free> scratch_; ///< run_in_place's reduced step
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_ALL_REDUCE_HPP
// ---- end ddp/detail/shm/all_reduce.hpp ----
// ---- begin ddp/detail/shm/arrays.hpp ----
// The node's shm arrays (process_group<gloo>::make_shm_array): each is a
// segment of its own (shm_segment, no result area), one area per local rank,
// every rank's array at the start of its area. Made collectively in the same
// order on every rank, so array k is the same segment on all of a node's
// ranks. The backend asks find() whether an all_reduce's memory lies in one:
// then it reduces in place (shm_all_reduce::run_in_place).
#ifndef DDP_DETAIL_SHM_ARRAYS_HPP
#define DDP_DETAIL_SHM_ARRAYS_HPP


#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class shm_array_registry {
public:
  /// An all_reduce's memory found in array `id`, `offset` bytes into this rank's area.
  struct hit {
    std::shared_ptr<shm_segment> seg; ///< held for the collective: the array cannot unmap under it
    std::uint32_t id = 0;
    std::size_t offset = 0;
  };

  /// The store key prefix and id of the next array (every rank counts alike).
  std::pair<std::string, std::uint32_t> next() {
    std::lock_guard lock(mu_);
    const std::uint32_t id = made_++;
    return {"ddp/shm/array" + std::to_string(id) + "/", id};
  }

  void add(std::uint32_t id, const std::shared_ptr<shm_segment>& seg) {
    std::lock_guard lock(mu_);
    std::erase_if(arrays_, [](const auto& a) { return a.second.expired(); });
    arrays_.emplace_back(id, seg);
  }

  /// Whether [p, p + bytes) lies in this rank's area of a live array.
  std::optional<hit> find(const void* p, std::size_t bytes) const {
    std::lock_guard lock(mu_);
    for (const auto& [id, weak] : arrays_)
      if (auto seg = weak.lock(); seg && seg->in_area(seg->local_rank(), p, bytes))
        return hit{seg, id,
                   static_cast<std::size_t>(static_cast<const char*>(p) - seg->data(seg->local_rank()))};
    return std::nullopt;
  }

private:
  mutable std::mutex mu_;
  std::uint32_t made_ = 0;
  std::vector<std::pair<std::uint32_t, std::weak_ptr<shm_segment>>> arrays_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_ARRAYS_HPP
// ---- end ddp/detail/shm/arrays.hpp ----
// ---- begin ddp/detail/shm/block_collectives.hpp ----
// reduce_scatter and all_gather among the ranks of one node through their
// shared segment, in the pipelined steps of the node's all-reduce
// (detail/shm/all_reduce.hpp): per step every rank copies its part into one
// half of its area, meets the others at one barrier, and reads what it needs
// straight from their areas; the next step uses the other half
// (shm_all_reduce::run_steps drives the steps and their barriers).
// Both give the same bits as the TCP path: blocks reduced in rank order, then
// the averaging.
#ifndef DDP_DETAIL_SHM_BLOCK_COLLECTIVES_HPP
#define DDP_DETAIL_SHM_BLOCK_COLLECTIVES_HPP


#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Elements per part when a half area of `half_bytes` holds `parts` of them:
/// whole cache lines where they fit, so that each reader's part starts on a
/// line; with many ranks and a small area (DDP_SHM_AREA_BYTES) fewer, never
/// past the half (at least 2 KiB: one 8-byte element for each of 256 ranks).
constexpr std::size_t shm_part_elements(std::size_t half_bytes, std::size_t parts, std::size_t esz) {
  const std::size_t line = std::max<std::size_t>(64 / esz, 1);
  const std::size_t k = half_bytes / parts / esz;
  return k >= line ? k / line * line : std::max<std::size_t>(k, 1);
}

/// Block l of `in` (n elements each, one per local rank) reduced over the
/// node's ranks into local rank l's `out`. One node only: local rank is rank.
/// `out` may be this rank's own block of `in`.
inline void shm_reduce_scatter(shm_all_reduce& node, const void* in, void* out, std::size_t n, dtype dt, op o,
                               const collective_header& h, const std::string& what) {
  const int L = node.segment().local_size(), me = node.segment().local_rank();
  const std::size_t esz = size_of(dt), parts = static_cast<std::size_t>(L);
  const std::size_t cap = shm_part_elements(node.half_area_bytes(), parts, esz);
  const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
  const auto* blocks = static_cast<const char*>(in);
  auto* res = static_cast<char*>(out);
  node.run_steps(
      h, what, n, cap,
      [&](std::size_t off, std::size_t m, int buf) {
        // Every block's part, this rank's own too: `out` may be that block.
        char* mine = node.area_half(me, buf);
        for (std::size_t p = 0; p < parts && m; ++p) // m == 0: `in` may be null
          std::memcpy(mine + p * cap * esz, blocks + (p * n + off) * esz, m * esz);
      },
      [&](std::size_t off, std::size_t m, int buf) {
        auto part = [&](int l) -> const char* {
          return node.area_half(l, buf) + static_cast<std::size_t>(me) * cap * esz;
        };
        char* dst = res + off * esz;
        if (L == 1) std::memcpy(dst, part(0), m * esz);
        for (int l = 1; l < L; ++l)
          fn(dst, l == 1 ? static_cast<const void*>(part(0)) : dst, part(l), m);
        if (o == op::avg) scale_in_place(dst, m, dt, 1.0 / L);
      });
}

/// This rank's `in` (n elements) into block l of every local rank l's `out`
/// (L blocks of n). One node only. `in` may be this rank's own block of `out`.
inline void shm_all_gather(shm_all_reduce& node, const void* in, void* out, std::size_t n, dtype dt,
                           const collective_header& h, const std::string& what) {
  const int L = node.segment().local_size(), me = node.segment().local_rank();
  const std::size_t esz = size_of(dt);
  const std::size_t cap = shm_part_elements(node.half_area_bytes(), 1, esz);
  const auto* src = static_cast<const char*>(in);
  auto* blocks = static_cast<char*>(out);
  node.run_steps(
      h, what, n, cap,
      [&](std::size_t off, std::size_t m, int buf) {
        if (m) std::memcpy(node.area_half(me, buf), src + off * esz, m * esz); // n == 0: `in` may be null
      },
      [&](std::size_t off, std::size_t m, int buf) {
        // Own block from the area too (in place, `in` is that block); the
        // others first, so that the own copy reads a line still in cache.
        for (int i = 1; i <= L; ++i) {
          const int l = (me + i) % L;
          std::memcpy(blocks + (static_cast<std::size_t>(l) * n + off) * esz, node.area_half(l, buf),
                      m * esz);
        }
      });
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_BLOCK_COLLECTIVES_HPP
// ---- end ddp/detail/shm/block_collectives.hpp ----

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_shm_path {
public:
  /// The header round alone (across nodes it runs over TCP first).
  using exchange_function = std::function<void(const collective_header& h, const std::string& what)>;
  /// The communicator's blame for a failure on the wire: closes its connections, then throws.
  using fail_io_function = std::function<void(const std::string& what, const std::string& gloo_text)>;

  /// `knobs`, `waits` and `scratch` are the communicator's, which outlives this.
  gloo_shm_path(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<tcp_store> store,
                gloo_knobs& knobs, gloo_waits& waits, std::vector<char>& scratch, exchange_function exchange,
                fail_io_function fail_io)
      : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)), knobs_(knobs), waits_(waits),
        scratch_(scratch), exchange_(std::move(exchange)), fail_io_(std::move(fail_io)) {}

  /// The node's all-reduce; nullptr while the path is off.
  shm_all_reduce* get() const { return shm_.get(); }
  int nodes() const { return nnodes_; }

  /// Whether the job's layout allows shared memory at all: several ranks per
  /// node, whole nodes, at most 256 ranks on one.
  static bool layout_fits(const ddp::topology& t) {
    const int L = t.local_world_size;
    return L > 1 && L <= 256 && t.world_size > 1 && t.world_size % L == 0;
  }

  /// Bytes per local rank's area from DDP_SHM_AREA_BYTES; empty when it is
  /// not set.
  std::optional<std::int64_t> area_bytes_from_env() const {
    constexpr std::int64_t lo = 4096, hi = std::int64_t{1} << 30;
    return env_int("DDP_SHM_AREA_BYTES", lo, hi);
  }

  /// Whether every rank can and wants to reduce through shared memory: DDP_SHM
  /// not 0, more than one rank per node, and the launcher's layout (node_rank,
  /// local_rank: never the hostname) contiguous, as ddprun and torchrun lay
  /// ranks out. A vote in the store, so that all ranks take the same path.
  bool vote(const rendezvous& rv) {
    const auto& t = rv.topo;
    const int L = t.local_world_size;
    bool want = getenv_str("DDP_SHM").value_or("1") != "0" && layout_fits(t) && t.local_rank == rank_ % L &&
                t.node_rank == rank_ / L;
    if (!want) store_->add("ddp/shm/no", 1);
    if (store_->add("ddp/shm/votes", 1) == size_)
      store_->set("ddp/shm/decision", store_->add("ddp/shm/no", 0) == 0 ? "on" : "off");
    store_->wait({"ddp/shm/decision"}, timeout_);
    return store_->get("ddp/shm/decision") == "on";
  }

  /// Maps the node's segment; across nodes also connects the nodes' leaders
  /// (local rank 0 of each) in a Gloo context of their own, which it returns
  /// (nullptr on the other ranks, or when the segment could not be made).
  std::shared_ptr<gloo_mesh_context> setup(const rendezvous& rv, gloo_blame& blame) {
    const auto& t = rv.topo;
    std::shared_ptr<gloo_mesh_context> leaders;
    // The area: on one node the pipelined path needs two of its steps (512 KiB),
    // across nodes the staged path fills it whole (4 MiB). Whole pages: every
    // area, the result area too, stays aligned for any dtype.
    const std::size_t area_default = size_ == t.local_world_size ? 2 * shm_all_reduce::default_step_bytes
                                                                 : shm_all_reduce::default_area_bytes;
    const std::size_t area =
        (static_cast<std::size_t>(area_bytes_from_env().value_or(static_cast<std::int64_t>(area_default))) +
         4095) /
        4096 * 4096;
    const shm_setup a{.token = rv.token,
                      .store_where = t.master_addr + ":" + std::to_string(t.store_port),
                      .rank = rank_,
                      .world_size = size_,
                      .node_rank = t.node_rank,
                      .local_rank = t.local_rank,
                      .local_size = t.local_world_size,
                      .area_bytes = area,
                      .timeout = timeout_};
    shm_args_ = a;
    shm_setup_failure failed;
    auto seg = shm_segment::setup(*store_, a, failed);
    if (!seg) {
      // Every rank got the same outcome: all stay on TCP, or all throw.
      if (failed.kind == error_kind::mismatch)
        throw error(error_kind::mismatch,
                    "rank " + std::to_string(rank_) + ": setting up the node's shared-memory segment: rank " +
                        std::to_string(failed.rank) + " " + failed.message,
                    failed.rank);
      if (rank_ == 0) // one warning for the job, not one per rank
        log_line(
            "rank 0",
            "warning: the shared-memory all-reduce is off, every rank reduces over TCP (slower): rank " +
                std::to_string(failed.rank) + " " + failed.message +
                ". Enlarge /dev/shm (each node needs (LOCAL_WORLD_SIZE + 1) x DDP_SHM_AREA_BYTES, "
                "default 512 KiB on one node, 4 MiB across nodes, plus a page) or lower DDP_SHM_AREA_BYTES; "
                "DDP_SHM=0 silences this.");
      return leaders;
    }
    nnodes_ = size_ / t.local_world_size;
    if (nnodes_ > 1 && t.local_rank == 0) {
      auto device =
          make_gloo_device({rv.topo.rank, rv.topo.local_rank, rv.topo.master_addr, rv.topo.master_port});
      auto ctx = std::make_shared<gloo_mesh_context>(t.node_rank, nnodes_, timeout_);
      gloo_store_adapter adapter(*store_, "ddp/gloo-leaders/");
      try {
        ctx->connect(adapter, device, gloo_mesh_keys::per_pair, rv.interrupt.get(), t.local_world_size);
      } catch (const ddp::error&) { throw; } catch (const std::exception& e) {
        // Gloo's ranks here are node ranks: the leader of node N is rank N * LOCAL_WORLD_SIZE.
        blame.mesh("rank " + std::to_string(rank_) + ", leader of node " + std::to_string(t.node_rank) +
                       ": Gloo could not connect to the other nodes' leaders",
                   "(Gloo's \"rank N\" is node N's leader; the store's ranks are global) ", e);
      }
      leaders = std::move(ctx);
    }
    auto find_lost = [store = store_](std::chrono::milliseconds grace) -> shm_all_reduce::lost_peer {
      // check() first: one round trip, no wait, on the common path where nobody is lost.
      // A store that fails to answer is news too: wait_for_lost_rank names whom that
      // means (rank 0 cut off, or the store's host unreachable), as the TCP path does.
      try {
        if (grace.count() == 0 && !store->check({store_lost_key})) return {};
      } catch (const ddp::error&) {}
      auto l = store->wait_for_lost_rank(grace);
      return {l.rank, l.reason, l.silent};
    };
    shm_ = std::make_unique<shm_all_reduce>(std::move(seg), std::move(find_lost), rank_, timeout_);
    return leaders;
  }

  /// All-reduce through the node's segment; across nodes the leaders reduce
  /// each step over Gloo (on `leaders`) between the node's two barriers. Across nodes the
  /// header round (`exchange(h, what)`) runs first over TCP, so ranks of different nodes that
  /// disagree fail with mismatch as on the TCP path.
  void run(collective_header h, const std::string& what, const std::vector<fragment>& frags, dtype dt, op o,
           double scale, const std::shared_ptr<gloo_mesh_context>& leaders) {
    h.shm_shape = shm_->step_bytes(nnodes_ > 1); // the steps shape the barriers: ranks must agree on them
    if (nnodes_ == 1) h.piece = 0;               // no ring on one node: its piece does not matter
    guard(what, [&] {
      if (nnodes_ == 1) {
        if (auto in = in_array(frags, dt)) {
          ++knobs_.in_place_runs;
          h.in_place = 1;
          h.root = static_cast<std::int32_t>(in->id);
          h.shm_shape = in->offset;
          shm_->run_in_place(*in->seg, in->offset, total_count(frags), dt, o, scale, h, what);
          return;
        }
        shm_->run(frags, dt, o, scale, h, what);
        return;
      }
      exchange_(h, what);
      const op node_op = o == op::avg ? op::sum : o;
      std::uint32_t sub = 0;
      shm_->run(frags, dt, node_op, 1.0, h, what, [&, this](char* res, std::size_t m) {
        if (m == 0) return;
        // Around ddp's ring between the leaders, the scaling fused in (sums).
        const std::vector<fragment> step{{res, m}};
        const bool fuse = node_op == op::sum;
        fragment_ring(leaders, waits_, step, dt, scratch_, h.piece, node_op)
            .run(h.tag * 4096u + (sub++ % 4096u), fuse ? scale : 1.0, timeout_);
        if (!fuse && scale != 1.0) scale_in_place(res, m, dt, scale);
      });
    });
  }

  /// reduce_scatter and all_gather through the node's segment
  /// (detail/shm/block_collectives.hpp); one node only (`nodes() == 1`).
  /// `h.shm_shape` carries the half area, which shapes the steps: a rank that runs
  /// the collective over TCP meanwhile (use_shm(false)) fails the header check.
  void reduce_scatter(collective_header h, const std::string& what, const void* in, void* out, std::size_t n,
                      dtype dt, op o) {
    h.shm_shape = shm_->half_area_bytes();
    ++knobs_.shm_block_runs;
    guard(what, [&] { shm_reduce_scatter(*shm_, in, out, n, dt, o, h, what); });
  }
  void all_gather(collective_header h, const std::string& what, const void* in, void* out, std::size_t n,
                  dtype dt) {
    h.shm_shape = shm_->half_area_bytes();
    ++knobs_.shm_block_runs;
    guard(what, [&] { shm_all_gather(*shm_, in, out, n, dt, h, what); });
  }

  /// Runs `f`, a step in the node's segment. On failure the node's other ranks
  /// stop waiting on this one, and a timeout gets the same lost-rank search and
  /// desync report as one over TCP (`fail_io`), so both paths blame alike.
  template <class F> void guard(const std::string& what, F&& f) {
    try {
      f();
    } catch (const ddp::error& e) {
      shm_->abort();
      if (e.kind() == error_kind::timeout) fail_io_(what, std::string("Timed out: ") + e.what());
      throw;
    } catch (...) {
      shm_->abort();
      throw;
    }
  }

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  bool is_array_memory(const void* p, std::size_t bytes) const {
    return shm_ && knobs_.shm_on && nnodes_ == 1 && arrays_.find(p, bytes).has_value();
  }

  /// gloo_communicator::make_shm_array; `in_queue(n, dtype, body)` runs
  /// `body(what)` in the group's queue and waits for it.
  /// Not a template: `dt` and `elem_size` are all it needs of the element type.
  template <class InQueue>
  shm_memory make_array(std::size_t n, dtype dt, std::size_t elem_size, InQueue&& in_queue) {
    const std::string what =
        "make_shm_array<" + std::string(ddp::to_string(dt)) + ">(" + std::to_string(n) + ")";
    const std::size_t L = shm_ ? static_cast<std::size_t>(shm_->segment().local_size()) : 1;
    // Every local rank's area in one mapping, whose size must fit size_t and off_t.
    if (n > (std::size_t{1} << 60) / elem_size / L)
      throw error(error_kind::config, "rank " + std::to_string(rank_) + ": " + what +
                                          ": too many elements for one node's shared memory (" +
                                          std::to_string(L) + " local ranks); make several smaller arrays");
    const std::size_t bytes = std::max<std::size_t>(n * elem_size, 1);
    std::shared_ptr<shm_segment> shared;
    if (shm_ && nnodes_ == 1) {
      // In the queue: its store calls then never contend with a running
      // collective's (a barrier's liveness checks share the store client).
      // The outcome is shared, not on this stack: wait() may give up first.
      struct outcome {
        std::shared_ptr<shm_segment> seg;
        std::exception_ptr mismatch;
      };
      auto out = std::make_shared<outcome>();
      in_queue(n, dt, [this, out, bytes](const std::string& where) {
        out->seg = setup_array(bytes, where, out->mismatch);
      });
      if (out->mismatch) std::rethrow_exception(out->mismatch); // the group lives on: every rank got it
      shared = std::move(out->seg);
    }
    if (shared) {
      void* p = shared->data(shared->local_rank());
      return {p, std::move(shared), true};
    }
    try {
      return private_shm_memory(bytes);
    } catch (const std::bad_alloc&) {
      throw error(error_kind::config, "rank " + std::to_string(rank_) + ": " + what + ": cannot allocate " +
                                          std::to_string(bytes) + " B of private memory");
    }
  }

private:
  /// make_shm_array's collective part (on the queue's thread): the node's
  /// segment for the array, or nullptr when it could not be made (then every
  /// rank uses private memory; rank 0 says why). Ranks that asked for different
  /// sizes get `mismatch` set, on every rank. A timeout or a lost rank throws:
  /// the arrays' count would differ between ranks, so the group is poisoned.
  std::shared_ptr<shm_segment> setup_array(std::size_t bytes, const std::string& what,
                                           std::exception_ptr& mismatch) {
    auto [key, id] = arrays_.next();
    shm_setup a = shm_args_;
    a.key = key;
    a.result_area = false;
    // Areas of whole cache lines, not pages: ranks whose sizes differ by more
    // than 64 B get segments of different sizes, which is how they are caught.
    a.area_bytes = (bytes + 63) / 64 * 64;
    a.size_mismatch_hint =
        "the node's ranks asked for different sizes (" + what +
        " here): call make_shm_array with the same element count and type on every rank, in "
        "the same order.";
    shm_setup_failure failed;
    std::unique_ptr<shm_segment> seg;
    try {
      seg = shm_segment::setup(*store_, a, failed);
    } catch (const error& e) {
      // A rank that failed: its name and reason are the whole story.
      if (e.kind() == error_kind::peer_lost)
        throw error(e.kind(), what + " failed: " + std::string(e.message()), e.rank());
      const std::string text = what +
                               " is collective: every rank of the group calls it, in the same order. " +
                               std::string(e.message());
      // A rank that skipped the call, or is far behind: the lost-rank search
      // and the desync report name it, as for a collective that timed out.
      if (e.kind() == error_kind::timeout) fail_io_(what, "Timed out: " + text);
      throw error(e.kind(), text, e.rank());
    }
    if (seg) {
      std::shared_ptr<shm_segment> shared(std::move(seg));
      arrays_.add(id, shared);
      return shared;
    }
    if (failed.kind == error_kind::mismatch) {
      mismatch = std::make_exception_ptr(error(error_kind::mismatch,
                                               "rank " + std::to_string(rank_) + ": " + what + ": rank " +
                                                   std::to_string(failed.rank) + " " + failed.message,
                                               failed.rank));
      return nullptr;
    }
    if (rank_ == 0)
      log_line("rank 0", "warning: " + what +
                             " got private memory on every rank, so all-reduces of it copy "
                             "through the node's segment as usual (slower): rank " +
                             std::to_string(failed.rank) + " " + failed.message +
                             ". If /dev/shm is full, enlarge it: each node needs LOCAL_WORLD_SIZE x the "
                             "array's bytes (docker run --shm-size=...).");
    return nullptr;
  }

  /// Where the fragments, back to back in memory, lie in a shm array of this
  /// rank's: an all_reduce of them runs in place.
  std::optional<shm_array_registry::hit> in_array(const std::vector<fragment>& frags, dtype dt) const {
    const std::size_t esz = size_of(dt);
    if (frags.empty() || total_count(frags) == 0) return std::nullopt;
    for (std::size_t i = 1; i < frags.size(); ++i)
      if (static_cast<const char*>(frags[i - 1].data) + frags[i - 1].count * esz != frags[i].data)
        return std::nullopt;
    return arrays_.find(frags.front().data, total_count(frags) * esz);
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  gloo_knobs& knobs_;
  gloo_waits& waits_;
  std::vector<char>& scratch_;
  exchange_function exchange_;
  fail_io_function fail_io_;
  std::unique_ptr<shm_all_reduce> shm_;
  shm_setup shm_args_;        ///< how shm_'s segment was set up: shm arrays start from it
  shm_array_registry arrays_; ///< make_shm_array's segments, for in-place all-reduces
  int nnodes_ = 1;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_SHM_PATH_HPP
// ---- end ddp/detail/gloo/shm_path.hpp ----

#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_communicator_impl {
public:
  explicit gloo_communicator_impl(const rendezvous& rv)
      : rank_(rv.topo.rank), size_(rv.topo.world_size), timeout_(rv.timeout), store_(rv.store),
        shm_path_(
            rank_, size_, timeout_, store_, knobs_, waits_, scratch_,
            [this](const collective_header& h, const std::string& what) { mesh_.exchange_header(h, what); },
            [this](const std::string& what, const std::string& gloo_text) { fail_io(what, gloo_text); }),
        mesh_(rank_, size_, timeout_, ctx_, waits_, scratch_,
              [this](const collective_header& h, const std::string& what) {
                // On one node with shm every collective first compares headers in the
                // segment, where an all_reduce would wait (see shm_all_reduce::agree).
                if (shm_path_.get() && shm_path_.nodes() == 1)
                  shm_path_.guard(what, [&] { shm_path_.get()->agree(h, what); });
              }),
        queue_(rank_, timeout_), blame_(rank_, size_, timeout_, store_, queue_) {
    ignore_sigpipe_if_default();
    auto device =
        make_gloo_device({rv.topo.rank, rv.topo.local_rank, rv.topo.master_addr, rv.topo.master_port});
    auto ctx = std::make_shared<gloo_mesh_context>(rank_, size_, timeout_);
    ctx->batch_loop = gloo_loop_batch_wanted(rv.topo.nnodes);
    try {
      if (store_) {
        gloo_store_adapter adapter(*store_, "ddp/gloo/");
        ctx->connect(adapter, device, gloo_mesh_keys::per_pair, rv.interrupt.get());
      } else {
        ::gloo::rendezvous::FileStore files(rv.file_path);
        ::gloo::rendezvous::PrefixStore prefixed(rv.token.empty() ? "ddp" : "ddp-" + rv.token, files);
        ctx->connect(prefixed, device, gloo_mesh_keys::per_rank);
      }
    } catch (const ddp::error&) { throw; } catch (const std::exception& e) {
      blame_.mesh("rank " + std::to_string(rank_) + ": Gloo could not connect to its peers", "", e);
    }
    ctx_ = std::move(ctx);
    if (store_ && shm_path_.vote(rv)) leaders_ = shm_path_.setup(rv, blame_);
  }

  /// Descriptors a rank holds at its peak: one per peer (Debian's Gloo swaps
  /// each pair's listener for its connection, never both at once), its
  /// device's epoll and the eventfd that wakes it (gloo_loop_ticker); where the node's ranks can share memory
  /// (gloo_shm_path::layout_fits; DDP_SHM aside), the segment's two and, on a node leader, the
  /// leaders' mesh across nodes (checked:
  /// docs/design-notes.md, "Note [open files]").
  static long open_files(const ddp::topology& t) {
    long n = (t.world_size - 1) + 2;
    if (gloo_shm_path::layout_fits(t)) {
      n += 2;
      const int nodes = t.world_size / t.local_world_size;
      if (nodes > 1 && t.local_rank == 0) n += (nodes - 1) + 2;
    }
    return n;
  }

  gloo_communicator_impl(const gloo_communicator_impl&) = delete;
  gloo_communicator_impl& operator=(const gloo_communicator_impl&) = delete;
  ~gloo_communicator_impl() { queue_.stop(); } // the worker stops before the context goes

  /// True when all_reduce goes through the node's shared-memory segment (see
  /// detail/shm/all_reduce.hpp): on by default when ranks share a node, DDP_SHM=0 off.
  bool shm_active() const { return shm_path_.get() != nullptr; }
  /// The shm path's step size (like set_ring_piece_bytes: tests make it small
  /// to cross step ends; same value on every rank, before collectives); 0
  /// restores the defaults (256 KiB within a node, the whole area across nodes).
  void set_shm_step_bytes(std::size_t bytes) {
    if (auto* shm = shm_path_.get()) shm->set_step_bytes(bytes);
  }
  /// Benches compare the two paths in one run: false sends all_reduce,
  /// reduce_scatter and all_gather over TCP again. Every rank must switch at
  /// the same point of its collective sequence.
  void use_shm(bool on) { knobs_.shm_on = on; }
  std::size_t shm_step_bytes() const {
    return shm_path_.get() ? shm_path_.get()->step_bytes(shm_path_.nodes() > 1) : 0;
  }
  /// The shm segment's name (tests look for it in /dev/shm); empty when off.
  std::string shm_segment_name() const {
    return shm_path_.get() ? shm_path_.get()->segment().name() : std::string();
  }

  /// All-reduces run in place in a shm array so far (tests check the path taken).
  std::uint64_t shm_in_place_runs() const { return knobs_.in_place_runs.load(); }
  /// reduce_scatters and all_gathers run through the node's segment so far (tests).
  std::uint64_t shm_block_runs() const { return knobs_.shm_block_runs.load(); }

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  bool is_shm_array_memory(const void* p, std::size_t bytes) const {
    return shm_path_.is_array_memory(p, bytes);
  }

  /// gloo_communicator::make_shm_array, before the memory is typed.
  shm_memory make_shm_array(std::size_t n, dtype dt, std::size_t elem_size) {
    auto in_queue = [this](std::size_t count, dtype t, auto body) {
      submit("make_shm_array", count, t, true,
             [body = std::move(body)](std::uint32_t, const std::string& where) { body(where); })
          .wait();
    };
    return shm_path_.make_array(n, dt, elem_size, in_queue);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::exception_ptr poisoned() const { return queue_.poisoned(); }
  void drain() { queue_.drain(); }

  /// For a rank leaving on an error of its own (process_group::abort, or its
  /// teardown on an escaping exception), from any thread: what is queued fails
  /// with `reason`, every connection fails, so peers blocked on this rank fail
  /// now, not at their timeout, and a collective running here is interrupted
  /// (it fails with `reason` too; see interrupt_connections). Returns without
  /// waiting for it.
  void abort_for_failure(const std::string& reason) {
    poison_for_failure(reason);
    interrupt_connections(true);
  }

  /// The first half of abort_for_failure: collectives are refused with
  /// `reason` from now on, and one running now that fails, fails with it,
  /// but nothing is interrupted yet. process_group calls it before it tells
  /// the store, whose news makes the peers close their connections.
  void poison_for_failure(const std::string& reason) {
    std::lock_guard lock(contexts_mu_); // against fail_for_peer: one of them is the group's error
    queue_.abort(std::make_exception_ptr(error(error_kind::backend, reason, rank_)));
  }

  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it, and this rank's TCP
  /// connections close, so a collective waiting here ends now even when it
  /// waits on some other rank (Gloo tells a closed connection only to the
  /// operations posted on it). The node's segment is left alone: its waits
  /// read the store themselves, and aborting it would name this rank.
  void fail_for_peer(const lost_rank& lost) {
    auto why = std::make_exception_ptr(error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                                             "rank " + std::to_string(rank_) + ": " + lost_news(lost) +
                                                 "; every collective of this group fails from here on (this "
                                                 "rank heard it from the rendezvous store)",
                                             lost.rank));
    {
      std::lock_guard lock(contexts_mu_);
      if (queue_.poisoned()) return; // the group failed already: its error stands
      peer_failure_ = lost;
      queue_.abort(why);
    }
    queue_.recorder().note(lost_news(lost) + " (the store reported it)");
    interrupt_connections(false);
  }

  /// The largest message ddp's fragment ring and chain broadcast send (1 MiB
  /// by default; the broadcast's piece size made no difference:
  /// docs/performance.md, Collectives). Like
  /// Gloo's maxSegmentSize: tests make it small so that small tensors cross
  /// piece boundaries. Every rank must use the same value, set before the
  /// collectives it is for.
  void set_ring_piece_bytes(std::size_t bytes) { knobs_.set_ring_piece_bytes(rank_, bytes); }
  std::size_t ring_piece_bytes() const { return knobs_.ring_piece_bytes; }

  /// Small tensors (up to header_round::inline_cap: 64 KiB at 2-4 ranks) travel with the header:
  /// one round, and every rank reduces all contributions in rank order, so
  /// every rank gets the same bits. Larger ones go around ddp's ring (as
  /// buckets do), the averaging fused into its last reduction step, on buffers
  /// an abort can interrupt. It was Gloo's ring below 16 MiB, which was no
  /// faster (docs/performance.md, Collectives).
  work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      throw error(error_kind::config, "op::avg needs a floating-point tensor, got " +
                                          std::string(to_string(dt)) + ": use op::sum and divide yourself");
    return submit("all_reduce", n, dt, blocking,
                  [=, this, piece = knobs_.ring_piece_bytes,
                   shm = shm_path_.get() && knobs_.shm_on](std::uint32_t tag, const std::string& what) {
                    if (size_ == 1) return;
                    auto h = gloo_collectives::header(collective_kind::all_reduce, tag, n, dt);
                    h.reduce = static_cast<std::uint8_t>(o);
                    h.piece = piece;
                    if (shm) {
                      std::vector<fragment> whole{{data, n}};
                      shm_path_.run(h, what, whole, dt, o, o == op::avg ? 1.0 / size_ : 1.0, leaders_);
                      return;
                    }
                    mesh_.all_reduce(h, what, data, n, dt, o);
                  });
  }

  /// Sums a bucket given as fragments (each tensor where it lies) across ranks,
  /// then multiplies it by `scale`: no packing, and the averaging fused in.
  work all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale, bool blocking = false) {
    if (!is_floating(dt) && scale != 1.0)
      throw error(error_kind::config,
                  "scaling needs a floating-point tensor, got " + std::string(to_string(dt)));
    const std::size_t n = total_count(frags);
    // The piece size as of submission: a later set_ring_piece_bytes() does not
    // reach a collective already queued.
    return submit("all_reduce", n, dt, blocking,
                  [=, this, frags = std::move(frags), piece = knobs_.ring_piece_bytes,
                   shm = shm_path_.get() && knobs_.shm_on](std::uint32_t tag, const std::string& what) {
                    auto h = gloo_collectives::header(collective_kind::all_reduce, tag, n, dt);
                    h.reduce = static_cast<std::uint8_t>(op::sum);
                    h.piece = piece;
                    if (shm && size_ > 1)
                      shm_path_.run(h, what, frags, dt, op::sum, scale, leaders_);
                    else
                      mesh_.all_reduce_fragments(h, what, frags, dt, scale);
                  });
  }

  /// Small tensors travel with the header; larger ones down ddp's chain
  /// (detail/gloo/chain.hpp), once the headers agree.
  work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking,
                  [=, this, piece = knobs_.ring_piece_bytes](std::uint32_t tag, const std::string& what) {
                    mesh_.broadcast(tag, what, data, n, dt, root, piece);
                  });
  }

  /// On one node with shm: through the node's segment
  /// (detail/shm/block_collectives.hpp). Else small tensors travel with the
  /// header, larger ones in ddp's block exchange (detail/gloo/exchange.hpp).
  /// `in` may be this rank's own block of `out`.
  work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false) {
    return submit("all_gather", n, dt, blocking,
                  [=, this, shm = one_node_shm()](std::uint32_t tag, const std::string& what) {
                    if (shm) {
                      shm_path_.all_gather(gloo_collectives::header(collective_kind::all_gather, tag, n, dt),
                                           what, in, out, n, dt);
                      return;
                    }
                    mesh_.all_gather(tag, what, in, out, n, dt);
                  });
  }

  /// Block r of `in` (n elements each) is reduced across ranks into rank r's `out`.
  /// On one node with shm through the node's segment; else each block goes to
  /// its owner (with the header when small, else in ddp's block exchange,
  /// detail/gloo/exchange.hpp). Either way the owner reduces the blocks in rank
  /// order. `out` may be this rank's own block of `in`.
  work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      throw error(error_kind::config,
                  "op::avg needs a floating-point tensor, got " + std::string(to_string(dt)));
    return submit("reduce_scatter", n, dt, blocking,
                  [=, this, shm = one_node_shm()](std::uint32_t tag, const std::string& what) {
                    if (shm) {
                      auto h = gloo_collectives::header(collective_kind::reduce_scatter, tag, n, dt);
                      h.reduce = static_cast<std::uint8_t>(o);
                      shm_path_.reduce_scatter(h, what, in, out, n, dt, o);
                      return;
                    }
                    mesh_.reduce_scatter(tag, what, in, out, n, dt, o);
                  });
  }

  /// The header round is the barrier: no rank leaves it before every rank's
  /// header arrived.
  work barrier(bool blocking = false) {
    return submit("barrier", 0, dtype::u8, blocking, [this](std::uint32_t tag, const std::string& what) {
      if (size_ == 1) return;
      mesh_.exchange_header(gloo_collectives::header(collective_kind::barrier, tag, 0, dtype::u8), what);
    });
  }

private:
  /// Whether reduce_scatter and all_gather take the node's segment: the whole
  /// group on one node, shm on (as of submission, like the piece size).
  bool one_node_shm() const {
    return shm_path_.get() && knobs_.shm_on && shm_path_.nodes() == 1 && size_ > 1;
  }

  /// What a collective does: body(tag, what).
  using body_type = std::function<void(std::uint32_t tag, const std::string& what)>;

  /// Queues `body(tag, what)`: each collective gets a fresh Gloo tag, and any
  /// failure closes every connection (peers fail at once) and poisons the group.
  work submit(const char* name, std::size_t n, dtype dt, bool blocking, body_type body) {
    return queue_.submit(
        name, n, dt, blocking, [this, body = std::move(body)](const std::string& what, work_state&) {
          const std::uint32_t tag = next_tag_++;
          try {
            body(tag, what);
          } catch (...) {
            blame_.collective(
                what, std::current_exception(), [this](bool with_segment) { close_all(with_segment); },
                [this] { return reported_peer_failure(); });
          }
        });
  }

  /// A collective failed on the wire (see gloo_blame::io).
  [[noreturn]] void fail_io(const std::string& what, const std::string& gloo_text) {
    close_all(); // peers blocked on us fail now instead of at their timeout
    blame_.io(what, gloo_text);
  }

  void close_all(bool with_segment = true) {
    if (shm_path_.get() && with_segment)
      shm_path_.get()->abort(); // the node's ranks waiting in the segment fail now too, as over TCP
    std::lock_guard lock(contexts_mu_);
    ctx_.reset();
    leaders_.reset();
  }

  /// Fails every connection of this rank at once, from any thread, while a
  /// collective may be running on the worker (gloo_mesh_context::
  /// fail_connections). A transfer already under way is not queued any more:
  /// the collectives' waits are then ended through waits_ (detail/gloo/waits.hpp),
  /// which holds every buffer they use.
  /// `with_segment`: the node's segment is aborted too (its waiters fail,
  /// naming this rank as the one that failed).
  void interrupt_connections(bool with_segment) noexcept {
    if (shm_path_.get() && with_segment) shm_path_.get()->abort();
    std::shared_ptr<gloo_mesh_context> ctx, leaders;
    {
      std::lock_guard lock(contexts_mu_);
      ctx = ctx_;
      leaders = leaders_;
    }
    for (auto* c : {ctx.get(), leaders.get()})
      if (c) c->fail_connections();
    waits_.interrupt_all(); // after the sockets closed: nothing writes into the buffers any more
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  std::optional<lost_rank> reported_peer_failure() {
    std::lock_guard lock(contexts_mu_);
    return peer_failure_;
  }

  /// Collectives use ctx_ and leaders_ on the worker without this lock: only
  /// their replacement (close_all) and another thread's look (interrupt_connections)
  /// take it; so do the two ways to fail the group from outside (which poisons first).
  std::mutex contexts_mu_;
  std::optional<lost_rank> peer_failure_; ///< set by fail_for_peer when its failure is the group's
  std::shared_ptr<gloo_mesh_context> ctx_;
  std::shared_ptr<gloo_mesh_context> leaders_; ///< local rank 0 of each node, across nodes with shm
  gloo_shm_path shm_path_; ///< the node's segment, when the ranks voted for it, and its shm arrays
  std::vector<char> scratch_;
  gloo_collectives mesh_; ///< the collectives over ctx_: header round, ring, chain, block exchange
  gloo_waits waits_;      ///< the buffers of ddp's own collectives, for interrupt_connections
  gloo_knobs knobs_;
  std::uint32_t next_tag_ = 1; // worker thread only
  collective_queue queue_;
  gloo_blame blame_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COMMUNICATOR_IMPL_HPP
// ---- end ddp/detail/gloo/communicator_impl.hpp ----

#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

static_assert(gloo_communicator::max_piece_bytes == gloo_knobs::max_piece_bytes);

DDP_INLINE gloo_communicator::gloo_communicator(const rendezvous& rv)
    : rank_(rv.topo.rank), size_(rv.topo.world_size), timeout_(rv.timeout),
      impl_(std::make_unique<gloo_communicator_impl>(rv)) {}
DDP_INLINE gloo_communicator::~gloo_communicator() = default;

DDP_INLINE long gloo_communicator::open_files(const ddp::topology& t) {
  return gloo_communicator_impl::open_files(t);
}

DDP_INLINE bool gloo_communicator::shm_active() const { return impl_->shm_active(); }
DDP_INLINE void gloo_communicator::set_shm_step_bytes(std::size_t bytes) { impl_->set_shm_step_bytes(bytes); }
DDP_INLINE std::size_t gloo_communicator::shm_step_bytes() const { return impl_->shm_step_bytes(); }
DDP_INLINE void gloo_communicator::use_shm(bool on) { impl_->use_shm(on); }
DDP_INLINE std::string gloo_communicator::shm_segment_name() const { return impl_->shm_segment_name(); }
DDP_INLINE std::uint64_t gloo_communicator::shm_in_place_runs() const { return impl_->shm_in_place_runs(); }
DDP_INLINE std::uint64_t gloo_communicator::shm_block_runs() const { return impl_->shm_block_runs(); }
DDP_INLINE bool gloo_communicator::is_shm_array_memory(const void* p, std::size_t bytes) const {
  return impl_->is_shm_array_memory(p, bytes);
}
DDP_INLINE shm_memory gloo_communicator::make_shm_memory(std::size_t n, dtype dt, std::size_t elem_size) {
  return impl_->make_shm_array(n, dt, elem_size);
}

DDP_INLINE std::exception_ptr gloo_communicator::poisoned() const { return impl_->poisoned(); }
DDP_INLINE void gloo_communicator::drain() { impl_->drain(); }
DDP_INLINE void gloo_communicator::abort_for_failure(const std::string& reason) {
  impl_->abort_for_failure(reason);
}
DDP_INLINE void gloo_communicator::poison_for_failure(const std::string& reason) {
  impl_->poison_for_failure(reason);
}
DDP_INLINE void gloo_communicator::fail_for_peer(const lost_rank& lost) { impl_->fail_for_peer(lost); }

DDP_INLINE void gloo_communicator::set_ring_piece_bytes(std::size_t bytes) {
  impl_->set_ring_piece_bytes(bytes);
}
DDP_INLINE std::size_t gloo_communicator::ring_piece_bytes() const { return impl_->ring_piece_bytes(); }

DDP_INLINE work gloo_communicator::all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking) {
  return impl_->all_reduce(data, n, dt, o, blocking);
}
DDP_INLINE work gloo_communicator::all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale,
                                                        bool blocking) {
  return impl_->all_reduce_fragments(std::move(frags), dt, scale, blocking);
}
DDP_INLINE work gloo_communicator::broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking) {
  return impl_->broadcast(data, n, dt, root, blocking);
}
DDP_INLINE work gloo_communicator::all_gather(const void* in, void* out, std::size_t n, dtype dt,
                                              bool blocking) {
  return impl_->all_gather(in, out, n, dt, blocking);
}
DDP_INLINE work gloo_communicator::reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o,
                                                  bool blocking) {
  return impl_->reduce_scatter(in, out, n, dt, o, blocking);
}
DDP_INLINE work gloo_communicator::barrier(bool blocking) { return impl_->barrier(blocking); }

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COMMUNICATOR_INL_HPP
// ---- end ddp/detail/gloo/communicator-inl.hpp ----
// ---- begin ddp/detail/process_group/make_rendezvous-inl.hpp ----
// The definitions behind make_rendezvous.hpp: compiled in every translation
// unit when ddp is header-only, once in the runtime when it is compiled
// separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_INL_HPP
#define DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_INL_HPP

// ---- begin ddp/detail/common/uncaught_error.hpp ----
// An uncaught ddp::error ends its rank as an error, not as a crash: one line
// "ddp: rank R: <what()>" on stderr, a failure note for ddprun's summary
// (failure_note.hpp), and exit status uncaught_error_exit_code, where the
// C++ runtime's default printed "terminate called after throwing an instance
// of 'ddp::v0_1_0::error'" and raised SIGABRT. Any other exception, or a
// terminate with none, goes to the handler that was installed before.
#ifndef DDP_DETAIL_COMMON_UNCAUGHT_ERROR_HPP
#define DDP_DETAIL_COMMON_UNCAUGHT_ERROR_HPP


#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

/// This process's rank for the line and the note (the first group's).
inline std::atomic<int> uncaught_error_rank{-1};
inline std::terminate_handler uncaught_error_previous = nullptr;

/// `e`'s message without a leading "rank R: " of this rank's own (the line names it).
inline std::string_view uncaught_error_message(const error& e, int rank) {
  const std::string self = "rank " + std::to_string(rank) + ": ";
  std::string_view message = e.message();
  if (message.starts_with(self)) message.remove_prefix(self.size());
  return message;
}

[[noreturn]] inline void on_terminate() noexcept {
  if (auto current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const error& e) {
      const int rank = uncaught_error_rank.load();
      try {
        const auto message = uncaught_error_message(e, rank);
        const std::string line = "ddp: rank " + std::to_string(rank) + ": ddp " +
                                 std::string(to_string(e.kind())) + " error: " + std::string(message) +
                                 " (an uncaught ddp::error: the rank exits with code " +
                                 std::to_string(uncaught_error_exit_code) + ")\n";
        std::fflush(stdout);                              // what the rank printed before comes first
        std::fwrite(line.data(), 1, line.size(), stderr); // one write: lines do not interleave
        note_failure_for_launcher(rank, message);
      } catch (...) {}
      // Not exit(): static destructors would run while ddp's threads still use what they destroy.
      std::_Exit(uncaught_error_exit_code);
    } catch (...) {}
  }
  if (uncaught_error_previous) uncaught_error_previous();
  std::abort();
}

/// Installs on_terminate once per process; `rank`: this process's rank, for its line.
inline void install_uncaught_error_handler(int rank) {
  static std::once_flag once;
  std::call_once(once, [rank] {
    uncaught_error_rank = rank;
    uncaught_error_previous = std::set_terminate(on_terminate);
  });
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_UNCAUGHT_ERROR_HPP
// ---- end ddp/detail/common/uncaught_error.hpp ----

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Tells ddprun's failure note and the store that `rank` fails on an error of
/// its own, so that peers waiting for it fail now, naming it and `reason`.
/// Peers read "rank R failed: <reason>": a leading "rank R: " goes.
DDP_INLINE void report_own_failure(tcp_store& store, int rank, std::string_view why) noexcept {
  try {
    std::string reason(why);
    const std::string self = "rank " + std::to_string(rank) + ": ";
    if (reason.starts_with(self)) reason.erase(0, self.size());
    note_failure_for_launcher(rank, reason);
    store.report_failure(reason);
  } catch (...) {} // best effort: the error going out is what matters
}

inline std::string token_or_env(const std::string& token) {
  if (!token.empty()) return token;
  return getenv_str("DDP_TOKEN").value_or("");
}

inline void parse_host_port(std::string_view hp, std::string_view method, std::string& host, int& port) {
  auto colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    throw error(error_kind::config, "init_method '" + std::string(method) + "' must be tcp://host:port");
  host = std::string(hp.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto p = parse_int(hp.substr(colon + 1));
  if (!p || *p < 1 || *p > 65535)
    throw error(error_kind::config, "init_method '" + std::string(method) + "': port is not in 1..65535");
  port = static_cast<int>(*p);
}

/// Connects to (rank 0: serves) the store. When that fails on a port ddp chose rather than
/// MASTER_PORT itself, the error also says where the port came from and how to choose another.
inline std::shared_ptr<tcp_store> make_store(const tcp_store_options& so, const std::string& origin) {
  try {
    return std::make_shared<tcp_store>(so);
  } catch (const error& e) {
    if (origin.empty() || origin.starts_with("MASTER_PORT")) throw;
    std::string_view what = e.what();
    what.remove_prefix(std::min(what.size(), what.find(": ") + 2)); // "ddp <kind> error: "
    what = what.substr(0, what.find(" (another job"));              // its MASTER_PORT advice
    throw error(e.kind(),
                std::string(what) + ". ddp's rendezvous store uses " + origin +
                    ": that port must be free on the master node and reachable from every node; "
                    "set DDP_STORE_PORT (the same on every node) to choose another",
                e.rank());
  }
}

/// How long a rank refused before it joined the store tries to reach it, to
/// report: the store may not be up yet (rank 0 starts at its own pace), but
/// where every node has the same low limit, rank 0 was refused too and
/// serves nothing, and each rank's own error waits this long, so it is short
/// (docs/design-notes.md, "Note [report before store patience]").
inline constexpr std::chrono::milliseconds report_before_store_patience{3000};

/// A rank refused during the rendezvous reports it (report_own_failure), so
/// that the peers waiting for it there fail now instead of at DDP_TIMEOUT:
/// without a launcher that ends the job (srun does not by default), ten
/// minutes at the default timeout. One refused before it joined the store
/// (the open-files check) connects only to report, for report_before_store_patience at
/// most, unless it would serve the store itself (then there is none to tell).
/// It reports only if it can claim its rank there, as joining would: a store
/// of another job sharing the port and token is not told.
inline void report_failure_before_store(tcp_store_options so, const error& e) noexcept {
  if (so.serve) return;
  try {
    so.timeout = std::min(so.timeout, report_before_store_patience);
    so.linger.reset();
    tcp_store store(so);
    if (store.add("ddp/rank/" + std::to_string(so.rank), 1) == 1)
      report_own_failure(store, so.rank, e.message());
  } catch (...) {}
}

/// Raises the open-files limit to what this rank will hold (see open_files.hpp),
/// or fails now, before the job waits on a rank that ran out.
inline void ensure_rank_open_files(const ddp::topology& t, long backend_files, bool uses_store,
                                   bool serves_store) {
  open_files_need need;
  need.in_use = open_files_in_use();
  need.backend = backend_files;
  need.store_client = uses_store ? 3 : 0; // its own, the failure watch's, one to report a failure
  need.store_server = serves_store ? store_server_open_files(t.world_size) : 0;
  if (serves_store) need.spare += store_fd_reserve_max; // or the server pauses its accepts
  ensure_open_files(need, "rank " + std::to_string(t.rank),
                    "a job of " + std::to_string(t.world_size) + " rank" + (t.world_size == 1 ? "" : "s"));
}

/// One line on stderr, once per process, when the job is one process only because no
/// launcher set its variables: `./train` alone looked like a working job of one, silently.
/// An explicit world size (init_options, WORLD_SIZE) or DDP_QUIET_SINGLE=1 says it is meant.
inline void say_single_process(const ddp::topology& t, const init_options& o) {
  if (t.source != "default" || t.world_size != 1 || o.world_size > 0 || getenv_str("WORLD_SIZE") ||
      getenv_str("DDP_QUIET_SINGLE").value_or("") == "1")
    return;
  static std::once_flag once;
  std::call_once(once, [] {
    log_line("", "this job runs as one process (rank 0 of 1): no launcher set RANK and WORLD_SIZE. To "
                 "start N processes: ddprun --nproc-per-node N <program> [args...]. WORLD_SIZE=1 or "
                 "DDP_QUIET_SINGLE=1 silences this line.");
  });
}

/// `backend_files`: the descriptors the backend's connections take (its
/// communicator's open_files(topology), where it has one).
DDP_INLINE ddp::rendezvous make_rendezvous(const init_options& o,
                                           long (*backend_files)(const ddp::topology&)) {
  ddp::rendezvous rv;
  rv.topo = topology::from_env();
  if (o.world_size == 0 || o.world_size < -1)
    throw error(error_kind::config,
                "init_options::world_size=" + std::to_string(o.world_size) + " must be >= 1");
  if (o.world_size > 0) rv.topo.world_size = o.world_size;
  if (o.rank >= 0) rv.topo.rank = o.rank;
  install_uncaught_error_handler(rv.topo.rank);
  say_single_process(rv.topo, o);
  if (o.rank < -1 || rv.topo.rank >= rv.topo.world_size)
    throw error(error_kind::config, "rank " + std::to_string(rv.topo.rank) + " is not below world size " +
                                        std::to_string(rv.topo.world_size));
  if (rv.topo.local_world_size > rv.topo.world_size) {
    rv.topo.local_world_size = rv.topo.world_size;
    rv.topo.local_rank = rv.topo.rank;
  }
  if (o.timeout.count() <= 0) throw error(error_kind::config, "init_options::timeout must be positive");
  rv.timeout = o.timeout;
  rv.token = token_or_env(o.token);

  std::string_view m = o.init_method;
  if (m.starts_with("file://")) {
    rv.file_path = std::string(m.substr(7));
    if (rv.file_path.empty()) throw error(error_kind::config, "init_method 'file://' needs a directory path");
    ensure_rank_open_files(rv.topo, backend_files ? backend_files(rv.topo) : 0, false, false);
    return rv;
  }
  std::string host;
  int port = 0;
  if (m.starts_with("tcp://")) {
    parse_host_port(m.substr(6), m, host, port);
    rv.topo.master_addr = host;
    rv.topo.master_port = rv.topo.store_port = port;
  } else if (m == "env://" || m.empty()) {
    host = rv.topo.master_addr;
    port = rv.topo.store_port; // MASTER_PORT, or beside it under torch's elastic agent (see topology)
    if (rv.topo.world_size > 1 && host.empty())
      throw error(error_kind::config,
                  "env:// needs MASTER_ADDR (rank " + std::to_string(rv.topo.rank) + " of " +
                      std::to_string(rv.topo.world_size) +
                      "): launch with ddprun/torchrun, or export MASTER_ADDR and MASTER_PORT");
    if (rv.topo.world_size > 1 && port == 0)
      throw error(error_kind::config,
                  "env:// needs MASTER_PORT (or DDP_STORE_PORT): launch with ddprun/torchrun, or export it");
    if (host.empty()) host = "127.0.0.1"; // a single process serves itself on a free port
  } else {
    throw error(error_kind::config, "init_method '" + o.init_method +
                                        "' is not supported: use env://, tcp://host:port or file:///dir");
  }
  tcp_store_options so;
  so.host = host;
  so.port = port;
  // ddprun on the master node serves the store when it launched the job (so it
  // outlives every rank); otherwise rank 0 does. tcp:// always means rank 0.
  const bool launcher = rv.topo.store_in_launcher && !m.starts_with("tcp://");
  so.serve = rv.topo.rank == 0 && !launcher;
  so.served_by_launcher = launcher;
  so.timeout = rv.timeout;
  so.token = rv.token;
  so.rank = rv.topo.rank;
  // Each restart round of the job has keys of its own, lost ranks included.
  if (rv.topo.restart_round) { // appended, not "r" + std::to_string(...): g++ 12's false -Wrestrict at -O3
    so.scope.assign(1, 'r');
    so.scope += std::to_string(*rv.topo.restart_round);
    so.scope += '/';
  }
  try {
    ensure_rank_open_files(rv.topo, backend_files ? backend_files(rv.topo) : 0, true, so.serve);
  } catch (const error& e) {
    report_failure_before_store(so, e);
    throw;
  }
  rv.store = make_store(so, m.starts_with("tcp://") ? std::string() : store_port_origin(rv.topo));
  // Two processes claiming one rank would corrupt the mesh: refuse clearly.
  // Not reported: the rank is the other process's (maybe of another job
  // sharing the port and token, running fine).
  if (rv.store->add("ddp/rank/" + std::to_string(rv.topo.rank), 1) != 1)
    throw error(error_kind::config, "rank " + std::to_string(rv.topo.rank) +
                                        " joined twice: two processes have the same RANK in this job");
  auto refuse = [&](const std::string& why) { // this process holds the rank: it may report
    error e(error_kind::config, why);
    report_own_failure(*rv.store, rv.topo.rank, e.message());
    return e;
  };
  rv.store->set("ddp/world/" + std::to_string(rv.topo.rank), std::to_string(rv.topo.world_size));
  if (rv.topo.rank != 0) {
    auto w0 = rv.store->get("ddp/world/0");
    if (w0 != std::to_string(rv.topo.world_size))
      throw refuse("rank " + std::to_string(rv.topo.rank) + " was started with world size " +
                   std::to_string(rv.topo.world_size) + " but rank 0 with " + w0);
  }
  // Every rank arrives before any enters the backend's mesh: a rank lost
  // until here is named by this wait at once (the store answers "lost").
  // Without it, Gloo's connectFullMesh, interrupted by that answer, took the
  // full timeout to unwind (seen: 4 s at DDP_TIMEOUT=4s, 1 run in 2).
  rv.store->set("ddp/arrived/" + std::to_string(rv.topo.rank), "1");
  std::vector<std::string> arrived;
  for (int r = 0; r < rv.topo.world_size; ++r)
    arrived.push_back("ddp/arrived/" + std::to_string(r));
  try {
    rv.store->wait(arrived);
  } catch (const error& e) {
    if (e.kind() == error_kind::peer_lost) rv.store->serve_late_arrivals(rv.topo.world_size);
    throw;
  }
  return rv;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_INL_HPP
// ---- end ddp/detail/process_group/make_rendezvous-inl.hpp ----
// ---- begin ddp/detail/data_parallel/model_layout-inl.hpp ----
// The definitions behind model_layout.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_INL_HPP


DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void check_unique_names(const std::vector<tensor_slot>& slots, const char* what) {
  std::unordered_set<std::string> seen;
  for (auto& s : slots)
    if (!seen.insert(s.name).second)
      throw error(error_kind::config, std::string("two ") + what + " are named '" + s.name +
                                          "': names identify them across ranks, make them unique");
}

DDP_INLINE std::string describe(const std::vector<tensor_slot>& params,
                                const std::vector<tensor_slot>& buffers) {
  std::string d;
  for (auto* list : {&params, &buffers}) {
    d += list == &params ? "P\n" : "B\n";
    for (auto& s : *list)
      d += s.name + "|" + std::string(to_string(s.type)) + "|" + std::to_string(s.count) + "\n";
  }
  return d;
}

DDP_INLINE described_layout parse_description(const std::string& d) {
  described_layout out;
  std::vector<std::string>* section = &out.params;
  std::size_t start = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] == '\n') {
      std::string line = d.substr(start, i - start);
      start = i + 1;
      if (line == "P")
        section = &out.params;
      else if (line == "B")
        section = &out.buffers;
      else
        section->push_back(std::move(line));
    }
  return out;
}

DDP_INLINE std::string pretty_entry(const std::string& line) {
  auto a = line.find('|'), b = line.rfind('|');
  if (a == std::string::npos || a == b) return "'" + line + "'";
  return "'" + line.substr(0, a) + "' " + line.substr(a + 1, b - a - 1) + " x " + line.substr(b + 1);
}

DDP_INLINE std::string first_difference(const std::string& d0, const std::string& dr, int r) {
  const auto a = parse_description(d0), b = parse_description(dr);
  const std::string rank = "rank " + std::to_string(r);
  for (const bool buffers : {false, true}) {
    const auto& x = buffers ? a.buffers : a.params;
    const auto& y = buffers ? b.buffers : b.params;
    const std::string kind = buffers ? "buffer" : "parameter";
    const std::string counts = " (rank 0 has " + std::to_string(x.size()) + " " + kind + "s, " + rank +
                               " has " + std::to_string(y.size()) + ")";
    for (std::size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
      const std::string where = kind + " #" + std::to_string(i);
      if (i >= x.size())
        return rank + " has an extra " + where + " " + pretty_entry(y[i]) + " that rank 0 does not have" +
               counts;
      if (i >= y.size())
        return rank + " lacks " + where + " " + pretty_entry(x[i]) + " that rank 0 has" + counts;
      if (x[i] != y[i])
        return where + " differs: rank 0 has " + pretty_entry(x[i]) + ", " + rank + " has " +
               pretty_entry(y[i]);
    }
  }
  return {};
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_INL_HPP
// ---- end ddp/detail/data_parallel/model_layout-inl.hpp ----
// ---- begin ddp/detail/data_parallel/bucket_plan-inl.hpp ----
// The definitions behind bucket_plan.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_INL_HPP


DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE bucket_plan make_bucket_plan(const std::vector<std::vector<std::size_t>>& assignment,
                                        std::span<const tensor_slot> params, dtype (*wire)(dtype),
                                        plan_capabilities caps) {
  bucket_plan plan;
  std::vector<int> seen(params.size(), 0);
  plan.bucket_of.assign(params.size(), 0);
  for (auto& members : assignment) {
    if (members.empty()) throw error(error_kind::config, "the bucketing policy produced an empty bucket");
    planned_bucket b;
    b.params = members;
    for (auto i : members) {
      if (i >= params.size())
        throw error(error_kind::config, "the bucketing policy named parameter " + std::to_string(i) + " of " +
                                            std::to_string(params.size()));
      if (seen[i]++)
        throw error(error_kind::config,
                    "the bucketing policy put parameter '" + params[i].name + "' in two buckets");
      if (params[i].type != params[members.front()].type)
        throw error(error_kind::config, "the bucketing policy mixed dtypes in one bucket ('" +
                                            params[i].name + "' is " +
                                            std::string(to_string(params[i].type)) + ")");
      b.offsets.push_back(b.elements);
      b.elements += params[i].count;
      plan.bucket_of[i] = plan.buckets.size();
    }
    b.param_type = params[members.front()].type;
    b.wire_type = wire(b.param_type);
    plan.buckets.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!seen[i])
      throw error(error_kind::config, "the bucketing policy left parameter '" + params[i].name + "' out");
  choose_paths(plan, params, caps);
  return plan;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_BUCKET_PLAN_INL_HPP
// ---- end ddp/detail/data_parallel/bucket_plan-inl.hpp ----
// ---- begin ddp/detail/data_parallel/unchecked_works-inl.hpp ----
// The definitions behind unchecked_works.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_INL_HPP


DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void unchecked_works::stream_wait(const work& w, CUstream_st* stream) {
  works_.push_back(w);
  try {
    w.stream_wait(stream);
  } catch (...) {
    if (works_.back().done()) works_.pop_back();
    throw;
  }
}

DDP_INLINE void unchecked_works::check() {
  std::exception_ptr first;
  std::erase_if(works_, [&](work& w) {
    if (!w.done()) return false;
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    return true;
  });
  if (first) std::rethrow_exception(first);
}

DDP_INLINE void unchecked_works::wait_all() {
  std::exception_ptr first;
  for (auto& w : works_)
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  works_.clear();
  if (first) std::rethrow_exception(first);
}

DDP_INLINE void unchecked_works::log_all() noexcept {
  std::vector<std::pair<std::string, int>> seen;
  for (auto& w : works_)
    try {
      w.wait();
    } catch (const std::exception& e) {
      auto it = std::find_if(seen.begin(), seen.end(), [&](auto& p) { return p.first == e.what(); });
      if (it == seen.end())
        seen.emplace_back(e.what(), 1);
      else
        ++it->second;
    } catch (...) {}
  works_.clear();
  for (auto& [what, times] : seen)
    log_line("rank " + std::to_string(rank_),
             (times > 1 ? std::to_string(times) + " collectives" : std::string("a collective")) +
                 " whose results a stream waited for failed after synchronize() returned (the values left "
                 "on the device are not valid): " +
                 what);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_INL_HPP
// ---- end ddp/detail/data_parallel/unchecked_works-inl.hpp ----
// ---- begin ddp/detail/numeric/elementwise-inl.hpp ----
// The definitions behind elementwise.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_NUMERIC_ELEMENTWISE_INL_HPP
#define DDP_DETAIL_NUMERIC_ELEMENTWISE_INL_HPP


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
    throw error(error_kind::config,
                "scaling needs a floating-point tensor, got " + std::string(to_string(d)));
  }
}

DDP_INLINE void scale_in_place(void* data, std::size_t n, dtype d, double factor) {
  switch (d) {
  case dtype::f32: return scale_kernel<plain_codec<float>>(data, n, static_cast<float>(factor));
  case dtype::f64: return scale_kernel<plain_codec<double>>(data, n, factor);
  case dtype::f16: return scale_kernel<f16_codec>(data, n, static_cast<float>(factor));
  case dtype::bf16: return scale_kernel<bf16_codec>(data, n, static_cast<float>(factor));
  default:
    throw error(error_kind::config, "op::avg needs a floating-point tensor, got " +
                                        std::string(to_string(d)) + ": use op::sum and divide yourself");
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
  default: throw error(error_kind::config, "cannot convert from " + std::string(to_string(from)));
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_NUMERIC_ELEMENTWISE_INL_HPP
// ---- end ddp/detail/numeric/elementwise-inl.hpp ----
// ---- begin ddp/detail/data_parallel/debug-inl.hpp ----
// The definitions behind debug.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately
// (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_DEBUG_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_DEBUG_INL_HPP


DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE void log_bucket_layout(const bucket_plan& plan, const std::vector<tensor_slot>& params) {
  std::string s = "distributed_data_parallel: " + std::to_string(params.size()) + " parameters in " +
                  std::to_string(plan.buckets.size()) + " buckets (launch order):";
  for (std::size_t i = 0; i < plan.buckets.size(); ++i) {
    auto& b = plan.buckets[i];
    s += "\n  bucket " + std::to_string(i) + ": " + std::to_string(b.params.size()) + " tensors, " +
         std::to_string(b.elements) + " x " + std::string(to_string(b.param_type)) +
         (b.wire_type != b.param_type ? " sent as " + std::string(to_string(b.wire_type)) : "") + ", " +
         to_string(b.path) + " [" + params[b.params.front()].name +
         (b.params.size() > 1 ? " .. " + params[b.params.back()].name : "") + "]";
  }
  log_line("rank 0", s);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_DEBUG_INL_HPP
// ---- end ddp/detail/data_parallel/debug-inl.hpp ----
#endif // DDP_DETAIL_DEFINE_RUNTIME
