// All-reduce among the ranks of one node through their shared segment
// (shm_segment.hpp): per chunk, every local rank copies its part into its own
// slot, then (barrier) reduces its own slice of the chunk over all slots, in
// local-rank order, into the result area, the averaging fused into the last
// step, then (barrier) copies the whole result back. Two barriers per chunk;
// across nodes a third step runs between them: local rank 0 reduces the
// node's result with the other nodes' leaders (over Gloo) before the copy-out.
//
// Barriers: each rank bumps its sequence counter (for blame) and a shared
// arrival count; the last arriver advances the generation word, on which the
// others spin briefly, then sleep in futex waits of at most 2 ms. Between
// sleeps a waiter checks the group's deadline, whether a rank aborted, and
// every 20 ms whether the ranks it waits for are still alive (their pid, if in
// this PID namespace; then the store's record of lost ranks), so a rank that
// dies is named, no hang. Collectives over TCP on a one-node group meet here
// first too (agree), so a rank in either kind of collective sees the other.
#ifndef DDP_DETAIL_BACKEND_SHM_ALL_REDUCE_HPP
#define DDP_DETAIL_BACKEND_SHM_ALL_REDUCE_HPP

#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/backend/shm_segment.hpp>
#include <ddp/detail/numeric/elementwise.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class shm_all_reduce {
public:
  /// The default slot size: 4 MiB per local rank (12 MiB of /dev/shm at 2
  /// ranks). Measured at 2 ranks, 100 MiB: 1 MiB chunks took ~1.1x the time of
  /// 4 MiB ones (twice the barriers).
  static constexpr std::size_t default_chunk_bytes = std::size_t{4} << 20;

  /// A rank the rendezvous store saw lost: (-1, "") for none.
  struct lost_peer {
    int rank = -1;
    std::string reason;
    bool silent = false;
  };
  /// `find_lost(grace)`: asks the store for a lost rank, waiting up to `grace`.
  using lost_finder = std::function<lost_peer(std::chrono::milliseconds grace)>;

  shm_all_reduce(std::unique_ptr<shm_segment> seg, lost_finder find_lost, int rank,
                 std::chrono::milliseconds timeout)
      : seg_(std::move(seg)), find_lost_(std::move(find_lost)), rank_(rank), timeout_(timeout),
        chunk_bytes_(seg_->chunk_capacity()) {}

  const shm_segment& segment() const { return *seg_; }
  /// Bytes per chunk (tests make it small to cross chunk boundaries); at most
  /// the segment's capacity. Every local rank must use the same value.
  void set_chunk_bytes(std::size_t b) {
    chunk_bytes_ = std::clamp<std::size_t>(b, 64, seg_->chunk_capacity());
  }
  std::size_t chunk_bytes() const { return chunk_bytes_; }

  /// Reduces `frags` (op o; scale multiplies the sum, 1.0 for none) across the
  /// node's ranks. `between(result, m)`, when set, runs on local rank 0 on each
  /// chunk's reduced result before the others copy it out (the cross-node step).
  void run(const std::vector<fragment>& frags, dtype dt, op o, double scale, const collective_header& h,
           const std::string& what, const std::function<void(char*, std::size_t)>& between = {}) {
    begin(h, what);
    const std::size_t esz = size_of(dt);
    std::size_t n = 0;
    for (auto& f : frags)
      n += f.count;
    const std::size_t cap = std::max<std::size_t>(chunk_bytes_ / esz, 1);
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int L = seg_->local_size(), me = seg_->local_rank();
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap) {
      const std::size_t m = std::min(cap, n - off);
      copy_frags(frags, off, m, esz, seg_->data(me), true);
      barrier();
      if (first) check_headers(h);
      first = false;
      // My slice, rounded to 64 B so that slices share no cache line.
      const std::size_t align = std::max<std::size_t>(64 / esz, 1);
      const std::size_t per = (m + static_cast<std::size_t>(L) - 1) / static_cast<std::size_t>(L);
      const std::size_t step = (per + align - 1) / align * align;
      const std::size_t a = std::min(m, step * static_cast<std::size_t>(me)), b = std::min(m, a + step);
      if (a < b) {
        char* out = seg_->result() + a * esz;
        auto src = [&](int k) { return seg_->data(k) + a * esz; };
        for (int k = 1; k < L; ++k) {
          const void* acc = k == 1 ? src(0) : out;
          if (k + 1 == L && scale != 1.0)
            sum_scaled(out, acc, src(k), b - a, dt, scale); // the averaging, fused
          else
            fn(out, acc, src(k), b - a);
        }
      }
      barrier();
      if (between) {
        if (me == 0) guard_leader([&] { between(seg_->result(), m); });
        barrier();
      }
      copy_frags(frags, off, m, esz, seg_->result(), false);
      if (m == 0) break;
    }
    what_ = nullptr;
  }

  /// The header check alone, for a collective that runs over TCP on a node
  /// whose all_reduce runs here: every rank publishes what it is about to run,
  /// meets the others at one barrier and compares. Without it a rank in the shm
  /// all_reduce and a rank in a TCP collective would wait for each other until
  /// the timeout; with it both fail at once with mismatch naming both. Sound:
  /// after the barrier no rank can overwrite its header before every rank has
  /// checked, since the TCP collective that follows needs every rank's header
  /// message, sent only after its check.
  void agree(const collective_header& h, const std::string& what) {
    begin(h, what);
    barrier();
    check_headers(h);
    what_ = nullptr;
  }

  /// Marks the segment aborted by this rank (its peers on the node stop waiting).
  void abort() noexcept {
    std::atomic_ref<std::int32_t> ab(seg_->ctl().aborted_by);
    std::int32_t none = -1;
    ab.compare_exchange_strong(none, rank_);
    std::atomic_ref<std::uint32_t>(seg_->ctl().generation).fetch_add(0); // a fence for the wake below
    futex_call(&seg_->ctl().generation, FUTEX_WAKE, INT32_MAX, nullptr);
  }

private:
  /// A collective starts here: its deadline, its name for errors, and its
  /// header in this rank's slot for the others to check.
  void begin(const collective_header& h, const std::string& what) {
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    what_ = &what;
    std::memcpy(&seg_->slot(seg_->local_rank()).header, &h, sizeof h);
  }

  template <class F> void guard_leader(F&& f) {
    try {
      f();
    } catch (...) {
      abort();
      throw;
    }
  }

  /// Copies elements [off, off+m) of the fragments to `shm` (in) or back (out).
  static void copy_frags(const std::vector<fragment>& frags, std::size_t off, std::size_t m, std::size_t esz,
                         char* shm, bool in) {
    std::size_t pos = 0;
    for (auto& f : frags) {
      if (m == 0) return;
      if (off >= pos + f.count) {
        pos += f.count;
        continue;
      }
      const std::size_t from = off - pos, take = std::min(m, f.count - from);
      char* p = static_cast<char*>(f.data) + from * esz;
      if (in)
        std::memcpy(shm, p, take * esz);
      else
        std::memcpy(p, shm, take * esz);
      shm += take * esz;
      off += take;
      m -= take;
      pos += f.count;
    }
  }

  void check_headers(const collective_header& mine) {
    for (int l = 0; l < seg_->local_size(); ++l) {
      collective_header theirs;
      std::memcpy(&theirs, &seg_->slot(l).header, sizeof theirs);
      if (theirs == mine) continue;
      const int p = seg_->slot(l).global;
      throw error(error_kind::mismatch,
                  *what_ + ": ranks called different collectives: this rank (" + std::to_string(rank_) +
                      ") called " + mine.describe() + ", rank " + std::to_string(p) + " called " +
                      theirs.describe() +
                      ". Every rank must call the same collectives in the same order with the same "
                      "counts, dtypes, ops and roots. This group is unusable now: every later collective "
                      "throws this error; create a new group.",
                  p);
    }
  }

  void barrier() {
    auto& c = seg_->ctl();
    const int L = seg_->local_size();
    ++epoch_;
    std::atomic_ref<std::uint64_t>(seg_->slot(seg_->local_rank()).seq)
        .store(epoch_, std::memory_order_release);
    // A rank that aborted left the counts of an unfinished barrier behind: no
    // barrier may complete on them, so fail before arriving (every later
    // collective on this node throws; the aborting rank's group is poisoned).
    if (std::atomic_ref<std::int32_t>(c.aborted_by).load() >= 0) fail_aborted();
    std::atomic_ref<std::uint32_t> gen(c.generation), arrived(c.arrived);
    const std::uint32_t g = gen.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(L)) {
      arrived.store(0, std::memory_order_relaxed);
      gen.store(g + 1, std::memory_order_seq_cst);
      futex_call(&c.generation, FUTEX_WAKE, INT32_MAX, nullptr);
      return;
    }
    // Spin ~20 us first: on an idle core the peer usually arrives within that
    // (the 4 KiB all-reduce), and a futex sleep plus wake costs ~10 us more.
    for (int i = 0; i < 400; ++i) {
      if (gen.load(std::memory_order_acquire) != g) return;
      pause();
    }
    // Then yield for up to ~100 us: on a busy host the peer may be waiting for
    // this very core, and a yield hands it over without the futex round trip.
    for (auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
         std::chrono::steady_clock::now() < until;) {
      if (gen.load(std::memory_order_acquire) != g) return;
      std::this_thread::yield();
    }
    auto next_check = std::chrono::steady_clock::now();
    while (gen.load(std::memory_order_acquire) == g) {
      const timespec ts{0, 2'000'000};
      futex_call(&c.generation, FUTEX_WAIT, g, &ts);
      if (gen.load(std::memory_order_acquire) != g) return;
      const auto now = std::chrono::steady_clock::now();
      if (std::atomic_ref<std::int32_t>(c.aborted_by).load() >= 0) fail_aborted();
      if (now >= next_check) {
        check_alive();
        next_check = now + std::chrono::milliseconds(20);
      }
      if (now >= deadline_) fail_timeout();
    }
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  /// Local ranks that have not reached this rank's barrier yet.
  std::vector<int> missing() const {
    std::vector<int> out;
    for (int l = 0; l < seg_->local_size(); ++l)
      if (std::atomic_ref<std::uint64_t>(seg_->slot(l).seq).load(std::memory_order_acquire) < epoch_)
        out.push_back(l);
    return out;
  }

public:
  /// Whether the rank of slot `sl` has exited, judged by its pid: only when it
  /// lives in this process's PID namespace (`own_ns`), since a pid read across
  /// namespaces (containers sharing /dev/shm) names another process or none.
  /// Else the store's record of lost ranks is the only evidence.
  static bool peer_exited(const shm_rank_slot& sl, std::uint64_t own_ns) {
    return sl.pidns != 0 && sl.pidns == own_ns && process_gone(sl.pid);
  }

private:
  static bool process_gone(int pid) {
    if (pid <= 0) return false;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A killed process its parent has not reaped yet is a zombie: gone too.
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(f, s);
    auto close = s.rfind(')');
    return close != std::string::npos && close + 2 < s.size() && (s[close + 2] == 'Z' || s[close + 2] == 'X');
  }

  void check_alive() {
    for (int l : missing()) {
      const auto& sl = seg_->slot(l);
      if (peer_exited(sl, own_pidns_)) {
        abort();
        throw error(error_kind::peer_lost,
                    *what_ + " failed: rank " + std::to_string(sl.global) + " (local rank " +
                        std::to_string(l) + ", pid " + std::to_string(sl.pid) + ") exited while rank " +
                        std::to_string(rank_) +
                        " waited for it at the node's shared-memory segment. Look at rank " +
                        std::to_string(sl.global) + "'s output first.",
                    sl.global);
      }
    }
    if (find_lost_) {
      auto lost = find_lost_(std::chrono::milliseconds(0));
      if (lost.rank >= 0) {
        abort();
        throw error(error_kind::peer_lost,
                    *what_ + " failed: rank " + std::to_string(lost.rank) + " " + lost.reason +
                        " while rank " + std::to_string(rank_) +
                        " waited at the node's shared-memory segment.",
                    lost.rank);
      }
    }
  }

  [[noreturn]] void fail_aborted() {
    const int by = std::atomic_ref<std::int32_t>(seg_->ctl().aborted_by).load();
    check_alive(); // a dead rank is the better name
    // The aborting rank gave up waiting for a rank that is still missing here
    // too: blame that one, as a timeout (the caller's desync report follows).
    for (int l : missing())
      if (seg_->slot(l).global != by) fail_timeout();
    if (find_lost_)
      if (auto lost = find_lost_(std::chrono::milliseconds(1000)); lost.rank >= 0)
        throw error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                    *what_ + " failed: rank " + std::to_string(lost.rank) + " " + lost.reason, lost.rank);
    throw error(error_kind::peer_lost,
                *what_ + " failed: rank " + std::to_string(by) +
                    " failed inside this collective and left the node's shared-memory segment; look at its "
                    "output first.",
                by);
  }

  [[noreturn]] void fail_timeout() {
    abort();
    auto late = missing();
    int culprit = late.empty() ? -1 : seg_->slot(late.front()).global;
    std::string names;
    for (int l : late)
      names += (names.empty() ? "" : ", ") + std::to_string(seg_->slot(l).global);
    throw error(error_kind::timeout,
                *what_ + " timed out after " + std::to_string(timeout_.count()) + " ms waiting for rank(s) " +
                    names +
                    " at the node's shared-memory segment (a rank stalled, is far behind, or skipped this "
                    "collective; raise DDP_TIMEOUT if that is expected).",
                culprit);
  }

  std::unique_ptr<shm_segment> seg_;
  lost_finder find_lost_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::size_t chunk_bytes_;
  std::uint64_t own_pidns_ = own_pid_namespace();
  /// Barriers this rank has passed (one collective at a time: the group's
  /// worker thread, or the caller when it runs one inline).
  std::uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
  const std::string* what_ = nullptr;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_SHM_ALL_REDUCE_HPP
