// The Gloo communicator's shared-memory path: the vote that decides it, the
// node's segment (and, across nodes, the leaders' mesh), all_reduce through
// it, and the shm arrays an all_reduce runs in place in. The header round
// and the blame stay the communicator's: it hands them in as `exchange` and
// `fail_io`, so both paths agree and blame alike.
#ifndef DDP_DETAIL_GLOO_SHM_PATH_HPP
#define DDP_DETAIL_GLOO_SHM_PATH_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/gloo/blame.hpp>
#include <ddp/detail/gloo/device.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/knobs.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/detail/gloo/ring.hpp>
#include <ddp/detail/gloo/store_adapter.hpp>
#include <ddp/detail/gloo/waits.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/shm/all_reduce.hpp>
#include <ddp/detail/shm/arrays.hpp>
#include <ddp/detail/shm/block_collectives.hpp>
#include <ddp/error.hpp>
#include <ddp/op.hpp>
#include <ddp/shm_array.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_shm_path {
public:
  /// The header round alone (across nodes it runs over TCP first).
  using exchange_function = std::function<void(const collective_header& h, const std::string& what)>;
  /// The communicator's blame for a failure on the wire: closes its connections, then throws.
  using fail_io_function = std::function<void(const std::string& what, const std::string& gloo_text)>;

  /// `knobs`, `waits` and `scratch` are the communicator's, which outlives this.
  gloo_shm_path(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<tcp_store> store,
                gloo_knobs& knobs, gloo_waits& waits, std::vector<char>& scratch, exchange_function exchange,
                fail_io_function fail_io)
      : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)), knobs_(knobs), waits_(waits),
        scratch_(scratch), exchange_(std::move(exchange)), fail_io_(std::move(fail_io)) {}

  /// The node's all-reduce; nullptr while the path is off.
  shm_all_reduce* get() const { return shm_.get(); }
  int nodes() const { return nnodes_; }

  /// Whether the job's layout allows shared memory at all: several ranks per
  /// node, whole nodes, at most 256 ranks on one.
  static bool layout_fits(const ddp::topology& t) {
    const int L = t.local_world_size;
    return L > 1 && L <= 256 && t.world_size > 1 && t.world_size % L == 0;
  }

  /// Bytes per local rank's area from DDP_SHM_AREA_BYTES; empty when it is
  /// not set.
  std::optional<std::int64_t> area_bytes_from_env() const {
    constexpr std::int64_t lo = 4096, hi = std::int64_t{1} << 30;
    return env_int("DDP_SHM_AREA_BYTES", lo, hi);
  }

  /// Whether every rank can and wants to reduce through shared memory: DDP_SHM
  /// not 0, more than one rank per node, and the launcher's layout (node_rank,
  /// local_rank: never the hostname) contiguous, as ddprun and torchrun lay
  /// ranks out. A subgroup's layout is its members' (rendezvous::group_layout):
  /// a rank whose node holds another count of members than rank 0's, or not
  /// a contiguous run of group ranks, votes no. A vote in the store, under the
  /// group's keys, so that all its ranks take the same path.
  bool vote(const rendezvous& rv) {
    keys_ = "ddp/shm/" + rv.key_prefix;
    job_ranks_ = rv.job_ranks;
    const auto& t = layout(rv);
    const int L = t.local_world_size;
    const bool fits = layout_fits(t) && t.local_rank == rank_ % L && t.node_rank == rank_ / L;
    const bool want = getenv_str("DDP_SHM").value_or("1") != "0" && fits;
    if (!want) store_->add(keys_ + "no", 1);
    if (store_->add(keys_ + "votes", 1) == size_)
      store_->set(keys_ + "decision", store_->add(keys_ + "no", 0) == 0 ? "on" : "off");
    store_->wait({keys_ + "decision"}, timeout_);
    const bool on = store_->get(keys_ + "decision") == "on";
    if (!on && !rv.key_prefix.empty() && debug() >= debug_level::info && size_ > 1)
      log_line(
          detail::message({"rank ", job_rank(rank_)}),
          detail::message(
              {rv.group_name, " reduces over TCP, not the node's shared memory: ",
               (!fits ? detail::message(
                            {"its layout is not whole nodes (this node holds ", L, " of its ", size_,
                             " members, this one its local rank ", t.local_rank, " on its node ", t.node_rank,
                             "; the path needs as many members on every node, more than one, each node's a "
                             "contiguous run of its ranks)"})
                      : std::string(want ? "another member voted against it (its own line says why)"
                                         : "DDP_SHM=0"))}));
    return on;
  }

  /// Maps the node's segment; across nodes also connects the nodes' leaders
  /// (local rank 0 of each) in a Gloo context of their own, which it returns
  /// (nullptr on the other ranks, or when the segment could not be made).
  std::shared_ptr<gloo_mesh_context> setup(const rendezvous& rv, gloo_blame& blame) {
    const auto& t = layout(rv);
    std::shared_ptr<gloo_mesh_context> leaders;
    // The area: on one node the pipelined path needs two of its steps (512 KiB),
    // across nodes the staged path fills it whole (4 MiB). Whole pages: every
    // area, the result area too, stays aligned for any dtype.
    const std::size_t area_default = size_ == t.local_world_size ? 2 * shm_all_reduce::default_step_bytes
                                                                 : shm_all_reduce::default_area_bytes;
    const std::size_t area =
        (static_cast<std::size_t>(area_bytes_from_env().value_or(static_cast<std::int64_t>(area_default))) +
         4095) /
        4096 * 4096;
    // The segment names its ranks as the job does: the store's finished and
    // lost keys, which its waits read, are by job rank.
    const shm_setup a{.token = rv.token,
                      .store_where = detail::message({rv.topo.master_addr, ":", rv.topo.store_port}),
                      .rank = job_rank(rank_),
                      .world_size = size_,
                      .node_rank = t.node_rank,
                      .local_rank = t.local_rank,
                      .local_size = t.local_world_size,
                      .area_bytes = area,
                      .timeout = timeout_,
                      .key = keys_};
    shm_args_ = a;
    shm_setup_failure failed;
    auto seg = shm_segment::setup(*store_, a, failed);
    if (!seg) {
      // Every rank got the same outcome: all stay on TCP, or all throw.
      if (failed.kind == error_kind::mismatch)
        detail::throw_error(error_kind::mismatch,
                            {"rank ", job_rank(rank_), ": setting up the node's shared-memory segment: rank ",
                             failed.rank, " ", failed.message},
                            failed.rank);
      if (rank_ == 0) // one warning for the group, not one per rank
        log_line(
            detail::message({"rank ", job_rank(0)}),
            detail::message(
                {"warning: the shared-memory all-reduce is off, every rank",
                 (rv.group_name.empty() ? std::string() : " of " + rv.group_name),
                 " reduces over TCP (slower): rank ", failed.rank, " ", failed.message,
                 ". Enlarge /dev/shm (each node needs (LOCAL_WORLD_SIZE + 1) x DDP_SHM_AREA_BYTES, "
                 "default 512 KiB on one node, 4 MiB across nodes, plus a page) or lower DDP_SHM_AREA_BYTES; "
                 "DDP_SHM=0 silences this."}));
      return leaders;
    }
    nnodes_ = size_ / t.local_world_size;
    if (nnodes_ > 1 && t.local_rank == 0) {
      auto device =
          make_gloo_device({rv.topo.rank, rv.topo.local_rank, rv.topo.master_addr, rv.topo.master_port});
      auto ctx = std::make_shared<gloo_mesh_context>(t.node_rank, nnodes_, timeout_);
      gloo_store_adapter adapter(*store_, "ddp/gloo-leaders/" + rv.key_prefix);
      std::vector<int> leaders_job_ranks; // the leader of node N is group rank N * L
      for (int n = 0; n < nnodes_; ++n)
        leaders_job_ranks.push_back(job_rank(n * t.local_world_size));
      try {
        ctx->connect(adapter, device, gloo_mesh_keys::per_pair, rv.interrupt.get(), leaders_job_ranks);
      } catch (const ddp::error&) { throw; } catch (const std::exception& e) {
        blame.mesh(detail::message({"rank ", job_rank(rank_), ", leader of node ", t.node_rank,
                                    ": Gloo could not connect to the other nodes' leaders"}),
                   "(Gloo's \"rank N\" is node N's leader; the store's ranks are global) ", e);
      }
      leaders = std::move(ctx);
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
    auto finished = [store = store_](int global) {
      try {
        return store->check({std::string(store_finished_prefix) + std::to_string(global)});
      } catch (const ddp::error&) {
        return false; // the store gone says nothing about who finished
      }
    };
    shm_ = std::make_unique<shm_all_reduce>(std::move(seg), std::move(find_lost), job_rank(rank_), timeout_,
                                            std::move(finished));
    return leaders;
  }

  /// All-reduce through the node's segment; across nodes the leaders reduce
  /// each step over Gloo (on `leaders`) between the node's two barriers. Across nodes the
  /// header round (`exchange(h, what)`) runs first over TCP, so ranks of different nodes that
  /// disagree fail with mismatch as on the TCP path.
  void run(collective_header h, const std::string& what, const std::vector<fragment>& frags, dtype dt, op o,
           double scale, const std::shared_ptr<gloo_mesh_context>& leaders) {
    h.shm_shape = shm_->step_bytes(nnodes_ > 1); // the steps shape the barriers: ranks must agree on them
    if (nnodes_ == 1) h.piece = 0;               // no ring on one node: its piece does not matter
    guard(what, [&] {
      if (nnodes_ == 1) {
        if (auto in = in_array(frags, dt)) {
          ++knobs_.in_place_runs;
          h.in_place = 1;
          h.root = static_cast<std::int32_t>(in->id);
          h.shm_shape = in->offset;
          shm_->run_in_place(*in->seg, in->offset, total_count(frags), dt, o, scale, h, what);
          return;
        }
        shm_->run(frags, dt, o, scale, h, what);
        return;
      }
      exchange_(h, what);
      const op node_op = o == op::avg ? op::sum : o;
      std::uint32_t sub = 0;
      shm_->run(frags, dt, node_op, 1.0, h, what, [&, this](char* res, std::size_t m) {
        if (m == 0) return;
        // Around ddp's ring between the leaders, the scaling fused in (sums).
        const std::vector<fragment> step{{res, m}};
        const bool fuse = node_op == op::sum;
        fragment_ring(leaders, waits_, step, dt, scratch_, h.piece, node_op)
            .run(h.tag * 4096u + (sub++ % 4096u), fuse ? scale : 1.0, timeout_);
        if (!fuse && scale != 1.0) scale_in_place(res, m, dt, scale);
      });
    });
  }

  /// reduce_scatter and all_gather through the node's segment
  /// (detail/shm/block_collectives.hpp); one node only (`nodes() == 1`).
  /// `h.shm_shape` carries the half area, which shapes the steps: a rank that runs
  /// the collective over TCP meanwhile (use_shm(false)) fails the header check.
  void reduce_scatter(collective_header h, const std::string& what, const void* in, void* out, std::size_t n,
                      dtype dt, op o) {
    h.shm_shape = shm_->half_area_bytes();
    ++knobs_.shm_block_runs;
    guard(what, [&] { shm_reduce_scatter(*shm_, in, out, n, dt, o, h, what); });
  }
  void all_gather(collective_header h, const std::string& what, const void* in, void* out, std::size_t n,
                  dtype dt) {
    h.shm_shape = shm_->half_area_bytes();
    ++knobs_.shm_block_runs;
    guard(what, [&] { shm_all_gather(*shm_, in, out, n, dt, h, what); });
  }

  /// Runs `f`, a step in the node's segment. On failure the node's other ranks
  /// stop waiting on this one, and a timeout gets the same lost-rank search and
  /// desync report as one over TCP (`fail_io`), so both paths blame alike.
  template <class F> void guard(const std::string& what, F&& f) {
    try {
      f();
    } catch (const ddp::error& e) {
      shm_->abort();
      if (e.kind() == error_kind::timeout) fail_io_(what, std::string("Timed out: ") + e.what());
      throw;
    } catch (...) {
      shm_->abort();
      throw;
    }
  }

  /// Whether [p, p + bytes) lies in one of this rank's shm arrays and an
  /// all_reduce of it would run in place.
  bool is_array_memory(const void* p, std::size_t bytes) const {
    return shm_ && knobs_.shm_on && nnodes_ == 1 && arrays_.find(p, bytes).has_value();
  }

  /// gloo_communicator::make_shm_array; `in_queue(n, dtype, body)` runs
  /// `body(what)` in the group's queue and waits for it.
  /// Not a template: `dt` and `elem_size` are all it needs of the element type.
  template <class InQueue>
  shm_memory make_array(std::size_t n, dtype dt, std::size_t elem_size, InQueue&& in_queue) {
    const std::string what = detail::message({"make_shm_array<", ddp::to_string(dt), ">(", n, ")"});
    const std::size_t L = shm_ ? static_cast<std::size_t>(shm_->segment().local_size()) : 1;
    // Every local rank's area in one mapping, whose size must fit size_t and off_t.
    if (n > (std::size_t{1} << 60) / elem_size / L)
      detail::throw_error(error_kind::config, {"rank ", job_rank(rank_), ": ", what,
                                               ": too many elements for one node's shared memory (", L,
                                               " local ranks); make several smaller arrays"});
    const std::size_t bytes = std::max<std::size_t>(n * elem_size, 1);
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
      in_queue(n, dt, [this, out, bytes](const std::string& where) {
        out->seg = setup_array(bytes, where, out->mismatch);
      });
      if (out->mismatch) std::rethrow_exception(out->mismatch); // the group lives on: every rank got it
      shared = std::move(out->seg);
    }
    if (shared) {
      void* p = shared->data(shared->local_rank());
      return {p, std::move(shared), true};
    }
    try {
      return private_shm_memory(bytes);
    } catch (const std::bad_alloc&) {
      detail::throw_error(error_kind::config, {"rank ", job_rank(rank_), ": ", what, ": cannot allocate ",
                                               bytes, " B of private memory"});
    }
  }

private:
  /// make_shm_array's collective part (on the queue's thread): the node's
  /// segment for the array, or nullptr when it could not be made (then every
  /// rank uses private memory; rank 0 says why). Ranks that asked for different
  /// sizes get `mismatch` set, on every rank. A timeout or a lost rank throws:
  /// the arrays' count would differ between ranks, so the group is poisoned.
  std::shared_ptr<shm_segment> setup_array(std::size_t bytes, const std::string& what,
                                           std::exception_ptr& mismatch) {
    auto [key, id] = arrays_.next(keys_);
    shm_setup a = shm_args_;
    a.key = key;
    a.result_area = false;
    // Areas of whole cache lines, not pages: ranks whose sizes differ by more
    // than 64 B get segments of different sizes, which is how they are caught.
    a.area_bytes = (bytes + 63) / 64 * 64;
    a.size_mismatch_hint =
        detail::message({"the node's ranks asked for different sizes (", what,
                         " here): call make_shm_array with the same element count and type on every rank, in "
                         "the same order."});
    shm_setup_failure failed;
    std::unique_ptr<shm_segment> seg;
    try {
      seg = shm_segment::setup(*store_, a, failed);
    } catch (const error& e) {
      // A rank that failed: its name and reason are the whole story.
      if (e.kind() == error_kind::peer_lost)
        detail::throw_error(e.kind(), {what, " failed: ", e.message()}, e.rank());
      const std::string text = detail::message(
          {what, " is collective: every rank of the group calls it, in the same order. ", e.message()});
      // A rank that skipped the call, or is far behind: the lost-rank search
      // and the desync report name it, as for a collective that timed out.
      if (e.kind() == error_kind::timeout) fail_io_(what, "Timed out: " + text);
      detail::throw_error(e.kind(), {text}, e.rank());
    }
    if (seg) {
      std::shared_ptr<shm_segment> shared(std::move(seg));
      arrays_.add(id, shared);
      return shared;
    }
    if (failed.kind == error_kind::mismatch) {
      mismatch = std::make_exception_ptr(error(error_kind::mismatch,
                                               detail::message({"rank ", job_rank(rank_), ": ", what,
                                                                ": rank ", failed.rank, " ", failed.message}),
                                               failed.rank));
      return nullptr;
    }
    if (rank_ == 0)
      log_line(detail::message({"rank ", job_rank(0)}),
               detail::message({"warning: ", what,
                                " got private memory on every rank, so all-reduces of it copy "
                                "through the node's segment as usual (slower): rank ",
                                failed.rank, " ", failed.message,
                                ". If /dev/shm is full, enlarge it: each node needs LOCAL_WORLD_SIZE x the "
                                "array's bytes (docker run --shm-size=...)."}));
    return nullptr;
  }

  /// Where the fragments, back to back in memory, lie in a shm array of this
  /// rank's: an all_reduce of them runs in place.
  std::optional<shm_array_registry::hit> in_array(const std::vector<fragment>& frags, dtype dt) const {
    const std::size_t esz = size_of(dt);
    if (frags.empty() || total_count(frags) == 0) return std::nullopt;
    for (std::size_t i = 1; i < frags.size(); ++i)
      if (static_cast<const char*>(frags[i - 1].data) + frags[i - 1].count * esz != frags[i].data)
        return std::nullopt;
    return arrays_.find(frags.front().data, total_count(frags) * esz);
  }

  /// The layout the path follows: the job's, or a subgroup's own.
  static const ddp::topology& layout(const rendezvous& rv) {
    return rv.job_ranks.empty() ? rv.topo : rv.group_layout;
  }
  int job_rank(int r) const { return job_ranks_.empty() ? r : job_ranks_[static_cast<std::size_t>(r)]; }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tcp_store> store_;
  std::string keys_ = "ddp/shm/"; ///< the group's shm store keys: "ddp/shm/" + its key prefix
  std::vector<int> job_ranks_;    ///< rendezvous::job_ranks (empty: the job's own group)
  gloo_knobs& knobs_;
  gloo_waits& waits_;
  std::vector<char>& scratch_;
  exchange_function exchange_;
  fail_io_function fail_io_;
  std::unique_ptr<shm_all_reduce> shm_;
  shm_setup shm_args_;        ///< how shm_'s segment was set up: shm arrays start from it
  shm_array_registry arrays_; ///< make_shm_array's segments, for in-place all-reduces
  int nnodes_ = 1;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_SHM_PATH_HPP
