// CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes
// (32x32, the R plane, then G, then B), plain or .gz.
#ifndef DDP_DATA_CIFAR10_HPP
#define DDP_DATA_CIFAR10_HPP

#include <ddp/data/reader.hpp>

DDP_BEGIN_NAMESPACE
namespace data {

inline constexpr std::size_t cifar10_pixels = 3 * 32 * 32;
inline constexpr std::size_t cifar10_record = 1 + cifar10_pixels;
inline constexpr std::size_t cifar10_classes = 10;

/// Reads and concatenates CIFAR-10 batch files (data_batch_1.bin ... or test_batch.bin).
/// Images are count x 3072 (channel planes as stored), in [0, 1]. Every label must be
/// one of the 10 classes, or a data error names the file and the byte.
inline labeled_images read_cifar10(const std::vector<std::string>& paths) {
  if (paths.empty()) throw error(error_kind::config, "read_cifar10: no files given");
  labeled_images out;
  out.rows = out.cols = 32;
  out.channels = 3;
  out.classes = cifar10_classes;
  std::vector<std::uint8_t> pixels;
  for (const auto& path : paths) {
    detail::byte_reader r(path);
    std::uint8_t rec[cifar10_record];
    std::size_t in_file = 0;
    for (;;) {
      auto start = r.offset();
      std::size_t got = r.read_some(rec, cifar10_record);
      if (got == 0) break;
      if (got != cifar10_record)
        throw detail::data_error(path, "truncated: record " + std::to_string(in_file) + " at byte offset " +
                                           std::to_string(start) + " has " + std::to_string(got) + " of " +
                                           std::to_string(cifar10_record) + " bytes");
      detail::check_label(r, rec[0], start, in_file, cifar10_classes);
      out.labels.push_back(rec[0]);
      pixels.insert(pixels.end(), rec + 1, rec + cifar10_record);
      ++in_file;
    }
    if (in_file == 0) throw detail::data_error(path, "holds no records (empty file)");
  }
  out.images = detail::to_unit_floats(pixels, out.labels.size(), cifar10_pixels);
  return out;
}

} // namespace data
DDP_END_NAMESPACE

#endif // DDP_DATA_CIFAR10_HPP
