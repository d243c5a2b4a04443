// Where the first NaN or Inf of a tensor is, by the bits of its exponent:
// exact for every floating dtype ddp reduces (half and bfloat16 too) and
// unaffected by the floating-point environment or -ffast-math.
#ifndef DDP_DETAIL_NUMERIC_FINITE_HPP
#define DDP_DETAIL_NUMERIC_FINITE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/tensor.hpp>

#include <cstddef>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The index of the first non-finite element of `data` (n elements of `type`),
/// or n when all are finite or the type is not floating point.
DDP_INLINE std::size_t first_non_finite(const void* data, std::size_t n, dtype type);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/numeric/finite-inl.hpp>
#endif

#endif // DDP_DETAIL_NUMERIC_FINITE_HPP
