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

#include <ddp/detail/cuda/kernels_fatbin.hpp>
#include <ddp/detail/cuda/runtime.hpp>
#include <ddp/tensor.hpp>

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
