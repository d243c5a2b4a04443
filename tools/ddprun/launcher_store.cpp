#include "launcher_store.hpp"

#include "local_address.hpp"
#include "recovery_job.hpp"

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/open_files.hpp>
#include <ddp/detail/common/timeout.hpp>
#include <ddp/detail/store/server.hpp>

#include <iostream>

namespace ddprun {
namespace {

/// Before the store listens: the open-files limit must cover two connections per rank there,
/// and the ranks (which inherit it) raise their own.
void raise_open_files_limit(const job& j) {
  ddp::detail::open_files_need need;
  need.in_use = ddp::detail::open_files_in_use();
  const bool serves = j.is_elastic() ? j.elastic.store_host : j.node_rank == 0;
  // Elastic, or in-process recovery across nodes: every other agent has two connections
  // (requests, heartbeat); nnodes is MAX here.
  const int agents = j.is_elastic() || recovers_across_nodes(j) ? 2 : 0;
  need.store_server = serves ? ddp::detail::store_server_open_files(j.nnodes * (j.nproc + agents)) : 0;
  need.store_client = 2 + agents / 2;
  need.launcher = 2L * j.nproc + 2; // each rank's stdout and stderr, the signal pipe
  if (serves) need.spare += ddp::detail::store_fd_reserve_max; // or the server pauses accepting
  ddp::detail::ensure_open_files(need, "node " + std::to_string(j.node_rank),
                                 "a job of " + std::to_string(j.nnodes * j.nproc) + " ranks, " +
                                     std::to_string(j.nproc) + " on this node,");
}

/// On node 0, served here on MASTER_PORT (or DDP_STORE_PORT, which the ranks read too), so it
/// outlives every rank; port 0 binds a free one at once.
void open_store(job& j) {
  ddp::tcp_store_options so;
  so.host = j.master_addr;
  so.port = j.master_port;
  if (auto p = ddp::detail::env_int("DDP_STORE_PORT", 1, 65535)) so.port = static_cast<int>(*p);
  so.token = j.token;
  so.timeout = ddp::detail::default_timeout();
  so.serve = j.is_elastic() ? j.elastic.store_host : j.node_rank == 0;
  // An elastic agent may start before the store's host: it keeps dialing for the join timeout,
  // then asks on a connection whose every request is bounded by the heartbeat timeout, so a
  // host that stops answering is found out within it.
  if (j.is_elastic() && !so.serve)
    so.timeout = std::chrono::milliseconds(static_cast<long>(j.elastic.join_timeout * 1000));
  if (so.serve || j.max_restarts > 0 || j.is_elastic() || j.in_process_recovery)
    j.store = std::make_unique<ddp::tcp_store>(so);
  // Every later request is bounded by the heartbeat timeout: a silent host is found out within it.
  if ((j.is_elastic() || recovers_across_nodes(j)) && !so.serve)
    j.store = j.store->connect_again(
        std::chrono::milliseconds(static_cast<long>(j.elastic.heartbeat_timeout * 1000)));
  j.store_port = j.store ? j.store->port() : so.port;
  if (j.master_port == 0) j.master_port = j.store_port;
}

} // namespace

std::optional<int> start_store(job& j) {
  try {
    raise_open_files_limit(j);
    try {
      open_store(j);
    } catch (const std::exception& e) {
      // Two agents on the machine that carries --master-addr both took it for theirs: the one
      // that bound the port serves, the other joins it (as torchrun's c10d rendezvous does).
      if (!j.elastic.store_host_by_address ||
          !something_listens(j.master_addr, j.master_port, std::chrono::milliseconds(1000)))
        throw;
      std::cerr << "ddprun: not serving the store (" << e.what() << "): joining the agent that does\n";
      j.elastic.store_host = j.elastic.store_host_by_address = false;
      open_store(j);
    }
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    if (j.is_elastic() && !j.elastic.store_host)
      std::cerr
          << "ddprun: with --nnodes MIN:MAX the store is served by the agent started with --node-rank 0 on "
          << j.master_addr
          << " (or with no --node-rank, on the machine that carries that address): start it "
             "there, or give this one a longer --rdzv-join-timeout\n";
    return 2;
  }
  return std::nullopt;
}

} // namespace ddprun
