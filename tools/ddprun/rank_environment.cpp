#include "rank_environment.hpp"

#include <cstdlib>
#include <string_view>
#include <unistd.h>

namespace ddprun {
namespace {

/// What ddprun sets itself, so the user's value does not reach the rank twice; LD_PRELOAD only
/// under --crash-report (which keeps the user's).
bool set_by_ddprun(const job& j, std::string_view kv) {
  for (std::string_view n : {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "GROUP_RANK=",
                             "NODE_RANK=", "MASTER_ADDR=", "MASTER_PORT=", "DDP_TOKEN=", "DDP_FAILURE_FILE=",
                             "DDP_STORE_IN_LAUNCHER=", "DDP_RESTART_ROUND=", "DDP_IN_PROCESS_RECOVERY=",
                             "TORCHELASTIC_USE_AGENT_STORE=", "DDP_ELASTIC_JOINERS=", "DDP_ELASTIC_JOINER="})
    if (kv.starts_with(n)) return true;
  return !j.crash_report.empty() && kv.starts_with("LD_PRELOAD=");
}

} // namespace

std::vector<std::string> rank_environment(const job& j, int local, int round, const std::string& note_file,
                                          const std::string& joiner) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (!set_by_ddprun(j, *e)) env.emplace_back(*e);
  auto set = [&](const char* n, const std::string& v) { env.push_back(std::string(n) + "=" + v); };
  set("RANK", std::to_string(j.node_rank * j.nproc + local));
  set("LOCAL_RANK", std::to_string(local));
  set("WORLD_SIZE", std::to_string(j.nnodes * j.nproc));
  set("LOCAL_WORLD_SIZE", std::to_string(j.nproc));
  set("GROUP_RANK", std::to_string(j.node_rank));
  set("NODE_RANK", std::to_string(j.node_rank));
  set("MASTER_ADDR", j.master_addr);
  set("MASTER_PORT", std::to_string(j.master_port));
  set("DDP_TOKEN", j.token);
  set("DDP_STORE_IN_LAUNCHER", "1");
  set("DDP_RESTART_ROUND", std::to_string(round));
  if (j.in_process_recovery) set("DDP_IN_PROCESS_RECOVERY", "1");
  if (j.starts_joiners()) set("DDP_ELASTIC_JOINERS", "1");
  if (!joiner.empty()) set("DDP_ELASTIC_JOINER", joiner);
  if (!note_file.empty()) set("DDP_FAILURE_FILE", note_file);
  if (!j.crash_report.empty()) {
    // After whatever the user preloads already: a sanitizer's runtime must come first.
    const char* before = std::getenv("LD_PRELOAD");
    set("LD_PRELOAD",
        (before != nullptr && *before != '\0' ? std::string(before) + " " : "") + j.crash_report);
  }
  return env;
}

} // namespace ddprun
