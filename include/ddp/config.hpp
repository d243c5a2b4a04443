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
// mixing layouts.
#define DDP_DETAIL_ABI_CAT3(a, b, c) v##a##_##b##_##c
#define DDP_DETAIL_ABI_NAME(a, b, c) DDP_DETAIL_ABI_CAT3(a, b, c)
#define DDP_ABI_NAMESPACE DDP_DETAIL_ABI_NAME(DDP_VERSION_MAJOR, DDP_VERSION_MINOR, DDP_VERSION_PATCH)

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
