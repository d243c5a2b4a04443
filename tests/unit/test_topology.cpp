#include <ddp/topology.hpp>

#include "../support/env_guard.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

using ddp_test::env_guard;

namespace {
/// The message of the config error that from_env() throws.
std::string config_error(const std::map<std::string, std::string>& env) {
  env_guard g(env);
  try {
    (void)ddp::topology::from_env();
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::config);
    return e.what();
  }
  FAIL("expected a config error");
  return {};
}
} // namespace

TEST_CASE("no launcher: a single process") {
  env_guard g;
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 0);
  CHECK(t.world_size == 1);
  CHECK(t.nnodes == 1);
  CHECK(t.master_addr.empty());
  CHECK(t.source == "default");
}

TEST_CASE("ddprun/torchrun variables") {
  env_guard g({{"RANK", "5"},
               {"WORLD_SIZE", "8"},
               {"LOCAL_RANK", "1"},
               {"LOCAL_WORLD_SIZE", "4"},
               {"GROUP_RANK", "1"},
               {"MASTER_ADDR", "node0"},
               {"MASTER_PORT", "29500"}});
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 5);
  CHECK(t.world_size == 8);
  CHECK(t.local_rank == 1);
  CHECK(t.local_world_size == 4);
  CHECK(t.node_rank == 1);
  CHECK(t.nnodes == 2);
  CHECK(t.master_addr == "node0");
  CHECK(t.master_port == 29500);
  CHECK(t.source == "ddprun/torchrun");
}

TEST_CASE("torchrun variables take precedence over SLURM and OpenMPI") {
  env_guard g({{"RANK", "0"},
               {"WORLD_SIZE", "1"},
               {"SLURM_PROCID", "3"},
               {"SLURM_NTASKS", "4"},
               {"OMPI_COMM_WORLD_RANK", "2"},
               {"OMPI_COMM_WORLD_SIZE", "4"}});
  CHECK(ddp::topology::from_env().source == "ddprun/torchrun");
}

TEST_CASE("OpenMPI variables") {
  env_guard g({{"OMPI_COMM_WORLD_RANK", "3"},
               {"OMPI_COMM_WORLD_SIZE", "4"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
               {"MASTER_ADDR", "10.0.0.1"},
               {"MASTER_PORT", "1234"}});
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 3);
  CHECK(t.world_size == 4);
  CHECK(t.local_rank == 1);
  CHECK(t.local_world_size == 2);
  CHECK(t.nnodes == 2);
  CHECK(t.node_rank == 1);
  CHECK(t.master_addr == "10.0.0.1");
  CHECK(t.master_port == 1234);
  CHECK(t.source == "openmpi");
}

TEST_CASE("OpenMPI on one node defaults to loopback and a job-derived port") {
  env_guard g({{"OMPI_COMM_WORLD_RANK", "0"},
               {"OMPI_COMM_WORLD_SIZE", "2"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
               {"OMPI_MCA_ess_base_jobid", "12345"}});
  auto t = ddp::topology::from_env();
  CHECK(t.master_addr == "127.0.0.1");
  CHECK(t.master_port >= 20000);
  CHECK(t.master_port <= 29999);
  CHECK(t.master_port == ddp::detail::port_from_job_id(std::string("12345")));
}

TEST_CASE("SLURM variables") {
  env_guard g({{"SLURM_PROCID", "5"},
               {"SLURM_NTASKS", "8"},
               {"SLURM_LOCALID", "1"},
               {"SLURM_NODEID", "2"},
               {"SLURM_NNODES", "4"},
               {"SLURM_STEP_NODELIST", "gpu[01-03,07],cpu5"},
               {"SLURM_JOB_ID", "4242"},
               {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"}});
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 5);
  CHECK(t.world_size == 8);
  CHECK(t.local_rank == 1);
  CHECK(t.local_world_size == 2);
  CHECK(t.node_rank == 2);
  CHECK(t.nnodes == 4);
  CHECK(t.master_addr == "gpu01");
  CHECK(t.master_port == 20000 + 4242 % 10000);
  CHECK(t.source == "slurm");
}

TEST_CASE("SLURM: MASTER_ADDR and MASTER_PORT override the derived ones") {
  env_guard g({{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "1"},
               {"SLURM_STEP_NODELIST", "a[1-2]"},
               {"SLURM_JOB_ID", "7"},
               {"MASTER_ADDR", "b"},
               {"MASTER_PORT", "999"}});
  auto t = ddp::topology::from_env();
  CHECK(t.master_addr == "b");
  CHECK(t.master_port == 999);
}

TEST_CASE("SLURM: uneven tasks per node") {
  env_guard g({{"SLURM_PROCID", "4"},
               {"SLURM_NTASKS", "5"},
               {"SLURM_LOCALID", "0"},
               {"SLURM_NODEID", "2"},
               {"SLURM_NNODES", "3"},
               {"SLURM_STEP_NODELIST", "n[1-3]"},
               {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}});
  auto t = ddp::topology::from_env();
  CHECK(t.local_world_size == 1);
}

TEST_CASE("bad values name the variable and the value") {
  auto m = config_error({{"RANK", "x1"}, {"WORLD_SIZE", "2"}});
  CHECK(m.find("RANK") != std::string::npos);
  CHECK(m.find("x1") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}});
  CHECK(m.find("WORLD_SIZE=0") != std::string::npos);

  m = config_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  CHECK(m.find("RANK=2") != std::string::npos);

  m = config_error({{"RANK", "0"}});
  CHECK(m.find("WORLD_SIZE") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-1"}});
  CHECK(m.find("LOCAL_RANK=-1") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}});
  CHECK(m.find("LOCAL_RANK=2") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "3"}});
  CHECK(m.find("LOCAL_WORLD_SIZE=3") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "0"}, {"NODE_RANK", "1"}});
  CHECK(m.find("NODE_RANK=1") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "2"}});
  CHECK(m.find("node rank 2") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}});
  CHECK(m.find("MASTER_PORT=70000") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "80a"}});
  CHECK(m.find("MASTER_PORT='80a'") != std::string::npos);

  m = config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}});
  CHECK(m.find("MASTER_ADDR") != std::string::npos);

  m = config_error({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  CHECK(m.find("OMPI_COMM_WORLD_RANK=4") != std::string::npos);

  m = config_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "abc"}});
  CHECK(m.find("OMPI_COMM_WORLD_SIZE='abc'") != std::string::npos);

  m = config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  CHECK(m.find("SLURM_STEP_NODELIST") != std::string::npos);

  m = config_error({{"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "2"},
                    {"SLURM_NODEID", "3"},
                    {"SLURM_NNODES", "2"},
                    {"SLURM_STEP_NODELIST", "a"}});
  CHECK(m.find("SLURM_NODEID=3") != std::string::npos);

  m = config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "gpu[01-"}});
  CHECK(m.find("gpu[01-") != std::string::npos);

  m = config_error({{"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "2"},
                    {"SLURM_STEP_NODELIST", "a"},
                    {"SLURM_STEP_TASKS_PER_NODE", "2(y3)"}});
  CHECK(m.find("2(y3)") != std::string::npos);

  m = config_error(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "a"}, {"SLURM_JOB_ID", "-5"}});
  CHECK(m.find("SLURM_JOB_ID=-5") != std::string::npos);
}

// The cluster launchers' variables, as each sets them for one process (from their sources:
// Kubeflow's training operator, MPICH's Hydra, Intel MPI, mpirun_rsh, PRRTE, Slurm's PMI plugins).
namespace {
/// Kubeflow's PyTorchJob for worker 1 of a master and two workers (pod index 2): MASTER_* and
/// PET_MASTER_* from the master's service and port, WORLD_SIZE = pods × nprocPerNode, RANK and
/// PET_NODE_RANK = the pod's index, PET_NNODES = pods, PET_NPROC_PER_NODE = nprocPerNode, whose
/// default is "auto" (one process per pod for the operator); nullptr: an operator that sets none.
std::map<std::string, std::string> pytorchjob_pod(const char* nproc) {
  std::map<std::string, std::string> env{{"MASTER_PORT", "23456"},
                                         {"PET_MASTER_PORT", "23456"},
                                         {"MASTER_ADDR", "mnist-master-0"},
                                         {"PET_MASTER_ADDR", "mnist-master-0"},
                                         {"RANK", "2"},
                                         {"PET_NODE_RANK", "2"},
                                         {"PET_NNODES", "3"}};
  const int per_pod = nproc && std::string_view(nproc) != "auto" ? std::stoi(nproc) : 1;
  env["WORLD_SIZE"] = std::to_string(3 * per_pod);
  if (nproc) env["PET_NPROC_PER_NODE"] = nproc;
  return env;
}
} // namespace

TEST_CASE("Kubeflow PyTorchJob, one process per pod: the pod's index is the rank") {
  for (const char* nproc : {"auto", static_cast<const char*>(nullptr), "1"}) {
    env_guard g(pytorchjob_pod(nproc));
    auto t = ddp::topology::from_env();
    CHECK(t.rank == 2);
    CHECK(t.world_size == 3);
    CHECK(t.local_rank == 0);
    CHECK(t.local_world_size == 1);
    CHECK(t.node_rank == 2);
    CHECK(t.nnodes == 3);
    CHECK(t.master_addr == "mnist-master-0");
    CHECK(t.master_port == 23456);
    CHECK(t.source == "kubeflow");
  }
}

TEST_CASE("Kubeflow PyTorchJob with nprocPerNode > 1: RANK is the pod, WORLD_SIZE the processes") {
  // Started by the operator itself, one process cannot be four ranks: one error that says so.
  auto m = config_error(pytorchjob_pod("4"));
  CHECK(m.find("PET_NPROC_PER_NODE=4") != std::string::npos);
  CHECK(m.find("RANK=2 is the pod's index while WORLD_SIZE=12 counts processes") != std::string::npos);
  CHECK(m.find("ddprun") != std::string::npos);
  // auto where WORLD_SIZE is not the pod count: not one process per pod either.
  auto env = pytorchjob_pod("auto");
  env["WORLD_SIZE"] = "12";
  m = config_error(env);
  CHECK(m.find("PET_NPROC_PER_NODE=auto") != std::string::npos);

  // ddprun in the pod (it reads PET_*) starts four ranks and sets their variables over the operator's.
  env = pytorchjob_pod("4");
  for (auto& [k, v] : std::map<std::string, std::string>{{"RANK", "9"},
                                                         {"WORLD_SIZE", "12"},
                                                         {"LOCAL_RANK", "1"},
                                                         {"LOCAL_WORLD_SIZE", "4"},
                                                         {"GROUP_RANK", "2"},
                                                         {"NODE_RANK", "2"}})
    env[k] = v;
  env_guard g(env);
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 9);
  CHECK(t.world_size == 12);
  CHECK(t.local_rank == 1);
  CHECK(t.local_world_size == 4);
  CHECK(t.node_rank == 2);
  CHECK(t.nnodes == 3);
  CHECK(t.master_addr == "mnist-master-0");
  CHECK(t.source == "ddprun/torchrun");
}

TEST_CASE("Kubeflow TrainJob: PET_* only") {
  // The torch plugin sets these five; PET_NODE_RANK comes from the Job's completion index.
  const std::map<std::string, std::string> pod{{"PET_NNODES", "2"},
                                               {"PET_NPROC_PER_NODE", "1"},
                                               {"PET_NODE_RANK", "1"},
                                               {"PET_MASTER_ADDR", "tj-node-0-0.tj"},
                                               {"PET_MASTER_PORT", "29400"}};
  {
    env_guard g(pod);
    auto t = ddp::topology::from_env();
    CHECK(t.rank == 1);
    CHECK(t.world_size == 2);
    CHECK(t.local_world_size == 1);
    CHECK(t.node_rank == 1);
    CHECK(t.nnodes == 2);
    CHECK(t.master_addr == "tj-node-0-0.tj");
    CHECK(t.master_port == 29400);
    CHECK(t.source == "kubeflow");
  }
  auto with = [&](const char* k, const char* v) {
    auto e = pod;
    e[k] = v;
    return e;
  };
  // Without WORLD_SIZE nothing tells how many processes auto means.
  auto m = config_error(with("PET_NPROC_PER_NODE", "auto"));
  CHECK(m.find("PET_NPROC_PER_NODE=auto") != std::string::npos);
  CHECK(m.find("ddprun") != std::string::npos);
  m = config_error(with("PET_NNODES", "1:4"));
  CHECK(m.find("PET_NNODES=1:4") != std::string::npos);
  m = config_error(with("PET_NODE_RANK", "2"));
  CHECK(m.find("PET_NODE_RANK=2 is not below PET_NNODES=2") != std::string::npos);
}

TEST_CASE("Kubeflow: contradictory or incomplete sets name both variables") {
  auto env = pytorchjob_pod(nullptr);
  env["PET_NODE_RANK"] = "1";
  auto m = config_error(env);
  CHECK(m.find("RANK=2 but PET_NODE_RANK=1") != std::string::npos);

  env = pytorchjob_pod(nullptr);
  env["PET_NNODES"] = "4";
  m = config_error(env);
  CHECK(m.find("WORLD_SIZE=3 but PET_NNODES=4") != std::string::npos);

  m = config_error({{"PET_NODE_RANK", "0"}});
  CHECK(m.find("neither WORLD_SIZE nor PET_NNODES") != std::string::npos);
}

TEST_CASE("MPICH's Hydra and Intel MPI: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS") {
  // mpiexec -n 4 -ppn 2 (Intel MPI sets the same four, with its I_MPI_* beside them).
  env_guard g({{"PMI_RANK", "3"},
               {"PMI_SIZE", "4"},
               {"MPI_LOCALRANKID", "1"},
               {"MPI_LOCALNRANKS", "2"},
               {"MASTER_ADDR", "n0"},
               {"MASTER_PORT", "1234"}});
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 3);
  CHECK(t.world_size == 4);
  CHECK(t.local_rank == 1);
  CHECK(t.local_world_size == 2);
  CHECK(t.node_rank == 1);
  CHECK(t.nnodes == 2);
  CHECK(t.master_addr == "n0");
  CHECK(t.master_port == 1234);
  CHECK(t.source == "mpich");
}

TEST_CASE("MPICH inside a SLURM allocation: PMI_* win over the batch step's SLURM_PROCID") {
  // mpiexec in an sbatch script: every process inherits the batch step's SLURM_PROCID=0.
  env_guard g({{"PMI_RANK", "1"},
               {"PMI_SIZE", "2"},
               {"MPI_LOCALRANKID", "1"},
               {"MPI_LOCALNRANKS", "2"},
               {"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "1"},
               {"SLURM_JOB_ID", "4242"},
               {"SLURM_JOB_NODELIST", "n1"}});
  auto t = ddp::topology::from_env();
  CHECK(t.source == "mpich");
  CHECK(t.rank == 1);
  CHECK(t.world_size == 2);
  CHECK(t.master_addr == "127.0.0.1");
  CHECK(t.master_port == 20000 + 4242 % 10000);
}

TEST_CASE("srun with Slurm's PMI plugins: SLURM's complete set is read") {
  // --mpi=pmi2 adds PMI_RANK/PMI_SIZE (no MPI_LOCALRANKID); --mpi=pmix adds PMIX_RANK.
  env_guard g({{"SLURM_PROCID", "3"},
               {"SLURM_NTASKS", "4"},
               {"SLURM_LOCALID", "1"},
               {"SLURM_NODEID", "1"},
               {"SLURM_NNODES", "2"},
               {"SLURM_STEP_NODELIST", "n[1-2]"},
               {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
               {"PMI_RANK", "3"},
               {"PMI_SIZE", "4"},
               {"PMIX_RANK", "3"},
               {"PMIX_NAMESPACE", "slurm.pmix.77.0"}});
  auto t = ddp::topology::from_env();
  CHECK(t.source == "slurm");
  CHECK(t.rank == 3);
  CHECK(t.local_world_size == 2);
  CHECK(t.master_addr == "n1");
}

TEST_CASE("another launcher inside an allocation: a leftover SLURM_PROCID does not win") {
  // The batch step's SLURM_PROCID=0 and SLURM_NTASKS=1 under each launcher's rank 1 of 2.
  const std::map<std::string, std::string> batch{
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_JOB_NODELIST", "n1"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    extra.insert(batch.begin(), batch.end());
    return extra;
  };
  {
    // MPICH without MPI_LOCALRANKID (e.g. an older Hydra): PMI_RANK differs from SLURM_PROCID.
    env_guard g(with({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
    auto t = ddp::topology::from_env();
    CHECK(t.source == "mpich");
    CHECK(t.rank == 1);
    CHECK(t.world_size == 2);
  }
  {
    // Its rank 0: the same rank as the batch step, but not the same size.
    env_guard g(with({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}));
    auto t = ddp::topology::from_env();
    CHECK(t.source == "mpich");
    CHECK(t.world_size == 2);
  }
  {
    // prterun inside sbatch: PRRTE's namespace, not Slurm's.
    env_guard g(with({{"PMIX_RANK", "1"}, {"PMIX_NAMESPACE", "prterun-n1-99@1"}, {"WORLD_SIZE", "2"}}));
    auto t = ddp::topology::from_env();
    CHECK(t.source == "pmix");
    CHECK(t.rank == 1);
    CHECK(t.world_size == 2);
  }
}

TEST_CASE("Kubeflow: an elastic worker-only job has no rank; mpirun in a pod is OpenMPI's") {
  // elasticPolicy: PET_NNODES=min:max, no RANK, no PET_NODE_RANK: not rank 0 of 1 in silence.
  auto m =
      config_error({{"PET_NNODES", "1:4"}, {"PET_NPROC_PER_NODE", "auto"}, {"PET_MASTER_PORT", "23456"}});
  CHECK(m.find("neither RANK nor PET_NODE_RANK") != std::string::npos);
  CHECK(m.find("PET_NNODES=1:4") != std::string::npos);
  // mpirun inside a PyTorchJob's pod: OMPI_* and no LOCAL_RANK beside the operator's variables.
  auto env = pytorchjob_pod("auto");
  for (auto& [k, v] : std::map<std::string, std::string>{{"OMPI_COMM_WORLD_RANK", "5"},
                                                         {"OMPI_COMM_WORLD_SIZE", "8"},
                                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})
    env[k] = v;
  env_guard g(env);
  auto t = ddp::topology::from_env();
  CHECK(t.source == "openmpi");
  CHECK(t.rank == 5);
  CHECK(t.world_size == 8);
}

TEST_CASE("MVAPICH: MV2_COMM_WORLD_*") {
  // mpirun_rsh -np 4 (two per host).
  env_guard g({{"MV2_COMM_WORLD_RANK", "2"},
               {"MV2_COMM_WORLD_SIZE", "4"},
               {"MV2_COMM_WORLD_LOCAL_RANK", "0"},
               {"MV2_COMM_WORLD_LOCAL_SIZE", "2"},
               {"MASTER_ADDR", "h0"},
               {"MASTER_PORT", "4321"}});
  auto t = ddp::topology::from_env();
  CHECK(t.rank == 2);
  CHECK(t.world_size == 4);
  CHECK(t.local_rank == 0);
  CHECK(t.local_world_size == 2);
  CHECK(t.node_rank == 1);
  CHECK(t.nnodes == 2);
  CHECK(t.source == "mvapich");
}

TEST_CASE("PMIx: PMIX_RANK, with the size from WORLD_SIZE") {
  // prterun sets PMIX_RANK and PMIX_NAMESPACE; the size is behind PMIx's API.
  const std::map<std::string, std::string> prte{{"PMIX_RANK", "1"}, {"PMIX_NAMESPACE", "prterun-h-4711@1"}};
  auto m = config_error(prte);
  CHECK(m.find("PMIX_RANK=1") != std::string::npos);
  CHECK(m.find("WORLD_SIZE") != std::string::npos);

  auto env = prte;
  env["WORLD_SIZE"] = "2";
  env_guard g(env);
  auto t = ddp::topology::from_env();
  CHECK(t.source == "pmix");
  CHECK(t.rank == 1);
  CHECK(t.world_size == 2);
  CHECK(t.nnodes == 2); // no local count given: one process per node assumed
  CHECK(t.master_port == ddp::detail::port_from_job_id(std::string("prterun-h-4711@1")));
}

TEST_CASE("OpenMPI 5 sets PMIX_RANK beside OMPI_COMM_WORLD_*: OpenMPI's set is read") {
  env_guard g({{"OMPI_COMM_WORLD_RANK", "1"},
               {"OMPI_COMM_WORLD_SIZE", "2"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
               {"PMIX_RANK", "1"},
               {"PMIX_NAMESPACE", "prterun-h-1@1"}});
  auto t = ddp::topology::from_env();
  CHECK(t.source == "openmpi");
  CHECK(t.master_addr == "127.0.0.1");
}

TEST_CASE("MPI launchers: an incomplete set names the missing variable") {
  auto m = config_error({{"PMI_RANK", "0"}, {"MPI_LOCALRANKID", "0"}});
  CHECK(m.find("PMI_SIZE is not set") != std::string::npos);
  m = config_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}});
  CHECK(m.find("MPI_LOCALRANKID is set but MPI_LOCALNRANKS is not") != std::string::npos);
  m = config_error(
      {{"MV2_COMM_WORLD_RANK", "0"}, {"MV2_COMM_WORLD_SIZE", "2"}, {"MV2_COMM_WORLD_LOCAL_SIZE", "2"}});
  CHECK(m.find("MV2_COMM_WORLD_LOCAL_SIZE is set but MV2_COMM_WORLD_LOCAL_RANK is not") != std::string::npos);
  m = config_error({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}});
  CHECK(m.find("PMI_RANK=2 is not below PMI_SIZE=2") != std::string::npos);
  m = config_error({{"MV2_COMM_WORLD_RANK", "0"},
                    {"MV2_COMM_WORLD_SIZE", "2"},
                    {"MV2_COMM_WORLD_LOCAL_RANK", "0"},
                    {"MV2_COMM_WORLD_LOCAL_SIZE", "3"}});
  CHECK(m.find("MV2_COMM_WORLD_LOCAL_SIZE=3 exceeds MV2_COMM_WORLD_SIZE=2") != std::string::npos);
}

TEST_CASE("the store port: MASTER_PORT, beside it under torch's elastic agent, or DDP_STORE_PORT") {
  const std::map<std::string, std::string> torchrun{
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29555"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    extra.insert(torchrun.begin(), torchrun.end());
    return extra;
  };
  {
    env_guard g(torchrun); // ddprun, torchrun --standalone: MASTER_PORT is free for ddp
    CHECK(ddp::topology::from_env().store_port == 29555);
  }
  {
    env_guard g(with({{"TORCHELASTIC_USE_AGENT_STORE", "False"}}));
    CHECK(ddp::topology::from_env().store_port == 29555);
  }
  {
    env_guard g(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}})); // static rendezvous: the agent holds it
    auto t = ddp::topology::from_env();
    CHECK(t.master_port == 29555);
    CHECK(t.store_port == 29556);
    auto why = ddp::detail::store_port_origin(t);
    CHECK(why.find("MASTER_PORT+1") != std::string::npos);
    CHECK(why.find("TORCHELASTIC_USE_AGENT_STORE") != std::string::npos);
  }
  {
    env_guard g(with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"DDP_STORE_PORT", "31000"}}));
    auto t = ddp::topology::from_env();
    CHECK(t.store_port == 31000);
    CHECK(ddp::detail::store_port_origin(t) == "DDP_STORE_PORT=31000");
  }
  {
    env_guard g(with({{"DDP_STORE_PORT", "31000"}})); // also without torch
    CHECK(ddp::topology::from_env().store_port == 31000);
  }
  {
    env_guard g({{"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "1"},
                 {"SLURM_STEP_NODELIST", "a"},
                 {"SLURM_JOB_ID", "7"},
                 {"DDP_STORE_PORT", "4000"}});
    auto t = ddp::topology::from_env();
    CHECK(t.master_port == 20007);
    CHECK(t.store_port == 4000);
  }
  {
    env_guard g;
    CHECK(ddp::topology::from_env().store_port == 0);
  }
  auto m = config_error(with({{"DDP_STORE_PORT", "0"}}));
  CHECK(m.find("DDP_STORE_PORT=0") != std::string::npos);
  m = config_error(with({{"DDP_STORE_PORT", "port"}}));
  CHECK(m.find("DDP_STORE_PORT='port'") != std::string::npos);
  m = config_error({{"RANK", "0"},
                    {"WORLD_SIZE", "1"},
                    {"MASTER_PORT", "65535"},
                    {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  CHECK(m.find("MASTER_PORT=65535") != std::string::npos);
  CHECK(m.find("DDP_STORE_PORT") != std::string::npos);
}

namespace {
/// consume_local_rank_arg on a copy of `args` (args[0] is the program): the returned value
/// and what is left of the command line.
std::pair<std::optional<int>, std::vector<std::string>> consume(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  auto v = ddp::consume_local_rank_arg(argc, argv.data());
  REQUIRE(argv[static_cast<std::size_t>(argc)] == nullptr);
  return {v, std::vector<std::string>(argv.begin(), argv.begin() + argc)};
}

std::string consume_error(std::vector<std::string> args) {
  try {
    (void)consume(std::move(args));
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::config);
    return e.what();
  }
  FAIL("expected a config error");
  return {};
}

using strings = std::vector<std::string>;
using env = std::map<std::string, std::string>;
} // namespace

TEST_CASE("consume_local_rank_arg strips torch.distributed.launch's option in every spelling") {
  env_guard g(env{{"LOCAL_RANK", "1"}});
  for (const strings& args : {strings{"prog", "--local_rank=1", "--epochs", "3"},
                              strings{"prog", "--local-rank=1", "--epochs", "3"},
                              strings{"prog", "--local_rank", "1", "--epochs", "3"},
                              strings{"prog", "--local-rank", "1", "--epochs", "3"},
                              strings{"prog", "--epochs", "--local_rank=1", "3"},
                              strings{"prog", "--epochs", "3", "--local_rank=1", "--local-rank=1"}}) {
    CAPTURE(args.size());
    auto [v, left] = consume(args);
    CHECK(v == 1);
    CHECK(left == strings{"prog", "--epochs", "3"});
  }
}

TEST_CASE("consume_local_rank_arg leaves other command lines alone") {
  env_guard g(env{{"LOCAL_RANK", "0"}});
  auto [v, left] = consume({"prog", "--local_ranks=2", "--local", "x", "--", "--local_rank=5"});
  CHECK(!v);
  CHECK(left == strings{"prog", "--local_ranks=2", "--local", "x", "--", "--local_rank=5"});
  auto [v2, left2] = consume({"prog"});
  CHECK(!v2);
  CHECK(left2 == strings{"prog"});
}

TEST_CASE("consume_local_rank_arg without LOCAL_RANK returns the value unchecked") {
  env_guard g;
  auto [v, left] = consume({"prog", "--local_rank=3"});
  CHECK(v == 3);
  CHECK(left == strings{"prog"});
}

TEST_CASE("consume_local_rank_arg: a mismatch or a bad value is a clear error") {
  env_guard g(env{{"LOCAL_RANK", "1"}});
  auto m = consume_error({"prog", "--local_rank=0"});
  CHECK(m.find("--local_rank=0") != std::string::npos);
  CHECK(m.find("LOCAL_RANK=1") != std::string::npos);
  m = consume_error({"prog", "--local-rank=x"});
  CHECK(m.find("--local-rank") != std::string::npos);
  CHECK(m.find("'x'") != std::string::npos);
  m = consume_error({"prog", "--local_rank"});
  CHECK(m.find("--local_rank") != std::string::npos);
  m = consume_error({"prog", "--local_rank=-1"});
  CHECK(m.find("'-1'") != std::string::npos);
  m = consume_error({"prog", "--local_rank=1", "--local-rank=2"});
  CHECK(m.find("twice") != std::string::npos);
}

TEST_CASE("cuda_device_for: LOCAL_RANK within the visible devices") {
  auto on = [](int local_rank, int local_world_size) {
    ddp::topology t;
    t.rank = 8 + local_rank;
    t.world_size = 16;
    t.local_rank = local_rank;
    t.local_world_size = local_world_size;
    return t;
  };
  // The node's ranks share one visible set (torchrun, ddprun, CUDA_VISIBLE_DEVICES=0,1,2,3).
  CHECK(ddp::cuda_device_for(on(0, 4), 4) == 0);
  CHECK(ddp::cuda_device_for(on(3, 4), 4) == 3);
  CHECK(ddp::cuda_device_for(on(1, 2), 8) == 1);
  CHECK(ddp::cuda_device_for(on(0, 1), 1) == 0);
  // One visible device per rank (SLURM --gpus-per-task=1): device 0 whatever the local rank.
  CHECK(ddp::cuda_device_for(on(5, 8), 1) == 0);
  CHECK(ddp::cuda_device_for(on(7, 8), 1) == 0);
  // More ranks on the node than visible GPUs: an error on every rank, not "Duplicate GPU".
  for (int lr : {0, 1, 3}) {
    try {
      (void)ddp::cuda_device_for(on(lr, 4), 2);
      FAIL("expected an error");
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::config);
      CHECK(e.rank() == 8 + lr);
      std::string m = e.what();
      CHECK(m.find("4 ranks on this node but only 2 CUDA devices") != std::string::npos);
      CHECK(m.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(ddp::cuda_device_for(on(0, 1), 0), ddp::error);
}

TEST_CASE("ddprun's part: DDP_STORE_IN_LAUNCHER and DDP_RESTART_ROUND") {
  const std::map<std::string, std::string> ddprun{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29555"}};
  {
    env_guard g(ddprun); // torchrun, srun, mpirun, by hand: rank 0 serves, no rounds
    auto t = ddp::topology::from_env();
    CHECK_FALSE(t.store_in_launcher);
    CHECK_FALSE(t.restart_round);
  }
  {
    auto env = ddprun;
    env["DDP_STORE_IN_LAUNCHER"] = "1";
    env["DDP_RESTART_ROUND"] = "3";
    env_guard g(env);
    auto t = ddp::topology::from_env();
    CHECK(t.store_in_launcher);
    CHECK(t.restart_round == 3);
    CHECK(t.store_port == 29555);
  }
  auto env = ddprun;
  env["DDP_STORE_IN_LAUNCHER"] = "yes";
  CHECK(config_error(env).find("DDP_STORE_IN_LAUNCHER='yes' must be 0 or 1") != std::string::npos);
  env = ddprun;
  env["DDP_RESTART_ROUND"] = "-1";
  CHECK(config_error(env).find("DDP_RESTART_ROUND") != std::string::npos);
}
