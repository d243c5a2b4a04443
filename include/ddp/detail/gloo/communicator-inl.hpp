// The definitions of gloo_communicator (communicator.hpp): each hands the call
// to the implementation it points to. Compiled in every translation unit that
// includes it when ddp is header-only, once in the runtime when it is compiled
// separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_GLOO_COMMUNICATOR_INL_HPP
#define DDP_DETAIL_GLOO_COMMUNICATOR_INL_HPP

#include <ddp/detail/gloo/communicator.hpp>
#include <ddp/detail/gloo/communicator_impl.hpp>

#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

static_assert(gloo_communicator::max_piece_bytes == gloo_knobs::max_piece_bytes);

DDP_INLINE gloo_communicator::gloo_communicator(const rendezvous& rv)
    : rank_(rv.topo.rank), size_(rv.topo.world_size), timeout_(rv.timeout),
      impl_(std::make_unique<gloo_communicator_impl>(rv)) {}
DDP_INLINE gloo_communicator::~gloo_communicator() = default;

DDP_INLINE long gloo_communicator::open_files(const ddp::topology& t) {
  return gloo_communicator_impl::open_files(t);
}

DDP_INLINE bool gloo_communicator::shm_active() const { return impl_->shm_active(); }
DDP_INLINE void gloo_communicator::set_shm_step_bytes(std::size_t bytes) { impl_->set_shm_step_bytes(bytes); }
DDP_INLINE std::size_t gloo_communicator::shm_step_bytes() const { return impl_->shm_step_bytes(); }
DDP_INLINE void gloo_communicator::use_shm(bool on) { impl_->use_shm(on); }
DDP_INLINE std::string gloo_communicator::shm_segment_name() const { return impl_->shm_segment_name(); }
DDP_INLINE std::uint64_t gloo_communicator::shm_in_place_runs() const { return impl_->shm_in_place_runs(); }
DDP_INLINE std::uint64_t gloo_communicator::shm_block_runs() const { return impl_->shm_block_runs(); }
DDP_INLINE bool gloo_communicator::is_shm_array_memory(const void* p, std::size_t bytes) const {
  return impl_->is_shm_array_memory(p, bytes);
}
DDP_INLINE shm_memory gloo_communicator::make_shm_memory(std::size_t n, dtype dt, std::size_t elem_size) {
  return impl_->make_shm_array(n, dt, elem_size);
}

DDP_INLINE std::exception_ptr gloo_communicator::poisoned() const { return impl_->poisoned(); }
DDP_INLINE void gloo_communicator::drain() { impl_->drain(); }
DDP_INLINE void gloo_communicator::abort_for_failure(const std::string& reason) {
  impl_->abort_for_failure(reason);
}
DDP_INLINE void gloo_communicator::poison_for_failure(const std::string& reason) {
  impl_->poison_for_failure(reason);
}
DDP_INLINE void gloo_communicator::fail_for_peer(const lost_rank& lost) { impl_->fail_for_peer(lost); }

DDP_INLINE void gloo_communicator::set_ring_piece_bytes(std::size_t bytes) {
  impl_->set_ring_piece_bytes(bytes);
}
DDP_INLINE std::size_t gloo_communicator::ring_piece_bytes() const { return impl_->ring_piece_bytes(); }

DDP_INLINE work gloo_communicator::all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking) {
  return impl_->all_reduce(data, n, dt, o, blocking);
}
DDP_INLINE work gloo_communicator::all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale,
                                                        bool blocking) {
  return impl_->all_reduce_fragments(std::move(frags), dt, scale, blocking);
}
DDP_INLINE work gloo_communicator::broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking) {
  return impl_->broadcast(data, n, dt, root, blocking);
}
DDP_INLINE work gloo_communicator::all_gather(const void* in, void* out, std::size_t n, dtype dt,
                                              bool blocking) {
  return impl_->all_gather(in, out, n, dt, blocking);
}
DDP_INLINE work gloo_communicator::reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o,
                                                  bool blocking) {
  return impl_->reduce_scatter(in, out, n, dt, o, blocking);
}
DDP_INLINE work gloo_communicator::barrier(bool blocking) { return impl_->barrier(blocking); }
DDP_INLINE work gloo_communicator::all_to_all(const void* in, void* out, std::size_t n, dtype dt,
                                              bool blocking) {
  return impl_->all_to_all(in, out, n, dt, blocking);
}
DDP_INLINE work gloo_communicator::all_to_all_v(const void* in, std::vector<std::size_t> send_counts,
                                                void* out, std::vector<std::size_t> recv_counts, dtype dt,
                                                bool blocking) {
  return impl_->all_to_all_v(in, std::move(send_counts), out, std::move(recv_counts), dt, blocking);
}
DDP_INLINE work gloo_communicator::gather(const void* in, void* out, std::size_t n, dtype dt, int root,
                                          bool blocking) {
  return impl_->gather(in, out, n, dt, root, blocking);
}
DDP_INLINE work gloo_communicator::scatter(const void* in, void* out, std::size_t n, dtype dt, int root,
                                           bool blocking) {
  return impl_->scatter(in, out, n, dt, root, blocking);
}
DDP_INLINE work gloo_communicator::refuse(const char* name, dtype dt, int root, std::string why,
                                          bool blocking) {
  return impl_->refuse(name, dt, root, std::move(why), blocking);
}
DDP_INLINE work gloo_communicator::reduce(void* data, std::size_t n, dtype dt, op o, int root,
                                          bool blocking) {
  return impl_->reduce(data, n, dt, o, root, blocking);
}
DDP_INLINE work gloo_communicator::send(const void* data, std::size_t n, dtype dt, int peer, std::int64_t tag,
                                        bool blocking) {
  return impl_->send(data, n, dt, peer, tag, blocking);
}
DDP_INLINE work gloo_communicator::recv(void* data, std::size_t n, dtype dt, int peer, std::int64_t tag,
                                        bool blocking) {
  return impl_->recv(data, n, dt, peer, tag, blocking);
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COMMUNICATOR_INL_HPP
