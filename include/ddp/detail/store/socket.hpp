// Minimal POSIX TCP helpers for the rendezvous store: RAII descriptors, bind
// to one address, connect with retry and backoff, and deadline-bounded I/O.
#ifndef DDP_DETAIL_STORE_SOCKET_HPP
#define DDP_DETAIL_STORE_SOCKET_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

using clock = std::chrono::steady_clock;

class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

inline std::string errno_text(int e) { return std::string(std::strerror(e)); }

inline std::string endpoint(const std::string& host, int port) {
  return detail::message(
      {(host.find(':') != std::string::npos ? detail::message({"[", host, "]"}) : host), ":", port});
}

struct addrinfo_list {
  addrinfo* head = nullptr;
  ~addrinfo_list() {
    if (head) ::freeaddrinfo(head);
  }
};

/// getaddrinfo: 0, or its EAI_ code.
inline int try_resolve(const std::string& host, int port, bool passive, addrinfo_list& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string service = std::to_string(port);
  if (out.head) {
    ::freeaddrinfo(out.head);
    out.head = nullptr;
  }
  return ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
}

/// Whether a getaddrinfo failure may pass when asked again. EAI_AGAIN is the
/// resolver's "temporary failure" (its DNS server timed out or answered
/// SERVFAIL, as one does while it restarts); EAI_NONAME and the others are
/// answers about the name itself, and asking again will not change them.
inline bool resolve_failure_is_temporary(int gai_code) { return gai_code == EAI_AGAIN; }

inline std::string resolve_failure_text(const std::string& host, int gai_code) {
  return detail::message({"cannot resolve address '", host, "': ", ::gai_strerror(gai_code)});
}

inline error resolve_error(const std::string& host, int gai_code) {
  return error(error_kind::config,
               resolve_failure_text(host, gai_code) + " (check MASTER_ADDR / --master-addr)");
}

/// Resolves once; a failure is a ddp::error (kind config).
inline void resolve(const std::string& host, int port, bool passive, addrinfo_list& out) {
  if (int rc = try_resolve(host, port, passive, out)) throw resolve_error(host, rc);
}

/// Resolves, asking again after a temporary failure with backoff (10 ms .. 1 s)
/// until `deadline`; a lasting failure is a ddp::error (kind config) at once.
inline void resolve(const std::string& host, int port, bool passive, addrinfo_list& out,
                    clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(10);
  for (bool first = true;; first = false) {
    int rc = try_resolve(host, port, passive, out);
    if (rc == 0) return;
    if (!resolve_failure_is_temporary(rc) || (first && clock::now() + backoff > deadline))
      throw resolve_error(host, rc);
    if (clock::now() + backoff > deadline)
      detail::throw_error(error_kind::timeout, {resolve_failure_text(host, rc),
                                                ", still at the timeout: check the DNS server, or give "
                                                "MASTER_ADDR as an IP address"});
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

inline int local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

inline std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  if (ss.ss_family == AF_UNIX) return "a local socket";
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return endpoint(host, std::atoi(serv));
}

/// The accept queue asked for. The kernel clamps it to net.core.somaxconn
/// (4096 by default since Linux 5.4), so this asks for what the host allows.
/// A queue of 1024 overflowed when 2048 ranks connected at once, each overflow
/// costing a rank a SYN retransmit (docs/performance.md, Rendezvous and the
/// Gloo mesh).
inline constexpr int store_listen_backlog = 65535;

/// Listens on `host:port` (that address only; port 0 picks a free one). A
/// temporary DNS failure is retried until `resolve_deadline` (default: no retry).
inline unique_fd listen_tcp(const std::string& host, int port, clock::time_point resolve_deadline = {}) {
  addrinfo_list ai;
  resolve(host, port, true, ai, resolve_deadline);
  int last = 0;
  for (addrinfo* p = ai.head; p; p = p->ai_next) {
    unique_fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
    if (!fd) {
      last = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), p->ai_addr, p->ai_addrlen) != 0) {
      last = errno;
      continue;
    }
    if (::listen(fd.get(), store_listen_backlog) != 0) {
      last = errno;
      continue;
    }
    return fd;
  }
  if (last == EADDRINUSE)
    detail::throw_error(error_kind::config,
                        {"cannot serve the rendezvous store on ", endpoint(host, port), ": port ", port,
                         " is already in use (another job still running? choose another "
                         "MASTER_PORT, or --master-port 0 with ddprun)"});
  detail::throw_error(error_kind::config,
                      {"cannot serve the rendezvous store on ", endpoint(host, port), ": ", errno_text(last),
                       " (MASTER_ADDR must be an address of rank 0's host)"});
}

inline void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Lets the kernel notice a peer *host* that stops answering (a cut link, a host
/// down): keepalive probes once the connection is idle for `within` / 4 (at least
/// 1 s, the option's unit), and the connection fails with ETIMEDOUT once nothing
/// was acknowledged for `within` (TCP_USER_TIMEOUT, which also bounds unacknowledged
/// data). A process that is stopped or busy still has its kernel answer, so only a
/// lost host or link trips it. Without it a cut link looked like stopped ranks, and
/// rank 0's store waited for their goodbyes until its linger ran out: ranks ended
/// 11-16 s after a veth went down with DDP_TIMEOUT=5s (tests/netns, link_down).
inline void set_keepalive(int fd, std::chrono::milliseconds within) {
  const auto ms = std::max<std::int64_t>(within.count(), 1000);
  int on = 1;
  int idle = static_cast<int>(std::clamp<std::int64_t>(ms / 4000, 1, 3600));
  int count = 3;
  unsigned user_timeout = static_cast<unsigned>(std::min<std::int64_t>(ms, 0x7fffffff));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

/// errno values that mean the peer's host or the path to it is gone (not the process).
inline bool errno_is_unreachable(int e) { return e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH; }

/// Connects to `host:port`, retrying with exponential backoff (10 ms .. 1 s)
/// until `deadline`: rank 0 may start its server after the others start, and
/// a DNS server may fail for a moment (EAI_AGAIN). A name that does not exist
/// is a ddp::error (kind config) at once.
inline unique_fd connect_tcp(const std::string& host, int port, clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(10);
  std::string last = "no attempt";
  for (;;) {
    addrinfo_list ai;
    int rc = try_resolve(host, port, false, ai);
    if (rc != 0 && !resolve_failure_is_temporary(rc)) throw resolve_error(host, rc);
    if (rc != 0) last = resolve_failure_text(host, rc);
    for (addrinfo* p = ai.head; p; p = p->ai_next) {
      unique_fd fd(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
      if (!fd) {
        last = errno_text(errno);
        continue;
      }
      if (::connect(fd.get(), p->ai_addr, p->ai_addrlen) == 0) {
        set_nodelay(fd.get());
        return fd;
      }
      last = errno_text(errno);
    }
    if (clock::now() + backoff > deadline)
      detail::throw_error(error_kind::timeout,
                          {"could not reach the rendezvous store at ", endpoint(host, port),
                           " before the timeout (last error: ", last,
                           "). Is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?"});
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

/// Waits until `fd` is readable (or writable) or the deadline passes.
inline bool wait_fd(int fd, short events, clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left < 0) left = 0;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true; // let the I/O call report the error
  }
}

/// Outcome of deadline-bounded I/O. `unreachable`: the kernel gave up on the peer's
/// host (ETIMEDOUT after set_keepalive's window, or no route), as opposed to `timeout`,
/// our own deadline with the peer's host still answering.
enum class io_status { ok, closed, timeout, failed, unreachable };

inline io_status send_all(int fd, const void* data, std::size_t n, clock::time_point deadline) {
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, deadline)) return io_status::timeout;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno_is_unreachable(errno)) return io_status::unreachable;
      return errno == EPIPE || errno == ECONNRESET ? io_status::closed : io_status::failed;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return io_status::ok;
}

inline io_status recv_all(int fd, void* data, std::size_t n, clock::time_point deadline) {
  auto p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) return io_status::timeout;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k == 0) return io_status::closed;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno_is_unreachable(errno)) return io_status::unreachable;
      return errno == ECONNRESET ? io_status::closed : io_status::failed;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return io_status::ok;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_SOCKET_HPP
