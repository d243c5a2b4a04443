// The definitions behind make_rendezvous.hpp: compiled in every translation
// unit when ddp is header-only, once in the runtime when it is compiled
// separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_INL_HPP
#define DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_INL_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/failure_note.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/common/open_files.hpp>
#include <ddp/detail/common/uncaught_error.hpp>
#include <ddp/detail/process_group/make_rendezvous.hpp>
#include <ddp/error.hpp>
#include <ddp/store.hpp>
#include <ddp/topology.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Tells ddprun's failure note and the store that `rank` fails on an error of
/// its own, so that peers waiting for it fail now, naming it and `reason`.
/// Peers read "rank R failed: <reason>": a leading "rank R: " goes.
DDP_INLINE void report_own_failure(tcp_store& store, int rank, std::string_view why) noexcept {
  try {
    std::string reason(why);
    const std::string self = detail::message({"rank ", rank, ": "});
    if (reason.starts_with(self)) reason.erase(0, self.size());
    note_failure_for_launcher(rank, reason);
    store.report_failure(reason);
  } catch (...) {} // best effort: the error going out is what matters
}

inline std::string token_or_env(const std::string& token) {
  if (!token.empty()) return token;
  return getenv_str("DDP_TOKEN").value_or("");
}

inline void parse_host_port(std::string_view hp, std::string_view method, std::string& host, int& port) {
  auto colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    detail::throw_error(error_kind::config, {"init_method '", method, "' must be tcp://host:port"});
  host = std::string(hp.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto p = parse_int(hp.substr(colon + 1));
  if (!p || *p < 1 || *p > 65535)
    detail::throw_error(error_kind::config, {"init_method '", method, "': port is not in 1..65535"});
  port = static_cast<int>(*p);
}

/// Connects to (rank 0: serves) the store. When that fails on a port ddp chose rather than
/// MASTER_PORT itself, the error also says where the port came from and how to choose another.
inline std::shared_ptr<tcp_store> make_store(const tcp_store_options& so, const std::string& origin) {
  try {
    return std::make_shared<tcp_store>(so);
  } catch (const error& e) {
    if (origin.empty() || origin.starts_with("MASTER_PORT")) throw;
    std::string_view what = e.what();
    what.remove_prefix(std::min(what.size(), what.find(": ") + 2)); // "ddp <kind> error: "
    what = what.substr(0, what.find(" (another job"));              // its MASTER_PORT advice
    detail::throw_error(e.kind(),
                        {what, ". ddp's rendezvous store uses ", origin,
                         ": that port must be free on the master node and reachable from every node; "
                         "set DDP_STORE_PORT (the same on every node) to choose another"},
                        e.rank());
  }
}

/// How long a rank refused before it joined the store tries to reach it, to
/// report: the store may not be up yet (rank 0 starts at its own pace), but
/// where every node has the same low limit, rank 0 was refused too and
/// serves nothing, and each rank's own error waits this long, so it is short
/// (docs/design-notes.md, "Note [report before store patience]").
inline constexpr std::chrono::milliseconds report_before_store_patience{3000};

/// A rank refused during the rendezvous reports it (report_own_failure), so
/// that the peers waiting for it there fail now instead of at DDP_TIMEOUT:
/// without a launcher that ends the job (srun does not by default), ten
/// minutes at the default timeout. One refused before it joined the store
/// (the open-files check) connects only to report, for report_before_store_patience at
/// most, unless it would serve the store itself (then there is none to tell).
/// It reports only if it can claim its rank there, as joining would: a store
/// of another job sharing the port and token is not told.
inline void report_failure_before_store(tcp_store_options so, const error& e) noexcept {
  if (so.serve) return;
  try {
    so.timeout = std::min(so.timeout, report_before_store_patience);
    so.linger.reset();
    tcp_store store(so);
    if (store.add(detail::message({"ddp/rank/", so.rank}), 1) == 1)
      report_own_failure(store, so.rank, e.message());
  } catch (...) {}
}

/// Raises the open-files limit to what this rank will hold (see open_files.hpp),
/// or fails now, before the job waits on a rank that ran out.
inline void ensure_rank_open_files(const ddp::topology& t, long backend_files, bool uses_store,
                                   bool serves_store) {
  open_files_need need;
  need.in_use = open_files_in_use();
  need.backend = backend_files;
  need.store_client = uses_store ? 3 : 0; // its own, the failure watch's, one to report a failure
  need.store_server = serves_store ? store_server_open_files(t.world_size) : 0;
  if (serves_store) need.spare += store_fd_reserve_max; // or the server pauses its accepts
  ensure_open_files(need, detail::message({"rank ", t.rank}),
                    detail::message({"a job of ", t.world_size, " rank", (t.world_size == 1 ? "" : "s")}));
}

/// One line on stderr, once per process, when the job is one process only because no
/// launcher set its variables: `./train` alone looked like a working job of one, silently.
/// An explicit world size (init_options, WORLD_SIZE) or DDP_QUIET_SINGLE=1 says it is meant.
inline void say_single_process(const ddp::topology& t, const init_options& o) {
  if (t.source != "default" || t.world_size != 1 || o.world_size > 0 || getenv_str("WORLD_SIZE") ||
      getenv_str("DDP_QUIET_SINGLE").value_or("") == "1")
    return;
  static std::once_flag once;
  std::call_once(once, [] {
    log_line("", "this job runs as one process (rank 0 of 1): no launcher set RANK and WORLD_SIZE. To "
                 "start N processes: ddprun --nproc-per-node N <program> [args...]. WORLD_SIZE=1 or "
                 "DDP_QUIET_SINGLE=1 silences this line.");
  });
}

/// `backend_files`: the descriptors the backend's connections take (its
/// communicator's open_files(topology), where it has one).
DDP_INLINE ddp::rendezvous make_rendezvous(const init_options& o,
                                           long (*backend_files)(const ddp::topology&)) {
  ddp::rendezvous rv;
  rv.topo = topology::from_env();
  if (o.world_size == 0 || o.world_size < -1)
    detail::throw_error(error_kind::config, {"init_options::world_size=", o.world_size, " must be >= 1"});
  if (o.world_size > 0) rv.topo.world_size = o.world_size;
  if (o.rank >= 0) rv.topo.rank = o.rank;
  install_uncaught_error_handler(rv.topo.rank);
  say_single_process(rv.topo, o);
  if (o.rank < -1 || rv.topo.rank >= rv.topo.world_size)
    detail::throw_error(error_kind::config,
                        {"rank ", rv.topo.rank, " is not below world size ", rv.topo.world_size});
  if (rv.topo.local_world_size > rv.topo.world_size) {
    rv.topo.local_world_size = rv.topo.world_size;
    rv.topo.local_rank = rv.topo.rank;
  }
  if (o.timeout.count() <= 0)
    detail::throw_error(error_kind::config, {"init_options::timeout must be positive"});
  rv.timeout = o.timeout;
  rv.token = token_or_env(o.token);

  std::string_view m = o.init_method;
  if (m.starts_with("file://")) {
    rv.file_path = std::string(m.substr(7));
    if (rv.file_path.empty())
      detail::throw_error(error_kind::config, {"init_method 'file://' needs a directory path"});
    ensure_rank_open_files(rv.topo, backend_files ? backend_files(rv.topo) : 0, false, false);
    return rv;
  }
  std::string host;
  int port = 0;
  if (m.starts_with("tcp://")) {
    parse_host_port(m.substr(6), m, host, port);
    rv.topo.master_addr = host;
    rv.topo.master_port = rv.topo.store_port = port;
  } else if (m == "env://" || m.empty()) {
    host = rv.topo.master_addr;
    port = rv.topo.store_port; // MASTER_PORT, or beside it under torch's elastic agent (see topology)
    if (rv.topo.world_size > 1 && host.empty())
      detail::throw_error(error_kind::config,
                          {"env:// needs MASTER_ADDR (rank ", rv.topo.rank, " of ", rv.topo.world_size,
                           "): launch with ddprun/torchrun, or export MASTER_ADDR and MASTER_PORT"});
    if (rv.topo.world_size > 1 && port == 0)
      detail::throw_error(
          error_kind::config,
          {"env:// needs MASTER_PORT (or DDP_STORE_PORT): launch with ddprun/torchrun, or export it"});
    if (host.empty()) host = "127.0.0.1"; // a single process serves itself on a free port
  } else {
    detail::throw_error(
        error_kind::config,
        {"init_method '", o.init_method, "' is not supported: use env://, tcp://host:port or file:///dir"});
  }
  tcp_store_options so;
  so.host = host;
  so.port = port;
  // ddprun on the master node serves the store when it launched the job (so it
  // outlives every rank); otherwise rank 0 does. tcp:// always means rank 0.
  const bool launcher = rv.topo.store_in_launcher && !m.starts_with("tcp://");
  so.serve = rv.topo.rank == 0 && !launcher;
  so.served_by_launcher = launcher;
  so.timeout = rv.timeout;
  so.token = rv.token;
  so.rank = rv.topo.rank;
  // Each restart round of the job has keys of its own, lost ranks included.
  if (rv.topo.restart_round) { // appended, not "r" + std::to_string(...): g++ 12's false -Wrestrict at -O3
    so.scope.assign(1, 'r');
    so.scope += std::to_string(*rv.topo.restart_round);
    so.scope += '/';
  }
  try {
    ensure_rank_open_files(rv.topo, backend_files ? backend_files(rv.topo) : 0, true, so.serve);
  } catch (const error& e) {
    report_failure_before_store(so, e);
    throw;
  }
  rv.store = make_store(so, m.starts_with("tcp://") ? std::string() : store_port_origin(rv.topo));
  // Two processes claiming one rank would corrupt the mesh: refuse clearly.
  // Not reported: the rank is the other process's (maybe of another job
  // sharing the port and token, running fine).
  if (rv.store->add(detail::message({"ddp/rank/", rv.topo.rank}), 1) != 1)
    detail::throw_error(error_kind::config, {"rank ", rv.topo.rank,
                                             " joined twice: two processes have the same RANK in this job"});
  auto refuse = [&](const std::string& why) { // this process holds the rank: it may report
    error e(error_kind::config, why);
    report_own_failure(*rv.store, rv.topo.rank, e.message());
    return e;
  };
  rv.store->set(detail::message({"ddp/world/", rv.topo.rank}), std::to_string(rv.topo.world_size));
  if (rv.topo.rank != 0) {
    auto w0 = rv.store->get("ddp/world/0");
    if (w0 != std::to_string(rv.topo.world_size))
      throw refuse(detail::message({"rank ", rv.topo.rank, " was started with world size ",
                                    rv.topo.world_size, " but rank 0 with ", w0}));
  }
  // Every rank arrives before any enters the backend's mesh: a rank lost
  // until here is named by this wait at once (the store answers "lost").
  // Without it, Gloo's connectFullMesh, interrupted by that answer, took the
  // full timeout to unwind (seen: 4 s at DDP_TIMEOUT=4s, 1 run in 2).
  rv.store->set(detail::message({"ddp/arrived/", rv.topo.rank}), "1");
  std::vector<std::string> arrived;
  for (int r = 0; r < rv.topo.world_size; ++r)
    arrived.push_back(detail::message({"ddp/arrived/", r}));
  try {
    rv.store->wait(arrived);
  } catch (const error& e) {
    if (e.kind() == error_kind::peer_lost) rv.store->serve_late_arrivals(rv.topo.world_size);
    throw;
  }
  return rv;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_PROCESS_GROUP_MAKE_RENDEZVOUS_INL_HPP
