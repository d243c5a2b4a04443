// The checkpoint file's write and checks (detail/checkpoint/file.hpp) on one process: one writer
// at a time under path.lock, stale temporary files removed, a torn file never rotated over the
// good .prev, and the refusals of short and foreign files.
#include <ddp/detail/checkpoint/file.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/file.h>
#include <unistd.h>
#include <vector>

namespace {

using ddp::detail::checkpoint_contents;

/// A fresh directory, removed with its files at the end.
struct scratch {
  std::string dir;
  scratch() {
    char t[] = "/tmp/ddp-ckpt-file-XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    dir = t;
  }
  ~scratch() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
};

std::vector<std::uint8_t> bytes_at_step(std::uint64_t step) {
  checkpoint_contents c;
  c.step = step;
  return ddp::detail::encode_checkpoint(c);
}

std::uint64_t step_of(const std::string& file) {
  return ddp::detail::decode_checkpoint(ddp::detail::read_checkpoint_file(file), file).step;
}

bool exists(const std::string& f) { return ::access(f.c_str(), F_OK) == 0; }

void put_file(const std::string& f, const std::string& text) { std::ofstream(f, std::ios::binary) << text; }

std::string write_error(const std::string& file, std::uint64_t step) {
  try {
    ddp::detail::write_checkpoint_file(file, bytes_at_step(step), true);
  } catch (const ddp::error& e) { return e.what(); }
  return "(no error)";
}

} // namespace

TEST_CASE("a second writer is refused, naming the lock, and the file stays") {
  scratch s;
  const auto file = s.dir + "/ckpt";
  ddp::detail::write_checkpoint_file(file, bytes_at_step(1), true);
  // Another writer (its own open file description, as another process has) holds the lock.
  const int other = ::open((file + ".lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(other >= 0);
  REQUIRE(::flock(other, LOCK_EX | LOCK_NB) == 0);
  const auto m = write_error(file, 2);
  CHECK_MESSAGE(m.find("another process is writing it (it holds " + file + ".lock)") != std::string::npos, m);
  CHECK(step_of(file) == 1);
  CHECK(!exists(file + ".prev"));
  ::close(other);
  CHECK(write_error(file, 2) == "(no error)");
  CHECK(step_of(file) == 2);
  CHECK(step_of(file + ".prev") == 1);
}

TEST_CASE("temporary files of writers that died are removed at the next save") {
  scratch s;
  const auto file = s.dir + "/ckpt";
  const auto stale = file + ".tmp.otherhost.123.0123456789abcdef";
  put_file(stale, "half a checkpoint");
  put_file(s.dir + "/ckpt2.tmp.1", "another path's"); // not this path's: kept
  ddp::detail::write_checkpoint_file(file, bytes_at_step(1), true);
  CHECK(!exists(stale));
  CHECK(exists(s.dir + "/ckpt2.tmp.1"));
  CHECK(step_of(file) == 1);
}

TEST_CASE("a torn file is set aside as .bad, never rotated over the good .prev") {
  scratch s;
  const auto file = s.dir + "/ckpt";
  ddp::detail::write_checkpoint_file(file, bytes_at_step(1), true);
  ddp::detail::write_checkpoint_file(file, bytes_at_step(2), true);
  // The live file is torn (a load would fall back to .prev, step 1).
  auto whole = ddp::detail::read_checkpoint_file(file);
  put_file(file, std::string(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2)));
  ddp::detail::write_checkpoint_file(file, bytes_at_step(3), true);
  CHECK(step_of(file) == 3);
  CHECK(step_of(file + ".prev") == 1);
  CHECK(exists(file + ".bad"));
  // A whole file rotates as before.
  ddp::detail::write_checkpoint_file(file, bytes_at_step(4), true);
  CHECK(step_of(file + ".prev") == 3);
}

TEST_CASE("short, foreign and other-version files: what each refusal says") {
  auto refusal = [](std::vector<std::uint8_t> b) {
    try {
      ddp::detail::decode_checkpoint(b, "f");
    } catch (const ddp::detail::checkpoint_unreadable& e) {
      return "unreadable: " + std::string(e.what());
    } catch (const ddp::error& e) { return std::string(e.what()); }
    return std::string("(no error)");
  };
  CHECK(refusal({'D', 'D', 'P'}).find("checkpoint f is truncated: 3 bytes") != std::string::npos);
  CHECK(refusal({}).find("checkpoint f is truncated: 0 bytes") != std::string::npos);
  CHECK(refusal({'h', 'e', 'l', 'l', 'o', '\n', 'x', 'y'}).find("is not a ddp checkpoint") !=
        std::string::npos);
  auto b = bytes_at_step(1);
  b[8] = 2; // format version 2
  const auto v2 = refusal(b);
  CHECK_MESSAGE(v2.starts_with("unreadable: "), v2);
  CHECK_MESSAGE(v2.find("checkpoint f has format version 2") != std::string::npos, v2);
  b = bytes_at_step(1);
  b[40] ^= 1;
  CHECK(refusal(b).find("fails its SHA-256 check") != std::string::npos);
}
