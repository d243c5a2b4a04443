// The runtime the test suites link when they are built separately compiled
// (DDP_TEST_SEPARATE_COMPILATION): <ddp/all.hpp>, every feature, is include/'s,
// or a no-op after the single header (forced first, it holds all.hpp), so the
// same file defines either.
#define DDP_IMPLEMENTATION 1
#include <ddp/all.hpp>
