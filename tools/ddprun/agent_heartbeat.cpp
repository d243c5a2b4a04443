#include "agent_heartbeat.hpp"

namespace ddprun {
namespace {

std::chrono::milliseconds heartbeat_timeout(const job& j) {
  return std::chrono::milliseconds(static_cast<long>(j.elastic.heartbeat_timeout * 1000));
}

} // namespace

std::string heartbeat_key(long agent_id) { return "ddprun/e/hb/" + std::to_string(agent_id); }

agent_heartbeat::agent_heartbeat(const job& j, long agent_id)
    // Each bump is bounded by the timeout: a store that does not answer within it is gone.
    : store_(j.store->connect_again(heartbeat_timeout(j))), key_(heartbeat_key(agent_id)),
      every_(heartbeat_timeout(j) / 3), timeout_(heartbeat_timeout(j)), thread_([this] { beat(); }) {}

agent_heartbeat::~agent_heartbeat() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    store_->shutdown_connection(); // a bump in flight ends at once
  }
  wake_.notify_all();
  thread_.join();
}

void agent_heartbeat::beat() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    ddp::tcp_store& store = *store_;
    lock.unlock();
    bool beat = true;
    try {
      store.add(key_, 1);
    } catch (const std::exception&) { beat = false; }
    std::unique_ptr<ddp::tcp_store> again;
    // One late answer marks a connection broken for good: dial again, or the host would count a
    // live agent lost. A store that is really gone fails the agent's own requests, which say so.
    if (!beat) try {
        again = store.connect_again(timeout_);
      } catch (const std::exception&) {}
    lock.lock();
    if (again && !stop_) store_ = std::move(again);
    if (!stop_) wake_.wait_for(lock, beat ? every_ : every_ / 4, [this] { return stop_; });
  }
}

heartbeat_watch::heartbeat_watch(const job& j) : timeout_(heartbeat_timeout(j)) {}

bool heartbeat_watch::lapsed(ddp::tcp_store& store, long agent_id) {
  const auto count = store.add(heartbeat_key(agent_id), 0);
  const auto now = std::chrono::steady_clock::now();
  auto& s = seen_[agent_id];
  if (s.count != count) {
    s.count = count;
    s.since = now;
    return false;
  }
  return now - s.since >= timeout_;
}

} // namespace ddprun
