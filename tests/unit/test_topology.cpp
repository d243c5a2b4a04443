#include <ddp/topology.hpp>

#include "../support/env_guard.hpp"

#include <doctest/doctest.h>

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
