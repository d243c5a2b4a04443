// The shm path's failures: kill -9 of one rank of 3 inside the all_reduce loop, and of
// one rank of a subgroup that reduces through its own segment
// (the survivors must fail naming it, well within the timeout, and the segment
// must not survive in /dev/shm); a /dev/shm too small for the segment (every
// rank falls back to TCP); ranks that disagree on the segment; an all_reduce
// through shm against a broadcast over TCP (mismatch at once); PID namespaces.
#include "../support/spawn.hpp"

#include <ddp/detail/shm/all_reduce.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
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

TEST_CASE("kill -9 of a rank inside a shm subgroup: every survivor names it, well within the timeout") {
  // World 4 in pairs of neighbours, each pair a subgroup through a segment of its own; job rank 3,
  // rank 1 of the pair {2, 3}, dies: a group rank taken for a job rank (or back) shows. Job rank 2
  // waits for it in the pair's segment; ranks 0 and 1, in the other pair, hear it from the store.
  const int world = 4, victim = 3, port = ddp_test::free_port();
  std::vector<ddp_test::process> ps;
  for (int r = 0; r < world; ++r)
    ps.push_back(ddp_test::spawn({DDP_SCENARIO_WORKER, "subgroup_loop"},
                                 {{"RANK", std::to_string(r)},
                                  {"WORLD_SIZE", std::to_string(world)},
                                  {"MASTER_ADDR", "127.0.0.1"},
                                  {"MASTER_PORT", std::to_string(port)},
                                  {"DDP_TOKEN", "shm-subgroup-" + std::to_string(port)},
                                  {"DDP_TIMEOUT", "20s"},
                                  {"DDP_TEST_LOOP_SECONDS", "15"}},
                                 "shm_subgroup_kill_" + std::to_string(r) + ".log"));
  const std::regex ready("READY rank=\\d+ pid=\\d+ shm=(\\S*)");
  std::vector<std::string> shm;
  for (auto& p : ps) {
    std::smatch m;
    auto until = std::chrono::steady_clock::now() + 30s;
    std::string out;
    while (!std::regex_search(out = p.output(), m, ready) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(20ms);
    INFO(out);
    REQUIRE(std::regex_search(out, m, ready));
    shm.push_back(m[1]);
  }
  for (const auto& name : shm)
    REQUIRE(name.rfind("/ddp-", 0) == 0); // each pair's loop goes through shm
  CHECK(shm[0] == shm[1]);
  CHECK(shm[2] == shm[3]);
  CHECK(shm[0] != shm[2]); // a segment per pair
  std::this_thread::sleep_for(200ms);
  const auto killed = std::chrono::steady_clock::now();
  ::kill(ps[victim].pid, SIGKILL);
  for (auto& p : ps)
    REQUIRE(ddp_test::wait_for(p, 60s));
  const auto took = std::chrono::steady_clock::now() - killed;
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    CAPTURE(r);
    std::string out = ps[static_cast<std::size_t>(r)].output();
    INFO(out);
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("RESULT kind=(\\w+) rank=(-?\\d+)")));
    CHECK(m[1] == "peer_lost");
    CHECK(std::stoi(m[2]) == victim); // the job's rank, as the store records it
    // The message's own rank is the job's too (it was the pair's: "rank 0: all_reduce" on job rank 2).
    CHECK(out.find("MESSAGE ddp peer_lost error: rank " + std::to_string(r) + ": ") != std::string::npos);
    CHECK(ps[static_cast<std::size_t>(r)].exit_code() == 1);
  }
  CHECK(took < 10s); // well within DDP_TIMEOUT=20s: it was named, not waited out
  // Names are unlinked once every member mapped them: this checks setup left none, not the kill.
  for (const auto& name : shm)
    CHECK_FALSE(std::filesystem::exists("/dev/shm" + name));
}

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

/// Whether this process may give a child a private /dev/shm (root, and
/// `unshare -m` works: not in a container without CAP_SYS_ADMIN).
bool can_mount_private_shm() {
  return ::geteuid() == 0 &&
         std::system("unshare -m /bin/sh -c 'mount -t tmpfs -o size=64k ddp-probe /dev/shm' "
                     ">/dev/null 2>&1") == 0;
}

/// Runs `argv` in a mount namespace of its own whose /dev/shm is a fresh tmpfs
/// of `size` (e.g. "1m"), then prints "DEVSHM=[<what is left in it>]".
ddp_test::process run_with_private_shm(const std::string& size, const std::vector<std::string>& argv,
                                       const std::map<std::string, std::string>& env,
                                       const std::string& log) {
  std::vector<std::string> cmd{"/usr/bin/unshare",
                               "-m",
                               "/bin/sh",
                               "-c",
                               "mount -t tmpfs -o size=" + size +
                                   " ddp-test /dev/shm || exit 90; \"$@\"; rc=$?; "
                                   "echo \"DEVSHM=[$(ls -A /dev/shm)]\"; exit $rc",
                               "sh"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return ddp_test::spawn(cmd, env, log);
}

} // namespace

TEST_CASE(
    "/dev/shm too small for the segment: every rank takes TCP, one warning names rank 0, nothing left") {
  if (!can_mount_private_shm()) {
    MESSAGE("skipped: needs root and `unshare -m` to give the job a tiny /dev/shm");
    return;
  }
  // 3 ranks on one node need (3 + 1) x 512 KiB + a page of /dev/shm; this one holds 1 MiB,
  // so local rank 0's posix_fallocate fails with ENOSPC.
  auto p = run_with_private_shm("1m", {DDPRUN, "--nproc-per-node", "3", DDP_SCENARIO_WORKER, "shm_off"},
                                {{"DDP_TIMEOUT", "20s"}}, "shm_full.log");
  REQUIRE(ddp_test::wait_for(p, 60s));
  const std::string out = p.output();
  INFO(out);
  REQUIRE(p.exit_code() != 90); // the tmpfs was mounted
  CHECK(p.exit_code() == 0);
  for (int r = 0; r < 3; ++r) // correct results over TCP, shm off, on every rank
    CHECK(out.find("RESULT ok rank=" + std::to_string(r) + " size=3 shm=0") != std::string::npos);
  // One warning for the job, naming the rank, the segment, its size, errno and the ways out.
  CHECK(count(out, "shared-memory all-reduce is off") == 1);
  CHECK(std::regex_search(out,
                          std::regex("rank 0 \\(node 0, local rank 0\\) cannot size shared-memory segment "
                                     "/dev/shm/ddp-[0-9a-f]{32} \\(2101248 B\\): No space left on device")));
  CHECK(out.find("Enlarge /dev/shm") != std::string::npos);
  CHECK(out.find("DDP_SHM=0 silences this") != std::string::npos);
  // The other local ranks saw local rank 0's failure, not one of their own.
  CHECK(out.find("cannot open") == std::string::npos);
  CHECK(out.find("FAILED") == std::string::npos);
  CHECK(out.find("DEVSHM=[]") != std::string::npos); // no segment left behind
}

TEST_CASE("a local rank that disagrees on the segment size: every rank names it, nothing left") {
  if (!can_mount_private_shm()) {
    MESSAGE("skipped: needs root and `unshare -m` to give the job a /dev/shm of its own to inspect");
    return;
  }
  // Rank 1 (not the creator) expects another size: every rank must get the
  // same mismatch error naming rank 1, not a secondary "cannot open" of its own.
  auto p = run_with_private_shm(
      "64m",
      {DDPRUN, "--nproc-per-node", "3", "/bin/sh", "-c",
       "if [ \"$RANK\" = 1 ]; then export DDP_SHM_AREA_BYTES=8192; fi; exec \"$0\" ok", DDP_SCENARIO_WORKER},
      {{"DDP_TIMEOUT", "20s"}}, "shm_size_mismatch.log");
  REQUIRE(ddp_test::wait_for(p, 60s));
  const std::string out = p.output();
  INFO(out);
  REQUIRE(p.exit_code() != 90);
  CHECK(count(out, "RESULT kind=mismatch rank=1 ") == 3);
  CHECK(count(out, "DDP_SHM_AREA_BYTES") >= 3);
  CHECK(out.find("cannot open") == std::string::npos);
  CHECK(out.find("DEVSHM=[]") != std::string::npos);
}

TEST_CASE("DDP_SHM_AREA_BYTES, the same on every rank, sets the area: the job runs through shared memory") {
  if (!can_mount_private_shm()) {
    MESSAGE("skipped: needs root and `unshare -m` to give the job a /dev/shm of its own to inspect");
    return;
  }
  auto p = run_with_private_shm("64m",
                                {DDPRUN, "--nproc-per-node", "3", "/bin/sh", "-c",
                                 "export DDP_SHM_AREA_BYTES=8192; exec \"$0\" ok", DDP_SCENARIO_WORKER},
                                {{"DDP_TIMEOUT", "20s"}}, "shm_area_bytes.log");
  REQUIRE(ddp_test::wait_for(p, 60s));
  const std::string out = p.output();
  INFO(out);
  CHECK(p.exit_code() == 0);
  for (int r = 0; r < 3; ++r) // the segment was made: every rank on the shm path
    CHECK(out.find("RESULT ok rank=" + std::to_string(r) + " size=3 shm=1") != std::string::npos);
  CHECK(out.find("mismatch") == std::string::npos);
  CHECK(out.find("DEVSHM=[]") != std::string::npos);
}

TEST_CASE("all_reduce (shm) on one rank, broadcast (TCP) on the others: mismatch at once, then poisoned") {
  const int world = 3, port = ddp_test::free_port();
  std::vector<ddp_test::process> ps;
  for (int r = 0; r < world; ++r)
    ps.push_back(ddp_test::spawn({DDP_SCENARIO_WORKER, "mismatch_kinds"},
                                 {{"RANK", std::to_string(r)},
                                  {"WORLD_SIZE", std::to_string(world)},
                                  {"MASTER_ADDR", "127.0.0.1"},
                                  {"MASTER_PORT", std::to_string(port)},
                                  {"DDP_TOKEN", "shm-mismatch-" + std::to_string(port)},
                                  {"DDP_TIMEOUT", "30s"}},
                                 "shm_mismatch_" + std::to_string(r) + ".log"));
  for (auto& p : ps)
    REQUIRE(ddp_test::wait_for(p, 90s));
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    const std::string out = ps[static_cast<std::size_t>(r)].output();
    INFO(out);
    CHECK(ps[static_cast<std::size_t>(r)].exit_code() == 0);
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("RESULT kind=(\\w+) rank=(-?\\d+) ms=(\\d+)")));
    CHECK(m[1] == "mismatch");
    CHECK(std::stoi(m[2]) == (r == 0 ? 1 : 0)); // each side names the other
    CHECK(std::stoi(m[3]) < 10000);             // not the 30 s timeout
    // Both collectives are named, with both ranks.
    CHECK(std::regex_search(
        out, std::regex("this rank \\(" + std::to_string(r) + "\\) called (all_reduce|broadcast)")));
    CHECK(out.find("all_reduce of 1024 x float32") != std::string::npos);
    CHECK(out.find("broadcast of 1 x int64") != std::string::npos);
    // The group is poisoned: the next collective throws at once, never meets stale segment state.
    REQUIRE(std::regex_search(out, m, std::regex("POISONED kind=(\\w+) ms=(\\d+)")));
    CHECK(m[1] == "mismatch");
    CHECK(std::stoi(m[2]) < 1000);
  }
}

TEST_CASE("a peer's pid is judged only within the same PID namespace") {
  // A pid that is certainly gone: a child that exited and was reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  const std::uint64_t own = ddp::detail::own_pid_namespace();
  REQUIRE(own != 0);
  ddp::detail::shm_rank_line sl;
  sl.pid = static_cast<std::int32_t>(child);
  sl.pidns = own;
  CHECK(ddp::detail::shm_all_reduce::peer_exited(sl, own)); // same namespace: the pid speaks
  sl.pidns = own + 1;
  CHECK_FALSE(ddp::detail::shm_all_reduce::peer_exited(sl, own)); // another namespace: it does not
  sl.pidns = 0;
  CHECK_FALSE(ddp::detail::shm_all_reduce::peer_exited(sl, own)); // unknown: neither
  sl.pid = static_cast<std::int32_t>(::getpid());
  sl.pidns = own;
  CHECK_FALSE(ddp::detail::shm_all_reduce::peer_exited(sl, own)); // alive
}
