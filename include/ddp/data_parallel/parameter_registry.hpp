// Deprecated: moved to <ddp/detail/data_parallel/parameter_registry.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/data_parallel/parameter_registry.hpp>
