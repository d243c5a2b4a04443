#include "elastic_rendezvous.hpp"

#include "elastic_wait.hpp"
#include "restarts.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ddprun {
namespace {

/// A slot's value: "<agent id> <ranks per node>".
std::string slot_value(const job& j, long id) { return std::to_string(id) + " " + std::to_string(j.nproc); }

/// How long a joining agent waits for the host to close a round: the host's own join timeout
/// and last call, and a margin for a loaded machine. Past it, the host is silent.
steady::duration close_patience(const job& j) {
  return seconds(j.elastic.join_timeout + j.elastic.last_call + 30.0);
}

/// The agents the host waits for in `round` besides the last call: every agent that asked to
/// join the round before (members and those left out), while its heartbeat beats. Without this
/// wait a short last call closes each round before the survivors are back, and the ones left out
/// restart it again at once, for ever.
class awaited_agents {
public:
  awaited_agents(job& j, long host_id, int round, heartbeat_watch* watch)
      : j_(j), round_(round), watch_(watch) {
    if (round == 0 || !watch) return;
    const long before = joins_so_far(j, round - 1);
    for (long s = 1; s <= before; ++s)
      if (auto v = j.store->try_get(elastic_round_key(round - 1, "slot/" + std::to_string(s)))) {
        long id = 0;
        std::istringstream(*v) >> id;
        if (id != host_id) waiting_.push_back(id);
      }
  }

  /// Whether each awaited agent has joined `round` or is lost.
  bool all_here() {
    const long n = joins_so_far(j_, round_);
    for (; seen_slots_ < n; ++seen_slots_) {
      auto v = j_.store->try_get(elastic_round_key(round_, "slot/" + std::to_string(seen_slots_ + 1)));
      if (!v) break; // written a moment after the slot was taken
      long id = 0;
      std::istringstream(*v) >> id;
      std::erase(waiting_, id);
    }
    std::erase_if(waiting_, [&](long id) { return watch_->lapsed(*j_.store, id); });
    return waiting_.empty();
  }

private:
  job& j_;
  const int round_;
  heartbeat_watch* watch_;
  std::vector<long> waiting_;
  long seen_slots_ = 0;
};

/// The host's wait: until MAX joined, or MIN and both the last call passed and the agents of the
/// round before are back (or lost); at the join timeout, closes with MIN or more. job_ends (after
/// closing the round as failed, so every agent says the same) when MIN never came.
long wait_for_joins(job& j, long host_id, int round, heartbeat_watch* watch) {
  const auto& e = j.elastic;
  const auto opened = steady::now();
  auto changed = opened;
  long joined = 0;
  awaited_agents awaited(j, host_id, round, watch);
  poll_until(
      [&] {
        const long n = joins_so_far(j, round);
        if (n != joined) changed = steady::now();
        joined = n;
        return joined >= e.max_nodes ||
               (joined >= e.min_nodes && steady::now() - changed >= seconds(e.last_call) &&
                awaited.all_here());
      },
      opened + seconds(e.join_timeout));
  if (joined >= e.min_nodes) return joined;
  std::ostringstream why;
  why << "round " << round << " of the elastic rendezvous did not reach its " << e.min_nodes
      << " nodes (--nnodes " << e.min_nodes << ":" << e.max_nodes << "): " << joined << " joined within "
      << e.join_timeout << " s (--rdzv-join-timeout); start more nodes, or lower MIN";
  j.store->set(elastic_round_key(round, "closed"), "fail 1 " + why.str());
  throw job_ends(1, why.str());
}

/// The host: members in node-rank order, itself first, at most MAX (the first to join).
membership close_round(job& j, long host_id, int round, heartbeat_watch* watch) {
  membership m;
  m.joined_at_close = wait_for_joins(j, host_id, round, watch);
  // Each agent writes its slot right after taking it: moments, not a wait. One that died in
  // between never does: after 10 s it is left out.
  std::vector<std::optional<std::string>> values(static_cast<std::size_t>(m.joined_at_close));
  poll_until(
      [&] {
        bool all = true;
        for (std::size_t s = 0; s < values.size(); ++s) {
          if (!values[s])
            values[s] = j.store->try_get(elastic_round_key(round, "slot/" + std::to_string(s + 1)));
          all = all && values[s].has_value();
        }
        return all;
      },
      steady::now() + std::chrono::seconds(10));
  m.agents.push_back(host_id);
  for (auto& slot : values) {
    if (!slot) continue;
    const std::string& v = *slot;
    long id = 0;
    int nproc = 0;
    std::istringstream(v) >> id >> nproc;
    if (id == host_id || static_cast<int>(m.agents.size()) >= j.elastic.max_nodes) continue;
    if (nproc != j.nproc) {
      const std::string why = "node agent " + std::to_string(id) + " runs --nproc-per-node " +
                              std::to_string(nproc) + ", the store's host " + std::to_string(j.nproc) +
                              ": give every node the same --nproc-per-node";
      j.store->set(elastic_round_key(round, "closed"), "fail 2 " + why);
      throw job_ends(2, why);
    }
    m.agents.push_back(id);
  }
  // By agent id after the host: survivors keep their order from round to round, newcomers come last.
  std::sort(m.agents.begin() + 1, m.agents.end());
  std::string closed = "ok " + std::to_string(m.joined_at_close);
  for (long id : m.agents)
    closed += " " + std::to_string(id);
  j.store->set(elastic_round_key(round, "closed"), closed);
  return m;
}

/// Reads "ok <joined> <id>..." or "fail <code> <why>".
membership parse_closed(const std::string& v) {
  if (v.rfind("fail ", 0) == 0) {
    const auto at = v.find(' ', 5);
    throw job_ends(reported_code(v.substr(5)), at == std::string::npos ? "" : v.substr(at + 1));
  }
  std::istringstream in(v.substr(3));
  membership m;
  in >> m.joined_at_close;
  for (long id; in >> id;)
    m.agents.push_back(id);
  return m;
}

} // namespace

int membership::node_rank_of(long agent_id) const {
  auto it = std::find(agents.begin(), agents.end(), agent_id);
  return it == agents.end() ? -1 : static_cast<int>(it - agents.begin());
}

std::string elastic_key(const std::string& what) { return "ddprun/e/" + what; }

std::string elastic_round_key(int round, const std::string& what) {
  return "ddprun/e/r" + std::to_string(round) + "/" + what;
}

long register_agent(job& j) { return j.store->add(elastic_key("agents"), 1); }

void open_round(job& j, int round) { j.store->set(elastic_key("current"), std::to_string(round)); }

int round_to_join(job& j) {
  std::optional<std::string> v;
  if (!poll_until([&] { return (v = j.store->try_get(elastic_key("current"))).has_value(); },
                  steady::now() + seconds(j.elastic.join_timeout)))
    throw job_ends(1, "the store's host opened no round within --rdzv-join-timeout " +
                          std::to_string(j.elastic.join_timeout) + " s");
  return std::stoi(*v);
}

long joins_so_far(job& j, int round) { return j.store->add(elastic_round_key(round, "joined"), 0); }

std::optional<membership> join_round(job& j, long agent_id, int round, heartbeat_watch* watch) {
  const long slot = j.store->add(elastic_round_key(round, "joined"), 1);
  j.store->set(elastic_round_key(round, "slot/" + std::to_string(slot)), slot_value(j, agent_id));
  membership m;
  if (j.elastic.store_host)
    m = close_round(j, agent_id, round, watch);
  else {
    std::optional<std::string> v;
    if (!poll_until([&] { return (v = j.store->try_get(elastic_round_key(round, "closed"))).has_value(); },
                    steady::now() + close_patience(j)))
      throw job_ends(1, "the store's host did not close round " + std::to_string(round) +
                            " of the rendezvous in time (--rdzv-join-timeout + --rdzv-last-call + 30 s)");
    m = parse_closed(*v);
  }
  if (m.node_rank_of(agent_id) < 0) return std::nullopt;
  return m;
}

} // namespace ddprun
