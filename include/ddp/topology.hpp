// ddp::topology — who this process is: from ddprun/torchrun, Kubeflow, MPI launchers' or SLURM variables.
#ifndef DDP_TOPOLOGY_HPP
#define DDP_TOPOLOGY_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/message.hpp>
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
  std::string master_addr; ///< empty when the environment names none
  int master_port = 0;     ///< 0 when the environment names none
  /// "ddprun/torchrun", "kubeflow", "openmpi", "mvapich", "mpich" (MPICH and Intel MPI), "pmix",
  /// "slurm" or "default"
  std::string source = "default";
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

  /// Reads, first match wins: ddprun/torchrun (RANK, ...; under Kubeflow's PyTorchJob without a
  /// launcher in the pod, RANK with PET_*), Kubeflow's TrainJob (PET_NODE_RANK, ...), OpenMPI
  /// (OMPI_COMM_WORLD_*), MVAPICH (MV2_COMM_WORLD_*), MPICH and Intel MPI (PMI_RANK, PMI_SIZE,
  /// MPI_LOCALRANKID, MPI_LOCALNRANKS), PMIx (PMIX_RANK), then SLURM (SLURM_PROCID, ...). With
  /// none of them set, a single process (rank 0 of 1). Every bad, contradictory or incomplete
  /// set throws ddp::error (kind config) naming the variables and their values.
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

/// MASTER_ADDR/MASTER_PORT, else Kubeflow's PET_MASTER_ADDR/PET_MASTER_PORT (its TrainJob sets
/// only those; a launcher in the pod sets MASTER_* from them).
inline void read_master(topology& t) {
  for (const char* name : {"MASTER_ADDR", "PET_MASTER_ADDR"}) {
    auto a = getenv_str(name);
    if (!a) continue;
    if (a->empty())
      detail::throw_error(error_kind::config, {"environment variable ", name, " is set but empty"});
    t.master_addr = *a;
    break;
  }
  auto p = env_int("MASTER_PORT", 1, 65535);
  if (!p) p = env_int("PET_MASTER_PORT", 1, 65535);
  if (p) t.master_port = static_cast<int>(*p);
}

inline void check_topology(const topology& t, const char* rank_var, const char* world_var,
                           const char* local_var, const char* local_world_var) {
  auto fail = [&](const std::string& what) {
    detail::throw_error(error_kind::config, {"contradictory ", t.source, " environment: ", what});
  };
  if (t.rank >= t.world_size)
    fail(detail::message({rank_var, "=", t.rank, " is not below ", world_var, "=", t.world_size}));
  if (t.local_rank >= t.local_world_size)
    fail(detail::message(
        {local_var, "=", t.local_rank, " is not below ", local_world_var, "=", t.local_world_size}));
  if (t.local_world_size > t.world_size)
    fail(detail::message(
        {local_world_var, "=", t.local_world_size, " exceeds ", world_var, "=", t.world_size}));
  if (t.node_rank >= t.nnodes)
    fail(detail::message({"node rank ", t.node_rank, " is not below the node count ", t.nnodes}));
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
      detail::throw_error(error_kind::config, {"environment variable DDP_STORE_IN_LAUNCHER='", *v,
                                               "' must be 0 or 1 (ddprun sets it)"});
    t.store_in_launcher = *v == "1";
  }
  if (auto r = env_int("DDP_RESTART_ROUND", 0, 1 << 30)) t.restart_round = static_cast<int>(*r);
}

inline void read_store_port(topology& t) {
  if (auto p = env_int("DDP_STORE_PORT", 1, 65535)) {
    t.store_port = static_cast<int>(*p);
  } else if (t.master_port != 0 && agent_holds_master_port()) {
    if (t.master_port == 65535)
      detail::throw_error(
          error_kind::config,
          {"MASTER_PORT=65535 and torch's elastic agent holds it (TORCHELASTIC_USE_AGENT_STORE=True), "
           "so ddp's store has no MASTER_PORT+1 to use: choose a lower --master_port, or set "
           "DDP_STORE_PORT to a free port"});
    t.store_port = t.master_port + 1;
  } else {
    t.store_port = t.master_port;
  }
}

/// Where the store port came from, for error messages.
inline std::string store_port_origin(const topology& t) {
  if (getenv_str("DDP_STORE_PORT")) return detail::message({"DDP_STORE_PORT=", t.store_port});
  if (t.store_port != t.master_port)
    return detail::message(
        {"port ", t.store_port,
         " = MASTER_PORT+1, because torch's elastic agent serves its own store on MASTER_PORT=",
         t.master_port, " (TORCHELASTIC_USE_AGENT_STORE=True)"});
  return detail::message({"MASTER_PORT=", t.master_port});
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
    detail::throw_error(error_kind::config,
                        {"contradictory environment: GROUP_RANK=", *group, " but NODE_RANK=", *node});
  t.node_rank = static_cast<int>(group ? *group : node.value_or(0));
  if (t.world_size % t.local_world_size != 0)
    detail::throw_error(error_kind::config, {"contradictory environment: WORLD_SIZE=", t.world_size,
                                             " is not a multiple of LOCAL_WORLD_SIZE=", t.local_world_size});
  t.nnodes = t.world_size / t.local_world_size;
  read_master(t);
  check_topology(t, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return t;
}

/// Local rank and count from a launcher's pair of variables: both or neither (then one process
/// per node, the safe guess: no shared memory is assumed).
inline void read_local_pair(topology& t, const char* rank_var, const char* size_var) {
  auto r = env_int(rank_var, 0, 1 << 20);
  auto n = env_int(size_var, 1, 1 << 20);
  if (r.has_value() != n.has_value())
    detail::throw_error(error_kind::config, {"incomplete ", t.source, " environment: ",
                                             (r ? std::string(rank_var) : std::string(size_var)),
                                             " is set but ", (r ? size_var : rank_var),
                                             " is not; a launcher sets both, so export both or neither"});
  if (r) {
    t.local_rank = static_cast<int>(*r);
    t.local_world_size = static_cast<int>(*n);
  }
}

/// A job-derived port when MASTER_PORT is not set: PMIx's namespace or OpenMPI's job id, else
/// SLURM's job id (an MPI launcher inside an allocation), so every process agrees without talking.
inline void derive_master_port(topology& t) {
  if (t.master_port != 0) return;
  for (const char* name : {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
    if (auto job = getenv_str(name); job && !job->empty()) {
      t.master_port = port_from_job_id(*job);
      return;
    }
  if (auto job = env_int("SLURM_JOB_ID", 0, INT64_MAX))
    t.master_port = port_from_job_id(static_cast<std::uint64_t>(*job));
}

/// One MPI launcher's process: its variables for the rank, the size and the node's local pair.
inline topology topology_from_mpi(const char* source, const char* rank_var, const char* size_var,
                                  const char* local_rank_var, const char* local_size_var) {
  topology t;
  t.source = source;
  t.world_size = static_cast<int>(require_env_int(size_var, 1, 1 << 20, std::string(rank_var) + " is set"));
  t.rank = static_cast<int>(require_env_int(rank_var, 0, 1 << 20, "launcher"));
  read_local_pair(t, local_rank_var, local_size_var);
  // The launchers' default mapping (mpirun --map-by slot, Hydra's -ppn, mpirun_rsh's hostfile
  // order) places consecutive ranks on one node.
  t.nnodes = (t.world_size + t.local_world_size - 1) / t.local_world_size;
  t.node_rank = t.rank / t.local_world_size;
  read_master(t);
  if (t.master_addr.empty() && t.nnodes == 1) t.master_addr = "127.0.0.1";
  derive_master_port(t);
  check_topology(t, rank_var, size_var, local_rank_var, local_size_var);
  return t;
}

inline topology topology_from_openmpi() {
  return topology_from_mpi("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
}

inline topology topology_from_mvapich() {
  return topology_from_mpi("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE",
                           "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE");
}

/// MPICH's and Intel MPI's Hydra: PMI_RANK/PMI_SIZE and the node's MPI_LOCALRANKID/MPI_LOCALNRANKS.
inline topology topology_from_mpich() {
  return topology_from_mpi("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
}

/// PMIx puts only the rank and the namespace in the environment; the job's size comes from its
/// API, which ddp does not link. WORLD_SIZE (and LOCAL_RANK/LOCAL_WORLD_SIZE) fill the gap.
inline topology topology_from_pmix() {
  if (!getenv_str("WORLD_SIZE"))
    detail::throw_error(
        error_kind::config,
        {"incomplete pmix environment: PMIX_RANK=", getenv_str("PMIX_RANK").value_or(""),
         " is set but nothing gives the job's size (PMIx hands it out through its API only): "
         "export WORLD_SIZE (and LOCAL_RANK, LOCAL_WORLD_SIZE), or launch with OpenMPI's mpirun, "
         "srun or ddprun, which set it"});
  return topology_from_mpi("pmix", "PMIX_RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
}

/// Kubeflow's processes per pod: PET_NPROC_PER_NODE (an integer, or torchrun's auto/cpu/gpu).
inline std::optional<std::string> kubeflow_nproc() { return getenv_str("PET_NPROC_PER_NODE"); }

/// True when Kubeflow's operator set this pod's variables and no launcher in the pod replaced
/// them (ddprun and torchrun always set LOCAL_RANK).
inline bool kubeflow_without_launcher() {
  if (getenv_str("LOCAL_RANK")) return false;
  return getenv_str("PET_NODE_RANK") || getenv_str("PET_NNODES") || getenv_str("PET_NPROC_PER_NODE");
}

/// A pod of Kubeflow's PyTorchJob (RANK, WORLD_SIZE, PET_*) or TrainJob (PET_* only) that runs the
/// program itself, one process per pod. With PET_NPROC_PER_NODE > 1 the PyTorchJob's RANK is the
/// pod's index while WORLD_SIZE counts processes: only a launcher in the pod can start them.
inline topology topology_from_kubeflow() {
  topology t;
  t.source = "kubeflow";
  auto nproc_raw = kubeflow_nproc();
  auto nproc = nproc_raw ? parse_int(*nproc_raw) : std::optional<std::int64_t>(1);
  auto nnodes_raw = getenv_str("PET_NNODES");
  auto rank_raw = getenv_str("RANK");
  auto world_raw = getenv_str("WORLD_SIZE");
  // The operator's default nprocPerNode is "auto" (exported as PET_NPROC_PER_NODE): for a value
  // that is not a number it counts one process per pod, so WORLD_SIZE is the pod count. Where
  // WORLD_SIZE says so, the pod runs one process; without it (TrainJob) the count is unknown.
  if (nproc_raw && !nproc && world_raw && nnodes_raw && *world_raw == *nnodes_raw && parse_int(*world_raw))
    nproc = 1;
  if (!nproc || *nproc != 1)
    detail::throw_error(
        error_kind::config,
        {"kubeflow environment with PET_NPROC_PER_NODE=", nproc_raw.value_or(""),
         ": this pod is to run that many processes",
         (rank_raw ? detail::message({", and RANK=", *rank_raw, " is the pod's index while WORLD_SIZE=",
                                      world_raw.value_or("?"), " counts processes"})
                   : std::string()),
         ", but no launcher started them (LOCAL_RANK is not set): make the container's command "
         "`ddprun ./your_program ...`, which reads PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE, "
         "PET_MASTER_ADDR and PET_MASTER_PORT"});
  if (nnodes_raw && nnodes_raw->find(':') != std::string::npos)
    detail::throw_error(error_kind::config,
                        {"kubeflow environment with PET_NNODES=", *nnodes_raw,
                         ": an elastic range needs an elastic launcher in the pod: make "
                         "the container's command `ddprun ./your_program ...`, which reads "
                         "PET_NNODES=MIN:MAX and PET_RDZV_ENDPOINT (docs/elastic.md)"});
  auto nnodes = env_int("PET_NNODES", 1, 1 << 20);
  auto node = env_int("PET_NODE_RANK", 0, 1 << 20);
  auto rank = env_int("RANK", 0, 1 << 20);
  auto world = env_int("WORLD_SIZE", 1, 1 << 20);
  // One process per pod: the pod's index is the rank, the pod count the world size.
  if (rank && node && *rank != *node)
    detail::throw_error(error_kind::config,
                        {"contradictory kubeflow environment: RANK=", *rank, " but PET_NODE_RANK=", *node,
                         " with one process per pod (PET_NPROC_PER_NODE=1)"});
  if (world && nnodes && *world != *nnodes)
    detail::throw_error(error_kind::config,
                        {"contradictory kubeflow environment: WORLD_SIZE=", *world,
                         " but PET_NNODES=", *nnodes, " with one process per pod (PET_NPROC_PER_NODE=1)"});
  if (!(rank || node) || !(world || nnodes))
    detail::throw_error(
        error_kind::config,
        {"incomplete kubeflow environment: ",
         (!(rank || node) ? "neither RANK nor PET_NODE_RANK" : "neither WORLD_SIZE nor PET_NNODES"),
         " is set (the training operator sets them): set both in the pod's env"});
  t.rank = static_cast<int>(rank ? *rank : *node);
  t.world_size = static_cast<int>(world ? *world : *nnodes);
  t.node_rank = t.rank;
  t.nnodes = t.world_size;
  read_master(t);
  check_topology(t, rank ? "RANK" : "PET_NODE_RANK", world ? "WORLD_SIZE" : "PET_NNODES", "local rank",
                 "local process count");
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
      detail::throw_error(error_kind::config,
                          {"environment variable SLURM_STEP_TASKS_PER_NODE='", *spec, "' cannot be parsed"});
    if (node < seen + repeat) return static_cast<int>(tasks);
    seen += repeat;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  detail::throw_error(error_kind::config, {"environment variable SLURM_STEP_TASKS_PER_NODE='", *spec,
                                           "' names fewer nodes than SLURM_NODEID=", node, " needs"});
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
    detail::throw_error(error_kind::config, {"contradictory slurm environment: SLURM_NODEID=", t.node_rank,
                                             " is not below SLURM_NNODES=", t.nnodes});
  t.local_world_size = slurm_tasks_on_node(t.node_rank, t.world_size, t.nnodes);
  read_master(t);
  if (t.master_addr.empty()) {
    auto list = getenv_str("SLURM_STEP_NODELIST");
    if (!list) list = getenv_str("SLURM_JOB_NODELIST");
    if (!list)
      detail::throw_error(error_kind::config,
                          {"SLURM_PROCID is set but neither MASTER_ADDR nor SLURM_STEP_NODELIST is: "
                           "run under srun, or export MASTER_ADDR"});
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

namespace detail {

/// Whether PMI_RANK was set by Slurm's own PMI plugin (srun --mpi=pmi2), whose values are
/// SLURM_PROCID's and SLURM_NTASKS', rather than by an MPI launcher inside an allocation, whose
/// processes all inherit the batch step's SLURM_PROCID.
inline bool pmi_from_slurm() {
  auto procid = getenv_str("SLURM_PROCID");
  if (!procid || getenv_str("MPI_LOCALRANKID")) return false;
  auto size = getenv_str("PMI_SIZE"), ntasks = getenv_str("SLURM_NTASKS");
  return getenv_str("PMI_RANK") == procid && (!size || size == ntasks);
}

/// Whether PMIX_RANK was set by Slurm's PMIx plugin: its namespace is slurm.pmix.<job>.<step>
/// (without one, its rank is SLURM_PROCID's).
inline bool pmix_from_slurm() {
  auto procid = getenv_str("SLURM_PROCID");
  if (!procid) return false;
  if (auto ns = getenv_str("PMIX_NAMESPACE")) return ns->starts_with("slurm.pmix.");
  return getenv_str("PMIX_RANK") == procid;
}

/// An MPI launcher's rank variable: inside a Kubeflow pod, mpirun's processes see the
/// operator's RANK and PET_* too, and the launcher's set is theirs.
inline bool mpi_launcher_rank() {
  return getenv_str("OMPI_COMM_WORLD_RANK") || getenv_str("MV2_COMM_WORLD_RANK") || getenv_str("PMI_RANK") ||
         getenv_str("PMIX_RANK");
}

} // namespace detail

inline topology topology::from_env() {
  using detail::getenv_str;
  topology t;
  const bool kubeflow = detail::kubeflow_without_launcher() && !detail::mpi_launcher_rank();
  if (kubeflow && !getenv_str("RANK") && !getenv_str("PET_NODE_RANK"))
    detail::throw_error(
        error_kind::config,
        {"kubeflow environment (PET_NNODES=", getenv_str("PET_NNODES").value_or(""),
         ", PET_NPROC_PER_NODE=", getenv_str("PET_NPROC_PER_NODE").value_or(""),
         ") with neither RANK nor PET_NODE_RANK: an elastic PyTorchJob (elasticPolicy) hands "
         "ranks out through torchrun's rendezvous only, which ddp does not run; give the job a "
         "fixed number of workers (no elasticPolicy), or set RANK and WORLD_SIZE"});
  if (kubeflow)
    t = detail::topology_from_kubeflow();
  else if (getenv_str("RANK") && !(detail::kubeflow_without_launcher() && detail::mpi_launcher_rank()))
    t = detail::topology_from_torchrun();
  else if (getenv_str("OMPI_COMM_WORLD_RANK"))
    t = detail::topology_from_openmpi();
  else if (getenv_str("MV2_COMM_WORLD_RANK"))
    t = detail::topology_from_mvapich();
  // Slurm's PMI plugins set PMI_RANK (PMIX_RANK) too: then SLURM's own set, complete, is read; a
  // leftover SLURM_PROCID under another launcher is not (decided by the values).
  else if (getenv_str("PMI_RANK") && !detail::pmi_from_slurm())
    t = detail::topology_from_mpich();
  else if (getenv_str("PMIX_RANK") && !detail::pmix_from_slurm())
    t = detail::topology_from_pmix();
  else if (getenv_str("SLURM_PROCID"))
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
    detail::throw_error(error_kind::backend,
                        {"rank ", t.rank, ": no visible CUDA device (check CUDA_VISIBLE_DEVICES)"}, t.rank);
  if (t.local_world_size <= visible_devices) return t.local_rank;
  if (visible_devices == 1) return 0;
  detail::throw_error(
      error_kind::config,
      {"rank ", t.rank, " (local rank ", t.local_rank, "): ", t.local_world_size,
       " ranks on this node but only ", visible_devices,
       " CUDA devices visible (CUDA_VISIBLE_DEVICES), and NCCL needs one GPU per rank: start "
       "at most ",
       visible_devices,
       " ranks per node, make one device visible to each rank (SLURM --gpus-per-task=1), or use "
       "ddp::gloo, whose ranks may share a GPU"},
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
      detail::throw_error(error_kind::config, {"command line: ", opt, " needs a local rank (a ",
                                               "non-negative integer), got '", value, "'"});
    if (found && *found != *v)
      detail::throw_error(error_kind::config,
                          {"command line: the local rank is given twice, as ", *found, " and ", *v});
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
      detail::throw_error(error_kind::config,
                          {"command line says --local_rank=", *found, " but LOCAL_RANK=", *env,
                           ": the option and the environment must come from the same launcher"});
  }
  return found;
}

DDP_END_NAMESPACE

#endif // DDP_TOPOLOGY_HPP
