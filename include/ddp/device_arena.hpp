// ddp::device_arena — ddp::arena in CUDA device memory: the gradients of all
// parameters in one cudaMalloc, slot k (registration order) placed so the slots
// lie in reverse registration order, back to back. Any bucket of consecutive
// parameters is then one contiguous range and the CUDA bucket engine reduces it
// in place: nothing to pack. Needs the CUDA runtime (link ddp::cuda).
#ifndef DDP_DEVICE_ARENA_HPP
#define DDP_DEVICE_ARENA_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/cuda/runtime.hpp>
#include <ddp/error.hpp>
#include <ddp/tensor.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

DDP_BEGIN_NAMESPACE

template <class T> class device_arena {
  static_assert(std::is_trivially_copyable_v<T> || sizeof(T) == 2,
                "ddp::device_arena holds plain gradient values");

public:
  /// `sizes`: element counts of the gradients, in registration order. The
  /// storage is zeroed before this returns (cudaMemset alone is asynchronous
  /// for device memory, and a non-blocking stream would not follow it).
  explicit device_arena(std::vector<std::size_t> sizes) : sizes_(std::move(sizes)), offsets_(sizes_.size()) {
    std::size_t off = 0;
    for (std::size_t k = sizes_.size(); k-- > 0;) {
      offsets_[k] = off;
      off += sizes_[k];
    }
    total_ = off;
    storage_ = detail::cuda::device_buffer((total_ ? total_ : 1) * sizeof(T));
    detail::cuda::check(cudaMemsetAsync(storage_.get(), 0, storage_.bytes(), cudaStreamLegacy),
                        "cudaMemsetAsync (device_arena)");
    detail::cuda::check(cudaStreamSynchronize(cudaStreamLegacy),
                        "cudaStreamSynchronize (device_arena's zeroing)");
  }

  std::size_t size() const noexcept { return sizes_.size(); }
  std::size_t total_elements() const noexcept { return total_; }
  device_span<T> all() noexcept { return {static_cast<T*>(storage_.get()), total_}; }

  /// The device storage of gradient k (registration order).
  device_span<T> slot(std::size_t k) {
    if (k >= sizes_.size())
      detail::throw_error(error_kind::config,
                          {"device_arena: slot ", k, " does not exist (", sizes_.size(), " slots)"});
    return {static_cast<T*>(storage_.get()) + offsets_[k], sizes_[k]};
  }

private:
  std::vector<std::size_t> sizes_, offsets_;
  std::size_t total_ = 0;
  detail::cuda::device_buffer storage_;
};

DDP_END_NAMESPACE

#endif // DDP_DEVICE_ARENA_HPP
