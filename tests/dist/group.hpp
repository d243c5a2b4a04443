// The process group a multi-process suite shares: joined once per process,
// from the environment ddprun sets.
#pragma once

#include "../support/spawn.hpp"

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

/// A fresh group for one case, joined by tcp:// on a port rank 0 drew: unlike a file:// group it
/// has a store (the path a launched job takes, shared memory included on one node), so a case
/// that poisons it can check what the store tells the other ranks.
inline ddp::process_group<ddp::gloo> fresh_tcp_group(std::chrono::milliseconds timeout) {
  auto& ctl = group();
  std::vector<std::int32_t> port{0};
  if (ctl.rank() == 0) port[0] = free_port();
  ctl.broadcast(port, 0);
  ddp::init_options o;
  o.init_method = "tcp://127.0.0.1:" + std::to_string(port[0]);
  o.timeout = timeout;
  return ddp::init_process_group<ddp::gloo>(o);
}

} // namespace ddp_test
