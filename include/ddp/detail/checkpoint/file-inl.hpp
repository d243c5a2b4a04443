// The definitions behind detail/checkpoint/file.hpp: compiled in every translation unit
// when ddp is header-only, once in the runtime when it is compiled separately.
#ifndef DDP_DETAIL_CHECKPOINT_FILE_INL_HPP
#define DDP_DETAIL_CHECKPOINT_FILE_INL_HPP

#include <ddp/detail/checkpoint/file.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>

#include <openssl/evp.h>

#include <array>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <string_view>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {
namespace checkpoint_io {

inline std::array<std::uint8_t, checkpoint_digest_bytes> sha256(const std::uint8_t* data, std::size_t n) {
  std::array<std::uint8_t, checkpoint_digest_bytes> md{};
  unsigned int len = 0;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(::EVP_MD_CTX_new(), ::EVP_MD_CTX_free);
  if (!ctx || ::EVP_DigestInit_ex(ctx.get(), ::EVP_sha256(), nullptr) != 1 ||
      ::EVP_DigestUpdate(ctx.get(), data, n) != 1 || ::EVP_DigestFinal_ex(ctx.get(), md.data(), &len) != 1 ||
      len != md.size())
    detail::throw_error(error_kind::backend,
                        {"OpenSSL's SHA-256 failed while sealing or checking a checkpoint"});
  return md;
}

template <class T> void put(std::vector<std::uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

inline void put_bytes(std::vector<std::uint8_t>& out, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}

inline void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put(out, static_cast<std::uint32_t>(s.size()));
  put_bytes(out, s.data(), s.size());
}

/// Reads the body; a record that runs past the end is a malformed file.
class reader {
public:
  reader(const std::vector<std::uint8_t>& b, std::size_t at, std::size_t end, const std::string& file)
      : b_(b), at_(at), end_(end), file_(file) {}
  template <class T> T get() {
    T v{};
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint32_t>();
    const auto* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  std::vector<std::byte> get_bytes(std::uint64_t n) {
    if (n > end_ - at_) malformed("a tensor runs past the end of the body");
    const auto* p = take(static_cast<std::size_t>(n));
    return std::vector<std::byte>(reinterpret_cast<const std::byte*>(p),
                                  reinterpret_cast<const std::byte*>(p) + n);
  }
  bool done() const { return at_ == end_; }
  [[noreturn]] void malformed(const std::string& what) const {
    detail::throw_error(error_kind::data, {"checkpoint ", file_, " is malformed (", what, ", at byte ", at_,
                                           ") although its checksum holds: it was not written by this "
                                           "version of ddp; save it again with the job that made it"});
  }

private:
  const std::uint8_t* take(std::size_t n) {
    if (n > end_ - at_) malformed("a record runs past the end of the body");
    const auto* p = b_.data() + at_;
    at_ += n;
    return p;
  }
  const std::vector<std::uint8_t>& b_;
  std::size_t at_, end_;
  const std::string& file_;
};

inline std::string errno_text() { return std::strerror(errno); }

inline void write_all(int fd, const std::uint8_t* p, std::size_t n, const std::string& file) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      detail::throw_error(error_kind::data, {"checkpoint ", file, ": writing it failed (", errno_text(),
                                             "); the previous one is untouched"});
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

inline std::string directory_of(const std::string& file) {
  const auto slash = file.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : file.substr(0, slash);
}

/// A file descriptor closed on every path; close() errors matter only where checked by hand.
class fd_holder {
public:
  explicit fd_holder(int fd) : fd_(fd) {}
  fd_holder(fd_holder&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  fd_holder(const fd_holder&) = delete;
  fd_holder& operator=(const fd_holder&) = delete;
  ~fd_holder() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  /// close(2)'s result (NFS reports a failed write-back here).
  int close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd);
  }

private:
  int fd_;
};

/// `file.lock`, created if need be and held with flock(2) until the holder goes: one writer of
/// `file` at a time, across processes and (flock over NFS is a POSIX lock there) hosts.
inline fd_holder lock_checkpoint(const std::string& file) {
  const std::string lock = file + ".lock";
  fd_holder fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    detail::throw_error(error_kind::data,
                        {"checkpoint ", file, ": cannot create its lock file ", lock, " (", errno_text(),
                         "); check that the directory exists and is writable"});
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      detail::throw_error(error_kind::data,
                          {"checkpoint ", file, ": another process is writing it (it holds ", lock,
                           "): two jobs save to one path (an earlier incarnation of this job "
                           "still running?); the file is untouched"});
    detail::throw_error(error_kind::data, {"checkpoint ", file, ": cannot lock ", lock, " (", errno_text(),
                                           "); the file is untouched"});
  }
  return fd;
}

inline std::string base_name(const std::string& file) {
  const auto slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

/// Removes `file.tmp.*` left by writers that died (SIGKILL) before their rename; under the lock,
/// no live writer owns one.
inline void remove_stale_temporaries(const std::string& file) {
  const std::string dir = directory_of(file), prefix = base_name(file) + ".tmp.";
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return; // creating the temporary file reports an unusable directory
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d.get()))
    if (std::string_view(e->d_name).starts_with(prefix)) stale.emplace_back(e->d_name);
  for (auto& name : stale)
    ::unlink((detail::message({dir, "/", name})).c_str());
}

/// A name no other writer uses, even one with this pid in another container on a shared volume.
inline std::string temporary_name(const std::string& file) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "host");
  for (char* c = host; *c; ++c)
    if (*c == '/') *c = '_';
  // The kernel's random bytes (what std::random_device reads, without parsing <random>);
  // where they fail (or are not seeded yet on a fresh boot: no wait for them), the clock and
  // a stack address still differ between writers.
  std::uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r))
    r = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        reinterpret_cast<std::uintptr_t>(&r);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return detail::message({file, ".tmp.", host, ".", ::getpid(), ".", hex});
}

/// Whether `file` is a whole checkpoint (header, length, SHA-256): only such a file becomes .prev.
inline bool checkpoint_intact(const std::string& file) {
  try {
    check_checkpoint_integrity(read_checkpoint_file(file), file);
    return true;
  } catch (const error&) { return false; }
}

} // namespace checkpoint_io

DDP_INLINE void check_checkpoint_integrity(const std::vector<std::uint8_t>& b, const std::string& file) {
  using namespace checkpoint_io;
  auto refuse = [&](const std::string& what) {
    detail::throw_error(error_kind::data, {"checkpoint ", file, " ", what});
  };
  if (b.size() < sizeof checkpoint_magic)
    refuse(
        detail::message({"is truncated: ", b.size(), " bytes, fewer than a header and checksum (",
                         checkpoint_header_bytes + checkpoint_digest_bytes, "); use an earlier checkpoint"}));
  if (std::memcmp(b.data(), checkpoint_magic, sizeof checkpoint_magic) != 0)
    refuse("is not a ddp checkpoint (it does not begin with \"DDPCKPT\"): check the path");
  if (b.size() < checkpoint_header_bytes + checkpoint_digest_bytes)
    refuse(
        detail::message({"is truncated: ", b.size(), " bytes, fewer than a header and checksum (",
                         checkpoint_header_bytes + checkpoint_digest_bytes, "); use an earlier checkpoint"}));
  std::uint32_t version = 0, order = 0;
  std::uint64_t body = 0;
  std::memcpy(&version, b.data() + 8, 4);
  std::memcpy(&order, b.data() + 12, 4);
  std::memcpy(&body, b.data() + 16, 8);
  if (order != 0x01020304)
    throw checkpoint_unreadable(detail::message(
        {"checkpoint ", file,
         " was written by a host of the other byte order: load it on a host like the one that saved it"}));
  if (version != checkpoint_version)
    throw checkpoint_unreadable(
        detail::message({"checkpoint ", file, " has format version ", version, "; this ddp reads version ",
                         checkpoint_version, ": load it with the ddp that wrote it"}));
  const std::uint64_t want = checkpoint_header_bytes + body + checkpoint_digest_bytes;
  if (body > b.size() || want != b.size())
    refuse(detail::message({want > b.size() ? "is truncated" : "has bytes past its end",
                            ": its header promises ", want, " bytes, the file has ", b.size(),
                            " (a write cut short, or a file copied in part); use an earlier checkpoint"}));
  const auto md = sha256(b.data(), b.size() - checkpoint_digest_bytes);
  if (std::memcmp(md.data(), b.data() + b.size() - checkpoint_digest_bytes, md.size()) != 0)
    refuse("fails its SHA-256 check: its bytes changed after it was written (a torn write, a bit flip, "
           "an edit); use an earlier checkpoint");
}

DDP_INLINE std::vector<std::uint8_t> encode_checkpoint(const checkpoint_contents& c) {
  using namespace checkpoint_io;
  std::vector<std::uint8_t> out;
  put_bytes(out, checkpoint_magic, sizeof checkpoint_magic);
  put(out, checkpoint_version);
  put(out, std::uint32_t{0x01020304}); // byte order: the file is read back by the same kind of host
  put(out, std::uint64_t{0});          // body size, filled below
  put(out, c.step);
  put(out, c.epoch);
  put(out, c.samples);
  put(out, c.saved_world_size);
  put_string(out, c.optimizer);
  put(out, c.optimizer_steps);
  put(out, c.slots);
  put(out, static_cast<std::uint32_t>(c.tensors.size()));
  for (auto& t : c.tensors) {
    put(out, static_cast<std::uint8_t>(t.role));
    put_string(out, t.name);
    put(out, static_cast<std::uint8_t>(t.type));
    put(out, t.count);
    put_bytes(out, t.values.data(), t.values.size());
    for (auto& s : t.state)
      put_bytes(out, s.data(), s.size());
  }
  const std::uint64_t body = out.size() - checkpoint_header_bytes;
  std::memcpy(out.data() + 16, &body, sizeof body);
  const auto md = sha256(out.data(), out.size());
  out.insert(out.end(), md.begin(), md.end());
  return out;
}

DDP_INLINE checkpoint_contents decode_checkpoint(const std::vector<std::uint8_t>& b,
                                                 const std::string& file) {
  using namespace checkpoint_io;
  check_checkpoint_integrity(b, file);
  reader r(b, checkpoint_header_bytes, b.size() - checkpoint_digest_bytes, file);
  checkpoint_contents c;
  c.step = r.get<std::uint64_t>();
  c.epoch = r.get<std::uint64_t>();
  c.samples = r.get<std::uint64_t>();
  c.saved_world_size = r.get<std::uint32_t>();
  c.optimizer = r.get_string();
  c.optimizer_steps = r.get<std::uint64_t>();
  c.slots = r.get<std::uint32_t>();
  const auto n = r.get<std::uint32_t>();
  for (std::uint32_t i = 0; i < n; ++i) {
    checkpoint_tensor t;
    const auto role = r.get<std::uint8_t>();
    if (role > 1) r.malformed(detail::message({"a tensor's role is ", role}));
    t.role = static_cast<checkpoint_role>(role);
    t.name = r.get_string();
    const auto type = r.get<std::uint8_t>();
    if (type > static_cast<std::uint8_t>(dtype::i8))
      r.malformed(detail::message({"tensor '", t.name, "' has dtype code ", type}));
    t.type = static_cast<dtype>(type);
    t.count = r.get<std::uint64_t>();
    const std::uint64_t bytes = t.count * size_of(t.type);
    if (t.count > (std::uint64_t{1} << 48))
      r.malformed(detail::message({"tensor '", t.name, "' claims ", t.count, " elements"}));
    t.values = r.get_bytes(bytes);
    if (t.role == checkpoint_role::parameter)
      for (std::uint32_t k = 0; k < c.slots; ++k)
        t.state.push_back(r.get_bytes(bytes));
    c.tensors.push_back(std::move(t));
  }
  if (!r.done()) r.malformed("bytes follow the last tensor");
  return c;
}

DDP_INLINE std::vector<std::uint8_t> read_checkpoint_file(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    detail::throw_error(error_kind::data,
                        {"checkpoint ", file, " cannot be opened (", checkpoint_io::errno_text(), ")"});
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = checkpoint_io::errno_text();
      ::close(fd);
      detail::throw_error(error_kind::data, {"checkpoint ", file, " cannot be read (", why, ")"});
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

DDP_INLINE void write_checkpoint_file(const std::string& file, const std::vector<std::uint8_t>& bytes,
                                      bool keep_previous) {
  using namespace checkpoint_io;
  // Held across the temporary file, the rotation and the rename: a second writer is refused.
  fd_holder lock = lock_checkpoint(file);
  remove_stale_temporaries(file);
  const std::string tmp = temporary_name(file);
  fd_holder fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    detail::throw_error(error_kind::data,
                        {"checkpoint ", file, ": cannot create ", tmp, " beside it (", errno_text(),
                         "); check that the directory exists and is writable"});
  try {
    write_all(fd.get(), bytes.data(), bytes.size(), file);
    if (::fsync(fd.get()) != 0)
      detail::throw_error(error_kind::data, {"checkpoint ", file, ": fsync of ", tmp, " failed (",
                                             errno_text(), "); the previous one is untouched"});
    if (fd.close() != 0)
      detail::throw_error(error_kind::data, {"checkpoint ", file, ": closing ", tmp, " failed (",
                                             errno_text(), "); the previous one is untouched"});
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  struct stat st {};
  if (keep_previous && ::stat(file.c_str(), &st) == 0) {
    // Only a whole checkpoint becomes .prev: a torn one (the reason a load fell back to .prev)
    // is set aside as file.bad, and .prev stays the last good one.
    const bool intact = checkpoint_intact(file);
    const std::string to = file + (intact ? ".prev" : ".bad");
    if (std::rename(file.c_str(), to.c_str()) != 0) {
      const std::string why = errno_text();
      ::unlink(tmp.c_str());
      detail::throw_error(error_kind::data, {"checkpoint ", file, ": cannot move the previous one to ", to,
                                             " (", why, "); it is untouched"});
    }
    if (!intact)
      log_line("checkpoint", detail::message({file, " was not a whole checkpoint: kept as ", to, ", ", file,
                                              ".prev left as it was"}));
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    detail::throw_error(error_kind::data,
                        {"checkpoint ", file, ": cannot rename ", tmp, " to it (", why, ")",
                         (keep_previous ? detail::message({"; the previous one is ", file, ".prev"}) : "")});
  }
  // The renames are durable only once the directory is.
  const std::string dir = directory_of(file);
  fd_holder d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0 || ::fsync(d.get()) != 0 || d.close() != 0)
    detail::throw_error(error_kind::data,
                        {"checkpoint ", file, ": written and renamed, but syncing its directory ", dir,
                         " failed (", errno_text(),
                         "): after a crash of this host the file may be the previous one"});
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_CHECKPOINT_FILE_INL_HPP
