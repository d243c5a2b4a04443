#include "failure_notes.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace ddprun {
namespace {

/// A private folder (mode 0700) for a round's failure notes: under $TMPDIR, where a cluster
/// points a job's own scratch space (/tmp may be small, full or shared), else under /tmp.
/// Empty when neither takes one.
std::string make_note_dir() {
  const char* tmpdir = std::getenv("TMPDIR");
  static bool warned_relative = false; // once, not every restart round
  if (tmpdir != nullptr && tmpdir[0] != '\0' && tmpdir[0] != '/' && !warned_relative) {
    // The ranks run in other folders (a rank may chdir): a relative path would name another place.
    std::fprintf(
        stderr,
        "ddprun: warning: TMPDIR=%s is not an absolute path; the ranks' failure notes go under /tmp\n",
        tmpdir);
    warned_relative = true;
  }
  for (const char* base : {tmpdir, "/tmp"}) {
    if (base == nullptr || base[0] != '/') continue;
    std::string path = std::string(base) + "/ddprun-XXXXXX";
    if (::mkdtemp(path.data()) != nullptr) return path;
  }
  std::fprintf(stderr,
               "ddprun: warning: cannot create a folder for the ranks' failure notes under TMPDIR=%s or /tmp "
               "(%s): if a rank fails, the first to fail is judged by exit times alone\n",
               tmpdir != nullptr ? tmpdir : "(unset)", std::strerror(errno));
  return {};
}

} // namespace

failure_notes::failure_notes() : dir_(make_note_dir()) {
  if (!dir_.empty()) file_ = dir_ + "/failures";
}

std::vector<failure> failure_notes::read() const {
  std::vector<failure> out;
  std::ifstream f(file_);
  std::string line;
  while (std::getline(f, line)) {
    auto a = line.find(' ');
    auto b = a == std::string::npos ? a : line.find(' ', a + 1);
    if (b == std::string::npos) continue;
    try {
      failure e;
      e.ns = std::stoll(line.substr(0, a));
      e.rank = std::stoi(line.substr(a + 1, b - a - 1));
      e.what = "failed: " + line.substr(b + 1);
      e.prio = -1; // it wrote the note before anything else happened
      e.from_note = true;
      out.push_back(e);
    } catch (const std::exception&) {}
  }
  return out;
}

void failure_notes::remove() const {
  ::unlink(file_.c_str());
  ::rmdir(dir_.c_str());
}

} // namespace ddprun
