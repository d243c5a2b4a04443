// Separately compiled, what a data-parallel class instantiates for ddp::gloo
// without depending on the model (the host bucket engine, the broadcasts, the
// join tracker, the model check and broadcast, DDP_DEBUG's checks) is compiled once, in the runtime
// (detail/common/linkage.hpp): a user's file then generates only the code
// that does depend on its model.
#ifndef DDP_DETAIL_DATA_PARALLEL_GLOO_INSTANCES_HPP
#define DDP_DETAIL_DATA_PARALLEL_GLOO_INSTANCES_HPP

#include <ddp/detail/common/linkage.hpp>

// Header-only, nothing here: every file has every definition, and a header
// that does not use Gloo must not parse it for this.
#if defined(DDP_SEPARATE_COMPILATION)
#include <ddp/detail/data_parallel/debug.hpp>
#include <ddp/detail/data_parallel/device_broadcasts.hpp>
#include <ddp/detail/data_parallel/host_bucket_engine.hpp>
#include <ddp/detail/data_parallel/join.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/gloo/communicator.hpp>

#include <cstddef>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

#if defined(DDP_IMPLEMENTATION)
#define DDP_DETAIL_GLOO_INSTANCE template
#else
#define DDP_DETAIL_GLOO_INSTANCE extern template
#endif
DDP_DETAIL_GLOO_INSTANCE class host_bucket_engine<gloo_communicator>;
DDP_DETAIL_GLOO_INSTANCE class device_broadcasts<gloo_communicator>;
DDP_DETAIL_GLOO_INSTANCE class join_tracker<gloo_communicator>;
DDP_DETAIL_GLOO_INSTANCE void check_same_bucket_everywhere<gloo_communicator>(gloo_communicator&, std::size_t,
                                                                              const planned_bucket&);
DDP_DETAIL_GLOO_INSTANCE void
log_step_timing<host_bucket_engine<gloo_communicator>>(const host_bucket_engine<gloo_communicator>&,
                                                       std::size_t);
DDP_DETAIL_GLOO_INSTANCE void parameter_slots::verify_across_ranks<gloo_communicator>(gloo_communicator&,
                                                                                      std::string_view) const;
DDP_DETAIL_GLOO_INSTANCE void
parameter_slots::broadcast_from_rank0<gloo_communicator, device_broadcasts<gloo_communicator>>(
    gloo_communicator&, bool, device_broadcasts<gloo_communicator>&) const;
#undef DDP_DETAIL_GLOO_INSTANCE
// (An explicit instantiation declaration leaves inline members free to be
// instantiated for inlining; GCC and Clang then emit no out-of-line copy,
// which is the saving.)

} // namespace detail
DDP_END_NAMESPACE
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_GLOO_INSTANCES_HPP
