// The rendezvous store: ddprun on node 0 serves it (as torchrun's agent does), so it outlives
// every rank and is still there to say which rank was lost; the ranks connect to it as clients
// (DDP_STORE_IN_LAUNCHER=1 tells them not to serve one). With --max-restarts, the other nodes'
// ddprun are its clients too, to hear of failures elsewhere (restarts.hpp). Under --nnodes
// MIN:MAX the agent given --node-rank 0 serves it and every other agent is its client
// (elastic_rounds.hpp). Under --in-process-recovery every other node's ddprun is its client too,
// to follow the generations and agree on the job's end (recovery_job.hpp).
#pragma once

#include "options.hpp"

#include <optional>

namespace ddprun {

/// Raises the open-files limit for the store and the ranks' pipes, then starts the store where
/// this node needs one, and settles the ports the ranks are told. Returns an exit code (2, the
/// reason printed) when either fails.
std::optional<int> start_store(job& j);

} // namespace ddprun
