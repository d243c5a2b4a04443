// The variables a rank starts with: who it is in the job, where the store is, which round.
#pragma once

#include "options.hpp"

#include <string>
#include <vector>

namespace ddprun {

/// The environment of local rank `local` in `round`: ddprun's own, less what it sets, plus RANK,
/// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT,
/// DDP_TOKEN, DDP_STORE_IN_LAUNCHER=1, DDP_RESTART_ROUND, DDP_FAILURE_FILE (when `note_file` is
/// not empty) and, under --crash-report, LD_PRELOAD. Built before fork: the child only execs
/// (ddprun runs the store's thread, so a child must not allocate: a lock held by that thread at
/// fork time would never be released in the child).
/// Under --in-process-recovery --max-restarts, DDP_ELASTIC_JOINERS=1, and for a joiner started in
/// a dead rank's slot DDP_ELASTIC_JOINER=`joiner` (its identity in the job).
std::vector<std::string> rank_environment(const job& j, int local, int round, const std::string& note_file,
                                          const std::string& joiner = "");

} // namespace ddprun
