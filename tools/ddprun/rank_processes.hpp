// This node's ranks as processes: started with their environment, looked at without waiting,
// signalled. What their states mean for the round is round.hpp's business.
#pragma once

#include "options.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace ddprun {

struct rank_process {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1; // read ends, -1 once closed
  std::string out_buf, err_buf;
  bool exited = false;
  bool stopped = false;
  int status = 0;
  /// When ddprun first saw the rank dying but not yet reapable (0: never): the
  /// main thread of a killed process is a zombie, and peers that check its pid
  /// see it gone, while its other threads still tear down; waitpid succeeds only
  /// after the last one. Under load that took over 380 ms (CI, 2026-12-03): a
  /// peer had failed on the loss and been reaped first, and was named first.
  std::int64_t dying_ns = 0;
  /// A joiner started in a dead rank's slot: its identity, and the last generation published
  /// when it started (it can be a member only of a later one).
  std::string joiner;
  int started_after_generation = 0;
  /// The generation its claim admitted it to, once read (0: not yet; -1: withdrawn, never a member).
  int admitted_to = 0;
  bool exit0_unjoined = false;  ///< a joiner that exited 0 without joining while the job ran
  bool ended_by_ddprun = false; ///< a joiner killed once the job had ended without it
};

/// Forks and execs every local rank of `round`; with output prefixing, each one's standard
/// output and error come back through non-blocking pipes. Exits ddprun when it cannot fork.
std::vector<rank_process> start_ranks(const job& j, int round, const std::string& note_file);

/// Forks and execs the joiner `joiner` in local slot `local` (its environment: rank_environment).
rank_process start_joiner(const job& j, int local, int round, const std::string& note_file,
                          const std::string& joiner);

/// The rank's waitpid status if it stopped, continued or ended since the last look; never waits.
std::optional<int> status_change(const rank_process& r);

/// Sends `sig` to every rank still alive; a stopped one is continued too (it acts on the
/// signal only then), unless the signal is SIGKILL.
void signal_ranks(const std::vector<rank_process>& ranks, int sig);

/// Dates, at `ns`, the ranks whose main thread has exited though waitpid cannot reap them yet.
void date_dying_ranks(std::vector<rank_process>& ranks, std::int64_t ns);

bool all_exited(const std::vector<rank_process>& ranks);
bool any_output_open(const std::vector<rank_process>& ranks);

} // namespace ddprun
