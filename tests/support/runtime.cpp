// The runtime the test suites link when they are built separately compiled
// (DDP_TEST_SEPARATE_COMPILATION): every feature's definitions, from include/'s
// <ddp/all.hpp>, or from the single header (its <ddp/ddp.hpp> holds all.hpp and is
// the only header on the path of a single-header build).
#define DDP_IMPLEMENTATION 1
#if __has_include(<ddp/all.hpp>)
#include <ddp/all.hpp>
#else
#include <ddp/ddp.hpp>
#endif
