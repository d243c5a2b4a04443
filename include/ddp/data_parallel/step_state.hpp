// Deprecated: moved to <ddp/detail/data_parallel/step_state.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/data_parallel/step_state.hpp>
