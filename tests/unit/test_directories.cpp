// The POSIX stand-ins for <filesystem> (detail/common/directories.hpp) on real
// directories: mkdir -p, a file in the way, counting a directory's entries.
#include <ddp/detail/common/directories.hpp>

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {

/// A fresh directory, removed with its files at the end.
struct scratch {
  std::string dir;
  scratch() {
    char t[] = "/tmp/ddp-directories-XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    dir = t;
  }
  ~scratch() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
};

void touch(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
}

} // namespace

TEST_CASE("make_directories creates missing parents and accepts what exists") {
  scratch s;
  const std::string nested = s.dir + "/a/b//c/";
  CHECK(!ddp::detail::is_directory(s.dir + "/a"));
  CHECK(ddp::detail::make_directories(nested) == 0);
  CHECK(ddp::detail::is_directory(s.dir + "/a/b/c"));
  CHECK(ddp::detail::make_directories(nested) == 0); // again: already there
  CHECK(ddp::detail::make_directories(s.dir) == 0);
}

TEST_CASE("make_directories names what stops it: a file in the way, an empty path") {
  scratch s;
  touch(s.dir + "/file");
  CHECK(ddp::detail::make_directories(s.dir + "/file") == ENOTDIR);
  CHECK(ddp::detail::make_directories(s.dir + "/file/below") == ENOTDIR);
  CHECK(!ddp::detail::is_directory(s.dir + "/file"));
  CHECK(ddp::detail::make_directories("") == ENOENT);
}

TEST_CASE("directory_entries counts entries other than . and ..") {
  scratch s;
  CHECK(ddp::detail::directory_entries(s.dir.c_str()) == 0);
  touch(s.dir + "/x");
  touch(s.dir + "/..y");
  REQUIRE(ddp::detail::make_directories(s.dir + "/d") == 0);
  CHECK(ddp::detail::directory_entries(s.dir.c_str()) == 3);
  CHECK(ddp::detail::directory_entries((s.dir + "/missing").c_str()) == -1);
}
