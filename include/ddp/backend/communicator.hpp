// The backend contract. A backend policy (ddp::gloo, ddp::nccl, or a user's)
// names a communicator type; the communicator connects from a rendezvous and
// runs type-erased collectives on (pointer, count, dtype) in submission order.
// What a backend can do beyond that is a refinement of the concept, and
// process_group and distributed_data_parallel choose their path by which
// refinements the communicator models — never by probing for members at the
// point of use:
//   communicator           host memory; rank/size/timeout; poison state
//   fragment_communicator  reduces a bucket as a list of fragments where its
//                          tensors lie, with a scale fused in (no packing)
//   device_communicator    also takes device pointers (tagged device_memory:
//                          where memory lives is known at compile time)
//   shm_communicator       makes host memory the node's ranks share
//                          (ddp::shm_array) and reduces ranges of it in place
//   abortable_communicator fails the whole group at once from outside a
//                          collective (peers blocked on this rank fail now)
//   peer_failure_communicator
//                          fails the group when the store reports another
//                          rank failed (a wait on a third rank ends now)
//   open_files_communicator
//                          says how many descriptors its connections take,
//                          so the open-files limit is raised before they form
//   extended_communicator  the rest of torch.distributed's collectives on host
//                          memory: send/recv, all_to_all (equal and variable
//                          splits), gather, scatter, reduce
#ifndef DDP_BACKEND_COMMUNICATOR_HPP
#define DDP_BACKEND_COMMUNICATOR_HPP

#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/common/timeout.hpp>
#include <ddp/detail/fault/connect_interrupt.hpp>
#include <ddp/op.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>
#include <ddp/topology.hpp>
#include <ddp/work.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE

/// How init_process_group joins the job; the rendezvous below is built from it.
struct init_options {
  std::string init_method = "env://"; ///< env://, tcp://host:port or file:///shared/dir
  int rank = -1;                      ///< -1: from the environment (topology)
  int world_size = -1;                ///< -1: from the environment
  std::chrono::milliseconds timeout = detail::default_timeout();
  std::string token; ///< empty: DDP_TOKEN (set per job by ddprun)
};

/// What a communicator needs to connect: the resolved topology, timeout,
/// token and (for env:// and tcp://) the job's tcp_store. Built by
/// init_process_group.
struct rendezvous {
  ddp::topology topo; ///< rank/world_size already overridden by init_options
  std::chrono::milliseconds timeout{};
  std::string token;
  std::shared_ptr<tcp_store> store; ///< null for file://
  std::string file_path;            ///< the directory of file://
  /// Set by process_group where it watches the store for failed ranks: a
  /// communicator still connecting may register here what ends its waits
  /// for a rank lost meanwhile (ddp::gloo does: the news names the rank).
  /// Null: nothing does.
  std::shared_ptr<detail::connect_interrupt> interrupt;
  /// Set for a subgroup (process_group::new_group, split): the store keys of
  /// its connections start with it, so that its mesh forms beside its
  /// parent's on the same store. Empty: the job's own group.
  std::string key_prefix;
  /// A subgroup's name, as its errors and flight recorder give it
  /// ("group 1 of ranks 0, 2"); empty for the job's own group.
  std::string group_name;
  /// A subgroup's ranks as the job numbers them (the store's keys of lost,
  /// finished and stalled ranks do), in the subgroup's order; empty for the
  /// job's own group.
  std::vector<int> job_ranks;
  /// A subgroup's own layout (its members on this rank's node, its nodes), as
  /// its topology() gives it: where the node's shared memory can serve it.
  /// `topo` keeps the job's layout, which picks the transport's interface.
  /// Unused for the job's own group.
  ddp::topology group_layout;
};

namespace detail {
using ddp::rendezvous; // its name before the backend contract was written down
} // namespace detail

/// Tags a collective's pointers as device memory (for a device_communicator).
struct device_memory_t {
  explicit device_memory_t() = default;
};
inline constexpr device_memory_t device_memory{};

/// The collectives every backend offers, on host memory. `blocking` tells the
/// backend that the caller waits at once (it may then run the collective inline).
/// Every collective returns a ddp::work; the first failure poisons the
/// communicator, and every pending and later work fails with that error.
template <class C>
concept communicator = std::constructible_from<C, const rendezvous&> &&
    requires(C& c, const C& cc, void* p, const void* in, std::size_t n, dtype dt, op o, int root,
             bool blocking) {
  { cc.rank() } -> std::same_as<int>;
  { cc.size() } -> std::same_as<int>;
  { cc.timeout() } -> std::same_as<std::chrono::milliseconds>;
  { cc.poisoned() } -> std::same_as<std::exception_ptr>;
  c.drain();
  { c.all_reduce(p, n, dt, o, blocking) } -> std::same_as<work>;
  { c.broadcast(p, n, dt, root, blocking) } -> std::same_as<work>;
  { c.all_gather(in, p, n, dt, blocking) } -> std::same_as<work>;
  { c.reduce_scatter(in, p, n, dt, o, blocking) } -> std::same_as<work>;
  { c.barrier(blocking) } -> std::same_as<work>;
};

/// Sums a bucket given as fragments (each tensor where it lies) across ranks
/// and multiplies the result by a scale (1/W for a mean): no packing copies,
/// and the averaging fused into the pass that already touches the data.
template <class C>
concept fragment_communicator = communicator<C> &&
    requires(C& c, std::vector<detail::fragment> frags, dtype dt, double scale, bool blocking) {
  { c.all_reduce_fragments(std::move(frags), dt, scale, blocking) } -> std::same_as<work>;
};

/// Also takes pointers to device memory, tagged `device_memory`.
template <class C>
concept device_communicator = communicator<C> &&
    requires(C& c, void* p, const void* in, std::size_t n, dtype dt, op o, int root, bool blocking) {
  { c.all_reduce(device_memory, p, n, dt, o, blocking) } -> std::same_as<work>;
  { c.broadcast(device_memory, p, n, dt, root, blocking) } -> std::same_as<work>;
  { c.all_gather(device_memory, in, p, n, dt, blocking) } -> std::same_as<work>;
  { c.reduce_scatter(device_memory, in, p, n, dt, o, blocking) } -> std::same_as<work>;
};

/// Makes arrays in memory every rank of the node sees (collectively), and says
/// whether a range lies in one: an all_reduce of it runs in place there, and a
/// joined rank's zeros must go there too (host_bucket_engine::reduce_zeros).
template <class C>
concept shm_communicator = communicator<C> && requires(C& c, std::size_t n, const void* p) {
  { c.template make_shm_array<float>(n) } -> std::same_as<shm_array<float>>;
  { c.is_shm_array_memory(p, n) } -> std::same_as<bool>;
};

/// Fails the group at once from outside a collective, for an error of this
/// rank's own: what is queued fails, then every connection closes, so peers
/// blocked on this rank fail now and name it instead of waiting for their
/// timeout. process_group uses it when an exception leaves it, and when a
/// device tensor's staging copy fails between its collectives (ddp::gloo).
template <class C>
concept abortable_communicator = communicator<C> && requires(C& c, const std::string& why) {
  c.abort_for_failure(why);
};

/// Fails the group from outside a collective because another rank failed, as
/// the store reports it (detail::peer_failure_watch, which process_group runs
/// for such a communicator): collectives refuse from then on, naming that
/// rank, and one waiting now ends now, even on a rank that waits on some
/// third rank. Called at most once: from the watch's thread, or, for a failure
/// heard while the communicator was being built, from process_group's
/// constructor right after (peer_failure_relay.hpp).
template <class C>
concept peer_failure_communicator = communicator<C> && requires(C& c, const lost_rank& lost) {
  c.fail_for_peer(lost);
};

/// Says how many descriptors its connections take at a topology (a static
/// function: asked before it connects), so that init_process_group raises the
/// open-files limit, or refuses the job clearly, before the mesh runs out.
template <class C>
concept open_files_communicator = communicator<C> && requires(const ddp::topology& t) {
  { C::open_files(t) } -> std::convertible_to<long>;
};

/// The rest of torch.distributed's collectives, on host memory: point to
/// point (`tag` must match; the k-th send of a rank to a peer meets the
/// peer's k-th recv from it), all_to_all with equal blocks or a count per peer (blocks
/// packed in rank order), gather, scatter and reduce to a root. ddp::gloo
/// models it; ddp::nccl does not yet (process_group says so at compile time).
template <class C>
concept extended_communicator = communicator<C> &&
    requires(C& c, void* p, const void* in, std::size_t n, dtype dt, op o, int root, std::int64_t tag,
             std::vector<std::size_t> counts, bool blocking) {
  { c.send(in, n, dt, root, tag, blocking) } -> std::same_as<work>;
  { c.recv(p, n, dt, root, tag, blocking) } -> std::same_as<work>;
  { c.all_to_all(in, p, n, dt, blocking) } -> std::same_as<work>;
  { c.all_to_all_v(in, counts, p, counts, dt, blocking) } -> std::same_as<work>;
  { c.gather(in, p, n, dt, root, blocking) } -> std::same_as<work>;
  { c.scatter(in, p, n, dt, root, blocking) } -> std::same_as<work>;
  { c.reduce(p, n, dt, o, root, blocking) } -> std::same_as<work>;
};

/// Connects a subgroup from a rendezvous whose key_prefix is set (its mesh on
/// the parent's store, beside the parent's), so process_group::new_group and
/// split can make one. ddp::gloo does (through the node's shared memory
/// where the subgroup's members on each node allow it, else over TCP).
template <class C>
concept subgroup_communicator = communicator<C> && C::connects_subgroups;

/// A backend policy: a name and a communicator type.
template <class B>
concept backend_policy = requires {
  typename B::communicator;
  { B::name } -> std::convertible_to<std::string_view>;
}
&&communicator<typename B::communicator>;

/// Whether tensors in device memory may be given to this backend's collectives.
template <class B>
inline constexpr bool accepts_device_tensors_v = device_communicator<typename B::communicator>;

DDP_END_NAMESPACE

#endif // DDP_BACKEND_COMMUNICATOR_HPP
