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

/// Gloo (libgloo0) binds a listening port of its own for each peer, and ddp's mesh
/// (detail/gloo/mesh.hpp) creates every pair before any rank dials, so at its peak a node
/// holds one port per pair end on it: local * (world - 1).
long ports_needed(long local, long world) { return local * (world - 1); }

/// The most ranks per node that fit `range` ports with `nnodes` nodes.
long most_ranks_per_node(long range, long nnodes) {
  long n = 1;
  while (ports_needed(n + 1, (n + 1) * nnodes) <= range)
    ++n;
  return n;
}

} // namespace

std::optional<int> check_local_ports(const job& j) {
  long low = 0, high = 0;
  const long range = ephemeral_ports(low, high);
  const long local = j.nproc, world = static_cast<long>(j.nnodes) * j.nproc;
  if (range == 0 || world < 2) return std::nullopt;
  const long needed = ports_needed(local, world);
  // Other programs take ports from the same range: past three quarters of it, a warning.
  if (needed * 4 <= range * 3) return std::nullopt;
  const bool refuse = needed > range;
  const long fit = most_ranks_per_node(range, j.nnodes);
  const char* what = refuse ? "ddprun: node %d: a job of %ld ranks, %ld on this node, needs %ld local TCP "
                              "ports on this node for its Gloo connections, but this node's ephemeral port "
                              "range (net.ipv4.ip_local_port_range %ld-%ld) holds %ld: "
                            : "ddprun: node %d: warning: a job of %ld ranks, %ld on this node, needs %ld "
                              "local TCP ports on this node for its Gloo connections, more than three "
                              "quarters of its ephemeral port range (net.ipv4.ip_local_port_range "
                              "%ld-%ld, %ld ports): with other programs' connections they may fail with "
                              "\"Address already in use\"; ";
  std::fprintf(stderr, what, j.node_rank, world, local, needed, low, high, range);
  std::fprintf(stderr,
               "start at most %ld ranks per node, use more nodes, or widen the range (sysctl -w "
               "net.ipv4.ip_local_port_range=\"1024 65535\")\n",
               fit);
  if (refuse) return 2;
  return std::nullopt;
}

} // namespace ddprun
