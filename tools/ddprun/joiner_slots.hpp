// --in-process-recovery --max-restarts N: the joiners this node's agent starts in its ranks'
// slots (docs/elastic.md, "Joiners"): their identities, their start, their withdrawal when they
// die unjoined, whether each one joined, and their end once the job has ended without them.
// The round (round.hpp) owns the ranks and the generations; this keeps the joiners' books.
#pragma once

#include "generations.hpp"
#include "options.hpp"
#include "rank_processes.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ddprun {

/// The identity of the next joiner in `job_rank`'s slot: "rank<job rank>.<k>", k counted per slot
/// in the launcher's store, so no two joiners of the job share one, whichever agent (a node's
/// first, or one started again for it) starts them. Throws when the store does not answer.
std::string next_joiner_identity(ddp::tcp_store& store, int round, int job_rank);

/// The joiners' scope in the launcher's store for round `round`.
inline std::string joiners_prefix(int round) { return "r" + std::to_string(round) + "/join/"; }

/// How a process in a slot ended, as the failure records and the verdict name it: a joiner's
/// exit 0 without joining is said as such, not as the code 1 it counts as.
std::string describe_end(const rank_process& r);

class joiner_slots {
public:
  using clock = std::chrono::steady_clock;
  /// `ranks` and `gens` are the round's; `refresh` reads the generations the way the round does
  /// (a store that does not answer is the round's business); `store_silent` is told that the looks
  /// at the job's end failed for joiner_store_patience in a row (once a silence), and answers
  /// whether to start no joiner from then on (the store's host is lost).
  joiner_slots(job& j, int round, std::string note_file, clock::duration grace,
               std::vector<rank_process>& ranks, generations& gens, std::function<void()> refresh,
               std::function<bool(const std::string&)> store_silent);

  /// The joiners' scope in the launcher's store ("r<k>/join/").
  std::string prefix() const { return joiners_prefix(round_); }

  /// An agent started again for a lost node: every local slot gets a joiner at once.
  void start_in_every_slot();
  /// A local rank died while the job goes on: its slot gets a joiner at the next start().
  void slot_lost(int local) { slots_to_fill_.push_back(local); }
  /// Starts a joiner in each slot lost since the last call, within --max-restarts on this node,
  /// unless `may_start` is false or the job has ended (then none is started).
  void start(bool may_start);
  /// A joiner's agent saw it die: it withdraws it (Note [Admission by claim]).
  void withdraw(rank_process& r);
  /// Once the job has ended (`finished_here`: a local rank ended well), a joiner outside the
  /// latest generation is killed after the grace period: the job ended without it.
  void end_waiting(bool finished_here);

  /// Whether the joiner in `r` has been a member of a generation: the one its own claim admitted
  /// it to must list a joiner in its slot (another joiner in the same slot is no proof).
  bool joined(rank_process& r);
  /// Whether the latest generation holds the process in `r`'s slot: a joiner only once it joined,
  /// and only as the member that entered with its own admission.
  bool in_generation(rank_process& r);
  /// Whether a rank's loop returned, on any node. One short look a pass, on a connection of its
  /// own (the round goes on reaping and forwarding signals): a store error is no end; errors that
  /// last joiner_store_patience across passes go to `store_silent`, and no joiner starts after.
  bool job_ended_in_store();

  std::vector<rank_process>& replaced() { return replaced_; }

private:
  rank_process start_one(int local, const std::string& id);

  job& j_;
  const int round_;
  const std::string note_file_;
  const clock::duration grace_;
  std::vector<rank_process>& ranks_;
  generations& gens_;
  std::function<void()> refresh_;
  std::function<bool(const std::string&)> store_silent_;
  std::vector<int> slots_to_fill_;     ///< local slots whose rank died since the last start()
  std::vector<rank_process> replaced_; ///< the processes joiners replaced (their output still drains)
  std::map<pid_t, int> claim_read_at_; ///< the latest generation when a joiner's claim read waiting
  clock::time_point ending_since_ = clock::time_point::max(); ///< when the job's end was first seen
  bool ended_ = false;                                        ///< the store said a rank's loop returned
  clock::time_point next_end_check_ = clock::now();           ///< when a waiting joiner looks again
  std::unique_ptr<ddp::tcp_store> end_look_;                  ///< job_ended_in_store's connection
  clock::time_point silent_since_ = clock::time_point::max(); ///< the first of the failing looks in a row
  clock::time_point last_look_ = clock::time_point::min();    ///< when the job's end was last looked at
  bool silence_said_ = false;                                 ///< store_silent_ was told of this silence
  bool store_given_up_ = false;                               ///< the store's host is lost: no joiner starts
};

} // namespace ddprun
