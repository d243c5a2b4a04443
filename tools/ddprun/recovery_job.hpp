// In-process recovery across nodes (--in-process-recovery with --nnodes N > 1): the generations
// every node's agent follows in the store, and how the agents agree that the job has ended.
//
// Note [The end of a job that recovers across nodes]
// Node 0's agent serves the store, and its ranks may all be lost while survivors train on other
// nodes for hours: it must serve until the job ends, not until its own ranks do. So each agent,
// once its ranks have all ended, writes how each ended (ddprun/r<k>/ipr/done/<node>: "<job
// rank> <code> <what>" lines). The store's host waits for every other node's record, or for
// its agent's heartbeat to lapse (--heartbeat-timeout: a node lost, its ranks count as failed),
// with no other bound: a live node's ranks may run for days. It then decides for the job: 0
// when every member of the last generation the survivors' meetings published ended with 0,
// else the code of the lowest such rank that did not; it writes that verdict
// (ddprun/r<k>/ipr/verdict), waits up to the heartbeat timeout for each live node to say it
// read it, and exits with it, as every other agent does.
#pragma once

#include "options.hpp"
#include "round.hpp"

#include <string>
#include <vector>

namespace ddprun {

/// Whether this job recovers in process on several nodes (every agent follows the generations
/// and waits for the job's verdict).
bool recovers_across_nodes(const job& j);

/// The job ranks of each generation, read from what the survivors' meetings publish
/// ("r<k>/meet/g<g>/members": one "<rank in generation g-1> <node>" line per member).
class generations {
public:
  explicit generations(int world_size);
  /// Reads the generations published since the last look; whether there was a new one.
  /// Throws when the store does not answer.
  bool update(ddp::tcp_store& store, int round);
  int latest() const { return latest_; } ///< 0 until a meeting published generation 1
  bool member(int job_rank) const;
  const std::vector<int>& members() const { return members_; } ///< the latest's job ranks, in rank order

private:
  int latest_ = 0;
  std::vector<int> members_;
};

/// The job on this node: its ranks' one round (run_round), then the job's end below; the other
/// nodes' agents beat their heartbeat throughout. Returns ddprun's exit code.
int run_recovery_job(job& j);

/// Once this node's ranks have all ended: records how, and returns the job's exit code as the
/// store's host decides it (Note [The end of a job that recovers across nodes]). The store's
/// host first waits for the other nodes; another node waits for the verdict, and ends with 1,
/// naming the store's host, when it is lost.
int end_recovery_job(job& j, int round, const std::vector<rank_end>& ends);

/// The message for a store's host that no longer answers (`why`: the store's error).
std::string store_host_lost(const job& j, const std::string& why);

} // namespace ddprun
