// The timeline: with DDP_TRACE=DIR, each rank records what its threads do —
// gradients marked ready, buckets launched, waited for and completed, every
// collective of its process groups — and writes DIR/rank_<r>.json in Chrome's
// trace event format (Perfetto, chrome://tracing; scripts/plot-timeline draws
// one step of all ranks) when its last process group goes away.
//
// Off (the default), a probe costs one load of a global flag and a branch that
// is always predicted; define DDP_TRACE_DISABLED to remove even that. On, each
// thread appends 64-byte events to a ring of its own, allocated once, with no
// lock (DDP_TRACE_EVENTS per thread, default 131072 = 8 MiB: about 10 000 steps
// of the example, whose compute thread records 13 events a step); when it is
// full the newest events win and the file says how many were dropped.
// Timestamps are steady_clock (CLOCK_MONOTONIC: one clock for every process of
// a host, so ranks of one host line up), written in µs.
#ifndef DDP_DETAIL_COMMON_TRACE_HPP
#define DDP_DETAIL_COMMON_TRACE_HPP

#include <ddp/detail/common/directories.hpp>
#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::trace {

/// What an event is; fixes its phase and the names of its arguments.
enum class kind : std::uint8_t {
  mark_grad_ready, ///< instant: parameter, unused (1 when marked unused)
  bucket_launch,   ///< span: the launch call (packing, submission): bucket, bytes
  bucket_begin,    ///< async begin of "bucket in flight": bucket, bytes
  bucket_end,      ///< async end of it
  bucket_complete, ///< instant: bucket, bytes, launch_to_complete_us
  synchronize,     ///< span: the whole synchronize() call: step
  wait,            ///< span: synchronize() blocked on a bucket's collective: bucket, step
  unpack,          ///< span: copying a packed bucket back into the gradients: bucket, bytes
  collective,      ///< span on the thread that ran it: seq, bytes, bucket, queued_us
  message,         ///< span on a send/recv lane ("send"/"recv"): seq, bytes, peer, queued_us
};

struct kind_info {
  const char* name;
  char phase; ///< Chrome trace phase: X span, i instant, b/e async begin/end
  const char* args[4];
};

inline const kind_info& info(kind k) noexcept {
  static constexpr kind_info table[] = {
      {"mark_grad_ready", 'i', {"parameter", "unused", nullptr, nullptr}},
      {"bucket_launch", 'X', {"bucket", "bytes", nullptr, nullptr}},
      {"bucket in flight", 'b', {"bucket", "bytes", nullptr, nullptr}},
      {"bucket in flight", 'e', {"bucket", nullptr, nullptr, nullptr}},
      {"bucket_complete", 'i', {"bucket", "bytes", "launch_to_complete_us", nullptr}},
      {"synchronize", 'X', {"step", nullptr, nullptr, nullptr}},
      {"wait", 'X', {"bucket", "step", nullptr, nullptr}},
      {"unpack", 'X', {"bucket", "bytes", nullptr, nullptr}},
      {"collective", 'X', {"seq", "bytes", "bucket", "queued_us"}},
      {"message", 'X', {"seq", "bytes", "peer", "queued_us"}},
  };
  return table[static_cast<std::size_t>(k)];
}

struct event {
  std::int64_t ts_ns;  ///< steady_clock
  std::int64_t dur_ns; ///< spans only
  const char* label;   ///< a string literal that overrides the kind's name (a collective's kind), or null
  kind what;
  std::int64_t arg[4];
};
static_assert(sizeof(event) <= 64);

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One thread's ring. Only its thread writes; the writer publishes the count
/// after the slot, so a reader sees whole events below the count it loads.
struct thread_ring {
  std::unique_ptr<event[]> slots; ///< not zeroed: pages are touched only as events arrive
  std::size_t capacity = 0;
  std::atomic<std::uint64_t> count{0};
  int tid = 0;
  std::string name;
};

/// The flag every probe reads: set while a traced process group exists.
inline std::atomic<bool> active_flag{false};

/// The one branch a probe costs when tracing is off.
inline bool on() noexcept {
#ifdef DDP_TRACE_DISABLED
  return false;
#else
  return active_flag.load(std::memory_order_relaxed);
#endif
}

/// Set by a thread that wants its row named ("comm" for a group's worker).
inline thread_local const char* thread_label = nullptr;
inline thread_local thread_ring* my_ring = nullptr;
/// The DDP bucket whose collective this thread is submitting (-1: none):
/// lets the collective's event name its bucket without a new parameter on
/// every backend's all_reduce.
inline thread_local int submitting_bucket = -1;

class recorder {
public:
  /// Never destroyed: a thread may still record while the process exits.
  static recorder& get() {
    static recorder* r = new recorder;
    return *r;
  }

  /// A process group starts: with DDP_TRACE set, tracing turns on (the first
  /// group names the file with its rank). Returns whether this group traces.
  bool open(int rank) {
    auto dir = getenv_str("DDP_TRACE");
    if (!dir || dir->empty() || *dir == "0") return false;
    std::lock_guard lock(mu_);
    if (sessions_++ == 0 && dir_.empty()) {
      if (const int err = make_directories(*dir); err != 0) {
        --sessions_;
        detail::throw_error(error_kind::config,
                            {"rank ", rank, ": DDP_TRACE=", *dir, " is not a directory that can be created (",
                             std::strerror(err), "); point DDP_TRACE at a writable directory or unset it"},
                            rank);
      }
      dir_ = *dir;
      rank_ = rank;
      capacity_ = static_cast<std::size_t>(
          env_int("DDP_TRACE_EVENTS", 64, std::int64_t{1} << 26).value_or(std::int64_t{1} << 17));
    }
    active_flag.store(true, std::memory_order_relaxed);
    return true;
  }

  /// A traced process group ends: when it was the last one, the trace is
  /// written (its threads have stopped; events recorded so far are kept, so a
  /// later group's file holds both).
  void close() {
    std::unique_lock lock(mu_);
    if (sessions_ == 0 || --sessions_ > 0) return;
    active_flag.store(false, std::memory_order_relaxed);
    write_locked();
  }

  /// This thread's ring, made on its first event.
  DDP_INLINE thread_ring& ring_of_this_thread();

  /// The path the trace goes to ("" before a traced group opened).
  std::string path() const {
    std::lock_guard lock(mu_);
    return dir_.empty() ? std::string() : detail::message({dir_, "/rank_", rank_, ".json"});
  }

private:
  void write_locked() {
    const std::string path = detail::message({dir_, "/rank_", rank_, ".json"});
    const std::string tmp = path + ".tmp";
    std::string j = detail::message({"{\"displayTimeUnit\":\"ms\",\"otherData\":{\"rank\":", rank_,
                                     ",\"clock\":\"steady_clock\",\"dropped\":"});
    std::uint64_t dropped = 0;
    for (auto& r : rings_) {
      auto n = r->count.load(std::memory_order_acquire);
      if (n > r->capacity) dropped += n - r->capacity;
    }
    detail::append_message(j, {dropped, "},\"traceEvents\":[\n"});
    const std::string pid = std::to_string(rank_);
    j += R"({"ph":"M","name":"process_name","pid":)" + pid + R"(,"tid":0,"args":{"name":"rank )" + pid +
         "\"}},\n";
    j += R"({"ph":"M","name":"process_sort_index","pid":)" + pid + R"(,"tid":0,"args":{"sort_index":)" + pid +
         "}}";
    for (auto& r : rings_) {
      const std::string tid = std::to_string(r->tid);
      j += ",\n" + std::string(R"({"ph":"M","name":"thread_name","pid":)") + pid + ",\"tid\":" + tid +
           R"(,"args":{"name":")" + r->name + "\"}}";
      const auto n = r->count.load(std::memory_order_acquire);
      const std::uint64_t first = n > r->capacity ? n - r->capacity : 0;
      for (std::uint64_t s = first; s < n; ++s)
        append(j, r->slots[s % r->capacity], pid, tid);
    }
    j += "\n]}\n";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    bool ok = f && std::fwrite(j.data(), 1, j.size(), f) == j.size();
    if (f) ok = (std::fclose(f) == 0) && ok;
    if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok)
      log_line(detail::message({"rank ", rank_}),
               detail::message(
                   {"DDP_TRACE: could not write ", path, " (is the directory still there and writable?)"}));
  }

  static void append_us(std::string& j, std::int64_t ns) {
    char b[32];
    std::snprintf(b, sizeof b, "%lld.%03lld", static_cast<long long>(ns / 1000),
                  static_cast<long long>(ns % 1000));
    j += b;
  }

  static void append(std::string& j, const event& e, const std::string& pid, const std::string& tid) {
    const auto& k = info(e.what);
    j += ",\n{\"name\":\"";
    j += e.label ? e.label : k.name;
    j += "\",\"cat\":\"";
    j += e.what == kind::collective || e.what == kind::message ? "collective" : "ddp";
    j += "\",\"ph\":\"";
    j += k.phase;
    j += "\",\"ts\":";
    append_us(j, e.ts_ns);
    if (k.phase == 'X') {
      j += ",\"dur\":";
      append_us(j, e.dur_ns);
    }
    if (k.phase == 'i') j += ",\"s\":\"t\"";
    if (k.phase == 'b' || k.phase == 'e') detail::append_message(j, {",\"id\":", e.arg[0]});
    detail::append_message(j, {",\"pid\":", pid, ",\"tid\":", tid, ",\"args\":{"});
    for (int a = 0; a < 4 && k.args[a]; ++a) {
      if (a) j += ",";
      j += "\"";
      j += k.args[a];
      j += "\":";
      if (std::string_view(k.args[a]).ends_with("_us"))
        append_us(j, e.arg[a]);
      else
        j += std::to_string(e.arg[a]);
    }
    j += "}}";
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<thread_ring>> rings_;
  std::string dir_;
  int rank_ = 0;
  int sessions_ = 0;
  std::size_t capacity_ = 0;
};

/// Appends one event to this thread's ring (call only when on()).
DDP_INLINE void record(kind what, std::int64_t ts_ns, std::int64_t dur_ns, std::int64_t a0 = 0,
                       std::int64_t a1 = 0, std::int64_t a2 = 0, std::int64_t a3 = 0,
                       const char* label = nullptr) noexcept;

inline void instant(kind what, std::int64_t a0 = 0, std::int64_t a1 = 0, std::int64_t a2 = 0) noexcept {
  if (on()) record(what, now_ns(), 0, a0, a1, a2);
}

/// Records a span from its construction to its destruction (when on() at construction).
class span {
public:
  explicit span(kind what, std::int64_t a0 = 0, std::int64_t a1 = 0) noexcept
      : what_(what), a0_(a0), a1_(a1), start_(on() ? now_ns() : -1) {}
  span(const span&) = delete;
  span& operator=(const span&) = delete;
  ~span() {
    if (start_ >= 0) record(what_, start_, now_ns() - start_, a0_, a1_);
  }

private:
  kind what_;
  std::int64_t a0_, a1_;
  std::int64_t start_;
};

/// Holds tracing on for the life of a process group (opened with its rank).
class session {
public:
  explicit session(int rank) : open_(recorder::get().open(rank)) {}
  session(const session&) = delete;
  session& operator=(const session&) = delete;
  ~session() {
    if (open_) recorder::get().close();
  }

private:
  bool open_;
};

} // namespace detail::trace
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/common/trace-inl.hpp>
#endif

#endif // DDP_DETAIL_COMMON_TRACE_HPP
