// How the survivors of a failed process group meet and form the next
// generation's (ddp::elastic::run): model-independent, compiled once under
// DDP_SEPARATE_COMPILATION. Design and waits: docs/elastic.md, "In-process recovery".
#ifndef DDP_DETAIL_ELASTIC_MEETING_HPP
#define DDP_DETAIL_ELASTIC_MEETING_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/store.hpp>
#include <ddp/topology.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Where one survivor stood in the group that failed.
struct elastic_survivor {
  int old_rank = 0;
  int node = 0; ///< its node in the job (the launcher's GROUP_RANK), in every generation
};

/// What the next generation is made of.
struct elastic_generation {
  rendezvous rv;                          ///< ready for process_group<gloo>(rv)
  std::vector<elastic_survivor> members;  ///< in their new rank order
  std::vector<std::string> joiner_ids;    ///< per member: a joiner's identity, empty for a survivor
  std::optional<tcp_store_options> joins; ///< the joiners' scope, when ddprun may start joiners
};

/// Whether ddprun --in-process-recovery launched this rank (DDP_IN_PROCESS_RECOVERY=1) with the
/// store in the launcher, where it outlives every rank: otherwise nothing can be recovered.
DDP_INLINE bool in_process_recovery_enabled();

/// The store scope of generation `generation` of this launcher round: "r<k>/" for generation 0
/// (init_process_group's), then "r<k>/e<g>/": each generation's keys, lost ranks included, are
/// its own.
DDP_INLINE std::string elastic_scope(const ddp::topology& job, std::uint64_t generation);

/// The survivors of generation `generation - 1` (where this rank was `me` of `old_size`) meet
/// on the job's store and decide generation `generation`: the first to arrive closes the meeting
/// once every rank the old generation did not lose has arrived, waiting for a busy one up to
/// `timeout` (up to `last_call` when the store saw no rank lost); the members are numbered by
/// their old ranks. Every wait is bounded (`timeout` for store requests; the others wait
/// max(last_call, timeout) + timeout for the close). A rank that arrives after the close is told
/// it was left out (ddp::error, timeout). The mesh is not formed yet: wait_for_members next.
/// Under DDP_ELASTIC_JOINERS=1 the joiners admitted to `generation` are members too, after the
/// survivors (meet_as_joiner).
DDP_INLINE elastic_generation meet_survivors(const ddp::topology& job, elastic_survivor me, int old_size,
                                             std::uint64_t generation, std::chrono::milliseconds last_call,
                                             std::chrono::milliseconds timeout, const std::string& token);

/// A joiner admitted to `generation` (Note [Admission by claim], joiners.hpp) meets the
/// survivors there as "old rank" joiner_rank_base + its job rank, under its identity `id`: it
/// says it arrived and waits (bounded as a survivor that does not close the meeting) for the
/// members. Told it was left out, or the meeting never closing: ddp::error (timeout).
DDP_INLINE elastic_generation meet_as_joiner(const ddp::topology& job, const std::string& id,
                                             std::uint64_t generation, std::chrono::milliseconds last_call,
                                             std::chrono::milliseconds timeout, const std::string& token);

/// Generation `g`'s members all say they arrived before any enters the backend's mesh. The wait
/// looks, every few tens of milliseconds, at what ends it early: a member lost meanwhile (the
/// store's lost record), a joiner member its agent saw die (its lost mark) and the job's end.
/// Whether the members are all there or some are absent is one verdict for the generation,
/// the first member's to decide (the store's compare_set), which every member then follows:
/// all there, it returns; else it marks the absent ones in g's store (the next meeting does not
/// wait for them) and throws ddp::error (peer_lost): one more recovery, not the job's end. A
/// member that never connects is absent after g.rv.timeout. A member lost after it arrived is
/// named in the verdict (peer_lost naming it, on every member). The job's end seen meanwhile
/// throws ddp::error (timeout); a store that fails throws what its request threw (backend,
/// peer_lost), and so does job_ended's lasting error (backend).
DDP_INLINE void wait_for_members(const elastic_generation& g);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/elastic/meeting-inl.hpp>
#endif

#endif // DDP_DETAIL_ELASTIC_MEETING_HPP
