// ddp::tcp_store — the rendezvous key-value store. Served on
// MASTER_ADDR:MASTER_PORT (that address only) by ddprun on node 0 when ddprun
// launched the job (it says so with DDP_STORE_IN_LAUNCHER=1), so the store
// outlives every rank; otherwise by rank 0. Every rank, rank 0 included, talks
// to it as a client. Both ends of every connection prove they hold the job
// token without sending it (detail/store/auth.hpp). A client may scope its
// keys with a prefix (a restart round's "r<k>/"): every key it names, the
// store's own lost-rank keys included, then lives under that prefix.
#ifndef DDP_STORE_HPP
#define DDP_STORE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/store/protocol.hpp>
#include <ddp/detail/store/socket.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE

struct tcp_store_options {
  std::string host = "127.0.0.1";
  int port = 0;       ///< 0 with serve=true picks a free port (see port())
  bool serve = false; ///< true on exactly one process (rank 0)
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  std::string token; ///< must match the server's; empty is a valid token
  int rank = -1;     ///< reported to the server so a lost connection names the rank
  /// With serve: how long teardown keeps serving ranks still connected
  /// (default: timeout + 10 s, see default_linger).
  std::optional<std::chrono::milliseconds> linger;
  /// Prefix of every key this client names ("r1/": restart round 1); empty: none.
  std::string scope;
  /// The launcher (ddprun on node 0) serves the store, not rank 0: a vanished
  /// store then means the launcher died, and names no rank.
  bool served_by_launcher = false;
};

/// The rank a survivor blames for a failure, as the store tells it.
struct lost_rank {
  int rank = -1;       ///< -1: no lost rank known (in fail_for_peer: the launcher serving the store is gone)
  std::string reason;  ///< "exited or lost its connection", "failed: <its reason>", ...
  bool silent = false; ///< rank 0 did not answer (stopped or hung), rather than died
  explicit operator bool() const { return rank >= 0; }
};

namespace detail {
class store_server;

/// "rank R <reason>", or the reason alone where no rank is named (the launcher is gone).
inline std::string lost_news(const lost_rank& lost) {
  return lost.rank >= 0 ? detail::message({"rank ", lost.rank, " ", lost.reason}) : lost.reason;
}
} // namespace detail

class tcp_store {
public:
  DDP_INLINE explicit tcp_store(const tcp_store_options& o);

  tcp_store(const tcp_store&) = delete;
  tcp_store& operator=(const tcp_store&) = delete;

  DDP_INLINE ~tcp_store();

  /// The port the store listens on (useful with port 0).
  int port() const { return opts_.port; }
  const std::string& host() const { return opts_.host; }
  std::chrono::milliseconds timeout() const { return opts_.timeout; }
  bool is_server() const { return server_ != nullptr; }

  DDP_INLINE void set(const std::string& key, std::string_view value,
                      std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  /// Waits (up to the store timeout) until `key` exists, then returns its value.
  DDP_INLINE std::string get(const std::string& key);

  /// Sets `keys[i]` to `values[i]` for every i in one round trip: the
  /// requests go out back to back and their replies are read after them (see
  /// pipelined). A full mesh's address exchange sets a key per peer; one round
  /// trip each took a median 0.24 s of each rank's connect at 64 ranks on this
  /// project's 2-core machine (bench_store_fanin --mesh-keys compares).
  DDP_INLINE void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);

  /// Waits (up to `timeout`, as wait() does, naming the keys still missing or
  /// a rank lost meanwhile) until every key exists, then reads them all in one
  /// round trip (see pipelined; bounded by the store's timeout, like get()):
  /// the values, in the order of `keys`.
  DDP_INLINE std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout);

  DDP_INLINE std::optional<std::string>
  try_get(const std::string& key, std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  /// Atomically adds `delta` to the integer under `key` (0 when absent); returns the new value.
  DDP_INLINE std::int64_t add(const std::string& key, std::int64_t delta);

  /// Atomically sets `desired` under `key` if it holds `expected` (an absent key holds "" only:
  /// `compare_set(k, "", v)` is set-if-absent, the first writer's value standing; an empty `v`
  /// there is refused, ddp::error config, as it could not be told from absent); returns the
  /// value under `key` after it, nothing while it is absent.
  DDP_INLINE std::optional<std::string> compare_set(const std::string& key, std::string_view expected,
                                                    std::string_view desired);

  DDP_INLINE bool check(const std::vector<std::string>& keys) { return check(keys, opts_.timeout); }
  /// check() that throws once the store took `timeout` to answer (each frame of keys).
  DDP_INLINE bool check(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  void wait(const std::vector<std::string>& keys) { wait(keys, opts_.timeout); }

  /// Waits until every key exists; ddp::error (kind timeout) naming the
  /// missing keys after `timeout`, or (kind peer_lost) naming a rank that
  /// dropped without a goodbye meanwhile: the keys it owed will never come.
  DDP_INLINE void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  /// Like wait(), but returns false on timeout instead of throwing (a lost rank
  /// still throws peer_lost). `slack`: how long past `timeout` the store may
  /// take to answer before it counts as gone (failure paths keep it short).
  DDP_INLINE bool try_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                           std::chrono::milliseconds slack = std::chrono::seconds(10));

  /// Ranks whose connection dropped without a goodbye (crashed processes).
  DDP_INLINE std::vector<int> lost_ranks();

  /// The rank to blame, for a survivor whose collective just failed: the
  /// first rank that dropped without a goodbye or announced its own failure.
  /// The store notices a crash at about the moment we do, so it is given
  /// `grace` to record it. `rank == -1` (unknown) when none was recorded.
  /// Rank 0 when the store is gone or silent: rank 0 serves it and, on
  /// teardown, keeps serving until the other ranks are done with it (see
  /// store_server), so a vanished store means rank 0 really died or stopped.
  /// When the launcher serves the store, a vanished one names nobody (-1).
  DDP_INLINE lost_rank wait_for_lost_rank(std::chrono::milliseconds grace);

  /// Announces that this rank fails on its own (not because of a peer): the
  /// store records it as lost at once, so peers name it instead of waiting.
  /// Best effort, bounded by a short deadline; false when the store is gone.
  /// When another thread of this rank holds the connection (a store wait of
  /// its collective, up to the timeout, which would hold the report back:
  /// docs/design-notes.md, "Note [leaving on an error]"), the report goes over
  /// a connection of its own, as this rank, that says goodbye after it.
  DDP_INLINE bool report_failure(std::string_view reason) noexcept;

  /// Rank 0 only, when a rank was lost before every rank arrived: on
  /// teardown, keep serving (late_arrival_linger at most) until each of the
  /// job's `world_size` ranks has connected once, so that a rank starting late
  /// reads who was lost instead of finding no store and waiting its timeout.
  DDP_INLINE void serve_late_arrivals(int world_size);
  /// Rank 0's error waits this long at most (a rank that never starts).
  static constexpr std::chrono::milliseconds late_arrival_linger{3000};

  /// Rank 0 only: on teardown, do not wait for the other ranks to disconnect.
  DDP_INLINE void stop_serving_at_once();

  /// Rank 0 only, when it failed on its own and said so (report_failure): on
  /// teardown, keep serving until the other ranks have left, but only for
  /// own_failure_linger, not the usual timeout + 10 s: its peers, told at once
  /// by their peer-failure watches, need only read why.
  DDP_INLINE void linger_briefly();

  /// With no linger at all, a peer sometimes read "the store is gone" instead
  /// of rank 0's reason: rank 0 exited 30 ms after giving up (dist.faults'
  /// abort-during-a-collective case, 1 run in 20 beside a CPU hog). Its peers
  /// fail within milliseconds of the report and then leave, ending the linger.
  static constexpr std::chrono::milliseconds own_failure_linger{2000};

  /// Another client of the same store, with the same token and key scope,
  /// registered as no rank (its connection dropping is nobody's loss): for a
  /// thread that blocks in store waits of its own (ddp's peer-failure watch)
  /// without holding up this client's requests.
  /// `timeout` bounds connecting and is the new client's default for requests.
  DDP_INLINE std::unique_ptr<tcp_store> connect_again(std::chrono::milliseconds timeout) const;

  /// Ends the request another thread is blocked in (it throws peer_lost) and
  /// fails every later one; no goodbye is sent. For the owner of a client
  /// whose thread blocks on it, at teardown. Safe from any thread.
  DDP_INLINE void shutdown_connection() noexcept;

  /// The rank this client registered as (-1: none).
  int rank() const { return opts_.rank; }
  /// The prefix of every key this client names (empty: none).
  const std::string& scope() const { return opts_.scope; }
  bool served_by_launcher() const { return opts_.served_by_launcher; }

  /// Failure paths (naming a lost rank, the desync report) give the store this
  /// long to answer beyond their own wait: a live store answers in well under a
  /// millisecond, even beside a CPU hog, so a silent one is a stopped rank 0.
  static constexpr std::chrono::milliseconds fault_slack{3000};

  /// How long report_failure waits for this client's connection before it
  /// opens one of its own: a request takes well under a millisecond, so a
  /// connection busy this long is in a wait that may last the timeout.
  static constexpr std::chrono::milliseconds report_patience{100};

  /// Requests pipelined beyond this many bytes wait for the replies to those
  /// before them: the server answers as it reads, so a client writing without
  /// reading could fill the socket buffers both ways (the kernel's default
  /// receive buffer alone, 128 KiB, holds a piece).
  static constexpr std::size_t pipeline_piece_bytes = 32 * 1024;

private:
  /// Calls `ask(part)` for each part of `keys` that fits a frame
  /// (store_max_keys_per_frame), in order, once for no keys; false as soon as
  /// one answers false.
  template <class Ask> static bool every_frame_part(const std::vector<std::string>& keys, Ask&& ask) {
    std::span<const std::string> rest(keys);
    do {
      const auto part = rest.first(std::min<std::size_t>(rest.size(), detail::store_max_keys_per_frame));
      if (!ask(part)) return false;
      rest = rest.subspan(part.size());
    } while (!rest.empty());
    return true;
  }

  /// One wait frame for `keys` (part of `all_keys`, which an error names).
  DDP_INLINE bool try_wait_frame(std::span<const std::string> keys, const std::vector<std::string>& all_keys,
                                 std::chrono::milliseconds timeout, std::chrono::milliseconds slack);

  /// Messages name at most this many keys of a list, then count the rest.
  static constexpr std::size_t keys_named = 8;

  DDP_INLINE static std::string name_keys(std::span<const std::string> keys);

  std::string scoped(const std::string& key) const { return opts_.scope.empty() ? key : opts_.scope + key; }

  /// A failed rank's own reason, when it gave one (store_failed_prefix).
  DDP_INLINE std::string describe_lost(int rank);

  /// How long rank 0's store keeps serving on teardown for ranks still
  /// connected. A survivor blocked in a send inside Gloo learns of a loss only
  /// at its timeout (seen with kill -9 of 1 rank of 4), then needs ~1 s to ask
  /// who was lost, or up to ~6 s for the desync report (gloo.hpp): so the
  /// timeout plus 10 s. (A linger of min(timeout, 10 s) let such a survivor
  /// find the store gone and blame rank 0: 1 trial in 50 beside a CPU hog.)
  /// It ends as soon as every other rank has left or was found stopped by
  /// the survivors' desync report (store_stalled_prefix), so it costs time
  /// only while a rank is stuck unseen: bounded, never forever.
  DDP_INLINE static std::chrono::milliseconds default_linger(std::chrono::milliseconds timeout);

  /// After how long without acknowledgements a store connection's peer host counts
  /// as lost (detail::set_keepalive): half the timeout, so that a survivor whose
  /// collective times out finds a rank cut off by the network already recorded
  /// lost (it takes one look, see detail/gloo/blame.hpp's find_lost_rank). At least 1 s.
  DDP_INLINE static std::chrono::milliseconds peer_timeout(std::chrono::milliseconds timeout);

  std::string where() const { return detail::endpoint(opts_.host, opts_.port); }
  /// Why no rank can go on once the launcher's store closed (wait_for_lost_rank's reason).
  DDP_INLINE std::string launcher_gone() const;

  /// Connects and authenticates (detail/store/auth.hpp). A server that closes
  /// the connection or goes quiet mid-handshake is shedding load (its cap on
  /// pending handshakes, or out of descriptors): ask again, with backoff,
  /// until the deadline. A wrong proof either way is final.
  DDP_INLINE void open_connection(detail::clock::time_point deadline);

  /// Tells the server this connection's key prefix (store_op::scope).
  DDP_INLINE void declare_scope(detail::clock::time_point deadline);

  /// Tells the server that this rank-less connection belongs to `rank`'s
  /// process (store_op::owner), so that rank 0's linger skips it with that
  /// rank once survivors found the rank stopped.
  DDP_INLINE void declare_owner(int rank);

  /// Who serves the store, for messages about it vanishing.
  DDP_INLINE std::string server_name() const;

  DDP_INLINE error protocol_error(const char* what) const;

  /// Sends `frames` back to back, in pieces of pipeline_piece_bytes, and
  /// returns their replies in order (the server answers a connection's frames
  /// in order, and those it read at once in one send: store_server).
  DDP_INLINE std::vector<std::string> pipelined(const std::vector<std::vector<char>>& frames,
                                                const std::string& what);

  DDP_INLINE void throw_if_broken() const;

  DDP_INLINE std::string request(detail::frame_writer& w, const std::string& what,
                                 std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  DDP_INLINE std::string
  request_holding_lock(detail::frame_writer& w, const std::string& what,
                       std::optional<std::chrono::milliseconds> io_timeout = std::nullopt);

  DDP_INLINE void send_frame(const std::vector<char>& f, detail::clock::time_point deadline);

  DDP_INLINE std::string recv_frame(detail::clock::time_point deadline, const std::string& what);

  [[noreturn]] DDP_INLINE void fail(detail::io_status st, const std::string& what);

  tcp_store_options opts_;
  std::unique_ptr<detail::store_server> server_;
  detail::unique_fd fd_;
  std::mutex mu_; ///< one request at a time on fd_ (report_failure gives up on it after a while)
  bool broken_ = false;
  bool unreachable_ = false; ///< broken because rank 0's host stopped acknowledging
  error_kind broken_kind_ = error_kind::peer_lost;
};

DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/store-inl.hpp>
#endif

#endif // DDP_STORE_HPP
