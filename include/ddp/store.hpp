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

#include <ddp/detail/store/handshake.hpp>
#include <ddp/detail/store/protocol.hpp>
#include <ddp/detail/store/server.hpp>
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
  int rank = -1;       ///< -1: the store knows of no lost rank (unknown)
  std::string reason;  ///< "exited or lost its connection", "failed: <its reason>", ...
  bool silent = false; ///< rank 0 did not answer (stopped or hung), rather than died
  explicit operator bool() const { return rank >= 0; }
};

class tcp_store {
public:
  explicit tcp_store(const tcp_store_options& o) : opts_(o) {
    if (o.port < 0 || o.port > 65535 || (!o.serve && o.port == 0))
      throw error(error_kind::config, "tcp_store: port " + std::to_string(o.port) +
                                          " is not a valid port to connect to (1..65535)");
    auto deadline = detail::clock::now() + o.timeout;
    if (o.serve) {
      server_ =
          std::make_unique<detail::store_server>(o.host, o.port, o.token, deadline, peer_timeout(o.timeout));
      opts_.port = server_->port();
      server_->set_linger(o.linger.value_or(default_linger(o.timeout)));
    }
    open_connection(deadline);
  }

  tcp_store(const tcp_store&) = delete;
  tcp_store& operator=(const tcp_store&) = delete;

  ~tcp_store() {
    if (fd_ && !broken_) {
      auto f = detail::frame_writer(detail::store_op::bye).finish();
      detail::send_all(fd_.get(), f.data(), f.size(), detail::clock::now() + std::chrono::seconds(1));
    }
  }

  /// The port the store listens on (useful with port 0).
  int port() const { return opts_.port; }
  const std::string& host() const { return opts_.host; }
  std::chrono::milliseconds timeout() const { return opts_.timeout; }
  bool is_server() const { return server_ != nullptr; }

  void set(const std::string& key, std::string_view value,
           std::optional<std::chrono::milliseconds> io_timeout = std::nullopt) {
    request(detail::frame_writer(detail::store_op::set).bytes(scoped(key)).bytes(value), "set '" + key + "'",
            io_timeout);
  }

  /// Waits (up to the store timeout) until `key` exists, then returns its value.
  std::string get(const std::string& key) {
    wait({key});
    auto v = try_get(key);
    if (!v) throw error(error_kind::backend, "store key '" + key + "' vanished");
    return *v;
  }

  /// Sets `keys[i]` to `values[i]` for every i in one round trip: the
  /// requests go out back to back and their replies are read after them (see
  /// pipelined). A full mesh's address exchange sets a key per peer; one round
  /// trip each took a median 0.24 s of each rank's connect at 64 ranks on this
  /// project's 2-core machine (bench_store_fanin --mesh-keys compares).
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
    if (keys.size() != values.size())
      throw error(error_kind::config, "tcp_store::multi_set: " + std::to_string(keys.size()) + " keys but " +
                                          std::to_string(values.size()) + " values");
    std::vector<std::vector<char>> frames;
    frames.reserve(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i)
      frames.push_back(
          detail::frame_writer(detail::store_op::set).bytes(scoped(keys[i])).bytes(values[i]).finish());
    const auto replies = pipelined(frames, "set " + name_keys(keys));
    for (std::size_t i = 0; i < replies.size(); ++i)
      if (static_cast<detail::store_status>(replies[i][0]) != detail::store_status::ok)
        throw protocol_error(("set '" + keys[i] + "'").c_str());
  }

  /// Waits (up to `timeout`, as wait() does, naming the keys still missing or
  /// a rank lost meanwhile) until every key exists, then reads them all in one
  /// round trip (see pipelined; bounded by the store's timeout, like get()):
  /// the values, in the order of `keys`.
  std::vector<std::string> multi_get(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) {
    wait(keys, timeout);
    std::vector<std::vector<char>> frames;
    frames.reserve(keys.size());
    for (auto& k : keys)
      frames.push_back(detail::frame_writer(detail::store_op::get).bytes(scoped(k)).finish());
    std::vector<std::string> values;
    values.reserve(keys.size());
    const auto replies = pipelined(frames, "get " + name_keys(keys));
    for (std::size_t i = 0; i < replies.size(); ++i) {
      if (static_cast<detail::store_status>(replies[i][0]) == detail::store_status::missing)
        throw error(error_kind::backend, "store key '" + keys[i] + "' vanished");
      detail::frame_reader fr(std::string_view(replies[i]).substr(1));
      values.push_back(fr.bytes());
      if (!fr.ok()) throw protocol_error("get");
    }
    return values;
  }

  std::optional<std::string> try_get(const std::string& key,
                                     std::optional<std::chrono::milliseconds> io_timeout = std::nullopt) {
    auto r = request(detail::frame_writer(detail::store_op::get).bytes(scoped(key)), "get '" + key + "'",
                     io_timeout);
    if (static_cast<detail::store_status>(r[0]) == detail::store_status::missing) return std::nullopt;
    detail::frame_reader fr(std::string_view(r).substr(1));
    auto v = fr.bytes();
    if (!fr.ok()) throw protocol_error("get");
    return v;
  }

  /// Atomically adds `delta` to the integer under `key` (0 when absent); returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta) {
    auto r = request(detail::frame_writer(detail::store_op::add).bytes(scoped(key)).i64(delta),
                     "add '" + key + "'");
    detail::frame_reader fr(std::string_view(r).substr(1));
    auto v = fr.i64();
    if (!fr.ok()) throw protocol_error("add");
    return v;
  }

  bool check(const std::vector<std::string>& keys) {
    return every_frame_part(keys, [&](std::span<const std::string> part) {
      detail::frame_writer w(detail::store_op::check);
      w.u32(static_cast<std::uint32_t>(part.size()));
      for (auto& k : part)
        w.bytes(scoped(k));
      auto r = request(w, "check");
      return r.size() >= 2 && r[1] == 1;
    });
  }

  void wait(const std::vector<std::string>& keys) { wait(keys, opts_.timeout); }

  /// Waits until every key exists; ddp::error (kind timeout) naming the
  /// missing keys after `timeout`, or (kind peer_lost) naming a rank that
  /// dropped without a goodbye meanwhile: the keys it owed will never come.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    if (!try_wait(keys, timeout)) {
      // The keys still missing say which rank did not arrive: the first few
      // are named (a mesh waits for a key per peer), the rest left unchecked.
      std::vector<std::string> missing;
      std::size_t looked = 0;
      for (; looked < keys.size() && missing.size() < keys_named; ++looked) {
        bool present = false;
        try {
          present = keys.size() > 1 && check({keys[looked]});
        } catch (const ddp::error&) {}
        if (!present) missing.push_back(keys[looked]);
      }
      std::string names = name_keys(missing);
      if (looked < keys.size())
        names += " (and maybe some of the " + std::to_string(keys.size() - looked) + " after)";
      throw error(error_kind::timeout, "waited " + std::to_string(timeout.count()) + " ms for store key(s) " +
                                           names + " at " + where() +
                                           ": a rank did not arrive (crashed, stuck, or started with other "
                                           "arguments). Raise DDP_TIMEOUT if startup is just slow.");
    }
  }

  /// Like wait(), but returns false on timeout instead of throwing (a lost rank
  /// still throws peer_lost). `slack`: how long past `timeout` the store may
  /// take to answer before it counts as gone (failure paths keep it short).
  bool try_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                std::chrono::milliseconds slack = std::chrono::seconds(10)) {
    if (keys.size() <= detail::store_max_keys_per_frame) return try_wait_frame(keys, keys, timeout, slack);
    // More keys than a frame holds: one wait per part, the whole within `timeout`
    // (clamped as the store clamps it, so that the deadline cannot overflow).
    const auto deadline = detail::clock::now() + std::min(timeout, std::chrono::milliseconds(1LL << 40));
    return every_frame_part(keys, [&](std::span<const std::string> part) {
      const auto left =
          std::max(std::chrono::milliseconds(0),
                   std::chrono::ceil<std::chrono::milliseconds>(deadline - detail::clock::now()));
      return try_wait_frame(part, keys, left, slack);
    });
  }

  /// Ranks whose connection dropped without a goodbye (crashed processes).
  std::vector<int> lost_ranks() {
    std::vector<int> out;
    auto v = try_get(detail::store_lost_key, fault_slack);
    if (!v) return out;
    std::string_view s = *v;
    while (!s.empty()) {
      auto comma = s.find(',');
      if (auto r = detail::parse_int(s.substr(0, comma))) out.push_back(static_cast<int>(*r));
      if (comma == std::string_view::npos) break;
      s.remove_prefix(comma + 1);
    }
    return out;
  }

  /// The rank to blame, for a survivor whose collective just failed: the
  /// first rank that dropped without a goodbye or announced its own failure.
  /// The store notices a crash at about the moment we do, so it is given
  /// `grace` to record it. `rank == -1` (unknown) when none was recorded.
  /// Rank 0 when the store is gone or silent: rank 0 serves it and, on
  /// teardown, keeps serving until the other ranks are done with it (see
  /// store_server), so a vanished store means rank 0 really died or stopped.
  /// When the launcher serves the store, a vanished one names nobody (-1).
  lost_rank wait_for_lost_rank(std::chrono::milliseconds grace) {
    try {
      if (!try_wait({detail::store_lost_key}, grace, fault_slack)) return {};
      auto lost = lost_ranks();
      if (lost.empty()) return {};
      return {lost.front(), describe_lost(lost.front())};
    } catch (const ddp::error& e) {
      if (unreachable_) // our own connection timed out: the store's host is cut off, not just slow
        return {0, std::string("is unreachable: its host acknowledged nothing on the connection to the "
                               "rendezvous store ") +
                       (opts_.served_by_launcher ? "its node's ddprun serves" : "it serves") + " for " +
                       std::to_string(peer_timeout(opts_.timeout).count()) +
                       " ms (network cut or host down)"};
      if (opts_.served_by_launcher) return {}; // the launcher died, not a rank: nobody to name
      if (e.kind() == error_kind::timeout)
        return {0,
                "does not answer: the rendezvous store it serves did not reply within " +
                    std::to_string((grace + fault_slack).count()) + " ms (rank 0 is stopped or hung)",
                true};
      return {0, "exited: the rendezvous store it serves is gone"};
    }
  }

  /// Announces that this rank fails on its own (not because of a peer): the
  /// store records it as lost at once, so peers name it instead of waiting.
  /// Best effort, bounded by a short deadline; false when the store is gone.
  /// When another thread of this rank holds the connection (a store wait of
  /// its collective, up to the timeout, which would hold the report back:
  /// docs/design-notes.md, "Note [leaving on an error]"), the report goes over
  /// a connection of its own, as this rank, that says goodbye after it.
  bool report_failure(std::string_view reason) noexcept {
    try {
      auto frame = [&] {
        return detail::frame_writer(detail::store_op::set)
            .bytes(scoped(std::string(detail::store_failed_prefix) + std::to_string(opts_.rank)))
            .bytes(reason);
      };
      {
        // Polled with try_lock, not a timed_mutex: GCC 12's TSan does not see
        // timed_mutex's lock (pthread_mutex_clocklock) and reports its unlock.
        std::unique_lock lock(mu_, std::defer_lock);
        const auto give_up = detail::clock::now() + report_patience;
        while (!lock.try_lock() && detail::clock::now() < give_up)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (lock.owns_lock()) {
          auto w = frame();
          request_holding_lock(w, "report failure", fault_slack);
          return true;
        }
      }
      tcp_store_options o = opts_;
      o.serve = false;
      o.linger.reset();
      o.timeout = fault_slack;
      tcp_store alone(o);
      auto w = frame();
      alone.request(w, "report failure", fault_slack);
      return true;
    } catch (...) { return false; }
  }

  /// Rank 0 only, when a rank was lost before every rank arrived: on
  /// teardown, keep serving (late_arrival_linger at most) until each of the
  /// job's `world_size` ranks has connected once, so that a rank starting late
  /// reads who was lost instead of finding no store and waiting its timeout.
  void serve_late_arrivals(int world_size) {
    if (server_) server_->serve_late_arrivals(world_size, late_arrival_linger);
  }
  /// Rank 0's error waits this long at most (a rank that never starts).
  static constexpr std::chrono::milliseconds late_arrival_linger{3000};

  /// Rank 0 only: on teardown, do not wait for the other ranks to disconnect.
  void stop_serving_at_once() {
    if (server_) server_->set_linger(std::chrono::milliseconds(0));
  }

  /// Rank 0 only, when it failed on its own and said so (report_failure): on
  /// teardown, keep serving until the other ranks have left, but only for
  /// own_failure_linger, not the usual timeout + 10 s: its peers, told at once
  /// by their peer-failure watches, need only read why.
  void linger_briefly() {
    if (server_) server_->set_linger(own_failure_linger);
  }

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
  std::unique_ptr<tcp_store> connect_again(std::chrono::milliseconds timeout) const {
    tcp_store_options o = opts_;
    o.serve = false;
    o.rank = -1;
    o.linger.reset();
    o.timeout = timeout;
    auto again = std::make_unique<tcp_store>(o);
    // Only rank 0's store lingers; a launcher's, maybe of another ddp version, is not asked.
    if (opts_.rank >= 0 && !opts_.served_by_launcher) again->declare_owner(opts_.rank);
    return again;
  }

  /// Ends the request another thread is blocked in (it throws peer_lost) and
  /// fails every later one; no goodbye is sent. For the owner of a client
  /// whose thread blocks on it, at teardown. Safe from any thread.
  void shutdown_connection() noexcept {
    if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
  }

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
  bool try_wait_frame(std::span<const std::string> keys, const std::vector<std::string>& all_keys,
                      std::chrono::milliseconds timeout, std::chrono::milliseconds slack) {
    detail::frame_writer w(detail::store_op::wait);
    w.u32(static_cast<std::uint32_t>(keys.size()));
    for (auto& k : keys)
      w.bytes(scoped(k));
    w.u64(static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count())));
    auto r = request(w, "wait for " + name_keys(keys), timeout + slack);
    auto st = static_cast<detail::store_status>(r[0]);
    if (st == detail::store_status::lost) {
      detail::frame_reader fr(std::string_view(r).substr(1));
      int lost = fr.i32();
      if (!fr.ok()) throw protocol_error("wait");
      throw error(error_kind::peer_lost,
                  "rank " + std::to_string(lost) + " " + describe_lost(lost) + " while rank " +
                      std::to_string(opts_.rank) + " waited for store key(s) " + name_keys(all_keys) +
                      " at " + where() + ": it will never set them. Look at rank " + std::to_string(lost) +
                      "'s output first.",
                  lost);
    }
    return st == detail::store_status::ok;
  }

  /// Messages name at most this many keys of a list, then count the rest.
  static constexpr std::size_t keys_named = 8;

  static std::string name_keys(std::span<const std::string> keys) {
    std::string names;
    for (std::size_t i = 0; i < keys.size() && i < keys_named; ++i)
      names += (names.empty() ? "'" : ", '") + keys[i] + "'";
    if (keys.size() > keys_named) names += " and " + std::to_string(keys.size() - keys_named) + " more";
    return names;
  }

  std::string scoped(const std::string& key) const { return opts_.scope.empty() ? key : opts_.scope + key; }

  /// A failed rank's own reason, when it gave one (store_failed_prefix).
  std::string describe_lost(int rank) {
    try {
      auto cut = try_get(std::string(detail::store_unreachable_prefix) + std::to_string(rank), fault_slack);
      if (cut) return *cut;
      auto why = try_get(std::string(detail::store_failed_prefix) + std::to_string(rank), fault_slack);
      if (why) return "failed: " + *why;
    } catch (const ddp::error&) {}
    return "exited or lost its connection";
  }

  /// How long rank 0's store keeps serving on teardown for ranks still
  /// connected. A survivor blocked in a send inside Gloo learns of a loss only
  /// at its timeout (seen with kill -9 of 1 rank of 4), then needs ~1 s to ask
  /// who was lost, or up to ~6 s for the desync report (gloo.hpp): so the
  /// timeout plus 10 s. (A linger of min(timeout, 10 s) let such a survivor
  /// find the store gone and blame rank 0: 1 trial in 50 beside a CPU hog.)
  /// It ends as soon as every other rank has left or was found stopped by
  /// the survivors' desync report (store_stalled_prefix), so it costs time
  /// only while a rank is stuck unseen: bounded, never forever.
  static std::chrono::milliseconds default_linger(std::chrono::milliseconds timeout) {
    return timeout + std::chrono::seconds(10);
  }

  /// After how long without acknowledgements a store connection's peer host counts
  /// as lost (detail::set_keepalive): half the timeout, so that a survivor whose
  /// collective times out finds a rank cut off by the network already recorded
  /// lost (it takes one look, see detail/gloo/blame.hpp's find_lost_rank). At least 1 s.
  static std::chrono::milliseconds peer_timeout(std::chrono::milliseconds timeout) {
    return std::max(timeout / 2, std::chrono::milliseconds(1000));
  }

  std::string where() const { return detail::endpoint(opts_.host, opts_.port); }

  /// Connects and authenticates (detail/store/auth.hpp). A server that closes
  /// the connection or goes quiet mid-handshake is shedding load (its cap on
  /// pending handshakes, or out of descriptors): ask again, with backoff,
  /// until the deadline. A wrong proof either way is final.
  void open_connection(detail::clock::time_point deadline) {
    using detail::handshake_result;
    auto backoff = std::chrono::milliseconds(10);
    for (;;) {
      fd_ = detail::connect_tcp(opts_.host, opts_.port, deadline);
      detail::set_keepalive(fd_.get(), peer_timeout(opts_.timeout));
      // Twice the server's own deadline: a store that takes longer is not going to answer.
      auto attempt = std::min(deadline, detail::clock::now() + 2 * detail::store_handshake_timeout);
      auto res = detail::client_handshake(fd_.get(), opts_.token, opts_.rank, attempt);
      if (res == handshake_result::ok) return declare_scope(deadline);
      fd_.reset();
      if (res == handshake_result::refused)
        throw error(error_kind::config, "the rendezvous store at " + where() +
                                            " refused this process: its job token differs (set the same "
                                            "DDP_TOKEN on every rank, or let the launcher set it)");
      if (res == handshake_result::server_unproven || res == handshake_result::malformed)
        throw error(error_kind::config,
                    "the process listening on " + where() + " is not this job's rendezvous store: it " +
                        (res == handshake_result::malformed ? "does not speak ddp's store protocol"
                                                            : "could not prove it knows the job token") +
                        ". DDP_TOKEN differs between this rank and rank 0, or another program holds the "
                        "port (check MASTER_ADDR/MASTER_PORT; the token was not sent)");
      if (detail::clock::now() + backoff > deadline)
        throw error(error_kind::timeout,
                    "the rendezvous store at " + where() + " accepted the connection but " +
                        (res == handshake_result::closed ? "closed it" : "did not answer") +
                        " during the handshake, until the timeout. Is that rank 0's store (check "
                        "MASTER_ADDR/MASTER_PORT), and is rank 0 alive and not out of file descriptors?");
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }

  /// Tells the server this connection's key prefix (store_op::scope).
  void declare_scope(detail::clock::time_point deadline) {
    if (opts_.scope.empty()) return;
    send_frame(detail::frame_writer(detail::store_op::scope).bytes(opts_.scope).finish(), deadline);
    auto r = recv_frame(deadline, "scope");
    if (static_cast<detail::store_status>(r[0]) != detail::store_status::ok) throw protocol_error("scope");
  }

  /// Tells the server that this rank-less connection belongs to `rank`'s
  /// process (store_op::owner), so that rank 0's linger skips it with that
  /// rank once survivors found the rank stopped.
  void declare_owner(int rank) {
    detail::frame_writer w(detail::store_op::owner);
    auto r = request(w.i32(rank), "declare its owner");
    if (static_cast<detail::store_status>(r[0]) != detail::store_status::ok) throw protocol_error("owner");
  }

  /// Who serves the store, for messages about it vanishing.
  std::string server_name() const {
    return opts_.served_by_launcher ? "ddprun on the master node, which serves it,"
                                    : "rank 0, which serves it,";
  }

  error protocol_error(const char* what) const {
    return error(error_kind::backend, std::string("malformed reply from the rendezvous store to ") + what);
  }

  /// Sends `frames` back to back, in pieces of pipeline_piece_bytes, and
  /// returns their replies in order (the server answers a connection's frames
  /// in order, and those it read at once in one send: store_server).
  std::vector<std::string> pipelined(const std::vector<std::vector<char>>& frames, const std::string& what) {
    std::lock_guard lock(mu_);
    throw_if_broken();
    const auto deadline = detail::clock::now() + opts_.timeout;
    std::vector<std::string> replies;
    replies.reserve(frames.size());
    std::vector<char> piece;
    for (std::size_t next = 0; next < frames.size();) {
      piece.clear();
      const std::size_t first = next;
      while (next < frames.size() &&
             (piece.empty() || piece.size() + frames[next].size() <= pipeline_piece_bytes)) {
        piece.insert(piece.end(), frames[next].begin(), frames[next].end());
        ++next;
      }
      send_frame(piece, deadline);
      for (std::size_t i = first; i < next; ++i)
        replies.push_back(recv_frame(deadline, what));
    }
    return replies;
  }

  void throw_if_broken() const {
    if (broken_)
      throw error(broken_kind_,
                  "the rendezvous store at " + where() + " is gone or silent (" + server_name() +
                      " exited or stopped)",
                  opts_.served_by_launcher ? -1 : 0);
  }

  std::string request(detail::frame_writer& w, const std::string& what,
                      std::optional<std::chrono::milliseconds> io_timeout = std::nullopt) {
    std::lock_guard lock(mu_);
    return request_holding_lock(w, what, io_timeout);
  }

  std::string request_holding_lock(detail::frame_writer& w, const std::string& what,
                                   std::optional<std::chrono::milliseconds> io_timeout = std::nullopt) {
    throw_if_broken();
    auto deadline = detail::clock::now() + io_timeout.value_or(opts_.timeout);
    send_frame(w.finish(), deadline);
    return recv_frame(deadline, what);
  }

  void send_frame(const std::vector<char>& f, detail::clock::time_point deadline) {
    auto st = detail::send_all(fd_.get(), f.data(), f.size(), deadline);
    if (st != detail::io_status::ok) fail(st, "sending");
  }

  std::string recv_frame(detail::clock::time_point deadline, const std::string& what) {
    std::uint32_t n = 0;
    auto st = detail::recv_all(fd_.get(), &n, 4, deadline);
    if (st != detail::io_status::ok) fail(st, what);
    if (n == 0 || n > detail::store_max_frame) {
      broken_ = true;
      throw protocol_error(what.c_str());
    }
    std::string body(n, '\0');
    st = detail::recv_all(fd_.get(), body.data(), n, deadline);
    if (st != detail::io_status::ok) fail(st, what);
    return body;
  }

  [[noreturn]] void fail(detail::io_status st, const std::string& what) {
    broken_ = true;
    if (st == detail::io_status::unreachable) {
      unreachable_ = true;
      throw error(error_kind::peer_lost,
                  "lost the connection to the rendezvous store at " + where() + " (" + what +
                      "): the host of rank 0, which serves it, acknowledged nothing for " +
                      std::to_string(peer_timeout(opts_.timeout).count()) +
                      " ms (network cut or host down; check the link and GLOO_SOCKET_IFNAME)",
                  0);
    }
    broken_kind_ = st == detail::io_status::timeout ? error_kind::timeout : error_kind::peer_lost;
    if (st == detail::io_status::timeout)
      throw error(error_kind::timeout,
                  "the rendezvous store at " + where() + " did not answer (" + what + ") within the timeout");
    throw error(error_kind::peer_lost,
                "lost the connection to the rendezvous store at " + where() + " (" + what +
                    "): " + server_name() + " has probably exited",
                opts_.served_by_launcher ? -1 : 0);
  }

  tcp_store_options opts_;
  std::unique_ptr<detail::store_server> server_;
  detail::unique_fd fd_;
  std::mutex mu_; ///< one request at a time on fd_ (report_failure gives up on it after a while)
  bool broken_ = false;
  bool unreachable_ = false; ///< broken because rank 0's host stopped acknowledging
  error_kind broken_kind_ = error_kind::peer_lost;
};

DDP_END_NAMESPACE

#endif // DDP_STORE_HPP
