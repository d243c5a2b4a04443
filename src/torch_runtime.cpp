// The separately compiled LibTorch adapter of target ddp::torch_runtime: its
// model-independent code (the attached module, the gradient views, the
// registry's walks of it), compiled once for the program instead of in every
// file that includes <ddp/torch.hpp> (docs/api.md, "Header-only or compiled
// once"). The core's runtime is ddp::runtime's (src/runtime.cpp).
#include <ddp/torch_runtime.hpp>
