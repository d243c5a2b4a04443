// Deprecated: moved to <ddp/detail/process_group/peer_failure_watch.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/process_group/peer_failure_watch.hpp>
