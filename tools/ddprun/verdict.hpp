// The job's verdict under in-process recovery across nodes: what node 0's agent decides from
// every node's record of its ranks' ends (Note [The end of a job that recovers across nodes],
// recovery_job.hpp).
#pragma once

#include "generations.hpp"
#include "round.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace ddprun {

/// "<code> <why>": a user's stop ({node, signal}) when one was recorded, whatever the ranks'
/// codes; else 0 when every member of the last generation ended with 0; else the code of the
/// lowest member that did not, 1 for a member that has no end (its node was lost). `ends`: by job
/// rank; `nproc`: ranks per node, to name a lost member's node.
std::string decide_verdict(const std::optional<std::pair<int, int>>& stop, const generations& g,
                           const std::map<int, rank_end>& ends, int nproc);

/// The exit code a verdict carries (1 when it carries none a process can exit with).
int verdict_code(const std::string& verdict);

} // namespace ddprun
