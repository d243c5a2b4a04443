// The LibTorch adapter the separately compiled suites link
// (DDP_TEST_SEPARATE_COMPILATION), beside support/runtime.cpp's core:
// <ddp/ddp.hpp> is include/'s or the single header, whichever the suites use.
#define DDP_TORCH_IMPLEMENTATION 1
#include <ddp/ddp.hpp>
#include <ddp/torch.hpp>
