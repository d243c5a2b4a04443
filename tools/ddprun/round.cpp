#include "round.hpp"

#include "failure_notes.hpp"
#include "first_failure.hpp"
#include "joiner_slots.hpp"
#include "output_prefix.hpp"
#include "rank_processes.hpp"
#include "recovery_job.hpp"
#include "restarts.hpp"
#include "signals.hpp"

#include <ddp/detail/common/timeout.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <utility>
#include <vector>

namespace ddprun {
namespace {

using clock = std::chrono::steady_clock;
/// A deadline not armed (now() > never is false).
constexpr auto never = clock::time_point::max();
/// SIGQUIT asks ranks under --crash-report for every thread's frames, which takes up to 4 s
/// (tools/dev/crash_report.cpp): at least 5 s before SIGKILL, whatever the grace period.
constexpr clock::duration quit_report_span = std::chrono::seconds(5);
/// How often another node's failure is looked for in the store (a check is one round trip,
/// well under a millisecond on a live store).
constexpr auto store_check_every = std::chrono::milliseconds(100);

/// One round, from the ranks' start to the last one's end: a pass every 20 ms at most reads
/// their output, takes the user's signals, reaps ranks, looks for other nodes' failures and
/// moves the stop schedule on.
class round_watch {
public:
  round_watch(job& j, int round, const membership_check& check, round_start how)
      : j_(j), round_(round), check_(check),
        grace_(std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(j.grace))),
        watch_store_(coordinates_rounds(j)), generations_(j.nnodes * j.nproc),
        joiners_(
            j, round, notes_.file(), grace_, ranks_, generations_, [this] { read_generations(); },
            [this](const std::string& why) { return joiners_store_silent(why); }) {
    if (how == round_start::rejoining_node)
      joiners_.start_in_every_slot();
    else
      ranks_ = start_ranks(j, round, notes_.file());
  }

  round_outcome run() {
    for (;;) {
      wait_for_output(std::chrono::milliseconds(20));
      while (auto sig = take_user_signal())
        on_user_signal(*sig);
      for (auto& r : ranks_)
        pass_on_output(r);
      for (auto& r : joiners_.replaced())
        pass_on_output(r);
      reap();
      joiners_.start(first_success_ns_ == 0 && !res_.user_signal && !store_host_lost_ && !remote_failure_);
      joiners_.end_waiting(first_success_ns_ != 0);
      look_for_failure_elsewhere();
      follow_generations();
      watch_recovery();
      if (finished()) break;
      move_stop_schedule_on();
    }
    collect_notes();
    return conclude();
  }

private:
  void wait_for_output(std::chrono::milliseconds at_most) {
    std::vector<pollfd> fds{{user_signal_fd(), POLLIN, 0}};
    for (auto* list : {&ranks_, &joiners_.replaced()})
      for (auto& r : *list) {
        if (r.out >= 0) fds.push_back({r.out, POLLIN, 0});
        if (r.err >= 0) fds.push_back({r.err, POLLIN, 0});
      }
    ::poll(fds.data(), fds.size(), static_cast<int>(at_most.count()));
  }

  /// The user asked: forward at once, and kill after the grace period whatever happens; across
  /// nodes, then ask the other nodes to stop (the store may be slow to answer: the ranks come first).
  void on_user_signal(int sig) {
    std::fprintf(stderr, "ddprun: got signal %d, forwarding it to every rank\n", sig);
    const bool stop_known = res_.user_signal;
    stop_for_user(sig);
    res_.signalled_here = true;
    // The store's host lost first: that is the job's end (1), the signal only hastens the stop.
    if (!recovers_across_nodes(j_) || stop_known || store_host_lost_) return;
    res_.user_stop = {j_.node_rank, sig};
    try {
      record_user_stop(*j_.store, round_, j_.node_rank, sig);
      std::fprintf(stderr, "ddprun: node %d: asking every node to stop its ranks (--in-process-recovery)\n",
                   j_.node_rank);
    } catch (const std::exception& e) { lose_store_host(e.what()); }
  }

  void stop_for_user(int sig) {
    recovery_deadline_ = never; // the ranks stop: no generation is awaited
    signal_ranks(ranks_, sig);
    term_at_ = never;
    if (kill_at_ == never) kill_at_ = clock::now() + grace_;
    if (sig == SIGQUIT) kill_at_ = std::max(kill_at_, clock::now() + std::max(grace_, quit_report_span));
    if (res_.exit_code == 0) res_.exit_code = 128 + sig;
    res_.user_signal = true;
  }

  /// Reaps the ranks that exited and notes those that stopped, all dated by this pass.
  void reap() {
    const auto pass_ns = now_ns();
    const auto failures_before_pass = failures_.size();
    for (auto& r : ranks_) {
      if (r.exited) continue;
      auto st = status_change(r);
      if (!st) continue;
      if (WIFCONTINUED(*st))
        r.stopped = false;
      else if (WIFSTOPPED(*st))
        on_stop(r, WSTOPSIG(*st), pass_ns);
      else
        on_exit(r, *st, pass_ns);
    }
    // A rank that failed in this pass may have failed because another one died
    // first, which is not reapable yet: that one is dated by this pass too, and
    // a death by signal comes first in it (prio).
    if (failures_.size() > failures_before_pass) date_dying_ranks(ranks_, pass_ns);
  }

  void on_stop(rank_process& r, int sig, std::int64_t pass_ns) {
    r.stopped = true;
    failures_.push_back({pass_ns, 0, r.rank, describe_stop(sig), 128 + sig, false});
    std::fprintf(stderr, "ddprun: %s %d (pid %d) %s\n",
                 r.joiner.empty() ? "rank" : ("joiner " + r.joiner + " of rank").c_str(), r.rank, r.pid,
                 failures_.back().what.c_str());
    if (j_.in_process_recovery) arm_recovery_watch();
  }

  void on_exit(rank_process& r, int status, std::int64_t pass_ns) {
    r.exited = true;
    r.status = status;
    if (r.ended_by_ddprun) { // a joiner the job ended without (joiner_slots::end_waiting)
      joiners_.withdraw(r);
      r.status = 0; // the job's end is its members'
      return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      // A joiner's exit 0 is the job's success only once it joined or the job ended: one that
      // withdrew while the job runs finished nothing.
      if (r.joiner.empty() || joiners_.joined(r) || joiners_.job_ended_in_store()) {
        if (first_success_ns_ == 0) first_success_ns_ = pass_ns;
        return;
      }
      std::fprintf(stderr,
                   "ddprun: joiner %s (pid %d) exited 0 without joining while the job runs: counted as "
                   "a failed joiner, not a rank that finished\n",
                   r.joiner.c_str(), static_cast<int>(r.pid));
      r.exit0_unjoined = true;
      status = r.status = 1 << 8; // counts as exit code 1 from here on; describe_end says what it was
    }
    failures_.push_back({r.dying_ns ? r.dying_ns : pass_ns, WIFSIGNALED(status) ? 0 : 1, r.rank,
                         describe_end(r), exit_code_of(status), false});
    if (j_.in_process_recovery && !store_host_lost_ && !res_.user_signal) {
      // The survivors recover in their own processes (ddp::elastic::run): nobody is stopped.
      std::fprintf(stderr, "ddprun: %s %d (pid %d) %s; the other ranks go on (--in-process-recovery)\n",
                   r.joiner.empty() ? "rank" : ("joiner " + r.joiner + " of rank").c_str(), r.rank, r.pid,
                   describe_end(r).c_str());
      if (!r.joiner.empty()) joiners_.withdraw(r);
      if (j_.starts_joiners()) joiners_.slot_lost(r.rank - j_.node_rank * j_.nproc);
      arm_recovery_watch();
      return;
    }
    if (failed_) return;
    failed_ = true;
    if (kill_at_ == never) stop_others_after(r, status);
  }

  /// The others usually fail on their own a moment later, with their own error: let them say
  /// it before stopping them.
  void stop_others_after(const rank_process& r, int status) {
    res_.exit_code = exit_code_of(status);
    std::fprintf(stderr, "ddprun: rank %d (pid %d) %s; stopping the other ranks\n", r.rank, r.pid,
                 describe(status).c_str());
    if (term_at_ == never) term_at_ = clock::now() + grace_;
    if (!watch_store_ || remote_failure_) return;
    try { // tell the other nodes (best effort: they also see our ranks leave the mesh)
      const bool first = report_round_failure(j_, round_,
                                              std::to_string(exit_code_of(status)) + " rank " +
                                                  std::to_string(r.rank) + " " + describe(status));
      // Elastic: the round's end was reported first (a join, a loss, a failure elsewhere) and
      // our rank most likely failed on it, as Gloo's peers do: the round is the report's.
      if (!first && j_.is_elastic())
        if (auto v = first_report()) {
          std::fprintf(stderr, "ddprun: node %d: round %d had already ended: %s\n", j_.node_rank, round_,
                       v->substr(v->find(' ') + 1).c_str());
          stop_for_remote_failure("on another node: " + *v, reported_code(*v));
        }
    } catch (const std::exception& e) { std::fprintf(stderr, "ddprun: %s\n", e.what()); }
  }

  /// --in-process-recovery: a failure must be answered by a generation of exactly the ranks still
  /// running (Note [Bounded in-process recovery]); until then, look now and then.
  void arm_recovery_watch() {
    if (recovery_deadline_ == never && kill_at_ == never && term_at_ == never)
      recovery_deadline_ = clock::now() + recovery_bound();
  }

  /// Every wait of a recovery is bounded by the ranks' DDP_TIMEOUT: noticing a stalled peer, the
  /// meeting's close, the new mesh; 10 s cover the meeting's last call (5 s by default) and more.
  clock::duration recovery_bound() const {
    return 2 * std::chrono::duration_cast<clock::duration>(ddp::detail::default_timeout()) +
           std::chrono::seconds(10);
  }

  void watch_recovery() {
    if (recovery_deadline_ == never || clock::now() < next_recovery_check_) return;
    next_recovery_check_ = clock::now() + store_check_every;
    if (recovered()) {
      recovery_deadline_ = never;
      end_ranks_left_out();
      return;
    }
    // Across nodes, a node whose ranks have all ended has nothing to stop: the survivors may be
    // elsewhere, and the job's end is decided once every node's ranks have ended.
    if (recovers_across_nodes(j_) && all_exited(ranks_)) {
      recovery_deadline_ = never;
      return;
    }
    // No rank left running (the others gave up, one is stopped): nobody can answer; stop now.
    const bool hopeless = std::none_of(ranks_.begin(), ranks_.end(),
                                       [](const rank_process& r) { return !r.exited && !r.stopped; });
    if (!hopeless && clock::now() < recovery_deadline_) return;
    recovery_deadline_ = never;
    if (end_ranks_running_left_out()) return;
    if (res_.exit_code == 0) res_.exit_code = 1;
    std::fprintf(
        stderr,
        "ddprun: node %d: %zu rank%s failed and the running ranks did not become a generation of their own "
        "(none is left running, or none formed within %lld s: 2 x DDP_TIMEOUT + 10 s): a rank is stopped or "
        "stuck; stopping the other ranks (--in-process-recovery)\n",
        j_.node_rank, failures_.size(), failures_.size() == 1 ? "" : "s",
        static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(recovery_bound()).count()));
    if (term_at_ == never && kill_at_ == never) term_at_ = clock::now() + grace_;
  }

  /// Across nodes, at the bound: when this node's members of the last generation all go on, what
  /// keeps the ranks from matching it is a rank the meeting left out that still runs (stuck
  /// outside collectives: one that merely arrived late ends itself). Only it is killed, or the
  /// members would be lost too, and the survivors elsewhere would meet once more without them.
  bool end_ranks_running_left_out() {
    if (!recovers_across_nodes(j_) || generations_.latest() == 0) return false;
    for (auto& r : ranks_)
      if (joiners_.in_generation(r) &&
          (r.stopped || (r.exited && !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0))))
        return false;
    for (auto& r : ranks_)
      if (!r.exited && !joiners_.in_generation(r) &&
          (r.joiner.empty() || joiners_.joined(r))) { // one that waits ends itself
        std::fprintf(
            stderr,
            "ddprun: node %d: rank %d (pid %d) still runs though generation %d left it out, %lld s "
            "after this node saw a failure or a new generation (2 x DDP_TIMEOUT + 10 s): killing it; the "
            "generation's ranks go on "
            "(--in-process-recovery)\n",
            j_.node_rank, r.rank, static_cast<int>(r.pid), generations_.latest(),
            static_cast<long long>(
                std::chrono::duration_cast<std::chrono::seconds>(recovery_bound()).count()));
        ::kill(r.pid, SIGKILL);
      }
    return true;
  }

  /// Across nodes: a rank lost on another node is answered by a generation that this node's
  /// ranks must match too, within the same bound; a new generation arms the watch here.
  void follow_generations() {
    if (!recovers_across_nodes(j_) || store_host_lost_ || clock::now() < next_generation_check_) return;
    next_generation_check_ = clock::now() + store_check_every;
    if (read_generations() && generations_.latest() > 0) arm_recovery_watch();
    if (!store_host_lost_ && !res_.user_signal) follow_user_stop();
  }

  /// Another node's agent got the user's signal: this node's ranks stop the same way
  /// (Note [A user's signal across nodes]).
  void follow_user_stop() {
    std::optional<std::pair<int, int>> stop;
    try {
      stop = user_stop_recorded(*j_.store, round_);
    } catch (const std::exception&) {
      return; // the next read of the generations says the store's host is lost
    }
    if (!stop) return;
    std::fprintf(
        stderr,
        "ddprun: node %d: node %d's ddprun got signal %d from the user: forwarding it to this node's "
        "ranks (--in-process-recovery)\n",
        j_.node_rank, stop->first, stop->second);
    stop_for_user(stop->second);
    res_.user_stop = stop;
  }

  /// Reads the generations the meetings published; false when the store does not answer, which
  /// across nodes means its host is lost: this node's ranks cannot meet again, so they stop.
  bool read_generations() {
    try {
      return generations_.update(*j_.store, round_);
    } catch (const std::exception& e) {
      if (!recovers_across_nodes(j_) || j_.store->is_server()) {
        std::fprintf(stderr, "ddprun: the store does not answer: %s\n", e.what());
        return false;
      }
      lose_store_host(e.what());
      return false;
    }
  }

  /// The joiners' looks at the job's end failed for a while in a row (joiner_slots): across nodes
  /// that is the store's host lost, and the answer is true (start no joiner); where this agent
  /// hosts the store, it is only said, and joiners start again once the store answers.
  bool joiners_store_silent(const std::string& why) {
    if (recovers_across_nodes(j_) && !j_.store->is_server()) {
      lose_store_host(why);
      return true;
    }
    std::fprintf(stderr, "ddprun: the launcher's store did not answer the joiners' looks: %s\n", why.c_str());
    return false;
  }

  /// Across nodes, node 0's store stopped answering: this node's ranks cannot meet again, so they
  /// stop, for the user's stop when one is known (its code stays the job's).
  void lose_store_host(const std::string& why) {
    if (store_host_lost_) return;
    store_host_lost_ = res_.store_host_lost = true;
    recovery_deadline_ = never;
    // A signal that came while the store's answer was awaited is the user's stop, not a failure:
    // the store going silent (a stopped host) must not win that race. The ranks get it now, the
    // look having held it up to the store's bound; no other node can be asked to stop (with the
    // host lost, on_user_signal records nothing).
    if (!res_.user_signal)
      if (auto sig = take_user_signal()) {
        on_user_signal(*sig);
        res_.user_stop = {j_.node_rank, *sig};
        std::fprintf(stderr, "ddprun: %s\n", store_host_silent_at_signal(j_, *sig, why).c_str());
        return;
      }
    if (res_.user_stop) {
      std::fprintf(stderr, "ddprun: %s\n", store_host_lost_after_stop(j_, *res_.user_stop, why).c_str());
      return; // the ranks are stopping already
    }
    std::fprintf(stderr, "ddprun: %s\n", store_host_lost(j_, why).c_str());
    stop_for_remote_failure("the store's host (node 0) was lost", 1);
  }

  /// Once the running ranks are the generation, a stopped rank is not of it (the meeting left it
  /// out): it would keep the job from ending, and takes no SIGTERM while stopped, so SIGKILL.
  void end_ranks_left_out() {
    for (auto& r : ranks_)
      if (!r.exited && r.stopped &&
          (r.joiner.empty() || joiners_.joined(r))) { // a joiner that never joined: joiner_slots::end_waiting
        std::fprintf(
            stderr,
            "ddprun: rank %d (pid %d) is stopped and not in the survivors' generation %d: killing it "
            "(--in-process-recovery)\n",
            r.rank, static_cast<int>(r.pid), generations_.latest());
        ::kill(r.pid, SIGKILL);
      }
  }

  /// Whether this node's ranks running (or finished well) are exactly its members of the last
  /// generation: the meeting publishes each generation's members in the launcher's store.
  bool recovered() {
    if (!j_.store) return false;
    read_generations();
    if (store_host_lost_) return false;
    return std::all_of(ranks_.begin(), ranks_.end(), [&](rank_process& r) {
      const bool going =
          (!r.exited && !r.stopped) || (r.exited && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
      if (r.joiner.empty() || joiners_.joined(r)) return going == joiners_.in_generation(r);
      // A joiner that has not joined (it waits, or withdrew) is no member and misses from none;
      // the slot's earlier process must have left the generation.
      return !generations_.member_since_at_most(r.rank, r.started_after_generation);
    });
  }

  /// The round's first report: its reporter counts it, then writes it a moment later.
  std::optional<std::string> first_report() {
    for (int look = 0; look < 50; ++look) {
      if (auto v = failure_reported_elsewhere(j_, round_)) return v;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  void look_for_failure_elsewhere() {
    if (!watch_store_ || failed_ || remote_failure_ || res_.user_signal || clock::now() < next_store_check_)
      return;
    next_store_check_ = clock::now() + store_check_every;
    try {
      if (check_)
        if (auto change = check_(any_ended_well())) report_round_failure(j_, round_, *change);
      if (auto v = failure_reported_elsewhere(j_, round_)) {
        if (j_.is_elastic())
          std::fprintf(stderr, "ddprun: node %d: round %d ends: %s; stopping the local ranks\n", j_.node_rank,
                       round_, v->substr(v->find(' ') + 1).c_str());
        else
          std::fprintf(stderr,
                       "ddprun: node %d: another node reported a failure (%s); stopping the local ranks\n",
                       j_.node_rank, v->c_str());
        stop_for_remote_failure("on another node: " + *v, reported_code(*v));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddprun: node %d: the store on the master node does not answer: %s\n",
                   j_.node_rank, e.what());
      stop_for_remote_failure("the store on the master node is gone", 1);
    }
  }

  bool any_ended_well() const {
    for (auto& r : ranks_)
      if (r.exited && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) return true;
    return false;
  }

  void stop_for_remote_failure(std::string what, int code) {
    remote_failure_ = true;
    res_.stopped_for_other_node = true;
    res_.what = std::move(what);
    res_.exit_code = code;
    if (term_at_ == never) term_at_ = clock::now() + grace_;
  }

  /// Every rank has exited and its output is read; grandchildren may hold the pipes after the
  /// ranks exit: they get a moment, then the reading stops.
  bool finished() {
    if (!all_exited(ranks_)) return false;
    if (!any_output_open(ranks_) && !any_output_open(joiners_.replaced())) return true;
    if (pipes_deadline_ == never) pipes_deadline_ = clock::now() + std::chrono::seconds(1);
    return clock::now() > pipes_deadline_;
  }

  void move_stop_schedule_on() {
    if (clock::now() > term_at_) {
      signal_ranks(ranks_, SIGTERM);
      term_at_ = never;
      kill_at_ = clock::now() + grace_;
    }
    if (clock::now() > kill_at_) {
      signal_ranks(ranks_, SIGKILL);
      kill_at_ = clock::now() + std::chrono::hours(24);
    }
  }

  void collect_notes() {
    if (notes_.file().empty()) return;
    for (auto& n : notes_.read()) {
      // The note's rank exits with its own code, reported with it.
      for (auto& r : ranks_)
        if (r.rank == n.rank && r.exited) n.code = exit_code_of(r.status);
      failures_.push_back(n);
    }
    notes_.remove();
  }

  /// --in-process-recovery: the job succeeded when a rank finished well and no rank failed after
  /// that (the survivors had recovered from every earlier failure); otherwise the first failure
  /// after the last good one is the job's, as usual.
  bool survivors_finished() const {
    if (first_success_ns_ == 0) return false;
    for (const auto& f : failures_)
      if (f.ns >= first_success_ns_) return false;
    return true;
  }

  /// The process whose end is the slot's: a joiner that never joined does not stand for the
  /// member of the latest generation it replaced, whose end (a failure, say) stays the slot's.
  const rank_process& slot_end(rank_process& r) {
    if (r.joiner.empty() || joiners_.in_generation(r) || !generations_.member(r.rank)) return r;
    for (auto it = joiners_.replaced().rbegin(); it != joiners_.replaced().rend(); ++it)
      if (it->rank == r.rank) return *it;
    return r;
  }

  round_outcome conclude() {
    if (j_.store && !store_host_lost_) try { // the last generations, for slot_end
        generations_.update(*j_.store, round_);
      } catch (const std::exception&) {} // the store's host lost at the very end: what was read stands
    for (auto& slot : ranks_) {
      const rank_process& r = slot_end(slot);
      res_.ends.push_back({r.rank,
                           WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 ? 0 : exit_code_of(r.status),
                           describe_end(r)});
    }
    // Across nodes the job's end is decided for every node at once (recovery_job.hpp): a
    // verdict for this node alone would contradict it.
    if (recovers_across_nodes(j_)) {
      res_.failed = job_failed(failures_) || res_.user_signal;
      return res_;
    }
    if (j_.in_process_recovery && !res_.user_signal && !failures_.empty() && survivors_finished()) {
      std::fprintf(stderr,
                   "ddprun: %zu rank%s failed (the first: rank %d, which %s); the others recovered in their "
                   "processes and finished (--in-process-recovery)\n",
                   failures_.size(), failures_.size() == 1 ? "" : "s", first_failure(failures_).rank,
                   first_failure(failures_).what.c_str());
      return res_;
    }
    if (remote_failure_) {
      res_.failed = true;
      return res_; // our ranks were stopped for another node's failure: that one is the job's
    }
    const bool failed = job_failed(failures_);
    if (failed && res_.exit_code == 0) res_.exit_code = 1;
    if (failed && !res_.user_signal) {
      const failure& first = first_failure(failures_);
      std::fprintf(stderr, "ddprun: the first rank to fail was rank %d: it %s (ddprun exits with %d)\n",
                   first.rank, first.what.c_str(), first.code);
      res_.exit_code = first.code;
      res_.what = "rank " + std::to_string(first.rank) + " " + first.what;
    }
    res_.failed = failed || res_.user_signal;
    return res_;
  }

  job& j_;
  const int round_;
  const membership_check& check_;
  failure_notes notes_; ///< before ranks_: the ranks are told its file
  std::vector<rank_process> ranks_;
  const clock::duration grace_;
  clock::time_point term_at_ = never, kill_at_ = never, pipes_deadline_ = never;
  const bool watch_store_;
  clock::time_point next_store_check_ = clock::now();
  round_outcome res_;
  bool failed_ = false;               ///< a local rank failed (a failure elsewhere: remote_failure_)
  std::int64_t first_success_ns_ = 0; ///< when the first rank that exited 0 was reaped
  bool remote_failure_ = false;
  std::vector<failure> failures_;
  /// --in-process-recovery: when an unanswered failure stops the ranks, and what the meeting published.
  clock::time_point recovery_deadline_ = never, next_recovery_check_ = clock::now();
  clock::time_point next_generation_check_ = clock::now();
  generations generations_;
  bool store_host_lost_ = false; ///< across nodes: node 0's store stopped answering
  joiner_slots joiners_;         ///< --in-process-recovery --max-restarts, or a node's rejoin
};

} // namespace

round_outcome run_round(job& j, int round, const membership_check& check, round_start how) {
  return round_watch(j, round, check, how).run();
}

} // namespace ddprun
