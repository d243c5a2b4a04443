#include "local_address.hpp"

#include <ddp/detail/store/socket.hpp>

#include <ifaddrs.h>
#include <netinet/in.h>

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

} // namespace

bool names_this_machine(const std::string& host, std::chrono::milliseconds patience) {
  ddp::detail::addrinfo_list resolved;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  auto backoff = std::chrono::milliseconds(50);
  for (;;) {
    const int rc = ddp::detail::try_resolve(host, 0, false, resolved);
    if (rc == 0) break;
    if (!ddp::detail::resolve_failure_is_temporary(rc) ||
        std::chrono::steady_clock::now() + backoff > deadline)
      return false;
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

} // namespace ddprun
