#include "options.hpp"

#include "crash_report_library.hpp"

#include <CLI/CLI.hpp>

#include <array>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace ddprun {
namespace {

void add_options(CLI::App& app, job& j, int& master_port, bool& crash_report) {
  app.add_option("--nproc-per-node,--nproc_per_node", j.nproc, "processes (ranks) on this node")
      ->check(CLI::Range(1, 4096));
  app.add_option("--nnodes", j.nnodes, "number of nodes in the job")->check(CLI::Range(1, 65536));
  app.add_option("--node-rank,--node_rank", j.node_rank, "index of this node, 0..nnodes-1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--master-addr,--master_addr", j.master_addr,
                 "address of node 0, where its ddprun serves the rendezvous store");
  app.add_option(
         "--master-port,--master_port", master_port,
         "port of the store; 0 picks a free one (single node only). Default: 0 on one node, 29500 on several")
      ->check(CLI::Range(0, 65535));
  app.add_option("--grace-period", j.grace,
                 "when a rank fails: seconds the others get before SIGTERM, and again before SIGKILL")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--max-restarts,--max_restarts", j.max_restarts,
                 "when a rank fails, stop every rank and start them all again, up to N times (the same N on "
                 "every node); each rank sees the round in DDP_RESTART_ROUND")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--no-prefix", j.no_prefix, "do not prefix output lines with [rank]");
  app.add_flag("--crash-report", crash_report,
               "preload libddp_crash_report.so into every rank: a rank that dies of SIGSEGV, SIGBUS, SIGFPE, "
               "SIGILL or SIGABRT prints its frames (scripts/dev/symbolize-crash names their lines)");
  // Everything from the program name on belongs to the program, like torchrun.
  app.prefix_command(true);
  app.footer("usage: ddprun [options] [--] program [args...]");
}

std::string random_token() {
  std::array<unsigned char, 16> b{};
  std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(b.data()), b.size());
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (auto c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

/// One node may invent its token; several must share one, which only the user can give them.
std::optional<int> choose_token(job& j) {
  if (const char* t = std::getenv("DDP_TOKEN"); t && *t)
    j.token = t;
  else if (j.nnodes > 1) {
    std::cerr << "ddprun: with several nodes, export the same DDP_TOKEN on every node (e.g. "
                 "DDP_TOKEN=$(openssl rand -hex 16))\n";
    return 2;
  } else
    j.token = random_token();
  return std::nullopt;
}

} // namespace

std::optional<int> parse_command_line(int argc, char** argv, job& j) {
  CLI::App app{"ddprun: launch the local ranks of a distributed data-parallel job"};
  int master_port = -1;
  bool crash_report = false;
  add_options(app, j, master_port, crash_report);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) { return app.exit(e); }
  j.command = app.remaining();
  if (!j.command.empty() && j.command.front() == "--") j.command.erase(j.command.begin());
  if (j.command.empty()) {
    std::cerr << "ddprun: no program given\n" << app.help();
    return 2;
  }
  if (crash_report) j.crash_report = find_crash_report_library();
  if (j.node_rank >= j.nnodes) {
    std::cerr << "ddprun: --node-rank " << j.node_rank << " must be below --nnodes " << j.nnodes << "\n";
    return 2;
  }
  if (master_port < 0) master_port = j.nnodes > 1 ? 29500 : 0;
  if (master_port == 0 && j.nnodes > 1) {
    std::cerr << "ddprun: --master-port 0 (pick a free port) works on one node only: give every node the "
                 "same port\n";
    return 2;
  }
  j.master_port = master_port;
  return choose_token(j);
}

} // namespace ddprun
