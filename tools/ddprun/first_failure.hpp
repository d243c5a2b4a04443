// Who failed first: ddprun exits with the code of the rank that failed *first* (128 + signal for
// a signal or a stop). First by time, not by rank: exits and stops are seen as they happen
// (waitpid with WUNTRACED every 20 ms), and a rank that fails on its own notes the moment in
// DDP_FAILURE_FILE before it tells its peers, who may exit before it does (failure_notes.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddprun {

/// A failure as ddprun saw it: an exit with a non-zero code, a death by signal,
/// a stop, or a rank's own note. `prio` orders events seen in one pass: a
/// signal or a stop comes before the exits it causes.
struct failure {
  std::int64_t ns = 0; ///< wall clock
  int prio = 0;
  int rank = 0;
  std::string what; ///< "was killed by signal 9 (SIGKILL)"
  int code = 1;
  bool from_note = false;
};

/// The wall clock in nanoseconds since the epoch: the clock the ranks' notes use.
std::int64_t now_ns();

/// "exited with code 3", "was killed by signal 9 (SIGKILL)", "stopped": a waitpid status.
std::string describe(int status);
/// "was stopped by signal 19 (SIGSTOP)".
std::string describe_stop(int sig);
/// The code ddprun exits with for a rank that ended with waitpid status `status`.
int exit_code_of(int status);

/// Whether the round failed: some failure is neither a note nor a stop (those two matter only
/// when a rank also exited badly or was killed).
bool job_failed(const std::vector<failure>& failures);
/// The earliest failure, a signal or stop before the exits of the same moment. Needs one.
const failure& first_failure(const std::vector<failure>& failures);

} // namespace ddprun
