// <ddp/ddp.hpp> parses neither Eigen (only declares the templates it names) nor
// <random>, <filesystem> or <ranges>, even with Eigen on the include path: each
// costs every file that includes ddp a share of its parse (docs/performance.md,
// Compile cost).
#include <ddp/ddp.hpp>

#ifdef EIGEN_WORLD_VERSION
#error "<ddp/ddp.hpp> includes Eigen: a file that holds no Eigen object pays its parse"
#endif
#ifdef _GLIBCXX_RANDOM
#error "<ddp/ddp.hpp> includes <random>"
#endif
#ifdef _GLIBCXX_FILESYSTEM
#error "<ddp/ddp.hpp> includes <filesystem>"
#endif
#ifdef _GLIBCXX_RANGES
#error "<ddp/ddp.hpp> includes <ranges>"
#endif

// Eigen's types are still named (declared) where ddp needs them.
static_assert(sizeof(ddp::dtype) == 1);
