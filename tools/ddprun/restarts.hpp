// Restarts (--max-restarts N): when a rank fails, ddprun stops its local ranks, tells the other
// nodes' ddprun through the store (key ddprun/r<k>/failed), and every node relaunches its ranks
// in round k+1 (DDP_RESTART_ROUND=k+1; the ranks' store keys are scoped "r<k+1>/", so nothing of
// round k leaks in). After N restarts a failing job ends with the last failure's exit code.
#pragma once

#include "options.hpp"
#include "round.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace ddprun {

/// Runs rounds until one succeeds, the user interrupts, or the restarts are spent; returns
/// ddprun's exit code. Under --nnodes MIN:MAX: elastic_rounds.hpp; --in-process-recovery on
/// several nodes: recovery_job.hpp.
int run_rounds(job& j);

/// Whether this node's ddprun talks with the other nodes' about each round (several nodes,
/// restarts, and a store; or --nnodes MIN:MAX).
bool coordinates_rounds(const job& j);

/// Tells the other nodes that this round failed ("<code> <what>"), unless one told them first:
/// the first report is the job's failure, and its code every node's. Whether this one was first.
bool report_round_failure(job& j, int round, const std::string& report);

/// The failure another node reported for this round, if any (waits up to 10 s for the store's
/// answer, an elastic agent up to --heartbeat-timeout; throws when the store does not answer).
std::optional<std::string> failure_reported_elsewhere(job& j, int round);

/// The exit code in a failure report "<code> <what>" (1 when unreadable).
int reported_code(std::string_view report);

} // namespace ddprun
