// The rendezvous store's server, run by rank 0 on one background thread.
// One poll() loop serves every connection: a connection must first present the
// job token; a wrong token, a malformed or an oversized frame closes that
// connection only. A rank whose connection drops without saying goodbye is
// recorded under `store_lost_key`, so survivors can name the rank they lost,
// and every pending wait is answered at once with "lost, rank r": the keys a
// dead rank would have set never come, so nobody waits out the timeout.
//
// The server lives in rank 0's process, so when rank 0 leaves, the store goes
// and the survivors of a failure could no longer ask it who was lost (they used
// to blame rank 0 for it). So on teardown it lingers, still serving, until
// every other rank has disconnected or said goodbye, bounded by `set_linger()`:
// "store gone" then really means "rank 0 died". A rank 0 that failed itself
// sets no linger (it recorded its failure first; see process_group).
#ifndef DDP_DETAIL_STORE_SERVER_HPP
#define DDP_DETAIL_STORE_SERVER_HPP

#include <ddp/detail/common/log.hpp>
#include <ddp/detail/store/protocol.hpp>
#include <ddp/detail/store/socket.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class store_server {
public:
  store_server(const std::string& host, int port, std::string token)
      : listener_(listen_tcp(host, port)), token_(std::move(token)) {
    port_ = local_port(listener_.get());
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
      throw error(error_kind::backend, "pipe2 failed: " + errno_text(errno));
    wake_r_.reset(p[0]);
    wake_w_.reset(p[1]);
    thread_ = std::thread([this] { loop(); });
  }
  store_server(const store_server&) = delete;
  store_server& operator=(const store_server&) = delete;
  ~store_server() {
    linger_until_ = clock::now() + std::chrono::milliseconds(linger_ms_.load());
    stop_ = true;
    char c = 1;
    [[maybe_unused]] auto r = ::write(wake_w_.get(), &c, 1);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

  /// How long teardown may wait for the other ranks to disconnect (0: not at all).
  void set_linger(std::chrono::milliseconds d) { linger_ms_ = std::max<std::int64_t>(0, d.count()); }

private:
  struct connection {
    unique_fd fd;
    std::string peer;
    std::string in;
    bool authed = false;
    bool said_bye = false;
    int rank = -1;
    clock::time_point hello_deadline;
    // A pending wait: replied to when all keys exist or the deadline passes.
    std::vector<std::string> wait_keys;
    clock::time_point wait_deadline;
    bool waiting = false;
  };

  void loop() {
    std::vector<pollfd> fds;
    while (!stop_ || (others_connected() && clock::now() < linger_until_)) {
      fds.clear();
      fds.push_back({wake_r_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      for (auto& c : conns_)
        fds.push_back({c->fd.get(), POLLIN, 0});
      int rc = ::poll(fds.data(), fds.size(), 100);
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) { // drain the wake-up byte(s), or a lingering loop would spin
        char sink[64];
        while (::read(wake_r_.get(), sink, sizeof sink) > 0) {}
      }
      if (fds[1].revents & POLLIN) accept_one();
      for (std::size_t i = 2; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(*conns_[i - 2]);
      expire(clock::now());
      std::erase_if(conns_, [](const auto& c) { return !c->fd; });
    }
  }

  void accept_one() {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (conns_.size() >= 4096) {
      ::close(fd);
      return;
    }
    set_nodelay(fd);
    auto c = std::make_unique<connection>();
    c->fd.reset(fd);
    c->peer = peer_name(fd);
    c->hello_deadline = clock::now() + std::chrono::seconds(30);
    conns_.push_back(std::move(c));
  }

  void drop(connection& c, const std::string& why) {
    if (!why.empty()) log_line("store", "closing connection from " + c.peer + ": " + why);
    if (c.authed && !c.said_bye && c.rank >= 0) record_lost(c.rank);
    c.fd.reset();
  }

  void record_lost(int rank) {
    if (std::find(lost_.begin(), lost_.end(), rank) != lost_.end()) return; // failed, then dropped
    lost_.push_back(rank);
    auto& v = data_[store_lost_key];
    if (!v.empty()) v += ",";
    v += std::to_string(rank);
    wake_waiters();
  }

  /// True while a rank other than a goodbye-sayer still holds a connection.
  bool others_connected() const {
    return std::any_of(conns_.begin(), conns_.end(),
                       [](const auto& c) { return c->fd && c->authed && !c->said_bye; });
  }

  /// Waits on the lost key or on diagnostics are how survivors learn about a
  /// failure: a lost rank must not cut them short.
  static bool waits_through_loss(const std::vector<std::string>& keys) {
    return std::all_of(keys.begin(), keys.end(), [](const std::string& k) {
      return k == store_lost_key || std::string_view(k).starts_with(store_fault_prefix);
    });
  }

  void read_from(connection& c) {
    char buf[65536];
    bool eof = false;
    for (;;) {
      ssize_t k = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (k > 0) {
        c.in.append(buf, static_cast<std::size_t>(k));
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true; // closed or reset: still handle what arrived first (a goodbye, say)
      break;
    }
    while (c.fd && c.in.size() >= 4) {
      std::uint32_t n;
      std::memcpy(&n, c.in.data(), 4);
      if (n == 0 || n > store_max_frame || (!c.authed && n > 4096)) {
        drop(c, "oversized or empty frame (" + std::to_string(n) + " bytes)");
        return;
      }
      if (c.in.size() < 4 + std::size_t{n}) break;
      std::string body = c.in.substr(4, n);
      c.in.erase(0, 4 + std::size_t{n});
      handle(c, body);
    }
    if (eof && c.fd) drop(c, "");
  }

  void reply(connection& c, const std::vector<char>& frame) {
    if (send_all(c.fd.get(), frame.data(), frame.size(), clock::now() + std::chrono::seconds(10)) !=
        io_status::ok)
      drop(c, "client does not read its replies");
  }

  void handle(connection& c, const std::string& body) {
    auto op = static_cast<store_op>(static_cast<std::uint8_t>(body[0]));
    frame_reader r(std::string_view(body).substr(1));
    if (!c.authed) {
      if (op != store_op::hello) return drop(c, "first message is not a hello");
      std::string token = r.bytes();
      std::int32_t rank = r.i32();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed hello");
      if (!tokens_equal(token, token_)) {
        log_line("store",
                 "refused a connection from " + c.peer +
                     ": wrong job token (a process of another job, or DDP_TOKEN differs between ranks)");
        reply(c, frame_writer(store_status::refused).finish());
        c.fd.reset();
        return;
      }
      c.authed = true;
      c.rank = rank;
      return reply(c, frame_writer(store_status::ok).finish());
    }
    switch (op) {
    case store_op::set: {
      std::string key = r.bytes(), value = r.bytes();
      if (!r.ok() || !r.at_end()) return drop(c, "malformed set");
      // A rank announcing its own failure counts as lost from now on (it will
      // say goodbye later, but its peers must not wait for it).
      bool failed = c.rank >= 0 && key == std::string(store_failed_prefix) + std::to_string(c.rank);
      data_[key] = std::move(value);
      reply(c, frame_writer(store_status::ok).finish());
      if (failed) record_lost(c.rank);
      return wake_waiters();
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
      auto& v = data_[key];
      std::int64_t now = (v.empty() ? 0 : parse_int(v).value_or(0)) + delta;
      v = std::to_string(now);
      reply(c, frame_writer(store_status::ok).i64(now).finish());
      return wake_waiters();
    }
    case store_op::wait:
    case store_op::check: {
      std::uint32_t count = r.u32();
      if (!r.ok() || count > 65536) return drop(c, "malformed key list");
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
      return try_finish_wait(c);
    }
    case store_op::bye: c.said_bye = true; return;
    default: return drop(c, "unknown opcode " + std::to_string(static_cast<int>(op)));
    }
  }

  bool all_present(const std::vector<std::string>& keys) const {
    for (auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  }

  void try_finish_wait(connection& c) {
    if (!c.waiting || !c.fd) return;
    if (all_present(c.wait_keys)) {
      c.waiting = false;
      reply(c, frame_writer(store_status::ok).finish());
    } else if (!lost_.empty() && !waits_through_loss(c.wait_keys)) {
      c.waiting = false;
      reply(c, frame_writer(store_status::lost).i32(lost_.front()).finish());
    }
  }

  void wake_waiters() {
    for (auto& c : conns_)
      try_finish_wait(*c);
  }

  void expire(clock::time_point now) {
    for (auto& c : conns_) {
      if (!c->fd) continue;
      if (!c->authed && now > c->hello_deadline)
        drop(*c, "no hello within 30 s");
      else if (c->waiting && now > c->wait_deadline) {
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
  clock::time_point linger_until_{}; // set before stop_, read by the loop after it
  std::vector<int> lost_;            // ranks recorded lost, in order
  std::vector<std::unique_ptr<connection>> conns_;
  std::map<std::string, std::string> data_;
  std::thread thread_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_SERVER_HPP
