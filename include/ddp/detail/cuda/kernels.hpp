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
  unsigned long long first = 0; ///< the sum of the counts before it (make_copy_table)
};
static_assert(sizeof(copy_entry) == 32);

/// A table in the kernel's form and its number of elements.
struct copy_table {
  std::vector<copy_entry> entries;
  std::size_t total = 0;
};

/// Sets each entry's `first` (the kernel cuts the table's elements end to end
/// into equal chunks and searches them); entries of count 0 are allowed.
inline copy_table make_copy_table(std::vector<copy_entry> entries) {
  unsigned long long at = 0;
  for (auto& e : entries) {
    e.first = at;
    at += e.count;
  }
  return {std::move(entries), static_cast<std::size_t>(at)};
}

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
  cudaError_t e = cudaLibraryLoadData(&lib, kernels_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e != cudaSuccess && e != cudaErrorMemoryAllocation) {
    // A driver older than CUDA 13 may refuse nvcc 13's cubins (ELF ABI version
    // 8) instead of falling back to the PTX: JIT-compile the PTX alone.
    cudaGetLastError();
    const auto* ptx = reinterpret_cast<const char*>(kernels_fatbin + kernels_fatbin_ptx);
    if (cudaLibraryLoadData(&lib, ptx, nullptr, nullptr, 0, nullptr, nullptr, 0) == cudaSuccess)
      e = cudaSuccess;
  }
  check(e,
        "cudaLibraryLoadData (ddp's embedded kernels, also their PTX alone: SASS for sm_75, sm_80 and "
        "sm_90, PTX of ISA 8.0 for the rest; needs a GPU of compute capability >= 7.5 and a driver of "
        "CUDA >= 12.0)",
        rank);
  cudaKernel_t k = nullptr;
  if (e = cudaLibraryGetKernel(&k, lib, "ddp_convert_copy"); e != cudaSuccess) {
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

/// Launches one copy of `entries` entries (a device-resident table from
/// make_copy_table) of `total` elements in all on `s`: element type `from` ->
/// `to`, times `scale`.
inline void launch_convert_copy(const copy_entry* table_on_device, std::size_t entries, std::size_t total,
                                dtype from, dtype to, double scale, cudaStream_t s, int rank) {
  if (entries == 0 || total == 0) return;
  cudaKernel_t k = convert_copy_kernel(rank);
  int src_type = kernel_type(from), dst_type = kernel_type(to);
  constexpr unsigned threads = 256;
  // A block copies 4 elements per thread at a time, whatever the entries'
  // sizes; past the cap (a few waves on any GPU) blocks stride over the rest.
  unsigned long long n = entries, all = total, chunk = threads * 4;
  const auto blocks = static_cast<unsigned>(std::clamp<std::size_t>((total + chunk - 1) / chunk, 1, 8192));
  void* args[] = {&table_on_device, &n, &all, &chunk, &src_type, &dst_type, &scale};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(blocks), dim3(threads), args, 0, s),
        "cudaLaunchKernel(ddp_convert_copy)", rank);
}

} // namespace detail::cuda
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CUDA_KERNELS_HPP
