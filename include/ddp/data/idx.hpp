// IDX files (MNIST, Fashion-MNIST): images and labels, plain or .gz.
#ifndef DDP_DATA_IDX_HPP
#define DDP_DATA_IDX_HPP

#include <ddp/data/reader.hpp>

#include <cstdio>

DDP_BEGIN_NAMESPACE
namespace data {

namespace detail {

inline std::string hex32(std::uint32_t v) {
  char b[11];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

/// Reads the magic and dimensions of an IDX file of unsigned bytes.
inline std::vector<std::uint32_t> read_idx_header(byte_reader& r, std::uint32_t dims, const char* kind) {
  auto magic = r.read_be32("the IDX magic number");
  const std::uint32_t want = 0x00000800u | dims;
  if (magic != want)
    throw data_error(r.path(), "wrong magic " + hex32(magic) + " at byte offset 0: expected " + hex32(want) +
                                   " (IDX " + kind + " of unsigned bytes)");
  std::vector<std::uint32_t> d;
  for (std::uint32_t i = 0; i < dims; ++i)
    d.push_back(r.read_be32("dimension " + std::to_string(i)));
  return d;
}

/// Reads count records of `width` bytes, growing the buffer as data arrives so a
/// corrupt header cannot make us allocate more than the file holds.
inline std::vector<std::uint8_t> read_records(byte_reader& r, std::size_t count, std::size_t width,
                                              const char* what) {
  std::vector<std::uint8_t> bytes;
  const std::size_t total = count * width;
  bytes.reserve(std::min<std::size_t>(total, std::size_t{64} << 20));
  const std::size_t chunk = std::max<std::size_t>(width, std::size_t{1} << 20) / width * width;
  while (bytes.size() < total) {
    std::size_t n = std::min(chunk, total - bytes.size());
    std::size_t at = bytes.size();
    bytes.resize(at + n);
    auto start = r.offset();
    std::size_t got = r.read_some(bytes.data() + at, n);
    if (got != n)
      throw data_error(r.path(), "truncated: " + std::string(what) + " " +
                                     std::to_string((at + got) / width) + " of " + std::to_string(count) +
                                     " is cut off at byte offset " + std::to_string(start + got) +
                                     " (the header promises " + std::to_string(count) + ")");
  }
  return bytes;
}

} // namespace detail

/// Reads an IDX image file (magic 0x00000803): count x rows x cols bytes.
/// `hint` is appended to a cannot-open error (e.g. the package that provides the file).
inline labeled_images read_idx_images(const std::string& path, const std::string& hint = {}) {
  detail::byte_reader r(path, hint);
  auto d = detail::read_idx_header(r, 3, "images");
  if (d[1] == 0 || d[2] == 0 || d[1] > 65536 || d[2] > 65536)
    throw detail::data_error(path, "implausible image size " + std::to_string(d[1]) + "x" +
                                       std::to_string(d[2]) + " in the header at byte offset 8");
  labeled_images out;
  out.rows = d[1];
  out.cols = d[2];
  const std::size_t width = out.rows * out.cols;
  auto bytes = detail::read_records(r, d[0], width, "image");
  r.expect_end(std::to_string(d[0]) + " images");
  out.images = detail::to_unit_floats(bytes, d[0], width);
  return out;
}

/// Reads an IDX label file (magic 0x00000801); every label must be below `classes`
/// (10 for MNIST and Fashion-MNIST), or a data error names the file and the byte.
inline std::vector<std::uint8_t> read_idx_labels(const std::string& path, std::size_t classes,
                                                 const std::string& hint = {}) {
  detail::check_classes(path, classes);
  detail::byte_reader r(path, hint);
  auto d = detail::read_idx_header(r, 1, "labels");
  const auto first = r.offset(); // the labels follow the header, one byte each
  auto labels = detail::read_records(r, d[0], 1, "label");
  for (std::size_t i = 0; i < labels.size(); ++i)
    detail::check_label(r, labels[i], first + i, i, classes);
  r.expect_end(std::to_string(d[0]) + " labels");
  return labels;
}

/// Images and labels together; their counts must agree and every label must be below `classes`.
inline labeled_images read_idx(const std::string& images_path, const std::string& labels_path,
                               std::size_t classes, const std::string& hint = {}) {
  auto out = read_idx_images(images_path, hint);
  out.labels = read_idx_labels(labels_path, classes, hint);
  out.classes = classes;
  if (out.labels.size() != static_cast<std::size_t>(out.images.rows()))
    throw detail::data_error(labels_path, "holds " + std::to_string(out.labels.size()) + " labels but " +
                                              images_path + " holds " + std::to_string(out.images.rows()) +
                                              " images: the files do not belong together");
  return out;
}

} // namespace data
DDP_END_NAMESPACE

#endif // DDP_DATA_IDX_HPP
