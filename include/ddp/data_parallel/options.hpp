// What users set and see of distributed_data_parallel: its options and the
// description of its buckets.
#ifndef DDP_DATA_PARALLEL_OPTIONS_HPP
#define DDP_DATA_PARALLEL_OPTIONS_HPP

#include <ddp/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

struct CUstream_st; // cudaStream_t is CUstream_st*: no CUDA header needed here

DDP_BEGIN_NAMESPACE

struct ddp_options {
  bool broadcast_buffers = true; ///< broadcast rank 0's buffers at the end of every synchronize()
  bool strict_marking = false;   ///< a gradient still unmarked at synchronize() is an error
  bool verify_model = true;      ///< compare names, dtypes and sizes across ranks at construction
  bool uneven_inputs = false;    ///< ranks may run out of data at different steps: enables join()
  /// Before a bucket's reduction, look for NaN and Inf in this rank's host
  /// gradients: every rank then stops at that bucket with an error naming the
  /// rank, the parameter and the step, and no rank reduces it. Off by default,
  /// and under DDP_DEBUG too (dynamic loss scaling expects an Inf now and
  /// then). Costs one read of the gradients per step (docs/performance.md, "Checks").
  bool check_finite = false;
  /// Keep the buckets in the policy's registration-order layout. Without it,
  /// distributed_data_parallel rebuilds them once, after the first step that
  /// communicates, in the order rank 0 marked the gradients ready (a
  /// reorderable policy, host gradients; docs/bucketing.md). Every rank must
  /// set the same value.
  bool pin_bucket_order = false;
  /// Device gradients: the CUDA stream that computes them (a cudaStream_t).
  /// Buckets start after what is queued there when they complete; synchronize()
  /// then makes this stream wait for the reduced gradients instead of blocking
  /// the host (synchronize_blocking() still blocks). Null: the legacy default
  /// stream, and synchronize() blocks.
  CUstream_st* compute_stream = nullptr;
};

/// How a bucket travels.
enum class bucket_path : std::uint8_t {
  in_place,  ///< its gradients are one contiguous range of the wire type: reduced where they lie
  fragments, ///< reduced tensor by tensor where they lie (a fragment_communicator's ring): no copies
  packed,    ///< copied (and converted, scaled) into a buffer kept across steps, and back
};

inline constexpr const char* to_string(bucket_path p) {
  switch (p) {
  case bucket_path::in_place: return "in place";
  case bucket_path::fragments: return "unpacked fragments";
  case bucket_path::packed: return "packed";
  }
  return "?";
}

/// Introspection: one entry per bucket, in launch order.
struct bucket_info {
  std::vector<std::size_t> parameters; ///< indices in registration order
  dtype param_type;
  dtype wire_type;
  std::size_t elements;
  bucket_path path;
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_OPTIONS_HPP
