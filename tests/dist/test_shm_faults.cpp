// The shm path when a rank dies: kill -9 of one rank of 3 inside the all_reduce
// loop; the survivors must fail naming it, well within the timeout, and the
// segment must not survive in /dev/shm.
#include "../support/spawn.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <thread>

using namespace std::chrono_literals;

TEST_CASE("kill -9 of a rank mid-collective: survivors name it, no /dev/shm segment leaks") {
  const int world = 3, victim = 1, port = ddp_test::free_port();
  std::vector<ddp_test::process> ps;
  for (int r = 0; r < world; ++r)
    ps.push_back(ddp_test::spawn({DDP_SCENARIO_WORKER, "loop"},
                                 {{"RANK", std::to_string(r)},
                                  {"WORLD_SIZE", std::to_string(world)},
                                  {"MASTER_ADDR", "127.0.0.1"},
                                  {"MASTER_PORT", std::to_string(port)},
                                  {"DDP_TOKEN", "shm-job-" + std::to_string(port)},
                                  {"DDP_TIMEOUT", "20s"},
                                  {"DDP_TEST_LOOP_SECONDS", "15"}},
                                 "shm_kill_" + std::to_string(r) + ".log"));
  // Wait until every rank is in the loop (READY printed, the segment mapped).
  const std::regex ready("READY rank=\\d+ pid=\\d+ shm=(\\S*)");
  std::string shm;
  for (auto& p : ps) {
    std::smatch m;
    auto until = std::chrono::steady_clock::now() + 30s;
    std::string out;
    while (!std::regex_search(out = p.output(), m, ready) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(20ms);
    REQUIRE(std::regex_search(out, m, ready));
    shm = m[1];
  }
  REQUIRE(shm.rfind("/ddp-", 0) == 0); // the loop goes through shm
  std::this_thread::sleep_for(200ms);
  const auto killed = std::chrono::steady_clock::now();
  ::kill(ps[victim].pid, SIGKILL);
  for (auto& p : ps)
    REQUIRE(ddp_test::wait_for(p, 60s));
  const auto took = std::chrono::steady_clock::now() - killed;
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    CAPTURE(r);
    INFO(ps[static_cast<std::size_t>(r)].output());
    std::smatch m;
    std::string out = ps[static_cast<std::size_t>(r)].output();
    REQUIRE(std::regex_search(out, m, std::regex("RESULT kind=(\\w+) rank=(-?\\d+)")));
    CHECK(m[1] == "peer_lost");
    CHECK(std::stoi(m[2]) == victim);
    CHECK(ps[static_cast<std::size_t>(r)].exit_code() == 1); // the loop scenario exits 1 on the error
  }
  CHECK(took < 10s); // well within DDP_TIMEOUT=20s: it was named, not waited out
  CHECK_FALSE(std::filesystem::exists("/dev/shm" + shm));
}
