// How ddp's model-independent runtime (the store, the Gloo communicator, the
// rendezvous, ...) is defined. Header-only (the default): its functions are
// `inline` and their definitions, in the `-inl.hpp` headers, come with the
// headers that declare them. Separately compiled (DDP_SEPARATE_COMPILATION in
// every translation unit, as target ddp::runtime does): the headers only
// declare them, and one translation unit defines them once (the ddp::runtime
// library, or a user's own file that includes <ddp/runtime.hpp>), so a
// program's other files do not generate that code again
// (docs/performance.md, "Compile cost").
#ifndef DDP_DETAIL_COMMON_LINKAGE_HPP
#define DDP_DETAIL_COMMON_LINKAGE_HPP

#include <ddp/config.hpp>

/// 1 where the runtime's definitions are compiled in this translation unit:
/// header-only, or the one file that defines the separately compiled runtime.
#if !defined(DDP_SEPARATE_COMPILATION) || defined(DDP_IMPLEMENTATION)
#define DDP_DETAIL_DEFINE_RUNTIME 1
#else
#define DDP_DETAIL_DEFINE_RUNTIME 0
#endif

/// On every declaration and definition of a runtime function: `inline` only
/// where each translation unit carries its own copy (header-only).
#if defined(DDP_SEPARATE_COMPILATION)
#define DDP_INLINE
#else
#define DDP_INLINE inline
#endif

#endif // DDP_DETAIL_COMMON_LINKAGE_HPP

// Outside the guard, so that every header that declares runtime functions checks
// again: the ABI namespace was named when config.hpp came first (its tags), so the
// macros that name it must be set before any ddp header, as the targets do.
#if defined(DDP_DETAIL_LINKAGE_MISMATCH_SAID)
#elif defined(DDP_SEPARATE_COMPILATION) != DDP_DETAIL_ABI_SEPARATE
#define DDP_DETAIL_LINKAGE_MISMATCH_SAID // one message, not one per header
#error                                                                                                       \
    "ddp: DDP_SEPARATE_COMPILATION changed after the first ddp header: define it for the whole file, or not at all"
#elif (defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)) != DDP_DETAIL_ABI_CUDA
#define DDP_DETAIL_LINKAGE_MISMATCH_SAID
#error                                                                                                       \
    "ddp: DDP_WITH_CUDA (DDP_WITH_NCCL) changed after the first ddp header: define it for the whole file, as ddp::cuda does"
#elif defined(DDP_TRACE_DISABLED) == DDP_DETAIL_ABI_TRACE
#define DDP_DETAIL_LINKAGE_MISMATCH_SAID
#error                                                                                                       \
    "ddp: DDP_TRACE_DISABLED changed after the first ddp header: define it for the whole file, or not at all"
#endif
