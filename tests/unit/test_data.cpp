// The IDX and CIFAR-10 readers on files this test writes (valid and damaged),
// and on Debian's Fashion-MNIST when it is installed.
#include <ddp/data/cifar10.hpp>
#include <ddp/data/idx.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

/// A scratch directory for this process, removed at exit.
struct scratch_dir {
  fs::path path = fs::temp_directory_path() / ("ddp_data_test_" + std::to_string(::getpid()));
  scratch_dir() { fs::create_directories(path); }
  ~scratch_dir() { fs::remove_all(path); }
};

fs::path temp_dir() {
  static scratch_dir d;
  return d.path;
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  std::string s = be32(0x803) + be32(count) + be32(rows) + be32(cols);
  for (std::uint32_t i = 0; i < count * rows * cols; ++i)
    s.push_back(static_cast<char>(i % 256));
  return s;
}

std::string idx_labels(std::uint32_t count) {
  std::string s = be32(0x801) + be32(count);
  for (std::uint32_t i = 0; i < count; ++i)
    s.push_back(static_cast<char>(i % 10));
  return s;
}

std::string write(const std::string& name, const std::string& bytes, bool gz = false) {
  auto p = (temp_dir() / name).string();
  if (gz) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  return p;
}

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

template <class F> std::string data_error(F&& f) {
  try {
    f();
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::data);
    return e.what();
  }
  FAIL("expected a data error");
  return {};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("IDX images and labels, plain and gzip") {
  for (bool gz : {false, true}) {
    CAPTURE(gz);
    auto img = write(gz ? "i.gz" : "i", idx_images(3, 2, 4), gz);
    auto lab = write(gz ? "l.gz" : "l", idx_labels(3), gz);
    auto d = ddp::data::read_idx(img, lab, 10);
    CHECK(d.classes == 10);
    CHECK(d.size() == 3);
    CHECK(d.rows == 2);
    CHECK(d.cols == 4);
    CHECK(d.images.rows() == 3);
    CHECK(d.images.cols() == 8);
    CHECK(d.images(0, 1) == doctest::Approx(1 / 255.0));
    CHECK(d.images(2, 7) == doctest::Approx(23 / 255.0));
    CHECK(d.images.maxCoeff() <= 1.0f);
    CHECK(d.images.minCoeff() >= 0.0f);
    CHECK(d.labels == std::vector<std::uint8_t>{0, 1, 2});
  }
}

TEST_CASE("IDX errors name the file and the byte offset") {
  auto lab = write("l3", idx_labels(3));
  auto m = data_error([&] { ddp::data::read_idx_images(write("wrongmagic", be32(0x801) + be32(1))); });
  CHECK(has(m, "wrongmagic"));
  CHECK(has(m, "wrong magic 0x00000801 at byte offset 0"));

  auto full = idx_images(3, 2, 4); // 16 header bytes + 24 pixels
  m = data_error([&] { ddp::data::read_idx_images(write("trunc", full.substr(0, 16 + 13))); });
  CHECK(has(m, "trunc"));
  CHECK(has(m, "byte offset 29"));
  CHECK(has(m, "image 1 of 3"));

  m = data_error([&] { ddp::data::read_idx_images(write("shorthdr", full.substr(0, 10))); });
  CHECK(has(m, "byte offset 8"));

  m = data_error([&] { ddp::data::read_idx_images(write("extra", full + "xyz")); });
  CHECK(has(m, "3 unexpected bytes at byte offset 40"));

  m = data_error([&] { ddp::data::read_idx(write("img2", idx_images(2, 2, 4)), lab, 10); });
  CHECK(has(m, "3 labels"));
  CHECK(has(m, "2 images"));

  m = data_error([&] {
    ddp::data::read_idx_images((temp_dir() / "missing").string(), "install dataset-fashion-mnist");
  });
  CHECK(has(m, "missing"));
  CHECK(has(m, "install dataset-fashion-mnist"));

  // A huge count in a corrupt header fails at the end of the data, without a huge allocation.
  m = data_error(
      [&] { ddp::data::read_idx_labels(write("hugecount", be32(0x801) + be32(0xfffffff0u) + "ab"), 10); });
  CHECK(has(m, "byte offset 10"));
}

TEST_CASE("a label outside the classes is refused with the file and the byte offset, plain and gzip") {
  // Models index their outputs by label: 255 in a 10-class file once overflowed the example's heap.
  auto labels = idx_labels(20); // labels 0..9, 0..9 after the 8-byte header
  for (bool gz : {false, true}) {
    CAPTURE(gz);
    auto bad = labels;
    bad[8 + 13] = static_cast<char>(255);
    auto path = write(gz ? "bad255.gz" : "bad255", bad, gz);
    auto m = data_error([&] { ddp::data::read_idx_labels(path, 10); });
    CHECK(has(m, path));
    CHECK(has(m, "label 255 at byte offset 21"));
    CHECK(has(m, "(sample 13)"));
    CHECK(has(m, "10 classes 0..9"));
    CHECK(has(m, "fetch it again"));
    CHECK(has(m, "uncompressed") == gz);
    auto img = write(gz ? "img20.gz" : "img20", idx_images(20, 2, 2), gz);
    m = data_error([&] { ddp::data::read_idx(img, path, 10); });
    CHECK(has(m, "label 255 at byte offset 21"));
  }
  // The bound is exact: the largest label passes at its class count and fails one below it.
  auto nine = write("nine", be32(0x801) + be32(2) + std::string{0, 9});
  CHECK(ddp::data::read_idx_labels(nine, 10) == std::vector<std::uint8_t>{0, 9});
  auto m = data_error([&] { ddp::data::read_idx_labels(nine, 9); });
  CHECK(has(m, "label 9 at byte offset 9 (sample 1)"));
  CHECK(ddp::data::read_idx_labels(write("all", be32(0x801) + be32(1) + "\xff"), 256).at(0) == 255);
  for (std::size_t classes : {std::size_t{0}, std::size_t{257}}) {
    CAPTURE(classes);
    try {
      ddp::data::read_idx_labels(nine, classes);
      FAIL("accepted a class count of " << classes);
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::config);
      CHECK(has(e.what(), "number of classes"));
    }
  }
}

TEST_CASE("damaged gzip data is reported, not silently truncated") {
  auto good = write("g.gz", idx_images(200, 28, 28), true);
  auto bytes = read_file(good);
  auto cut = write("cut.gz", bytes.substr(0, bytes.size() / 2));
  auto m = data_error([&] { ddp::data::read_idx_images(cut); });
  CHECK(has(m, "cut.gz"));
  CHECK((has(m, "truncated") || has(m, "ends early")));
  auto flipped = bytes;
  for (std::size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64; ++i)
    flipped[i] = static_cast<char>(~flipped[i]);
  m = data_error([&] { ddp::data::read_idx_images(write("flip.gz", flipped)); });
  CHECK(has(m, "flip.gz"));
  CHECK(has(m, "byte offset"));
}

TEST_CASE("CIFAR-10 binary batches") {
  std::string batch;
  for (int r = 0; r < 4; ++r) {
    batch.push_back(static_cast<char>(r * 3 % 10));
    for (std::size_t i = 0; i < ddp::data::cifar10_pixels; ++i)
      batch.push_back(static_cast<char>((r + i) % 256));
  }
  auto a = write("data_batch_1.bin", batch);
  auto b = write("data_batch_2.bin.gz", batch, true);
  auto d = ddp::data::read_cifar10({a, b});
  CHECK(d.size() == 8);
  CHECK(d.channels == 3);
  CHECK(d.classes == 10);
  CHECK(d.images.cols() == 3072);
  CHECK(d.labels[1] == 3);
  CHECK(d.labels[7] == 9);
  CHECK(d.images(1, 0) == doctest::Approx(1 / 255.0));
  CHECK(d.images(5, 2) == doctest::Approx(3 / 255.0));

  auto m = data_error([&] { ddp::data::read_cifar10({write("cut.bin", batch.substr(0, 3073 * 2 + 100))}); });
  CHECK(has(m, "cut.bin"));
  CHECK(has(m, "record 2 at byte offset 6146"));
  auto bad = batch;
  bad[3073] = 12;
  m = data_error([&] { ddp::data::read_cifar10({write("badlabel.bin", bad)}); });
  CHECK(has(m, "label 12 at byte offset 3073 (sample 1)"));
  bad[3073] = 0;
  bad[3 * 3073] = static_cast<char>(255);
  m = data_error([&] { ddp::data::read_cifar10({a, write("badlabel.bin.gz", bad, true)}); });
  CHECK(has(m, "badlabel.bin.gz: label 255 at byte offset 9219 of the uncompressed data (sample 3)"));
  m = data_error([&] { ddp::data::read_cifar10({write("empty.bin", "")}); });
  CHECK(has(m, "empty.bin"));
}

TEST_CASE("Debian's Fashion-MNIST, when installed") {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "train-images-idx3-ubyte.gz")) {
    MESSAGE("skipped: dataset-fashion-mnist is not installed");
    return;
  }
  auto train =
      ddp::data::read_idx(dir + "train-images-idx3-ubyte.gz", dir + "train-labels-idx1-ubyte.gz", 10);
  auto test = ddp::data::read_idx(dir + "t10k-images-idx3-ubyte.gz", dir + "t10k-labels-idx1-ubyte.gz", 10);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.rows == 28);
  CHECK(train.cols == 28);
  CHECK(std::vector<int>(train.labels.begin(), train.labels.begin() + 10) ==
        std::vector<int>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  CHECK(std::vector<int>(test.labels.begin(), test.labels.begin() + 10) ==
        std::vector<int>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  CHECK(train.labels.back() == 5);
  CHECK(train.images.row(0).sum() * 255.0f == doctest::Approx(76247.0f).epsilon(1e-5));
  CHECK(test.images.row(0).sum() * 255.0f == doctest::Approx(33456.0f).epsilon(1e-5));
}
