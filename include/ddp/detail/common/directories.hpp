// Directories through POSIX calls: <filesystem> would cost every file that
// includes ddp a noticeable share of its parsing for these few lines
// (docs/performance.md, Compile cost).
#ifndef DDP_DETAIL_COMMON_DIRECTORIES_HPP
#define DDP_DETAIL_COMMON_DIRECTORIES_HPP

#include <ddp/config.hpp>

#include <cerrno>
#include <cstddef>
#include <string>

#include <dirent.h>
#include <sys/stat.h>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Whether `path` names a directory (following links).
inline bool is_directory(const std::string& path) noexcept {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Creates `path` and its missing parents, as `mkdir -p`: 0 once `path` is a
/// directory, else the errno of the step that failed (ENOTDIR where `path`
/// names something else).
inline int make_directories(const std::string& path) {
  if (path.empty()) return ENOENT;
  for (std::size_t end = 1; end <= path.size(); ++end) {
    if (end < path.size() && path[end] != '/') continue;
    const std::string prefix = path.substr(0, end);
    int rc;
    do
      rc = ::mkdir(prefix.c_str(), 0777);
    while (rc != 0 && errno == EINTR);
    // Another process (another node, on a shared file system) may have made it first, and a
    // directory one may not write in may still exist: what counts is that it is there.
    if (rc != 0 && errno != EEXIST && !is_directory(prefix)) return errno;
  }
  return is_directory(path) ? 0 : ENOTDIR;
}

/// Entries of directory `path` other than "." and "..", or -1 where it cannot be read.
inline long directory_entries(const char* path) noexcept {
  DIR* d = ::opendir(path);
  if (d == nullptr) return -1;
  long n = 0;
  while (const dirent* e = ::readdir(d)) {
    const char* s = e->d_name;
    if (!(s[0] == '.' && (s[1] == '\0' || (s[1] == '.' && s[2] == '\0')))) ++n;
  }
  ::closedir(d);
  return n;
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_DIRECTORIES_HPP
