// ddp's device kernels. Compiled once, at development time, by
// scripts/gen-cuda-kernels into a fatbin (SASS for sm_75-sm_90 and PTX of ISA
// 8.0 for compute_75, uncompressed) that is embedded in
// include/ddp/detail/cuda/kernels_fatbin.hpp and loaded at run time with
// cudaLibraryLoadData: users' code is compiled by their C++ compiler and needs
// only the CUDA runtime (see include/ddp/detail/cuda/kernels.hpp).
//
// One kernel: copy a table of runs of elements, converting the element type and
// multiplying by a scale on the way, in tiles (a block copies at most one tile
// of one run at a time, so a block's work does not depend on the runs' sizes). Packing a bucket (gather),
// unpacking it (scatter) and scaling in place are all this kernel with a different table; one launch per
// bucket, because one cudaMemcpyAsync per tensor was 8-130x slower on the H200 (../shared/FACTS.md: 2000 x
// 256 floats, 11.7 ms vs 0.087 ms).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// Must match detail::cuda::copy_entry, copy_tile and ddp::dtype (include/ddp/tensor.hpp).
struct ddp_copy_entry {
  const void* src;
  void* dst;
  unsigned long long count;
};
struct ddp_copy_tile {
  unsigned long long entry;  // the run it belongs to
  unsigned long long offset; // its first element in that run
};
enum { ddp_f32 = 0, ddp_f64 = 1, ddp_f16 = 2, ddp_bf16 = 3 };

// Element loads and stores through the element type given at run time (the
// same for the whole launch, so every thread of a warp takes the same branch),
// in the arithmetic type T: float, or double where a side is double, as the
// host engine's copy_scaled converts.
template <class T> __device__ T ddp_load(const void* p, unsigned long long i, int type) {
  switch (type) {
  case ddp_f64: return (T) static_cast<const double*>(p)[i];
  case ddp_f16: return (T)__half2float(static_cast<const __half*>(p)[i]);
  case ddp_bf16: return (T)__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  default: return (T) static_cast<const float*>(p)[i];
  }
}
template <class T> __device__ void ddp_store(void* p, unsigned long long i, int type, T v) {
  switch (type) {
  case ddp_f64: static_cast<double*>(p)[i] = (double)v; break;
  case ddp_f16: static_cast<__half*>(p)[i] = __float2half_rn((float)v); break;
  case ddp_bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn((float)v); break;
  default: static_cast<float*>(p)[i] = (float)v; break;
  }
}

// Loads before stores, four per thread: a run's source and destination may be
// the same memory (scaling in place), so the compiler may not overlap one
// element's load with the previous element's store, and one load in flight per
// thread leaves most of the memory bandwidth unused.
template <class T>
__device__ void ddp_copy_run(const void* src, void* dst, unsigned long long n, int src_type, int dst_type,
                             T scale) {
  constexpr int unroll = 4;
  const bool scaled = scale != T(1);
  for (unsigned long long i0 = threadIdx.x; i0 < n; i0 += (unsigned long long)blockDim.x * unroll) {
    T v[unroll];
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      const unsigned long long i = i0 + (unsigned long long)k * blockDim.x;
      if (i < n) v[k] = ddp_load<T>(src, i, src_type);
    }
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      const unsigned long long i = i0 + (unsigned long long)k * blockDim.x;
      if (i < n) ddp_store<T>(dst, i, dst_type, scaled ? v[k] * scale : v[k]);
    }
  }
}

// Float to float, both 16-byte aligned (the usual pack and unpack): four
// floats per load and store, two loads in flight per thread.
__device__ void ddp_copy_run_f32x4(const float* src, float* dst, unsigned long long n, float scale) {
  const unsigned long long quads = n / 4;
  const float4* s4 = reinterpret_cast<const float4*>(src);
  float4* d4 = reinterpret_cast<float4*>(dst);
  const bool scaled = scale != 1.0f;
  for (unsigned long long q0 = threadIdx.x; q0 < quads; q0 += (unsigned long long)blockDim.x * 2) {
    const unsigned long long q1 = q0 + blockDim.x;
    float4 a = s4[q0], b = q1 < quads ? s4[q1] : a;
    if (scaled) {
      a.x *= scale, a.y *= scale, a.z *= scale, a.w *= scale;
      b.x *= scale, b.y *= scale, b.z *= scale, b.w *= scale;
    }
    d4[q0] = a;
    if (q1 < quads) d4[q1] = b;
  }
  for (unsigned long long i = quads * 4 + threadIdx.x; i < n; i += blockDim.x)
    dst[i] = scaled ? src[i] * scale : src[i];
}

template <class T>
__device__ void ddp_copy_tiles(const ddp_copy_entry* table, const ddp_copy_tile* tiles,
                               unsigned long long count, unsigned long long tile_elements, int src_type,
                               int dst_type, T scale) {
  const bool f32 = sizeof(T) == 4 && src_type == ddp_f32 && dst_type == ddp_f32;
  for (unsigned long long t = blockIdx.x; t < count; t += gridDim.x) {
    const ddp_copy_tile tile = tiles[t];
    const ddp_copy_entry e = table[tile.entry];
    const unsigned long long left = e.count - tile.offset;
    const unsigned long long n = left < tile_elements ? left : tile_elements;
    if (f32) {
      const float* src = static_cast<const float*>(e.src) + tile.offset;
      float* dst = static_cast<float*>(e.dst) + tile.offset;
      if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
        ddp_copy_run_f32x4(src, dst, n, (float)scale);
        continue;
      }
    }
    const unsigned long long bytes_in = src_type == ddp_f64 ? 8 : src_type == ddp_f32 ? 4 : 2;
    const unsigned long long bytes_out = dst_type == ddp_f64 ? 8 : dst_type == ddp_f32 ? 4 : 2;
    ddp_copy_run<T>(static_cast<const char*>(e.src) + tile.offset * bytes_in,
                    static_cast<char*>(e.dst) + tile.offset * bytes_out, n, src_type, dst_type, scale);
  }
}

// Each block takes tiles in turn (grid stride).
extern "C" __global__ void ddp_convert_copy(const ddp_copy_entry* table, const ddp_copy_tile* tiles,
                                            unsigned long long count, unsigned long long tile_elements,
                                            int src_type, int dst_type, double scale) {
  if (src_type == ddp_f64 || dst_type == ddp_f64)
    ddp_copy_tiles<double>(table, tiles, count, tile_elements, src_type, dst_type, scale);
  else
    ddp_copy_tiles<float>(table, tiles, count, tile_elements, src_type, dst_type, (float)scale);
}
