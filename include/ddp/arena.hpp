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

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/tensor.hpp>

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
      detail::throw_error(error_kind::config,
                          {"arena: slot ", k, " does not exist (", sizes_.size(), " slots)"});
    return {storage_.data() + offsets_[k], sizes_[k]};
  }

#ifdef DDP_HAS_EIGEN
  /// Gradient k as a column-major rows x cols Eigen map, whatever Eigen's default storage
  /// order, in a file that includes Eigen. The type is spelled out (-1: Eigen::Dynamic,
  /// 0: column-major) because ddp only declares Eigen's templates (ddp/tensor.hpp).
  Eigen::Map<Eigen::Matrix<T, -1, -1, 0, -1, -1>, 0, Eigen::Stride<0, 0>>
  matrix(std::size_t k, std::ptrdiff_t rows, std::ptrdiff_t cols) {
    using map_type = Eigen::Map<Eigen::Matrix<T, -1, -1, 0, -1, -1>, 0, Eigen::Stride<0, 0>>;
    using index = typename map_type::Index; // Eigen's own (EIGEN_DEFAULT_DENSE_INDEX_TYPE)
    auto s = slot(k);
    const bool fits =
        rows >= 0 && cols >= 0 &&
        (cols == 0 ? s.empty()
                   : s.size() % static_cast<std::size_t>(cols) == 0 &&
                         s.size() / static_cast<std::size_t>(cols) == static_cast<std::size_t>(rows));
    if (!fits)
      detail::throw_error(error_kind::config,
                          {"arena: slot ", k, " holds ", s.size(), " elements, not ", rows, "x", cols});
    return map_type(s.data(), static_cast<index>(rows), static_cast<index>(cols));
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
