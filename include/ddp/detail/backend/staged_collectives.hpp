// The interface process_group<B> uses for device tensors when its backend
// takes host memory only (ddp::gloo): each collective is staged through host
// memory and blocks until the result is back in device memory. No CUDA here:
// the implementation (detail/cuda/pinned_staging.hpp) is compiled in where
// DDP_WITH_CUDA is defined, and process_group's layout does not depend on it.
#ifndef DDP_DETAIL_BACKEND_STAGED_COLLECTIVES_HPP
#define DDP_DETAIL_BACKEND_STAGED_COLLECTIVES_HPP

#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <cstddef>

DDP_BEGIN_NAMESPACE
namespace detail {

class staged_collectives {
public:
  virtual ~staged_collectives() = default;
  virtual void all_reduce(void* data, std::size_t n, dtype dt, op o) = 0;
  virtual void broadcast(void* data, std::size_t n, dtype dt, int root) = 0;
  /// `in`: n elements; `out`: n x world size.
  virtual void all_gather(const void* in, void* out, std::size_t n, dtype dt) = 0;
  /// `in`: n x world size elements; `out`: n.
  virtual void reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o) = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_STAGED_COLLECTIVES_HPP
