// Checkpoints of the example: named float tensors plus the epoch, written
// atomically (temporary file, fsync, rename, fsync of the directory) and
// protected by a CRC-32, so a crash mid-write never leaves a torn file and a
// damaged file is refused with the offset of what is wrong. The path is checked
// before training (writable for saving; a regular file for --resume), so a bad
// one fails at once instead of after an epoch, and every message names it.
#pragma once

#include <ddp/error.hpp>

#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <span>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace example {

struct named_tensor {
  std::string name;
  std::span<float> data;
};

namespace detail {
constexpr char magic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '1'};

template <class T> void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

inline ddp::error bad(const std::string& path, const std::string& what) {
  return ddp::error(ddp::error_kind::data, "checkpoint " + path + ": " + what);
}

/// A path the user gave that cannot be used: an option error, not damaged data.
inline ddp::error bad_path(const std::string& path, const std::string& what) {
  return ddp::error(ddp::error_kind::config, "checkpoint " + path + ": " + what);
}

/// The file's size when a checkpoint of `tensors` is written (magic, epoch, count, entries, CRC).
inline std::uint64_t expected_size(const std::vector<named_tensor>& tensors) {
  std::uint64_t n = 8 + 8 + 4 + 4;
  for (auto& t : tensors)
    n += 4 + t.name.size() + 8 + t.data.size_bytes();
  return n;
}
} // namespace detail

/// Refuses a checkpoint path that save_checkpoint could not write, by creating
/// (and removing) the temporary file it writes first: permissions, a read-only
/// file system, a missing directory or a parent that is a file all show here,
/// as root too. A directory as the path would fail only at the final rename.
inline void check_writable(const std::string& path) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw detail::bad_path(path, "is a directory; --checkpoint takes a file path, e.g. " + path +
                                       "/checkpoint.bin");
    if (!S_ISREG(st.st_mode))
      throw detail::bad_path(path, "exists and is not a regular file; choose another --checkpoint path");
  }
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    auto dir = std::filesystem::path(path).parent_path().string();
    throw detail::bad_path(path, "cannot be written: creating " + tmp + " failed (" + std::strerror(e) +
                                     "); make " + (dir.empty() ? std::string(".") : dir) +
                                     " a writable directory or choose another --checkpoint path");
  }
  ::close(fd);
  ::unlink(tmp.c_str());
}

inline void save_checkpoint(const std::string& path, std::uint64_t epoch,
                            const std::vector<named_tensor>& tensors) {
  std::string blob(detail::magic, 8);
  detail::put(blob, std::uint64_t{epoch});
  detail::put(blob, static_cast<std::uint32_t>(tensors.size()));
  for (auto& t : tensors) {
    detail::put(blob, static_cast<std::uint32_t>(t.name.size()));
    blob += t.name;
    detail::put(blob, static_cast<std::uint64_t>(t.data.size()));
    blob.append(reinterpret_cast<const char*>(t.data.data()), t.data.size_bytes());
  }
  const auto crc = static_cast<std::uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(blob.data()), static_cast<uInt>(blob.size())));
  detail::put(blob, crc);

  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw detail::bad(path, "cannot create " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < blob.size()) {
    ssize_t k = ::write(fd, blob.data() + done, blob.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = errno;
      ::close(fd);
      throw detail::bad(path, "writing " + tmp + " failed: " + std::strerror(e));
    }
    done += static_cast<std::size_t>(k);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw detail::bad(path, "fsync of " + tmp + " failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw detail::bad(path, "rename from " + tmp + " failed: " + std::strerror(errno));
  auto dir = std::filesystem::path(path).parent_path();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd); // make the rename itself durable
    ::close(dfd);
  }
}

/// Loads into `tensors` (names and sizes must match); returns the saved epoch,
/// which must not exceed `max_epoch` (the run's --epochs: a later one would train nothing).
inline std::uint64_t load_checkpoint(const std::string& path, const std::vector<named_tensor>& tensors,
                                     std::uint64_t max_epoch) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw detail::bad(path, "cannot open it (" + std::string(std::strerror(errno)) +
                                "); --resume needs a checkpoint saved by an earlier run with --checkpoint");
  if (S_ISDIR(st.st_mode))
    throw detail::bad_path(path, "is a directory, not a checkpoint file; give the file's path");
  if (!S_ISREG(st.st_mode)) throw detail::bad_path(path, "is not a regular file");
  // The size is known from the model: a larger file is not one of its checkpoints, and is not read
  // (a corrupt or foreign file must not make rank 0 allocate whatever it claims).
  const auto want = detail::expected_size(tensors);
  if (static_cast<std::uint64_t>(st.st_size) > want)
    throw detail::bad(path, "is " + std::to_string(st.st_size) + " bytes, more than the " +
                                std::to_string(want) +
                                " of a checkpoint of this model: not one of its checkpoints");
  std::string blob(static_cast<std::size_t>(st.st_size), '\0');
  {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw detail::bad(path, "cannot open it (" + std::string(std::strerror(errno)) + ")");
    std::size_t got = 0;
    while (got < blob.size()) {
      ssize_t k = ::read(fd, blob.data() + got, blob.size() - got);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        const int e = errno;
        ::close(fd);
        throw detail::bad(path, "reading failed at byte offset " + std::to_string(got) + " (" +
                                    (k < 0 ? std::strerror(e) : "the file shrank while being read") + ")");
      }
      got += static_cast<std::size_t>(k);
    }
    ::close(fd);
  }
  if (blob.size() < 8 + 8 + 4 + 4)
    throw detail::bad(path, "only " + std::to_string(blob.size()) + " bytes: truncated");
  if (std::memcmp(blob.data(), detail::magic, 8) != 0)
    throw detail::bad(path, "wrong magic at byte offset 0: not a ddp checkpoint");
  std::uint32_t stored;
  std::memcpy(&stored, blob.data() + blob.size() - 4, 4);
  const auto actual = static_cast<std::uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(blob.data()), static_cast<uInt>(blob.size() - 4)));
  if (stored != actual) throw detail::bad(path, "checksum mismatch: the file is damaged or truncated");
  std::size_t at = 8;
  auto take = [&](void* dst, std::size_t n, const std::string& what) {
    if (at + n > blob.size() - 4)
      throw detail::bad(path, what + " at byte offset " + std::to_string(at) + " runs past the end");
    std::memcpy(dst, blob.data() + at, n);
    at += n;
  };
  std::uint64_t epoch;
  std::uint32_t count;
  take(&epoch, 8, "the epoch");
  // A valid checksum proves the bytes are as written, not that they make sense.
  if (epoch > max_epoch)
    throw detail::bad(path,
                      "the epoch at byte offset 8 is " + std::to_string(epoch) + ", beyond the " +
                          std::to_string(max_epoch) +
                          " epochs of this run (--epochs): resuming would train nothing. Raise --epochs "
                          "above it, or leave out --resume to start afresh");
  take(&count, 4, "the tensor count");
  if (count != tensors.size())
    throw detail::bad(path, "holds " + std::to_string(count) + " tensors, the model has " +
                                std::to_string(tensors.size()));
  for (auto& t : tensors) {
    std::uint32_t len;
    take(&len, 4, "a name length");
    if (len > blob.size() - 4 - at)
      throw detail::bad(path, "the name length " + std::to_string(len) + " at byte offset " +
                                  std::to_string(at - 4) + " runs past the end");
    std::string name(len, '\0');
    const auto name_at = at;
    take(name.data(), len, "a name");
    if (name != t.name)
      throw detail::bad(path, "tensor at byte offset " + std::to_string(name_at) + " is '" + name +
                                  "', expected '" + t.name + "'");
    std::uint64_t n;
    take(&n, 8, "the size of '" + name + "'");
    if (n != t.data.size())
      throw detail::bad(path, "'" + name + "' has " + std::to_string(n) + " values, the model has " +
                                  std::to_string(t.data.size()));
    take(t.data.data(), t.data.size_bytes(), "the values of '" + name + "'");
  }
  if (at != blob.size() - 4) throw detail::bad(path, "unexpected bytes at byte offset " + std::to_string(at));
  return epoch;
}

} // namespace example
