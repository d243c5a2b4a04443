// The runtime the test suites link when they are built separately compiled
// (DDP_TEST_SEPARATE_COMPILATION): <ddp/ddp.hpp> is include/'s or the single
// header, whichever the suites use, so the same file defines either.
#define DDP_IMPLEMENTATION 1
#include <ddp/ddp.hpp>
