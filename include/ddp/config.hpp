// ddp — version, ABI namespace and the few macros every header uses.
#ifndef DDP_CONFIG_HPP
#define DDP_CONFIG_HPP

#define DDP_VERSION_MAJOR 0
#define DDP_VERSION_MINOR 1
#define DDP_VERSION_PATCH 0

#define DDP_DETAIL_STR2(x) #x
#define DDP_DETAIL_STR(x) DDP_DETAIL_STR2(x)
#define DDP_VERSION_STRING                                                                                   \
  DDP_DETAIL_STR(DDP_VERSION_MAJOR)                                                                          \
  "." DDP_DETAIL_STR(DDP_VERSION_MINOR) "." DDP_DETAIL_STR(DDP_VERSION_PATCH)

// Every public name lives in ddp::DDP_ABI_NAMESPACE (an inline namespace), so two
// incompatible versions linked into one program fail to link instead of silently
// mixing layouts. The name is the version plus one tag per macro that changes a
// class's layout or a function's linkage (as nlohmann/json's NLOHMANN_JSON_ABI_TAGS):
// v0_1_0, v0_1_0_cuda, v0_1_0_sc, v0_1_0_cuda_sc.
// Translation units built with different tags see distinct types, so they link
// (each its own classes) or a function taking a class across the boundary is an
// unresolved symbol; they never share one name with two layouts.
//
// The tags, and the macros that are none (from an audit of every #if in include/):
// - _cuda: DDP_WITH_CUDA or DDP_WITH_NCCL defined (any value; ddp::cuda and ddp::nccl
//   define them). Adds device_bucket_engine to distributed_data_parallel's engine
//   std::variant (detail/data_parallel/bucket_engine.hpp), device broadcasts and
//   process_group's pinned staging. DDP_WITH_NCCL needs no tag of its own: it implies
//   the same layouts and only adds names (ddp::nccl, backend/nccl.hpp).
//   They must be defined before the first ddp header (bucket_engine.hpp checks).
// - none for DDP_NO_EIGEN / Eigen being found: it adds tensor_traits and dtype_of
//   specializations for Eigen types and arena::matrix(), a non-virtual member
//   function; no data member, base or variant alternative changes.
// - _notrace: DDP_TRACE_DISABLED defined. No layout changes, but the body of an inline
//   function does (trace::on(), detail/common/trace.hpp): two bodies of one function in one
//   program, and with the runtime compiled once its queue would trace for a file that
//   turned tracing off. Under two names each keeps its own.
// - none for NDEBUG: no header has an assert() or an NDEBUG-dependent member.
//   DDP_DEBUG is an environment variable, read at run time.
// - _sc: DDP_SEPARATE_COMPILATION defined (the runtime compiled once,
//   detail/common/linkage.hpp). No layout changes, but linkage does: the runtime's
//   functions are inline in a header-only file and defined once otherwise, and one
//   function may not be both in one program. Under two names a header-only file and
//   separately compiled ones coexist (each with its own definitions), and a runtime
//   built with other tags (another DDP_WITH_CUDA) does not link.
// - none for CUDART_VERSION (a function body), the platform (__linux__, __x86_64__:
//   one per program) or the standard library's ABI macros (_GLIBCXX_USE_CXX11_ABI:
//   libstdc++ tags its own names).
// A new layout-changing macro gets a tag here and a case in tests/abi.
#if defined(DDP_WITH_CUDA) || defined(DDP_WITH_NCCL)
#define DDP_DETAIL_ABI_CUDA 1
#define DDP_DETAIL_ABI_TAG_CUDA _cuda
#else
#define DDP_DETAIL_ABI_CUDA 0
#define DDP_DETAIL_ABI_TAG_CUDA
#endif
#if defined(DDP_TRACE_DISABLED)
#define DDP_DETAIL_ABI_TRACE 0
#define DDP_DETAIL_ABI_TAG_TRACE _notrace
#else
#define DDP_DETAIL_ABI_TRACE 1
#define DDP_DETAIL_ABI_TAG_TRACE
#endif
#if defined(DDP_SEPARATE_COMPILATION)
#define DDP_DETAIL_ABI_SEPARATE 1
#define DDP_DETAIL_ABI_TAG_SEPARATE _sc
#else
#define DDP_DETAIL_ABI_SEPARATE 0
#define DDP_DETAIL_ABI_TAG_SEPARATE
#endif
#define DDP_DETAIL_ABI_CAT6(a, b, c, cuda, trace, separate) v##a##_##b##_##c##cuda##trace##separate
#define DDP_DETAIL_ABI_NAME(a, b, c, cuda, trace, separate)                                                  \
  DDP_DETAIL_ABI_CAT6(a, b, c, cuda, trace, separate)
#define DDP_ABI_NAMESPACE                                                                                    \
  DDP_DETAIL_ABI_NAME(DDP_VERSION_MAJOR, DDP_VERSION_MINOR, DDP_VERSION_PATCH, DDP_DETAIL_ABI_TAG_CUDA,      \
                      DDP_DETAIL_ABI_TAG_TRACE, DDP_DETAIL_ABI_TAG_SEPARATE)

#define DDP_BEGIN_NAMESPACE                                                                                  \
  namespace ddp {                                                                                            \
  inline namespace DDP_ABI_NAMESPACE {
#define DDP_END_NAMESPACE                                                                                    \
  }                                                                                                          \
  }

#include <string_view>

DDP_BEGIN_NAMESPACE

struct version_info {
  int major;
  int minor;
  int patch;
  std::string_view string;
};

/// The version of the headers this translation unit was compiled against.
constexpr version_info version() noexcept {
  return {DDP_VERSION_MAJOR, DDP_VERSION_MINOR, DDP_VERSION_PATCH, DDP_VERSION_STRING};
}

DDP_END_NAMESPACE

#endif // DDP_CONFIG_HPP
