// Deprecated: moved to <ddp/detail/data_parallel/debug.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/data_parallel/debug.hpp>
