// ddp's device kernels. Compiled once, at development time, by
// scripts/gen-cuda-kernels into a fatbin (sm_90 SASS + compute_90 PTX) that is
// embedded in include/ddp/detail/cuda/kernels_fatbin.hpp and loaded at run time
// with cudaLibraryLoadData: users' code is compiled by their C++ compiler and
// needs only the CUDA runtime (see include/ddp/detail/cuda/kernels.hpp).
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

// blockIdx.y picks the entry (grid y is up to 65535 entries: the launcher
// splits longer tables); x blocks stride over the entry's elements. Float
// arithmetic unless a side is double (as the host engine's copy_scaled does).
extern "C" __global__ void ddp_convert_copy(const ddp_copy_entry* table, int src_type, int dst_type,
                                            double scale) {
  const ddp_copy_entry e = table[blockIdx.y];
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const bool wide = src_type == ddp_f64 || dst_type == ddp_f64;
  const float fscale = (float)scale;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < e.count;
       i += stride) {
    if (wide)
      ddp_store(e.dst, i, dst_type, ddp_load<double>(e.src, i, src_type) * scale);
    else if (scale == 1.0)
      ddp_store(e.dst, i, dst_type, ddp_load<float>(e.src, i, src_type));
    else
      ddp_store(e.dst, i, dst_type, ddp_load<float>(e.src, i, src_type) * fscale);
  }
}
