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

// Note [A link error that says what to link]: separately compiled, every file
// that includes a torch header takes the address of this symbol, which only
// the file that defines the torch runtime defines. A program that links
// ddp::runtime but not ddp::torch_runtime then fails to link naming, among the
// adapter's undefined functions, this name, which says what to do.
#if defined(DDP_SEPARATE_COMPILATION)
DDP_BEGIN_NAMESPACE
namespace detail {
// In ddp's ABI namespace like every symbol ddp defines, so two configurations never clash.
extern const char torch_runtime_not_linked__link_ddp_torch_runtime_or_include_ddp_torch_runtime_hpp;
#if defined(DDP_TORCH_IMPLEMENTATION)
const char torch_runtime_not_linked__link_ddp_torch_runtime_or_include_ddp_torch_runtime_hpp = 0;
#else
namespace {
// Kept by `used` although nothing reads it: its relocation is the reference.
[[gnu::used]] const char* const torch_runtime_linked =
    &torch_runtime_not_linked__link_ddp_torch_runtime_or_include_ddp_torch_runtime_hpp;
} // namespace
#endif
} // namespace detail
DDP_END_NAMESPACE
#endif

#endif // DDP_DETAIL_TORCH_LINKAGE_HPP
