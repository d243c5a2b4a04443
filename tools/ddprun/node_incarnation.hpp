// Which agent speaks for a node of an in-process-recovery job across nodes, when agents started
// again for a lost node take its place (node_rejoin.hpp).
//
// Note [A node's incarnations]
// A node's first agent is its incarnation 1. The agent that takes the place of incarnation i,
// lost, becomes incarnation i + 1 by winning one store key, the node's gate i (`add` answers 1
// to exactly one caller). Node 0's agent, counting incarnation i lost at the job's end, takes the
// same gate: so either node 0 counts the node lost and every later agent is refused, or the
// rejoin won and node 0 waits for the new incarnation. Node 0 marks the gate as its own (lost i =
// "1") before taking it, so an agent that reads a taken gate knows which way it went; when node 0
// loses the race it marks it "0" again. Each incarnation writes the record of its ranks' ends
// under its own number: a lost agent's record, or an old agent that wakes late, never stands for
// the new incarnation's ranks.
#pragma once

#include <ddp/store.hpp>

#include <string>

namespace ddprun {

struct node_incarnation {
  int number = 1;    ///< 1: the node's first agent; i + 1: the one that took incarnation i's place
  bool lost = false; ///< node 0 counted incarnation `number` lost for good: no agent may take its place
};

/// The node's current incarnation, looking from `from` up (each taken gate, one request).
/// Throws when the store does not answer.
node_incarnation current_incarnation(ddp::tcp_store& s, int node, int from = 1);

/// An agent started again: whether it won the place of `incarnation` (it is then incarnation + 1).
bool claim_incarnation(ddp::tcp_store& s, int node, int incarnation);

/// Whether node 0 counted `incarnation` as taken by node 0 (lost), once the gate is taken.
bool counted_lost(ddp::tcp_store& s, int node, int incarnation);

/// Node 0 at the job's end, the node's heartbeat having stood still: true when it counts
/// `incarnation` lost for good, false when an agent took its place first.
bool count_incarnation_lost(ddp::tcp_store& s, int node, int incarnation);

/// The store key of an incarnation's record of its ranks' ends.
std::string ends_record_key(int round, int node, int incarnation);
/// The store key node 0 sets, before its verdict, for each record it counted in the verdict.
std::string counted_key(int round, int node, int incarnation);

} // namespace ddprun
