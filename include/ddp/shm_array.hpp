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

#include <ddp/tensor.hpp>

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
