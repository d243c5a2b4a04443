// Checkpoints of the example: named float tensors plus the epoch, written
// atomically (temporary file, fsync, rename, fsync of the directory) and
// protected by a CRC-32, so a crash mid-write never leaves a torn file and a
// damaged file is refused with the offset of what is wrong.
#pragma once

#include <ddp/error.hpp>

#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
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
} // namespace detail

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

/// Loads into `tensors` (names and sizes must match); returns the saved epoch.
inline std::uint64_t load_checkpoint(const std::string& path, const std::vector<named_tensor>& tensors) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw detail::bad(path, "cannot open it (" + std::string(std::strerror(errno)) + ")");
  std::string blob((std::istreambuf_iterator<char>(f)), {});
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
  take(&count, 4, "the tensor count");
  if (count != tensors.size())
    throw detail::bad(path, "holds " + std::to_string(count) + " tensors, the model has " +
                                std::to_string(tensors.size()));
  for (auto& t : tensors) {
    std::uint32_t len;
    take(&len, 4, "a name length");
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
