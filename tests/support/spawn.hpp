// Test helper: start a real process with extra environment variables, its
// output captured in a file, and wait for it with a deadline.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <netinet/in.h>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ddp_test {

struct process {
  pid_t pid = -1;
  std::string log; ///< file holding stdout and stderr
  int status = -1; ///< waitpid status once finished
  bool finished = false;

  std::string output() const {
    std::ifstream f(log);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  int exit_code() const { return finished && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

inline process spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                     const std::string& log) {
  process p;
  p.log = log;
  // Truncate here, not in the child: a reader must never see the last run's log.
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  p.pid = ::fork();
  if (p.pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  return p;
}

/// Waits until `p` exits; kills it (and reports false) after `limit`.
inline bool wait_for(process& p, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(p.pid, &p.status, WNOHANG) == p.pid) {
      p.finished = true;
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(p.pid, SIGKILL);
  ::waitpid(p.pid, &p.status, 0);
  p.finished = true;
  return false;
}

/// A port that was free a moment ago, drawn at random below the ephemeral range
/// (32768-60999 on Linux by default): a port the kernel hands out for port 0 or
/// an outgoing connection could be taken by another test between this check and
/// the job's bind (these tests run beside others, tests/CMakeLists.txt,
/// ddp_waiting_tests). The Python and shell tests draw from the same range
/// (tests/support/free_port.py): two draws of one port at once are possible but
/// rare (12000 ports), and the second bind then fails with a message naming it.
inline int free_port() {
  static std::mt19937 draw(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = std::uniform_int_distribution<int>(20000, 31999)(draw);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  throw std::runtime_error("free_port: no free port in 20000-31999 after 200 draws");
}

} // namespace ddp_test
