// The ranks' output, passed on line by line with "[rank] " in front (unless --no-prefix, where
// the ranks write to ddprun's own standard output and error).
#pragma once

#include "rank_processes.hpp"

namespace ddprun {

/// Passes on whatever `r` has written since the last call: its complete lines now, a last
/// unfinished line once its pipe closes (then the pipe is closed here too). Never waits.
void pass_on_output(rank_process& r);

} // namespace ddprun
