// Deprecated: moved to <ddp/detail/process_group/peer_failure_relay.hpp>;
// this forwarding header goes in the next release.
#include <ddp/detail/process_group/peer_failure_relay.hpp>
