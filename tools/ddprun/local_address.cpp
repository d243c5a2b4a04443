#include "local_address.hpp"

#include <ddp/detail/store/socket.hpp>

#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

namespace ddprun {
namespace {

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

/// The same address, ports and scopes aside.
bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

/// This machine's host name, as gethostname reports it ("" if it cannot).
std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return {};
  return name.data();
}

} // namespace

bool names_this_machine(const std::string& host, std::chrono::milliseconds patience) {
  // torchrun's rule takes the machine's own name without asking the resolver.
  if (const auto mine = host_name(); !mine.empty() && host == mine) return true;
  ddp::detail::addrinfo_list resolved;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  auto backoff = std::chrono::milliseconds(50);
  for (bool said = false;; said = true) {
    const int rc = ddp::detail::try_resolve(host, 0, false, resolved);
    if (rc == 0) break;
    if (!ddp::detail::resolve_failure_is_temporary(rc) ||
        std::chrono::steady_clock::now() + backoff > deadline)
      return false;
    if (!said)
      std::fprintf(stderr,
                   "ddprun: %s does not resolve yet (%s): asking again for up to --rdzv-join-timeout "
                   "before deciding whether this machine serves the store\n",
                   host.c_str(), ::gai_strerror(rc));
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return false;
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> interfaces(raw, ::freeifaddrs);
  for (const addrinfo* r = resolved.head; r; r = r->ai_next) {
    if (is_loopback(r->ai_addr)) continue;
    for (const ifaddrs* i = interfaces.get(); i; i = i->ifa_next)
      if (i->ifa_addr && same_address(r->ai_addr, i->ifa_addr)) return true;
  }
  return false;
}

bool something_listens(const std::string& host, int port, std::chrono::milliseconds patience) {
  ddp::detail::addrinfo_list resolved;
  if (ddp::detail::try_resolve(host, port, false, resolved) != 0) return false;
  for (const addrinfo* r = resolved.head; r; r = r->ai_next) {
    ddp::detail::unique_fd fd(
        ::socket(r->ai_family, r->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, r->ai_protocol));
    if (!fd) continue;
    if (::connect(fd.get(), r->ai_addr, r->ai_addrlen) == 0) return true;
    if (errno != EINPROGRESS) continue;
    pollfd p{fd.get(), POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, static_cast<int>(patience.count())) == 1 &&
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      return true;
  }
  return false;
}

} // namespace ddprun
