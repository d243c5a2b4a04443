// Checkpoints of the example: named float tensors plus the training position
// (epoch, batches done within it, and each rank's running loss), written
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

/// Where training stands: `batch` batches of `epoch` are done (0 at an epoch's
/// start). A mid-epoch position holds only for the world size and batch size
/// it was saved with; `loss_sums` is each rank's running loss of the epoch.
struct position {
  std::uint64_t epoch = 0;
  std::uint64_t batch = 0;
  std::uint32_t batch_size = 0;
  std::vector<double> loss_sums; ///< one per rank: its size is the world size
};

/// Layout (little-endian): magic "DDPCKPTV", u32 version, u64 epoch, u64 batch,
/// u32 batch size, u32 world size W, W x f64 loss sums, u32 tensor count, per
/// tensor (u32 name length, name, u64 count, floats), u32 CRC-32 of all before.
/// Version 1 ("DDPCKPT1", u64 epoch, tensors, CRC) had no position within an epoch.
inline constexpr std::uint32_t checkpoint_version = 2;

namespace detail {
constexpr char magic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', 'V'};
constexpr char magic_v1[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '1'};
constexpr std::size_t epoch_offset = 12; // after the magic and the version

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

/// The largest file a checkpoint of `tensors` can be, from up to `max_world` ranks.
inline std::uint64_t expected_size(const std::vector<named_tensor>& tensors, std::uint64_t max_world) {
  std::uint64_t n = 8 + 4 + 8 + 8 + 4 + 4 + 8 * max_world + 4 + 4;
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

inline void save_checkpoint(const std::string& path, const position& at,
                            const std::vector<named_tensor>& tensors) {
  std::string blob(detail::magic, 8);
  detail::put(blob, checkpoint_version);
  detail::put(blob, std::uint64_t{at.epoch});
  detail::put(blob, std::uint64_t{at.batch});
  detail::put(blob, std::uint32_t{at.batch_size});
  detail::put(blob, static_cast<std::uint32_t>(at.loss_sums.size()));
  for (double l : at.loss_sums)
    detail::put(blob, l);
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

/// Loads into `tensors` (names and sizes must match); returns the saved
/// position, whose epoch must not exceed `max_epoch` (the run's --epochs: a
/// later one would train nothing). A file of another format version, or not a
/// checkpoint at all, is refused saying which.
inline position load_checkpoint(const std::string& path, const std::vector<named_tensor>& tensors,
                                std::uint64_t max_epoch, std::uint64_t max_world = 1u << 20) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw detail::bad(path, "cannot open it (" + std::string(std::strerror(errno)) +
                                "); --resume needs a checkpoint saved by an earlier run with --checkpoint");
  if (S_ISDIR(st.st_mode))
    throw detail::bad_path(path, "is a directory, not a checkpoint file; give the file's path");
  if (!S_ISREG(st.st_mode)) throw detail::bad_path(path, "is not a regular file");
  // The size is known from the model: a larger file is not one of its checkpoints, and is not read
  // (a corrupt or foreign file must not make rank 0 allocate whatever it claims).
  const auto want = detail::expected_size(tensors, max_world);
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
  if (blob.size() >= 8 && std::memcmp(blob.data(), detail::magic_v1, 8) == 0)
    throw detail::bad(path, "format version 1 (an older build of this example), which has no position within "
                            "an epoch: this build reads version " +
                                std::to_string(checkpoint_version) +
                                " only. Leave out --resume to start afresh, or resume with the build that "
                                "wrote it");
  if (blob.size() < 8 + 4 + 8 + 8 + 4 + 4 + 4 + 4)
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
  std::uint32_t version;
  take(&version, 4, "the format version");
  if (version != checkpoint_version)
    throw detail::bad(path, "format version " + std::to_string(version) +
                                " at byte offset 8, but this build "
                                "reads version " +
                                std::to_string(checkpoint_version) +
                                " only: written by another build of this example, or not its checkpoint");
  position pos;
  std::uint32_t count, world;
  take(&pos.epoch, 8, "the epoch");
  // A valid checksum proves the bytes are as written, not that they make sense.
  if (pos.epoch > max_epoch)
    throw detail::bad(path,
                      "the epoch at byte offset " + std::to_string(detail::epoch_offset) + " is " +
                          std::to_string(pos.epoch) + ", beyond the " + std::to_string(max_epoch) +
                          " epochs of this run (--epochs): resuming would train nothing. Raise --epochs "
                          "above it, or leave out --resume to start afresh");
  take(&pos.batch, 8, "the batch within the epoch");
  take(&pos.batch_size, 4, "the batch size");
  take(&world, 4, "the world size");
  if (world > max_world || std::uint64_t{world} * 8 > blob.size() - 4 - at)
    throw detail::bad(path, "the world size " + std::to_string(world) + " at byte offset " +
                                std::to_string(at - 4) + " does not fit the file");
  pos.loss_sums.resize(world);
  for (auto& l : pos.loss_sums)
    take(&l, 8, "a rank's running loss");
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
  return pos;
}

} // namespace example
