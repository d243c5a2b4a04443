// --nnodes MIN:MAX: an elastic agent's life. Each round: the rendezvous (elastic_rendezvous.hpp),
// this node's ranks at the round's size (round.hpp), a word on how the round ended here
// (ddprun/e/r<k>/ended/<agent>: ok, stopped, failed or signal), then the store host's verdict
// (ddprun/e/r<k>/verdict): done, next round, or the end of the job. The host ends a running round
// when an agent's heartbeat stops (agent_heartbeat.hpp) or a newcomer waits while the round has
// fewer than MAX nodes; a rank's failure ends it as in every multi-node round (restarts.hpp).
// Lost agents and failed ranks count against --max-restarts, counted once for the job by the
// host; a join does not (nor in torchrun): a join restarts a round only while it has room, so
// joins cannot restart the job more than MAX - MIN times in a row.
#pragma once

#include "options.hpp"

namespace ddprun {

/// Runs elastic rounds until the job is done, fails past --max-restarts, or is interrupted;
/// returns ddprun's exit code.
int run_elastic_rounds(job& j);

} // namespace ddprun
