// Deprecated: moved to <ddp/detail/data_parallel/device_broadcasts.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/data_parallel/device_broadcasts.hpp>
