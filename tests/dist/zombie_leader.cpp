// A two-rank job for dist.ddprun.first_to_die: rank 1's main thread exits at
// once while another thread keeps the process alive for 3 s and then kills
// it with SIGKILL, so rank 1's pid reads as a zombie long before waitpid can
// reap it (as a killed multi-threaded rank does while its threads exit).
// Rank 0 fails with code 1 as soon as it sees that zombie, as ddp's ranks do
// on a lost peer (shm_all_reduce's pid check). ddprun must name rank 1 first.
// The file of rank 1's pid: $ZOMBIE_LEADER_PID_FILE.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>

namespace {
/// Its main thread exited (a zombie), or it is gone (reaped already: a rank 0
/// slowed down past the 3 s still fails, and ddprun then reaps rank 1 first anyway).
bool main_thread_exited(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(f, s);
  const auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && (s[close + 2] == 'Z' || s[close + 2] == 'X');
}
} // namespace

int main() {
  using namespace std::chrono_literals;
  const char* rank = std::getenv("RANK");
  const char* pid_file = std::getenv("ZOMBIE_LEADER_PID_FILE");
  if (!rank || !pid_file) {
    std::fprintf(stderr, "zombie_leader: run it under ddprun with ZOMBIE_LEADER_PID_FILE set\n");
    return 2;
  }
  if (std::string(rank) == "1") {
    std::ofstream(pid_file) << ::getpid() << "\n";
    std::thread([] {
      std::this_thread::sleep_for(3s);
      std::raise(SIGKILL);
    }).detach();
    ::pthread_exit(nullptr); // the process lives on in the thread above
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  int pid = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!pid) std::ifstream(pid_file) >> pid;
    if (pid && main_thread_exited(pid)) {
      std::fprintf(stderr, "rank 0: rank 1's main thread has exited: failing on its loss\n");
      return 1;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::fprintf(stderr, "rank 0: rank 1's main thread did not exit within 10 s\n");
  return 3;
}
