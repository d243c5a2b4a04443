// Processes that join a running in-process-recovery job (ddprun --in-process-recovery
// --max-restarts N starts them): how one registers, how the group admits it at a commit, how it
// withdraws, and how it learns that the job ended without it. Model-independent, compiled once
// under DDP_SEPARATE_COMPILATION. Design: docs/elastic.md, "Joiners".
//
// Note [Admission by claim]
// Each joiner's claim is decided once, by the store's compare_set: a decider sets the joiner's
// decision key only if it is absent (one request, atomic on the store's host), and the value
// that stands afterwards is the decision, whoever wrote it: the generation the group's rank 0
// admits the joiner to (1 <= g < joiner_withdrawn), or joiner_withdrawn from the joiner or its
// agent. A reader sees no decision (the joiner waits) or the decision, never anything between,
// and no decider can overwrite another's, however slow or dead: a decider that dies before its
// request reaches the store decided nothing, one that dies after decided. So a joiner is admitted
// or withdrawn, never both, and the claim says which, with the generation: the survivors'
// meeting for that generation expects every joiner whose claim names it, even when the rank that
// admitted it died before it could tell the others.
// Two admitters at once (the rank 0 of generation g, dying after its requests, and the rank 0 of
// the generation its loss makes, at its first commit) race on the same key: one wins, the other
// reads its decision, so a joiner is admitted to one generation only; the loss meeting expects
// the joiners whose decision names it, and the later admitter takes only those still waiting.
#ifndef DDP_DETAIL_ELASTIC_JOINERS_HPP
#define DDP_DETAIL_ELASTIC_JOINERS_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/store.hpp>
#include <ddp/topology.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The delta that withdraws a joiner; generations stay below it.
inline constexpr std::int64_t joiner_withdrawn = std::int64_t{1} << 40;
/// A joiner meets as "old rank" joiner_rank_base + its job rank: after every survivor, so the
/// new generation's rank 0, which sends the state, is a survivor.
inline constexpr int joiner_rank_base = 1 << 24;

/// One registered joiner: its identity (unique in the job), the job rank and node of its slot.
struct joiner_entry {
  std::string id;
  int job_rank = 0;
  int node = 0;
};

/// How long a waiting joiner asks again when the store errs on whether the job has ended: an
/// error is no end (job_ended).
inline constexpr std::chrono::milliseconds joiner_store_patience{5000};

/// What a joiner's claim says.
struct joiner_claim {
  enum class what { waiting, admitted, withdrawn } state = what::waiting;
  std::uint64_t generation = 0; ///< admitted: the generation it joins
};

/// Out of ddp::elastic::state::commit() through the loop when the group admitted joiners at that
/// commit: every rank ends the generation there and run() meets them. Not a std::exception, so
/// a loop's catch of those lets it through.
struct joiners_admitted {
  std::string ids; ///< the identities admitted, as rank 0 broadcast them
};

/// Whether ddprun may start joiners in this job (DDP_ELASTIC_JOINERS=1): the group then looks
/// for them at each commit.
DDP_INLINE bool joiners_possible();
/// This process's identity when ddprun started it as a joiner (DDP_ELASTIC_JOINER), else nothing.
DDP_INLINE std::optional<std::string> joiner_identity();

/// A client of the launcher's store in the joiners' scope ("r<k>/join/"), where no rank
/// registers; the keys below are relative to it (ddprun's agent puts the scope in front).
DDP_INLINE tcp_store_options joiners_store_options(const ddp::topology& job,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& token);
DDP_INLINE std::string joiners_scope(const ddp::topology& job);

/// Registers `e` as waiting (its claim untouched: 0).
DDP_INLINE void register_joiner(tcp_store& s, const joiner_entry& e, const std::string& prefix = "");
/// Every joiner registered so far, in registration order (one not yet written is skipped).
DDP_INLINE std::vector<joiner_entry> registered_joiners(tcp_store& s, const std::string& prefix = "");
/// The claim of joiner `id` now: waiting while nobody decided it, else the decision.
DDP_INLINE joiner_claim read_claim(tcp_store& s, const std::string& id, const std::string& prefix = "");
/// Decides joiner `id` with `delta` (a generation, or joiner_withdrawn) if nobody decided it
/// first; returns the decision as it stands: the caller won when it says what `delta` says.
DDP_INLINE joiner_claim settle_claim(tcp_store& s, const std::string& id, std::int64_t delta,
                                     const std::string& prefix = "");
/// An admitted joiner's agent saw it die: the meeting it was admitted to does not wait for it.
DDP_INLINE void mark_joiner_lost(tcp_store& s, const std::string& id, const std::string& prefix = "");
DDP_INLINE bool joiner_lost(tcp_store& s, const std::string& id, const std::string& prefix = "");

/// What one process has read of the registry. An entry is written once and a decision is final,
/// so each is read from the store once: a look costs one round trip for the count, one per new
/// entry, two per joiner still waiting, and one per joiner admitted to the generation looked for
/// (its lost mark), not round trips for every joiner ever registered.
struct joiner_registry {
  std::int64_t counted = 0;            ///< entries numbered up to this one have been looked at
  std::vector<std::int64_t> unwritten; ///< counted but not yet written when looked at
  std::vector<joiner_entry> entries;   ///< in registration order
  std::vector<joiner_claim> claims;    ///< each entry's decision once known (waiting until then)
};

/// Reads the entries registered since the last look into `r`.
DDP_INLINE void refresh_registry(tcp_store& s, joiner_registry& r, const std::string& prefix = "");

/// The group's rank 0, at a commit of generation `next_generation - 1`: admits every waiting
/// joiner to `next_generation`; those it admitted, in registration order. `seen` carries what
/// earlier commits read (a fresh one reads the whole registry). A joiner whose slot's job rank is
/// in `member_job_ranks` (the running generation's) stays waiting: that rank is not lost, its
/// agent only stalled, and two processes must never hold one job rank.
DDP_INLINE std::vector<joiner_entry>
admit_waiting_joiners(tcp_store& s, std::uint64_t next_generation, joiner_registry& seen,
                      const std::vector<std::int64_t>& member_job_ranks = {});
DDP_INLINE std::vector<joiner_entry> admit_waiting_joiners(tcp_store& s, std::uint64_t next_generation);
/// The joiners whose decision names `generation`, lost or not (`seen`: as above): a meeting
/// with any was called by an admission.
DDP_INLINE std::vector<joiner_entry> joiners_decided_for(tcp_store& s, std::uint64_t generation,
                                                         joiner_registry& seen);
/// The joiners admitted to `generation` whose agents did not see them die (`seen`: as above).
DDP_INLINE std::vector<joiner_entry> joiners_admitted_to(tcp_store& s, std::uint64_t generation,
                                                         joiner_registry& seen);
DDP_INLINE std::vector<joiner_entry> joiners_admitted_to(tcp_store& s, std::uint64_t generation);

/// A rank's loop returned: the job has ended, and waiting joiners withdraw (they poll for it).
DDP_INLINE void mark_job_ended(tcp_store& s);
/// mark_job_ended for run() once the loop returned: a store that does not answer then is said,
/// not thrown (the loop finished; the agents end waiting joiners at the job's end anyway).
DDP_INLINE void end_job_for_joiners(tcp_store& s, int job_rank);
/// Whether a rank wrote the job's end. A store error is no answer: it asks again, on a fresh
/// connection that then replaces `s` (a broken one stays broken; the server's own client is
/// kept), until `within` has passed. It returns or throws within `within` + 2 x
/// job_end_look_floor, each look's wait for the store and connecting again included. An error that lasts is
/// ddp::error (backend) naming the store's address, never taken for the end.
DDP_INLINE bool job_ended(std::unique_ptr<tcp_store>& s, const std::string& prefix = "",
                          std::chrono::milliseconds within = joiner_store_patience);
/// The least time job_ended gives one look (connecting again included): a live store answers
/// in well under a millisecond, even beside a CPU hog.
inline constexpr std::chrono::milliseconds job_end_look_floor{100};

/// The joiner's side: registers, then waits (looking every few tens of milliseconds, up to
/// `wait`) until it is admitted (the generation) or the job ends (nothing: it withdrew). Not
/// admitted within `wait`, it withdraws and throws ddp::error (timeout), naming `id`; withdrawn
/// while the job runs by another (its agent took it for dead), it throws too (peer_lost), so
/// its agent sees a failed joiner and may start another in the slot, not a rank that finished.
DDP_INLINE std::optional<std::uint64_t>
wait_for_admission(std::unique_ptr<tcp_store>& s, const joiner_entry& me, std::chrono::milliseconds wait);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/elastic/joiners-inl.hpp>
#endif

#endif // DDP_DETAIL_ELASTIC_JOINERS_HPP
