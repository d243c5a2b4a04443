// Failures with real processes: a rank that exits mid-collective, a rank that
// stalls, a rank that throws in its own code, a rank lost during rendezvous,
// ddprun naming the first rank to fail, the flight recorder's JSON, an
// intruder with the wrong token, a port already in use.
#include "../support/spawn.hpp"

#include <doctest/doctest.h>

#include <ddp/detail/store/socket.hpp>
#include <ddp/store.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

using namespace std::chrono_literals;
using ddp_test::process;

namespace {

struct result {
  std::string kind;
  int rank = -2;
  long ms = -1;
};

result parse(const process& p) {
  std::smatch m;
  std::string out = p.output();
  result r;
  if (std::regex_search(out, m, std::regex("RESULT kind=(\\w+) rank=(-?\\d+) ms=(\\d+)"))) {
    r.kind = m[1];
    r.rank = std::stoi(m[2]);
    r.ms = std::stol(m[3]);
  }
  return r;
}

/// Starts the ranks of a job (only rank `only` when given).
/// `tag`: in the log files' names, for jobs of one scenario run at once.
std::vector<process> start_job(int world, const std::string& scenario, int port,
                               std::map<std::string, std::string> extra = {}, int only = -1,
                               const std::string& tag = "") {
  std::vector<process> ps;
  for (int r = 0; r < world; ++r) {
    if (only >= 0 && r != only) continue;
    auto env = extra;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(world);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port);
    env.emplace("DDP_TOKEN", "job-" + std::to_string(port));
    env.emplace("DDP_TIMEOUT", "20s");
    ps.push_back(ddp_test::spawn({DDP_SCENARIO_WORKER, scenario}, env,
                                 "fault_" + scenario + tag + "_" + std::to_string(world) + "_" +
                                     std::to_string(r) + ".log"));
  }
  return ps;
}

} // namespace

TEST_CASE("a rank that exits mid-collective: survivors get peer_lost naming it within 2 s") {
  for (int world : {2, 3, 4}) {
    CAPTURE(world);
    auto ps = start_job(world, "exit_mid", ddp_test::free_port());
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    CHECK(ps.back().exit_code() == 3);
    for (int r = 0; r + 1 < world; ++r) {
      auto res = parse(ps[static_cast<std::size_t>(r)]);
      CAPTURE(r);
      INFO(ps[static_cast<std::size_t>(r)].output());
      CHECK(ps[static_cast<std::size_t>(r)].exit_code() == 0);
      CHECK(res.kind == "peer_lost");
      CHECK(res.rank == world - 1);
      CHECK(res.ms < 2000);
    }
  }
}

TEST_CASE("a rank that stalls: the others name it after the configured timeout") {
  for (int world : {2, 3}) {
    CAPTURE(world);
    auto dir = std::filesystem::temp_directory_path() /
               ("ddp_fr_" + std::to_string(::getpid()) + "_" + std::to_string(world));
    std::filesystem::create_directories(dir);
    auto ps = start_job(world, "stall", ddp_test::free_port(),
                        {{"DDP_TIMEOUT", "2s"}, {"DDP_FLIGHT_RECORDER", dir.string()}});
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    for (int r = 0; r + 1 < world; ++r) {
      auto res = parse(ps[static_cast<std::size_t>(r)]);
      CAPTURE(r);
      INFO(ps[static_cast<std::size_t>(r)].output());
      CHECK(ps[static_cast<std::size_t>(r)].exit_code() == 0);
      // Ranks next to the staller time out; the rest learn it from them (peer_lost) a moment later.
      CHECK((res.kind == "timeout" || res.kind == "peer_lost"));
      // The desync report names the rank that could not say how far it got.
      CHECK(res.rank == world - 1);
      CHECK(ps[static_cast<std::size_t>(r)].output().find("desync report") != std::string::npos);
      CHECK(res.ms >= 1900);
      CHECK(res.ms < 9000); // 2 s timeout + up to 1 s looking for a lost rank + the 3 s report window
      // DDP_FLIGHT_RECORDER: this rank's last collectives as JSON, the failed one last.
      std::ifstream f(dir / ("rank_" + std::to_string(r) + ".json"));
      std::stringstream json;
      json << f.rdbuf();
      INFO(json.str());
      CHECK(json.str().find("\"rank\": " + std::to_string(r)) != std::string::npos);
      CHECK(json.str().find("\"kind\": \"all_reduce\"") != std::string::npos);
      CHECK(json.str().find("\"state\": \"failed\"") != std::string::npos);
      CHECK(json.str().find("rank " + std::to_string(world - 1) + " sent no progress report") !=
            std::string::npos);
    }
    CHECK(parse(ps[0]).kind == "timeout");
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("a rank that stalls in a subgroup: its peer's desync report names its job rank") {
  // World 4 in pairs; job rank 3 (rank 1 of the pair {2, 3}) stalls. Through the pair's segment
  // and, with DDP_SHM=0, over TCP: job rank 2 times out and names job rank 3, which the store's
  // progress keys are numbered by, not the pair's rank 1. Both jobs at once.
  std::vector<std::vector<process>> jobs;
  for (const char* shm : {"1", "0"})
    jobs.push_back(start_job(4, "subgroup_stall", ddp_test::free_port(),
                             {{"DDP_TIMEOUT", "2s"}, {"DDP_SHM", shm}}, -1, std::string("_shm") + shm));
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    CAPTURE(j == 0 ? "shm" : "tcp");
    auto& ps = jobs[j];
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    for (int r : {0, 1}) {
      INFO(ps[static_cast<std::size_t>(r)].output());
      CHECK(ps[static_cast<std::size_t>(r)].output().find("PAIR OK") != std::string::npos);
    }
    const auto& p = ps[2];
    INFO(p.output());
    CHECK(p.exit_code() == 0);
    auto res = parse(p);
    CHECK(res.kind == "timeout");
    CHECK(res.rank == 3);
    CHECK(p.output().find("desync report") != std::string::npos);
    CHECK(p.output().find("rank 3 sent no progress report") != std::string::npos);
    if (j == 0) // the pair's segment names the job rank it waits for, as the report does
      CHECK(p.output().find("waiting for rank(s) 3 at the node's shared-memory segment") !=
            std::string::npos);
    // The message's own rank is the job's, not the pair's 0.
    CHECK(p.output().find("MESSAGE ddp timeout error: rank 2: ") != std::string::npos);
    CHECK(res.ms >= 1900);
    CHECK(res.ms < 9000); // 2 s timeout + up to 1 s looking for a lost rank + the 3 s report window
  }
}

TEST_CASE("a rank that throws in its own code: its peers name it within 2 s, rank 0 included") {
  for (int victim : {0, 1}) {
    CAPTURE(victim);
    // Before: 15 s (the exit barrier held rank 0's connections open) when rank 0 threw.
    auto ps = start_job(2, "throw_mid", ddp_test::free_port(),
                        {{"DDP_TIMEOUT", "15s"}, {"DDP_TEST_VICTIM", std::to_string(victim)}});
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    auto& v = ps[static_cast<std::size_t>(victim)];
    auto& s = ps[static_cast<std::size_t>(1 - victim)];
    INFO(v.output());
    INFO(s.output());
    CHECK(v.exit_code() == 1);
    auto res = parse(s);
    CHECK(res.kind == "peer_lost");
    CHECK(res.rank == victim);
    CHECK(res.ms < 2000); // the victim throws after 300 ms
  }
}

TEST_CASE("process_group::abort: the peers name the rank and its reason within 2 s; it is refused at once") {
  for (int victim : {0, 1}) {
    CAPTURE(victim);
    auto ps = start_job(3, "abort_mid", ddp_test::free_port(),
                        {{"DDP_TIMEOUT", "15s"}, {"DDP_TEST_VICTIM", std::to_string(victim)}});
    auto t_start = std::chrono::steady_clock::now();
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    // Nobody waited for an exit barrier or a timeout (15 s): the victim skips the barrier.
    CHECK(std::chrono::steady_clock::now() - t_start < 10s);
    for (int r = 0; r < 3; ++r) {
      auto& p = ps[static_cast<std::size_t>(r)];
      CAPTURE(r);
      INFO(p.output());
      CHECK(p.exit_code() == 0);
      auto res = parse(p);
      if (r == victim) {
        // Refused without touching the network: the group was failed before the call. The
        // bound is loose because a loaded machine delays a process by a few hundred ms.
        CHECK(p.output().find("POISONED 1") != std::string::npos);
        CHECK(res.rank == victim);
        CHECK(res.ms < 1000);
        CHECK(p.output().find("rank " + std::to_string(victim) + " gave up") != std::string::npos);
        CHECK(p.output().find("batch 7 could not be read") != std::string::npos);
        CHECK(p.output().find("a second call") == std::string::npos);
      } else {
        CHECK(res.kind == "peer_lost");
        CHECK(res.rank == victim);
        CHECK(res.ms < 2000); // the victim gives up after 300 ms
        CHECK(p.output().find("batch 7 could not be read") != std::string::npos);
      }
    }
  }
}

TEST_CASE("process_group::abort during a collective of its own: it ends at once, the peers name the rank") {
  // The victim's all_reduce waits for a rank that comes 2 s late; abort must
  // not wait for it (it did over TCP: 2.8 s), and that collective fails with the
  // victim's reason, not with a closed connection.
  for (const char* shm : {"0", "1"}) {
    for (int victim : {0, 1}) {
      CAPTURE(shm);
      CAPTURE(victim);
      auto ps =
          start_job(3, "abort_running", ddp_test::free_port(),
                    {{"DDP_TIMEOUT", "15s"}, {"DDP_SHM", shm}, {"DDP_TEST_VICTIM", std::to_string(victim)}});
      auto t_start = std::chrono::steady_clock::now();
      for (auto& p : ps)
        REQUIRE(ddp_test::wait_for(p, 60s));
      CHECK(std::chrono::steady_clock::now() - t_start < 10s); // nobody waited for the 15 s timeout
      for (int r = 0; r < 3; ++r) {
        auto& p = ps[static_cast<std::size_t>(r)];
        CAPTURE(r);
        INFO(p.output());
        CHECK(p.exit_code() == 0);
        auto res = parse(p);
        CHECK(p.output().find("batch 7 could not be read") != std::string::npos);
        if (r == victim) {
          std::smatch m;
          std::string out = p.output();
          REQUIRE(std::regex_search(out, m, std::regex("ABORT wall_ms=\\d+ ms=(\\d+)")));
          CHECK(std::stol(m[1]) < 1000); // the slow rank arrives 1.7 s after the abort
          CHECK(res.kind == "backend");
          CHECK(res.rank == victim);
          CHECK(p.output().find("POISONED 1") != std::string::npos); // failed when abort returned
          CHECK(res.ms < 1000); // long before the slow rank (1.7 s), a loaded machine's delay allowed
          CHECK(out.find("rank " + std::to_string(victim) + " gave up") != std::string::npos);
        } else {
          CHECK(res.kind == "peer_lost");
          CHECK(res.rank == victim);
          CHECK(res.ms < 2000); // the victim gives up after 300 ms; the slow rank fails at once
        }
      }
    }
  }
}

TEST_CASE("process_group::abort from another thread while transfers are under way ends every rank's wait") {
  // Failing the connections leaves a transfer already under way to its
  // timeout (20 s here); ddp ends its collectives' waits as well. Each
  // collective runs on ddp's own algorithms over Gloo's transport (with
  // Gloo's broadcast, 4 runs in 7 waited out the timeout); the all-reduces of
  // 1 MiB went around Gloo's ring before.
  struct job {
    const char* collective;
    int mib;
    int victim;
  };
  for (auto [collective, mib, victim] :
       {job{"all_reduce", 32, 0}, job{"all_reduce", 32, 2}, job{"all_reduce", 1, 1}, job{"broadcast", 32, 0},
        job{"broadcast", 32, 2}, job{"all_gather", 32, 1}, job{"reduce_scatter", 32, 2}}) {
    const std::string name = collective;
    CAPTURE(name);
    CAPTURE(mib);
    CAPTURE(victim);
    auto ps = start_job(3, "abort_from_thread", ddp_test::free_port(),
                        {{"DDP_TIMEOUT", "20s"},
                         {"DDP_SHM", "0"},
                         {"DDP_TEST_VICTIM", std::to_string(victim)},
                         {"DDP_TEST_COLLECTIVE", collective},
                         {"DDP_TEST_MIB", std::to_string(mib)}});
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    std::smatch m;
    std::string victim_out = ps[static_cast<std::size_t>(victim)].output();
    INFO(victim_out);
    REQUIRE(std::regex_search(victim_out, m, std::regex("ABORT wall_ms=(\\d+) ms=(\\d+)")));
    const long long abort_wall = std::stoll(m[1]);
    CHECK(std::stol(m[2]) < 1000);
    for (int r = 0; r < 3; ++r) {
      auto& p = ps[static_cast<std::size_t>(r)];
      CAPTURE(r);
      INFO(p.output());
      CHECK(p.exit_code() == 0);
      std::string out = p.output();
      REQUIRE(
          std::regex_search(out, m, std::regex("RESULT kind=(\\w+) rank=(-?\\d+) ms=\\d+ wall_ms=(\\d+)")));
      CHECK(std::stoi(m[2]) == victim);
      CHECK(m[1] == std::string(r == victim ? "backend" : "peer_lost"));
      CHECK(std::stoll(m[3]) - abort_wall < 2000); // not the 20 s timeout
      CHECK(out.find("batch 7 could not be read") != std::string::npos);
    }
  }
}

TEST_CASE("process_group::abort while its rank waits in the store: it does not wait behind that wait") {
  // The victim's main thread holds its store connection in make_shm_array's
  // setup (until the last rank comes, 3 s in); abort reports on a connection
  // of its own after 100 ms instead of waiting for that one.
  for (int victim : {0, 1}) {
    CAPTURE(victim);
    auto ps = start_job(3, "abort_in_store_wait", ddp_test::free_port(),
                        {{"DDP_TIMEOUT", "15s"}, {"DDP_TEST_VICTIM", std::to_string(victim)}});
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    for (int r = 0; r < 3; ++r) {
      auto& p = ps[static_cast<std::size_t>(r)];
      CAPTURE(r);
      INFO(p.output());
      CHECK(p.exit_code() == 0);
      auto res = parse(p);
      if (r == victim) {
        std::smatch m;
        std::string out = p.output();
        REQUIRE(std::regex_search(out, m, std::regex("ABORT wall_ms=\\d+ ms=(\\d+)")));
        CHECK(std::stol(m[1]) < 1000); // the wait it would have queued behind ends 2.5 s later
      } else if (r != 2) {
        CHECK(res.kind == "peer_lost");
        CHECK(res.rank == victim);
        CHECK(res.ms < 2000); // the victim gives up 500 ms in; the last rank comes at 3 s
        CHECK(p.output().find("batch 7 could not be read") != std::string::npos);
      }
    }
  }
}

TEST_CASE("a rank lost during rendezvous is named within 2 s") {
  int port = ddp_test::free_port();
  std::vector<process> ps;
  for (int r = 0; r < 2; ++r)
    ps.push_back(ddp_test::spawn({DDP_SCENARIO_WORKER, "lost_in_rendezvous"},
                                 {{"RANK", std::to_string(r)},
                                  {"WORLD_SIZE", "3"},
                                  {"MASTER_ADDR", "127.0.0.1"},
                                  {"MASTER_PORT", std::to_string(port)},
                                  {"DDP_TOKEN", "job-" + std::to_string(port)},
                                  {"DDP_TIMEOUT", "20s"},
                                  {"DDP_TEST_VICTIM", "2"}},
                                 "fault_lost_in_rendezvous_" + std::to_string(r) + ".log"));
  // The victim (rank 2 of 3) connects, registers, and drops without a goodbye
  // once the others are waiting for it: the test watches the store until both
  // registered (a fixed delay was not enough beside a CPU hog: rank 0 had
  // named the victim and gone before rank 1 even connected).
  auto t_start = std::chrono::steady_clock::now();
  {
    ddp::tcp_store_options so;
    so.host = "127.0.0.1";
    so.port = port;
    so.token = "job-" + std::to_string(port);
    so.timeout = 30s;
    ddp::tcp_store watcher(so); // rank -1: not a rank, never "lost"
    watcher.wait({"ddp/world/0", "ddp/world/1"});
  }
  auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t_start);
  auto victim = ddp_test::spawn({DDP_SCENARIO_WORKER, "lost_in_rendezvous"},
                                {{"RANK", "2"},
                                 {"WORLD_SIZE", "3"},
                                 {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", std::to_string(port)},
                                 {"DDP_TOKEN", "job-" + std::to_string(port)},
                                 {"DDP_TEST_VICTIM", "2"}},
                                "fault_lost_in_rendezvous_victim.log");
  REQUIRE(ddp_test::wait_for(victim, 60s));
  CHECK(victim.exit_code() == 3);
  for (auto& p : ps) {
    REQUIRE(ddp_test::wait_for(p, 60s));
    INFO(p.output());
    auto res = parse(p);
    CHECK(res.kind == "peer_lost");
    CHECK(res.rank == 2);
    CHECK(res.ms < waited.count() + 2000); // < 2 s after the victim starts (before: the 20 s timeout)
  }
}

TEST_CASE("ddprun reports the rank that failed first, with its own code") {
  SUBCASE("rank 0 throws: ddprun names rank 0, not the peer that exits first") {
    auto p = ddp_test::spawn({DDPRUN, "--nproc-per-node", "2", DDP_SCENARIO_WORKER, "throw_mid"},
                             {{"DDP_TIMEOUT", "15s"}, {"DDP_TEST_VICTIM", "0"}}, "fault_ddprun_throw.log");
    REQUIRE(ddp_test::wait_for(p, 60s));
    INFO(p.output());
    CHECK(p.exit_code() == 1);
    CHECK(p.output().find("the first rank to fail was rank 0") != std::string::npos);
  }
  SUBCASE("a rank killed by SIGKILL: ddprun names it and exits 137, though the others exit 1") {
    // The grace period outlasts DDP_TIMEOUT: a survivor blocked in a send inside
    // Gloo learns of the loss only at its timeout, and must get to say so.
    auto p = ddp_test::spawn(
        {DDPRUN, "--nproc-per-node", "3", "--grace-period", "15", DDP_SCENARIO_WORKER, "loop"},
        {{"DDP_TIMEOUT", "5s"}, {"DDP_TEST_LOOP_SECONDS", "60"}}, "fault_ddprun_kill.log");
    std::smatch m;
    std::regex ready("\\[2\\] READY rank=2 pid=(\\d+)");
    auto deadline = std::chrono::steady_clock::now() + 30s;
    std::string out;
    while (std::chrono::steady_clock::now() < deadline && !std::regex_search(out = p.output(), m, ready))
      std::this_thread::sleep_for(20ms);
    REQUIRE(std::regex_search(out, m, ready));
    std::this_thread::sleep_for(300ms);
    ::kill(std::stoi(m[1]), SIGKILL);
    REQUIRE(ddp_test::wait_for(p, 60s));
    INFO(p.output());
    CHECK(p.exit_code() == 137);
    CHECK(p.output().find("the first rank to fail was rank 2: it was killed by signal 9") !=
          std::string::npos);
    CHECK(p.output().find("[0] RESULT kind=peer_lost rank=2") != std::string::npos);
    CHECK(p.output().find("[1] RESULT kind=peer_lost rank=2") != std::string::npos);
  }
}

TEST_CASE("under ddprun the store lives in ddprun: rank 0 killed, the others still ask it and name rank 0") {
  // With the store in rank 0, its death took the store along: survivors could only
  // infer "the store is gone, so rank 0 died". ddprun's store outlives rank 0 and
  // records its dropped connection like any other rank's.
  auto p =
      ddp_test::spawn({DDPRUN, "--nproc-per-node", "3", "--grace-period", "15", DDP_SCENARIO_WORKER, "loop"},
                      {{"DDP_TIMEOUT", "5s"}, {"DDP_TEST_LOOP_SECONDS", "60"}}, "fault_ddprun_store.log");
  std::smatch m;
  std::regex ready("\\[0\\] READY rank=0 pid=(\\d+)");
  auto deadline = std::chrono::steady_clock::now() + 30s;
  std::string out;
  while (std::chrono::steady_clock::now() < deadline && !std::regex_search(out = p.output(), m, ready))
    std::this_thread::sleep_for(20ms);
  REQUIRE(std::regex_search(out, m, ready));
  std::this_thread::sleep_for(300ms);
  ::kill(std::stoi(m[1]), SIGKILL);
  REQUIRE(ddp_test::wait_for(p, 60s));
  INFO(p.output());
  CHECK(p.exit_code() == 137);
  CHECK(p.output().find("the first rank to fail was rank 0: it was killed by signal 9") != std::string::npos);
  for (int r : {1, 2}) {
    CAPTURE(r);
    CHECK(p.output().find("[" + std::to_string(r) + "] RESULT kind=peer_lost rank=0") != std::string::npos);
  }
  // Named from the store's record of the lost connection, or (ranks of one node reducing
  // through shared memory) from rank 0's pid gone, not from the store's absence.
  CHECK((p.output().find("rank 0 exited or lost its connection") != std::string::npos ||
         std::regex_search(p.output(), std::regex("rank 0 \\(local rank 0, pid \\d+\\) exited"))));
  CHECK(p.output().find("the rendezvous store it serves is gone") == std::string::npos);
}

TEST_CASE("after a failure every call throws at once") {
  auto ps = start_job(3, "after_failure", ddp_test::free_port());
  for (auto& p : ps)
    REQUIRE(ddp_test::wait_for(p, 60s));
  for (int r = 0; r < 2; ++r) {
    auto& p = ps[static_cast<std::size_t>(r)];
    auto res = parse(p);
    INFO(p.output());
    CHECK(res.kind == "peer_lost");
    CHECK(p.output().find("POISONED 1") != std::string::npos);
    CHECK(res.ms < 1000); // at once: far below the 20 s timeout, above a loaded machine's delay
  }
}

TEST_CASE("a wrong token is refused and the job still completes") {
  int port = ddp_test::free_port();
  // Rank 1 starts only after the intruder is done: a job that finished first
  // left the intruder nobody to be refused by (seen once in 20 runs beside a CPU hog).
  auto ps = start_job(2, "ok", port, {}, 0);
  // An intruder claims rank 1 of the same job with another token.
  auto intruder = ddp_test::spawn({DDP_SCENARIO_WORKER, "ok"},
                                  {{"RANK", "1"},
                                   {"WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "127.0.0.1"},
                                   {"MASTER_PORT", std::to_string(port)},
                                   {"DDP_TOKEN", "not-the-job"},
                                   {"DDP_TIMEOUT", "20s"}},
                                  "fault_intruder.log");
  REQUIRE(ddp_test::wait_for(intruder, 60s));
  ps.push_back(std::move(start_job(2, "ok", port, {}, 1).front()));
  for (auto& p : ps)
    REQUIRE(ddp_test::wait_for(p, 60s));
  INFO(intruder.output());
  auto res = parse(intruder);
  CHECK(res.kind == "config");
  CHECK(intruder.output().find("token") != std::string::npos);
  for (auto& p : ps) {
    INFO(p.output());
    CHECK(p.exit_code() == 0);
    CHECK(p.output().find("RESULT ok") != std::string::npos);
  }
  CHECK(ps[0].output().find("refused a connection") != std::string::npos);
}

TEST_CASE("a port already in use is a clear error on rank 0") {
  auto busy = ddp::detail::listen_tcp("127.0.0.1", 0);
  int port = ddp::detail::local_port(busy.get());
  auto ps = start_job(1, "ok", port);
  REQUIRE(ddp_test::wait_for(ps[0], 30s));
  INFO(ps[0].output());
  auto res = parse(ps[0]);
  CHECK(res.kind == "config");
  CHECK(ps[0].output().find("already in use") != std::string::npos);
  CHECK(ps[0].output().find(std::to_string(port)) != std::string::npos);
}
