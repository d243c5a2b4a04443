// Turns init_options and the launcher's topology into a rendezvous: the
// checked rank and world size, the init method, the token, the open-files
// check, and (for env:// and tcp://) the joined store every rank arrived at.
#ifndef DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_HPP
#define DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/store.hpp>
#include <ddp/topology.hpp>

#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Tells ddprun's failure note and the store that `rank` fails on an error of
/// its own, so that peers waiting for it fail now, naming it and `reason`.
/// Peers read "rank R failed: <reason>": a leading "rank R: " goes.
DDP_INLINE void report_own_failure(tcp_store& store, int rank, std::string_view why) noexcept;

/// The rendezvous of init_process_group. `backend_files`: the descriptors the
/// backend's connections take (its communicator's open_files(topology), where
/// it has one).
DDP_INLINE ddp::rendezvous make_rendezvous(const init_options& o,
                                           long (*backend_files)(const ddp::topology&) = nullptr);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/process_group/make_rendezvous-inl.hpp>
#endif

#endif // DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_HPP
