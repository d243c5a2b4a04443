// All-reduce among the ranks of one node through their shared segment
// (detail/shm/segment.hpp). Within one node (run_pipelined) the data goes through in
// steps of 256 KiB, alternating between two halves of each area and of the
// result area, with one barrier per step: every local rank copies the parts of
// step k that the others reduce into its area (its own slice stays where it
// is), meets the others, copies step k-1's result out, and reduces its own
// slice of step k over all ranks, in local-rank order, the averaging fused
// into the last step. The steps are small enough that what one rank writes is
// still in cache when the others read it, which beat the earlier 4 MiB steps
// with two barriers each (docs/performance.md, Collectives).
// Across nodes (run_staged) the node's leader reduces each step with the other
// nodes' leaders over Gloo between the node's reduce and copy-out, so each step
// has three barriers and fills the whole area (fewer, larger TCP calls).
//
// Barriers: each rank bumps its sequence counter (for blame) and a shared
// arrival count; the last arriver advances the generation word, on which the
// others spin briefly, then sleep in futex waits of at most 2 ms (the waker
// calls futex_wake only when one sleeps). Between sleeps a waiter checks the
// group's deadline, whether a rank aborted, and whether the ranks it waits for
// are still alive (every 20 ms their pid, if in this PID namespace, and
// whether they destroyed their process group, which their line says; the
// store's record of lost ranks ever less often, to every 0.5 s), so a rank that
// dies or leaves is named, no hang.
// Collectives over TCP on a one-node group meet here first too (agree), so a
// rank in either kind of collective sees the other.
#ifndef DDP_DETAIL_SHM_ALL_REDUCE_HPP
#define DDP_DETAIL_SHM_ALL_REDUCE_HPP

#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/shm/segment.hpp>
#include <ddp/detail/store/protocol.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class shm_all_reduce {
public:
  /// The default area size, per local rank, across nodes (12 MiB of /dev/shm
  /// at 2 ranks a node): the staged path's step. On one node the area holds
  /// two steps of the pipelined path (2 x default_step_bytes).
  static constexpr std::size_t default_area_bytes = std::size_t{4} << 20;
  /// The pipelined path's step: small steps keep the two buffers of every rank
  /// in L2 (the sweep: docs/performance.md, Collectives).
  static constexpr std::size_t default_step_bytes = std::size_t{256} << 10;

  /// A rank the rendezvous store saw lost: (-1, "") for none; (-1, reason): the launcher
  /// serving the store is gone.
  struct lost_peer {
    int rank = -1;
    std::string reason;
    bool silent = false;
    std::string news() const { return rank >= 0 ? detail::message({"rank ", rank, " ", reason}) : reason; }
  };
  /// `find_lost(grace)`: asks the store for a lost rank, waiting up to `grace`.
  using lost_finder = std::function<lost_peer(std::chrono::milliseconds grace)>;
  /// `finished(global)`: whether that rank's process group ended normally (the store says so).
  using finish_finder = std::function<bool(int global)>;

  shm_all_reduce(std::unique_ptr<shm_segment> seg, lost_finder find_lost, int rank,
                 std::chrono::milliseconds timeout, finish_finder finished = {})
      : seg_(std::move(seg)), find_lost_(std::move(find_lost)), finished_(std::move(finished)), rank_(rank),
        timeout_(timeout) {}

  const shm_segment& segment() const { return *seg_; }
  /// Bytes per step (tests make it small to cross step ends); 0 restores the
  /// defaults. Every local rank must use the same value.
  void set_step_bytes(std::size_t b) { step_setting_ = b; }
  /// The step in effect: `staged` for the cross-node path, whose default is
  /// the whole area; the pipelined path's is at most half an area.
  std::size_t step_bytes(bool staged) const {
    const std::size_t cap = staged ? seg_->area_bytes() : half_area();
    const std::size_t want = step_setting_ ? step_setting_ : staged ? cap : default_step_bytes;
    return std::clamp<std::size_t>(want, 64, cap);
  }

  /// Reduces `frags` (op o; scale multiplies the sum, 1.0 for none) across the
  /// node's ranks. `between(result, m)`, when set, runs on local rank 0 on each
  /// step's reduced result before the others copy it out (the cross-node step).
  void run(const std::vector<fragment>& frags, dtype dt, op o, double scale, const collective_header& h,
           const std::string& what, const std::function<void(char*, std::size_t)>& between = {}) {
    begin(h, what);
    if (between)
      run_staged(frags, dt, o, scale, h, between);
    else
      run_pipelined(frags, dt, o, scale, h);
    what_ = nullptr;
  }

  /// All-reduce of a shm array in place (one node): `n` elements at byte
  /// `offset` of every local rank's area of `arr` (a segment of
  /// make_shm_array, one area per local rank, laid out alike). No copy in
  /// or out: after one barrier each rank reduces its own slice straight from
  /// the others' areas, in local-rank order (the same bits as the other
  /// paths), and writes the result into every rank's area; a second barrier
  /// ends it. Two barriers per collective, not one per step, so it beats the
  /// copying path, most on a busy host, where step barriers suffer when a rank is
  /// descheduled (docs/performance.md, Collectives).
  void run_in_place(const shm_segment& arr, std::size_t offset, std::size_t n, dtype dt, op o, double scale,
                    const collective_header& h, const std::string& what) {
    begin(h, what);
    barrier();
    check_headers(h);
    const std::size_t esz = size_of(dt);
    const slice cut = my_slice(n, esz, offset % 64 / esz); // areas start on a cache line
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int me = seg_->local_rank(), L = seg_->local_size();
    // Reduced into private scratch first: the destination may not be any
    // source (a rank's area is read again for later terms of the sum).
    const std::size_t step = std::max<std::size_t>(default_step_bytes / esz, 1);
    if (!scratch_)
      scratch_.reset(static_cast<char*>(::operator new (default_step_bytes, std::align_val_t{64})));
    for (std::size_t i = cut.a; i < cut.b; i += step) {
      const std::size_t k = std::min(step, cut.b - i), byte = offset + i * esz;
      reduce_areas(
          scratch_.get(), [&](int l) -> const char* { return arr.data(l) + byte; }, k, dt, fn, scale);
      for (int l = 0; l < L; ++l) // mine last: the others' copies read it from cache
        std::memcpy(arr.data((me + 1 + l) % L) + byte, scratch_.get(), k * esz);
    }
    barrier();
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

  /// A collective of pipelined steps through the halves of the areas
  /// (reduce_scatter and all_gather: detail/shm/block_collectives.hpp). Per
  /// step of at most `cap` of `n` elements, `write(off, m, buf)` fills this
  /// rank's half `buf`, the ranks meet at one barrier (the first also checks
  /// the headers), then `read(off, m, buf)` reads the others' halves. Safe
  /// because half `buf` of step k is written again by step k+2, after barrier
  /// k+1, which no rank passes before it finished reading step k; a last
  /// barrier keeps the next collective off a half still being read.
  template <class Write, class Read>
  void run_steps(const collective_header& h, const std::string& what, std::size_t n, std::size_t cap,
                 Write&& write, Read&& read) {
    begin(h, what);
    int buf = 0;
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap, buf ^= 1) {
      const std::size_t m = std::min(cap, n - off);
      write(off, m, buf);
      barrier();
      if (first) check_headers(h);
      first = false;
      if (m == 0) break; // nothing to move: the barrier still checked the headers
      read(off, m, buf);
    }
    barrier();
    what_ = nullptr;
  }
  /// Half `buf` (0 or 1) of local rank l's area, half_area_bytes() long and
  /// 64-byte aligned.
  char* area_half(int l, int buf) const { return data(l, buf); }
  std::size_t half_area_bytes() const { return half_area(); }

  /// Marks the segment aborted by this rank (its peers on the node stop waiting).
  void abort() noexcept {
    std::atomic_ref<std::int32_t> ab(seg_->ctl().aborted_by);
    std::int32_t none = -1;
    ab.compare_exchange_strong(none, rank_);
    std::atomic_ref<std::uint32_t>(seg_->ctl().generation).fetch_add(0); // a fence for the wake below
    futex_call(&seg_->ctl().generation, FUTEX_WAKE, INT32_MAX, nullptr);
  }

private:
  /// Elements [a, b) of a step of m: this rank's slice, the same cut on every
  /// rank, rounded to 64 B so that slices share no cache line.
  struct slice {
    std::size_t a, b;
  };
  /// `lead`: elements before the step's start back to the last 64 B boundary
  /// (in place, ranges start anywhere: the cuts then stay on cache lines).
  slice my_slice(std::size_t m, std::size_t esz, std::size_t lead = 0) const {
    const auto L = static_cast<std::size_t>(seg_->local_size()),
               me = static_cast<std::size_t>(seg_->local_rank());
    const std::size_t align = std::max<std::size_t>(64 / esz, 1);
    const std::size_t v = m + lead; // cut [0, v) from the boundary, then shift back
    const std::size_t per = (v + L - 1) / L;
    const std::size_t step = (per + align - 1) / align * align;
    const std::size_t a = std::min(v, step * me), b = std::min(v, a + step);
    return {a > lead ? a - lead : 0, b > lead ? b - lead : 0};
  }

  std::size_t half_area() const { return seg_->area_bytes() / 2 / 64 * 64; }
  /// Buffer `buf` (0 or 1) of local rank l's area, and of the result area.
  char* data(int l, int buf) const { return seg_->data(l) + static_cast<std::size_t>(buf) * half_area(); }
  char* result(int buf) const { return seg_->result() + static_cast<std::size_t>(buf) * half_area(); }

  /// out = src(0) op src(1) op ... op src(L-1) over k elements, in local-rank
  /// order (the same bits on every path), the last step scaled when scale != 1
  /// (the averaging, fused). `src(l)` gives local rank l's contribution.
  template <class Src>
  void reduce_areas(char* out, Src&& src, std::size_t k, dtype dt, reduce_fn fn, double scale) const {
    const int L = seg_->local_size();
    for (int l = 1; l < L; ++l) {
      const void* acc = l == 1 ? static_cast<const void*>(src(0)) : out;
      if (l + 1 == L && scale != 1.0)
        sum_scaled(out, acc, src(l), k, dt, scale);
      else
        fn(out, acc, src(l), k);
    }
  }

  /// One barrier per step, double-buffered. Per step k on every rank:
  ///   copy in k (area[k%2]); barrier k; copy out k-1 (result[(k-1)%2]);
  ///   reduce my slice of k into result[k%2];
  /// then a last barrier and the last copy-out. Why it is safe: area[k%2] is
  /// next written by copy-in k+2, after barrier k+1, which no rank reaches
  /// before finishing reduce k; result[k%2] is next written by reduce k+2,
  /// after barrier k+2, which no rank reaches before finishing copy-out k.
  void run_pipelined(const std::vector<fragment>& frags, dtype dt, op o, double scale,
                     const collective_header& h) {
    const std::size_t esz = size_of(dt), n = total_count(frags);
    const std::size_t cap = std::max<std::size_t>(step_bytes(false) / esz, 1);
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int me = seg_->local_rank();
    std::size_t prev_off = 0, prev_m = 0;
    int buf = 0, prev_buf = 0;
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap, buf ^= 1) {
      const std::size_t m = std::min(cap, n - off);
      const slice cut = my_slice(m, esz); // not a structured binding: lambdas capture these
      const std::size_t a = cut.a, b = cut.b;
      // My slice is read from my own memory below: only the others' parts go in.
      copy_in(frags, off, 0, a, esz, data(me, buf));
      copy_in(frags, off, b, m - b, esz, data(me, buf));
      barrier();
      if (first)
        check_headers(h);
      else
        copy_out(frags, prev_off, prev_m, esz, result(prev_buf));
      first = false;
      for_each_piece(frags, off + a, b - a, esz, [&](char* own, std::size_t at, std::size_t k) {
        const std::size_t byte = (a + at) * esz;
        reduce_areas(
            result(buf) + byte, [&](int l) -> const char* { return l == me ? own : data(l, buf) + byte; }, k,
            dt, fn, scale);
      });
      prev_off = off;
      prev_m = m;
      prev_buf = buf;
      if (m == 0) break; // nothing to reduce: the barriers still check headers
    }
    barrier();
    copy_out(frags, prev_off, prev_m, esz, result(prev_buf));
  }

  /// Three barriers per step (copy in; reduce; the leader's cross-node step;
  /// copy out), steps of the whole area: across nodes the TCP step dominates,
  /// and fewer, larger calls serve it best.
  void run_staged(const std::vector<fragment>& frags, dtype dt, op o, double scale,
                  const collective_header& h, const std::function<void(char*, std::size_t)>& between) {
    const std::size_t esz = size_of(dt), n = total_count(frags);
    const std::size_t cap = std::max<std::size_t>(step_bytes(true) / esz, 1);
    const auto fn = reduce_for(dt, o == op::avg ? op::sum : o);
    const int me = seg_->local_rank();
    bool first = true;
    for (std::size_t off = 0; first || off < n; off += cap) {
      const std::size_t m = std::min(cap, n - off);
      copy_in(frags, off, 0, m, esz, seg_->data(me));
      barrier();
      if (first) check_headers(h);
      first = false;
      const slice cut = my_slice(m, esz); // not a structured binding: lambdas capture these
      const std::size_t a = cut.a, b = cut.b;
      if (a < b)
        reduce_areas(
            seg_->result() + a * esz, [&](int l) -> const char* { return seg_->data(l) + a * esz; }, b - a,
            dt, fn, scale);
      barrier();
      if (me == 0) guard_leader([&] { between(seg_->result(), m); });
      barrier();
      copy_out(frags, off, m, esz, seg_->result());
      if (m == 0) break;
    }
  }

  /// Copies elements [off+at, off+at+k) of the fragments to `area` + at.
  static void copy_in(const std::vector<fragment>& frags, std::size_t off, std::size_t at, std::size_t k,
                      std::size_t esz, char* area) {
    for_each_piece(frags, off + at, k, esz, [&](char* p, std::size_t i, std::size_t c) {
      std::memcpy(area + (at + i) * esz, p, c * esz);
    });
  }

  /// Copies a step's result (elements [off, off+m)) back to the fragments.
  static void copy_out(const std::vector<fragment>& frags, std::size_t off, std::size_t m, std::size_t esz,
                       const char* res) {
    for_each_piece(frags, off, m, esz,
                   [&](char* p, std::size_t at, std::size_t k) { std::memcpy(p, res + at * esz, k * esz); });
  }

  /// A collective starts here: its deadline, its name for errors, and its
  /// header in this rank's line of the control block for the others to check.
  void begin(const collective_header& h, const std::string& what) {
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    what_ = &what;
    std::memcpy(&seg_->line(seg_->local_rank()).header, &h, sizeof h);
  }

  template <class F> void guard_leader(F&& f) {
    try {
      f();
    } catch (...) {
      abort();
      throw;
    }
  }

  void check_headers(const collective_header& mine) {
    all_.clear();
    for (int l = 0; l < seg_->local_size(); ++l) {
      collective_header theirs;
      std::memcpy(&theirs, &seg_->line(l).header, sizeof theirs);
      all_.emplace_back(l == seg_->local_rank() ? rank_ : seg_->line(l).global,
                        l == seg_->local_rank() ? mine : theirs);
    }
    collective_header::check_round(*what_, rank_, all_);
  }

  void barrier() {
    auto& c = seg_->ctl();
    const int L = seg_->local_size();
    ++epoch_;
    std::atomic_ref<std::uint64_t>(seg_->line(seg_->local_rank()).seq)
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
      // Both sides seq_cst: either a sleeper's count is seen here, or it sees
      // the new generation (and FUTEX_WAIT refuses a changed word anyway). A
      // wake without sleepers is a syscall per barrier for nothing.
      if (std::atomic_ref<std::uint32_t>(c.sleepers).load(std::memory_order_seq_cst) != 0)
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
    // Pids are cheap to check (local syscalls), every 20 ms; the store is a
    // round trip, asked at the first check, then 20, 40, ... ms later, to
    // every 0.5 s: a rank that waits long here (a slow peer, a long agree
    // before a TCP collective) sends a few calls a second, not fifty.
    auto next_check = std::chrono::steady_clock::now();
    auto next_store = next_check;
    std::chrono::milliseconds store_every{20};
    while (gen.load(std::memory_order_acquire) == g) {
      const timespec ts{0, 2'000'000};
      std::atomic_ref<std::uint32_t> sleepers(c.sleepers);
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (gen.load(std::memory_order_seq_cst) == g) futex_call(&c.generation, FUTEX_WAIT, g, &ts);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (gen.load(std::memory_order_acquire) != g) return;
      const auto now = std::chrono::steady_clock::now();
      if (std::atomic_ref<std::int32_t>(c.aborted_by).load() >= 0) fail_aborted();
      if (now >= next_check) {
        const bool ask_store = now >= next_store;
        check_alive(ask_store);
        next_check = now + std::chrono::milliseconds(20);
        if (ask_store) {
          next_store = now + store_every;
          store_every = std::min(store_every * 2, std::chrono::milliseconds(500));
        }
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
      if (std::atomic_ref<std::uint64_t>(seg_->line(l).seq).load(std::memory_order_acquire) < epoch_)
        out.push_back(l);
    return out;
  }

public:
  /// Whether the rank of line `sl` has exited, judged by its pid: only when it
  /// lives in this process's PID namespace (`own_ns`), since a pid read across
  /// namespaces (containers sharing /dev/shm) names another process or none.
  /// Else the store's record of lost ranks is the only evidence.
  static bool peer_exited(const shm_rank_line& sl, std::uint64_t own_ns) {
    return sl.pidns != 0 && sl.pidns == own_ns && process_gone(sl.pid);
  }

private:
  static bool process_gone(int pid) {
    if (pid <= 0) return false;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A killed process its parent has not reaped yet is a zombie: gone too. Its state
    // follows the command name's last ')', well inside the first line's start. Opened
    // close-on-exec ("e"), so a process the runtime starts meanwhile does not inherit it.
    char buf[1024];
    std::size_t n = 0;
    if (std::FILE* f = std::fopen(detail::message({"/proc/", pid, "/stat"}).c_str(), "re")) {
      n = std::fread(buf, 1, sizeof buf, f);
      std::fclose(f);
    }
    std::string_view s(buf, n);
    s = s.substr(0, s.find('\n'));
    auto close = s.rfind(')');
    return close != std::string_view::npos && close + 2 < s.size() &&
           (s[close + 2] == 'Z' || s[close + 2] == 'X');
  }

  /// Throws when a rank this one still waits for at the barrier is gone: its
  /// process exited, or it destroyed its process group (`left`: a normal end,
  /// named as such through the store's finished key, or a teardown after its
  /// own failure, whose reason the store has). `blame_left`: a rank that left
  /// with no finished key and no news in the store is named itself (not in
  /// fail_aborted, where the aborting rank leaving is expected).
  void check_alive(bool ask_store = true, bool blame_left = true) {
    int first_left = -1;
    for (int l : missing()) {
      auto& sl = seg_->line(l); // not const: atomic_ref needs a mutable object
      const bool left = std::atomic_ref<std::uint32_t>(sl.left).load(std::memory_order_acquire) != 0;
      const bool exited = peer_exited(sl, own_pidns_);
      if (!left && !exited) continue;
      // It may have arrived after missing() looked (and left once the barrier completed): its
      // seq, stored before `left`, says so. The fence orders the pid check before it too.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (std::atomic_ref<std::uint64_t>(sl.seq).load(std::memory_order_acquire) >= epoch_) continue;
      // Asked only of a peer that has exited or left: a store round trip per missing peer at
      // every look would slow each barrier wait.
      if (finished_ && finished_(sl.global)) {
        abort();
        detail::throw_error(error_kind::peer_lost,
                            {*what_, " failed: ", finished_peer_note(sl.global, rank_), "."}, sl.global);
      }
      if (left) { // after the others: a dead rank, or the store's reason, is the better name
        if (first_left < 0) first_left = l;
        continue;
      }
      abort();
      detail::throw_error(error_kind::peer_lost,
                          {*what_, " failed: rank ", sl.global, " (local rank ", l, ", pid ", sl.pid,
                           ") exited while rank ", rank_,
                           " waited for it at the node's shared-memory segment. Look at rank ", sl.global,
                           "'s output first."},
                          sl.global);
    }
    if ((ask_store || first_left >= 0) && find_lost_) {
      auto lost = find_lost_(std::chrono::milliseconds(0));
      if (lost.rank >= 0 || !lost.reason.empty()) { // no rank, with a reason: the launcher is gone
        abort();
        detail::throw_error(error_kind::peer_lost,
                            {*what_, " failed: ", lost.news(), " while rank ", rank_,
                             " waited at the node's shared-memory segment."},
                            lost.rank);
      }
    }
    if (first_left >= 0 && blame_left) {
      const int g = seg_->line(first_left).global;
      abort();
      detail::throw_error(error_kind::peer_lost,
                          {*what_, " failed: rank ", g, " (local rank ", first_left,
                           ") destroyed its process group while rank ", rank_,
                           " waited for it at the node's shared-memory segment. Look at rank ", g,
                           "'s output first."},
                          g);
    }
  }

  [[noreturn]] void fail_aborted() {
    const int by = std::atomic_ref<std::int32_t>(seg_->ctl().aborted_by).load();
    check_alive(true, /*blame_left=*/false); // a dead rank is the better name
    // The aborting rank gave up waiting for a rank that is still missing here
    // too: blame that one, as a timeout (the caller's desync report follows).
    for (int l : missing())
      if (seg_->line(l).global != by) fail_timeout(by);
    if (find_lost_)
      if (auto lost = find_lost_(std::chrono::milliseconds(1000)); lost.rank >= 0 || !lost.reason.empty())
        detail::throw_error(lost.silent ? error_kind::timeout : error_kind::peer_lost,
                            {*what_, " failed: ", lost.news()}, lost.rank);
    detail::throw_error(
        error_kind::peer_lost,
        {*what_, " failed: rank ", by,
         " failed inside this collective and left the node's shared-memory segment; look at its "
         "output first."},
        by);
  }

  /// `gave_up_by`: the rank that aborted the collective, when not this one
  /// (this rank arrived later and found its abort; why it aborted, its own
  /// timeout or another failure, only its output says).
  [[noreturn]] void fail_timeout(int gave_up_by = -1) {
    abort();
    auto late = missing();
    int culprit = late.empty() ? -1 : seg_->line(late.front()).global;
    std::string names;
    for (int l : late)
      names += (names.empty() ? "" : ", ") + std::to_string(seg_->line(l).global);
    const std::string text =
        gave_up_by < 0
            ? detail::message({" timed out after ", timeout_.count(), " ms waiting for rank(s) ", names,
                               " at the node's shared-memory segment"})
            : detail::message({" failed: rank ", gave_up_by,
                               " gave up on it (its own timeout or a failure: see its output) while rank(s) ",
                               names, " had not yet reached the node's shared-memory segment"});
    detail::throw_error(
        error_kind::timeout,
        {*what_, text,
         " (a rank stalled, is far behind, or skipped this collective; raise DDP_TIMEOUT if that "
         "is expected)."},
        culprit);
  }

  std::unique_ptr<shm_segment> seg_;
  lost_finder find_lost_;
  finish_finder finished_;
  std::vector<collective_header::ranked> all_; ///< the headers of the last check (kept: no allocation)
  int rank_;
  std::chrono::milliseconds timeout_;
  std::size_t step_setting_ = 0; ///< 0: the defaults
  std::uint64_t own_pidns_ = own_pid_namespace();
  /// Barriers this rank has passed (one collective at a time: the group's
  /// worker thread, or the caller when it runs one inline).
  std::uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
  const std::string* what_ = nullptr;
  struct aligned_free {
    void operator()(char* p) const noexcept { ::operator delete (p, std::align_val_t{64}); }
  };
  std::unique_ptr<char[], aligned_free> scratch_; ///< run_in_place's reduced step
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_ALL_REDUCE_HPP
