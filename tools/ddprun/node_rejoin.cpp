#include "node_rejoin.hpp"

#include "agent_heartbeat.hpp"
#include "signals.hpp"

#include <ddp/detail/elastic/joiners.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

namespace ddprun {

static std::string node_rejoin_key(const std::string& what) { return "ddprun/r0/ipr/" + what; }

static bool node_rejoin_job_ended(ddp::tcp_store& s) {
  return ddp::detail::job_ended(s, "r0/join/") || s.check({node_rejoin_key("verdict")});
}

static int node_rejoin_after_end(const job& j) {
  std::fprintf(
      stderr,
      "ddprun: node %d: the job this agent would rejoin has ended (a rank finished its loop, or node "
      "0 decided the job's end): nothing to rejoin; starting no rank (ddprun exits with %d; "
      "--in-process-recovery, docs/elastic.md, A lost node rejoins)\n",
      j.node_rank, rejoin_after_end_exit_code);
  return rejoin_after_end_exit_code;
}

void record_joiners_admitted(job& j) {
  if (j.starts_joiners()) j.store->set(node_rejoin_key("joiners_admitted"), "1");
}

std::optional<int> check_node_rejoin(job& j) {
  ddp::tcp_store& s = *j.store;
  const int n = j.node_rank;
  if (node_rejoin_job_ended(s)) return node_rejoin_after_end(j);
  if (!j.starts_joiners() || !s.check({node_rejoin_key("joiners_admitted")})) {
    std::fprintf(stderr,
                 "ddprun: node %d: this job already had an agent for --node-rank %d; an agent started again "
                 "rejoins a running in-process-recovery job only when every agent, this one too, runs with "
                 "--max-restarts N >= 1 (the running ranks then admit joiners)%s. Start the job that way, or "
                 "restart it from its checkpoint (docs/elastic.md, A lost node rejoins)\n",
                 n, n, j.starts_joiners() ? ": node 0's agent did not" : ": this one does not");
    return 2;
  }
  const auto timeout = std::chrono::milliseconds(static_cast<long>(j.elastic.heartbeat_timeout * 1000));
  const auto seen = s.add(heartbeat_key(n), 0);
  std::fprintf(stderr,
               "ddprun: node %d: this job already had an agent for --node-rank %d: watching its heartbeat "
               "for %g s (--heartbeat-timeout) before rejoining in its place\n",
               n, n, j.elastic.heartbeat_timeout);
  for (const auto deadline = std::chrono::steady_clock::now() + timeout;
       std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (auto sig = take_user_signal()) { // no rank started yet: nothing to forward it to
      std::fprintf(
          stderr,
          "ddprun: node %d: got signal %d while watching the lost agent's heartbeat; starting no rank\n", n,
          *sig);
      return 128 + *sig;
    }
    if (s.add(heartbeat_key(n), 0) != seen) {
      std::fprintf(
          stderr,
          "ddprun: node %d: node %d's agent is alive (its heartbeat moved within %g s): --node-rank %d "
          "is taken, and an agent started again rejoins only in the place of a lost one; starting no "
          "rank\n",
          n, n, j.elastic.heartbeat_timeout, n);
      return 2;
    }
    if (node_rejoin_job_ended(s)) return node_rejoin_after_end(j);
  }
  if (s.add(node_rejoin_key("rejoin/" + std::to_string(n) + "/" + std::to_string(seen)), 1) > 1) {
    std::fprintf(stderr,
                 "ddprun: node %d: another agent started again for --node-rank %d is rejoining in the lost "
                 "agent's place already; starting no rank\n",
                 n, n);
    return 2;
  }
  const auto rejoins = s.add(node_rejoin_key("rejoins/" + std::to_string(n)), 1);
  if (rejoins > j.max_restarts) {
    std::fprintf(stderr,
                 "ddprun: node %d: the node has rejoined %lld time%s already, --max-restarts %d: starting no "
                 "rank; the others go on without it\n",
                 n, static_cast<long long>(rejoins - 1), rejoins == 2 ? "" : "s", j.max_restarts);
    return 2;
  }
  std::fprintf(stderr,
               "ddprun: node %d: node %d's agent is lost (its heartbeat stood still for %g s): rejoining the "
               "running job, its %d ranks started as joiners (rejoin %lld of --max-restarts %d; "
               "--in-process-recovery)\n",
               n, n, j.elastic.heartbeat_timeout, j.nproc, static_cast<long long>(rejoins), j.max_restarts);
  return std::nullopt;
}

} // namespace ddprun
