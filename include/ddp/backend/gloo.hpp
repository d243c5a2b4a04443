// The Gloo backend: CPU tensors over TCP. Collectives run one at a time, in
// submission order, on a worker thread (Gloo has no non-blocking collectives),
// each with a fresh tag. The first failure closes every connection, so peers
// fail fast too, and poisons the group.
#ifndef DDP_BACKEND_GLOO_HPP
#define DDP_BACKEND_GLOO_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/collective_queue.hpp>
#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/fault/desync.hpp>
#include <ddp/detail/gloo/batch_store.hpp>
#include <ddp/detail/gloo/chain.hpp>
#include <ddp/detail/gloo/device.hpp>
#include <ddp/detail/gloo/exchange.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/detail/gloo/ring.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/shm/all_reduce.hpp>
#include <ddp/detail/shm/arrays.hpp>
#include <ddp/op.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/types.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE

template <> struct dtype_of<::gloo::float16> : std::integral_constant<dtype, dtype::f16> {};

namespace detail {

/// Lets Gloo's rendezvous use our token-gated tcp_store, under a key prefix.
class gloo_store_adapter final : public ::gloo::rendezvous::Store, public gloo_batch_store {
public:
  gloo_store_adapter(tcp_store& s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    s_.set(prefix_ + key, std::string_view(data.data(), data.size()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = s_.get(prefix_ + key);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, s_.timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    s_.wait(prefixed(keys), timeout);
  }
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::vector<char>>& values) override {
    std::vector<std::string> text;
    for (auto& v : values)
      text.emplace_back(v.begin(), v.end());
    s_.multi_set(prefixed(keys), text);
  }
  std::vector<std::vector<char>> multi_get(const std::vector<std::string>& keys,
                                           std::chrono::milliseconds timeout) override {
    std::vector<std::vector<char>> values;
    for (auto& v : s_.multi_get(prefixed(keys), timeout))
      values.emplace_back(v.begin(), v.end());
    return values;
  }

private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> full;
    for (auto& k : keys)
      full.push_back(prefix_ + k);
    return full;
  }

  tcp_store& s_;
  std::string prefix_;
};

class gloo_communicator {
public:
  explicit gloo_communicator(const rendezvous& rv)
      : rank_(rv.topo.rank), size_(rv.topo.world_size), timeout_(rv.timeout), store_(rv.store),
        queue_(rank_, timeout_) {
    ignore_sigpipe_if_default();
    auto device =
        make_gloo_device({rv.topo.rank, rv.topo.local_rank, rv.topo.master_addr, rv.topo.master_port});
    auto ctx = std::make_shared<gloo_mesh_context>(rank_, size_, timeout_);
    try {
      if (store_) {
        gloo_store_adapter adapter(*store_, "ddp/gloo/");
        ctx->connect(adapter, device, gloo_mesh_keys::per_pair, rv.interrupt.get());
      } else {
        ::gloo::rendezvous::FileStore files(rv.file_path);
        ::gloo::rendezvous::PrefixStore prefixed(rv.token.empty() ? "ddp" : "ddp-" + rv.token, files);
        ctx->connect(prefixed, device, gloo_mesh_keys::per_rank);
      }
    } catch (const ddp::error&) { throw; } catch (const std::exception& e) {
      throw_mesh_error("rank " + std::to_string(rank_) + ": Gloo could not connect to its peers", "", e);
    }
    ctx_ = std::move(ctx);
    if (store_ && shm_vote(rv)) setup_shm(rv);
  }

  /// Descriptors a rank holds at its peak: one per peer (Debian's Gloo swaps
  /// each pair's listener for its connection, never both at once), its
  /// device's epoll and the eventfd that wakes it (gloo_loop_ticker); where the node's ranks can share memory
  /// (shm_layout_fits; DDP_SHM aside), the segment's two and, on a node leader, the
  /// leaders' mesh across nodes (checked:
  /// docs/design-notes.md, "Note [open files]").
  static long open_files(const ddp::topology& t) {
    long n = (t.world_size - 1) + 2;
    if (shm_layout_fits(t)) {
      n += 2;
      const int nodes = t.world_size / t.local_world_size;
      if (nodes > 1 && t.local_rank == 0) n += (nodes - 1) + 2;
    }
    return n;
  }

  gloo_communicator(const gloo_communicator&) = delete;
  gloo_communicator& operator=(const gloo_communicator&) = delete;
  ~gloo_communicator() { queue_.stop(); } // the worker stops before the context goes

  /// True when all_reduce goes through the node's shared-memory segment (see
  /// detail/shm/all_reduce.hpp): on by default when ranks share a node, DDP_SHM=0 off.
  bool shm_active() const { return shm_ != nullptr; }
  /// The shm path's step size (like set_ring_piece_bytes: tests make it small
  /// to cross step ends; same value on every rank, before collectives); 0
  /// restores the defaults (256 KiB within a node, the slot across nodes).
  void set_shm_chunk_bytes(std::size_t bytes) {
    if (shm_) shm_->set_chunk_bytes(bytes);
  }
  /// Benches compare the two paths in one run: false sends all_reduce over TCP
  /// again. Every rank must switch at the same point of its collective sequence.
  void use_shm(bool on) { shm_on_ = on; }
  std::size_t shm_chunk_bytes() const { return shm_ ? shm_->chunk_bytes(nnodes_ > 1) : 0; }
  /// The shm segment's name (tests look for it in /dev/shm); empty when off.
  std::string shm_segment_name() const { return shm_ ? shm_->segment().name() : std::string(); }

  /// All-reduces run in place in a shm array so far (tests check the path taken).
  std::uint64_t shm_in_place_runs() const { return in_place_runs_.load(); }

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  bool is_shm_array_memory(const void* p, std::size_t bytes) const {
    return shm_ && shm_on_ && nnodes_ == 1 && arrays_.find(p, bytes).has_value();
  }

  /// `n` zeroed elements in memory every rank of the node sees (ddp::shm_array):
  /// an all_reduce of a range inside it runs in place. Collective: every rank
  /// calls it, in the same order, with the same n and T. It runs in the
  /// group's queue, after the collectives submitted before it. Private memory
  /// where the shm path is off or spans nodes, or when the node's segment for
  /// it (LOCAL_WORLD_SIZE x n x sizeof(T)) cannot be made (rank 0 warns, once per array).
  template <class T> shm_array<T> make_shm_array(std::size_t n) {
    const std::string what =
        "make_shm_array<" + std::string(ddp::to_string(dtype_v<T>)) + ">(" + std::to_string(n) + ")";
    const std::size_t L = shm_ ? static_cast<std::size_t>(shm_->segment().local_size()) : 1;
    // Every local rank's area in one mapping, whose size must fit size_t and off_t.
    if (n > (std::size_t{1} << 60) / sizeof(T) / L)
      throw error(error_kind::config, "rank " + std::to_string(rank_) + ": " + what +
                                          ": too many elements for one node's shared memory (" +
                                          std::to_string(L) + " local ranks); make several smaller arrays");
    const std::size_t bytes = std::max<std::size_t>(n * sizeof(T), 1);
    std::shared_ptr<shm_segment> shared;
    if (shm_ && nnodes_ == 1) {
      // In the queue: its store calls then never contend with a running
      // collective's (a barrier's liveness checks share the store client).
      // The outcome is shared, not on this stack: wait() may give up first.
      struct outcome {
        std::shared_ptr<shm_segment> seg;
        std::exception_ptr mismatch;
      };
      auto out = std::make_shared<outcome>();
      submit("make_shm_array", n, dtype_v<T>, true,
             [this, out, bytes](std::uint32_t, const std::string& where) {
               out->seg = setup_shm_array(bytes, where, out->mismatch);
             })
          .wait();
      if (out->mismatch) std::rethrow_exception(out->mismatch); // the group lives on: every rank got it
      shared = std::move(out->seg);
    }
    if (shared) {
      auto* p = reinterpret_cast<T*>(shared->data(shared->local_rank()));
      return {p, n, std::move(shared), true};
    }
    try {
      return shm_array<T>::private_memory(n);
    } catch (const std::bad_alloc&) {
      throw error(error_kind::config, "rank " + std::to_string(rank_) + ": " + what + ": cannot allocate " +
                                          std::to_string(bytes) + " B of private memory");
    }
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::exception_ptr poisoned() const { return queue_.poisoned(); }
  void drain() { queue_.drain(); }

  /// For a rank leaving on an error of its own (process_group::abort, or its
  /// teardown on an escaping exception), from any thread: what is queued fails
  /// with `reason`, every connection fails, so peers blocked on this rank fail
  /// now, not at their timeout, and a collective running here is interrupted
  /// (it fails with `reason` too; see interrupt_connections). Returns without
  /// waiting for it.
  void abort_for_failure(const std::string& reason) {
    poison_for_failure(reason);
    interrupt_connections(true);
  }

  /// The first half of abort_for_failure: collectives are refused with
  /// `reason` from now on, and one running now that fails, fails with it,
  /// but nothing is interrupted yet. process_group calls it before it tells
  /// the store, whose news makes the peers close their connections.
  void poison_for_failure(const std::string& reason) {
    std::lock_guard lock(contexts_mu_); // against fail_for_peer: one of them is the group's error
    queue_.abort(std::make_exception_ptr(error(error_kind::backend, reason, rank_)));
  }

  /// The store reports that `lost.rank` failed (process_group's
  /// peer_failure_watch): the group fails naming it, and this rank's TCP
  /// connections close, so a collective waiting here ends now even when it
  /// waits on some other rank (Gloo tells a closed connection only to the
  /// operations posted on it). The node's segment is left alone: its waits
  /// read the store themselves, and aborting it would name this rank.
  void fail_for_peer(const lost_rank& lost) {
    auto why = std::make_exception_ptr(error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                                             "rank " + std::to_string(rank_) + ": rank " +
                                                 std::to_string(lost.rank) + " " + lost.reason +
                                                 "; every collective of this group fails from here on (this "
                                                 "rank heard it from the rendezvous store)",
                                             lost.rank));
    {
      std::lock_guard lock(contexts_mu_);
      if (queue_.poisoned()) return; // the group failed already: its error stands
      peer_failure_ = lost;
      queue_.abort(why);
    }
    queue_.recorder().note("rank " + std::to_string(lost.rank) + " " + lost.reason +
                           " (the store reported it)");
    interrupt_connections(false);
  }

  /// The largest message ddp's fragment ring and chain broadcast send (1 MiB
  /// by default; the broadcast's piece size made no difference:
  /// docs/performance.md, Collectives). Like
  /// Gloo's maxSegmentSize: tests make it small so that small tensors cross
  /// piece boundaries. Every rank must use the same value, set before the
  /// collectives it is for.
  void set_ring_piece_bytes(std::size_t bytes) {
    if (bytes == 0 || bytes > max_piece_bytes)
      throw error(error_kind::config, "rank " + std::to_string(rank_) + ": set_ring_piece_bytes(" +
                                          std::to_string(bytes) + "): the piece size must be 1 B to " +
                                          std::to_string(max_piece_bytes) + " B (1 GiB)");
    ring_piece_bytes_ = bytes;
  }
  /// Larger pieces buy nothing, and sizes near SIZE_MAX would overflow the piece arithmetic.
  static constexpr std::size_t max_piece_bytes = std::size_t{1} << 30;
  std::size_t ring_piece_bytes() const { return ring_piece_bytes_; }

  /// Small tensors (up to header_round::inline_cap: 64 KiB at 2-4 ranks) travel with the header:
  /// one round, and every rank reduces all contributions in rank order, so
  /// every rank gets the same bits. Larger ones go around ddp's ring (as
  /// buckets do), the averaging fused into its last reduction step, on buffers
  /// an abort can interrupt. It was Gloo's ring below 16 MiB, which was no
  /// faster (docs/performance.md, Collectives).
  work all_reduce(void* data, std::size_t n, dtype dt, op o, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      throw error(error_kind::config, "op::avg needs a floating-point tensor, got " +
                                          std::string(to_string(dt)) + ": use op::sum and divide yourself");
    return submit("all_reduce", n, dt, blocking,
                  [=, this, piece = ring_piece_bytes_, shm = shm_ && shm_on_](std::uint32_t tag,
                                                                              const std::string& what) {
                    run_all_reduce(tag, what, data, n, dt, o, piece, shm);
                  });
  }

  /// Sums a bucket given as fragments (each tensor where it lies) across ranks,
  /// then multiplies it by `scale`: no packing, and the averaging fused in.
  work all_reduce_fragments(std::vector<fragment> frags, dtype dt, double scale, bool blocking = false) {
    if (!is_floating(dt) && scale != 1.0)
      throw error(error_kind::config,
                  "scaling needs a floating-point tensor, got " + std::string(to_string(dt)));
    const std::size_t n = total_count(frags);
    // The piece size as of submission: a later set_ring_piece_bytes() does not
    // reach a collective already queued.
    return submit("all_reduce", n, dt, blocking,
                  [=, this, frags = std::move(frags), piece = ring_piece_bytes_,
                   shm = shm_ && shm_on_](std::uint32_t tag, const std::string& what) {
                    auto h = header(collective_kind::all_reduce, tag, n, dt);
                    h.reduce = static_cast<std::uint8_t>(op::sum);
                    h.piece = piece;
                    if (shm && size_ > 1) {
                      run_shm(h, what, frags, dt, op::sum, scale);
                      return;
                    }
                    if (piece != verified_piece_ && size_ > 1) {
                      // Buckets over TCP skip the header round (a round trip
                      // each), but ranks with different pieces would cut the
                      // ring's messages differently: wrong data, or Gloo
                      // aborting the process. So the first bucket, and the first
                      // after a rank changed its piece, compare headers.
                      exchange(h, what, [](int) { return payload{}; });
                      verified_piece_ = piece;
                    }
                    fragment_ring(ctx_, waits_, frags, dt, scratch_, piece).run(tag, scale, timeout_);
                  });
  }

  /// Small tensors travel with the header; larger ones down ddp's chain
  /// (detail/gloo/chain.hpp), once the headers agree.
  work broadcast(void* data, std::size_t n, dtype dt, int root, bool blocking = false) {
    return submit("broadcast", n, dt, blocking,
                  [=, this, piece = ring_piece_bytes_](std::uint32_t tag, const std::string& what) {
                    run_broadcast(tag, what, data, n, dt, root, piece);
                  });
  }

  /// Small tensors travel with the header; larger ones in ddp's block exchange
  /// (detail/gloo/exchange.hpp). `in` may be this rank's own block of `out`.
  work all_gather(const void* in, void* out, std::size_t n, dtype dt, bool blocking = false) {
    return submit("all_gather", n, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      run_all_gather(tag, what, in, out, n, dt);
    });
  }

  /// Block r of `in` (n elements each) is reduced across ranks into rank r's `out`.
  /// Each block goes to its owner (with the header when small, else in ddp's
  /// block exchange, detail/gloo/exchange.hpp), then the owner reduces the blocks in
  /// rank order. `out` may be this rank's own block of `in`.
  work reduce_scatter(const void* in, void* out, std::size_t n, dtype dt, op o, bool blocking = false) {
    if (o == op::avg && !is_floating(dt))
      throw error(error_kind::config,
                  "op::avg needs a floating-point tensor, got " + std::string(to_string(dt)));
    return submit("reduce_scatter", n, dt, blocking, [=, this](std::uint32_t tag, const std::string& what) {
      run_reduce_scatter(tag, what, in, out, n, dt, o);
    });
  }

  /// The header round is the barrier: no rank leaves it before every rank's
  /// header arrived.
  work barrier(bool blocking = false) {
    return submit("barrier", 0, dtype::u8, blocking, [this](std::uint32_t tag, const std::string& what) {
      if (size_ == 1) return;
      exchange(header(collective_kind::barrier, tag, 0, dtype::u8), what, [](int) { return payload{}; });
    });
  }

private:
  /// Whether the job's layout allows shared memory at all: several ranks per
  /// node, whole nodes, at most 256 ranks on one.
  static bool shm_layout_fits(const ddp::topology& t) {
    const int L = t.local_world_size;
    return L > 1 && L <= 256 && t.world_size > 1 && t.world_size % L == 0;
  }

  /// Whether every rank can and wants to reduce through shared memory: DDP_SHM
  /// not 0, more than one rank per node, and the launcher's layout (node_rank,
  /// local_rank: never the hostname) contiguous, as ddprun and torchrun lay
  /// ranks out. A vote in the store, so that all ranks take the same path.
  bool shm_vote(const rendezvous& rv) {
    const auto& t = rv.topo;
    const int L = t.local_world_size;
    bool want = getenv_str("DDP_SHM").value_or("1") != "0" && shm_layout_fits(t) &&
                t.local_rank == rank_ % L && t.node_rank == rank_ / L;
    if (!want) store_->add("ddp/shm/no", 1);
    if (store_->add("ddp/shm/votes", 1) == size_)
      store_->set("ddp/shm/decision", store_->add("ddp/shm/no", 0) == 0 ? "on" : "off");
    store_->wait({"ddp/shm/decision"}, timeout_);
    return store_->get("ddp/shm/decision") == "on";
  }

  /// Maps the node's segment; across nodes also connects the nodes' leaders
  /// (local rank 0 of each) in a Gloo context of their own.
  void setup_shm(const rendezvous& rv) {
    const auto& t = rv.topo;
    // The slot: on one node the pipelined path needs two of its steps (512 KiB),
    // across nodes the staged path fills it whole (4 MiB). Whole pages: every
    // slot and the result area stay aligned for any dtype.
    const std::size_t slot_default = size_ == t.local_world_size ? 2 * shm_all_reduce::default_chunk_bytes
                                                                 : shm_all_reduce::default_slot_bytes;
    const std::size_t chunk =
        (static_cast<std::size_t>(env_int("DDP_SHM_CHUNK_BYTES", 4096, std::int64_t{1} << 30)
                                      .value_or(static_cast<std::int64_t>(slot_default))) +
         4095) /
        4096 * 4096;
    const shm_setup a{.token = rv.token,
                      .store_where = t.master_addr + ":" + std::to_string(t.store_port),
                      .rank = rank_,
                      .world_size = size_,
                      .node_rank = t.node_rank,
                      .local_rank = t.local_rank,
                      .local_size = t.local_world_size,
                      .chunk_capacity = chunk,
                      .timeout = timeout_};
    shm_args_ = a;
    shm_setup_failure failed;
    auto seg = shm_segment::setup(*store_, a, failed);
    if (!seg) {
      // Every rank got the same outcome: all stay on TCP, or all throw.
      if (failed.kind == error_kind::mismatch)
        throw error(error_kind::mismatch,
                    "rank " + std::to_string(rank_) + ": setting up the node's shared-memory segment: rank " +
                        std::to_string(failed.rank) + " " + failed.message,
                    failed.rank);
      if (rank_ == 0) // one warning for the job, not one per rank
        log_line(
            "rank 0",
            "warning: the shared-memory all-reduce is off, every rank reduces over TCP (slower): rank " +
                std::to_string(failed.rank) + " " + failed.message +
                ". Enlarge /dev/shm (each node needs (LOCAL_WORLD_SIZE + 1) x DDP_SHM_CHUNK_BYTES, "
                "default 512 KiB on one node, 4 MiB across nodes, plus a page) or lower DDP_SHM_CHUNK_BYTES; "
                "DDP_SHM=0 silences this.");
      return;
    }
    nnodes_ = size_ / t.local_world_size;
    if (nnodes_ > 1 && t.local_rank == 0) {
      auto device =
          make_gloo_device({rv.topo.rank, rv.topo.local_rank, rv.topo.master_addr, rv.topo.master_port});
      auto ctx = std::make_shared<gloo_mesh_context>(t.node_rank, nnodes_, timeout_);
      gloo_store_adapter adapter(*store_, "ddp/gloo-leaders/");
      try {
        ctx->connect(adapter, device, gloo_mesh_keys::per_pair, rv.interrupt.get(), t.local_world_size);
      } catch (const ddp::error&) { throw; } catch (const std::exception& e) {
        // Gloo's ranks here are node ranks: the leader of node N is rank N * LOCAL_WORLD_SIZE.
        throw_mesh_error("rank " + std::to_string(rank_) + ", leader of node " + std::to_string(t.node_rank) +
                             ": Gloo could not connect to the other nodes' leaders",
                         "(Gloo's \"rank N\" is node N's leader; the store's ranks are global) ", e);
      }
      leaders_ = std::move(ctx);
    }
    auto find_lost = [store = store_](std::chrono::milliseconds grace) -> shm_all_reduce::lost_peer {
      // check() first: one round trip, no wait, on the common path where nobody is lost.
      // A store that fails to answer is news too: wait_for_lost_rank names whom that
      // means (rank 0 cut off, or the store's host unreachable), as the TCP path does.
      try {
        if (grace.count() == 0 && !store->check({store_lost_key})) return {};
      } catch (const ddp::error&) {}
      auto l = store->wait_for_lost_rank(grace);
      return {l.rank, l.reason, l.silent};
    };
    shm_ = std::make_unique<shm_all_reduce>(std::move(seg), std::move(find_lost), rank_, timeout_);
  }

  /// All-reduce through the node's segment; across nodes the leaders reduce
  /// each chunk over Gloo between the node's two barriers. Across nodes the
  /// header round runs first over TCP, so ranks of different nodes that
  /// disagree fail with mismatch as on the TCP path.
  void run_shm(collective_header h, const std::string& what, const std::vector<fragment>& frags, dtype dt,
               op o, double scale) {
    h.area = shm_->chunk_bytes(nnodes_ > 1); // the chunking shapes the barriers: ranks must agree on it
    if (nnodes_ == 1) h.piece = 0;           // no ring on one node: its piece does not matter
    guard_shm(what, [&] {
      if (nnodes_ == 1) {
        if (auto in = in_shm_array(frags, dt)) {
          ++in_place_runs_;
          h.in_place = 1;
          h.root = static_cast<std::int32_t>(in->id);
          h.area = in->offset;
          shm_->run_in_place(*in->seg, in->offset, total_count(frags), dt, o, scale, h, what);
          return;
        }
        shm_->run(frags, dt, o, scale, h, what);
        return;
      }
      exchange(h, what, [](int) { return payload{}; });
      const op node_op = o == op::avg ? op::sum : o;
      std::uint32_t sub = 0;
      shm_->run(frags, dt, node_op, 1.0, h, what, [&, this](char* res, std::size_t m) {
        if (m == 0) return;
        // Around ddp's ring between the leaders, the scaling fused in (sums).
        const std::vector<fragment> chunk{{res, m}};
        const bool fuse = node_op == op::sum;
        fragment_ring(leaders_, waits_, chunk, dt, scratch_, h.piece, node_op)
            .run(h.tag * 4096u + (sub++ % 4096u), fuse ? scale : 1.0, timeout_);
        if (!fuse && scale != 1.0) scale_in_place(res, m, dt, scale);
      });
    });
  }

  /// make_shm_array's collective part (on the queue's thread): the node's
  /// segment for the array, or nullptr when it could not be made (then every
  /// rank uses private memory; rank 0 says why). Ranks that asked for different
  /// sizes get `mismatch` set, on every rank. A timeout or a lost rank throws:
  /// the arrays' count would differ between ranks, so the group is poisoned.
  std::shared_ptr<shm_segment> setup_shm_array(std::size_t bytes, const std::string& what,
                                               std::exception_ptr& mismatch) {
    auto [key, id] = arrays_.next();
    shm_setup a = shm_args_;
    a.key = key;
    a.result_area = false;
    // Areas of whole cache lines, not pages: ranks whose sizes differ by more
    // than 64 B get segments of different sizes, which is how they are caught.
    a.chunk_capacity = (bytes + 63) / 64 * 64;
    a.size_mismatch_hint =
        "the node's ranks asked for different sizes (" + what +
        " here): call make_shm_array with the same element count and type on every rank, in "
        "the same order.";
    shm_setup_failure failed;
    std::unique_ptr<shm_segment> seg;
    try {
      seg = shm_segment::setup(*store_, a, failed);
    } catch (const error& e) {
      // A rank that failed: its name and reason are the whole story.
      if (e.kind() == error_kind::peer_lost)
        throw error(e.kind(), what + " failed: " + std::string(e.message()), e.rank());
      const std::string text = what +
                               " is collective: every rank of the group calls it, in the same order. " +
                               std::string(e.message());
      // A rank that skipped the call, or is far behind: the lost-rank search
      // and the desync report name it, as for a collective that timed out.
      if (e.kind() == error_kind::timeout) fail_io(what, "Timed out: " + text);
      throw error(e.kind(), text, e.rank());
    }
    if (seg) {
      std::shared_ptr<shm_segment> shared(std::move(seg));
      arrays_.add(id, shared);
      return shared;
    }
    if (failed.kind == error_kind::mismatch) {
      mismatch = std::make_exception_ptr(error(error_kind::mismatch,
                                               "rank " + std::to_string(rank_) + ": " + what + ": rank " +
                                                   std::to_string(failed.rank) + " " + failed.message,
                                               failed.rank));
      return nullptr;
    }
    if (rank_ == 0)
      log_line("rank 0", "warning: " + what +
                             " got private memory on every rank, so all-reduces of it copy "
                             "through the node's segment as usual (slower): rank " +
                             std::to_string(failed.rank) + " " + failed.message +
                             ". If /dev/shm is full, enlarge it: each node needs LOCAL_WORLD_SIZE x the "
                             "array's bytes (docker run --shm-size=...).");
    return nullptr;
  }

  /// Where the fragments, back to back in memory, lie in a shm array of this
  /// rank's: an all_reduce of them runs in place.
  std::optional<shm_array_registry::hit> in_shm_array(const std::vector<fragment>& frags, dtype dt) const {
    const std::size_t esz = size_of(dt);
    if (frags.empty() || total_count(frags) == 0) return std::nullopt;
    for (std::size_t i = 1; i < frags.size(); ++i)
      if (static_cast<const char*>(frags[i - 1].data) + frags[i - 1].count * esz != frags[i].data)
        return std::nullopt;
    return arrays_.find(frags.front().data, total_count(frags) * esz);
  }

  /// Runs `f`, a step in the node's segment. On failure the node's other ranks
  /// stop waiting on this one, and a timeout gets the same lost-rank search and
  /// desync report as one over TCP, so both paths blame alike.
  template <class F> void guard_shm(const std::string& what, F&& f) {
    try {
      f();
    } catch (const ddp::error& e) {
      shm_->abort();
      if (e.kind() == error_kind::timeout) fail_io(what, std::string("Timed out: ") + e.what());
      throw;
    } catch (...) {
      shm_->abort();
      throw;
    }
  }

  /// Queues `body(tag, what)`: each collective gets a fresh Gloo tag, and any
  /// failure closes every connection (peers fail at once) and poisons the group.
  template <class F> work submit(const char* name, std::size_t n, dtype dt, bool blocking, F body) {
    return queue_.submit(name, n, dt, blocking,
                         [this, body = std::move(body)](const std::string& what, work_state&) mutable {
                           std::uint32_t tag = next_tag_++;
                           run_guarded(what, [&] { body(tag, what); });
                         });
  }

  void run_all_reduce(std::uint32_t tag, const std::string& what, void* data, std::size_t n, dtype dt, op o,
                      std::size_t piece, bool shm) {
    if (size_ == 1) return;
    auto h = header(collective_kind::all_reduce, tag, n, dt);
    h.reduce = static_cast<std::uint8_t>(o);
    h.piece = piece;
    if (shm) {
      std::vector<fragment> whole{{data, n}};
      run_shm(h, what, whole, dt, o, o == op::avg ? 1.0 / size_ : 1.0);
      return;
    }
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(h, what, [&](int) { return payload{data, small ? bytes : 0}; });
    if (n == 0) return;
    const double scale = o == op::avg ? 1.0 / size_ : 1.0;
    if (!small) {
      std::vector<fragment> whole{{data, n}};
      fragment_ring(ctx_, waits_, whole, dt, scratch_, piece, o == op::avg ? op::sum : o)
          .run(tag, scale, timeout_);
      return;
    }
    // Every rank reduces the same contributions in the same (rank) order: same bits everywhere.
    std::memcpy(headers_.own_slot(rank_), data, bytes);
    std::memcpy(data, headers_.payload(0), bytes);
    const auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r) {
      if (r + 1 == size_ && scale != 1.0)
        sum_scaled(data, data, headers_.payload(r), n, dt, scale); // averaging fused
      else
        fn(data, data, headers_.payload(r), n);
    }
  }

  void run_broadcast(std::uint32_t tag, const std::string& what, void* data, std::size_t n, dtype dt,
                     int root, std::size_t piece) {
    if (size_ == 1) return;
    auto h = header(collective_kind::broadcast, tag, n, dt);
    h.root = root;
    h.piece = piece; // it cuts the chain's messages: ranks must agree on it
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(h, what, [&](int) { return payload{data, small && rank_ == root ? bytes : 0}; });
    if (n == 0) return;
    if (small) {
      if (rank_ != root) std::memcpy(data, headers_.payload(root), bytes);
      return;
    }
    chain_broadcast::run(ctx_, waits_, data, bytes, root, tag, piece, timeout_);
  }

  void run_all_gather(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n,
                      dtype dt) {
    const std::size_t bytes = n * size_of(dt);
    if (size_ == 1) {
      if (n) std::memmove(out, in, bytes);
      return;
    }
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(header(collective_kind::all_gather, tag, n, dt), what, [&](int) {
      return payload{in, small ? bytes : 0};
    });
    if (n == 0) return;
    auto* o = static_cast<char*>(out);
    auto* own = o + bytes * static_cast<std::size_t>(rank_);
    std::memmove(own, in, bytes);
    if (small) {
      for (int r = 0; r < size_; ++r)
        if (r != rank_) std::memcpy(o + bytes * static_cast<std::size_t>(r), headers_.payload(r), bytes);
      return;
    }
    // Own block to every peer, theirs straight into `out`.
    exchange_blocks(ctx_, waits_, {own, bytes, true}, {o, bytes}, tag, timeout_);
  }

  void run_reduce_scatter(std::uint32_t tag, const std::string& what, const void* in, void* out,
                          std::size_t n, dtype dt, op o) {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
    const bool small = bytes <= header_round::inline_cap(size_);
    const auto* blocks = static_cast<const char*>(in);
    auto block = [&](int r) { return blocks + bytes * static_cast<std::size_t>(r); };
    if (size_ > 1) {
      auto h = header(collective_kind::reduce_scatter, tag, n, dt);
      h.reduce = static_cast<std::uint8_t>(o);
      exchange(h, what, [&](int p) { return payload{block(p), small ? bytes : 0}; });
    }
    if (n == 0) return;
    // from(r): the block rank r sent for this rank. This rank's own is read
    // from a copy: `out` may overlap `in` (in place), and is written below.
    std::function<const char*(int)> from;
    if (size_ == 1) {
      from = [&](int) { return blocks; };
    } else if (small) {
      std::memcpy(headers_.own_slot(rank_), block(rank_), bytes);
      from = [&](int r) { return r == rank_ ? headers_.own_slot(rank_) : headers_.payload(r); };
    } else {
      scratch_.resize(total);
      auto* mine = scratch_.data() + bytes * static_cast<std::size_t>(rank_);
      std::memcpy(mine, block(rank_), bytes);
      exchange_blocks(ctx_, waits_, {const_cast<char*>(blocks), bytes}, {scratch_.data(), bytes}, tag,
                      timeout_);
      from = [&](int r) {
        return static_cast<const char*>(scratch_.data()) + bytes * static_cast<std::size_t>(r);
      };
    }
    std::memmove(out, from(0), bytes);
    auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r)
      fn(out, out, from(r), n);
    if (o == op::avg) scale_in_place(out, n, dt, 1.0 / size_);
  }

  struct payload {
    const void* data = nullptr;
    std::size_t bytes = 0;
  };

  static collective_header header(collective_kind kind, std::uint32_t tag, std::size_t n, dtype dt) {
    collective_header h;
    h.kind = kind;
    h.tag = tag;
    h.count = n;
    h.dt = static_cast<std::uint8_t>(dt);
    return h;
  }

  /// The header round every collective starts with (see detail/gloo/header.hpp):
  /// throws ddp::error(mismatch) on every rank when ranks disagree.
  template <class P> void exchange(const collective_header& h, const std::string& what, P&& payload_for) {
    // On one node with shm every collective first compares headers in the
    // segment, where an all_reduce would wait (see shm_all_reduce::agree).
    if (shm_ && nnodes_ == 1) guard_shm(what, [&] { shm_->agree(h, what); });
    headers_.run(
        ctx_, waits_, h,
        [&](int p) {
          payload pl = payload_for(p);
          return std::pair<const void*, std::size_t>{pl.data, pl.bytes};
        },
        timeout_, what);
  }

  template <class F> void run_guarded(const std::string& what, F&& f) {
    try {
      f();
    } catch (...) { fail_collective(what, std::current_exception()); }
  }

  /// Turns a collective's failure into the group's error; every path closes
  /// the connections first, so peers blocked on this rank fail now too.
  [[noreturn]] void fail_collective(const std::string& what, std::exception_ptr failure) {
    // abort_for_failure or fail_for_peer interrupted this collective: their
    // reason is the error, not the closed connections they caused (nor a
    // search for whom to blame).
    if (auto why = queue_.poisoned()) {
      auto lost = reported_peer_failure();
      close_all(!lost); // a peer's failure: aborting the segment would name this rank
      if (lost)
        throw error(
            lost->silent ? error_kind::timeout : error_kind::peer_lost,
            what + " failed: rank " + std::to_string(lost->rank) + " " + lost->reason +
                " (this rank heard it from the rendezvous store while it waited, and closed its connections)",
            lost->rank);
      std::rethrow_exception(why);
    }
    try {
      std::rethrow_exception(failure);
    } catch (const ::gloo::IoException& e) {
      fail_io(what, e.what());
    } catch (const ::gloo::EnforceNotMet& e) {
      close_all();
      throw error(error_kind::backend, what + " failed inside Gloo: " + e.what(), rank_);
    } catch (const ddp::error&) {
      close_all();
      throw;
    } catch (const std::exception& e) {
      close_all();
      throw error(error_kind::backend, what + " failed: " + e.what(), rank_);
    }
  }

  /// A collective failed on the wire. Whom to blame: first a rank the store
  /// recorded lost (it dropped, or announced its own failure); else, since
  /// nobody died, a rank that stalled: the desync report finds the rank that
  /// cannot say how far it got. The report is printed, and kept in the flight
  /// recorder's JSON (DDP_FLIGHT_RECORDER).
  [[noreturn]] void fail_io(const std::string& what, const std::string& gloo_text) {
    close_all(); // peers blocked on us fail now instead of at their timeout
    const bool timed_out = gloo_text.find("imed out") != std::string::npos;
    if (auto lost = find_lost_rank(timed_out)) {
      queue_.recorder().note("rank " + std::to_string(lost.rank) + " " + lost.reason);
      throw error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                  what + " failed: rank " + std::to_string(lost.rank) + " " + lost.reason +
                      ". Gloo: " + gloo_text,
                  lost.rank);
    }
    desync_result d;
    if (store_) {
      d = exchange_progress(*store_, rank_, size_, queue_.recorder().progress());
      log_line("rank " + std::to_string(rank_), "desync report: " + d.verdict + d.table);
      queue_.recorder().note(d.verdict + d.table);
    }
    std::string blame = d.verdict.empty() ? std::string() : " " + d.verdict + ".";
    if (timed_out)
      throw error(error_kind::timeout,
                  what + " timed out after " + std::to_string(timeout_.count()) + " ms waiting for a peer." +
                      blame +
                      " (A rank stalled, is far behind, or skipped this collective; raise DDP_TIMEOUT if "
                      "that is expected.) Gloo: " +
                      gloo_text,
                  d.culprit);
    throw error(error_kind::peer_lost,
                what + " failed: a peer closed its connection (it failed or timed out)." + blame +
                    " Gloo: " + gloo_text,
                d.culprit);
  }

  /// A mesh that did not form. A peer that died meanwhile refused or dropped
  /// a connection, or the connect stopped for it (detail/fault/connect_interrupt.hpp):
  /// named when the store saw it go.
  /// Otherwise a wait for a peer's connection that ran its whole timeout
  /// (gloo_mesh_timeout) is a timeout: that peer is to blame, and
  /// process_group does not report it as this rank's failure. `note` goes
  /// before Gloo's text.
  [[noreturn]] void throw_mesh_error(const std::string& what, const std::string& note,
                                     const std::exception& gloo) {
    const std::string gloo_said = note + gloo.what();
    if (auto lost = find_lost_rank(false))
      throw error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                  what + ": rank " + std::to_string(lost.rank) + " " + lost.reason + ". Gloo: " + gloo_said,
                  lost.rank);
    const bool timed_out = dynamic_cast<const gloo_mesh_timeout*>(&gloo) != nullptr;
    throw error(timed_out ? error_kind::timeout : error_kind::backend, what + ": " + gloo_said, rank_);
  }

  /// Asks the store which rank dropped without a goodbye or announced its own
  /// failure. After a closed connection the store notices a crash at about the
  /// moment we do, so it gets a second to record it; after a timeout whoever
  /// died did so long ago, so a look suffices.
  lost_rank find_lost_rank(bool timed_out) {
    if (!store_) return {};
    return store_->wait_for_lost_rank(std::chrono::milliseconds(timed_out ? 0 : 1000));
  }

  void close_all(bool with_segment = true) {
    if (shm_ && with_segment)
      shm_->abort(); // the node's ranks waiting in the segment fail now too, as over TCP
    std::lock_guard lock(contexts_mu_);
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
    if (shm_ && with_segment) shm_->abort();
    std::shared_ptr<gloo_mesh_context> ctx, leaders;
    {
      std::lock_guard lock(contexts_mu_);
      ctx = ctx_;
      leaders = leaders_;
    }
    for (auto* c : {ctx.get(), leaders.get()})
      if (c) c->fail_connections();
    waits_.interrupt_all(); // after the sockets closed: nothing writes into the buffers any more
  }

  int rank_, size_;
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
  std::shared_ptr<gloo_mesh_context> ctx_;
  std::shared_ptr<gloo_mesh_context> leaders_; ///< local rank 0 of each node, across nodes with shm
  std::unique_ptr<shm_all_reduce> shm_;
  shm_setup shm_args_;        ///< how shm_'s segment was set up: shm arrays start from it
  shm_array_registry arrays_; ///< make_shm_array's segments, for in-place all-reduces
  std::atomic<std::uint64_t> in_place_runs_{0};
  int nnodes_ = 1;
  bool shm_on_ = true;
  std::vector<char> scratch_;
  header_round headers_;
  gloo_waits waits_; ///< the buffers of ddp's own collectives, for interrupt_connections
  std::size_t ring_piece_bytes_ = fragment_ring::default_piece_bytes;
  std::size_t verified_piece_ = 0; ///< the piece every rank's buckets last agreed on (worker thread only)
  std::uint32_t next_tag_ = 1;     // worker thread only
  collective_queue queue_;
};

} // namespace detail

/// Backend policy: Gloo over TCP, for CPU tensors.
struct gloo {
  static constexpr std::string_view name = "gloo";
  using communicator = detail::gloo_communicator;
};

DDP_END_NAMESPACE

#endif // DDP_BACKEND_GLOO_HPP
