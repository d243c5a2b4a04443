// The POSIX shared-memory segment the ranks of one node share (see
// detail/shm/all_reduce.hpp for what travels through it).
//
// Naming: "/ddp-" + the first 128 bits of SHA-256 over the job token, the
// store's address and the node rank: never the token itself (/dev/shm is
// world-listable). Mode 0600.
// Lifetime: local rank 0 creates it (O_EXCL) during the process group's
// construction and publishes the name, or its failure, in the store; every
// other local rank maps it; the node's last rank to have tried unlinks the
// name (ENOENT is fine): from then on the segment lives only in the mappings,
// so a rank killed with SIGKILL leaks nothing: the kernel frees the memory
// when the last mapping goes. Every failure path unlinks the name too. Each
// rank then reports success or failure, and the last one to report decides for
// the whole job (shm_segment::setup): only when every rank of every node has
// mapped its segment is the shm path taken; otherwise every rank reduces over TCP.
// Which ranks share a node comes from the topology (node_rank), never the
// hostname: two network namespaces of one host share a hostname and /dev/shm.
#ifndef DDP_DETAIL_SHM_SEGMENT_HPP
#define DDP_DETAIL_SHM_SEGMENT_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/error.hpp>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// One local rank's line in the control block (own cache lines: no false sharing).
struct alignas(128) shm_rank_line {
  std::uint64_t seq = 0;    ///< barriers this rank has arrived at (atomic_ref)
  std::int32_t global = -1; ///< its global rank, for error messages
  std::int32_t pid = 0;     ///< for the liveness check while others wait
  std::uint64_t pidns = 0;  ///< its PID namespace (inode of /proc/self/ns/pid; 0: unknown)
  /// 1 once it unmapped the segment (its process group ended; atomic_ref): a
  /// rank waiting for it at a barrier stops at once, where a live pid would
  /// keep it waiting (shm_all_reduce::check_alive; shm arrays' segments set it
  /// too, unread).
  std::uint32_t left = 0;
  collective_header header{}; ///< what it is running now: ranks that disagree fail with mismatch
};

struct shm_control {
  static constexpr std::uint64_t expected_magic =
      0x354d485350444444; // "DDDPSHM5": a line says when its rank left
  std::uint64_t magic = 0;
  std::uint32_t local_size = 0;
  std::uint32_t unused = 0;
  std::uint64_t area_bytes = 0; ///< bytes per area
  alignas(128) std::uint32_t arrived = 0;
  alignas(128) std::uint32_t generation = 0; ///< the futex word: bumped by the last arriver
  std::uint32_t sleepers = 0;                ///< ranks in a futex wait on it: 0 spares the wake
  alignas(128) std::int32_t aborted_by = -1; ///< global rank of a rank that failed inside a collective
  // followed by local_size shm_rank_line
};

/// The segment's name: a hash of the job's token and store, the node, the
/// setup's store keys (a subgroup's carry its prefix), and 128 random bits
/// drawn by the node's local rank 0, who publishes the name through the
/// (token-authenticated) store. The random part means a name left behind by
/// a rank killed inside the setup window never blocks a restart round or a
/// later job with the same settings (O_EXCL would refuse it), and a local
/// user cannot pre-create the name of a job whose token is empty (torchrun,
/// tcp://).
inline std::string shm_segment_name(const std::string& token, const std::string& store_where, int node_rank,
                                    const std::string& key) {
  unsigned char nonce[16];
  if (::RAND_bytes(nonce, sizeof nonce) != 1)
    detail::throw_error(error_kind::backend, {"OpenSSL RAND_bytes failed while naming the shm segment"});
  const std::string msg =
      detail::message({"ddp shm v3\n", token, "\n", store_where, "\n", node_rank, "\n", key, "\n",
                       std::string(reinterpret_cast<const char*>(nonce), sizeof nonce)});
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (::EVP_Digest(msg.data(), msg.size(), md, &len, ::EVP_sha256(), nullptr) != 1 || len < 16)
    detail::throw_error(error_kind::backend,
                        {"OpenSSL EVP_Digest(SHA-256) failed while naming the shm segment"});
  static constexpr char hex[] = "0123456789abcdef";
  std::string name = "/ddp-";
  for (unsigned i = 0; i < 16; ++i) {
    name += hex[md[i] >> 4];
    name += hex[md[i] & 15];
  }
  return name;
}

/// This process's PID namespace: the inode of /proc/self/ns/pid, 0 when it
/// cannot be read. A pid means something only within its namespace: ranks in
/// two containers that share /dev/shm must not judge each other's pids.
inline std::uint64_t own_pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

/// The inputs of shm_segment::setup, the same on every rank but rank and local_rank.
struct shm_setup {
  std::string token, store_where;
  int rank = 0, world_size = 1, node_rank = 0, local_rank = 0, local_size = 1;
  std::size_t area_bytes = 0; ///< bytes per area
  std::chrono::milliseconds timeout{};
  /// Areas after the control block: one per local rank, plus the result area
  /// of the all-reduce's segment (a shm array has none).
  bool result_area = true;
  /// The store keys of this segment's setup ("ddp/shm/": the all-reduce's;
  /// each shm array has its own).
  std::string key = "ddp/shm/";
  /// Said when the node's ranks asked for segments of different sizes.
  std::string size_mismatch_hint = "the node's ranks disagree on LOCAL_WORLD_SIZE or DDP_SHM_AREA_BYTES; "
                                   "start them with the same settings.";
};

/// Why shm_segment::setup did not give a segment: the first rank that failed
/// (-1: none), its error kind and message.
struct shm_setup_failure {
  int rank = -1;
  error_kind kind = error_kind::backend;
  std::string message;
};

inline long futex_call(void* addr, int op, std::uint32_t val, const timespec* ts) {
  return ::syscall(SYS_futex, addr, op, val, ts, nullptr, 0);
}

/// A mapped segment: control block (one line per local rank), local_size areas of
/// area_bytes bytes, and (the all-reduce's segment) one result area of
/// area_bytes bytes.
class shm_segment {
public:
  /// Collective over every rank of the group (all must call it): maps this
  /// node's segment, and returns it only when every rank of every node mapped
  /// its own; else nullptr on every rank, `failed` naming the first rank that
  /// failed and why (a full /dev/shm, a refused shm_open or mmap, ...). Throws
  /// ddp::error only when the store fails (a rank died or stalled meanwhile).
  template <class Store>
  static std::unique_ptr<shm_segment> setup(Store& store, const shm_setup& a, shm_setup_failure& failed) {
    const std::string node = detail::message({a.key, a.node_rank, "/"});
    std::unique_ptr<shm_segment> seg(
        new shm_segment(a.local_rank, a.local_size, a.area_bytes, a.result_area));
    std::string mine; // this rank's failure, "" for none
    error_kind mine_kind = error_kind::backend;
    try {
      try {
        if (a.local_rank == 0) {
          seg->name_ = shm_segment_name(a.token, a.store_where, a.node_rank, a.key);
          seg->create(a.area_bytes);
          store.set(node + "created", "ok " + seg->name_);
        } else {
          store.wait({node + "created"}, a.timeout);
          const std::string v = store.get(node + "created");
          // "failed": local rank 0's own report names the cause; nothing to add here
          if (v.rfind("ok ", 0) == 0) {
            seg->name_ = v.substr(3);
            seg->open_existing(a.size_mismatch_hint);
          }
        }
      } catch (const error& e) {
        // A resource failure of this rank's own (not the store's): report it, decide below.
        if (e.kind() == error_kind::timeout || e.kind() == error_kind::peer_lost) throw;
        // Without "ddp <kind> error: ": the kind is said again when the outcome is reported.
        mine = detail::message({"(node ", a.node_rank, ", local rank ", a.local_rank, ") ", e.message()});
        mine_kind = e.kind();
        if (a.local_rank == 0) {
          seg->discard(); // nobody else will open it
          store.set(node + "created", "failed");
        } else {
          seg->unmap(); // the name stays until the node's last rank tried: others may still open it
        }
      }
      if (seg->base_) {
        auto& me = seg->line(a.local_rank);
        me.global = a.rank;
        me.pid = static_cast<std::int32_t>(::getpid());
        me.pidns = own_pid_namespace();
      }
      // The node's last rank to have tried (mapped or failed) unlinks the name
      // now: the job-wide decision below may wait up to the timeout for other
      // nodes, and a node whose ranks are all killed meanwhile must leak nothing.
      if (store.add(node + "tried", 1) == a.local_size) seg->unlink();
      // The job-wide decision: the last rank to report sets it. A failing rank
      // records its failure before it reports, so the last one sees it.
      if (!mine.empty() && store.add(a.key + "failures", 1) == 1)
        store.set(a.key + "first-failure",
                  detail::message({a.rank, " ", static_cast<int>(mine_kind), " ", mine}));
      if (store.add(a.key + "reported", 1) == a.world_size)
        store.set(a.key + "outcome", store.add(a.key + "failures", 0) == 0
                                         ? "ok"
                                         : "failed " + store.get(a.key + "first-failure"));
      store.wait({a.key + "outcome"}, a.timeout);
      const std::string outcome = store.get(a.key + "outcome");
      seg->unlink(); // (done above by the node's last rank; again in case that rank failed first)
      if (outcome == "ok") return seg;
      seg->discard();
      // "failed <rank> <kind> <message>"
      std::size_t p1 = outcome.find(' ', 7), p2 = outcome.find(' ', p1 + 1);
      failed.rank = std::stoi(outcome.substr(7, p1 - 7));
      failed.kind = static_cast<error_kind>(std::stoi(outcome.substr(p1 + 1, p2 - p1 - 1)));
      failed.message = outcome.substr(p2 + 1);
      return nullptr;
    } catch (...) {
      seg->discard();
      throw;
    }
  }
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;
  ~shm_segment() {
    if (base_ && line(local_rank_).global >= 0)
      std::atomic_ref<std::uint32_t>(line(local_rank_).left).store(1, std::memory_order_release);
    unmap();
  }

  const std::string& name() const { return name_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  std::size_t area_bytes() const { return ctl().area_bytes; }
  shm_control& ctl() const { return *static_cast<shm_control*>(base_); }
  shm_rank_line& line(int l) const {
    return reinterpret_cast<shm_rank_line*>(static_cast<char*>(base_) + sizeof(shm_control))[l];
  }
  char* data(int l) const {
    return static_cast<char*>(base_) + control_bytes(local_size_) +
           static_cast<std::size_t>(l) * ctl().area_bytes;
  }
  char* result() const { return data(local_size_); }
  /// Whether [p, p + bytes) lies in local rank l's area.
  bool in_area(int l, const void* p, std::size_t bytes) const {
    if (!base_) return false;
    // As integers: p may point into any object, and comparing pointers into different ones is undefined.
    const auto a = reinterpret_cast<std::uintptr_t>(data(l)), c = reinterpret_cast<std::uintptr_t>(p);
    const std::size_t cap = ctl().area_bytes;
    return c >= a && bytes <= cap && c - a <= cap - bytes;
  }

private:
  shm_segment(int local_rank, int local_size, std::size_t area_bytes, bool result_area)
      : local_rank_(local_rank), local_size_(local_size),
        bytes_(control_bytes(local_size) +
               (static_cast<std::size_t>(local_size) + (result_area ? 1 : 0)) * area_bytes) {}

  void unlink() {
    if (!name_.empty()) ::shm_unlink(name_.c_str());
  }
  /// Unlinks (local rank 0's, if still named) and unmaps: nothing of it stays.
  void discard() {
    unlink();
    unmap();
  }

  static std::size_t control_bytes(int local_size) {
    const std::size_t raw =
        sizeof(shm_control) + static_cast<std::size_t>(local_size) * sizeof(shm_rank_line);
    return (raw + 4095) / 4096 * 4096; // the data areas start page-aligned
  }

  [[noreturn]] void fail(const std::string& what, int err) const {
    detail::throw_error(error_kind::backend, {what, " shared-memory segment /dev/shm", name_, " (", bytes_,
                                              " B): ", std::strerror(err)});
  }

  void create(std::size_t area_bytes) {
    int fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) fail("cannot create", errno);
    // posix_fallocate, not ftruncate: a full /dev/shm fails here with ENOSPC,
    // not later with SIGBUS on first touch.
    int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
    if (e != 0) {
      ::close(fd);
      fail("cannot size", e);
    }
    map(fd);
    auto* c = new (base_) shm_control{};
    c->local_size = static_cast<std::uint32_t>(local_size_);
    c->area_bytes = area_bytes;
    for (int l = 0; l < local_size_; ++l)
      new (&line(l)) shm_rank_line{};
    std::atomic_ref<std::uint64_t>(c->magic).store(shm_control::expected_magic, std::memory_order_release);
  }

  void open_existing(const std::string& size_mismatch_hint) {
    int fd = ::shm_open(name_.c_str(), O_RDWR, 0600);
    if (fd < 0) fail("cannot open", errno);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)) {
      ::close(fd);
      detail::throw_error(error_kind::backend, {"shared-memory segment ", name_,
                                                " is not this user's private segment (owner or mode differ): "
                                                "refusing to use it"});
    }
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes_) {
      ::close(fd);
      detail::throw_error(error_kind::mismatch,
                          {"shared-memory segment ", name_, " has ", st.st_size,
                           " B, but the rank opening it expected ", bytes_, " B: ", size_mismatch_hint});
    }
    map(fd);
    if (std::atomic_ref<std::uint64_t>(ctl().magic).load(std::memory_order_acquire) !=
        shm_control::expected_magic)
      detail::throw_error(error_kind::backend, {"shared-memory segment ", name_, " is not initialized"});
  }

  void map(int fd) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) fail("cannot map", e);
    base_ = p;
  }

  void unmap() {
    if (base_) ::munmap(base_, bytes_);
    base_ = nullptr;
  }

  std::string name_;
  int local_rank_, local_size_;
  std::size_t bytes_ = 0;
  void* base_ = nullptr;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHM_SEGMENT_HPP
