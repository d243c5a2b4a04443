// The checks on where the gradients lie, at construction and whenever their
// storage moved: a null pointer under a non-empty gradient, and gradients
// that share memory. Shared memory is refused, not reduced once: ranks would
// reduce the shared elements once per parameter, and which parameter's name
// the reduced value belongs to is the user's to say (a tied parameter is
// listed once, as the LibTorch adapter lists it).
#ifndef DDP_DETAIL_DATA_PARALLEL_GRADIENT_STORAGE_HPP
#define DDP_DETAIL_DATA_PARALLEL_GRADIENT_STORAGE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>

#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Throws ddp::error(config) naming the parameter(s) and `rank` when a
/// non-empty parameter's value or gradient pointer is null, or when two
/// gradients overlap (a parameter listed twice, or two sharing one buffer).
DDP_INLINE void check_gradient_storage(const std::vector<tensor_slot>& params, int rank);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/gradient_storage-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_GRADIENT_STORAGE_HPP
