// What one ddprun was asked to do: its command line and DDP_TOKEN, checked, plus the store once
// launcher_store.hpp has started it.
#pragma once

#include <ddp/store.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddprun {

struct job {
  int nproc = 1, nnodes = 1, node_rank = 0, max_restarts = 0;
  /// --master-port after its default: 0 picks a free port (one node only) until the store has
  /// bound one; from then on, the port the ranks are told.
  int master_port = 0;
  int store_port = 0;
  double grace = 5.0;
  std::string master_addr = "127.0.0.1", token;
  bool no_prefix = false;
  std::string crash_report; ///< --crash-report: the library preloaded into every rank
  std::vector<std::string> command;
  /// Node 0: serves the store (and is a client of it); other nodes with
  /// restarts: a client, to hear of failures elsewhere. Null otherwise.
  std::unique_ptr<ddp::tcp_store> store;
};

/// Fills `j` from the command line and the environment. Returns the exit code when ddprun must
/// stop here (--help, or a mistake it has explained on standard error), nothing to go on.
std::optional<int> parse_command_line(int argc, char** argv, job& j);

} // namespace ddprun
