// How the LibTorch adapter's model-independent code (the attached module, its
// gradient views, the SyncBatchNorm module) is defined. It follows the core's
// form (detail/common/linkage.hpp): header-only, its functions are `inline`
// and their definitions, in the torch `-inl.hpp` headers, come with the
// headers that declare them; with DDP_SEPARATE_COMPILATION the headers only
// declare them and one translation unit that links LibTorch defines them
// (ddp::torch_runtime, or a file of the user's that includes
// <ddp/torch_runtime.hpp>). A macro of its own, not DDP_IMPLEMENTATION: the
// core's runtime (ddp::runtime) does not link LibTorch, and the file that
// defines the torch part must not define the core a second time.
#ifndef DDP_DETAIL_TORCH_LINKAGE_HPP
#define DDP_DETAIL_TORCH_LINKAGE_HPP

#include <ddp/detail/common/linkage.hpp>

/// 1 where the LibTorch adapter's definitions are compiled in this translation
/// unit: header-only, or the one file that defines the torch runtime.
#if !defined(DDP_SEPARATE_COMPILATION) || defined(DDP_TORCH_IMPLEMENTATION)
#define DDP_DETAIL_DEFINE_TORCH_RUNTIME 1
#else
#define DDP_DETAIL_DEFINE_TORCH_RUNTIME 0
#endif

#endif // DDP_DETAIL_TORCH_LINKAGE_HPP
