// ddp's device kernels from host code compiled by any C++ compiler.
//
// How a header-only library ships kernels: the kernels (cuda/kernels.cu) are
// compiled once at development time into a fatbin with sm_90 SASS (the H200:
// no JIT at start-up) and compute_90 PTX (the driver JIT-compiles it for newer
// GPUs), embedded as bytes in kernels_fatbin.hpp (scripts/gen-cuda-kernels; a
// ctest fails when it is stale), and loaded here on first use with
// cudaLibraryLoadData + cudaLibraryGetKernel, launched with cudaLaunchKernel.
// Users need the CUDA runtime (libcudart, CUDA >= 12.0) but no nvcc, and a
// plain .cpp gets the kernels. Rejected: compiling the kernels in the user's
// TU under __CUDACC__ (plain .cpp files would get none); NVRTC at run time
// (another library to link, ~100 ms of compile at start-up); the driver API
// (cuModuleLoadData needs -lcuda and a current context).
#ifndef DDP_DETAIL_CUDA_KERNELS_HPP
#define DDP_DETAIL_CUDA_KERNELS_HPP

#include <ddp/detail/cuda/kernels_fatbin.hpp>
#include <ddp/detail/cuda/runtime.hpp>
#include <ddp/tensor.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>

DDP_BEGIN_NAMESPACE
namespace detail::cuda {

/// One run of elements to copy; layout matches ddp_copy_entry in cuda/kernels.cu.
struct copy_entry {
  const void* src;
  void* dst;
  unsigned long long count;
};
static_assert(sizeof(copy_entry) == 24);

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
  cudaLibrary_t lib = nullptr;
  check(cudaLibraryLoadData(&lib, kernels_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cudaLibraryLoadData (ddp's embedded sm_90/compute_90 kernels; a GPU older than sm_90?)", rank);
  cudaKernel_t k = nullptr;
  if (cudaError_t e = cudaLibraryGetKernel(&k, lib, "ddp_convert_copy"); e != cudaSuccess) {
    cudaLibraryUnload(lib); // the next try loads it afresh
    check(e, "cudaLibraryGetKernel(ddp_convert_copy)", rank);
  }
  loaded.store(k, std::memory_order_release); // the library stays loaded for the life of the process
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

/// Launches one copy of `entries` entries (a device-resident table) on `s`:
/// element type `from` -> `to`, times `scale`. `longest` bounds the x grid.
inline void launch_convert_copy(const copy_entry* table_on_device, std::size_t entries, std::size_t longest,
                                dtype from, dtype to, double scale, cudaStream_t s, int rank) {
  if (entries == 0 || longest == 0) return;
  cudaKernel_t k = convert_copy_kernel(rank);
  int src_type = kernel_type(from), dst_type = kernel_type(to);
  constexpr unsigned threads = 256;
  // Enough blocks to cover the longest entry 4 elements per thread, capped:
  // grid-stride loops cover the rest.
  const std::size_t want = (longest + threads * 4 - 1) / (threads * 4);
  const auto x = static_cast<unsigned>(std::clamp<std::size_t>(want, 1, 1024));
  constexpr std::size_t max_y = 65535; // CUDA's grid y limit
  for (std::size_t first = 0; first < entries; first += max_y) {
    const copy_entry* part = table_on_device + first;
    void* args[] = {&part, &src_type, &dst_type, &scale};
    dim3 grid(x, static_cast<unsigned>(std::min(max_y, entries - first)));
    check(cudaLaunchKernel(reinterpret_cast<const void*>(k), grid, dim3(threads), args, 0, s),
          "cudaLaunchKernel(ddp_convert_copy)", rank);
  }
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_KERNELS_HPP
