// Failures with real processes: a rank that exits mid-collective, a rank that
// stalls, an intruder with the wrong token, a port already in use.
#include "../support/spawn.hpp"

#include <doctest/doctest.h>

#include <ddp/detail/store/socket.hpp>

#include <regex>

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

std::vector<process> start_job(int world, const std::string& scenario, int port,
                               std::map<std::string, std::string> extra = {}) {
  std::vector<process> ps;
  for (int r = 0; r < world; ++r) {
    auto env = extra;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(world);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port);
    env.emplace("DDP_TOKEN", "job-" + std::to_string(port));
    env.emplace("DDP_TIMEOUT", "20s");
    ps.push_back(ddp_test::spawn({DDP_SCENARIO_WORKER, scenario}, env,
                                 "fault_" + scenario + "_" + std::to_string(world) + "_" + std::to_string(r) +
                                     ".log"));
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

TEST_CASE("a rank that stalls: the others get timeout after the configured timeout") {
  for (int world : {2, 3}) {
    CAPTURE(world);
    auto ps = start_job(world, "stall", ddp_test::free_port(), {{"DDP_TIMEOUT", "2s"}});
    for (auto& p : ps)
      REQUIRE(ddp_test::wait_for(p, 60s));
    for (int r = 0; r + 1 < world; ++r) {
      auto res = parse(ps[static_cast<std::size_t>(r)]);
      CAPTURE(r);
      INFO(ps[static_cast<std::size_t>(r)].output());
      CHECK(ps[static_cast<std::size_t>(r)].exit_code() == 0);
      // Ranks next to the staller time out; the rest learn it from them (peer_lost) a moment later.
      CHECK((res.kind == "timeout" || res.kind == "peer_lost"));
      CHECK(res.ms >= 1900);
      CHECK(res.ms < 6000);
    }
    CHECK(parse(ps[0]).kind == "timeout");
  }
}

TEST_CASE("after a failure every call throws at once") {
  auto ps = start_job(3, "after_failure", ddp_test::free_port());
  for (auto& p : ps)
    REQUIRE(ddp_test::wait_for(p, 60s));
  for (int r = 0; r < 2; ++r) {
    auto res = parse(ps[static_cast<std::size_t>(r)]);
    INFO(ps[static_cast<std::size_t>(r)].output());
    CHECK(res.kind == "peer_lost");
    CHECK(res.ms < 100);
  }
}

TEST_CASE("a wrong token is refused and the job still completes") {
  int port = ddp_test::free_port();
  auto ps = start_job(2, "ok", port);
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
