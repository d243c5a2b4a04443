// The separately compiled runtime: include this in exactly one .cpp file of a
// program whose every translation unit defines DDP_SEPARATE_COMPILATION (or
// link target ddp::runtime, which does both). That file then holds, once, the
// model-independent code (store, Gloo communicator, rendezvous, ...) that the
// other files only declare (detail/common/linkage.hpp).
#ifndef DDP_RUNTIME_HPP
#define DDP_RUNTIME_HPP

#if !defined(DDP_SEPARATE_COMPILATION)
// clang-format off
#error "ddp: <ddp/runtime.hpp> defines the runtime compiled once: define DDP_SEPARATE_COMPILATION in every file (ddp::runtime does), or leave it out to stay header-only"
#endif
#if defined(DDP_CONFIG_HPP) && !defined(DDP_IMPLEMENTATION)
#error "ddp: <ddp/runtime.hpp> must be the first ddp header of its file (one before it declared the runtime without defining it)"
// clang-format on
#endif
#ifndef DDP_IMPLEMENTATION
#define DDP_IMPLEMENTATION 1
#endif

#include <ddp/all.hpp>

#endif // DDP_RUNTIME_HPP
