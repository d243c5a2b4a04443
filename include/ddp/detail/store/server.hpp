// The rendezvous store's server, run on one background thread by ddprun on
// node 0 when it launched the job, else by rank 0.
// One poll() loop serves every connection: a connection must first complete
// the handshake of auth.hpp (both sides prove they hold the job token) within
// store_handshake_timeout; a wrong proof, a malformed or an oversized frame
// closes that connection only. Connections still in their handshake are
// capped, and are shed first when descriptors run short, so silent or hostile
// connections cannot lock the ranks out or make the loop spin. A rank whose
// connection drops without saying goodbye is recorded under `store_lost_key`,
// so survivors can name the rank they lost, and every pending wait is answered
// at once with "lost, rank r": the keys a dead rank would have set never come,
// so nobody waits out the timeout. A connection may declare a scope (a key
// prefix: a restart round's "r<k>/", see store_op::scope): its loss is then
// recorded under scope + store_lost_key and ends only that scope's waits.
//
// Under ddprun the server lives in the launcher on node 0 and outlives every
// rank. Otherwise it lives in rank 0's process, so when rank 0 leaves, the store goes
// and the survivors of a failure could no longer ask it who was lost (they used
// to blame rank 0 for it). So on teardown it lingers, still serving, until
// every other rank has disconnected or said goodbye, bounded by `set_linger()`:
// "store gone" then really means "rank 0 died". A rank the survivors' desync
// report found stopped (store_stalled_prefix) is not waited for: it would
// never read the report, and held rank 0 for the whole linger. A rank 0 that
// failed itself lingers briefly (it recorded its failure first; see process_group).
#ifndef DDP_DETAIL_STORE_SERVER_HPP
#define DDP_DETAIL_STORE_SERVER_HPP

#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/store/auth.hpp>
#include <ddp/detail/store/handshake.hpp>
#include <ddp/detail/store/protocol.hpp>
#include <ddp/detail/store/socket.hpp>

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Connections still in their handshake, at most. Legitimate fan-in stays far
/// below: a rank's handshake takes one round trip after accept, so even 1024+
/// ranks connecting at once never have this many pending.
inline constexpr std::size_t store_max_pending_handshakes = 4096;

/// Under pressure (the cap above, or descriptors nearly spent), a pending
/// handshake at least this old is closed to make room. Long enough for a rank
/// on a loaded machine to answer its challenge; a rank that is cut off anyway
/// connects again.
inline constexpr std::chrono::milliseconds store_shed_min_age{500};

/// How long the listener is left alone after accept fails for want of
/// descriptors (EMFILE/ENFILE) with nothing to shed: retrying at once spins
/// (docs/design-notes.md, "Note [store under descriptor pressure]").
inline constexpr std::chrono::milliseconds store_accept_backoff{100};

/// Descriptors kept free for the rest of the process (rank 0's own client,
/// Gloo's pairs): pending handshakes are shed before they take these.
inline constexpr long store_fd_reserve_max = 64;
inline int store_fd_reserve(long soft_limit) {
  return static_cast<int>(std::clamp(soft_limit / 16, 16L, store_fd_reserve_max));
}

/// Replies a connection may have waiting to be sent before the server stops
/// handling its requests until it reads some: a client pipelining gets of
/// large values (tcp_store::multi_get) is served a part at a time, between
/// the other connections, and the memory a connection holds stays bounded.
inline constexpr std::size_t store_reply_backlog = 256 * 1024;

/// A connection whose replies wait this long without the client taking any
/// of them is closed (its rank recorded lost): the process is stopped, or its
/// host cut off. Sending never blocks the server: a blocking send would stall
/// every other rank for up to this deadline
/// (docs/design-notes.md, "Note [store reply queue]").
inline constexpr std::chrono::seconds store_reply_stall{10};

/// A rank whose claim was refused for a wrong token and that has not joined
/// this long after is recorded lost: the rank that was refused exits, and its
/// peers would otherwise wait for it until DDP_TIMEOUT. A process of another
/// job claiming a rank that is merely late is given this long for the real
/// one to arrive.
inline constexpr std::chrono::milliseconds store_refusal_grace{2000};

/// Rate limit for the log lines that unauthenticated peers can cause, so a
/// flood of connections cannot flood stderr: 10 lines per 10 s, then a count.
class log_throttle {
public:
  void line(const std::string& text, clock::time_point now) {
    if (now - window_ > std::chrono::seconds(10)) {
      if (suppressed_ > 0)
        log_line("store",
                 detail::message({suppressed_, " more such message(s) in the last 10 s were not shown"}));
      window_ = now;
      shown_ = 0;
      suppressed_ = 0;
    }
    if (shown_ < 10) {
      ++shown_;
      log_line("store", text);
    } else
      ++suppressed_;
  }

private:
  clock::time_point window_{};
  int shown_ = 0;
  long suppressed_ = 0;
};

class store_server {
public:
  /// Serves on `host:port`; a temporary DNS failure resolving `host` is
  /// retried until `resolve_deadline` (default: not retried). With a
  /// `peer_timeout`, a connection fails once its peer's host has acknowledged
  /// nothing for that long (set_keepalive), so a rank cut off by the network is
  /// recorded lost, with that reason, like one that exited (0: off). Given here,
  /// before the loop starts, so that no connection is accepted without it.
  store_server(const std::string& host, int port, std::string token, clock::time_point resolve_deadline = {},
               std::chrono::milliseconds peer_timeout = {})
      : listener_(listen_tcp(host, port, resolve_deadline)), token_(std::move(token)),
        peer_timeout_ms_(std::max<std::int64_t>(0, peer_timeout.count())) {
    port_ = local_port(listener_.get());
    // Non-blocking, so the loop can accept a burst of connections at once.
    if (int fl = ::fcntl(listener_.get(), F_GETFL);
        fl < 0 || ::fcntl(listener_.get(), F_SETFL, fl | O_NONBLOCK) != 0)
      detail::throw_error(error_kind::backend,
                          {"fcntl(O_NONBLOCK) on the store's listener failed: ", errno_text(errno)});
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
      detail::throw_error(error_kind::backend, {"pipe2 failed: ", errno_text(errno)});
    wake_r_.reset(p[0]);
    wake_w_.reset(p[1]);
    thread_ = std::thread([this] { loop(); });
  }
  store_server(const store_server&) = delete;
  store_server& operator=(const store_server&) = delete;
  ~store_server() {
    linger_until_ = clock::now() + std::chrono::milliseconds(linger_ms_.load());
    arrivals_until_ = clock::now() + std::chrono::milliseconds(arrivals_ms_.load());
    stop_ = true;
    char c = 1;
    [[maybe_unused]] auto r = ::write(wake_w_.get(), &c, 1);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

  /// Serves an already connected socket (a socketpair end, one accepted
  /// elsewhere) exactly like an accepted connection: it must authenticate.
  void adopt(unique_fd fd) {
    {
      std::lock_guard lock(adopt_mu_);
      adopted_.push_back(std::move(fd));
    }
    char c = 1;
    [[maybe_unused]] auto r = ::write(wake_w_.get(), &c, 1);
  }

  /// How long teardown may wait for the other ranks to disconnect (0: not at all).
  void set_linger(std::chrono::milliseconds d) { linger_ms_ = std::max<std::int64_t>(0, d.count()); }

  /// Teardown also serves, for up to `d`, until ranks 0..`ranks`-1 have all
  /// connected once: a rank starting after the job already failed in its
  /// rendezvous then reads who was lost at once, where it would have found
  /// no store and waited its timeout to say so.
  void serve_late_arrivals(int ranks, std::chrono::milliseconds d) {
    arrivals_expected_ = ranks;
    arrivals_ms_ = std::max<std::int64_t>(0, d.count());
  }

private:
  struct connection : std::enable_shared_from_this<connection> {
    unique_fd fd;
    std::string peer;
    std::string in;
    bool authed = false;
    bool said_bye = false;
    int rank = -1;
    int owner = -1;    ///< the rank whose process holds this rank-less connection (store_op::owner)
    std::string scope; ///< key prefix of this connection's rank (store_op::scope)
    clock::time_point accepted;
    clock::time_point hello_deadline;
    // The handshake (auth.hpp): after the hello, the nonces its proofs cover.
    bool challenged = false;
    auth_nonce client_nonce{}, server_nonce{};
    // A pending wait: replied to when all keys exist or the deadline passes.
    std::vector<std::string> wait_keys;
    clock::time_point wait_deadline;
    bool waiting = false;
    std::size_t wait_missing = 0; ///< keys of the pending wait still absent (a repeated key counts twice)
    std::uint64_t wait_seq = 0;   ///< tells the pending wait from earlier ones in waiters_
    // Replies not sent yet: those to the frames of one read go out together
    // once the frames are handled (replies_held), and what the socket does
    // not take at once is sent as the client reads (POLLOUT).
    std::vector<char> out;
    std::size_t out_sent = 0;
    bool replies_held = false;
    bool peer_gone = false;      ///< a send failed, or it hung up: replies are dropped, not queued
    int send_error = 0;          ///< errno of the failed send (it, not the read after, may say ETIMEDOUT)
    clock::time_point out_moved; ///< when replies last went out, or began to wait
    int kernel_queued = 0;       ///< bytes in its socket's send queue at the last look (SIOCOUTQ)
  };

  /// A wait registered under one of its missing keys (see waiters_).
  struct waiter {
    std::weak_ptr<connection> conn;
    std::uint64_t seq = 0;
  };

  void loop() {
    std::vector<pollfd> fds;
    while (!stop_ || (others_connected() && clock::now() < linger_until_) ||
           (arrivals_missing() && clock::now() < arrivals_until_)) {
      // Requests read earlier but left while their connection's replies
      // backed up, which may have gone out since (by POLLOUT, or all at once):
      // one part each, then the others' turn. A connection still ready after
      // its part keeps the poll from sleeping, or a reader's replies would go
      // out one part per poll timeout
      // (docs/design-notes.md, "Note [store reply queue]").
      bool work_left = false;
      for (std::size_t i = 0; i < conns_.size(); ++i)
        if (ready_to_handle(*conns_[i])) {
          handle_frames(*conns_[i], false);
          work_left = work_left || ready_to_handle(*conns_[i]);
        }
      fds.clear();
      fds.push_back({wake_r_.get(), POLLIN, 0});
      // Negative: poll() skips the listener while accepting is backed off.
      fds.push_back({clock::now() < listen_paused_until_ ? -1 : listener_.get(), POLLIN, 0});
      for (auto& c : conns_) {
        // A connection whose replies back up is not read until it takes them
        // (one whose sends failed is, to see it leave).
        short events = backed_up(*c) && !c->peer_gone ? 0 : POLLIN;
        if (replies_pending(*c)) events |= POLLOUT;
        fds.push_back({c->fd.get(), events, 0});
      }
      int rc = ::poll(fds.data(), fds.size(), work_left ? 0 : poll_timeout_ms(clock::now()));
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN)
        take_adopted(); // also drains the wake-up bytes (a lingering loop would spin)
      if (fds[1].revents & POLLIN) accept_ready(clock::now());
      for (std::size_t i = 2; i < fds.size(); ++i) {
        auto& c = *conns_[i - 2];
        // Reading first: a client that left is seen leaving (its goodbye, or
        // why its host went), not only as a failed send.
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
        if (fds[i].revents & POLLOUT) send_replies(c);
      }
      expire(clock::now());
      std::erase_if(conns_, [](const auto& c) { return !c->fd; });
    }
  }

  /// At most 100 ms (handshake deadlines, linger, stop), and no later than the
  /// earliest pending wait's deadline: a short wait (the failure paths' 1 s
  /// grace, a try_wait of a few ms) times out when asked, not up to 100 ms late.
  int poll_timeout_ms(clock::time_point now) const {
    auto t = std::chrono::milliseconds(100);
    for (auto& c : conns_)
      if (c->waiting && c->fd)
        t = std::min(t, std::chrono::ceil<std::chrono::milliseconds>(c->wait_deadline - now));
    return static_cast<int>(std::max<std::int64_t>(0, t.count()));
  }

  std::size_t pending_handshakes() const {
    return static_cast<std::size_t>(
        std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->fd && !c->authed; }));
  }

  /// Accepts what is queued (a burst at most, then the loop serves the rest).
  void accept_ready(clock::time_point now) {
    rlimit lim{};
    long soft = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                    ? static_cast<long>(std::min<rlim_t>(lim.rlim_cur, 1L << 30))
                    : 1L << 30;
    const long crowded_fd = soft - store_fd_reserve(soft);
    std::size_t pending = pending_handshakes();
    for (int burst = 0; burst < 256; ++burst) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        int e = errno;
        if (e == EINTR || e == ECONNABORTED) continue;
        if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
          // Out of descriptors: free one a pending handshake holds and try
          // again, or leave the listener alone for a while.
          if (shed_pending(now, std::chrono::milliseconds(0))) {
            --pending;
            continue;
          }
          pause_accepting(now, detail::message({"accept failed (", errno_text(e),
                                                ") and no pending handshake to close"}));
        }
        return; // EAGAIN: nothing more queued
      }
      add_connection(unique_fd(fd), now);
      ++pending;
      if (pending > store_max_pending_handshakes || fd >= crowded_fd) {
        // Crowded: close the oldest pending handshake (not this newest one).
        if (shed_pending(now, store_shed_min_age)) {
          --pending;
        } else {
          pause_accepting(now,
                          pending > store_max_pending_handshakes
                              ? detail::message({pending, " connections are in their handshake"})
                              : detail::message({"descriptors nearly spent (RLIMIT_NOFILE ", soft, ")"}));
          return;
        }
      }
    }
  }

  void add_connection(unique_fd fd, clock::time_point now) {
    set_nodelay(fd.get());
    if (peer_timeout_ms_ > 0) set_keepalive(fd.get(), std::chrono::milliseconds(peer_timeout_ms_));
    auto c = std::make_shared<connection>();
    c->peer = peer_name(fd.get());
    c->fd = std::move(fd);
    c->accepted = now;
    c->hello_deadline = now + store_handshake_timeout;
    conns_.push_back(std::move(c));
  }

  void take_adopted() {
    char buf[256];
    while (::read(wake_r_.get(), buf, sizeof buf) > 0) {}
    std::vector<unique_fd> fds;
    {
      std::lock_guard lock(adopt_mu_);
      fds.swap(adopted_);
    }
    for (auto& fd : fds)
      add_connection(std::move(fd), clock::now());
  }

  /// Closes the pending handshake to shed: at least `min_age` old, silent
  /// ones (nothing received yet) first, then the oldest. False when none.
  bool shed_pending(clock::time_point now, std::chrono::milliseconds min_age) {
    connection* victim = nullptr;
    for (auto& c : conns_) {
      if (!c->fd || c->authed || now - c->accepted < min_age) continue;
      bool silent = !c->challenged && c->in.empty();
      bool victim_silent = victim && !victim->challenged && victim->in.empty();
      if (!victim || (silent && !victim_silent) ||
          (silent == victim_silent && c->accepted < victim->accepted))
        victim = c.get();
    }
    if (!victim) return false;
    drop_pending(*victim, "closed to make room (too many connections in their handshake, or descriptors "
                          "nearly spent)");
    return true;
  }

  void pause_accepting(clock::time_point now, const std::string& why) {
    listen_paused_until_ = now + store_accept_backoff;
    auth_log_.line(detail::message({"not accepting connections for ", store_accept_backoff.count(), " ms: ",
                                    why, ". If ranks are many, raise the open-files limit (ulimit -n)."}),
                   now);
  }

  /// Closes a connection that has not authenticated, through the log throttle.
  void drop_pending(connection& c, const std::string& why) {
    auth_log_.line(detail::message({"closing connection from ", c.peer, " during the handshake: ", why}),
                   clock::now());
    c.fd.reset();
  }

  /// Why an authenticated rank is about to be recorded lost other than by
  /// exiting (store_unreachable_prefix): said before the loss is recorded, so
  /// that whoever reads the loss reads why.
  void say_why_lost(connection& c, const std::string& why) {
    if (!c.authed || c.said_bye || c.rank < 0) return;
    if (auto [at, fresh] =
            data_.try_emplace(c.scope + std::string(store_unreachable_prefix) + std::to_string(c.rank), why);
        fresh)
      key_added(at->first);
  }

  void drop(connection& c, const std::string& why) {
    if (!why.empty()) log_line("store", detail::message({"closing connection from ", c.peer, ": ", why}));
    if (c.authed && !c.said_bye && c.rank >= 0) record_lost(c.scope, c.rank);
    c.fd.reset();
  }

  void record_lost(const std::string& scope, int rank) {
    auto& lost = lost_[scope];
    if (std::find(lost.begin(), lost.end(), rank) != lost.end()) return; // failed, then dropped
    lost.push_back(rank);
    const std::string key = scope + store_lost_key;
    auto [it, fresh] = data_.try_emplace(key);
    if (!fresh) it->second += ",";
    it->second += std::to_string(rank);
    if (fresh) key_added(key);
    for (auto& c : conns_) // every other wait of that scope is answered "lost" now
      if (c->scope == scope) try_finish_wait(*c);
  }

  /// serve_late_arrivals: some rank of 0..ranks-1 has not connected yet
  /// (a rank of a larger world, started by mistake, does not count).
  bool arrivals_missing() const {
    const int expected = arrivals_expected_.load();
    return std::distance(arrived_.begin(), arrived_.lower_bound(expected)) < expected;
  }

  /// True while a rank other than a goodbye-sayer still holds a connection,
  /// unless survivors found that rank stopped.
  bool others_connected() const {
    return std::any_of(conns_.begin(), conns_.end(), [this](const auto& c) {
      return c->fd && c->authed && !c->said_bye && !found_stalled(*c);
    });
  }

  /// A survivor's desync report named this connection's rank silent, and it
  /// has published no progress since (a slow rank that reports late is waited
  /// for again).
  bool found_stalled(const connection& c) const {
    const int r = c.rank >= 0 ? c.rank : c.owner;
    if (r < 0) return false;
    const std::string who = std::to_string(r);
    return data_.count(c.scope + std::string(store_stalled_prefix) + who) &&
           !data_.count(c.scope + std::string(store_progress_prefix) + who);
  }

  /// Waits on the lost key or on diagnostics are how survivors learn about a
  /// failure: a lost rank must not cut them short.
  static bool waits_through_loss(const std::vector<std::string>& keys, const std::string& scope) {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) {
      std::string_view v = k;
      if (!v.starts_with(scope)) return false;
      v.remove_prefix(scope.size());
      return v == store_lost_key || v.starts_with(store_fault_prefix);
    });
  }

  void read_from(connection& c) {
    if (!c.fd) return; // shed this round
    char buf[65536];
    bool eof = false, unreachable = false;
    for (;;) {
      ssize_t k = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (k > 0) {
        c.in.append(buf, static_cast<std::size_t>(k));
        if (!c.authed && c.in.size() > 2 * (4 + std::size_t{store_max_handshake_frame}))
          break; // enough to judge
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      unreachable = k < 0 && errno_is_unreachable(errno);
      eof = true; // closed or reset: still handle what arrived first (a goodbye, say)
      break;
    }
    const bool replies_waited = replies_pending(c) || c.peer_gone;
    unreachable = unreachable || (eof && errno_is_unreachable(c.send_error));
    handle_frames(c, eof);
    if (eof && c.fd && !c.authed && c.challenged)
      // A rank whose token differs says so before it hangs up (handshake()); one
      // that hangs up without a word gave up for another reason.
      auth_log_.line(detail::message(
                         {"connection from ", c.peer, " (claiming rank ", c.rank,
                          ") closed after the challenge without its proof: it gave up waiting for the store "
                          "(a loaded machine), ran out of file descriptors, or is a ddp too old to say why"}),
                     clock::now());
    if (eof && c.fd && unreachable)
      // Its host stopped acknowledging (set_keepalive): a cut link or a host down, not
      // an exit. With replies waiting, the kernel ends a connection whose reader takes
      // nothing (a zero window) after the same time: the process may be stopped.
      say_why_lost(
          c, detail::message(
                 {(replies_waited
                       ? "is unreachable or stopped: it took none of the store's replies for "
                       : "is unreachable: its host acknowledged nothing on its connection to the store for "),
                  peer_timeout_ms_, " ms (", (replies_waited ? "process stopped, " : ""),
                  "network cut or host down)"}));
    if (eof && c.fd) drop(c, "");
  }

  /// Handles the whole frames read from `c`, in order, and sends their
  /// replies together (a client's pipelined requests: tcp_store::multi_get);
  /// stops early, leaving the rest for later rounds of the loop, while the
  /// replies back up (store_reply_backlog). `client_left`: it closed its end;
  /// every frame is handled (its goodbye may be the last) and the replies go
  /// nowhere.
  void handle_frames(connection& c, bool client_left) {
    if (client_left) {
      c.peer_gone = true; // its replies would go nowhere: not even built up in memory
      c.out.clear();
      c.out_sent = 0;
    }
    std::size_t handled = 0;
    c.replies_held = true;
    while (c.fd && c.in.size() - handled >= 4 && (client_left || !backed_up(c))) {
      std::uint32_t n;
      std::memcpy(&n, c.in.data() + handled, 4);
      if (n == 0 || n > store_max_frame || (!c.authed && n > store_max_handshake_frame)) {
        std::string why = detail::message({"oversized or empty frame (", n, " bytes)"});
        if (c.authed)
          drop(c, why);
        else
          drop_pending(c, why);
        break;
      }
      if (c.in.size() - handled < 4 + std::size_t{n}) break;
      std::string body = c.in.substr(handled + 4, n);
      handled += 4 + std::size_t{n};
      handle(c, body);
    }
    c.replies_held = false;
    c.in.erase(0, handled); // once, not per frame: a read may hold a thousand
    if (c.in.empty() && c.in.capacity() > store_reply_backlog) std::string().swap(c.in);
    if (!client_left) send_replies(c);
  }

  /// Whether `c` holds a whole frame not handled yet.
  static bool frame_ready(const connection& c) {
    if (c.in.size() < 4) return false;
    std::uint32_t n;
    std::memcpy(&n, c.in.data(), 4);
    return n == 0 || n > store_max_frame || c.in.size() >= 4 + std::size_t{n}; // a bad one is handled too
  }

  /// Whether `c`'s unsent replies are enough that its requests wait.
  static bool backed_up(const connection& c) { return c.out.size() - c.out_sent >= store_reply_backlog; }

  static bool replies_pending(const connection& c) { return c.out_sent < c.out.size(); }

  /// Whether `c` has a request to handle now.
  static bool ready_to_handle(const connection& c) { return c.fd && !backed_up(c) && frame_ready(c); }

  void reply(connection& c, const std::vector<char>& frame) {
    if (!c.fd || c.peer_gone) return;
    if (!replies_pending(c)) c.out_moved = clock::now(); // the stall clock starts now
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    if (!c.replies_held) send_replies(c);
  }

  /// Sends what the socket takes now of `c`'s replies, without waiting.
  void send_replies(connection& c) {
    while (c.fd && replies_pending(c)) {
      const ssize_t k = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) {
        c.out_sent += static_cast<std::size_t>(k);
        c.out_moved = clock::now();
        if (c.out_sent >= store_reply_backlog && c.out_sent * 2 >= c.out.size()) { // drop what went out
          c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_sent));
          c.out_sent = 0;
        }
      } else if (k < 0 && errno == EINTR) {
        continue;
      } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return; // the rest when the client reads (POLLOUT)
      } else {
        // Reset, or timed out (TCP_USER_TIMEOUT): the read side says how it
        // went, and handles what the client sent last (a goodbye), at the
        // loop's next look (POLLHUP/POLLERR).
        c.peer_gone = true;
        c.send_error = errno;
        c.out.clear();
        c.out_sent = 0;
        return;
      }
    }
    c.out_sent = 0;
    c.out.clear();
    if (c.out.capacity() > store_reply_backlog) std::vector<char>().swap(c.out);
  }

  void handle(connection& c, const std::string& body) {
    auto op = static_cast<store_op>(static_cast<std::uint8_t>(body[0]));
    frame_reader r(std::string_view(body).substr(1));
    if (!c.authed) return handshake(c, op, r);
    switch (op) {
    case store_op::set: {
      std::string key = r.bytes(), value = r.bytes();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed set");
      // A rank announcing its own failure counts as lost from now on (it will
      // say goodbye later, but its peers must not wait for it).
      bool failed = c.rank >= 0 && key == c.scope + std::string(store_failed_prefix) + std::to_string(c.rank);
      bool fresh = data_.insert_or_assign(key, std::move(value)).second;
      reply(c, frame_writer(store_status::ok).finish());
      if (fresh) key_added(key);
      if (failed) record_lost(c.scope, c.rank);
      return;
    }
    case store_op::get: {
      std::string key = r.bytes();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed get");
      auto it = data_.find(key);
      if (it == data_.end()) return reply(c, frame_writer(store_status::missing).finish());
      return reply(c, frame_writer(store_status::ok).bytes(it->second).finish());
    }
    case store_op::add: {
      std::string key = r.bytes();
      std::int64_t delta = r.i64();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed add");
      auto [it, fresh] = data_.try_emplace(key);
      auto& v = it->second;
      // Wraps around at 2^63 like a machine counter (as PyTorch's TCPStore does in
      // practice); computed unsigned, since signed overflow is undefined (found by tests/fuzz).
      std::int64_t now =
          static_cast<std::int64_t>(static_cast<std::uint64_t>(v.empty() ? 0 : parse_int(v).value_or(0)) +
                                    static_cast<std::uint64_t>(delta));
      v = std::to_string(now);
      reply(c, frame_writer(store_status::ok).i64(now).finish());
      if (fresh) key_added(key);
      return;
    }
    case store_op::compare_set: {
      std::string key = r.bytes(), expected = r.bytes(), desired = r.bytes();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed compare_set");
      auto it = data_.find(key);
      const bool fresh = it == data_.end() && expected.empty();
      if (fresh)
        it = data_.emplace(key, std::move(desired)).first;
      else if (it != data_.end() && it->second == expected)
        it->second = std::move(desired);
      if (it == data_.end()) return reply(c, frame_writer(store_status::missing).finish());
      reply(c, frame_writer(store_status::ok).bytes(it->second).finish());
      if (fresh) key_added(key);
      return;
    }
    case store_op::wait:
    case store_op::check: {
      std::uint32_t count = r.u32();
      if (!r.ok() || count > store_max_keys_per_frame) return drop(c, "malformed key list");
      std::vector<std::string> keys;
      for (std::uint32_t i = 0; i < count && r.ok(); ++i)
        keys.push_back(r.bytes());
      std::uint64_t timeout_ms = op == store_op::wait ? r.u64() : 0;
      if (!r.ok() || !r.at_end()) return drop(c, "malformed key list");
      if (op == store_op::check)
        return reply(c, frame_writer(store_status::ok).u8(all_present(keys) ? 1 : 0).finish());
      c.wait_keys = std::move(keys);
      c.wait_deadline =
          clock::now() + std::chrono::milliseconds(std::min<std::uint64_t>(timeout_ms, 1ull << 40));
      c.waiting = true;
      return begin_wait(c);
    }
    case store_op::scope: {
      std::string scope = r.bytes();
      if (!r.ok() || !r.at_end() || scope.size() > 256) return drop(c, "malformed scope");
      c.scope = std::move(scope);
      return reply(c, frame_writer(store_status::ok).finish());
    }
    case store_op::owner: {
      std::int32_t owner = r.i32();
      if (!r.ok() || !r.at_end() || c.rank >= 0 || owner < 0) return drop(c, "malformed owner");
      c.owner = owner;
      return reply(c, frame_writer(store_status::ok).finish());
    }
    case store_op::bye: c.said_bye = true; return;
    default:
      // A whole frame was read, so the connection is still in step: a client of a newer ddp
      // says which request this store lacks, instead of losing its rank.
      log_line("store", detail::message({"unknown request ", static_cast<int>(op), " from ", c.peer,
                                         ": a ddp program of another version than this store's"}));
      return reply(c, frame_writer(store_status::unknown_request).finish());
    }
  }

  /// The server's side of auth.hpp's exchange: hello -> challenge, proof -> verdict.
  void handshake(connection& c, store_op op, frame_reader& r) {
    try {
      if (!c.challenged) {
        if (op != store_op::hello) return drop_pending(c, "the first message is not a hello");
        std::int32_t rank = r.i32();
        std::string nonce = r.bytes();
        if (!r.ok() || !r.at_end() || !to_nonce(nonce, c.client_nonce))
          return drop_pending(c, "malformed hello (a ddp rank of another version, or not a ddp rank)");
        c.rank = rank;
        c.server_nonce = auth_random_nonce();
        c.challenged = true;
        auto proof = auth_proof(token_, auth_role::server, c.client_nonce, c.server_nonce, rank);
        return reply(
            c, frame_writer(store_status::ok).bytes(as_view(c.server_nonce)).bytes(as_view(proof)).finish());
      }
      if (op == store_op::bye) { // the client found the store's proof wrong (handshake.hpp)
        auth_log_.line(
            detail::message({"refused a connection from ", c.peer, " (claiming rank ", c.rank,
                             "): it found the store's proof wrong, so its job token differs (a process of "
                             "another job, or DDP_TOKEN differs between ranks)"}),
            clock::now());
        note_refusal(c);
        c.fd.reset();
        return;
      }
      if (op != store_op::proof) return drop_pending(c, "expected the handshake's proof");
      std::string proof = r.bytes();
      if (!r.ok() || !r.at_end()) return drop_pending(c, "malformed proof");
      if (!auth_proof_matches(auth_proof(token_, auth_role::client, c.client_nonce, c.server_nonce, c.rank),
                              proof)) {
        auth_log_.line(
            detail::message({"refused a connection from ", c.peer, " (claiming rank ", c.rank,
                             "): it could not prove it knows the job token (a process of another job, or "
                             "DDP_TOKEN differs between ranks)"}),
            clock::now());
        note_refusal(c);
        reply(c, frame_writer(store_status::refused).finish());
        c.replies_held = false;
        send_replies(c); // before the connection closes (a fresh socket takes a few bytes)
        c.fd.reset();
        return;
      }
      c.authed = true;
      if (c.rank >= 0) {
        arrived_.insert(c.rank);
        refused_.erase(c.rank); // the real one came: the refused claim was another process's
      }
      reply(c, frame_writer(store_status::ok).finish());
    } catch (const error& e) { // OpenSSL failed: this connection cannot be served
      drop_pending(c, e.what());
    }
  }

  bool all_present(const std::vector<std::string>& keys) const {
    for (auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  }

  /// Registers a new wait under each key it still misses, then answers it if
  /// it can be answered now. Waits are indexed by key so that a set wakes only
  /// the waits on that key: rechecking every wait on every set cost O(N) waits
  /// x O(N) keys per set at N ranks waiting for ddp/arrived/0..N-1
  /// (docs/performance.md, Rendezvous and the Gloo mesh).
  void begin_wait(connection& c) {
    ++c.wait_seq;
    c.wait_missing = 0;
    for (auto& k : c.wait_keys) {
      if (data_.count(k)) continue;
      ++c.wait_missing;
      auto& list = waiters_[k];
      // Waits that ended (timed out, answered "lost", connection gone) leave
      // entries under keys that may never come: prune them now and then.
      if (list.size() >= 64 && (list.size() & (list.size() - 1)) == 0)
        std::erase_if(list, [](const waiter& w) {
          auto p = w.conn.lock();
          return !p || !p->fd || !p->waiting || p->wait_seq != w.seq;
        });
      list.push_back({c.weak_from_this(), c.wait_seq});
    }
    try_finish_wait(c);
  }

  /// `key` has just come into existence: count it off the waits that miss it.
  void key_added(const std::string& key) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) return;
    auto list = std::move(it->second);
    waiters_.erase(it);
    for (auto& w : list) {
      auto c = w.conn.lock();
      if (!c || !c->fd || !c->waiting || c->wait_seq != w.seq) continue; // that wait is over
      if (c->wait_missing > 0) --c->wait_missing;
      try_finish_wait(*c);
    }
  }

  void try_finish_wait(connection& c) {
    if (!c.waiting || !c.fd) return;
    if (c.wait_missing == 0) {
      c.waiting = false;
      reply(c, frame_writer(store_status::ok).finish());
    } else if (auto it = lost_.find(c.scope);
               it != lost_.end() && !it->second.empty() && !waits_through_loss(c.wait_keys, c.scope)) {
      c.waiting = false;
      reply(c, frame_writer(store_status::lost).i32(it->second.front()).finish());
    }
  }

  /// `c` claimed a rank with a wrong token: that rank is recorded lost unless it joins soon.
  void note_refusal(const connection& c) {
    if (c.rank >= 0 && !arrived_.count(c.rank))
      refused_.try_emplace(c.rank, refusal{clock::now() + store_refusal_grace, c.peer});
  }

  /// Records lost, in the scope of every rank connected, each rank refused for a wrong token that
  /// has not joined within store_refusal_grace, with why (store_unreachable_prefix).
  void expire_refusals(clock::time_point now) {
    for (auto it = refused_.begin(); it != refused_.end();) {
      if (now < it->second.due) {
        ++it;
        continue;
      }
      const int rank = it->first;
      const std::string why =
          detail::message({"was refused by the rendezvous store: its connection (from ", it->second.peer,
                           ") could not prove it knows the job token, and no process of rank ", rank,
                           " with the right token came (set the same DDP_TOKEN on every rank, or let "
                           "the launcher set it)"});
      std::set<std::string> scopes; // the ranks' (a launcher's own waits are in no round)
      for (auto& c : conns_)
        if (c->fd && c->authed && c->rank >= 0) scopes.insert(c->scope);
      for (auto& scope : scopes) {
        if (auto [at, fresh] =
                data_.try_emplace(scope + std::string(store_unreachable_prefix) + std::to_string(rank), why);
            fresh)
          key_added(at->first);
        record_lost(scope, rank);
      }
      it = refused_.erase(it);
    }
  }

  void expire(clock::time_point now) {
    expire_refusals(now);
    for (auto& c : conns_) {
      if (c->fd && replies_pending(*c)) {
        // The client reading slowly frees the socket's queue a little at a
        // time, too little for POLLOUT (a third of the buffer): progress too.
        int queued = 0;
        if (::ioctl(c->fd.get(), SIOCOUTQ, &queued) == 0) {
          if (queued < c->kernel_queued) c->out_moved = now;
          c->kernel_queued = queued;
        }
      }
      if (c->fd && replies_pending(*c) && now - c->out_moved >= store_reply_stall) {
        say_why_lost(*c,
                     detail::message({"is stopped or unreachable: it took none of the store's replies for ",
                                      store_reply_stall.count(), " s (process stopped, or network cut)"}));
        drop(*c, detail::message({"client does not read its replies (", c->out.size() - c->out_sent,
                                  " bytes waited ", store_reply_stall.count(),
                                  " s): it is stopped, or its host is cut off"}));
      }
      if (!c->fd) continue;
      if (!c->authed && now > c->hello_deadline)
        drop_pending(*c, detail::message({"no handshake within ", store_handshake_timeout.count(), " s"}));
      else if (c->waiting && now >= c->wait_deadline) {
        c->waiting = false;
        reply(*c, frame_writer(store_status::timeout).finish());
      }
    }
  }

  unique_fd listener_;
  unique_fd wake_r_, wake_w_;
  std::string token_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> linger_ms_{0};
  const std::int64_t peer_timeout_ms_;
  clock::time_point linger_until_{};      // set before stop_, read by the loop after it
  std::atomic<int> arrivals_expected_{0}; // serve_late_arrivals
  std::atomic<std::int64_t> arrivals_ms_{0};
  clock::time_point arrivals_until_{}; // like linger_until_
  std::set<int> arrived_;              // ranks that authenticated once (the loop's own)
  struct refusal {
    clock::time_point due; ///< recorded lost from then on, unless the rank joins first
    std::string peer;
  };
  std::map<int, refusal> refused_;                         // ranks refused for a wrong token, not joined yet
  std::unordered_map<std::string, std::vector<int>> lost_; // per scope: ranks recorded lost, in order
  std::vector<std::shared_ptr<connection>> conns_;         // shared: waiters_ holds weak references
  clock::time_point listen_paused_until_{};
  log_throttle auth_log_;
  std::mutex adopt_mu_;
  std::vector<unique_fd> adopted_;
  std::unordered_map<std::string, std::string> data_;
  /// Pending waits by a key they miss (each wait appears under every such key).
  std::unordered_map<std::string, std::vector<waiter>> waiters_;
  std::thread thread_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_SERVER_HPP
