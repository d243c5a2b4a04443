#include "elastic_rounds.hpp"

#include "agent_heartbeat.hpp"
#include "elastic_rendezvous.hpp"
#include "elastic_wait.hpp"
#include "restarts.hpp"
#include "round.hpp"

#include <cstdio>
#include <map>
#include <memory>

namespace ddprun {
namespace {

std::string first_word(const std::string& s) { return s.substr(0, s.find(' ')); }
/// What follows the first `n` words of `s`.
std::string after_words(const std::string& s, int n) {
  std::size_t at = 0;
  for (int i = 0; i < n; ++i) {
    at = s.find(' ', at);
    if (at == std::string::npos) return {};
    ++at;
  }
  return s.substr(at);
}
int code_in(const std::string& s, int word) { return reported_code(after_words(s, word)); }

/// How this node's round ended, for the host: "ok", "signal <code>", "stopped <code>" (for a
/// report from elsewhere) or "failed <code> <what>".
std::string ended_value(const round_outcome& o) {
  if (o.user_signal) return "signal " + std::to_string(o.exit_code);
  if (!o.failed) return "ok";
  if (o.stopped_for_other_node) return "stopped " + std::to_string(o.exit_code);
  return "failed " + std::to_string(o.exit_code) + " " + o.what;
}

class elastic_agent {
public:
  explicit elastic_agent(job& j) : j_(j), id_(register_agent(j)), host_(j.elastic.store_host) {
    if (host_)
      watch_ = std::make_unique<heartbeat_watch>(j);
    else
      beat_ = std::make_unique<agent_heartbeat>(j, id_);
  }

  int run() {
    int round = host_ ? 0 : round_to_join(j_);
    if (host_) open_round(j_, round);
    for (;;) {
      const auto m = join_round(j_, id_, round);
      std::string verdict;
      if (!m) {
        std::fprintf(stderr, "ddprun: agent %ld: round %d is full or under way; waiting for the next one\n",
                     id_, round);
        verdict = wait_for_verdict(round, false);
      } else
        verdict = take_part(*m, round);
      const std::string kind = first_word(verdict);
      if (kind == "done") {
        if (!m) std::fprintf(stderr, "ddprun: agent %ld: the job finished without this node\n", id_);
        return 0;
      }
      if (kind == "next") {
        std::fprintf(stderr,
                     "ddprun: agent %ld: round %d ended (%s); the nodes meet again for round %d (failures "
                     "counted: %s of --max-restarts %d)\n",
                     id_, round, after_words(verdict, 2).c_str(), round + 1,
                     first_word(after_words(verdict, 1)).c_str(), j_.max_restarts);
        ++round;
        if (host_) open_round(j_, round);
        continue;
      }
      const int code = code_in(verdict, 1);
      if (kind == "end")
        std::fprintf(
            stderr,
            "ddprun: the job failed in round %d and --max-restarts %d are spent: %s (ddprun exits with "
            "%d)\n",
            round, j_.max_restarts, after_words(verdict, 2).c_str(), code);
      return own_signal_code_ ? own_signal_code_ : code;
    }
  }

private:
  /// One round as a member: run the ranks, say how it ended, learn the verdict.
  std::string take_part(const membership& m, int round) {
    j_.nnodes = static_cast<int>(m.agents.size());
    j_.node_rank = m.node_rank_of(id_);
    std::fprintf(stderr, "ddprun: node %d (agent %ld): round %d: %d nodes, world size %d\n", j_.node_rank,
                 id_, round, j_.nnodes, j_.nnodes * j_.nproc);
    const round_outcome out =
        host_ ? run_round(j_, round, [&](bool finishing) { return check(m, round, finishing); })
              : run_round(j_, round);
    if (out.user_signal) {
      own_signal_code_ = out.exit_code;
      report_round_failure(
          j_, round, std::to_string(out.exit_code) + " interrupted on node " + std::to_string(j_.node_rank));
    }
    j_.store->set(elastic_round_key(round, "ended/" + std::to_string(id_)), ended_value(out));
    return host_ ? decide(m, round, ended_value(out)) : wait_for_verdict(round, true);
  }

  /// The host, at each look at the store during a round: must it end?
  std::optional<std::string> check(const membership& m, int round, bool finishing) {
    for (long id : m.agents)
      if (id != id_ && watch_->lapsed(*j_.store, id))
        return "1 node " + std::to_string(m.node_rank_of(id)) + " (agent " + std::to_string(id) +
               ") was lost: no heartbeat for " + std::to_string(watch_->timeout().count()) + " ms";
    if (!finishing && static_cast<int>(m.agents.size()) < j_.elastic.max_nodes &&
        joins_so_far(j_, round) > m.joined_at_close)
      return "0 a new node asked to join; the ranks start again with it";
    return std::nullopt;
  }

  /// The host: waits for every member's word (a lost one's heartbeat lapses), then decides.
  std::string decide(const membership& m, int round, const std::string& own) {
    std::map<long, std::string> ended{{id_, own}};
    const auto deadline = steady::now() + watch_->timeout() + seconds(4 * j_.grace + 30.0);
    poll_until(
        [&] {
          bool all = true;
          for (long id : m.agents) {
            if (ended.count(id)) continue;
            if (auto v = j_.store->try_get(elastic_round_key(round, "ended/" + std::to_string(id))))
              ended[id] = *v;
            else if (watch_->lapsed(*j_.store, id))
              ended[id] = "lost";
            else
              all = false;
          }
          return all;
        },
        deadline);
    bool all_ok = true, failure = false, signal = false;
    int code = 0;
    std::string lost;
    for (long id : m.agents) {
      const std::string v = ended.count(id) ? ended[id] : "lost"; // silent past the deadline: lost
      const std::string kind = first_word(v);
      all_ok = all_ok && kind == "ok";
      if (kind == "signal" && !signal) signal = true, code = code_in(v, 1);
      if (kind == "failed" && code == 0) code = code_in(v, 1);
      if (kind == "lost") lost += (lost.empty() ? "node " : ", node ") + std::to_string(m.node_rank_of(id));
      failure = failure || kind == "failed" || kind == "lost";
    }
    const auto report = j_.store->try_get("ddprun/r" + std::to_string(round) + "/failed");
    if (report && first_word(*report) != "0") failure = true;
    std::string reason = report ? after_words(*report, 1) : "";
    if (!lost.empty() && reason.find(" was lost") == std::string::npos)
      reason += (reason.empty() ? "" : "; ") + lost + " lost: no heartbeat, no word on the round";
    std::string verdict;
    if (signal)
      verdict = "stop " + std::to_string(code);
    else if (all_ok)
      verdict = "done";
    else if (failure && ++failures_ > j_.max_restarts)
      verdict = "end " + std::to_string(code ? code : report ? code_in(*report, 0) : 1) + " " + reason;
    else
      verdict = "next " + std::to_string(failures_) + " " + reason;
    j_.store->set(elastic_round_key(round, "verdict"), verdict);
    return verdict;
  }

  /// A member waits as long as the host may take to decide; a newcomer waits for the round to end.
  std::string wait_for_verdict(int round, bool member) {
    const auto deadline = member ? steady::now() + seconds(j_.elastic.heartbeat_timeout + 4 * j_.grace + 60.0)
                                 : steady::time_point::max();
    std::optional<std::string> v;
    if (!poll_until([&] { return (v = j_.store->try_get(elastic_round_key(round, "verdict"))).has_value(); },
                    deadline))
      throw job_ends(1, "the store's host gave no verdict on round " + std::to_string(round) + " in time");
    return *v;
  }

  job& j_;
  const long id_;
  const bool host_;
  std::unique_ptr<agent_heartbeat> beat_;  ///< every agent but the host
  std::unique_ptr<heartbeat_watch> watch_; ///< the host
  int failures_ = 0;                       ///< the host: rounds that failed, against --max-restarts
  int own_signal_code_ = 0;
};

} // namespace

int run_elastic_rounds(job& j) {
  try {
    elastic_agent agent(j);
    return agent.run();
  } catch (const job_ends& e) {
    std::fprintf(stderr, "ddprun: node %d: %s\n", j.node_rank, e.what());
    return e.code;
  } catch (const std::exception& e) {
    if (j.elastic.store_host) {
      std::fprintf(stderr, "ddprun: node 0 (the store's host): %s\n", e.what());
      return 1;
    }
    std::fprintf(
        stderr,
        "ddprun: node %d: the store's host (node 0, %s:%d) is gone or does not answer (%s): an elastic "
        "job cannot go on without the node that serves its store; ending (docs/elastic.md, The store's "
        "host)\n",
        j.node_rank, j.master_addr.c_str(), j.store_port, e.what());
    return 1;
  }
}

} // namespace ddprun
