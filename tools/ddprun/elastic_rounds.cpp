#include "elastic_rounds.hpp"

#include "agent_heartbeat.hpp"
#include "elastic_rendezvous.hpp"
#include "elastic_wait.hpp"
#include "restarts.hpp"
#include "round.hpp"

#include <ddp/error.hpp>

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
    if (j.elastic.store_host_by_address)
      std::fprintf(stderr, "ddprun: serving the store on %s:%d: this machine carries that address\n",
                   j.master_addr.c_str(), j.store_port);
    if (host_)
      watch_ = std::make_unique<heartbeat_watch>(j);
    else
      beat_ = std::make_unique<agent_heartbeat>(j, id_);
  }

  int run() {
    int round = host_ ? 0 : round_to_join(j_);
    if (host_) open_round(j_, round);
    for (;;) {
      const auto m = join_round(j_, id_, round, watch_.get());
      std::string verdict;
      if (!m) {
        std::fprintf(stderr, "ddprun: agent %ld: round %d is full or under way; waiting for the next one\n",
                     id_, round);
        verdict = wait_for_verdict(round);
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
    return host_ ? decide(m, round, ended_value(out)) : wait_for_verdict(round);
  }

  /// The host, at each look at the store during a round: must it end? `finishing`: a local rank
  /// ended well; so has a member whose word is "ok": the job is ending, and a join must not undo
  /// finished work (the newcomer learns that the job finished without it).
  std::optional<std::string> check(const membership& m, int round, bool finishing) {
    for (long id : m.agents)
      if (id != id_ && watch_->lapsed(*j_.store, id))
        return "1 node " + std::to_string(m.node_rank_of(id)) + " (agent " + std::to_string(id) +
               ") was lost: no heartbeat for " + std::to_string(watch_->timeout().count()) + " ms";
    if (finishing || static_cast<int>(m.agents.size()) >= j_.elastic.max_nodes ||
        joins_so_far(j_, round) <= m.joined_at_close)
      return std::nullopt;
    for (long id : m.agents)
      if (id != id_ && j_.store->try_get(elastic_round_key(round, "ended/" + std::to_string(id))) == "ok")
        return std::nullopt;
    return "0 a new node asked to join; the ranks start again with it";
  }

  /// The host: waits for every member's word or for its heartbeat to lapse, then decides. No
  /// other deadline: a member whose heartbeat beats is alive, its ranks may run for days.
  std::string decide(const membership& m, int round, const std::string& own) {
    std::map<long, std::string> ended{{id_, own}};
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
        steady::time_point::max());
    bool all_ok = true, failure = false, signal = false;
    int code = 0;
    std::string lost;
    for (long id : m.agents) {
      const std::string& v = ended[id];
      const std::string kind = first_word(v);
      all_ok = all_ok && kind == "ok";
      if (kind == "signal" && !signal) signal = true, code = code_in(v, 1);
      if (kind == "failed" && code == 0) code = code_in(v, 1);
      if (kind == "lost") lost += (lost.empty() ? "node " : ", node ") + std::to_string(m.node_rank_of(id));
      failure = failure || kind == "failed" || kind == "lost";
    }
    const auto report = j_.store->try_get("ddprun/r" + std::to_string(round) + "/failed");
    // The first failure reported is the job's, code and text (a later one is often its echo).
    if (report && first_word(*report) != "0") failure = true, code = signal ? code : code_in(*report, 0);
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

  /// Waits for the host's verdict as long as the host answers: its own ranks may run for days
  /// after this node's ended. Each look is bounded by --heartbeat-timeout (the connection's), so a
  /// silent host ends the wait with a ddp::error (run_elastic_rounds says so).
  std::string wait_for_verdict(int round) {
    std::optional<std::string> v;
    poll_until([&] { return (v = j_.store->try_get(elastic_round_key(round, "verdict"))).has_value(); },
               steady::time_point::max());
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
  } catch (const ddp::error& e) {
    if (j.elastic.store_host ||
        (e.kind() != ddp::error_kind::timeout && e.kind() != ddp::error_kind::peer_lost)) {
      std::fprintf(stderr, "ddprun: node %d: %s\n", j.node_rank, e.what());
      return 1;
    }
    std::fprintf(
        stderr,
        "ddprun: node %d: the store's host (node 0, %s:%d) is gone or does not answer (%s): an elastic "
        "job cannot go on without the node that serves its store; ending (docs/elastic.md, The store's "
        "host)\n",
        j.node_rank, j.master_addr.c_str(), j.store_port, e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddprun: node %d: the elastic agent failed: %s\n", j.node_rank, e.what());
    return 1;
  }
}

} // namespace ddprun
