// ddprun and the init methods, with real processes.
#include "../support/spawn.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <regex>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using ddp_test::process;

namespace {

process run_ddprun(const std::vector<std::string>& args, const std::string& log,
                   std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv{DDPRUN};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("DDP_TIMEOUT", "30s");
  return ddp_test::spawn(argv, env, log);
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

/// The ms= field of a rank's RESULT line (the time it took to fail); "forever" when none.
long long result_ms(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("RESULT kind=\\w+ rank=-?\\d+ ms=(\\d+)")))
    return std::numeric_limits<long long>::max();
  return std::stoll(m[1].str());
}

bool wait_for_text(const process& p, const std::string& text, int times, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (count(p.output(), text) >= times) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

} // namespace

TEST_CASE("ddprun sets the launcher environment and prefixes lines") {
  auto p =
      run_ddprun({"--nproc-per-node", "3", "/bin/sh", "-c",
                  "echo R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE G=$GROUP_RANK N=$NODE_RANK "
                  "A=$MASTER_ADDR P=$MASTER_PORT T=$DDP_TOKEN"},
                 "launch_env.log");
  REQUIRE(ddp_test::wait_for(p, 30s));
  auto out = p.output();
  INFO(out);
  CHECK(p.exit_code() == 0);
  std::smatch m;
  std::set<std::string> tokens, ports;
  for (int r = 0; r < 3; ++r) {
    std::regex line("\\[" + std::to_string(r) + "\\] R=" + std::to_string(r) + " L=" + std::to_string(r) +
                    " W=3 LW=3 G=0 N=0 A=127.0.0.1 P=(\\d+) T=([0-9a-f]{32})");
    REQUIRE(std::regex_search(out, m, line));
    ports.insert(m[1]);
    tokens.insert(m[2]);
  }
  CHECK(ports.size() == 1); // one job, one store
  CHECK(tokens.size() == 1);
}

TEST_CASE("ddprun keeps a DDP_TOKEN that is already set, and --no-prefix leaves lines alone") {
  auto p = run_ddprun({"--nproc-per-node", "2", "--no-prefix", "--master-port", "0", "--", "/bin/sh", "-c",
                       "echo token=$DDP_TOKEN"},
                      "launch_token.log", {{"DDP_TOKEN", "preset-token"}});
  REQUIRE(ddp_test::wait_for(p, 30s));
  INFO(p.output());
  CHECK(count(p.output(), "\ntoken=preset-token") + (p.output().rfind("token=preset-token", 0) == 0) == 2);
  CHECK(p.output().find("[0]") == std::string::npos);
}

TEST_CASE("ddprun stops the others when a rank fails and exits with its code") {
  auto t0 = std::chrono::steady_clock::now();
  auto p = run_ddprun({"--nproc-per-node", "3", "--grace-period", "1", "/bin/sh", "-c",
                       "if [ $RANK = 1 ]; then sleep 0.2; exit 7; fi; exec sleep 60"},
                      "launch_fail.log");
  REQUIRE(ddp_test::wait_for(p, 30s));
  INFO(p.output());
  CHECK(p.exit_code() == 7);
  CHECK(p.output().find("rank 1") != std::string::npos);
  CHECK(p.output().find("exited with code 7") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("ddprun reports a rank killed by a signal") {
  auto p = run_ddprun(
      {"--nproc-per-node", "2", "/bin/sh", "-c", "if [ $RANK = 0 ]; then kill -SEGV $$; fi; exec sleep 60"},
      "launch_signal.log");
  REQUIRE(ddp_test::wait_for(p, 30s));
  INFO(p.output());
  CHECK(p.exit_code() == 128 + SIGSEGV);
  CHECK(p.output().find("SIGSEGV") != std::string::npos);
}

TEST_CASE("ddprun forwards SIGTERM to every rank") {
  auto p = run_ddprun({"--nproc-per-node", "2", "/bin/sh", "-c",
                       "trap 'echo got-term; exit 0' TERM; echo ready; sleep 60 & wait"},
                      "launch_term.log");
  REQUIRE(wait_for_text(p, "ready", 2, 20s));
  ::kill(p.pid, SIGTERM);
  REQUIRE(ddp_test::wait_for(p, 20s));
  INFO(p.output());
  CHECK(count(p.output(), "got-term") == 2);
  CHECK(p.exit_code() == 128 + SIGTERM);
}

TEST_CASE("ddprun: a program that does not exist") {
  auto p = run_ddprun({"--nproc-per-node", "1", "/no/such/program"}, "launch_missing.log");
  REQUIRE(ddp_test::wait_for(p, 30s));
  INFO(p.output());
  CHECK(p.exit_code() == 127);
  CHECK(p.output().find("/no/such/program") != std::string::npos);
}

TEST_CASE("ddprun runs a real ddp job at world sizes 1..4") {
  for (int n = 1; n <= 4; ++n) {
    auto p = run_ddprun({"--nproc-per-node", std::to_string(n), DDP_SCENARIO_WORKER, "ok"},
                        "launch_job" + std::to_string(n) + ".log");
    REQUIRE(ddp_test::wait_for(p, 60s));
    INFO(p.output());
    CHECK(p.exit_code() == 0);
    CHECK(count(p.output(), "RESULT ok") == n);
  }
}

namespace {
/// Adjusts one rank's environment and command line before it starts.
using per_rank =
    std::function<void(int rank, std::map<std::string, std::string>& env, std::vector<std::string>& argv)>;

/// `world` ranks of `scenario_worker ok` started by hand with `common` in their environment.
std::vector<process> start(int world, const std::map<std::string, std::string>& common,
                           const std::string& tag, const per_rank& each = {}) {
  std::vector<process> ps;
  for (int r = 0; r < world; ++r) {
    auto env = common;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(world);
    env.emplace("DDP_TIMEOUT", "30s");
    std::vector<std::string> argv{DDP_SCENARIO_WORKER, "ok"};
    if (each) each(r, env, argv);
    ps.push_back(ddp_test::spawn(argv, env, "init_" + tag + std::to_string(r) + ".log"));
  }
  return ps;
}
void expect_ok(std::vector<process>& ps) {
  for (auto& p : ps) {
    REQUIRE(ddp_test::wait_for(p, 60s));
    INFO(p.output());
    CHECK(p.exit_code() == 0);
    CHECK(p.output().find("RESULT ok") != std::string::npos);
  }
}
} // namespace

TEST_CASE("init method tcp://host:port") {
  auto ps =
      start(3, {{"DDP_TEST_INIT_METHOD", "tcp://127.0.0.1:" + std::to_string(ddp_test::free_port())}}, "tcp");
  expect_ok(ps);
}

TEST_CASE("init method file:// on a fresh directory") {
  auto dir = std::filesystem::temp_directory_path() / ("ddp_file_init_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto ps = start(3, {{"DDP_TEST_INIT_METHOD", "file://" + dir.string()}, {"DDP_TOKEN", "filejob"}}, "file");
  expect_ok(ps);
  std::filesystem::remove_all(dir);
}

TEST_CASE("GLOO_SOCKET_IFNAME: lo works, an unknown interface is named in the error") {
  int port = ddp_test::free_port();
  auto ok = start(
      2, {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}, {"GLOO_SOCKET_IFNAME", "lo"}},
      "iface_ok");
  expect_ok(ok);
  auto bad = start(1,
                   {{"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(ddp_test::free_port())},
                    {"GLOO_SOCKET_IFNAME", "nosuchif0"}},
                   "iface_bad");
  REQUIRE(ddp_test::wait_for(bad[0], 30s));
  INFO(bad[0].output());
  CHECK(bad[0].output().find("RESULT kind=config") != std::string::npos);
  CHECK(bad[0].output().find("'nosuchif0'") != std::string::npos);
}

TEST_CASE("env:// without MASTER_ADDR on several ranks says what to set") {
  auto ps = start(2, {}, "noaddr");
  for (auto& p : ps) {
    REQUIRE(ddp_test::wait_for(p, 30s));
    INFO(p.output());
    CHECK(p.output().find("RESULT kind=config") != std::string::npos);
    CHECK(p.output().find("MASTER_ADDR") != std::string::npos);
  }
}

// The rank that finds the mismatch tells the store: rank 0, waiting for it to
// arrive, fails at once naming it and why (before: a timeout, DDP_TIMEOUT later).
TEST_CASE("ranks started with different world sizes fail clearly") {
  int port = ddp_test::free_port();
  std::map<std::string, std::string> env{{"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", std::to_string(port)},
                                         {"DDP_TOKEN", "w"},
                                         {"DDP_TIMEOUT", "20s"}};
  auto e0 = env, e1 = env;
  e0["RANK"] = "0";
  e0["WORLD_SIZE"] = "2";
  e1["RANK"] = "1";
  e1["WORLD_SIZE"] = "3";
  auto p0 = ddp_test::spawn({DDP_SCENARIO_WORKER, "ok"}, e0, "init_world0.log");
  auto p1 = ddp_test::spawn({DDP_SCENARIO_WORKER, "ok"}, e1, "init_world1.log");
  REQUIRE(ddp_test::wait_for(p1, 30s));
  REQUIRE(ddp_test::wait_for(p0, 30s));
  INFO(p1.output());
  CHECK(p1.output().find("world size 3 but rank 0 with 2") != std::string::npos);
  INFO(p0.output());
  CHECK(p0.exit_code() == 0); // rank 0 reports its own failure as a RESULT line
  CHECK(p0.output().find("RESULT kind=peer_lost rank=1 ") != std::string::npos);
  CHECK(p0.output().find("rank 1 failed: rank 1 was started with world size 3 but rank 0 with 2") !=
        std::string::npos);
  CHECK(result_ms(p0.output()) < 10000); // not DDP_TIMEOUT (20 s)
}

// Rank 1 is refused (another world size) before rank 2 has started; rank 0
// gives up at once, but its store serves on until rank 2 came (3 s at most),
// so rank 2 reads who was lost instead of finding no store and waiting its
// timeout (20 s here).
TEST_CASE("a rank starting after the rendezvous failed reads who was lost") {
  int port = ddp_test::free_port();
  std::map<std::string, std::string> env{{"MASTER_ADDR", "127.0.0.1"},
                                         {"MASTER_PORT", std::to_string(port)},
                                         {"DDP_TOKEN", "late"},
                                         {"DDP_TIMEOUT", "20s"}};
  auto e0 = env, e1 = env, e2 = env;
  e0["RANK"] = "0";
  e0["WORLD_SIZE"] = "3";
  e1["RANK"] = "1";
  e1["WORLD_SIZE"] = "2";
  e2["RANK"] = "2";
  e2["WORLD_SIZE"] = "3";
  auto p0 = ddp_test::spawn({DDP_SCENARIO_WORKER, "ok"}, e0, "late_arrival0.log");
  auto p1 = ddp_test::spawn({DDP_SCENARIO_WORKER, "ok"}, e1, "late_arrival1.log");
  REQUIRE(ddp_test::wait_for(p1, 30s));
  INFO(p1.output());
  REQUIRE(p1.output().find("world size 2 but rank 0 with 3") != std::string::npos);
  std::this_thread::sleep_for(500ms); // rank 0 has given up by now (within ms of rank 1's report)
  auto p2 = ddp_test::spawn({DDP_SCENARIO_WORKER, "ok"}, e2, "late_arrival2.log");
  REQUIRE(ddp_test::wait_for(p2, 30s));
  REQUIRE(ddp_test::wait_for(p0, 30s));
  INFO(p0.output());
  INFO(p2.output());
  CHECK(p0.output().find("RESULT kind=peer_lost rank=1 ") != std::string::npos);
  CHECK(p2.output().find("RESULT kind=peer_lost rank=1 ") != std::string::npos);
  CHECK(p2.output().find("rank 1 failed: rank 1 was started with world size 2 but rank 0 with 3") !=
        std::string::npos);
  CHECK(result_ms(p2.output()) < 10000); // not DDP_TIMEOUT (20 s)
}

namespace {
/// `argv` run under an open-files limit: soft `soft`, and hard `hard` when above 0.
std::vector<std::string> with_open_files(int soft, int hard, std::vector<std::string> argv) {
  std::string limits = "ulimit -S -n " + std::to_string(soft);
  if (hard > 0) limits += " && ulimit -H -n " + std::to_string(hard);
  std::vector<std::string> sh{"/bin/sh", "-c", limits + " && exec \"$@\"", "sh"};
  sh.insert(sh.end(), argv.begin(), argv.end());
  return sh;
}
} // namespace

// Before ddp raised the limit, 8 ranks under a soft limit of 32 ran out on
// ddprun's store: it paused its accepts and every rank timed out in its handshake.
TEST_CASE("a soft open-files limit too low for the job is raised to the hard one") {
  auto p =
      ddp_test::spawn(with_open_files(24, 0, {DDPRUN, "--nproc-per-node", "8", DDP_SCENARIO_WORKER, "ok"}),
                      {{"DDP_TIMEOUT", "30s"}}, "launch_nofile_soft.log");
  REQUIRE(ddp_test::wait_for(p, 90s));
  INFO(p.output());
  CHECK(p.exit_code() == 0);
  CHECK(count(p.output(), "RESULT ok") == 8);
}

TEST_CASE("a hard open-files limit too low for the job fails at once and says how to raise it") {
  SUBCASE("ddprun, serving the store") {
    auto t0 = std::chrono::steady_clock::now();
    auto p =
        ddp_test::spawn(with_open_files(24, 24, {DDPRUN, "--nproc-per-node", "8", DDP_SCENARIO_WORKER, "ok"}),
                        {{"DDP_TIMEOUT", "30s"}}, "launch_nofile_hard.log");
    REQUIRE(ddp_test::wait_for(p, 30s));
    INFO(p.output());
    CHECK(p.exit_code() == 2);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
    CHECK(p.output().find("node 0: a job of 8 ranks, 8 on this node, needs about") != std::string::npos);
    CHECK(p.output().find("hard open-files limit (RLIMIT_NOFILE) is 24") != std::string::npos);
    CHECK(p.output().find("ulimit -n") != std::string::npos);
    CHECK(p.output().find("RESULT") == std::string::npos); // no rank started
  }
  SUBCASE("rank 0, serving the store (tcp://): it fails, the others fail within their timeout") {
    // 12 ranks: each holds ~19 descriptors, rank 0 ~46 with the store's 24
    // connections (measured); rank 0 alone runs under a hard limit of 40.
    const int world = 12;
    const std::string init = "tcp://127.0.0.1:" + std::to_string(ddp_test::free_port());
    auto ps = start(world, {{"DDP_TEST_INIT_METHOD", init}, {"DDP_TOKEN", "nofile"}, {"DDP_TIMEOUT", "5s"}},
                    "nofile", [](int r, auto&, auto& argv) {
                      if (r == 0) argv = with_open_files(40, 40, argv);
                    });
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 30s));
    INFO(ps[0].output());
    CHECK(ps[0].output().find("RESULT kind=config") != std::string::npos);
    CHECK(ps[0].output().find("rank 0: a job of 12 ranks needs about") != std::string::npos);
    CHECK(ps[0].output().find("for the store served here (two per rank)") != std::string::npos);
    CHECK(ps[0].output().find("RLIMIT_NOFILE) is 40") != std::string::npos);
    for (int r = 1; r < world; ++r) {
      INFO(ps[static_cast<std::size_t>(r)].output());
      CHECK(ps[static_cast<std::size_t>(r)].output().find("RESULT ok") == std::string::npos);
      CHECK(ps[static_cast<std::size_t>(r)].output().find("open-files") == std::string::npos);
    }
  }
  SUBCASE("rank 2 of 4, not serving the store: it reports to the store, the others fail at once naming it") {
    // About 15 descriptors needed per rank at 4 ranks; rank 2 gets 12, enough
    // to connect to the store to report, not to join.
    const std::string init = "tcp://127.0.0.1:" + std::to_string(ddp_test::free_port());
    auto ps = start(4, {{"DDP_TEST_INIT_METHOD", init}, {"DDP_TOKEN", "nofile2"}, {"DDP_TIMEOUT", "20s"}},
                    "nofile2_", [](int r, auto&, auto& argv) {
                      if (r == 2) argv = with_open_files(12, 12, argv);
                    });
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 40s));
    INFO(ps[2].output());
    CHECK(ps[2].output().find("RESULT kind=config") != std::string::npos);
    CHECK(ps[2].output().find("RLIMIT_NOFILE) is 12") != std::string::npos);
    for (int r : {0, 1, 3}) {
      const std::string& out = ps[static_cast<std::size_t>(r)].output();
      INFO(out);
      CHECK(out.find("RESULT kind=peer_lost rank=2 ") != std::string::npos);
      CHECK(out.find("rank 2 failed: a job of 4 ranks needs about") != std::string::npos);
      CHECK(result_ms(out) < 10000); // not DDP_TIMEOUT (20 s)
    }
  }
}

// One rank per node (LOCAL_WORLD_SIZE=1) builds no shared memory and no leaders'
// mesh: the estimate once counted the leaders' mesh on every rank (2W instead
// of W) and refused rank 1 here, where the job runs with as few as 18 (a
// reviewer's probe).
TEST_CASE("one rank per node: a hard limit the job fits is not refused") {
  const std::string init = "tcp://127.0.0.1:" + std::to_string(ddp_test::free_port());
  auto ps = start(12,
                  {{"LOCAL_RANK", "0"},
                   {"LOCAL_WORLD_SIZE", "1"},
                   {"DDP_TEST_INIT_METHOD", init},
                   {"DDP_TOKEN", "nofile1"},
                   {"DDP_TIMEOUT", "20s"}},
                  "nofile_l1_", [](int r, auto& env, auto& argv) {
                    env["GROUP_RANK"] = std::to_string(r);
                    if (r == 1) argv = with_open_files(26, 26, argv);
                  });
  for (auto& p : ps) {
    REQUIRE(ddp_test::wait_for(p, 60s));
    INFO(p.output());
    CHECK(p.output().find("RESULT ok") != std::string::npos);
  }
}
