// Whether an address names this machine: how an elastic agent started with no --node-rank finds
// that it is the store's host (as torchrun's c10d rendezvous does with its endpoint).
#pragma once

#include <chrono>
#include <string>

namespace ddprun {

/// True when `host` (a name or a numeric address) resolves to an address that one of this
/// machine's network interfaces carries. Loopback never counts: every agent on a machine would
/// match it. A name the resolver calls temporarily unresolvable is asked again until `patience`
/// has passed; one that does not resolve is not this machine.
bool names_this_machine(const std::string& host, std::chrono::milliseconds patience);

} // namespace ddprun
