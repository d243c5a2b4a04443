// What one ddprun was asked to do: its command line and DDP_TOKEN, checked, plus the store once
// launcher_store.hpp has started it.
#pragma once

#include <ddp/store.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddprun {

/// --nnodes MIN:MAX (elastic_rounds.hpp): the node range and the rendezvous's clocks.
struct elastic_settings {
  int min_nodes = 0, max_nodes = 0;   ///< 0: a fixed --nnodes N, no elastic rounds
  bool store_host = false;            ///< this agent serves the store: --node-rank 0, or by address
  bool store_host_by_address = false; ///< no --node-rank, but --master-addr is this machine's
  double last_call = 30.0;            ///< --rdzv-last-call: a round closes this long after its last join
  double join_timeout = 600.0;        ///< --rdzv-join-timeout: how long a round waits for MIN nodes
  double heartbeat_timeout = 15.0;    ///< --heartbeat-timeout: an agent silent this long is lost
};

struct job {
  /// nnodes and node_rank: under --nnodes MIN:MAX, the current round's (set by each rendezvous).
  int nproc = 1, nnodes = 1, node_rank = 0, max_restarts = 0;
  elastic_settings elastic;
  bool is_elastic() const { return elastic.max_nodes > 0; }
  /// --master-port after its default: 0 picks a free port (one node only) until the store has
  /// bound one; from then on, the port the ranks are told.
  int master_port = 0;
  int store_port = 0;
  double grace = 5.0;
  std::string master_addr = "127.0.0.1", token;
  bool no_prefix = false;
  /// --in-process-recovery: a rank's failure does not stop the others (ddp::elastic::run recovers
  /// in their processes); the round ends when every rank has exited. Across nodes: recovery_job.hpp.
  bool in_process_recovery = false;
  /// Across nodes, this agent's incarnation of its node (node_incarnation.hpp): 1, or more for an
  /// agent started again that took a lost one's place.
  int incarnation = 1;
  /// With --max-restarts N: each node starts at most N joiners, one in the local slot of each of
  /// its ranks that dies while the job goes on (docs/elastic.md, "Joiners").
  bool starts_joiners() const { return in_process_recovery && max_restarts > 0; }
  std::string crash_report; ///< --crash-report: the library preloaded into every rank
  std::vector<std::string> command;
  /// Node 0: serves the store (and is a client of it); other nodes with restarts or in-process
  /// recovery: a client, to hear of failures or generations elsewhere. Null otherwise.
  std::unique_ptr<ddp::tcp_store> store;
};

/// Fills `j` from the command line and the environment. Returns the exit code when ddprun must
/// stop here (--help, or a mistake it has explained on standard error), nothing to go on.
std::optional<int> parse_command_line(int argc, char** argv, job& j);

} // namespace ddprun
