// An agent started again for a lost node of a running in-process-recovery job across nodes
// (ddprun --in-process-recovery --nnodes N --max-restarts K, the same --node-rank as the lost
// agent): whether it may rejoin, and why not.
//
// Note [A lost node's agent rejoins]
// The store counts the agents started for each node rank; a second one is an agent started
// again. It rejoins only when all of this holds, checked in this order:
//   1. the job has not ended: no rank's loop returned (the joiners' end key) and node 0 wrote
//      no verdict. Otherwise it starts nothing and exits with rejoin_after_end_exit_code (3).
//   2. the job's ranks admit joiners: node 0's agent ran with --max-restarts >= 1 (it records
//      so in the store; every agent must give the same N, as for joiners) and so does this one.
//   3. no user's stop is recorded, node 0 has not counted the node lost for good
//      (Note [A node's incarnations]), and the node has rejoined fewer than --max-restarts
//      times: checked before any key is taken, so a refused agent locks nobody out.
//   4. the node's agent is lost: its heartbeat counter (agent_heartbeat.hpp) stands still for a
//      whole --heartbeat-timeout, by this agent's clock, and then no job rank of the node is a
//      member of the latest generation (a stalled agent's ranks train on: the survivors drop
//      them within their DDP_TIMEOUT), waited for at most 2 x DDP_TIMEOUT + 10 s. A counter
//      that moves is a live agent: the node rank is taken, and this one is refused (2).
//   5. it wins the lost incarnation's place, one atomic key shared with node 0's count of the
//      node as lost: the others are refused (2), naming which took it.
// Then it beats the node's heartbeat at once (node 0 waits for the new incarnation's record of
// the ranks' ends as for any live node) and starts every local rank as a joiner
// (joiner_slots.hpp: identities unique in the job), which the running generation's rank 0
// admits at its next commit and the new generation's rank 0 (a survivor) sends the state: the
// world grows back. A rejoined node lost again is a lost node like any other, and may rejoin
// again within --max-restarts. Refused agents start no rank. Every wait above is bounded: the
// watch by --heartbeat-timeout and the members' wait, each store request by its timeout; the
// user's signal during the watch ends the agent at once (128 + signal), starting no rank.
#pragma once

#include "options.hpp"

#include <optional>

namespace ddprun {

/// The exit code of an agent started again for a node once the job has ended: it started nothing.
inline constexpr int rejoin_after_end_exit_code = 3;

/// Node 0's agent: records whether the job's ranks admit joiners (--max-restarts >= 1).
/// Throws when the store does not answer.
void record_joiners_admitted(job& j);

/// An agent whose node rank had an agent already (Note [A lost node's agent rejoins]): nothing
/// when it may rejoin, else the code it exits with, having said why. Throws when the store does
/// not answer.
std::optional<int> check_node_rejoin(job& j);

} // namespace ddprun
