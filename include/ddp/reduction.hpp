// Reduction policies (PyTorch's communication hooks): how a bucket is averaged
// and in which dtype it travels.
//
// Error of the compressed ones, per element, for gradients g_r on W ranks:
// each g_r / W is rounded once to the wire type (error <= eps * max|g| / W
// each) and the ring rounds each of the W - 1 partial sums (<= max|g| in
// magnitude, error <= eps * max|g| each), so |result - mean| <= W * eps *
// max_r |g_r|, with eps = 2^-11 (fp16) or 2^-8 (bf16): about 3 (fp16) or 2
// (bf16) significant decimal digits. At W <= 4 the error stays under
// 2 * eps * max_r |g_r|, which tests/dist/test_data_parallel.cpp checks.
// fp16 overflows above 65504: use bf16 for gradients that large.
#ifndef DDP_REDUCTION_HPP
#define DDP_REDUCTION_HPP

#include <ddp/tensor.hpp>

#include <concepts>

DDP_BEGIN_NAMESPACE

template <class R>
concept reduction_policy = requires(dtype d) {
  { R::average } -> std::convertible_to<bool>;
  { R::wire(d) } -> std::same_as<dtype>;
};

namespace reduction {

/// The average over ranks. The division is fused into a pass that touches the
/// data anyway: the last reduction step of ddp's ring (Gloo, unpacked buckets)
/// or the packing copy; only a contiguous bucket on a backend without the ring
/// (NCCL) is scaled in place before sending.
struct mean {
  static constexpr bool average = true;
  static constexpr dtype wire(dtype d) { return d; }
};

/// The plain sum over ranks.
struct sum {
  static constexpr bool average = false;
  static constexpr dtype wire(dtype d) { return d; }
};

/// Mean, sent as IEEE fp16: half the bytes of float32.
struct fp16_compressed_mean {
  static constexpr bool average = true;
  static constexpr dtype wire(dtype d) { return d == dtype::bf16 ? d : dtype::f16; }
};

/// Mean, sent as bfloat16: float32's range, fewer digits.
struct bf16_compressed_mean {
  static constexpr bool average = true;
  static constexpr dtype wire(dtype d) { return d == dtype::f16 ? d : dtype::bf16; }
};

} // namespace reduction
DDP_END_NAMESPACE

#endif // DDP_REDUCTION_HPP
