// The separately compiled LibTorch adapter: include this in exactly one .cpp
// file of a program whose every translation unit defines
// DDP_SEPARATE_COMPILATION and includes <ddp/torch.hpp> somewhere (or link
// target ddp::torch_runtime, which does both). That file then holds, once, the
// adapter's model-independent code (the attached module and its autograd
// hooks, the gradient views, the registry's walks of it) that the other files
// only declare (detail/torch/linkage.hpp). It defines the torch part alone:
// the core's runtime is still <ddp/runtime.hpp>'s (ddp::runtime).
#ifndef DDP_TORCH_RUNTIME_HPP
#define DDP_TORCH_RUNTIME_HPP

#if !defined(DDP_SEPARATE_COMPILATION)
// clang-format off
#error "ddp: <ddp/torch_runtime.hpp> defines the LibTorch adapter compiled once: define DDP_SEPARATE_COMPILATION in every file (ddp::torch_runtime does), or leave it out to stay header-only"
#endif
#if defined(DDP_DETAIL_TORCH_LINKAGE_HPP) && !defined(DDP_TORCH_IMPLEMENTATION)
#error "ddp: <ddp/torch_runtime.hpp> must come before <ddp/torch.hpp> in its file (the torch header before it declared the adapter without defining it)"
// clang-format on
#endif
#ifndef DDP_TORCH_IMPLEMENTATION
#define DDP_TORCH_IMPLEMENTATION 1
#endif

#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>

#endif // DDP_TORCH_RUNTIME_HPP
