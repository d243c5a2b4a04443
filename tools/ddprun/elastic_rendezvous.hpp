// The rendezvous of --nnodes MIN:MAX: node agents meet in numbered rounds through the store that
// the store's host (--node-rank 0) serves. In round k each agent takes a slot (a counter,
// ddprun/e/r<k>/joined) and writes its id there; the host closes the round once MAX agents have
// joined, or once at least MIN have, --rdzv-last-call seconds passed without a new one and every
// agent that asked to join the round before is back or lost (its heartbeat), and
// publishes the members in node-rank order: itself first, then by agent id, so survivors keep
// their order and newcomers come last (ddprun/e/r<k>/closed). An agent that
// came too late or found the round full is not a member: it waits for the round's verdict and
// joins the next. At --rdzv-join-timeout a round closes with what came if that is MIN or more;
// one that does not reach MIN ends the job,
// naming how many came. The host decides alone, so agents never race to close a round; it is
// the job's single point of failure (docs/elastic.md).
#pragma once

#include "agent_heartbeat.hpp"
#include "options.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddprun {

/// A closed round's members, in node-rank order (the store's host is node 0).
struct membership {
  std::vector<long> agents;
  /// How many had joined when the round closed: a join counted after it is a new arrival.
  long joined_at_close = 0;
  int node_rank_of(long agent_id) const;
};

/// "ddprun/e/<what>" and "ddprun/e/r<round>/<what>": the elastic keys of the store.
std::string elastic_key(const std::string& what);
std::string elastic_round_key(int round, const std::string& what);

/// This agent's id for the whole job (1, 2, ...: the order in which agents came).
long register_agent(job& j);

/// The store's host: makes `round` the one newcomers join.
void open_round(job& j, int round);
/// A newcomer: the round it should join (waits up to --rdzv-join-timeout for the host to open one).
int round_to_join(job& j);

/// Joins `round`; on the store's host (which passes its heartbeat watch), also closes it. The membership when
/// this agent is in the round, nothing when it is not (the round was full or had closed). job_ends when the
/// round fails (fewer than MIN nodes in time, a mismatch between nodes) or the host is silent.
std::optional<membership> join_round(job& j, long agent_id, int round, heartbeat_watch* watch = nullptr);

/// How many agents have asked to join `round` so far.
long joins_so_far(job& j, int round);

} // namespace ddprun
