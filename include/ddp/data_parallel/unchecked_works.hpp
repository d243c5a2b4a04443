// Deprecated: moved to <ddp/detail/data_parallel/unchecked_works.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/data_parallel/unchecked_works.hpp>
