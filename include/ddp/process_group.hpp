// ddp::process_group<Backend> and ddp::init_process_group<Backend>().
#ifndef DDP_PROCESS_GROUP_HPP
#define DDP_PROCESS_GROUP_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/staged_collectives.hpp>
#include <ddp/detail/common/failure_note.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/open_files.hpp>
#include <ddp/detail/common/timeout.hpp>
#include <ddp/detail/process_group/make_rendezvous.hpp>
#include <ddp/detail/process_group/peer_failure_relay.hpp>
#include <ddp/detail/process_group/peer_failure_watch.hpp>
#include <ddp/detail/process_group/split_counts.hpp>
#include <ddp/op.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>
#include <ddp/topology.hpp>
#include <ddp/work.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

// Device tensors on a host-only backend are staged through pinned memory where
// ddp is built with CUDA (ddp::cuda and ddp::nccl define these).
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/cuda/pinned_staging.hpp>
#define DDP_DETAIL_PINNED_STAGING 1
#endif

DDP_BEGIN_NAMESPACE

template <class Backend> class process_group {
  static_assert(backend_policy<Backend>,
                "ddp: process_group<B> needs a backend policy such as ddp::gloo or ddp::nccl: a type with "
                "`static constexpr std::string_view name` and `using communicator = ...;` naming a type that "
                "models ddp::communicator (see ddp/backend/communicator.hpp).");

public:
  using backend_type = Backend;

  /// Prefer init_process_group<Backend>(); this connects from a prepared rendezvous.
  explicit process_group(rendezvous rv);

  process_group(const process_group&) = delete;
  process_group& operator=(const process_group&) = delete;
  process_group(process_group&&) = delete;

  /// Finishes queued collectives, then leaves in step with the other ranks:
  /// rank 0 serves the store, so it waits (bounded) until every rank is done with it.
  ///
  /// A subgroup (new_group, split) drains and goes; while an exception
  /// unwinds it, it fails only its own mesh (its members fail at once), not
  /// the job.
  ///
  /// Unless this rank is leaving on an error of its own (an exception escaping
  /// while the job's own group is healthy): then the exit barrier would hold every peer
  /// blocked in a collective until its timeout
  /// (docs/design-notes.md, "Note [leaving on an error]"). Instead it tells
  /// the launcher and the store that it failed, then closes its connections,
  /// so its peers fail within a second and name it.
  ~process_group();

  /// This rank's rank in the group; -1 on a rank that is not a member (is_member()).
  int rank() const noexcept { return comm_ ? topo_.rank : -1; }
  /// The job's layout for the job's own group; a subgroup's own for a subgroup
  /// (its members on this node, its nodes), rank -1 on a rank left out.
  int size() const noexcept { return topo_.world_size; }
  const ddp::topology& topology() const noexcept { return topo_; }
  std::chrono::milliseconds timeout() const { return base_.timeout; }
  /// Expires when this group is destroyed: an object that keeps a reference
  /// to the group (distributed_data_parallel) checks it before each use.
  std::weak_ptr<const void> lifetime() const noexcept { return alive_; }
  /// The job's store (null with file:// init).
  tcp_store* store() const noexcept { return store_.get(); }
  typename Backend::communicator& communicator() { return member("communicator()"); }

  /// A group of some of this group's ranks, numbered in the order `ranks`
  /// lists them (ranks of this group, each once). Collective: every rank of
  /// this group calls it with the same list (checked: ddp::error(mismatch)
  /// on every rank otherwise). A rank not in `ranks` gets a group it cannot
  /// use (is_member() false, rank() -1: each collective throws, naming the
  /// group). The new group connects its own mesh on the job's store, over TCP
  /// (the node's shared memory stays the job's own group's), runs its own
  /// queue (its collectives may be in flight beside this group's), and may
  /// itself make groups. It keeps the store alive; destroy it before the
  /// process ends, like any group. Make groups from one thread, in the same
  /// order on every rank (each call is numbered, the number checked across
  /// ranks: ddp::error(mismatch) on every rank otherwise). ddp::gloo.
  [[nodiscard]] process_group new_group(const std::vector<int>& ranks);
  /// MPI_Comm_split: the ranks that pass the same `color` form one group,
  /// numbered by `key` (ties by their rank here); a negative color joins none
  /// (is_member() false). Collective over this group.
  [[nodiscard]] process_group split(int color, int key = 0);
  /// False on a rank that new_group or split left out of this group.
  bool is_member() const noexcept { return comm_ != nullptr; }
  /// "" for the job's own group; else how errors name it ("group 1 (global ranks 0, 2)").
  const std::string& name() const noexcept { return name_; }
  /// This group's ranks as ranks of the job (the launcher's RANK), by their rank here.
  const std::vector<int>& global_ranks() const noexcept { return global_ranks_; }

  /// Reduces `t` across ranks in place. `t` must stay alive until the work completes.
  ///
  /// Device tensors (ddp::device_span) go to a device backend (ddp::nccl) as
  /// they are. On a host backend (ddp::gloo) the blocking forms stage them
  /// through a pinned host buffer and return once the result is back in device
  /// memory; the copies follow the legacy default stream (like cudaMemcpy).
  /// Needs ddp built with CUDA (link ddp::cuda). The _async forms refuse them
  /// there at compile time: distributed_data_parallel overlaps the staging of
  /// device gradients with backward instead.
  ///
  /// A tensor may be a temporary view (`pg.all_reduce(std::span<float>(p, n))`,
  /// ddp::device_span, an Eigen Map or column; ddp::tensor_view): it names the
  /// elements it views. A temporary that owns its elements (a std::vector made
  /// in the call) is refused at compile time where the collective writes into
  /// it (the result would die with it) and, as input, by the _async forms.
  template <class T> work all_reduce_async(T&& t, op o = op::sum) {
    if constexpr (writable_output<T>()) {
      require_async_allowed<T>();
      return all_reduce_impl(t, o, false);
    } else {
      return {};
    }
  }
  template <class T> void all_reduce(T&& t, op o = op::sum) {
    if constexpr (writable_output<T>()) all_reduce_impl(t, o, true).wait();
  }

  /// Copies rank `root`'s `t` into every rank's `t`.
  template <class T> work broadcast_async(T&& t, int root = 0) {
    if constexpr (writable_output<T>()) {
      require_async_allowed<T>();
      return broadcast_impl(t, root, false);
    } else {
      return {};
    }
  }
  template <class T> void broadcast(T&& t, int root = 0) {
    if constexpr (writable_output<T>()) broadcast_impl(t, root, true).wait();
  }

  /// `out` (size() * in.size() elements) receives every rank's `in`, in rank order.
  template <class In, class Out> work all_gather_async(In&& in, Out&& out) {
    if constexpr (async_input<In>() && writable_output<Out>()) {
      require_async_allowed<const std::remove_reference_t<In>, Out>();
      return all_gather_impl(std::as_const(in), out, false);
    } else {
      return {};
    }
  }
  template <class In, class Out> void all_gather(const In& in, Out&& out) {
    if constexpr (writable_output<Out>()) all_gather_impl(in, out, true).wait();
  }

  /// Rank r receives in `out` the reduction of block r (out.size() elements) of every rank's `in`.
  template <class In, class Out> work reduce_scatter_async(In&& in, Out&& out, op o = op::sum) {
    if constexpr (async_input<In>() && writable_output<Out>()) {
      require_async_allowed<const std::remove_reference_t<In>, Out>();
      return reduce_scatter_impl(std::as_const(in), out, o, false);
    } else {
      return {};
    }
  }
  template <class In, class Out> void reduce_scatter(const In& in, Out&& out, op o = op::sum) {
    if constexpr (writable_output<Out>()) reduce_scatter_impl(in, out, o, true).wait();
  }

  /// Sends `t` to rank `dst`; rank `dst` receives it with recv(t, this rank).
  /// The k-th send of a rank to a peer meets the peer's k-th recv from it, and
  /// they must agree on count, dtype and `tag` (else ddp::error(mismatch) on
  /// both). Messages run beside the group's collectives, in a lane per peer
  /// and direction: a send waits for its recv, but holds up nothing else, so
  /// both ranks of a pair may send_async first (a blocking send waits there).
  /// Wait for each one before the group goes: teardown fails a message still
  /// pending (naming it) instead of waiting for it. ddp::gloo, host memory.
  template <class T> work send_async(T&& t, int dst, std::int64_t tag = 0) {
    if constexpr (async_input<T>()) {
      return extended<const std::remove_reference_t<T>>(
          "send", [&](auto& c, auto s, dtype dt) { return c.send(s.data(), s.size(), dt, dst, tag, false); },
          std::as_const(t));
    } else {
      return {};
    }
  }
  template <class T> void send(const T& t, int dst, std::int64_t tag = 0) {
    extended<const T>(
        "send", [&](auto& c, auto s, dtype dt) { return c.send(s.data(), s.size(), dt, dst, tag, true); }, t)
        .wait();
  }
  /// Receives into `t` what rank `src` sends with send(t, this rank) (see send).
  template <class T> work recv_async(T&& t, int src, std::int64_t tag = 0) {
    if constexpr (writable_output<T>()) {
      return extended<std::remove_reference_t<T>>(
          "recv", [&](auto& c, auto s, dtype dt) { return c.recv(s.data(), s.size(), dt, src, tag, false); },
          t);
    } else {
      return {};
    }
  }
  template <class T> void recv(T&& t, int src, std::int64_t tag = 0) {
    if constexpr (writable_output<T>())
      extended<std::remove_reference_t<T>>(
          "recv", [&](auto& c, auto s, dtype dt) { return c.recv(s.data(), s.size(), dt, src, tag, true); },
          t)
          .wait();
  }

  /// Block p of `in` (in.size() / size() elements) goes to rank p; block p of
  /// `out` (the same size) comes from rank p. `in` may be `out`.
  template <class In, class Out> work all_to_all_async(In&& in, Out&& out) {
    if constexpr (async_input<In>() && writable_output<Out>())
      return all_to_all_impl(std::as_const(in), out, false);
    else
      return {};
  }
  template <class In, class Out> void all_to_all(const In& in, Out&& out) {
    if constexpr (writable_output<Out>()) all_to_all_impl(in, out, true).wait();
  }
  /// With a count per peer (torch's all_to_all_single with split sizes): send_counts[p]
  /// elements of `in` go to rank p, recv_counts[p] of `out` come from it, blocks
  /// packed in rank order. Rank r's send_counts[p] must be rank p's recv_counts[r]
  /// (checked on every rank: mismatch, naming the pair).
  template <class In, class Out>
  work all_to_all_async(In&& in, Out&& out, std::vector<std::size_t> send_counts,
                        std::vector<std::size_t> recv_counts) {
    if constexpr (async_input<In>() && writable_output<Out>())
      return all_to_all_v_impl(std::as_const(in), out, std::move(send_counts), std::move(recv_counts), false);
    else
      return {};
  }
  template <class In, class Out>
  void all_to_all(const In& in, Out&& out, std::vector<std::size_t> send_counts,
                  std::vector<std::size_t> recv_counts) {
    if constexpr (writable_output<Out>())
      all_to_all_v_impl(in, out, std::move(send_counts), std::move(recv_counts), true).wait();
  }

  /// Rank `root`'s `out` (size() * in.size() elements) receives every rank's
  /// `in`, in rank order; elsewhere `out` is not touched (it may be empty).
  template <class In, class Out> work gather_async(In&& in, Out&& out, int root = 0) {
    if constexpr (async_input<In>() && writable_output<Out>())
      return rooted_impl<true>(std::as_const(in), out, root, false);
    else
      return {};
  }
  template <class In, class Out> void gather(const In& in, Out&& out, int root = 0) {
    if constexpr (writable_output<Out>()) rooted_impl<true>(in, out, root, true).wait();
  }
  /// Block p of rank `root`'s `in` (size() * out.size() elements) goes to rank
  /// p's `out`; elsewhere `in` is not read (it may be empty).
  template <class In, class Out> work scatter_async(In&& in, Out&& out, int root = 0) {
    if constexpr (async_input<In>() && writable_output<Out>())
      return rooted_impl<false>(std::as_const(in), out, root, false);
    else
      return {};
  }
  template <class In, class Out> void scatter(const In& in, Out&& out, int root = 0) {
    if constexpr (writable_output<Out>()) rooted_impl<false>(in, out, root, true).wait();
  }
  /// Rank `root`'s `t` becomes the reduction of every rank's `t` (reduced in
  /// rank order); the other ranks' `t` is left as it was.
  template <class T> work reduce_async(T&& t, int root, op o = op::sum) {
    if constexpr (writable_output<T>()) {
      check_root(root, "reduce");
      return extended<std::remove_reference_t<T>>(
          "reduce",
          [&](auto& c, auto s, dtype dt) { return c.reduce(s.data(), s.size(), dt, o, root, false); }, t);
    } else {
      return {};
    }
  }
  template <class T> void reduce(T&& t, int root, op o = op::sum) {
    if constexpr (writable_output<T>()) {
      check_root(root, "reduce");
      extended<std::remove_reference_t<T>>(
          "reduce",
          [&](auto& c, auto s, dtype dt) { return c.reduce(s.data(), s.size(), dt, o, root, true); }, t)
          .wait();
    }
  }

  /// `n` zeroed elements of host memory that every rank of this node can see
  /// (ddp/shm_array.hpp): an all_reduce of a range inside it runs in place,
  /// without copies through the node's segment. Collective: every rank calls
  /// it, in the same order, with the same n and T. ddp::gloo only.
  template <class T> [[nodiscard]] shm_array<T> make_shm_array(std::size_t n) {
    if constexpr (!element<T>) {
      static_assert(element<T>, "ddp: make_shm_array<T> needs an element type the collectives reduce "
                                "(float, double, ddp::half, std::int32_t, ...): make one array per field");
      return {};
    } else if constexpr (shm_communicator<typename Backend::communicator>) {
      return member("make_shm_array").template make_shm_array<T>(n);
    } else {
      static_assert(sizeof(T) == 0, "ddp: make_shm_array is a feature of ddp::gloo (host memory shared by "
                                    "the ranks of a node); this backend has none");
      return {};
    }
  }

  work barrier_async() { return member("barrier").barrier(false); }
  void barrier() { member("barrier").barrier(true).wait(); }

  /// This rank cannot go on, for a reason of its own (bad data, a failed
  /// device copy): instead of letting its peers wait for it until their
  /// timeout, the launcher and the store are told, and the communicator
  /// (ddp::gloo closes its connections, ddp::nccl aborts its communicator). A
  /// collective running here fails at once with the same error; so does every
  /// later one; teardown skips the exit barrier. The peers fail within a
  /// second, naming this rank and `reason`: their groups watch the store
  /// (detail::peer_failure_watch). distributed_data_parallel calls it when its
  /// own work before a collective fails. Does nothing once the group has
  /// failed.
  void abort(std::string_view reason) noexcept;

private:
  struct subgroup_t {};
  /// A subgroup of `parent`: `members` are parent ranks in their new order
  /// (empty: this rank is not a member).
  process_group(subgroup_t, const process_group& parent, const std::vector<int>& members,
                const std::vector<int>& nodes, std::string prefix, std::string name);
  /// new_group and split: every rank's (color, key, what) gathered, `what` checked equal.
  /// `listed`: new_group's ranks, which are the members whatever the colors.
  process_group make_subgroup(int color, int key, std::int64_t what, const char* call,
                              const std::vector<int>* listed = nullptr);

  /// The communicator, for a member; else ddp::error(config) naming `what` and the group.
  typename Backend::communicator& member(const char* what) {
    if (!comm_) not_a_member(what);
    return *comm_;
  }
  [[noreturn]] void not_a_member(const char* what) const {
    detail::throw_error(error_kind::config,
                        {what, " on job rank ", job_rank_, ": this rank is not a member of ", name_,
                         " (new_group or split left it out): only its members may use it"});
  }

  /// Another rank's failure, as the store records it, fails this group at
  /// once (see peer_failure_watch.hpp), or its connect while the communicator
  /// is being built (peer_failure_relay.hpp). The group works without the watch.
  void start_peer_watch();

  /// A rank whose communicator could not connect for a reason of its own (a
  /// peer's address it cannot reach, a device it cannot make) tells the store
  /// before it throws: its peers, waiting for its connections, then stop at
  /// once and name it (peer_failure_relay.hpp) instead of waiting DDP_TIMEOUT
  /// (docs/design-notes.md, "Note [failure during connect]").
  /// Its exception going out unwinds the store's client, which says goodbye:
  /// without the report, nobody would hear of the failure. Not reported: a
  /// failure for another rank's loss (peer_lost), a timeout (the rank waited
  /// for is to blame), or any failure once the store knows of a lost rank
  /// (this rank's is then likely its consequence: the rank that failed first
  /// reports after a grace of its own, detail/gloo/blame.hpp's find_lost_rank).
  void report_failed_connect(const std::exception& e) noexcept;

  void leave_on_own_failure() noexcept;

  /// This rank failed on its own, outside the group's collectives: the
  /// launcher, the store (peers then name this rank and `reason` within a
  /// second) and every connection (peers blocked on this rank fail now) are
  /// told; the group refuses later collectives. Not a teardown: the caller
  /// decides what happens to the group object.
  void fail_job(const std::string& reason, const char* what_happened) noexcept;

  template <class T> work all_reduce_impl(T& t, op o, bool blocking) {
    if constexpr (usable<T>()) {
      auto s = as_span(t);
      if constexpr (staged<T>()) {
        staging().all_reduce(s.data(), s.size(), dtype_v<tensor_value_t<T>>, o);
        return {};
      } else {
        return in_space<T>([&](auto... where) {
          return member("all_reduce")
              .all_reduce(where..., s.data(), s.size(), dtype_v<tensor_value_t<T>>, o, blocking);
        });
      }
    } else {
      return {};
    }
  }

  template <class T> work broadcast_impl(T& t, int root, bool blocking) {
    if constexpr (usable<T>()) {
      check_root(root, "broadcast");
      auto s = as_span(t);
      if constexpr (staged<T>()) {
        staging().broadcast(s.data(), s.size(), dtype_v<tensor_value_t<T>>, root);
        return {};
      } else {
        return in_space<T>([&](auto... where) {
          return member("broadcast")
              .broadcast(where..., s.data(), s.size(), dtype_v<tensor_value_t<T>>, root, blocking);
        });
      }
    } else {
      return {};
    }
  }

  template <class In, class Out> work all_gather_impl(const In& in, Out& out, bool blocking) {
    if constexpr (usable<const In, Out>()) {
      static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                    "ddp: all_gather needs input and output of the same element type");
      auto i = as_span(in);
      auto o = as_span(out);
      if (o.size() != i.size() * static_cast<std::size_t>(size()))
        detail::throw_error(error_kind::config,
                            {"all_gather on rank ", rank(), ": output has ", o.size(),
                             " elements, expected world size ", size(), " x input ", i.size()});
      if constexpr (staged<const In, Out>()) {
        staging().all_gather(i.data(), o.data(), i.size(), dtype_v<tensor_value_t<Out>>);
        return {};
      } else {
        return in_space<const In, Out>([&](auto... where) {
          return member("all_gather")
              .all_gather(where..., i.data(), o.data(), i.size(), dtype_v<tensor_value_t<Out>>, blocking);
        });
      }
    } else {
      return {};
    }
  }

  template <class In, class Out> work reduce_scatter_impl(const In& in, Out& out, op o, bool blocking) {
    if constexpr (usable<const In, Out>()) {
      static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                    "ddp: reduce_scatter needs input and output of the same element type");
      auto i = as_span(in);
      auto s = as_span(out);
      if (i.size() != s.size() * static_cast<std::size_t>(size()))
        detail::throw_error(error_kind::config,
                            {"reduce_scatter on rank ", rank(), ": input has ", i.size(),
                             " elements, expected world size ", size(), " x output ", s.size()});
      if constexpr (staged<const In, Out>()) {
        staging().reduce_scatter(i.data(), s.data(), s.size(), dtype_v<tensor_value_t<Out>>, o);
        return {};
      } else {
        return in_space<const In, Out>([&](auto... where) {
          return member("reduce_scatter")
              .reduce_scatter(where..., i.data(), s.data(), s.size(), dtype_v<tensor_value_t<Out>>, o,
                              blocking);
        });
      }
    } else {
      return {};
    }
  }

  /// Runs `f(communicator, span of the first tensor, dtype)` for a collective
  /// of extended_communicator, once the tensors `T...` (the first gives the
  /// span) pass usable() and the backend and memory checks below; otherwise
  /// one static_assert says why and nothing else compiles.
  template <class T, class... More, class F, class U> work extended(const char* name, F&& f, U& t) {
    if constexpr (!usable<T, More...>()) {
      return {};
    } else if constexpr (!extended_communicator<typename Backend::communicator>) {
      static_assert(extended_communicator<typename Backend::communicator>,
                    "ddp: send/recv, all_to_all, gather, scatter and reduce are offered by ddp::gloo; this "
                    "backend (ddp::nccl) has none yet: run them on a ddp::gloo group of the same ranks");
      return {};
    } else if constexpr (on_device_v<std::remove_cv_t<T>> || (on_device_v<std::remove_cv_t<More>> || ...)) {
      static_assert(sizeof(T) == 0,
                    "ddp: send/recv, all_to_all, gather, scatter and reduce take host memory: copy device "
                    "tensors to the host first (cudaMemcpy), then call the collective");
      return {};
    } else {
      auto s = as_span(t);
      return f(member(name), s, dtype_v<std::remove_cv_t<tensor_value_t<T>>>);
    }
  }

  template <class In, class Out> work all_to_all_impl(const In& in, Out& out, bool blocking) {
    return extended<const In, Out>(
        "all_to_all",
        [&](auto& c, auto i, dtype dt) {
          static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                        "ddp: all_to_all needs input and output of the same element type");
          auto o = as_span(out);
          // Refused in the group's header round: every rank fails now, not its peers at their timeout.
          if (i.size() != o.size() || i.size() % static_cast<std::size_t>(size()) != 0)
            return c.refuse(
                "all_to_all", dt, 0,
                detail::message({"all_to_all on rank ", rank(), ": input has ", i.size(),
                                 " elements, output ", o.size(), "; both must hold world size ", size(),
                                 " blocks of the same count (for other splits pass send_counts and "
                                 "recv_counts)"}),
                blocking);
          return c.all_to_all(i.data(), o.data(), i.size() / static_cast<std::size_t>(size()), dt, blocking);
        },
        in);
  }

  template <class In, class Out>
  work all_to_all_v_impl(const In& in, Out& out, std::vector<std::size_t> sc, std::vector<std::size_t> rc,
                         bool blocking) {
    return extended<const In, Out>(
        "all_to_all",
        [&](auto& c, auto i, dtype dt) {
          static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                        "ddp: all_to_all needs input and output of the same element type");
          auto o = as_span(out);
          try {
            detail::check_split_counts("all_to_all", rank(), size(), i.size(), sc, o.size(), rc);
          } catch (const error& e) { // refused in the header round: every rank fails now
            return c.refuse("all_to_all", dt, 0, std::string(e.message()), blocking);
          }
          return c.all_to_all_v(i.data(), std::move(sc), o.data(), std::move(rc), dt, blocking);
        },
        in);
  }

  /// gather (`to_root`) or scatter: the root's side holds size() blocks.
  template <bool to_root, class In, class Out>
  work rooted_impl(const In& in, Out& out, int root, bool blocking) {
    return extended<const In, Out>(
        to_root ? "gather" : "scatter",
        [&](auto& c, auto i, dtype dt) {
          static_assert(std::is_same_v<std::remove_cv_t<tensor_value_t<const In>>, tensor_value_t<Out>>,
                        "ddp: gather and scatter need input and output of the same element type");
          const char* name = to_root ? "gather" : "scatter";
          check_root(root, name);
          auto o = as_span(out);
          const std::size_t n = to_root ? i.size() : o.size();
          const std::size_t whole = to_root ? o.size() : i.size();
          // Refused in the header round: the other ranks fail now too, not at their timeout.
          if (rank() == root && whole != n * static_cast<std::size_t>(size()))
            return c.refuse(
                name, dt, root,
                detail::message({name, " on root ", root, name_note(), ": ", (to_root ? "output" : "input"),
                                 " has ", whole, " elements, expected world size ", size(), " x ",
                                 (to_root ? "input " : "output "), n}),
                blocking);
          if constexpr (to_root)
            return c.gather(i.data(), o.data(), n, dt, root, blocking);
          else
            return c.scatter(i.data(), o.data(), n, dt, root, blocking);
        },
        in);
  }

  /// Whether a collective can write its result into `t`, passed as `T` (the
  /// forwarded type: `X&` when named, `X` or `X&&` for a temporary); otherwise
  /// one static_assert says why and the collective compiles nothing else. Not
  /// a tensor at all: usable() gives that message.
  template <class T> static constexpr bool writable_output() {
    using R = std::remove_reference_t<T>;
    if constexpr (!tensor<R>) {
      return true;
    } else if constexpr (std::is_const_v<tensor_value_t<R>>) {
      static_assert(!std::is_const_v<tensor_value_t<R>>,
                    "ddp: this collective writes its result into a tensor of const elements (all_reduce's "
                    "and broadcast's t, all_gather's and reduce_scatter's out): pass a non-const one");
      return false;
    } else if constexpr (!std::is_lvalue_reference_v<T> && !tensor_view<R>) {
      static_assert(std::is_lvalue_reference_v<T> || tensor_view<R>,
                    "ddp: this collective writes its result into a temporary that owns its elements (a "
                    "std::vector, std::array or Eigen Matrix made in the call): the result would die with "
                    "it; pass a named tensor, or a view of storage that outlives the call (std::span, "
                    "ddp::device_span, Eigen::Map; see ddp::enable_tensor_view)");
      return false;
    } else {
      return true;
    }
  }
  /// Whether an _async collective can read `in`, passed as `In`: not a
  /// temporary that owns its elements, which dies before the collective runs.
  template <class In> static constexpr bool async_input() {
    using R = std::remove_reference_t<In>;
    if constexpr (!tensor<R>) {
      return true;
    } else {
      static_assert(std::is_lvalue_reference_v<In> || tensor_view<R>,
                    "ddp: an _async collective got as input a temporary that owns its elements (a "
                    "std::vector or Eigen Matrix made in the call): it is freed before the collective "
                    "reads it; pass a named tensor or a view (std::span, ddp::device_span, Eigen::Map), or "
                    "call the blocking form");
      return std::is_lvalue_reference_v<In> || tensor_view<R>;
    }
  }

  /// True when the tensors of one collective can be used here; otherwise one
  /// static_assert says why (for the first tensor at fault), and the caller
  /// compiles nothing else (no cascade of follow-up errors).
  template <class... T> static constexpr bool usable() {
    if constexpr (!all_tensors<std::remove_reference_t<T>...>()) {
      return false;
    } else {
      constexpr bool ok = accepts_device_tensors_v<Backend> || pinned_staging_available ||
                          !(on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> || ...);
      static_assert(ok, "ddp: this backend (Gloo) works on host memory; a device_span is staged through "
                        "pinned host memory only where ddp is built with CUDA: link ddp::cuda (it defines "
                        "DDP_WITH_CUDA), or use ddp::nccl");
      // The host path of a device backend copies host memory with the CPU, so a
      // device tensor among host ones would be read by the CPU.
      constexpr bool one_space = !ok || !accepts_device_tensors_v<Backend> ||
                                 (on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> && ...) ||
                                 !(on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> || ...);
      static_assert(one_space, "ddp: this backend (NCCL) takes a collective's tensors in one memory space: "
                               "all in device memory (device_span) or all on the host; copy the host side to "
                               "the device first (cudaMemcpyAsync), then call the collective");
      return ok && one_space;
    }
  }
  template <class T, class... Rest> static constexpr bool all_tensors() {
    if constexpr (!tensor<T>) {
      detail::require_tensor<T>(); // its one message
      return false;
    } else if constexpr (sizeof...(Rest) > 0) {
      return all_tensors<Rest...>();
    } else {
      return true;
    }
  }

  static constexpr bool pinned_staging_available =
#ifdef DDP_DETAIL_PINNED_STAGING
      true;
#else
      false;
#endif

  /// Whether a collective of these tensors goes through pinned staging: some
  /// are in device memory and the backend takes host memory only.
  template <class... T> static constexpr bool staged() {
    return !accepts_device_tensors_v<Backend> &&
           (on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> || ...);
  }
  /// Staged collectives block; without CUDA, usable() already said why not.
  template <class... T> static constexpr bool async_allowed() {
    return !pinned_staging_available || !staged<T...>();
  }
  template <class... T> static constexpr void require_async_allowed() {
    static_assert(async_allowed<T...>(),
                  "ddp: on this backend (Gloo) a device tensor's collective is staged through pinned host "
                  "memory and blocks: call the blocking form (all_reduce, not all_reduce_async), or use "
                  "ddp::nccl");
  }

  /// Made on first use (not at construction: that would make a CUDA context
  /// before the user's cudaSetDevice), once even when threads race to it.
  detail::staged_collectives& staging() {
    std::call_once(staged_once_, [this] { staged_ = make_staging(); });
    return *staged_;
  }
  std::unique_ptr<detail::staged_collectives> make_staging();

  /// Calls f(device_memory) when every tensor of the collective is in device
  /// memory, else f(): where memory lives is a compile-time fact, so the
  /// backend never has to ask. (usable() refuses a host/device mix on a device
  /// backend; a host backend stages the mix with cudaMemcpyDefault.)
  template <class... T, class F> static work in_space(F&& f) {
    if constexpr ((on_device_v<std::remove_cv_t<std::remove_reference_t<T>>> && ...))
      return f(device_memory);
    else
      return f();
  }

  void check_root(int root, const char* what) const {
    if (root < 0 || root >= size())
      detail::throw_error(error_kind::config, {what, " on rank ", rank(), name_note(), ": root ", root,
                                               " is not a rank of this group (0..", size() - 1, ")"});
  }
  /// " of <group name>" for a subgroup, for errors raised here.
  std::string name_note() const { return name_.empty() ? std::string() : " of " + name_; }

  std::shared_ptr<const void> alive_ = std::make_shared<const int>(0); ///< lifetime()
  ddp::topology topo_;
  rendezvous base_;                   ///< timeout, token, store and file of the job, for subgroups
  std::string name_;                  ///< empty: the job's own group
  std::vector<int> global_ranks_;     ///< job rank of each rank here
  int job_rank_ = 0;                  ///< this process's rank in the job
  std::atomic<int> next_subgroup_{0}; ///< subgroups made from this one so far (checked equal across ranks)
  std::shared_ptr<tcp_store> store_;
  std::unique_ptr<typename Backend::communicator> comm_;
  /// Hands the watch's news to comm_, or to its connect while it is built.
  std::unique_ptr<detail::peer_failure_relay<typename Backend::communicator>> relay_;
  /// Tells comm_ of another rank's failure (peer_failure_communicator); reset before comm_ is.
  std::unique_ptr<detail::peer_failure_watch> peer_watch_;
  std::unique_ptr<detail::staged_collectives> staged_; ///< device tensors on a host backend (lazily)
  std::once_flag staged_once_;
  int uncaught_at_start_ = std::uncaught_exceptions(); // the group is made outside any unwinding, usually
};

template <class Backend>
process_group<Backend>::process_group(rendezvous rv)
    : topo_(rv.topo), base_{rv.topo, rv.timeout,    rv.token,      rv.store,     rv.file_path,
                            nullptr, rv.key_prefix, rv.group_name, rv.job_ranks, rv.group_layout},
      name_(rv.group_name), job_rank_(rv.topo.rank), store_(rv.store) {
  // A rendezvous that numbers its ranks for the job (rendezvous::job_ranks) is
  // believed here as in the backend, which refuses a list of the wrong size.
  if (rv.job_ranks.size() == static_cast<std::size_t>(rv.topo.world_size) && rv.topo.rank >= 0) {
    global_ranks_ = rv.job_ranks;
    job_rank_ = rv.job_ranks[static_cast<std::size_t>(rv.topo.rank)];
  } else {
    for (int r = 0; r < rv.topo.world_size; ++r)
      global_ranks_.push_back(r);
  }
  start_peer_watch(); // first: a rank failing while the connections form stops this one's waits for it
  if (relay_) rv.interrupt = relay_->connecting();
  try {
    comm_ = std::make_unique<typename Backend::communicator>(rv);
  } catch (const std::exception& e) {
    report_failed_connect(e);
    throw;
  }
  if constexpr (peer_failure_communicator<typename Backend::communicator>)
    if (relay_) relay_->attach(*comm_);
}

template <class Backend> process_group<Backend>::~process_group() {
  if (!comm_) return; // a rank new_group or split left out: nothing to leave
  if (!name_.empty()) {
    // A subgroup: the job's own group holds the exit barrier; this one drains and goes.
    if (std::uncaught_exceptions() > uncaught_at_start_ && !comm_->poisoned()) {
      // Unwinding: an exception may be caught further up and the job go on,
      // so only this subgroup's mesh fails (its members blocked on this rank
      // fail now, naming a closed connection), not the job (leave_on_own_failure).
      const std::string why =
          detail::message({"job rank ", job_rank_, " left ", name_,
                           " while an exception unwound it (an error of its own: see its output); "
                           "this group is unusable, the job's own group goes on"});
      detail::log_line(detail::message({"rank ", job_rank_}), why);
      if constexpr (abortable_communicator<typename Backend::communicator>) comm_->abort_for_failure(why);
    } else {
      try {
        comm_->drain();
      } catch (const std::exception& e) {
        detail::log_line(detail::message({"rank ", job_rank_}),
                         detail::message({"teardown of ", name_, ": ", e.what()}));
      }
    }
    peer_watch_.reset();
    comm_.reset();
    return;
  }
  if (std::uncaught_exceptions() > uncaught_at_start_ && !comm_->poisoned()) {
    leave_on_own_failure();
    return;
  }
  try {
    comm_->drain();
    peer_watch_.reset(); // before the exit barrier: ranks leaving from here on are not failures
    if (store_ && !comm_->poisoned()) {
      store_->set(std::string(detail::store_finished_prefix) + std::to_string(rank()), "1");
      if (store_->add("ddp/exit", 1) >= size()) store_->set("ddp/exit/all", "1");
      if (store_->is_server() &&
          !store_->try_wait({"ddp/exit/all"}, std::min(comm_->timeout(), std::chrono::milliseconds(60000))))
        detail::log_line("rank 0", "not every rank reached process_group teardown; closing the store anyway");
    }
  } catch (const std::exception& e) {
    detail::log_line(detail::message({"rank ", rank()}), std::string("teardown: ") + e.what());
  }
  peer_watch_.reset();
  comm_.reset();
  staged_.reset(); // after the communicator: a job whose wait() gave up may still use its buffer
}

template <class Backend> void process_group<Backend>::abort(std::string_view reason) noexcept {
  if (!comm_ || comm_->poisoned()) return;
  fail_job(std::string(reason), "gave up");
}

template <class Backend>
process_group<Backend>::process_group(subgroup_t, const process_group& parent,
                                      const std::vector<int>& members, const std::vector<int>& nodes,
                                      std::string prefix, std::string name)
    : topo_(parent.topo_), base_(parent.base_), name_(std::move(name)), job_rank_(parent.job_rank_),
      store_(parent.store_) {
  for (int m : members)
    global_ranks_.push_back(parent.global_ranks_[static_cast<std::size_t>(m)]);
  topo_.world_size = static_cast<int>(members.size());
  const auto at = std::find(members.begin(), members.end(), parent.rank());
  if (at == members.end()) { // not a member: no communicator
    topo_.rank = topo_.local_rank = topo_.node_rank = -1;
    return;
  }
  topo_.rank = static_cast<int>(at - members.begin());
  // The group's own layout: its members on this rank's node, its nodes.
  const int node = nodes[static_cast<std::size_t>(topo_.rank)];
  std::vector<int> seen;
  topo_.local_rank = topo_.local_world_size = 0;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    if (std::find(seen.begin(), seen.end(), nodes[k]) == seen.end()) seen.push_back(nodes[k]);
    if (nodes[k] != node) continue;
    if (static_cast<int>(k) < topo_.rank) ++topo_.local_rank;
    ++topo_.local_world_size;
  }
  topo_.nnodes = static_cast<int>(seen.size());
  topo_.node_rank = static_cast<int>(std::find(seen.begin(), seen.end(), node) - seen.begin());
  base_.key_prefix = std::move(prefix); // groups made from this one nest under it
  base_.group_name = name_;
  rendezvous rv = base_;
  rv.topo = topo_;
  // The transport picks its interface by the job's layout (make_gloo_device), as the job's group did.
  rv.topo.local_rank = base_.topo.local_rank;
  rv.topo.local_world_size = base_.topo.local_world_size;
  rv.topo.node_rank = base_.topo.node_rank;
  rv.topo.nnodes = base_.topo.nnodes;
  rv.job_ranks = global_ranks_;
  rv.group_layout = topo_; // where the node's shared memory can serve the group
  start_peer_watch();
  if (relay_) rv.interrupt = relay_->connecting();
  try {
    // Each subgroup holds more descriptors (its mesh, its failure watch's store
    // connection): checked here, not only at init (docs/api.md, Subgroups).
    if constexpr (open_files_communicator<typename Backend::communicator>) {
      detail::open_files_need need;
      need.in_use = detail::open_files_in_use();
      need.backend = static_cast<long>(Backend::communicator::open_files(rv.group_layout));
      need.store_client = store_ ? 1 : 0; // the failure watch's
      detail::ensure_open_files(need, detail::message({"job rank ", job_rank_}), name_);
    }
    comm_ = std::make_unique<typename Backend::communicator>(rv);
  } catch (const std::exception& e) {
    report_failed_connect(e);
    throw;
  }
  if constexpr (peer_failure_communicator<typename Backend::communicator>)
    if (relay_) relay_->attach(*comm_);
  // A member's connect returns once its own pairs are up, maybe before a
  // slower member's are; one that then dropped the group at once closed pairs
  // that member was still connecting to. Past this barrier every member is connected.
  comm_->barrier(true).wait();
}

template <class Backend>
process_group<Backend> process_group<Backend>::make_subgroup(int color, int key, std::int64_t what,
                                                             const char* call,
                                                             const std::vector<int>* listed) {
  static_assert(subgroup_communicator<typename Backend::communicator>,
                "ddp: new_group and split are offered by ddp::gloo; this backend (ddp::nccl) has none yet");
  member(call);
  const int id = next_subgroup_.fetch_add(1);
  const std::int64_t call_code = listed ? 1 : 2;
  // Every rank's choice, its count of groups made from this one and which
  // call it is, in one all_gather over this group: ranks that pair different
  // calls (made in another order, or from two threads) fail, instead of
  // joining one prefix's mesh with different members.
  constexpr std::size_t fields = 6; // and its node, for the group's topology()
  std::vector<std::int64_t> mine{color, key, what, id, call_code, base_.topo.node_rank},
      all(fields * static_cast<std::size_t>(size()));
  all_gather(mine, all);
  auto at = [&](int r, std::size_t k) { return all[fields * static_cast<std::size_t>(r) + k]; };
  for (int r = 1; r < size(); ++r)
    if (at(r, 3) != at(0, 3) || at(r, 4) != at(0, 4))
      detail::throw_error(error_kind::mismatch,
                          {call, " on rank ", rank(), name_note(), ": rank ", r, " called ",
                           (at(r, 4) == 1 ? "new_group" : "split"), " as its group #", at(r, 3),
                           " made from this group, rank 0 ", (at(0, 4) == 1 ? "new_group" : "split"),
                           " as its #", at(0, 3),
                           ". Every rank must make groups from one thread, in the same order. No group was "
                           "made."},
                          r);
  for (int r = 1; r < size(); ++r)
    if (at(r, 2) != at(0, 2))
      detail::throw_error(error_kind::mismatch,
                          {call, " on rank ", rank(), (name_.empty() ? std::string() : " of " + name_),
                           ": rank ", r, " passed other ranks than rank 0 did. Every rank of the ",
                           "group must call ", call,
                           " with the same ranks, in the same order (the order numbers ",
                           "them in the new group). No group was made."},
                          r);
  std::vector<int> members;
  const std::int64_t c = color;
  if (listed) {
    members = *listed;
  } else if (c >= 0) {
    for (int r = 0; r < size(); ++r)
      if (at(r, 0) == c) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return at(a, 1) < at(b, 1); });
  }
  const std::string prefix = detail::message({base_.key_prefix, "g", id, "c", c, "/"});
  std::string name = detail::message({"group ", prefix.substr(0, prefix.size() - 1), " (global ranks"});
  for (std::size_t k = 0; k < members.size(); ++k)
    name += (k ? ", " : " ") + std::to_string(global_ranks_[static_cast<std::size_t>(members[k])]);
  name += ")";
  if (c < 0) name = detail::message({"no group (split with a negative color on job rank ", job_rank_, ")"});
  std::vector<int> nodes; // each member's node in the job
  for (int m : members)
    nodes.push_back(static_cast<int>(at(m, 5)));
  return process_group(subgroup_t{}, *this, members, nodes, prefix, std::move(name));
}

template <class Backend>
process_group<Backend> process_group<Backend>::new_group(const std::vector<int>& ranks) {
  std::vector<bool> seen(static_cast<std::size_t>(std::max(size(), 0)), false);
  std::int64_t hash = 1469598103934665603LL; // FNV-1a over the list, compared across ranks
  int key = -1;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const int r = ranks[k];
    if (r < 0 || r >= size() || seen[static_cast<std::size_t>(r)])
      detail::throw_error(
          error_kind::config,
          {"new_group on rank ", rank(), ": rank ", r,
           (r < 0 || r >= size() ? detail::message({" is not a rank of this group (0..", size() - 1, ")"})
                                 : " is listed twice"),
           ": list each rank of this group at most once"});
    seen[static_cast<std::size_t>(r)] = true;
    if (r == rank()) key = static_cast<int>(k);
    hash = static_cast<std::int64_t>((static_cast<std::uint64_t>(hash) ^ static_cast<std::uint64_t>(r)) *
                                     1099511628211ULL);
  }
  if (ranks.empty())
    detail::throw_error(error_kind::config, {"new_group on rank ", rank(), ": no ranks given"});
  // The listed ranks, numbered by their place in the list; the others are told the group they are not in.
  return make_subgroup(0, key, hash, "new_group", &ranks);
}

template <class Backend> process_group<Backend> process_group<Backend>::split(int color, int key) {
  return make_subgroup(color < 0 ? -1 : color, key, 0, "split");
}

template <class Backend> void process_group<Backend>::start_peer_watch() {
  if constexpr (peer_failure_communicator<typename Backend::communicator>) {
    if (!store_ || size() == 1) return;
    try {
      auto relay = std::make_unique<detail::peer_failure_relay<typename Backend::communicator>>();
      peer_watch_ = std::make_unique<detail::peer_failure_watch>(
          *store_, job_rank_, [r = relay.get()](const lost_rank& lost) { r->deliver(lost); });
      relay_ = std::move(relay);
    } catch (const std::exception& e) {
      detail::log_line(
          detail::message({"rank ", rank()}),
          detail::message({"warning: no watch for other ranks' failures (", e.what(),
                           "): a rank that fails reaches this one through its collectives only, over TCP "
                           "possibly at the timeout. Raise the open-file limit (ulimit -n) of the store "
                           "(rank 0, or ddprun on node 0)"}));
    }
  }
}

template <class Backend>
void process_group<Backend>::report_failed_connect(const std::exception& e) noexcept {
  if (!store_) return;
  const auto* d = dynamic_cast<const ddp::error*>(&e);
  if (d && (d->kind() == error_kind::peer_lost || d->kind() == error_kind::timeout)) return;
  try {
    if (store_->wait_for_lost_rank(std::chrono::milliseconds(0))) return;
    peer_watch_.reset(); // what it would hear now is this rank's own report
    detail::report_own_failure(*store_, job_rank_, d ? d->message() : std::string_view(e.what()));
    store_->linger_briefly();        // rank 0 serving the store: its peers read the reason, then leave
  } catch (const std::exception&) {} // best effort: the error going out is what matters
}

template <class Backend> void process_group<Backend>::leave_on_own_failure() noexcept {
  fail_job("an exception escaped while its process group was alive (an error of its own, outside ddp's "
           "collectives: see its output)",
           "left the job");
  peer_watch_.reset(); // it calls into the communicator
  comm_.reset();
  staged_.reset();
}

template <class Backend>
void process_group<Backend>::fail_job(const std::string& reason, const char* what_happened) noexcept {
  const std::string who = detail::message({"rank ", rank()});
  detail::note_failure_for_launcher(job_rank_, reason);
  detail::log_line(who, std::string(what_happened) + " on an error of its own: telling the other ranks");
  try {
    const std::string why = detail::message({who, " ", what_happened, ": ", reason});
    // Refused first, interrupted last: the store tells the peers, who close
    // their connections, and a collective running here that fails of that
    // must fail with `why`, not name this rank as the peer it lost
    // (docs/design-notes.md, "Note [leaving on an error]"). Interrupting
    // before the store knows left the node's shm peers without a reason to
    // read.
    if constexpr (requires(typename Backend::communicator & c) { c.poison_for_failure(why); })
      comm_->poison_for_failure(why);
    if (store_) {
      store_->report_failure(reason);
      store_->linger_briefly(); // rank 0: its peers read the reason, then leave
    }
    if constexpr (abortable_communicator<typename Backend::communicator>) comm_->abort_for_failure(why);
  } catch (const std::exception& e) { detail::log_line(who, std::string("teardown: ") + e.what()); }
}

template <class Backend> std::unique_ptr<detail::staged_collectives> process_group<Backend>::make_staging() {
#ifdef DDP_DETAIL_PINNED_STAGING
  // A staging copy fails outside the group's collectives: the group is failed
  // at once where the backend can, or the peers would wait in the collective
  // this rank never joins (or left) until their timeout.
  auto fail_group = [this](const std::string& why) { fail_job(why, "failed its part of a collective"); };
  return std::make_unique<detail::cuda::pinned_staging<typename Backend::communicator>>(*comm_, fail_group);
#else
  detail::throw_error(error_kind::config, {"ddp was built without CUDA: device tensors cannot be staged"});
#endif
}

/// Joins the job: rendezvous (env://, tcp://, file://), then the backend connects every pair.
template <class Backend> process_group<Backend> init_process_group(const init_options& o = {}) {
  static_assert(backend_policy<Backend>,
                "ddp: init_process_group<B> needs a backend policy such as ddp::gloo");
  long (*files)(const ddp::topology&) = nullptr;
  if constexpr (open_files_communicator<typename Backend::communicator>)
    files = [](const ddp::topology& t) { return static_cast<long>(Backend::communicator::open_files(t)); };
  return process_group<Backend>(detail::make_rendezvous(o, files));
}

DDP_END_NAMESPACE

#endif // DDP_PROCESS_GROUP_HPP
