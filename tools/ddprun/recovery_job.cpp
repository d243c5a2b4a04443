#include "recovery_job.hpp"

#include "agent_heartbeat.hpp"
#include "node_incarnation.hpp"
#include "node_rejoin.hpp"
#include "signals.hpp"
#include "verdict.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

namespace ddprun {
namespace {

using clock = std::chrono::steady_clock;
constexpr auto look_every = std::chrono::milliseconds(100);

std::string ends_text(const std::vector<rank_end>& ends) {
  std::string s;
  for (const auto& e : ends)
    s += std::to_string(e.rank) + " " + std::to_string(e.code) + " " + e.what + "\n";
  return s;
}

void read_ends(const std::string& text, std::map<int, rank_end>& into) {
  std::istringstream in(text);
  rank_end e;
  while (in >> e.rank >> e.code) {
    std::getline(in, e.what);
    if (!e.what.empty() && e.what.front() == ' ') e.what.erase(0, 1);
    into[e.rank] = e;
  }
}

std::chrono::milliseconds heartbeat_timeout(const job& j) {
  return std::chrono::milliseconds(static_cast<long>(j.elastic.heartbeat_timeout * 1000));
}

/// What an agent waiting for the job's end knows of the user's signals.
struct end_wait {
  bool signalled = false;                  ///< this agent got one already (in its round, or here)
  std::optional<std::pair<int, int>> stop; ///< the stop recorded: {node, signal}
};

/// A user's SIGINT, SIGTERM or SIGQUIT while the agent waits for the job's end: this agent's first
/// asks every node to stop, unless a stop was recorded already (Note [A user's signal across
/// nodes]); its second ends this agent at once with 128 + signal. Throws when the store does not answer.
std::optional<int> interrupted(job& j, int round, end_wait& w) {
  auto sig = take_user_signal();
  if (!sig) return std::nullopt;
  if (w.signalled) {
    std::fprintf(stderr,
                 "ddprun: node %d: got a second signal (%d) while waiting for the job's end; exiting\n",
                 j.node_rank, *sig);
    return 128 + *sig;
  }
  w.signalled = true;
  if (!w.stop) w.stop = user_stop_recorded(*j.store, round);
  if (w.stop) {
    std::fprintf(stderr,
                 "ddprun: node %d: got signal %d: the job is stopping already (node %d's signal %d); waiting "
                 "for its end; a second signal ends this node's ddprun at once (--in-process-recovery)\n",
                 j.node_rank, *sig, w.stop->first, w.stop->second);
    return std::nullopt;
  }
  std::fprintf(stderr,
               "ddprun: node %d: got signal %d: asking every node to stop its ranks; a second signal "
               "ends this node's ddprun at once (--in-process-recovery)\n",
               j.node_rank, *sig);
  record_user_stop(*j.store, round, j.node_rank, *sig);
  w.stop = {j.node_rank, *sig};
  return std::nullopt;
}

int say_verdict(const job& j, const std::string& v) {
  const int code = verdict_code(v);
  std::fprintf(stderr, "ddprun: node %d: the job %s: %s (ddprun exits with %d; --in-process-recovery)\n",
               j.node_rank, code == 0 ? "succeeded" : "failed", v.substr(v.find(' ') + 1).c_str(), code);
  return code;
}

int host_end(job& j, int round, const std::vector<rank_end>& own, end_wait& w) {
  ddp::tcp_store& store = *j.store;
  std::map<int, rank_end> ends;
  read_ends(ends_text(own), ends);
  std::vector<int> waiting, live;
  std::map<int, int> incarnation; // of each node waited for: only its record counts
  for (int n = 1; n < j.nnodes; ++n) {
    waiting.push_back(n);
    incarnation[n] = 1;
  }
  heartbeat_watch hb(j);
  bool said = false;
  const auto since = clock::now();
  while (!waiting.empty()) {
    if (auto code = interrupted(j, round, w)) return *code;
    for (auto it = waiting.begin(); it != waiting.end();) {
      int& inc = incarnation[*it];
      inc = current_incarnation(store, *it, inc).number; // an agent started again took its place
      if (auto v = store.try_get(ends_record_key(round, *it, inc))) {
        read_ends(*v, ends);
        live.push_back(*it);
        store.set(counted_key(round, *it, inc), "1");
      } else if (!hb.lapsed(store, *it)) {
        ++it;
        continue;
      } else if (!count_incarnation_lost(store, *it, inc)) {
        ++inc; // an agent started again took its place first: wait for that one's record
        ++it;
        continue;
      } else {
        std::fprintf(stderr,
                     "ddprun: node 0: node %d's agent is lost (its heartbeat stood still for %g s, "
                     "--heartbeat-timeout): its ranks count as failed; no agent may rejoin in its place "
                     "now\n",
                     *it, j.elastic.heartbeat_timeout);
      }
      it = waiting.erase(it);
    }
    if (!said && !waiting.empty() && clock::now() - since > std::chrono::seconds(1)) {
      std::fprintf(stderr,
                   "ddprun: node 0: this node's ranks have ended; serving the store until every node's "
                   "ranks have (--in-process-recovery)\n");
      said = true;
    }
    if (!waiting.empty()) std::this_thread::sleep_for(look_every);
  }
  generations g(j.nnodes * j.nproc);
  g.update(store, round);
  const auto v = decide_verdict(user_stop_recorded(store, round), g, ends, j.nproc);
  store.set(ipr_key(round, "verdict"), v);
  // Each live node reads the verdict from this store: keep serving until it has, or is lost.
  const auto deadline = clock::now() + heartbeat_timeout(j);
  for (int n : live)
    while (!store.check({ipr_key(round, "read/" + std::to_string(n))}) && clock::now() < deadline &&
           !hb.lapsed(store, n))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return say_verdict(j, v);
}

int member_end(job& j, int round, const std::vector<rank_end>& own, end_wait& w) {
  std::string v;
  try {
    j.store->set(ends_record_key(round, j.node_rank, j.incarnation), ends_text(own));
    for (;;) {
      if (auto code = interrupted(j, round, w)) return *code;
      if (auto got = j.store->try_get(ipr_key(round, "verdict"))) {
        v = *got;
        // An agent that rejoined as the job ended: node 0 decided without its ranks.
        if (j.incarnation > 1 && !j.store->check({counted_key(round, j.node_rank, j.incarnation)})) {
          std::fprintf(stderr,
                       "ddprun: node %d: the job ended as this agent rejoined it: node 0 decided its end "
                       "without this agent's ranks (ddprun exits with %d; --in-process-recovery, "
                       "docs/elastic.md, A lost node rejoins)\n",
                       j.node_rank, rejoin_after_end_exit_code);
          return rejoin_after_end_exit_code;
        }
        break;
      }
      if (!w.stop) w.stop = user_stop_recorded(*j.store, round);
      std::this_thread::sleep_for(look_every);
    }
  } catch (const std::exception& e) {
    if (w.stop) {
      std::fprintf(stderr, "ddprun: %s\n", store_host_lost_after_stop(j, *w.stop, e.what()).c_str());
      return 128 + w.stop->second;
    }
    std::fprintf(stderr, "ddprun: %s\n", store_host_lost(j, e.what()).c_str());
    return 1;
  }
  // The receipt only shortens node 0's wait: it may have stopped waiting (and serving) already.
  try {
    j.store->set(ipr_key(round, "read/" + std::to_string(j.node_rank)), "1");
  } catch (const std::exception&) {}
  return say_verdict(j, v);
}

} // namespace

std::string ipr_key(int round, const std::string& what) {
  return "ddprun/r" + std::to_string(round) + "/ipr/" + what;
}

bool recovers_across_nodes(const job& j) { return j.in_process_recovery && j.nnodes > 1 && !j.is_elastic(); }

int run_recovery_job(job& j) {
  // An agent started again for a node the job had (the same --node-rank) rejoins only in the
  // place of a lost one (Note [A lost node's agent rejoins], node_rejoin.hpp).
  auto start = round_start::fresh;
  try {
    if (j.store->is_server()) record_joiners_admitted(j);
    if (j.store->add(ipr_key(0, "agent/" + std::to_string(j.node_rank)), 1) > 1) {
      if (auto code = check_node_rejoin(j)) return *code;
      start = round_start::rejoining_node;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddprun: %s\n", store_host_lost(j, e.what()).c_str());
    return 1;
  }
  std::unique_ptr<agent_heartbeat> beat; // node 0 serves the store: its loss is the job's end
  if (!j.store->is_server()) beat = std::make_unique<agent_heartbeat>(j, j.node_rank);
  round_outcome res;
  try {
    res = run_round(j, 0, {}, start);
  } catch (const std::exception& e) {
    // A rejoin's start asks the store for its joiners' identities before it starts any.
    if (start != round_start::rejoining_node) throw;
    std::fprintf(stderr, "ddprun: %s\n", store_host_lost(j, e.what()).c_str());
    return 1;
  }
  // The round said why: the store's host lost, after the user's stop or not.
  if (res.store_host_lost) return res.user_stop ? 128 + res.user_stop->second : 1;
  return end_recovery_job(j, 0, res);
}

int end_recovery_job(job& j, int round, const round_outcome& res) {
  end_wait w{res.signalled_here, res.user_stop};
  const auto& ends = res.ends;
  if (j.store->is_server()) {
    try {
      return host_end(j, round, ends, w);
    } catch (const std::exception& e) { // its own store, in process: only a bug gets here
      std::fprintf(stderr, "ddprun: node 0: could not decide how the job ended: %s\n", e.what());
      return 1;
    }
  }
  return member_end(j, round, ends, w);
}

// Not restarts' ddprun/stop: that one is a note for a human ("interrupted on node N"), written
// after the round; this one is read while the ranks run, and carries the signal every node forwards.
void record_user_stop(ddp::tcp_store& store, int round, int node, int sig) {
  store.set(ipr_key(round, "user_stop"), std::to_string(node) + " " + std::to_string(sig));
}

std::optional<std::pair<int, int>> user_stop_recorded(ddp::tcp_store& store, int round) {
  auto v = store.try_get(ipr_key(round, "user_stop"));
  if (!v) return std::nullopt;
  std::istringstream in(*v);
  std::pair<int, int> stop{0, 0};
  if (!(in >> stop.first >> stop.second)) return std::nullopt;
  return stop;
}

std::string store_host_lost(const job& j, const std::string& why) {
  return "node " + std::to_string(j.node_rank) + ": the store's host (node 0, " + j.master_addr + ":" +
         std::to_string(j.store_port) + ") was lost or does not answer (" + why +
         "): in-process recovery across nodes cannot go on without the node that serves its store; "
         "ending (docs/elastic.md, In-process recovery)";
}

std::string store_host_lost_after_stop(const job& j, std::pair<int, int> stop, const std::string& why) {
  return "node " + std::to_string(j.node_rank) + ": the store's host (node 0, " + j.master_addr + ":" +
         std::to_string(j.store_port) + ") went silent (" + why + ") once node " +
         std::to_string(stop.first) + "'s ddprun had got signal " + std::to_string(stop.second) +
         " from the user, which stops every node: ending with " + std::to_string(128 + stop.second) +
         " (--in-process-recovery)";
}

std::string store_host_silent_at_signal(const job& j, int sig, const std::string& why) {
  return "node " + std::to_string(j.node_rank) + ": the store's host (node 0, " + j.master_addr + ":" +
         std::to_string(j.store_port) + ") did not answer (" + why +
         ") while this node's ddprun got signal " + std::to_string(sig) +
         " from the user, which stops every node: ending with " + std::to_string(128 + sig) +
         " (--in-process-recovery)";
}

} // namespace ddprun
