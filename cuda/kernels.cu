// ddp's device kernels. Compiled once, at development time, by
// scripts/gen-cuda-kernels into a fatbin (SASS for sm_75-sm_90 and PTX of ISA
// 8.0 for compute_75, uncompressed) that is embedded in
// include/ddp/detail/cuda/kernels_fatbin.hpp and loaded at run time with
// cudaLibraryLoadData: users' code is compiled by their C++ compiler and needs
// only the CUDA runtime (see include/ddp/detail/cuda/kernels.hpp).
//
// One kernel: copy a table of runs of elements, converting the element type and
// multiplying by a scale on the way. Packing a bucket (gather), unpacking it
// (scatter) and scaling in place are all this kernel with a different table;
// one launch per bucket, because one cudaMemcpyAsync per tensor was 8-130x
// slower on the H200 (../shared/FACTS.md: 2000 x 256 floats, 11.7 ms vs 0.087 ms).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// Must match detail::cuda::copy_entry and ddp::dtype (include/ddp/tensor.hpp).
struct ddp_copy_entry {
  const void* src;
  void* dst;
  unsigned long long count;
  unsigned long long first; // the sum of the counts before this entry
};
enum { ddp_f32 = 0, ddp_f64 = 1, ddp_f16 = 2, ddp_bf16 = 3 };

template <class T> __device__ T ddp_load(const void* p, unsigned long long i, int type);
template <> __device__ float ddp_load<float>(const void* p, unsigned long long i, int type) {
  switch (type) {
  case ddp_f64: return (float)static_cast<const double*>(p)[i];
  case ddp_f16: return __half2float(static_cast<const __half*>(p)[i]);
  case ddp_bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  default: return static_cast<const float*>(p)[i];
  }
}
template <> __device__ double ddp_load<double>(const void* p, unsigned long long i, int type) {
  if (type == ddp_f64) return static_cast<const double*>(p)[i];
  return (double)ddp_load<float>(p, i, type);
}
__device__ void ddp_store(void* p, unsigned long long i, int type, double v) {
  switch (type) {
  case ddp_f64: static_cast<double*>(p)[i] = v; break;
  case ddp_f16: static_cast<__half*>(p)[i] = __float2half_rn((float)v); break;
  case ddp_bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn((float)v); break;
  default: static_cast<float*>(p)[i] = (float)v; break;
  }
}
__device__ void ddp_store(void* p, unsigned long long i, int type, float v) {
  switch (type) {
  case ddp_f64: static_cast<double*>(p)[i] = (double)v; break;
  case ddp_f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
  case ddp_bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
  default: static_cast<float*>(p)[i] = v; break;
  }
}

// Float arithmetic unless a side is double (as the host engine's copy_scaled does).
__device__ void ddp_convert_one(const ddp_copy_entry& e, unsigned long long i, int src_type, int dst_type,
                                bool wide, double scale, float fscale) {
  if (wide)
    ddp_store(e.dst, i, dst_type, ddp_load<double>(e.src, i, src_type) * scale);
  else if (scale == 1.0)
    ddp_store(e.dst, i, dst_type, ddp_load<float>(e.src, i, src_type));
  else
    ddp_store(e.dst, i, dst_type, ddp_load<float>(e.src, i, src_type) * fscale);
}

// The last entry in [lo, hi] whose first is <= g (table[lo].first <= g): the
// entry holding element g, since empty entries share the first of the next one.
__device__ unsigned long long ddp_find(const ddp_copy_entry* table, unsigned long long lo,
                                       unsigned long long hi, unsigned long long g) {
  while (lo < hi) {
    const unsigned long long mid = lo + (hi - lo + 1) / 2;
    if (table[mid].first <= g)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The table's elements, all entries end to end, are one range of `total`
// elements cut into chunks of `chunk`: a block copies a chunk at a time (grid
// stride), whatever the entries' sizes, so one large entry among many small
// ones costs no idle blocks. Each thread finds the chunk's first and last
// entries and searches between them only when its element leaves its entry.
extern "C" __global__ void ddp_convert_copy(const ddp_copy_entry* table, unsigned long long entries,
                                            unsigned long long total, unsigned long long chunk, int src_type,
                                            int dst_type, double scale) {
  const bool wide = src_type == ddp_f64 || dst_type == ddp_f64;
  const float fscale = (float)scale;
  const unsigned long long step = (unsigned long long)gridDim.x * chunk;
  for (unsigned long long base = (unsigned long long)blockIdx.x * chunk; base < total; base += step) {
    const unsigned long long end = total - base < chunk ? total : base + chunk;
    unsigned long long at = ddp_find(table, 0, entries - 1, base);
    const unsigned long long last = ddp_find(table, at, entries - 1, end - 1);
    ddp_copy_entry e = table[at];
    for (unsigned long long g = base + threadIdx.x; g < end; g += blockDim.x) {
      if (g - e.first >= e.count) { // past this entry: the next non-empty one holding g
        at = ddp_find(table, at + 1, last, g);
        e = table[at];
      }
      ddp_convert_one(e, g - e.first, src_type, dst_type, wide, scale, fscale);
    }
  }
}
