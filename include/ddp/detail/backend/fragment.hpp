// A contiguous piece of a bucket: one tensor's memory, as a backend sees it.
#ifndef DDP_DETAIL_FRAGMENT_HPP
#define DDP_DETAIL_FRAGMENT_HPP

#include <ddp/config.hpp>

#include <cstddef>

DDP_BEGIN_NAMESPACE
namespace detail {

struct fragment {
  void* data;
  std::size_t count; ///< elements
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_FRAGMENT_HPP
