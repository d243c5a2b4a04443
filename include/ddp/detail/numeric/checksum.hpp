// A fast, non-cryptographic 64-bit checksum of a byte range, for comparing
// parameters across ranks (DDP_DEBUG=DETAIL): equal bytes give equal sums on
// every rank of one build; a single changed bit changes the sum.
#ifndef DDP_DETAIL_NUMERIC_CHECKSUM_HPP
#define DDP_DETAIL_NUMERIC_CHECKSUM_HPP

#include <ddp/detail/common/linkage.hpp>

#include <cstddef>
#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE std::uint64_t checksum(const void* data, std::size_t bytes) noexcept;

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/numeric/checksum-inl.hpp>
#endif

#endif // DDP_DETAIL_NUMERIC_CHECKSUM_HPP
