// Agent liveness under --nnodes MIN:MAX. Every agent but the store's host bumps a counter of its
// own in the store (ddprun/e/hb/<agent id>) from a thread with its own connection, every third
// of --heartbeat-timeout, so a busy watch loop never delays it. The store's host reads the
// counters and counts an agent lost when its counter has not moved for the whole timeout, by its
// own steady clock: no two hosts' clocks are compared.
#pragma once

#include "options.hpp"

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace ddprun {

/// The heartbeat of one agent, from construction to destruction.
class agent_heartbeat {
public:
  agent_heartbeat(const job& j, long agent_id);
  agent_heartbeat(const agent_heartbeat&) = delete;
  agent_heartbeat& operator=(const agent_heartbeat&) = delete;
  ~agent_heartbeat();

private:
  void beat();

  std::unique_ptr<ddp::tcp_store> store_;
  const std::string key_;
  const std::chrono::milliseconds every_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_; ///< guards stop_ and store_ (replaced when a bump failed)
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

/// The store host's view of the others' heartbeats.
class heartbeat_watch {
public:
  explicit heartbeat_watch(const job& j);
  /// Whether `agent_id`'s counter has stood still for the heartbeat timeout (first seen: alive).
  bool lapsed(ddp::tcp_store& store, long agent_id);
  std::chrono::milliseconds timeout() const { return timeout_; }

private:
  struct seen {
    std::int64_t count = -1;
    std::chrono::steady_clock::time_point since;
  };
  const std::chrono::milliseconds timeout_;
  std::map<long, seen> seen_;
};

/// The store key of an agent's heartbeat counter.
std::string heartbeat_key(long agent_id);

} // namespace ddprun
