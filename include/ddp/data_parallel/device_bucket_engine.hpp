// Deprecated: moved to <ddp/detail/data_parallel/device_bucket_engine.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/data_parallel/device_bucket_engine.hpp>
