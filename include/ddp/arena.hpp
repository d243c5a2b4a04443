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
#ifndef DDP_ARENA_HPP
#define DDP_ARENA_HPP

#include <ddp/error.hpp>

#include <algorithm>

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
    std::size_t off = 0;
    for (std::size_t k = sizes_.size(); k-- > 0;) {
      offsets_[k] = off;
      off += sizes_[k];
    }
    total_ = off;
    const std::size_t n = total_ ? total_ : 1;
    storage_.reset(static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{alignment})));
    std::uninitialized_fill_n(storage_.get(), n, T{});
  }

  std::size_t size() const noexcept { return sizes_.size(); }
  std::size_t total_elements() const noexcept { return total_; }
  std::span<T> all() noexcept { return {storage_.get(), total_}; }

  /// The storage of gradient k (registration order).
  std::span<T> slot(std::size_t k) {
    if (k >= sizes_.size())
      throw error(error_kind::config, "arena: slot " + std::to_string(k) + " does not exist (" +
                                          std::to_string(sizes_.size()) + " slots)");
    return {storage_.get() + offsets_[k], sizes_[k]};
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
  struct aligned_delete {
    void operator()(T* p) const noexcept { ::operator delete (p, std::align_val_t{alignment}); }
  };

  std::vector<std::size_t> sizes_, offsets_;
  std::size_t total_ = 0;
  std::unique_ptr<T[], aligned_delete> storage_;
};

DDP_END_NAMESPACE

#endif // DDP_ARENA_HPP
