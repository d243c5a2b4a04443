// ddp::topology — who this process is: from ddprun/torchrun, OpenMPI or SLURM variables.
#ifndef DDP_TOPOLOGY_HPP
#define DDP_TOPOLOGY_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/topology/nodelist.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE

/// Where this process sits in the job.
struct topology {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;        ///< empty when the environment names none
  int master_port = 0;            ///< 0 when the environment names none
  std::string source = "default"; ///< "ddprun/torchrun", "openmpi", "slurm" or "default"
  /// The port ddp's own rendezvous store listens on (env://), 0 when none is known:
  /// DDP_STORE_PORT when set; else MASTER_PORT + 1 when torch's elastic agent serves its own store
  /// on MASTER_PORT (it says so with TORCHELASTIC_USE_AGENT_STORE=True: torchrun's static
  /// rendezvous, torch.distributed.launch); else master_port.
  int store_port = 0;
  /// DDP_STORE_IN_LAUNCHER=1 (ddprun sets it): the launcher on the master node serves the
  /// store on store_port, so it outlives every rank, and no rank serves one.
  bool store_in_launcher = false;
  /// DDP_RESTART_ROUND (ddprun sets it: 0, then 1, 2, ... after each restart of the job);
  /// nullopt when no launcher restarts the job. Store keys are scoped by it ("r<round>/").
  std::optional<int> restart_round;

  /// Reads ddprun/torchrun variables (RANK, ...) first, then OpenMPI
  /// (OMPI_COMM_WORLD_*), then SLURM (SLURM_PROCID, ...). With none of them
  /// set, a single process (rank 0 of 1). Every bad value throws ddp::error
  /// (kind config) naming the variable and its value.
  static topology from_env();
};

namespace detail {

/// The port a SLURM or OpenMPI job uses when MASTER_PORT is not set: a
/// deterministic function of the job id in [20000, 29999], so every task of a
/// job agrees without talking, and concurrent jobs rarely collide.
inline int port_from_job_id(std::uint64_t job_id) { return 20000 + static_cast<int>(job_id % 10000); }

inline int port_from_job_id(const std::string& job) {
  std::uint64_t h = 1469598103934665603ull; // FNV-1a: stable across builds
  for (char c : job)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return port_from_job_id(h);
}

inline void read_master(topology& t) {
  if (auto a = getenv_str("MASTER_ADDR")) {
    if (a->empty()) throw error(error_kind::config, "environment variable MASTER_ADDR is set but empty");
    t.master_addr = *a;
  }
  if (auto p = env_int("MASTER_PORT", 1, 65535)) t.master_port = static_cast<int>(*p);
}

inline void check_topology(const topology& t, const char* rank_var, const char* world_var,
                           const char* local_var, const char* local_world_var) {
  auto fail = [&](const std::string& what) {
    throw error(error_kind::config, "contradictory " + t.source + " environment: " + what);
  };
  if (t.rank >= t.world_size)
    fail(std::string(rank_var) + "=" + std::to_string(t.rank) + " is not below " + world_var + "=" +
         std::to_string(t.world_size));
  if (t.local_rank >= t.local_world_size)
    fail(std::string(local_var) + "=" + std::to_string(t.local_rank) + " is not below " + local_world_var +
         "=" + std::to_string(t.local_world_size));
  if (t.local_world_size > t.world_size)
    fail(std::string(local_world_var) + "=" + std::to_string(t.local_world_size) + " exceeds " + world_var +
         "=" + std::to_string(t.world_size));
  if (t.node_rank >= t.nnodes)
    fail("node rank " + std::to_string(t.node_rank) + " is not below the node count " +
         std::to_string(t.nnodes));
}

/// True when torch's elastic agent serves its own store on MASTER_PORT (torch sets "True"/"False").
inline bool agent_holds_master_port() {
  auto v = getenv_str("TORCHELASTIC_USE_AGENT_STORE");
  return v && (*v == "True" || *v == "true" || *v == "1");
}

/// The launcher's part: DDP_STORE_IN_LAUNCHER and DDP_RESTART_ROUND (ddprun sets both).
inline void read_launcher(topology& t) {
  if (auto v = getenv_str("DDP_STORE_IN_LAUNCHER")) {
    if (*v != "0" && *v != "1")
      throw error(error_kind::config,
                  "environment variable DDP_STORE_IN_LAUNCHER='" + *v + "' must be 0 or 1 (ddprun sets it)");
    t.store_in_launcher = *v == "1";
  }
  if (auto r = env_int("DDP_RESTART_ROUND", 0, 1 << 30)) t.restart_round = static_cast<int>(*r);
}

inline void read_store_port(topology& t) {
  if (auto p = env_int("DDP_STORE_PORT", 1, 65535)) {
    t.store_port = static_cast<int>(*p);
  } else if (t.master_port != 0 && agent_holds_master_port()) {
    if (t.master_port == 65535)
      throw error(error_kind::config,
                  "MASTER_PORT=65535 and torch's elastic agent holds it (TORCHELASTIC_USE_AGENT_STORE=True), "
                  "so ddp's store has no MASTER_PORT+1 to use: choose a lower --master_port, or set "
                  "DDP_STORE_PORT to a free port");
    t.store_port = t.master_port + 1;
  } else {
    t.store_port = t.master_port;
  }
}

/// Where the store port came from, for error messages.
inline std::string store_port_origin(const topology& t) {
  if (getenv_str("DDP_STORE_PORT")) return "DDP_STORE_PORT=" + std::to_string(t.store_port);
  if (t.store_port != t.master_port)
    return "port " + std::to_string(t.store_port) +
           " = MASTER_PORT+1, because torch's elastic agent serves its own store on MASTER_PORT=" +
           std::to_string(t.master_port) + " (TORCHELASTIC_USE_AGENT_STORE=True)";
  return "MASTER_PORT=" + std::to_string(t.master_port);
}

inline topology topology_from_torchrun() {
  topology t;
  t.source = "ddprun/torchrun";
  t.world_size =
      static_cast<int>(require_env_int("WORLD_SIZE", 1, 1 << 20, "RANK is set, so WORLD_SIZE must be too"));
  t.rank = static_cast<int>(require_env_int("RANK", 0, 1 << 20, "launcher"));
  t.local_rank = static_cast<int>(env_int("LOCAL_RANK", 0, 1 << 20).value_or(t.rank));
  t.local_world_size = static_cast<int>(env_int("LOCAL_WORLD_SIZE", 1, 1 << 20).value_or(t.world_size));
  auto group = env_int("GROUP_RANK", 0, 1 << 20);
  auto node = env_int("NODE_RANK", 0, 1 << 20);
  if (group && node && *group != *node)
    throw error(error_kind::config, "contradictory environment: GROUP_RANK=" + std::to_string(*group) +
                                        " but NODE_RANK=" + std::to_string(*node));
  t.node_rank = static_cast<int>(group ? *group : node.value_or(0));
  if (t.world_size % t.local_world_size != 0)
    throw error(error_kind::config,
                "contradictory environment: WORLD_SIZE=" + std::to_string(t.world_size) +
                    " is not a multiple of LOCAL_WORLD_SIZE=" + std::to_string(t.local_world_size));
  t.nnodes = t.world_size / t.local_world_size;
  read_master(t);
  check_topology(t, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return t;
}

inline topology topology_from_openmpi() {
  topology t;
  t.source = "openmpi";
  t.world_size =
      static_cast<int>(require_env_int("OMPI_COMM_WORLD_SIZE", 1, 1 << 20, "OMPI_COMM_WORLD_RANK is set"));
  t.rank = static_cast<int>(require_env_int("OMPI_COMM_WORLD_RANK", 0, 1 << 20, "launcher"));
  t.local_rank = static_cast<int>(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 1 << 20).value_or(0));
  t.local_world_size = static_cast<int>(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1 << 20).value_or(1));
  // mpirun's default (--map-by slot) places consecutive ranks on one node.
  t.nnodes = (t.world_size + t.local_world_size - 1) / t.local_world_size;
  t.node_rank = t.rank / t.local_world_size;
  read_master(t);
  if (t.master_addr.empty() && t.nnodes == 1) t.master_addr = "127.0.0.1";
  if (t.master_port == 0) {
    auto job = getenv_str("OMPI_MCA_ess_base_jobid");
    if (!job) job = getenv_str("PMIX_NAMESPACE");
    if (job) t.master_port = port_from_job_id(*job);
  }
  check_topology(t, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE");
  return t;
}

/// Tasks on this node from SLURM_STEP_TASKS_PER_NODE ("2(x3),1"), else ntasks/nnodes.
inline int slurm_tasks_on_node(int node, int ntasks, int nnodes) {
  auto spec = getenv_str("SLURM_STEP_TASKS_PER_NODE");
  if (!spec) spec = getenv_str("SLURM_TASKS_PER_NODE");
  if (!spec) return (ntasks + nnodes - 1) / nnodes;
  std::string_view s = *spec;
  int seen = 0;
  while (!s.empty()) {
    std::size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    int repeat = 1;
    std::size_t paren = item.find('(');
    auto count = parse_int(item.substr(0, paren));
    if (paren != std::string_view::npos) {
      auto r =
          item.size() > paren + 3 ? parse_int(item.substr(paren + 2, item.size() - paren - 3)) : std::nullopt;
      if (!r || *r < 1 || item.substr(paren, 2) != "(x" || item.back() != ')')
        count.reset();
      else
        repeat = static_cast<int>(*r);
    }
    const std::int64_t tasks = count.value_or(0);
    if (tasks < 1)
      throw error(error_kind::config,
                  "environment variable SLURM_STEP_TASKS_PER_NODE='" + *spec + "' cannot be parsed");
    if (node < seen + repeat) return static_cast<int>(tasks);
    seen += repeat;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  throw error(error_kind::config, "environment variable SLURM_STEP_TASKS_PER_NODE='" + *spec +
                                      "' names fewer nodes than SLURM_NODEID=" + std::to_string(node) +
                                      " needs");
}

inline topology topology_from_slurm() {
  topology t;
  t.source = "slurm";
  t.world_size = static_cast<int>(require_env_int("SLURM_NTASKS", 1, 1 << 20, "SLURM_PROCID is set"));
  t.rank = static_cast<int>(require_env_int("SLURM_PROCID", 0, 1 << 20, "launcher"));
  t.local_rank = static_cast<int>(env_int("SLURM_LOCALID", 0, 1 << 20).value_or(0));
  t.nnodes = static_cast<int>(env_int("SLURM_NNODES", 1, 1 << 20).value_or(1));
  t.node_rank = static_cast<int>(env_int("SLURM_NODEID", 0, 1 << 20).value_or(0));
  if (t.node_rank >= t.nnodes)
    throw error(error_kind::config,
                "contradictory slurm environment: SLURM_NODEID=" + std::to_string(t.node_rank) +
                    " is not below SLURM_NNODES=" + std::to_string(t.nnodes));
  t.local_world_size = slurm_tasks_on_node(t.node_rank, t.world_size, t.nnodes);
  read_master(t);
  if (t.master_addr.empty()) {
    auto list = getenv_str("SLURM_STEP_NODELIST");
    if (!list) list = getenv_str("SLURM_JOB_NODELIST");
    if (!list)
      throw error(error_kind::config,
                  "SLURM_PROCID is set but neither MASTER_ADDR nor SLURM_STEP_NODELIST is: "
                  "run under srun, or export MASTER_ADDR");
    t.master_addr = first_node(*list);
  }
  if (t.master_port == 0) {
    if (auto job = env_int("SLURM_JOB_ID", 0, INT64_MAX))
      t.master_port = port_from_job_id(static_cast<std::uint64_t>(*job));
  }
  check_topology(t, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "local task count");
  return t;
}

} // namespace detail

inline topology topology::from_env() {
  topology t;
  if (detail::getenv_str("RANK"))
    t = detail::topology_from_torchrun();
  else if (detail::getenv_str("OMPI_COMM_WORLD_RANK"))
    t = detail::topology_from_openmpi();
  else if (detail::getenv_str("SLURM_PROCID"))
    t = detail::topology_from_slurm();
  else
    detail::read_master(t);
  detail::read_store_port(t);
  detail::read_launcher(t);
  return t;
}

/// The CUDA device (an index among the visible ones) a rank uses, given how many devices
/// it sees (cudaGetDeviceCount, which honours CUDA_VISIBLE_DEVICES):
/// - local_world_size <= visible_devices: device local_rank (the node's ranks share one
///   visible set, as under ddprun, torchrun or `CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun ...`);
/// - one visible device: device 0 (each rank sees its own GPU, as with SLURM
///   `--gpus-per-task=1` or a per-rank CUDA_VISIBLE_DEVICES);
/// - otherwise ddp::error (config): more ranks on this node than visible GPUs, and NCCL
///   refuses two ranks on one GPU. Every rank of the node fails alike, before NCCL starts.
inline int cuda_device_for(const topology& t, int visible_devices) {
  if (visible_devices < 1)
    throw error(error_kind::backend,
                "rank " + std::to_string(t.rank) + ": no visible CUDA device (check CUDA_VISIBLE_DEVICES)",
                t.rank);
  if (t.local_world_size <= visible_devices) return t.local_rank;
  if (visible_devices == 1) return 0;
  throw error(error_kind::config,
              "rank " + std::to_string(t.rank) + " (local rank " + std::to_string(t.local_rank) +
                  "): " + std::to_string(t.local_world_size) + " ranks on this node but only " +
                  std::to_string(visible_devices) +
                  " CUDA devices visible (CUDA_VISIBLE_DEVICES), and NCCL needs one GPU per rank: start "
                  "at most " +
                  std::to_string(visible_devices) +
                  " ranks per node, make one device visible to each rank (SLURM --gpus-per-task=1), or use "
                  "ddp::gloo, whose ranks may share a GPU",
              t.rank);
}

/// Removes the local-rank option that torch.distributed.launch (without --use_env) passes to
/// the program — `--local_rank=N` (torch 1.x), `--local-rank=N` (torch 2.x), or either with
/// the value as the next argument — from argc/argv, so that a command-line parser that
/// rejects unknown options (CLI11, getopt) never sees it. Call it first thing in main().
/// Scanning stops at "--". Returns the value, or nullopt when the option is absent.
/// Throws ddp::error (config) when the value is missing or not a non-negative integer, when
/// two occurrences disagree, or when it differs from LOCAL_RANK (which ddp reads; every
/// launcher that passes the option also sets LOCAL_RANK).
inline std::optional<int> consume_local_rank_arg(int& argc, char** argv) {
  if (argc < 1 || argv == nullptr) return std::nullopt;
  std::optional<int> found;
  int out = 1;
  int i = 1;
  auto take = [&](std::string_view opt, std::string_view value) {
    auto v = detail::parse_int(value);
    if (!v || *v < 0 || *v > (1 << 20))
      throw error(error_kind::config, "command line: " + std::string(opt) + " needs a local rank (a " +
                                          "non-negative integer), got '" + std::string(value) + "'");
    if (found && *found != *v)
      throw error(error_kind::config, "command line: the local rank is given twice, as " +
                                          std::to_string(*found) + " and " + std::to_string(*v));
    found = static_cast<int>(*v);
  };
  for (; i < argc; ++i) {
    std::string_view a = argv[i] ? argv[i] : "";
    if (a == "--") break;
    std::string_view opt;
    for (std::string_view name : {"--local_rank", "--local-rank"})
      if (a.starts_with(name) && (a.size() == name.size() || a[name.size()] == '=')) opt = name;
    if (opt.empty()) {
      argv[out++] = argv[i];
      continue;
    }
    if (a.size() > opt.size()) {
      take(opt, a.substr(opt.size() + 1));
    } else {
      if (i + 1 >= argc) take(opt, "");
      take(opt, argv[++i]);
    }
  }
  for (; i < argc; ++i)
    argv[out++] = argv[i];
  argc = out;
  argv[argc] = nullptr;
  if (found) {
    if (auto env = detail::env_int("LOCAL_RANK", 0, 1 << 20); env && *env != *found)
      throw error(error_kind::config,
                  "command line says --local_rank=" + std::to_string(*found) +
                      " but LOCAL_RANK=" + std::to_string(*env) +
                      ": the option and the environment must come from the same launcher");
  }
  return found;
}

DDP_END_NAMESPACE

#endif // DDP_TOPOLOGY_HPP
