// Test helper: clears every launcher variable ddp reads, sets the given ones,
// and restores the original environment when it goes out of scope.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddp_test {

inline const std::vector<std::string>& launcher_vars() {
  static const std::vector<std::string> v{"RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_RANK",
                                          "LOCAL_WORLD_SIZE",
                                          "GROUP_RANK",
                                          "NODE_RANK",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "OMPI_MCA_ess_base_jobid",
                                          "PMIX_NAMESPACE",
                                          "SLURM_PROCID",
                                          "SLURM_NTASKS",
                                          "SLURM_LOCALID",
                                          "SLURM_NODEID",
                                          "SLURM_NNODES",
                                          "SLURM_STEP_NODELIST",
                                          "SLURM_JOB_NODELIST",
                                          "SLURM_JOB_ID",
                                          "SLURM_STEP_TASKS_PER_NODE",
                                          "SLURM_TASKS_PER_NODE",
                                          "PET_NNODES",
                                          "PET_NODE_RANK",
                                          "PET_NPROC_PER_NODE",
                                          "PET_MASTER_ADDR",
                                          "PET_MASTER_PORT",
                                          "PMI_RANK",
                                          "PMI_SIZE",
                                          "MPI_LOCALRANKID",
                                          "MPI_LOCALNRANKS",
                                          "PMIX_RANK",
                                          "MV2_COMM_WORLD_RANK",
                                          "MV2_COMM_WORLD_SIZE",
                                          "MV2_COMM_WORLD_LOCAL_RANK",
                                          "MV2_COMM_WORLD_LOCAL_SIZE",
                                          "TORCHELASTIC_USE_AGENT_STORE",
                                          "DDP_STORE_PORT",
                                          "DDP_STORE_IN_LAUNCHER",
                                          "DDP_RESTART_ROUND",
                                          "DDP_TOKEN",
                                          "DDP_TIMEOUT"};
  return v;
}

class env_guard {
public:
  explicit env_guard(const std::map<std::string, std::string>& set = {}) {
    for (auto& n : launcher_vars()) {
      const char* v = std::getenv(n.c_str());
      saved_[n] = v ? std::optional<std::string>(v) : std::nullopt;
      ::unsetenv(n.c_str());
    }
    for (auto& [k, v] : set)
      ::setenv(k.c_str(), v.c_str(), 1);
  }
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;
  ~env_guard() {
    for (auto& [n, v] : saved_) {
      if (v)
        ::setenv(n.c_str(), v->c_str(), 1);
      else
        ::unsetenv(n.c_str());
    }
  }

private:
  std::map<std::string, std::optional<std::string>> saved_;
};

} // namespace ddp_test
