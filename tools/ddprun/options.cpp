#include "options.hpp"

#include "crash_report_library.hpp"
#include "local_address.hpp"

#include <CLI/CLI.hpp>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string_view>

namespace ddprun {
namespace {

void add_options(CLI::App& app, job& j, std::string& nnodes, std::string& endpoint, int& master_port,
                 bool& crash_report) {
  app.add_option("--nproc-per-node,--nproc_per_node", j.nproc, "processes (ranks) on this node")
      ->check(CLI::Range(1, 4096));
  app.add_option("--nnodes", nnodes,
                 "number of nodes in the job, or an elastic range MIN:MAX: the nodes meet in rounds and the "
                 "ranks restart at each round's size (docs/elastic.md)");
  app.add_option("--node-rank,--node_rank", j.node_rank,
                 "index of this node, 0..nnodes-1; with --nnodes MIN:MAX, 0 on the store's host only and "
                 "none elsewhere")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rdzv-last-call", j.elastic.last_call,
                 "--nnodes MIN:MAX: a round with at least MIN nodes closes this many seconds after its last "
                 "join (at once with MAX)")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--rdzv-join-timeout", j.elastic.join_timeout,
                 "--nnodes MIN:MAX: seconds a round waits for MIN nodes before the job ends")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option(
         "--heartbeat-timeout", j.elastic.heartbeat_timeout,
         "--nnodes MIN:MAX, or --in-process-recovery on several nodes: an agent whose heartbeat (every "
         "third of this) stops for this many seconds is lost")
      ->check(CLI::Range(0.3, 3600.0));
  app.add_option("--master-addr,--master_addr", j.master_addr,
                 "address of node 0, where its ddprun serves the rendezvous store");
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", endpoint,
                 "HOST[:PORT]: torchrun's spelling of --master-addr and --master-port together")
      ->excludes("--master-addr");
  app.add_option(
         "--master-port,--master_port", master_port,
         "port of the store; 0 picks a free one (single node only). Default: 0 on one node, 29500 on several")
      ->check(CLI::Range(0, 65535));
  app.add_option("--grace-period", j.grace,
                 "when a rank fails: seconds the others get before SIGTERM, and again before SIGKILL")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--max-restarts,--max_restarts", j.max_restarts,
                 "when a rank fails, stop every rank and start them all again, up to N times (the same N on "
                 "every node); each rank sees the round in DDP_RESTART_ROUND. With --in-process-recovery: "
                 "nobody is stopped; a local rank that dies while the job goes on is replaced by a joiner in "
                 "its slot, which the running ranks admit at a commit and send their state, up to N joiners "
                 "per node; and a lost node's agent started again (the same --node-rank) rejoins, its ranks "
                 "as joiners, up to N times per node (docs/elastic.md, A lost node rejoins)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--in-process-recovery", j.in_process_recovery,
               "a rank that fails does not stop the others: ranks under ddp::elastic::run go on in their "
               "processes without it (docs/elastic.md, In-process recovery), on every node; the job succeeds "
               "when the last generation's ranks all finish well");
  app.add_flag("--no-prefix", j.no_prefix, "do not prefix output lines with [rank]");
  app.add_flag("--crash-report", crash_report,
               "preload libddp_crash_report.so into every rank: a rank that dies of SIGSEGV, SIGBUS, SIGFPE, "
               "SIGILL or SIGABRT prints its frames (scripts/dev/symbolize-crash names their lines)");
  // Everything from the program name on belongs to the program, like torchrun.
  app.prefix_command(true);
  app.footer("usage: ddprun [options] [--] program [args...]");
}

/// A whole number in [lo, hi] from the environment variable `name`, for an option's default.
std::optional<int> env_default(const char* name, int lo, int hi, const char* hint) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return std::nullopt;
  std::string_view s = raw;
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < lo || v > hi)
    throw std::runtime_error(std::string(name) + "='" + raw + "' must be a whole number in [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]" + hint);
  return v;
}

/// HOST[:PORT] or [IPV6][:PORT], from --rdzv-endpoint or PET_RDZV_ENDPOINT (`what`): the store's
/// address, and its port where `port` is given a place to go.
void read_endpoint(std::string_view value, const char* what, job& j, int* port) {
  std::string_view host = value, port_text;
  if (!value.empty() && value.front() == '[') {
    const auto close = value.find(']');
    if (close == std::string_view::npos || (close + 1 < value.size() && value[close + 1] != ':'))
      throw std::runtime_error(std::string(what) + "='" + std::string(value) +
                               "' must be HOST, HOST:PORT or [IPV6]:PORT");
    host = value.substr(1, close - 1);
    if (close + 1 < value.size()) port_text = value.substr(close + 2);
  } else if (const auto colon = value.rfind(':');
             colon != std::string_view::npos && value.find(':') == colon) {
    host = value.substr(0, colon);
    port_text = value.substr(colon + 1);
  }
  int p = 0;
  if (port_text.empty() && !value.empty() && value.back() == ':')
    throw std::runtime_error(std::string(what) + "='" + std::string(value) +
                             "': the port after ':' is missing");
  if (!port_text.empty()) {
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), p);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || p < 1 || p > 65535)
      throw std::runtime_error(std::string(what) + "='" + std::string(value) +
                               "': the port must be a number in [1, 65535]");
  }
  if (host.empty())
    throw std::runtime_error(std::string(what) + "='" + std::string(value) + "' names no host");
  j.master_addr = std::string(host);
  if (p > 0 && !port)
    throw std::runtime_error(std::string(what) + "='" + std::string(value) +
                             "' and --master-port both give the store's port: give it once");
  if (p > 0) *port = p;
}

/// Kubeflow's training operator sets PET_* for torchrun (whose options read PET_<OPTION>): the
/// same variables are ddprun's defaults, so `ddprun ./train` can be a pod's command. The command
/// line wins over them, as with torchrun: a variable is read (and a bad value reported) only for
/// an option the command line did not give. The operator's default nprocPerNode, `auto`, leaves
/// ddprun's own default. The operator's RANK (the pod's index) and WORLD_SIZE (all processes) are
/// not read: ddprun sets both for each rank it starts.
void read_kubeflow_defaults(const CLI::App& app, job& j, int& master_port) {
  auto given = [&](const char* option) { return app.count(option) > 0; };
  if (!given("--node-rank") && !j.is_elastic())
    if (auto v = env_default("PET_NODE_RANK", 0, 65535, "")) j.node_rank = *v;
  if (!given("--nproc-per-node")) {
    const char* raw = std::getenv("PET_NPROC_PER_NODE");
    if (raw == nullptr || std::string_view(raw) != "auto")
      if (auto v = env_default("PET_NPROC_PER_NODE", 1, 4096,
                               ": ddprun needs a count (or auto, its default); set nprocPerNode to a number, "
                               "or pass --nproc-per-node"))
        j.nproc = *v;
  }
  if (!given("--max-restarts"))
    if (auto v = env_default("PET_MAX_RESTARTS", 0, 1000000, "")) j.max_restarts = *v;
  if (given("--rdzv-endpoint")) return;
  if (!given("--master-addr"))
    if (const char* a = std::getenv("PET_MASTER_ADDR"); a && *a) j.master_addr = a;
  if (!given("--master-port"))
    if (auto v = env_default("PET_MASTER_PORT", 1, 65535, "")) master_port = *v;
  // An elastic PyTorchJob names its rendezvous (the first worker's service) here, and sets no
  // PET_MASTER_*: ddprun's store is that rendezvous.
  const char* endpoint = std::getenv("PET_RDZV_ENDPOINT");
  if (endpoint && *endpoint && !given("--master-addr") && !std::getenv("PET_MASTER_ADDR")) {
    int ignored = 0; // the command line's --master-port wins over the variable's port
    read_endpoint(endpoint, "PET_RDZV_ENDPOINT", j, given("--master-port") ? &ignored : &master_port);
  }
}

/// PET_RDZV_BACKEND: ddprun's store is torchrun's c10d rendezvous; etcd is not served.
void check_rendezvous_backend() {
  const char* backend = std::getenv("PET_RDZV_BACKEND");
  if (!backend || !*backend) return;
  const std::string_view b = backend;
  if (b != "c10d" && b != "static")
    throw std::runtime_error("PET_RDZV_BACKEND='" + std::string(b) +
                             "': ddprun serves its own store, as torchrun's c10d rendezvous does; set "
                             "rdzvBackend to c10d (docs/elastic.md)");
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

/// --nnodes N, or MIN:MAX (with 1 <= MIN <= MAX), from `what` (the option or PET_NNODES). False,
/// the reason printed, when it is neither.
bool read_nnodes(const std::string& arg, const char* what, job& j) {
  auto whole = [](std::string_view s, int& v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc{} && p == s.data() + s.size() && v >= 1 && v <= 65536;
  };
  const auto colon = arg.find(':');
  if (colon == std::string::npos) {
    if (whole(arg, j.nnodes)) return true;
  } else if (int lo = 0, hi = 0; whole(std::string_view(arg).substr(0, colon), lo) &&
                                 whole(std::string_view(arg).substr(colon + 1), hi) && lo <= hi) {
    j.elastic.min_nodes = lo;
    j.elastic.max_nodes = hi;
    j.nnodes = hi; // until the first round: ports and open files are checked for the largest job
    return true;
  }
  std::cerr << "ddprun: " << what << (what[0] == '-' ? " " : "=") << arg
            << " must be a number of nodes N (1..65536) or an elastic range MIN:MAX with 1 <= MIN <= MAX\n";
  return false;
}

/// Under --nnodes MIN:MAX node ranks are handed out per round; only the store's host is node 0, which
/// it stays in every round. It names itself with --node-rank 0, or, with no --node-rank, is the
/// agent whose machine carries --master-addr (as torchrun's c10d rendezvous finds its host: what an
/// elastic PyTorchJob, which hands out no node ranks, relies on). On loopback every agent would
/// match, so there only --node-rank 0 makes the host.
bool read_elastic_node_rank(const CLI::App& app, job& j) {
  if (app.count("--node-rank") > 0 && j.node_rank != 0) {
    std::cerr << "ddprun: --node-rank " << j.node_rank
              << " with --nnodes MIN:MAX: node ranks are handed out per round; give --node-rank 0 to the "
                 "node whose --master-addr serves the store (or no --node-rank anywhere: the agent on the "
                 "machine that carries --master-addr serves it)\n";
    return false;
  }
  j.elastic.store_host = app.count("--node-rank") > 0;
  if (!j.elastic.store_host) {
    const auto patience = std::chrono::milliseconds(static_cast<long>(j.elastic.join_timeout * 1000));
    j.elastic.store_host = j.elastic.store_host_by_address = names_this_machine(j.master_addr, patience);
  }
  j.node_rank = 0;
  return true;
}

/// One node may invent its token; several must share one, which only the user can give them.
std::optional<int> choose_token(job& j) {
  if (const char* t = std::getenv("DDP_TOKEN"); t && *t)
    j.token = t;
  else if (j.nnodes > 1) {
    std::cerr << "ddprun: with several nodes, export the same DDP_TOKEN on every node (e.g. "
                 "DDP_TOKEN=$(openssl rand -hex 16); under Kubeflow, in the pod template's env, from a "
                 "Secret)\n";
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
  std::string nnodes, endpoint;
  add_options(app, j, nnodes, endpoint, master_port, crash_report);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) { return app.exit(e); }
  const char* nnodes_from = "--nnodes";
  if (nnodes.empty())
    if (const char* v = std::getenv("PET_NNODES"); v && *v) {
      nnodes = v;
      nnodes_from = "PET_NNODES";
    }
  if (!nnodes.empty() && !read_nnodes(nnodes, nnodes_from, j)) return 2;
  try {
    check_rendezvous_backend();
    if (!endpoint.empty())
      read_endpoint(endpoint, "--rdzv-endpoint", j, app.count("--master-port") > 0 ? nullptr : &master_port);
    read_kubeflow_defaults(app, j, master_port);
  } catch (const std::runtime_error& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    return 2;
  }
  if (j.is_elastic() && !read_elastic_node_rank(app, j)) return 2;
  j.command = app.remaining();
  if (!j.command.empty() && j.command.front() == "--") j.command.erase(j.command.begin());
  if (j.command.empty()) {
    std::cerr << "ddprun: no program given\n" << app.help();
    return 2;
  }
  if (crash_report) j.crash_report = find_crash_report_library();
  if (j.node_rank >= j.nnodes) {
    std::cerr << "ddprun: --node-rank " << j.node_rank << " must be below --nnodes " << j.nnodes
              << " (their defaults come from PET_NODE_RANK and PET_NNODES where set)\n";
    return 2;
  }
  if (j.in_process_recovery && j.is_elastic()) {
    // The elastic rounds restart every rank at each round's size; a generation goes on in process.
    std::cerr << "ddprun: --in-process-recovery replaces restarts: it does not go with --nnodes MIN:MAX (a "
                 "fixed --nnodes N is fine; with --max-restarts N a dead rank's slot gets a joiner instead "
                 "of a restart; docs/elastic.md, In-process recovery)\n";
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
