#include "restarts.hpp"

#include "elastic_rounds.hpp"
#include "recovery_job.hpp"

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/timeout.hpp>

#include <cstdio>

namespace ddprun {
namespace {

std::string round_key(int round, const std::string& what) {
  return "ddprun/r" + std::to_string(round) + "/" + what;
}

/// Several nodes with restarts: every node says how its round ended, then all
/// agree: the round failed if any node failed (its code is the job's).
/// Returns false when the other nodes did not report in time.
bool agree_on_round(job& j, int round, round_outcome& res) {
  try {
    if (res.failed && !res.user_signal)
      report_round_failure(j, round, std::to_string(res.exit_code) + " " + res.what);
    if (res.user_signal) j.store->set("ddprun/stop", "interrupted on node " + std::to_string(j.node_rank));
    j.store->set(round_key(round, "ended/" + std::to_string(j.node_rank)), res.failed ? "failed" : "ok");
    std::vector<std::string> ended;
    for (int n = 0; n < j.nnodes; ++n)
      ended.push_back(round_key(round, "ended/" + std::to_string(n)));
    // Every node's ranks end within their own timeout plus two grace periods.
    j.store->wait(ended,
                  ddp::detail::default_timeout() + std::chrono::seconds(static_cast<long>(4 * j.grace + 30)));
    // The first failure reported, on whichever node, is the job's: every node ends with its code.
    if (auto v = j.store->try_get(round_key(round, "failed"))) {
      res.failed = true;
      res.exit_code = reported_code(*v);
      res.what = *v;
    }
    if (j.store->check({"ddprun/stop"})) res.user_signal = true;
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddprun: node %d: could not agree with the other nodes on how round %d ended: %s\n",
                 j.node_rank, round, e.what());
    return false;
  }
}

} // namespace

int run_rounds(job& j) {
  if (j.is_elastic()) return run_elastic_rounds(j);
  if (recovers_across_nodes(j)) return run_recovery_job(j);
  if (j.in_process_recovery) return run_round(j, 0).exit_code; // --max-restarts: joiners, not rounds
  for (int round = 0;; ++round) {
    round_outcome res = run_round(j, round);
    if (coordinates_rounds(j) && !agree_on_round(j, round, res)) return res.exit_code ? res.exit_code : 1;
    if (!res.failed || res.user_signal) return res.exit_code;
    if (round >= j.max_restarts) {
      if (j.max_restarts > 0)
        std::fprintf(stderr,
                     "ddprun: the job failed in round %d and --max-restarts %d are spent (ddprun exits "
                     "with %d)\n",
                     round, j.max_restarts, res.exit_code);
      return res.exit_code;
    }
    std::fprintf(stderr, "ddprun: restarting every rank: round %d of at most %d (--max-restarts %d)\n",
                 round + 1, j.max_restarts + 1, j.max_restarts);
  }
}

bool coordinates_rounds(const job& j) {
  return j.store && !j.in_process_recovery && (j.is_elastic() || (j.nnodes > 1 && j.max_restarts > 0));
}

bool report_round_failure(job& j, int round, const std::string& report) {
  if (j.store->add(round_key(round, "failures"), 1) != 1) return false;
  j.store->set(round_key(round, "failed"), report);
  return true;
}

std::optional<std::string> failure_reported_elsewhere(job& j, int round) {
  // An elastic agent finds a silent store's host within --heartbeat-timeout, as its other requests
  // (the host's own store answers in process: a loaded host keeps the longer bound).
  const auto bound = j.is_elastic() && !j.elastic.store_host
                         ? std::chrono::milliseconds(static_cast<long>(j.elastic.heartbeat_timeout * 1000))
                         : std::chrono::milliseconds(10000);
  return j.store->try_get(round_key(round, "failed"), bound);
}

int reported_code(std::string_view report) {
  auto code = ddp::detail::parse_int(report.substr(0, report.find(' ')));
  return code && *code > 0 && *code < 256 ? static_cast<int>(*code) : 1;
}

} // namespace ddprun
