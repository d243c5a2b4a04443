#include "local_ports.hpp"

#include <cstdio>
#include <fstream>

namespace ddprun {
namespace {

/// Ports that net.ipv4.ip_local_port_range holds, with its bounds; 0 when unreadable.
long ephemeral_ports(long& low, long& high) {
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  if (!(f >> low >> high) || high < low) return 0;
  return high - low + 1;
}

/// Gloo (libgloo0) listens on a port of its own for each peer, and each connection keeps the
/// listener's port, so a pair of ranks holds at least one port on each node it touches: both
/// ends of a pair on this node take one at least, two where the dialing end binds too.
long ports_at_least(long local, long world) { return local * (local - 1) / 2 + local * (world - local); }
long ports_at_most(long local, long world) { return local * (world - 1); }

/// The most ranks per node that fit `range` ports with `nnodes` nodes, by the larger count.
long most_ranks_per_node(long range, long nnodes) {
  long n = 1;
  while (ports_at_most(n + 1, (n + 1) * nnodes) <= range)
    ++n;
  return n;
}

} // namespace

std::optional<int> check_local_ports(const job& j) {
  long low = 0, high = 0;
  const long range = ephemeral_ports(low, high);
  const long local = j.nproc, world = static_cast<long>(j.nnodes) * j.nproc;
  if (range == 0 || world < 2) return std::nullopt;
  const long least = ports_at_least(local, world), most = ports_at_most(local, world);
  if (most <= range) return std::nullopt;
  const long fit = most_ranks_per_node(range, j.nnodes);
  const char* what = least > range
                         ? "ddprun: node %d: a job of %ld ranks, %ld on this node, needs at least %ld "
                           "local TCP ports on this node for its Gloo connections (up to %ld), "
                           "but this node's ephemeral port range (net.ipv4.ip_local_port_range "
                           "%ld-%ld) holds %ld: "
                         : "ddprun: node %d: warning: a job of %ld ranks, %ld on this node, may "
                           "need more local TCP ports on this node for its Gloo connections "
                           "(%ld to %ld) than its ephemeral port range (net.ipv4.ip_local_port_range "
                           "%ld-%ld) holds (%ld): its connections may fail with \"Address already in "
                           "use\"; ";
  std::fprintf(stderr, what, j.node_rank, world, local, least, most, low, high, range);
  std::fprintf(stderr,
               "start at most %ld ranks per node, use more nodes, or widen the range (sysctl -w "
               "net.ipv4.ip_local_port_range=\"1024 65535\")\n",
               fit);
  if (least > range) return 2;
  return std::nullopt;
}

} // namespace ddprun
