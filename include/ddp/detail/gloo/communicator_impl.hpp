// What the Gloo communicator (communicator.hpp) holds and does, behind its
// pointer: CPU tensors over TCP. Collectives run one at a time, in submission order, on a worker thread
// (Gloo has no non-blocking collectives), each with a fresh tag. The first
// failure closes every connection, so peers fail fast too, and poisons the
// group. It connects, dispatches and aborts; the mesh, the collectives, the
// shared-memory path and the blame are its parts in this folder.
#ifndef DDP_DETAIL_GLOO_COMMUNICATOR_IMPL_HPP
#define DDP_DETAIL_GLOO_COMMUNICATOR_IMPL_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/backend/collective_queue.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/gloo/blame.hpp>
#include <ddp/detail/gloo/collectives.hpp>
#include <ddp/detail/gloo/device.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/knobs.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/detail/gloo/p2p.hpp>
#include <ddp/detail/gloo/ring.hpp>
#include <ddp/detail/gloo/shm_path.hpp>
#include <ddp/detail/gloo/store_adapter.hpp>
#include <ddp/op.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>

#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_communicator_impl {
public:
  explicit gloo_communicator_impl(const rendezvous& rv)
      : rank_(checked_rank(rv)), size_(rv.topo.world_size), job_rank_(job_rank_of(rv)), timeout_(rv.timeout),
        store_(rv.store),
        shm_path_(
            rank_, size_, timeout_, store_, knobs_, waits_, scratch_,
            [this](const collective_header& h, const std::string& what) { mesh_.exchange_header(h, what); },
            [this](const std::string& what, const std::string& gloo_text) { fail_io(what, gloo_text); }),
        mesh_(rank_, size_, timeout_, ctx_, waits_, scratch_,
              [this](const collective_header& h, const std::string& what) {
                // On one node with shm every collective first compares headers in the
                // segment, where an all_reduce would wait (see shm_all_reduce::agree).
                if (shm_path_.get() && shm_path_.nodes() == 1)
                  shm_path_.guard(what, [&] { shm_path_.get()->agree(h, what); });
              }),
        lanes_(rv.key_prefix.empty() ? "comm" : "comm " + rv.key_prefix),
        note_(rv.group_name.empty() ? std::string() : ", " + rv.group_name),
        queue_(rank_, timeout_, note_, rv.key_prefix.empty() ? "comm" : "comm " + rv.key_prefix),
        // A subgroup's failures are looked up in the store by its members' job ranks.
        blame_(rank_, size_, timeout_, store_, queue_, rv.job_ranks, rv.key_prefix) {
    if (!rv.key_prefix.empty())
      left_key_ = std::string(store_left_prefix) + rv.key_prefix + std::to_string(job_rank_);
    if (!rv.job_ranks.empty()) { // a subgroup's errors name job ranks on every path
      mesh_.name_ranks(rv.job_ranks);
      queue_.show_rank(job_rank_);
    }
    if (!rv.group_name.empty()) { // rank_<r>_g0c1_.json: one file per group
      std::string tag = "_" + rv.key_prefix;
      for (auto& ch : tag)
        if (ch == '/') ch = '_';
      queue_.recorder().set_group(rv.group_name, tag);
    }
    lanes_.set_recorder(&queue_.recorder(), rank_);
    ignore_sigpipe_if_default();
    auto device =
        make_gloo_device({rv.topo.rank, rv.topo.local_rank, rv.topo.master_addr, rv.topo.master_port});
    auto ctx = std::make_shared<gloo_mesh_context>(rank_, size_, timeout_);
    ctx->batch_loop = gloo_loop_batch_wanted(rv.topo.nnodes);
    try {
      if (store_) {
        gloo_store_adapter adapter(*store_, "ddp/gloo/" + rv.key_prefix);
        ctx->connect(adapter, device, gloo_mesh_keys::per_pair, rv.interrupt.get(), rv.job_ranks);
      } else {
        ::gloo::rendezvous::FileStore files(rv.file_path);
        ::gloo::rendezvous::PrefixStore prefixed(
            (rv.token.empty() ? "ddp" : "ddp-" + rv.token) + rv.key_prefix, files);
        ctx->connect(prefixed, device, gloo_mesh_keys::per_rank);
      }
    } catch (const ddp::error&) { throw; } catch (const std::exception& e) {
      blame_.mesh(detail::message({"rank ", job_rank_, ": Gloo could not connect to its peers"}), "", e);
    }
    ctx_ = std::move(ctx);
    // A subgroup votes, and maps its segments, under its key prefix (gloo_shm_path::keys).
    if (store_ && shm_path_.vote(rv)) leaders_ = shm_path_.setup(rv, blame_);
  }

  /// Descriptors a rank holds at its peak: one per peer (Debian's Gloo swaps
  /// each pair's listener for its connection, never both at once), its
  /// device's epoll and the eventfd that wakes it (gloo_loop_ticker); where the node's ranks can share memory
  /// (gloo_shm_path::layout_fits; DDP_SHM aside), the segment's two and, on a node leader, the
  /// leaders' mesh across nodes (checked:
  /// docs/design-notes.md, "Note [open files]").
  static long open_files(const ddp::topology& t) {
    long n = (t.world_size - 1) + 2;
    if (gloo_shm_path::layout_fits(t)) {
      n += 2;
      const int nodes = t.world_size / t.local_world_size;
      if (nodes > 1 && t.local_rank == 0) n += (nodes - 1) + 2;
    }
    return n;
  }

  gloo_communicator_impl(const gloo_communicator_impl&) = delete;
  gloo_communicator_impl& operator=(const gloo_communicator_impl&) = delete;
  ~gloo_communicator_impl() { // the workers stop before the context goes
    queue_.stop();
    abort_pending_messages();
    lanes_.stop();
  }

  /// True when all_reduce goes through the node's shared-memory segment (see
  /// detail/shm/all_reduce.hpp): on by default when ranks share a node, DDP_SHM=0 off.
  bool shm_active() const { return shm_path_.get() != nullptr; }
  /// The shm path's step size (like set_ring_piece_bytes: tests make it small
  /// to cross step ends; same value on every rank, before collectives); 0
  /// restores the defaults (256 KiB within a node, the whole area across nodes).
  void set_shm_step_bytes(std::size_t bytes) {
    if (auto* shm = shm_path_.get()) shm->set_step_bytes(bytes);
  }
  /// Benches compare the two paths in one run: false sends all_reduce,
  /// reduce_scatter and all_gather over TCP again. Every rank must switch at
  /// the same point of its collective sequence.
  void use_shm(bool on) { knobs_.shm_on = on; }
  std::size_t shm_step_bytes() const {
    return shm_path_.get() ? shm_path_.get()->step_bytes(shm_path_.nodes() > 1) : 0;
  }
  /// The shm segment's name (tests look for it in /dev/shm); empty when off.
  std::string shm_segment_name() const {
    return shm_path_.get() ? shm_path_.get()->segment().name() : std::string();
  }

  /// All-reduces run in place in a shm array so far (tests check the path taken).
  std::uint64_t shm_in_place_runs() const { return knobs_.in_place_runs.load(); }
  /// reduce_scatters and all_gathers run through the node's segment so far (tests).
  std::uint64_t shm_block_runs() const { return knobs_.shm_block_runs.load(); }

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  bool is_shm_array_memory(const void* p, std::size_t bytes) const {
    return shm_path_.is_array_memory(p, bytes);
  }

  /// gloo_communicator::make_shm_array, before the memory is typed.
  shm_memory make_shm_array(std::size_t n, dtype dt, std::size_t elem_size) {
    auto in_queue = [this](std::size_t count, dtype t, auto body) {
      submit("make_shm_array", count, t, true,
             [body = std::move(body)](std::uint32_t, const std::string& where) { body(where); })
          .wait();
    };
    return shm_path_.make_array(n, dt, elem_size, in_queue);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::exception_ptr poisoned() const { return queue_.poisoned(); }
  /// Before teardown: the collectives queued run; a send or recv still
  /// pending then fails (abort_pending_messages), it is not waited for.
  void drain() {
    queue_.drain();
    abort_pending_messages();
    lanes_.drain();
  }

  /// For a rank leaving on an error of its own (process_group::abort, or its
  /// teardown on an escaping exception), from any thread: what is queued fails
  /// with `reason`, every connection fails, so peers blocked on this rank fail
  /// now, not at their timeout, and a collective running here is interrupted
  /// (it fails with `reason` too; see interrupt_connections). Returns without
  /// waiting for it.
  void abort_for_failure(const std::string& reason) {
    poison_for_failure(reason);
    say_left(reason);
    interrupt_connections(true);
  }

  /// A subgroup's member leaving on its own error, the job going on: no store
  /// record of a lost rank will name it, so the peers would search a second
  /// for one, then wait out a desync report; the key (read by
  /// gloo_blame::left_peer) lets them name it at once. Before the connections
  /// close, so that it is there when they fail.
  void say_left(const std::string& reason) {
    if (left_key_.empty() || !store_) return;
    try {
      store_->set(left_key_, reason, tcp_store::fault_slack);
    } catch (const std::exception&) {} // the peers' own searches still name whom they can
  }

  /// The first half of abort_for_failure: collectives are refused with
  /// `reason` from now on, and one running now that fails, fails with it,
  /// but nothing is interrupted yet. process_group calls it before it tells
  /// the store, whose news makes the peers close their connections.
  void poison_for_failure(const std::string& reason) {
    std::lock_guard lock(contexts_mu_); // against fail_for_peer: one of them is the group's error
    queue_.abort(std::make_exception_ptr(error(error_kind::backend, reason, job_rank_)));
    lanes_.abort(queue_.poisoned());
    verdict_cv_.notify_all();
  }

  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it, and this rank's TCP
  /// connections close, so a collective waiting here ends now even when it
  /// waits on some other rank (Gloo tells a closed connection only to the
  /// operations posted on it). The node's segment is left alone: its waits
  /// read the store themselves, and aborting it would name this rank.
  void fail_for_peer(const lost_rank& lost) {
    auto why = std::make_exception_ptr(
        error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
              detail::message({"rank ", job_rank_, ": ", lost_news(lost),
                               "; every collective of this group fails from here on (this "
                               "rank heard it from the rendezvous store)"}),
              lost.rank));
    {
      std::lock_guard lock(contexts_mu_);
      if (queue_.poisoned()) return; // the group failed already: its error stands
      peer_failure_ = lost;
      queue_.abort(why);
      lanes_.abort(why);
    }
    verdict_cv_.notify_all();
    queue_.recorder().note(lost_news(lost) + " (the store reported it)");
    interrupt_connections(false);
  }

  /// The largest message ddp's fragment ring and chain broadcast send (1 MiB
  /// by default; the broadcast's piece size made no difference:
  /// docs/performance.md, Collectives). Like
  /// Gloo's maxSegmentSize: tests make it small so that small tensors cross
  /// piece boundaries. Every rank must use the same value, set before the
  /// collectives it is for.
  void set_ring_piece_bytes(std::size_t bytes) { knobs_.set_ring_piece_bytes(rank_, bytes); }
  std::size_t ring_piece_bytes() const { return knobs_.ring_piece_bytes; }

  /// Small tensors (up to header_round::inline_cap: 64 KiB at 2-4 ranks) travel with the header:
  /// one round, and every rank reduces all contributions in rank order, so
  /// every rank gets the same bits. Larger ones go around ddp's ring (as
  /// buckets do), the averaging fused into its last reduction step, on buffers
  /// an abort can interrupt. It was Gloo's ring below 16 MiB, which was no
  /// faster (docs/performance.md, Collectives).
  work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      detail::throw_error(error_kind::config, {"op::avg needs a floating-point tensor, got ", to_string(dt),
                                               ": use op::sum and divide yourself"});
    return submit("all_reduce", n, dt, blocking,
                  [=, this, piece = knobs_.ring_piece_bytes,
                   shm = shm_path_.get() && knobs_.shm_on](std::uint32_t tag, const std::string& what) {
                    if (size_ == 1) return;
                    auto h = gloo_collectives::header(collective_kind::all_reduce, tag, n, dt);
                    h.reduce = static_cast<std::uint8_t>(o);
                    h.piece = piece;
                    if (shm) {
                      std::vector<fragment> whole{{data, n}};
                      shm_path_.run(h, what, whole, dt, o, o == op::avg ? 1.0 / size_ : 1.0, leaders_);
                      return;
                    }
                    mesh_.all_reduce(h, what, data, n, dt, o);
                  });
  }

  /// Sums a bucket given as fragments (each tensor where it lies) across ranks,
  /// then multiplies it by `scale`: no packing, and the averaging fused in.
  work all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale, bool blocking = false) {
    if (!is_floating(dt) && scale != 1.0)
      detail::throw_error(error_kind::config, {"scaling needs a floating-point tensor, got ", to_string(dt)});
    const std::size_t n = total_count(frags);
    // The piece size as of submission: a later set_ring_piece_bytes() does not
    // reach a collective already queued.
    return submit("all_reduce", n, dt, blocking,
                  [=, this, frags = std::move(frags), piece = knobs_.ring_piece_bytes,
                   shm = shm_path_.get() && knobs_.shm_on](std::uint32_t tag, const std::string& what) {
                    auto h = gloo_collectives::header(collective_kind::all_reduce, tag, n, dt);
                    h.reduce = static_cast<std::uint8_t>(op::sum);
                    h.piece = piece;
                    if (shm && size_ > 1)
                      shm_path_.run(h, what, frags, dt, op::sum, scale, leaders_);
                    else
                      mesh_.all_reduce_fragments(h, what, frags, dt, scale);
                  });
  }

  /// Small tensors travel with the header; larger ones down ddp's chain
  /// (detail/gloo/chain.hpp), once the headers agree.
  work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking,
                  [=, this, piece = knobs_.ring_piece_bytes](std::uint32_t tag, const std::string& what) {
                    mesh_.broadcast(tag, what, data, n, dt, root, piece);
                  });
  }

  /// On one node with shm: through the node's segment
  /// (detail/shm/block_collectives.hpp). Else small tensors travel with the
  /// header, larger ones in ddp's block exchange (detail/gloo/exchange.hpp).
  /// `in` may be this rank's own block of `out`.
  work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false) {
    return submit("all_gather", n, dt, blocking,
                  [=, this, shm = one_node_shm()](std::uint32_t tag, const std::string& what) {
                    if (shm) {
                      shm_path_.all_gather(gloo_collectives::header(collective_kind::all_gather, tag, n, dt),
                                           what, in, out, n, dt);
                      return;
                    }
                    mesh_.all_gather(tag, what, in, out, n, dt);
                  });
  }

  /// Block r of `in` (n elements each) is reduced across ranks into rank r's `out`.
  /// On one node with shm through the node's segment; else each block goes to
  /// its owner (with the header when small, else in ddp's block exchange,
  /// detail/gloo/exchange.hpp). Either way the owner reduces the blocks in rank
  /// order. `out` may be this rank's own block of `in`.
  work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      detail::throw_error(error_kind::config, {"op::avg needs a floating-point tensor, got ", to_string(dt)});
    return submit("reduce_scatter", n, dt, blocking,
                  [=, this, shm = one_node_shm()](std::uint32_t tag, const std::string& what) {
                    if (shm) {
                      auto h = gloo_collectives::header(collective_kind::reduce_scatter, tag, n, dt);
                      h.reduce = static_cast<std::uint8_t>(o);
                      shm_path_.reduce_scatter(h, what, in, out, n, dt, o);
                      return;
                    }
                    mesh_.reduce_scatter(tag, what, in, out, n, dt, o);
                  });
  }

  /// The header round is the barrier: no rank leaves it before every rank's
  /// header arrived.
  work barrier(bool blocking = false) {
    return submit("barrier", 0, dtype::u8, blocking, [this](std::uint32_t tag, const std::string& what) {
      if (size_ == 1) return;
      mesh_.exchange_header(gloo_collectives::header(collective_kind::barrier, tag, 0, dtype::u8), what);
    });
  }

  /// Block p of `in` (n elements each) goes to rank p; block p of `out` comes
  /// from rank p (detail/gloo/collectives.hpp). Over TCP, also on one node.
  work all_to_all(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false) {
    return submit("all_to_all", n, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      mesh_.all_to_all(tag, what, in, out, n, dt);
    });
  }

  /// all_to_all with a count per peer, blocks packed in rank order (torch's
  /// all_to_all_single with split sizes); the counts are checked across ranks.
  work all_to_all_v(const void* in, std::vector<std::size_t> send_counts, void* out,
                    std::vector<std::size_t> recv_counts, dtype dt, bool blocking = false) {
    std::size_t n = 0;
    for (auto c : send_counts)
      n += c;
    return submit("all_to_all", n, dt, blocking,
                  [=, this, sc = std::move(send_counts),
                   rc = std::move(recv_counts)](std::uint32_t tag, const std::string& what) {
                    mesh_.all_to_all_v(tag, what, in, sc, out, rc, dt);
                  });
  }

  /// Root's `out` (size() blocks of n) receives every rank's `in`, in rank order.
  work gather(const void* in, void* out, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("gather", n, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      mesh_.gather(tag, what, in, out, n, dt, root);
    });
  }

  /// Block p of root's `in` (size() blocks of n) goes to rank p's `out`.
  work scatter(const void* in, void* out, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("scatter", n, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      mesh_.scatter(tag, what, in, out, n, dt, root);
    });
  }

  /// Root's `data` becomes the reduction of every rank's; the others' stays.
  work reduce(void* data, std::size_t n, dtype dt, op o, int root, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      detail::throw_error(error_kind::config, {"op::avg needs a floating-point tensor, got ", to_string(dt)});
    return submit("reduce", n, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      mesh_.reduce(tag, what, data, n, dt, o, root);
    });
  }

  /// In place of all_to_all, gather or scatter (`name`) when this rank's
  /// arguments do not fit it (`why`): its queue slot joins the header round
  /// flagged, so every rank fails at once (gloo_collectives::refuse).
  work refuse(const char* name, dtype dt, int root, std::string why, bool blocking = false) {
    if (size_ == 1) detail::throw_error(error_kind::config, {why}); // nobody waits: the group goes on
    const std::string n = name;
    const auto kind = n == "gather"    ? collective_kind::gather
                      : n == "scatter" ? collective_kind::scatter
                                       : collective_kind::all_to_all;
    return submit(name, 0, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      mesh_.refuse(kind, tag, what, dt, root, why);
    });
  }

  /// Point to point (detail/gloo/p2p.hpp): in a lane per peer and direction,
  /// beside the group's queue, so a send waiting for its recv holds up neither
  /// the collectives nor messages to or from other peers.
  work send(const void* data, std::size_t n, dtype dt, int peer, std::int64_t tag, bool blocking = false) {
    return p2p(true, const_cast<void*>(data), n, dt, peer, tag, blocking);
  }
  work recv(void* data, std::size_t n, dtype dt, int peer, std::int64_t tag, bool blocking = false) {
    return p2p(false, data, n, dt, peer, tag, blocking);
  }

private:
  /// Whether reduce_scatter and all_gather take the node's segment: the whole
  /// group on one node, shm on (as of submission, like the piece size).
  bool one_node_shm() const {
    return shm_path_.get() && knobs_.shm_on && shm_path_.nodes() == 1 && size_ > 1;
  }

  /// What a collective does: body(tag, what).
  using body_type = std::function<void(std::uint32_t tag, const std::string& what)>;

  work p2p(bool sends, void* data, std::size_t n, dtype dt, int peer, std::int64_t tag, bool blocking) {
    if (peer < 0 || peer >= size_ || peer == rank_)
      detail::throw_error(error_kind::config, {sends ? "send" : "recv", " on rank ", rank_, ": peer ", peer,
                                               " is not another rank of this group", note_, " (0..",
                                               size_ - 1, ", not this rank)"});
    if (auto why = queue_.poisoned()) std::rethrow_exception(why);
    const std::string head = detail::message({"rank ", rank_, ": ", (sends ? "send" : "recv")});
    const std::string tail =
        detail::message({sends ? " to" : " from", " rank ", peer, " (", n, " x ", to_string(dt), note_, ")"});
    return lanes_.submit(
        peer, sends, static_cast<std::int64_t>(n * size_of(dt)), head, tail, timeout_, blocking,
        [=, this](std::uint32_t seq, const std::string& what) {
          std::shared_ptr<gloo_mesh_context> ctx;
          {
            std::unique_lock lock(contexts_mu_);
            // No context: a collective is failing (close_all), its error on the way to
            // fail_lanes.
            if (!ctx_) verdict_cv_.wait(lock, [&] { return lanes_.poisoned() != nullptr; });
            if (auto why = lanes_.poisoned()) std::rethrow_exception(why);
            if (auto why = queue_.poisoned()) std::rethrow_exception(why);
            ctx = ctx_;
          }
          try {
            p2p_transfer(ctx, waits_, sends, data, n, dt, peer, tag, seq, timeout_, what);
          } catch (const ddp::error&) {
            fail_from_lane(std::current_exception());
          } catch (const std::exception& e) {
            await_verdict();
            fail_from_lane(std::make_exception_ptr(error(
                error_kind::timeout,
                detail::message({what, " failed: ", e.what(), ". Rank ", peer,
                                 " did not take its part in time, or failed (its output says why); every "
                                 "later collective of this group throws"}),
                peer)));
          }
        });
  }

  /// The group goes while sends or recvs it was given have not ended: a
  /// message nobody will match (or whose peer is gone) would hold the teardown
  /// until its timeout. They fail now, named in the error and in this rank's
  /// output; this rank's connections close, so that a peer waiting on one of
  /// them fails now too. The collectives have drained: only the messages use them.
  void abort_pending_messages() noexcept {
    try {
      if (lanes_.poisoned()) return; // failed already: nothing waits
      const auto pending = lanes_.pending();
      if (pending.empty()) return;
      std::string list;
      for (const auto& p : pending)
        list += (list.empty() ? "" : "; ") + p;
      const std::string why =
          detail::message({"rank ", job_rank_, ": the process group", note_, " was destroyed with ",
                           pending.size(), " send/recv pending: ", list,
                           ". They fail now: wait for every send_async and recv_async (work::wait) "
                           "before the group goes"});
      log_line(detail::message({"rank ", job_rank_}), why);
      {
        std::lock_guard lock(contexts_mu_);
        lanes_.abort(std::make_exception_ptr(error(error_kind::backend, why, job_rank_)));
      }
      verdict_cv_.notify_all();
      interrupt_connections(false);
    } catch (const std::exception&) {} // teardown: the lanes' own timeouts still bound them
  }

  /// A message failed: the group fails with `why` (its first failure stands),
  /// every connection closes so peers blocked on this rank fail now, and the
  /// message's work fails with the group's error.
  /// A message's connection failed. When a collective is failing meanwhile,
  /// or a peer's collective failed and closed its connections before this
  /// rank's saw why, the group's error is that collective's, not this
  /// message's closed connection: wait for it (a collective's failure always
  /// ends in fail_lanes), or up to a second for one to begin.
  void await_verdict() {
    std::unique_lock lock(contexts_mu_);
    verdict_cv_.wait_for(lock, std::chrono::seconds(1),
                         [&] { return lanes_.poisoned() || collective_failing_; });
    if (collective_failing_) verdict_cv_.wait(lock, [&] { return lanes_.poisoned() != nullptr; });
  }

  /// When the lanes failed already (the group failed, or is torn down), that
  /// failure interrupted this message: its error stands, and whoever failed
  /// them closed what had to close.
  [[noreturn]] void fail_from_lane(std::exception_ptr why) {
    {
      std::lock_guard lock(contexts_mu_);
      if (auto first = lanes_.poisoned()) std::rethrow_exception(first);
      queue_.abort(why);
      why = queue_.poisoned();
      lanes_.abort(why);
    }
    verdict_cv_.notify_all();
    interrupt_connections(true);
    std::rethrow_exception(why);
  }

  /// Queues `body(tag, what)`: each collective gets a fresh Gloo tag, and any
  /// failure closes every connection (peers fail at once) and poisons the group.
  work submit(const char* name, std::size_t n, dtype dt, bool blocking, body_type body) {
    return queue_.submit(
        name, n, dt, blocking,
        [this, body = std::move(body), site = current_call](const std::string& what, work_state&) {
          const std::uint32_t tag = next_tag_++;
          call_site_scope named(site); // its headers carry the step (gloo_collectives::header)
          try {
            body(tag, what);
          } catch (...) {
            {
              std::lock_guard lock(contexts_mu_);
              collective_failing_ = true; // before close_all: see await_verdict
            }
            try {
              blame_.collective(
                  what, std::current_exception(), [this](bool with_segment) { close_all(with_segment); },
                  [this] { return reported_peer_failure(); });
            } catch (...) {
              fail_lanes(std::current_exception());
              throw;
            }
          }
        });
  }

  /// A collective failed, its connections closed (close_all): its error
  /// becomes the group's, and the send/recv lanes fail with it now. Their
  /// workers hold the context they started with, so closing its connections
  /// (close_all) and ending the waits on its buffers is what stops a message
  /// under way; else a posted recv, and the peers waiting on it, ran to their
  /// timeout (docs/design-notes.md, "Note [send/recv lanes]").
  void fail_lanes(std::exception_ptr why) noexcept {
    {
      std::lock_guard lock(contexts_mu_);
      queue_.abort(std::move(why));
      lanes_.abort(queue_.poisoned());
    }
    verdict_cv_.notify_all();
    waits_.interrupt_all(); // after close_all failed the connections
  }

  /// A collective failed on the wire (see gloo_blame::io).
  [[noreturn]] void fail_io(const std::string& what, const std::string& gloo_text) {
    close_all(); // peers blocked on us fail now instead of at their timeout
    blame_.io(what, gloo_text);
  }

  void close_all(bool with_segment = true) {
    if (shm_path_.get() && with_segment)
      shm_path_.get()->abort(); // the node's ranks waiting in the segment fail now too, as over TCP
    std::lock_guard lock(contexts_mu_);
    // Failed, not only dropped: a send/recv worker holds the context too, and
    // would keep its sockets open.
    {
      std::lock_guard failing(failing_mu_);
      for (auto* c : {ctx_.get(), leaders_.get()})
        if (c) c->fail_connections();
    }
    ctx_.reset();
    leaders_.reset();
  }

  /// Fails every connection of this rank at once, from any thread, while a
  /// collective may be running on the worker (gloo_mesh_context::
  /// fail_connections). A transfer already under way is not queued any more:
  /// the collectives' waits are then ended through waits_ (detail/gloo/waits.hpp),
  /// which holds every buffer they use.
  /// `with_segment`: the node's segment is aborted too (its waiters fail,
  /// naming this rank as the one that failed).
  void interrupt_connections(bool with_segment) noexcept {
    if (shm_path_.get() && with_segment) shm_path_.get()->abort();
    std::shared_ptr<gloo_mesh_context> ctx, leaders;
    {
      std::lock_guard lock(contexts_mu_);
      ctx = ctx_;
      leaders = leaders_;
    }
    {
      std::lock_guard failing(failing_mu_);
      for (auto* c : {ctx.get(), leaders.get()})
        if (c) c->fail_connections();
    }
    waits_.interrupt_all(); // after the sockets closed: nothing writes into the buffers any more
  }

  /// A group under a key prefix (a subgroup) names its members by job rank
  /// (rendezvous::job_ranks), one per rank: indexing a list of another size
  /// read past it, or named the wrong ranks.
  static int checked_rank(const rendezvous& rv) {
    const auto n = rv.job_ranks.size();
    if ((!rv.key_prefix.empty() || n != 0) && n != static_cast<std::size_t>(rv.topo.world_size))
      detail::throw_error(
          error_kind::config,
          {"rank ", rv.topo.rank, ": the rendezvous of ",
           (rv.group_name.empty() ? detail::message({"group \"", rv.key_prefix, "\""}) : rv.group_name),
           " lists ", n, " job ranks for ", rv.topo.world_size,
           " members: a group under a key prefix needs one job rank per member "
           "(rendezvous::job_ranks, as process_group::new_group and split fill it)"});
    return rv.topo.rank;
  }
  static int job_rank_of(const rendezvous& rv) {
    return rv.job_ranks.empty() ? rv.topo.rank : rv.job_ranks[static_cast<std::size_t>(rv.topo.rank)];
  }

  int rank_, size_;
  int job_rank_; ///< what errors and messages call this rank (the job's numbering)
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  std::optional<lost_rank> reported_peer_failure() {
    std::lock_guard lock(contexts_mu_);
    return peer_failure_;
  }

  /// Collectives use ctx_ and leaders_ on the worker without this lock: only
  /// their replacement (close_all) and another thread's look (interrupt_connections)
  /// take it; so do the two ways to fail the group from outside (which poisons first).
  std::mutex contexts_mu_;
  std::optional<lost_rank> peer_failure_; ///< set by fail_for_peer when its failure is the group's
  bool collective_failing_ = false;       ///< a collective failed; its error is on its way (await_verdict)
  std::condition_variable verdict_cv_;    ///< with contexts_mu_: the lanes failed, or a collective began to
  std::mutex failing_mu_;                 ///< one thread at a time fails connections (the innermost lock)
  std::shared_ptr<gloo_mesh_context> ctx_;
  std::shared_ptr<gloo_mesh_context> leaders_; ///< local rank 0 of each node, across nodes with shm
  gloo_shm_path shm_path_; ///< the node's segment, when the ranks voted for it, and its shm arrays
  std::vector<char> scratch_;
  gloo_collectives mesh_; ///< the collectives over ctx_: header round, ring, chain, block exchange
  gloo_waits waits_;      ///< the buffers of ddp's own collectives, for interrupt_connections
  gloo_p2p_lanes lanes_;  ///< send/recv, a worker per peer and direction
  gloo_knobs knobs_;
  std::uint32_t next_tag_ = 1; // worker thread only
  std::string note_;           ///< ", <group name>" for a subgroup: every description carries it
  collective_queue queue_;
  gloo_blame blame_;
  std::string left_key_; ///< a subgroup's: where this rank says it left (say_left)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COMMUNICATOR_IMPL_HPP
