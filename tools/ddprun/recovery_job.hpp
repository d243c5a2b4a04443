// In-process recovery across nodes (--in-process-recovery with --nnodes N > 1): how the agents
// agree that the job has ended, and a user's stop; the generations they follow: generations.hpp;
// the verdict node 0 decides: verdict.hpp.
//
// Note [The end of a job that recovers across nodes]
// Node 0's agent serves the store, and its ranks may all be lost while survivors train on other
// nodes for hours: it must serve until the job ends, not until its own ranks do. So each agent,
// once its ranks have all ended, writes how each ended (ddprun/r<k>/ipr/done/<node>: "<job
// rank> <code> <what>" lines). The store's host waits for every other node's record, or for
// its agent's heartbeat to lapse (--heartbeat-timeout: a node lost, its ranks count as failed),
// with no other bound: a live node's ranks may run for days. It then decides for the job: 0
// when every member of the last generation the survivors' meetings published ended with 0,
// else the code of the lowest such rank that did not (a user's stop comes first: below); it writes that
// verdict (ddprun/r<k>/ipr/verdict), waits up to the heartbeat timeout for each live node to say it read it,
// and exits with it, as every other agent does.
//
// Note [A user's signal across nodes]
// A SIGINT, SIGTERM or SIGQUIT to one agent ends the job on every node with one exit code,
// 128 + signal: the signalled agent forwards it to its ranks, then records "<node> <signal>"
// (ddprun/r<k>/ipr/user_stop); every agent looks for that record with the generations and stops
// its own ranks the same way; node 0's verdict names the stop whatever the ranks' codes. Node 0
// writes that verdict before its store goes, so no node reads the stop as the store's host lost;
// a node that knows of the stop and then finds the store's host silent ends with 128 + signal too.
// An agent whose ranks have all ended takes its first signal the same way (it records the stop,
// unless one is recorded already) and waits for the verdict; only its own second signal (the
// first may have come in its round) ends it at once, with 128 + signal. A signal after the
// verdict was written changes nothing: the job had ended.
#pragma once

#include "generations.hpp"
#include "options.hpp"
#include "round.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddprun {

/// The store key of `what` in round `round`'s in-process recovery across nodes.
std::string ipr_key(int round, const std::string& what);

/// Whether this job recovers in process on several nodes (every agent follows the generations
/// and waits for the job's verdict).
bool recovers_across_nodes(const job& j);

/// A user's signal to one agent stops the whole job (Note [A user's signal across nodes]): the
/// agent records it in the store, where every other agent looks for it.
void record_user_stop(ddp::tcp_store& store, int round, int node, int sig);
/// The recorded stop: {node, signal}, or nothing. Throws when the store does not answer.
std::optional<std::pair<int, int>> user_stop_recorded(ddp::tcp_store& store, int round);

/// The job on this node: its ranks' one round (run_round), then the job's end below; the other
/// nodes' agents beat their heartbeat throughout. Returns ddprun's exit code.
int run_recovery_job(job& j);

/// Once this node's ranks have all ended: records how, and returns the job's exit code as the
/// store's host decides it (Note [The end of a job that recovers across nodes]). The store's
/// host first waits for the other nodes; another node waits for the verdict, and ends with 1,
/// naming the store's host, when it is lost.
int end_recovery_job(job& j, int round, const round_outcome& res);

/// The message for a store's host that no longer answers (`why`: the store's error).
std::string store_host_lost(const job& j, const std::string& why);
/// The same once the user's stop ({node, signal}) was known: the stop is the job's end.
std::string store_host_lost_after_stop(const job& j, std::pair<int, int> stop, const std::string& why);
/// The same when this node's signal `sig` came while its look at the silent store was under way.
std::string store_host_silent_at_signal(const job& j, int sig, const std::string& why);

} // namespace ddprun
