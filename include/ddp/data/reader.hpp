// Shared by the data readers: a byte reader over plain or gzip files (zlib
// reads both) that knows its offset, so every error names the file and the
// byte where things went wrong. Needs zlib: link ddp::data.
#ifndef DDP_DATA_READER_HPP
#define DDP_DATA_READER_HPP

#include <ddp/error.hpp>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <cstdint>
#include <string>
#include <vector>

#if !defined(DDP_NO_EIGEN) && __has_include(<Eigen/Core>)
#include <Eigen/Core>
#else
#error "ddp/data readers return Eigen matrices: add Eigen's include directory (Debian: libeigen3-dev)"
#endif

DDP_BEGIN_NAMESPACE
namespace data {

/// Samples as rows (one contiguous sample per row), values in [0, 1].
using sample_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A labelled image data set.
struct labeled_images {
  sample_matrix images;             ///< count x (channels * rows * cols)
  std::vector<std::uint8_t> labels; ///< count entries
  std::size_t rows = 0, cols = 0, channels = 1;
  std::size_t classes = 0; ///< every label is below this (checked by the reader)
  std::size_t size() const { return labels.size(); }
};

namespace detail {

inline error data_error(const std::string& path, const std::string& what) {
  return error(error_kind::data, path + ": " + what);
}

class byte_reader {
public:
  explicit byte_reader(std::string path, std::string hint = {})
      : path_(std::move(path)), hint_(std::move(hint)) {
    file_ = ::gzopen(path_.c_str(), "rb");
    if (!file_)
      throw data_error(path_, std::string("cannot open (") + std::strerror(errno) + ")" +
                                  (hint_.empty() ? "" : "; " + hint_));
    ::gzbuffer(file_, 1 << 17);
  }
  byte_reader(const byte_reader&) = delete;
  byte_reader& operator=(const byte_reader&) = delete;
  ~byte_reader() {
    if (file_) ::gzclose(file_);
  }

  const std::string& path() const { return path_; }
  std::uint64_t offset() const { return offset_; }
  /// Whether the file is gzip data (offsets then count uncompressed bytes). Valid after a read.
  bool compressed() const { return ::gzdirect(file_) == 0; }

  /// Reads up to n bytes; fewer only at the end of the data. Corrupt gzip data throws.
  std::size_t read_some(void* buf, std::size_t n) {
    std::size_t got = 0;
    auto* p = static_cast<unsigned char*>(buf);
    while (got < n) {
      unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
      int k = ::gzread(file_, p + got, chunk);
      if (k < 0) {
        int code = 0;
        const char* msg = ::gzerror(file_, &code);
        throw data_error(path_, "corrupt compressed data near uncompressed byte offset " +
                                    std::to_string(offset_ + got) + " (" + (msg ? msg : "zlib error") +
                                    "); the file is damaged, fetch it again");
      }
      if (k == 0) {
        int code = 0;
        const char* msg = ::gzerror(file_, &code);
        if (code != Z_OK && code != Z_STREAM_END)
          throw data_error(path_, "compressed data ends early at uncompressed byte offset " +
                                      std::to_string(offset_ + got) + " (" + (msg ? msg : "zlib error") +
                                      "); the file is truncated, fetch it again");
        break;
      }
      got += static_cast<std::size_t>(k);
    }
    offset_ += got;
    return got;
  }

  /// Reads exactly n bytes or throws naming `what` and the offset.
  void read_exact(void* buf, std::size_t n, const std::string& what) {
    auto start = offset_;
    auto got = read_some(buf, n);
    if (got != n)
      throw data_error(path_, "truncated: " + what + " at byte offset " + std::to_string(start) + " needs " +
                                  std::to_string(n) + " bytes, the file ends after " + std::to_string(got));
  }

  std::uint32_t read_be32(const std::string& what) {
    unsigned char b[4];
    read_exact(b, 4, what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }

  /// Throws when bytes remain: a count in the header that is too small.
  void expect_end(const std::string& what) {
    unsigned char b[4096];
    auto start = offset_;
    std::size_t extra = 0;
    for (std::size_t k; (k = read_some(b, sizeof b)) > 0;)
      extra += k;
    if (extra)
      throw data_error(path_, std::to_string(extra) + " unexpected bytes at byte offset " +
                                  std::to_string(start) + ", after " + what + ": header and data disagree");
  }

private:
  std::string path_, hint_;
  gzFile file_ = nullptr;
  std::uint64_t offset_ = 0;
};

/// A model indexes its outputs by label, so a label at or above the number of
/// classes (a damaged file, or the labels of another data set) would read and
/// write out of bounds: refuse it where it is read, with the file and the byte.
inline void check_classes(const std::string& path, std::size_t classes) {
  if (classes == 0 || classes > 256)
    throw error(error_kind::config, path + ": the number of classes must be 1..256 (labels are bytes), not " +
                                        std::to_string(classes));
}

inline void check_label(const byte_reader& r, std::uint8_t label, std::uint64_t offset, std::size_t sample,
                        std::size_t classes) {
  if (label < classes) return;
  throw data_error(r.path(), "label " + std::to_string(label) + " at byte offset " + std::to_string(offset) +
                                 (r.compressed() ? " of the uncompressed data" : "") + " (sample " +
                                 std::to_string(sample) + ") is not one of the " + std::to_string(classes) +
                                 " classes 0.." + std::to_string(classes - 1) +
                                 ": the file is damaged or belongs to another data set; fetch it again");
}

/// Bytes to floats in [0, 1], row by row into a sample matrix.
inline sample_matrix to_unit_floats(const std::vector<std::uint8_t>& bytes, std::size_t count,
                                    std::size_t width) {
  sample_matrix m(static_cast<Eigen::Index>(count), static_cast<Eigen::Index>(width));
  float* out = m.data();
  for (std::size_t i = 0; i < bytes.size(); ++i)
    out[i] = static_cast<float>(bytes[i]) * (1.0f / 255.0f);
  return m;
}

} // namespace detail
} // namespace data
DDP_END_NAMESPACE

#endif // DDP_DATA_READER_HPP
