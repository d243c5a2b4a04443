// The process group a multi-process suite shares: joined once per process,
// from the environment ddprun sets.
#pragma once

#include <ddp/ddp.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ddp_test {

inline ddp::process_group<ddp::gloo>& group() {
  static auto pg = ddp::init_process_group<ddp::gloo>();
  return pg;
}

/// A fresh group for one case, joined by file:// in a directory rank 0 made
/// (named `prefix`, the pid and a serial), so that poisoning it leaves the
/// suite's own group usable. `dir_out`: that directory, for the case to remove.
inline ddp::process_group<ddp::gloo> fresh_file_group(const std::string& prefix, std::string& dir_out,
                                                      std::chrono::milliseconds timeout) {
  static int serial = 0;
  auto& ctl = group();
  std::vector<std::uint8_t> dir(512, 0);
  if (ctl.rank() == 0) {
    auto base = std::filesystem::temp_directory_path() /
                (prefix + std::to_string(::getpid()) + "_" + std::to_string(serial));
    std::filesystem::create_directories(base);
    std::string s = base.string();
    std::copy(s.begin(), s.end(), dir.begin());
  }
  ++serial;
  ctl.broadcast(dir, 0);
  dir_out.assign(reinterpret_cast<const char*>(dir.data()));
  ddp::init_options opts;
  opts.init_method = "file://" + dir_out;
  opts.timeout = timeout;
  return ddp::init_process_group<ddp::gloo>(opts);
}

} // namespace ddp_test
