#include "node_rejoin.hpp"

#include "agent_heartbeat.hpp"
#include "generations.hpp"
#include "joiner_slots.hpp"
#include "node_incarnation.hpp"
#include "recovery_job.hpp"
#include "signals.hpp"

#include <ddp/detail/common/timeout.hpp>
#include <ddp/detail/elastic/joiners.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

namespace ddprun {
namespace {

using clock = std::chrono::steady_clock;

std::string node_rejoin_key(const std::string& what) { return ipr_key(0, what); }

bool node_rejoin_job_ended(ddp::tcp_store& s) {
  // A store error throws: the rejoin's caller says so; it is never taken for the end.
  return s.check({joiners_prefix(0) + "ended"}) || s.check({node_rejoin_key("verdict")});
}

int node_rejoin_after_end(const job& j) {
  std::fprintf(
      stderr,
      "ddprun: node %d: the job this agent would rejoin has ended (a rank finished its loop, or node "
      "0 decided the job's end): nothing to rejoin; starting no rank (ddprun exits with %d; "
      "--in-process-recovery, docs/elastic.md, A lost node rejoins)\n",
      j.node_rank, rejoin_after_end_exit_code);
  return rejoin_after_end_exit_code;
}

int refuse(const job& j, const std::string& why) {
  std::fprintf(stderr,
               "ddprun: node %d: %s; starting no rank (ddprun exits with 2; docs/elastic.md, A lost node "
               "rejoins)\n",
               j.node_rank, why.c_str());
  return 2;
}

std::string lost_for_good(int n) {
  return "node 0 counted node " + std::to_string(n) +
         "'s agent lost for good at the job's end (its heartbeat stood still): the job ends without the "
         "node, and no agent may take its place";
}

/// The first job rank of node `n` that the latest generation holds, if any.
std::optional<int> member_of_node(ddp::tcp_store& s, const job& j, generations& g) {
  g.update(s, 0);
  for (int r : g.members())
    if (r / j.nproc == j.node_rank) return r;
  return std::nullopt;
}

} // namespace

void record_joiners_admitted(job& j) {
  if (j.starts_joiners()) j.store->set(node_rejoin_key("joiners_admitted"), "1");
}

std::optional<int> check_node_rejoin(job& j) {
  ddp::tcp_store& s = *j.store;
  const int n = j.node_rank;
  if (node_rejoin_job_ended(s)) return node_rejoin_after_end(j);
  if (!j.starts_joiners())
    return refuse(j, "this job already had an agent for --node-rank " + std::to_string(n) +
                         "; an agent started again rejoins a running in-process-recovery job only with "
                         "--max-restarts N >= 1, as every agent of the job (this one has none). Start it "
                         "that way, or restart the job from its checkpoint");
  if (!s.check({node_rejoin_key("joiners_admitted")}))
    return refuse(j, "this job already had an agent for --node-rank " + std::to_string(n) +
                         ", and node 0's agent has recorded no --max-restarts N >= 1 (it runs without, or "
                         "has not started): the running ranks admit no joiners. Restart the job from its "
                         "checkpoint, every agent with --max-restarts N >= 1");
  if (auto stop = user_stop_recorded(s, 0))
    return refuse(j, "the job is stopping: node " + std::to_string(stop->first) + "'s ddprun got signal " +
                         std::to_string(stop->second) + " from the user");
  const auto was = current_incarnation(s, n);
  if (was.lost) return refuse(j, lost_for_good(n));
  // The budget first: an agent refused for it must not take the gate, or it would lock the node out.
  if (const auto done = s.add(node_rejoin_key("rejoins/" + std::to_string(n)), 0); done >= j.max_restarts)
    return refuse(j, "the node has rejoined " + std::to_string(done) + " time" + (done == 1 ? "" : "s") +
                         " already, --max-restarts " + std::to_string(j.max_restarts) +
                         "; the others go on without it");

  const auto timeout = std::chrono::milliseconds(static_cast<long>(j.elastic.heartbeat_timeout * 1000));
  const auto seen = s.add(heartbeat_key(n), 0);
  std::fprintf(stderr,
               "ddprun: node %d: this job already had an agent for --node-rank %d: watching its heartbeat "
               "for %g s (--heartbeat-timeout) before rejoining in its place\n",
               n, n, j.elastic.heartbeat_timeout);
  // A stalled agent whose ranks still train is no lost node: its ranks must have left the job (the
  // survivors notice within their DDP_TIMEOUT and meet without them) before joiners take their slots.
  const auto members_leave_within = 2 * ddp::detail::default_timeout() + std::chrono::seconds(10);
  generations g(j.nnodes * j.nproc);
  std::optional<int> member;
  const auto since = clock::now();
  for (bool said = false;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (auto sig = take_user_signal()) { // no rank started yet: nothing to forward it to
      std::fprintf(
          stderr,
          "ddprun: node %d: got signal %d while watching the lost agent's heartbeat; starting no rank\n", n,
          *sig);
      return 128 + *sig;
    }
    if (s.add(heartbeat_key(n), 0) != seen)
      return refuse(j, "node " + std::to_string(n) + "'s agent is alive (its heartbeat moved): --node-rank " +
                           std::to_string(n) +
                           " is taken, and an agent started again rejoins only in the place of a lost one");
    if (node_rejoin_job_ended(s)) return node_rejoin_after_end(j);
    const auto waited = clock::now() - since;
    if (waited < timeout) continue;
    if (!(member = member_of_node(s, j, g))) break;
    if (waited > timeout + members_leave_within)
      return refuse(j, "rank " + std::to_string(*member) + " of node " + std::to_string(n) +
                           " is still a member of generation " + std::to_string(g.latest()) + " " +
                           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) +
                           " s on, though its agent's heartbeat stood still: the agent is stalled, its ranks "
                           "train on; stop them, or wait for the job to lose them, then start this again");
    if (!said)
      std::fprintf(stderr,
                   "ddprun: node %d: its agent's heartbeat stood still, but its rank %d is still a member of "
                   "generation %d: waiting up to 2 x DDP_TIMEOUT + 10 s for the job to lose it\n",
                   n, *member, g.latest());
    said = true;
  }
  if (!claim_incarnation(s, n, was.number))
    return refuse(j, counted_lost(s, n, was.number)
                         ? lost_for_good(n)
                         : "another agent started again for --node-rank " + std::to_string(n) +
                               " took the lost agent's place first");
  // At once: node 0 and later agents see a live incarnation, whatever happens next.
  j.incarnation = was.number + 1;
  s.add(heartbeat_key(n), 1);
  const auto rejoins = s.add(node_rejoin_key("rejoins/" + std::to_string(n)), 1);
  std::fprintf(
      stderr,
      "ddprun: node %d: node %d's agent is lost (its heartbeat stood still for %g s, and none of its "
      "ranks is a member): rejoining the running job, %d rank%s started as joiners (rejoin %lld of "
      "--max-restarts %d; --in-process-recovery)\n",
      n, n, j.elastic.heartbeat_timeout, j.nproc, j.nproc == 1 ? "" : "s", static_cast<long long>(rejoins),
      j.max_restarts);
  return std::nullopt;
}

} // namespace ddprun
