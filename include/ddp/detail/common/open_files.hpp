// The open-files limit (RLIMIT_NOFILE) a job needs, raised before it is hit.
//
// A rank holds one descriptor per Gloo peer, and the store's server two per
// rank, so a large job runs into the usual soft limit of 1024: about 340 ranks
// where rank 0 serves the store. Running out there shows as the store pausing
// its accepts and every rank timing out in its handshake, a full DDP_TIMEOUT
// later (docs/design-notes.md, "Note [open files]").
// Like the Go runtime and the JVM, ddp raises the soft limit to the hard one
// when it needs more (the soft limit of 1024 exists for select(), which ddp
// does not use); when even the hard limit is too low it fails at once and
// says how to raise it.
#ifndef DDP_DETAIL_COMMON_OPEN_FILES_HPP
#define DDP_DETAIL_COMMON_OPEN_FILES_HPP

#include <ddp/detail/common/directories.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/resource.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Descriptors this process has open now (/proc/self/fd; 16 where that cannot be read).
inline long open_files_in_use() {
  const long n = directory_entries("/proc/self/fd");
  return n <= 0 ? 16 : n - 1; // less the descriptor that read the directory
}

/// Wanted free beyond the estimate, for the program's own files (checkpoints,
/// data, logs). A hard limit that leaves less is a warning, not an error.
inline constexpr long open_files_headroom = 32;

/// What a process of the job will hold at its peak, by owner, for the
/// estimate and for the message when the limit cannot cover it. needed()
/// is the estimate, wanted() adds what should stay spare.
struct open_files_need {
  long in_use = 0;       ///< open already (the program's own)
  long backend = 0;      ///< the backend's connections (Gloo: one per peer)
  long store_server = 0; ///< served here: two connections per rank
  long store_client = 0; ///< this process's own store connections
  long launcher = 0;     ///< ddprun: the ranks' output pipes
  /// Kept free: the program's own files, and where the store is served, the
  /// reserve below which its server pauses accepting (store_fd_reserve).
  long spare = open_files_headroom;

  long needed() const { return in_use + backend + store_server + store_client + launcher; }
  long wanted() const { return needed() + spare; }

  std::string breakdown() const {
    std::string s = detail::message({in_use, " open already"});
    auto part = [&](long n, const char* what) {
      if (n > 0) detail::append_message(s, {", ", n, " ", what});
    };
    part(backend, "for the backend's connections");
    part(store_server, "for the store served here (two per rank)");
    part(store_client, "for this process's store connections");
    part(launcher, "for the ranks' output");
    return s;
  }
};

/// The store's server: its listener, its wake-up pipe, two connections per rank.
inline long store_server_open_files(int world) { return 3 + 2L * world; }

/// The most the kernel lets a soft limit rise to when the hard one is unlimited.
inline rlim_t kernel_open_files_max() {
  unsigned long long n = 0;
  if (std::FILE* f = std::fopen("/proc/sys/fs/nr_open", "r")) {
    if (std::fscanf(f, "%llu", &n) != 1) n = 0;
    std::fclose(f);
  }
  return n > 0 ? static_cast<rlim_t>(n) : rlim_t{1} << 20;
}

/// Makes RLIMIT_NOFILE cover `need`: a soft limit below the need with its
/// spare is raised to the hard one. A hard limit below the need itself is a
/// config error naming `who`, the job (`job`: "a job of 400 ranks"), the parts
/// of the need and how to raise the limit; one that covers the need but not
/// the spare is a warning (the job runs, the program's own files may not open).
inline void ensure_open_files(const open_files_need& need, const std::string& who, const std::string& job) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return; // nothing to learn: let the job try
  const long must = need.needed(), want = need.wanted();
  auto covers = [](rlim_t v, long n) { return v == RLIM_INFINITY || v >= static_cast<rlim_t>(n); };
  if (covers(lim.rlim_cur, want)) return;
  const std::string limit = lim.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_max);
  const std::string how = detail::message(
      {"Raise it to ", want, " (", need.spare, " to spare) where the job starts: `ulimit -n ", want,
       "` in the job script (above the hard limit as root), `nofile` in "
       "/etc/security/limits.conf, LimitNOFILE= in a systemd unit, or `docker run --ulimit "
       "nofile=",
       want, "`"});
  const std::string needs = detail::message(
      {who, ": ", job, " needs about ", must, " open files in this process (", need.breakdown(), ")"});
  if (!covers(lim.rlim_max, must))
    detail::throw_error(error_kind::config,
                        {needs, ", but its hard open-files limit (RLIMIT_NOFILE) is ", limit, ". ", how});
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_max == RLIM_INFINITY)
    lim.rlim_cur = std::max<rlim_t>(kernel_open_files_max(), static_cast<rlim_t>(want));
  else
    lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
    detail::throw_error(error_kind::config,
                        {needs, "; raising the soft open-files limit from ", before, " to ", lim.rlim_cur,
                         " failed (", std::strerror(errno), "). ", how});
  if (!covers(lim.rlim_cur, want))
    log_line(who, detail::message({"warning: the open-files limit ", lim.rlim_cur, " leaves ",
                                   static_cast<long>(lim.rlim_cur) - must, " spare beyond the about ", must,
                                   " that ", job, " needs in this process (", need.breakdown(),
                                   "): files the program opens may fail. ", how}));
  else if (debug() >= debug_level::info)
    log_line(who, detail::message({"raised the soft open-files limit from ", before, " to ", lim.rlim_cur,
                                   ": ", job, " needs about ", must, " (", need.breakdown(), ")"}));
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_OPEN_FILES_HPP
