// The Gloo communicator behind ddp::gloo (backend/gloo.hpp): CPU tensors over
// TCP. Collectives run one at a time, in submission order, on a worker thread
// (Gloo has no non-blocking collectives), each with a fresh tag. The first
// failure closes every connection, so peers fail fast too, and poisons the
// group.
//
// This class is what a user's translation unit sees: declarations and a
// pointer. What it holds and does (the mesh, the collectives, the
// shared-memory path, the blame: its parts in this folder) is
// gloo_communicator_impl (communicator_impl.hpp), which only the runtime's
// definitions include (communicator-inl.hpp), so a file that trains a model
// parses none of it when ddp is compiled separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_GLOO_COMMUNICATOR_HPP
#define DDP_DETAIL_GLOO_COMMUNICATOR_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/op.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>
#include <ddp/work.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_communicator_impl;

class gloo_communicator {
public:
  DDP_INLINE explicit gloo_communicator(const rendezvous& rv);
  gloo_communicator(const gloo_communicator&) = delete;
  gloo_communicator& operator=(const gloo_communicator&) = delete;
  DDP_INLINE ~gloo_communicator(); // the worker stops before the connections go

  /// Subgroups connect their own mesh on the parent's store, under the
  /// rendezvous' key_prefix, and their own node segments where their
  /// layout allows (gloo_shm_path::layout_fits).
  static constexpr bool connects_subgroups = true;

  /// Descriptors a rank holds at its peak: one per peer, its device's epoll and
  /// the eventfd that wakes it; where the node's ranks can share memory, the
  /// segment's two and, on a node leader, the leaders' mesh across nodes
  /// (docs/design-notes.md, "Note [open files]").
  DDP_INLINE static long open_files(const ddp::topology& t);

  /// True when all_reduce goes through the node's shared-memory segment (see
  /// detail/shm/all_reduce.hpp): on by default when ranks share a node, DDP_SHM=0 off.
  DDP_INLINE bool shm_active() const;
  /// The shm path's step size (like set_ring_piece_bytes: tests make it small
  /// to cross step ends; same value on every rank, before collectives); 0
  /// restores the defaults (256 KiB within a node, the whole area across nodes).
  DDP_INLINE void set_shm_step_bytes(std::size_t bytes);
  DDP_INLINE std::size_t shm_step_bytes() const;
  /// Benches compare the two paths in one run: false sends all_reduce,
  /// reduce_scatter and all_gather over TCP again. Every rank must switch at
  /// the same point of its collective sequence.
  DDP_INLINE void use_shm(bool on);
  /// The shm segment's name (tests look for it in /dev/shm); empty when off.
  DDP_INLINE std::string shm_segment_name() const;
  /// All-reduces run in place in a shm array so far (tests check the path taken).
  DDP_INLINE std::uint64_t shm_in_place_runs() const;
  /// reduce_scatters and all_gathers run through the node's segment so far (tests).
  DDP_INLINE std::uint64_t shm_block_runs() const;

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  DDP_INLINE bool is_shm_array_memory(const void* p, std::size_t bytes) const;

  /// `n` zeroed elements in memory every rank of the node sees (ddp::shm_array):
  /// an all_reduce of a range inside it runs in place. Collective: every rank
  /// calls it, in the same order, with the same n and T. It runs in the
  /// group's queue, after the collectives submitted before it. Private memory
  /// where the shm path is off or spans nodes, or when the node's segment for
  /// it (LOCAL_WORLD_SIZE x n x sizeof(T)) cannot be made (rank 0 warns, once per array).
  template <class T> shm_array<T> make_shm_array(std::size_t n) {
    return shm_array<T>(make_shm_memory(n, dtype_v<T>, sizeof(T)), n);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  DDP_INLINE std::exception_ptr poisoned() const;
  DDP_INLINE void drain();

  /// For a rank leaving on an error of its own (process_group::abort, or its
  /// teardown on an escaping exception), from any thread: what is queued fails
  /// with `reason`, every connection fails, so peers blocked on this rank fail
  /// now, not at their timeout, and a collective running here is interrupted
  /// (it fails with `reason` too). Returns without waiting for it.
  DDP_INLINE void abort_for_failure(const std::string& reason);
  /// The first half of abort_for_failure: collectives are refused with
  /// `reason` from now on, and one running now that fails, fails with it,
  /// but nothing is interrupted yet. process_group calls it before it tells
  /// the store, whose news makes the peers close their connections.
  DDP_INLINE void poison_for_failure(const std::string& reason);
  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it, and this rank's TCP
  /// connections close, so a collective waiting here ends now even when it
  /// waits on some other rank. The node's segment is left alone: its waits
  /// read the store themselves, and aborting it would name this rank.
  DDP_INLINE void fail_for_peer(const lost_rank& lost);

  /// The largest message ddp's fragment ring and chain broadcast send (1 MiB
  /// by default; docs/performance.md, Collectives). Like Gloo's
  /// maxSegmentSize: tests make it small so that small tensors cross piece
  /// boundaries. Every rank must use the same value, set before the
  /// collectives it is for.
  DDP_INLINE void set_ring_piece_bytes(std::size_t bytes);
  static constexpr std::size_t max_piece_bytes = std::size_t{1} << 30;
  DDP_INLINE std::size_t ring_piece_bytes() const;

  /// Small tensors (up to 64 KiB at 2-4 ranks) travel with the header: one
  /// round, and every rank reduces all contributions in rank order, so every
  /// rank gets the same bits. Larger ones go around ddp's ring (as buckets
  /// do), the averaging fused into its last reduction step
  /// (docs/performance.md, Collectives).
  DDP_INLINE work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false);
  /// Sums a bucket given as fragments (each tensor where it lies) across ranks,
  /// then multiplies it by `scale`: no packing, and the averaging fused in.
  DDP_INLINE work all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale,
                                       bool blocking = false);
  /// Small tensors travel with the header; larger ones down ddp's chain
  /// (detail/gloo/chain.hpp), once the headers agree.
  DDP_INLINE work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false);
  /// On one node with shm: through the node's segment
  /// (detail/shm/block_collectives.hpp). Else small tensors travel with the
  /// header, larger ones in ddp's block exchange (detail/gloo/exchange.hpp).
  /// `in` may be this rank's own block of `out`.
  DDP_INLINE work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false);
  /// Block r of `in` (n elements each) is reduced across ranks into rank r's `out`,
  /// by its owner in rank order. `out` may be this rank's own block of `in`.
  DDP_INLINE work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o,
                                 bool blocking = false);
  /// The header round is the barrier: no rank leaves it before every rank's
  /// header arrived.
  DDP_INLINE work barrier(bool blocking = false);

  /// Block p of `in` (n elements each) goes to rank p, block p of `out`
  /// comes from rank p; small blocks travel with the header. `in` may be `out`.
  DDP_INLINE work all_to_all(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false);
  /// all_to_all with a count per peer, blocks packed in rank order; every rank
  /// checks every rank's counts, so a disagreement fails alike everywhere.
  DDP_INLINE work all_to_all_v(const void* in, std::vector<std::size_t> send_counts, void* out,
                               std::vector<std::size_t> recv_counts, dtype dt, bool blocking = false);
  /// Root's `out` (size() blocks of n) receives every rank's `in`, in rank order.
  DDP_INLINE work gather(const void* in, void* out, std::size_t n, dtype dt, int root, bool blocking = false);
  /// Block p of root's `in` (size() blocks of n) goes to rank p's `out`.
  DDP_INLINE work scatter(const void* in, void* out, std::size_t n, dtype dt, int root,
                          bool blocking = false);
  /// In place of all_to_all, gather or scatter (`name`) when this rank's
  /// arguments do not fit it (`why`): every rank of the group then fails that
  /// collective with ddp::error(mismatch) at once, not at its timeout. A group
  /// of one rank throws ddp::error(config) and goes on.
  DDP_INLINE work refuse(const char* name, dtype dt, int root, std::string why, bool blocking = false);
  /// Root's `data` becomes the reduction of every rank's (in rank order); the others' stays.
  DDP_INLINE work reduce(void* data, std::size_t n, dtype dt, op o, int root, bool blocking = false);
  /// Point to point, beside the collectives in a lane per peer and direction:
  /// the k-th send to a peer meets its k-th recv from this rank, and they must
  /// agree on count, dtype and tag.
  DDP_INLINE work send(const void* data, std::size_t n, dtype dt, int peer, std::int64_t tag,
                       bool blocking = false);
  DDP_INLINE work recv(void* data, std::size_t n, dtype dt, int peer, std::int64_t tag,
                       bool blocking = false);

private:
  DDP_INLINE shm_memory make_shm_memory(std::size_t n, dtype dt, std::size_t elem_size);

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<gloo_communicator_impl> impl_;
};

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/gloo/communicator-inl.hpp>
#endif

#endif // DDP_DETAIL_GLOO_COMMUNICATOR_HPP
