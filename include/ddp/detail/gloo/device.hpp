// Setting up Gloo's TCP transport: which local interface or address to use,
// and the process-wide SIGPIPE policy Gloo's sockets need.
#ifndef DDP_DETAIL_GLOO_DEVICE_HPP
#define DDP_DETAIL_GLOO_DEVICE_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/store/socket.hpp>

#include <gloo/transport/tcp/device.h>

#include <net/if.h>
#include <signal.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The local address that routes to `host`: what peers on other nodes can reach.
inline std::string local_address_towards(const std::string& host, int port) {
  addrinfo_list ai;
  resolve(host, port > 0 ? port : 1, false, ai);
  for (addrinfo* p = ai.head; p; p = p->ai_next) {
    unique_fd fd(::socket(p->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), p->ai_addr, p->ai_addrlen) != 0) continue; // UDP: sends nothing
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    char buf[NI_MAXHOST];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) ==
        0)
      return buf;
  }
  detail::throw_error(error_kind::config, {"no local address routes to MASTER_ADDR=", host,
                                           ": set GLOO_SOCKET_IFNAME to the interface to use"});
}

/// Where this process's Gloo endpoint listens.
struct gloo_endpoint {
  int rank = 0;
  int local_rank = 0;
  std::string master_addr; ///< empty: loopback
  int master_port = 0;
};

/// GLOO_SOCKET_IFNAME (a list spreads a node's ranks over the interfaces),
/// else the local address that routes to MASTER_ADDR, else loopback.
inline std::shared_ptr<::gloo::transport::Device> make_gloo_device(const gloo_endpoint& at) {
  ::gloo::transport::tcp::attr attr;
  if (auto names = getenv_str("GLOO_SOCKET_IFNAME"); names && !names->empty()) {
    std::vector<std::string> list;
    std::string_view s = *names;
    while (!s.empty()) {
      auto comma = s.find(',');
      auto name = std::string(s.substr(0, comma));
      if (!name.empty()) {
        if (::if_nametoindex(name.c_str()) == 0)
          detail::throw_error(error_kind::config,
                              {"GLOO_SOCKET_IFNAME='", *names, "' names interface '", name,
                               "', which this host does not have (see `ip link`)"},
                              at.rank);
        list.push_back(name);
      }
      if (comma == std::string_view::npos) break;
      s.remove_prefix(comma + 1);
    }
    if (list.empty())
      detail::throw_error(error_kind::config, {"GLOO_SOCKET_IFNAME='", *names, "' names no interface"});
    attr.iface = list[static_cast<std::size_t>(at.local_rank) % list.size()];
  } else if (!at.master_addr.empty()) {
    attr.hostname = local_address_towards(at.master_addr, at.master_port);
  } else {
    attr.hostname = "127.0.0.1";
  }
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    detail::throw_error(error_kind::config,
                        {"cannot create the Gloo TCP device (",
                         (attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface),
                         "): ", e.what()},
                        at.rank);
  }
}

/// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies mid-write
/// would kill this process with SIGPIPE instead of raising an error we can
/// report. Like Python (and so PyTorch) does at start-up, ignore SIGPIPE, but
/// only when nobody installed a handler of their own.
inline void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, nullptr);
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_DEVICE_HPP
