#include "crash_report_library.hpp"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

// Set by tools/CMakeLists.txt from the install's bin and lib folders.
#ifndef DDP_CRASH_REPORT_FROM_BINDIR
#define DDP_CRASH_REPORT_FROM_BINDIR "../lib/ddp"
#endif

namespace ddprun {
namespace {

/// The folder of the running ddprun, through /proc: argv[0] may name it by a relative path or $PATH.
std::string own_folder() {
  std::string self(4096, '\0');
  const ssize_t len = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  self.resize(len > 0 ? static_cast<std::size_t>(len) : 0);
  return self.substr(0, self.rfind('/') == std::string::npos ? 0 : self.rfind('/'));
}

} // namespace

std::string find_crash_report_library() {
  const std::string dir = own_folder();
  const std::string name = "libddp_crash_report.so";
  const std::string beside = dir + "/" + name, installed = dir + "/" DDP_CRASH_REPORT_FROM_BINDIR "/" + name;
  for (const std::string& path : {beside, installed}) {
    if (::access(path.c_str(), R_OK) != 0) continue;
    if (path.find_first_of(" :") == std::string::npos) return path;
    std::fprintf(
        stderr,
        "ddprun: --crash-report: the path %s holds a space or a colon, which LD_PRELOAD cannot carry: "
        "move ddp's build or install to a path without them\n",
        path.c_str());
    std::exit(2);
  }
  std::fprintf(stderr,
               "ddprun: --crash-report: %s is neither at %s nor at %s: build the ddp_crash_report target "
               "beside ddprun, or install ddp with its tools (DDP_BUILD_TOOLS=ON)\n",
               name.c_str(), beside.c_str(), installed.c_str());
  std::exit(2);
}

} // namespace ddprun
