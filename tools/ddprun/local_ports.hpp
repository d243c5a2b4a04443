// The local TCP ports a job's Gloo connections take on this node, against the node's ephemeral
// port range: a job that cannot fit is refused before any rank starts.
#pragma once

#include "options.hpp"

#include <optional>

namespace ddprun {

/// Refuses (the exit code) a job whose ranks on this node need more local ports than the
/// ephemeral range holds, with what to do; warns where they may. Nothing when the range is unknown.
std::optional<int> check_local_ports(const job& j);

} // namespace ddprun
