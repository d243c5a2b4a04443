// One round of the job on this node: start the local ranks, pass their output on, watch them
// until every one has exited. When one rank fails, the others get a grace period to finish (and
// report what they saw), then SIGTERM (and SIGCONT, for a stopped rank), then SIGKILL after
// another grace period. Which failure is the round's: first_failure.hpp.
#pragma once

#include "options.hpp"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddprun {

/// How one local rank ended: `code` 0 for an exit with 0, else the code ddprun gives it.
struct rank_end {
  int rank = 0;
  int code = 0;
  std::string what; ///< "exited with code 3", "was killed by signal 9 (SIGKILL)"
};

/// What one round of the job came to on this node.
struct round_outcome {
  bool failed = false;                 ///< a local rank failed, or another node reported a failure
  bool user_signal = false;            ///< ddprun itself got SIGINT, SIGTERM or SIGQUIT: no restart
  bool stopped_for_other_node = false; ///< failed means: stopped for a report from the store
  int exit_code = 0;
  std::string what;             ///< the failure, for the store and the final message
  std::vector<rank_end> ends;   ///< every local rank's end, in rank order
  bool store_host_lost = false; ///< in-process recovery across nodes: node 0's store stopped answering
  bool signalled_here = false;  ///< this agent got the user's signal (user_signal: here or on another node)
  /// Across nodes: the user's stop this agent knows of, {node, signal} (its own or another's).
  std::optional<std::pair<int, int>> user_stop;
};

/// Under --nnodes MIN:MAX, the store's host asks this at every look at the store whether the
/// round must end (an agent lost, a newcomer waiting): a report "<code> <what>" for every node
/// (code 0: no failure), or nothing. `finishing`: a local rank has already ended well.
using membership_check = std::function<std::optional<std::string>(bool finishing)>;

/// How a round starts its ranks: as the job's ranks, or, for an agent started again for a lost
/// node (node_rejoin.hpp), each as a joiner the running ranks admit at a commit.
enum class round_start { fresh, rejoining_node };

/// Starts this node's ranks for `round`, watches them until every one has
/// exited, and says how the round went.
round_outcome run_round(job& j, int round, const membership_check& check = {},
                        round_start how = round_start::fresh);

} // namespace ddprun
