#include "joiner_slots.hpp"

#include "first_failure.hpp"

#include <ddp/detail/elastic/joiners.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <utility>

namespace ddprun {
namespace {
/// One look at the job's end in a supervision pass: short, so that reaping and signals wait little.
constexpr auto end_look_within = std::chrono::milliseconds(100);
/// Failing looks further apart than this are not one silence (a pass is 20 ms, a look 100 ms).
constexpr auto silence_gap = std::chrono::seconds(1);
} // namespace

std::string next_joiner_identity(ddp::tcp_store& store, int round, int job_rank) {
  const auto k =
      store.add("ddprun/r" + std::to_string(round) + "/joiners_in_slot/" + std::to_string(job_rank), 1);
  return "rank" + std::to_string(job_rank) + "." + std::to_string(k);
}

std::string describe_end(const rank_process& r) {
  if (r.exit0_unjoined)
    return "exited 0 without joining while the job ran (a joiner that withdrew finished nothing; counted "
           "as code 1)";
  return describe(r.status);
}

joiner_slots::joiner_slots(job& j, int round, std::string note_file, clock::duration grace,
                           std::vector<rank_process>& ranks, generations& gens, std::function<void()> refresh,
                           std::function<bool(const std::string&)> store_silent)
    : j_(j), round_(round), note_file_(std::move(note_file)), grace_(grace), ranks_(ranks), gens_(gens),
      refresh_(std::move(refresh)), store_silent_(std::move(store_silent)) {}

rank_process joiner_slots::start_one(int local, const std::string& id) {
  refresh_();
  rank_process p = start_joiner(j_, local, round_, note_file_, id);
  p.started_after_generation = gens_.latest();
  return p;
}

void joiner_slots::start_in_every_slot() {
  // Every identity first: a store that does not answer throws before any joiner is started.
  std::vector<std::string> ids;
  for (int local = 0; local < j_.nproc; ++local)
    ids.push_back(next_joiner_identity(*j_.store, round_, j_.node_rank * j_.nproc + local));
  for (int local = 0; local < j_.nproc; ++local) {
    ranks_.push_back(start_one(local, ids[static_cast<std::size_t>(local)]));
    std::fprintf(
        stderr,
        "ddprun: node %d: started joiner %s (pid %d) in the slot of rank %d: the running ranks admit "
        "it at a commit (the node's rejoin; --in-process-recovery)\n",
        j_.node_rank, ids[static_cast<std::size_t>(local)].c_str(), static_cast<int>(ranks_.back().pid),
        ranks_.back().rank);
  }
}

/// Not once the job has ended (a rank on any node finished its loop: the store says so), nor
/// when the round says no (the user stopped the job, the store's host is lost, a local rank
/// finished well): a joiner would only withdraw, and its end would stand in the slot for the
/// dead rank's.
void joiner_slots::start(bool may_start) {
  for (int local : slots_to_fill_) {
    auto& slot = ranks_[static_cast<std::size_t>(local)];
    if (!may_start || store_given_up_ || job_ended_in_store() || store_given_up_)
      break; // a look may give it up
    std::string id;
    std::int64_t nth = 0;
    try {
      // Counted in the store: an agent started again for the node spends the same budget.
      nth = j_.store->add(
          "ddprun/r" + std::to_string(round_) + "/joiners_started/" + std::to_string(j_.node_rank), 1);
      if (nth <= j_.max_restarts) id = next_joiner_identity(*j_.store, round_, slot.rank);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddprun: node %d: no joiner for rank %d: the store does not answer: %s\n",
                   j_.node_rank, slot.rank, e.what());
      break;
    }
    if (nth > j_.max_restarts) {
      std::fprintf(stderr,
                   "ddprun: node %d: no joiner for rank %d: this node started its %d (--max-restarts counts "
                   "joiners per node under --in-process-recovery, whichever of its agents started them); the "
                   "others go on without it\n",
                   j_.node_rank, slot.rank, j_.max_restarts);
      continue;
    }
    rank_process joiner = start_one(local, id);
    replaced_.push_back(std::move(slot));
    slot = std::move(joiner);
    std::fprintf(stderr,
                 "ddprun: started joiner %s (pid %d) in the slot of rank %d: the running ranks admit it at "
                 "a commit (%lld of --max-restarts %d on this node; --in-process-recovery)\n",
                 id.c_str(), static_cast<int>(slot.pid), slot.rank, static_cast<long long>(nth),
                 j_.max_restarts);
  }
  slots_to_fill_.clear();
}

/// When a rank admitted it first, the meeting it was admitted to is told not to wait for it.
void joiner_slots::withdraw(rank_process& r) {
  if (joined(r)) { // a member's loss: the meeting answers it; the mark ends a generation's wait for it
    try {
      ddp::detail::mark_joiner_lost(*j_.store, r.joiner, prefix());
    } catch (const std::exception&) {} // only speeds the survivors up: their store tells them too
    return;
  }
  try {
    const auto c = ddp::detail::settle_claim(*j_.store, r.joiner, ddp::detail::joiner_withdrawn, prefix());
    if (c.state == ddp::detail::joiner_claim::what::admitted) {
      ddp::detail::mark_joiner_lost(*j_.store, r.joiner, prefix());
      std::fprintf(stderr,
                   "ddprun: joiner %s was admitted to generation %llu but ended before it joined: that "
                   "generation's meeting goes on without it (--in-process-recovery)\n",
                   r.joiner.c_str(), static_cast<unsigned long long>(c.generation));
    } else {
      std::fprintf(stderr, "ddprun: joiner %s is withdrawn: no commit admits it (--in-process-recovery)\n",
                   r.joiner.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddprun: could not withdraw joiner %s: %s\n", r.joiner.c_str(), e.what());
  }
}

/// One that waits learns the end from the store and withdraws at once; one still there after the
/// grace period is stuck or stopped (or it joined, then a meeting left it out): it is killed, and
/// its end is no failure of the job's. Every node does this, so no node's agent waits on such a
/// joiner.
void joiner_slots::end_waiting(bool finished_here) {
  if (!j_.starts_joiners()) return;
  const auto outside = [&](rank_process& r) {
    return !r.exited && !r.joiner.empty() && !r.ended_by_ddprun && !in_generation(r);
  };
  if (std::none_of(ranks_.begin(), ranks_.end(), outside)) return;
  if (ending_since_ == clock::time_point::max()) {
    if (!finished_here && (clock::now() < next_end_check_ || !job_ended_in_store())) {
      if (clock::now() >= next_end_check_) next_end_check_ = clock::now() + std::chrono::milliseconds(100);
      return;
    }
    ending_since_ = clock::now();
  }
  if (clock::now() - ending_since_ < grace_) return;
  refresh_();
  for (auto& r : ranks_)
    if (outside(r)) {
      std::fprintf(stderr,
                   "ddprun: joiner %s (pid %d) %s %g s after the job ended: the job ended without it; "
                   "killing it (--in-process-recovery)\n",
                   r.joiner.c_str(), static_cast<int>(r.pid),
                   joined(r) ? "was left out of the latest generation" : "is still waiting", j_.grace);
      r.ended_by_ddprun = true;
      ::kill(r.pid, SIGKILL);
    }
}

bool joiner_slots::joined(rank_process& r) {
  if (r.joiner.empty() || r.admitted_to < 0) return false;
  if (r.admitted_to == 0) {
    // No generation since its start took a joiner in its slot: not joined, and no store read.
    if (!gens_.joiner_entered_after(r.rank, r.started_after_generation)) return false;
    // A claim read as waiting is read again only once a new generation is published: the one it
    // is admitted to must be published before it counts, so no look in between can change that.
    auto& read_at = claim_read_at_[r.pid];
    if (read_at == gens_.latest()) return false;
    try {
      const auto c = ddp::detail::read_claim(*j_.store, r.joiner, prefix());
      if (c.state == ddp::detail::joiner_claim::what::waiting) {
        read_at = gens_.latest();
        return false;
      }
      r.admitted_to =
          c.state == ddp::detail::joiner_claim::what::admitted ? static_cast<int>(c.generation) : -1;
    } catch (const std::exception&) {
      return false; // read again at the next look; a lost store's host is the round's to answer
    }
  }
  return r.admitted_to > 0 && gens_.joiner_entered(r.rank, r.admitted_to);
}

bool joiner_slots::in_generation(rank_process& r) {
  return r.joiner.empty() ? gens_.member(r.rank)
                          : joined(r) && gens_.member_entered_at(r.rank, r.admitted_to);
}

bool joiner_slots::job_ended_in_store() {
  if (ended_) return true;
  const auto now = clock::now();
  // Looks come a pass apart only while a joiner waits or a slot is to be filled: a failure after
  // a pause starts a new silence, never one timed from a failure long ago.
  const bool in_a_row = last_look_ != clock::time_point::min() && now - last_look_ < silence_gap;
  last_look_ = now;
  try {
    if (!end_look_) end_look_ = j_.store->connect_again(end_look_within);
    ended_ = ddp::detail::job_ended(end_look_, prefix(), end_look_within);
    silent_since_ = clock::time_point::max();
    silence_said_ = false;
  } catch (const std::exception& e) {
    end_look_.reset();                                            // the next pass connects again
    if (silent_since_ == clock::time_point::max() || !in_a_row) { // a new silence, said anew
      silent_since_ = now;
      silence_said_ = false;
    }
    if (!silence_said_ && now - silent_since_ >= ddp::detail::joiner_store_patience) {
      silence_said_ = true;
      if (store_silent_(e.what())) store_given_up_ = true;
    }
    return false;
  }
  return ended_;
}

} // namespace ddprun
