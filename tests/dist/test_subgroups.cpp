// Subgroups over Gloo: split (MPI_Comm_split's contract) and new_group, each a
// full process group with its own mesh on the job's store: exact values, rank
// numbering, a group made from a group, collectives of two groups in flight at
// once, the ranks left out told so, and errors naming the group. Run by ctest
// through ddprun at world sizes 1..4 (most cases need 3 or more).
#include "group.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

using ddp_test::group;

namespace {

/// Sum of the job ranks in `g`, computed locally.
int sum_of(const std::vector<int>& ranks) { return std::accumulate(ranks.begin(), ranks.end(), 0); }

} // namespace

TEST_CASE("split by parity: numbered by key, sums over the members only") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  auto g = pg.split(r % 2, r);
  REQUIRE(g.is_member());
  CHECK(g.rank() == r / 2);
  CHECK(g.size() == (w - r % 2 + 1) / 2);
  std::vector<int> want;
  for (int k = r % 2; k < w; k += 2)
    want.push_back(k);
  CHECK(g.global_ranks() == want);
  std::vector<int> v{r, 1};
  g.all_reduce(v);
  CHECK(v[0] == sum_of(want));
  CHECK(v[1] == g.size());
  // Reversed keys number the members the other way round.
  auto back = pg.split(r % 2, -r);
  CHECK(back.rank() == g.size() - 1 - g.rank());
  std::vector<int> root{back.rank() == 0 ? r : -1};
  back.broadcast(root, 0);
  CHECK(root[0] == want.back());
  // A negative color joins no group, and using it says so.
  auto none = pg.split(r == 0 ? -1 : 0, r);
  CHECK(none.is_member() == (r != 0));
  if (r == 0) {
    CHECK(none.rank() == -1);
    std::vector<float> x(2);
    CHECK_THROWS_WITH_AS(none.all_reduce(x), doctest::Contains("not a member"), ddp::error);
  } else {
    std::vector<int> one{1};
    none.all_reduce(one);
    CHECK(one[0] == w - 1);
  }
}

TEST_CASE("new_group in the listed order; the ranks left out get a clear error") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  if (w < 3) return;
  const std::vector<int> ranks{2, 0};
  auto g = pg.new_group(ranks);
  CHECK(g.is_member() == (r == 0 || r == 2));
  CHECK(g.global_ranks() == ranks);
  CHECK(g.name().find("global ranks 2, 0") != std::string::npos);
  if (g.is_member()) {
    CHECK(g.rank() == (r == 2 ? 0 : 1));
    std::vector<double> v(100000, r == 2 ? 7.0 : -1.0);
    g.broadcast(v, 0); // from job rank 2
    CHECK(v[99999] == 7.0);
    // The rest of the collectives work in a subgroup too.
    std::vector<float> msg(3, static_cast<float>(r));
    if (g.rank() == 0)
      g.send(msg, 1, 5);
    else
      g.recv(msg, 0, 5);
    CHECK(msg[2] == 2.0f);
  } else {
    std::vector<float> x(2);
    try {
      g.barrier();
      FAIL("a rank left out used the group");
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::config);
      CHECK(std::string(e.what()).find("not a member of group") != std::string::npos);
      CHECK(std::string(e.what()).find("global ranks 2, 0") != std::string::npos);
    }
    CHECK_THROWS_AS(g.all_reduce(x), ddp::error);
  }
  pg.barrier();
}

TEST_CASE("a group made from a group, and two groups' collectives in flight at once") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  auto g = pg.split(r % 2, r);
  auto gg = g.split(0, -g.rank()); // the same members, numbered backwards
  CHECK(gg.size() == g.size());
  CHECK(gg.rank() == g.size() - 1 - g.rank());
  auto members = g.global_ranks();
  CHECK(gg.global_ranks() == std::vector<int>(members.rbegin(), members.rend()));
  // Large async all-reduces on three groups, queued before any is waited for.
  std::vector<float> a(300000, 1.0f), b(300000, static_cast<float>(r)), c(300000, 2.0f);
  auto wa = pg.all_reduce_async(a);
  auto wb = g.all_reduce_async(b);
  auto wc = gg.all_reduce_async(c);
  wc.wait();
  wb.wait();
  wa.wait();
  CHECK(a[123] == static_cast<float>(w));
  CHECK(b[123] == static_cast<float>(sum_of(members)));
  CHECK(c[123] == 2.0f * static_cast<float>(gg.size()));
}

TEST_CASE("a subgroup's errors and flight recorder name it; the job's group lives on") {
  auto& pg = group();
  const int r = pg.rank();
  if (pg.size() < 3) return;
  // DDP_FLIGHT_RECORDER comes from ctest (tests/CMakeLists.txt): setenv here would race the
  // groups' threads. Each (group, rank) writes a file of its own name in the shared folder.
  const char* fr_env = std::getenv("DDP_FLIGHT_RECORDER");
  const std::filesystem::path dir = fr_env ? fr_env : "";
  if (fr_env) std::filesystem::create_directories(dir);
  auto g = pg.split(r % 2, r);
  // "group g0c1 (global ...)" writes rank_<r>_g0c1_.json
  const std::string tag = g.name().substr(6, g.name().find(' ', 6) - 6);
  const auto record = dir / ("rank_" + std::to_string(g.rank()) + "_" + tag + "_.json");
  if (fr_env) std::filesystem::remove(record); // a record of an earlier run
  pg.barrier();
  if (g.size() >= 2) {
    std::vector<float> v(g.rank() == 0 ? 10 : 11);
    try {
      g.all_reduce(v);
      FAIL("a count mismatch went unnoticed");
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::mismatch);
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(g.name()) != std::string::npos);
    }
    // The record is the group's own file, and says which group it is.
    if (fr_env) {
      std::ifstream in(record);
      const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CAPTURE(record.string());
      CHECK(body.find("\"group\": \"" + g.name()) != std::string::npos);
    }
  }
  std::vector<int> one{1};
  pg.all_reduce(one);
  CHECK(one[0] == pg.size());
}

TEST_CASE("new_group with different lists on different ranks: mismatch on every rank, no group") {
  auto& pg = group();
  if (pg.size() < 2) return;
  const std::vector<int> ranks = pg.rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
  try {
    auto g = pg.new_group(ranks);
    FAIL("different lists made a group");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(std::string(e.what()).find("rank 1 passed other ranks than rank 0") != std::string::npos);
  }
  CHECK_THROWS_AS((void)pg.new_group({0, 0}), ddp::error); // a rank twice: refused on every rank
  std::vector<int> one{1};
  pg.all_reduce(one); // the job's group is fine
  CHECK(one[0] == pg.size());
}

TEST_CASE("a subgroup of a group joined through file://") {
  auto& pg = group();
  std::vector<std::uint8_t> dir(512, 0);
  if (pg.rank() == 0) {
    auto base = std::filesystem::temp_directory_path() / ("ddp_subgroup_file_" + std::to_string(::getpid()));
    std::filesystem::create_directories(base);
    std::string s = base.string();
    std::copy(s.begin(), s.end(), dir.begin());
  }
  pg.broadcast(dir, 0);
  const std::string path(reinterpret_cast<const char*>(dir.data()));
  {
    ddp::init_options opts;
    opts.init_method = "file://" + path;
    auto fg = ddp::init_process_group<ddp::gloo>(opts);
    auto g = fg.split(fg.rank() % 2, fg.rank());
    std::vector<int> v{fg.rank()};
    g.all_reduce(v);
    int want = 0;
    for (int k = fg.rank() % 2; k < fg.size(); k += 2)
      want += k;
    CHECK(v[0] == want);
    fg.barrier(); // every subgroup done before any rank's file group goes
  }
  pg.barrier();
  if (pg.rank() == 0) std::filesystem::remove_all(path);
}

TEST_CASE("a subgroup destroyed while an exception unwinds fails its own mesh, not the job") {
  auto& pg = group();
  if (pg.size() < 2) return;
  std::vector<int> all(static_cast<std::size_t>(pg.size()));
  std::iota(all.begin(), all.end(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  bool caught = false;
  try {
    auto g = pg.new_group(all);
    g.barrier();
    if (pg.rank() == 0) throw std::runtime_error("an error of rank 0's own"); // unwinds g
    std::vector<float> v(4, 1.0f);
    CHECK_THROWS_AS(g.all_reduce(v), ddp::error); // rank 0 left: fails now, not at the timeout
  } catch (const std::runtime_error&) { caught = true; }
  CHECK(caught == (pg.rank() == 0));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  std::vector<int> one{1};
  pg.all_reduce(one); // before, rank 0's unwinding reported a failure of the job: this threw
  CHECK(one[0] == pg.size());
}

TEST_CASE("a member that left a subgroup on its own error is named at once, by its job rank") {
  // Numbered backwards (job rank 0 is the group's last), so that a group rank
  // given for a job rank shows; run over shm and over TCP (dist.subgroups.tcp_w3).
  auto& pg = group();
  if (pg.size() < 2) return;
  bool caught = false, shm = false;
  std::chrono::steady_clock::duration took{};
  try {
    auto g = pg.split(0, -pg.rank());
    shm = g.communicator().shm_active();
    REQUIRE(g.rank() == pg.size() - 1 - pg.rank());
    std::vector<float> v(4, 1.0f);
    for (int i = 0; i < 5; ++i) // the group's flight recorder gets ahead of the job's
      g.all_reduce(v);
    g.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (pg.rank() == 0) throw std::runtime_error("an error of rank 0's own"); // unwinds g
    try {
      g.all_reduce(v);
      FAIL("the subgroup went on without job rank 0");
    } catch (const ddp::error& e) {
      took = std::chrono::steady_clock::now() - t0;
      const std::string text = e.what();
      CAPTURE(text);
      CHECK(e.rank() == 0);
      CHECK(e.kind() == ddp::error_kind::peer_lost);
      if (!g.communicator().shm_active()) // over TCP: its own words, not "stopped or hung"
        CHECK(std::string(e.what()).find("job rank 0 left") != std::string::npos);
    }
  } catch (const std::runtime_error&) { caught = true; }
  CHECK(caught == (pg.rank() == 0));
  // Not a lost-rank search and a desync report (4 s over TCP before): at once. The segment's
  // reader of an abort first looks a second for a rank the store records lost (1.06 s before).
  CAPTURE(shm);
  CHECK(std::chrono::duration<double>(took).count() < (shm ? 3.0 : 1.5));
  pg.barrier();
  // Whatever the subgroup wrote, the job's own report keys and stalled marks are untouched.
  for (int r = 0; r < pg.size(); ++r) {
    CHECK_FALSE(pg.store()->try_get("ddp/fault/progress/" + std::to_string(r)));
    CHECK_FALSE(pg.store()->try_get("ddp/fault/stalled/" + std::to_string(r)));
  }
}

TEST_CASE("a subgroup's mismatch names job ranks, over shm and TCP alike") {
  // Numbered backwards, so that a group rank given for a job rank shows; the job's last
  // rank passes one float more. Run over shm and over TCP (dist.subgroups.tcp_w3).
  auto& pg = group();
  if (pg.size() < 2) return;
  const int r = pg.rank(), odd = pg.size() - 1;
  auto g = pg.split(0, -r);
  std::vector<float> v(r == odd ? 5 : 4, 1.0f);
  try {
    g.all_reduce(v);
    FAIL("a count mismatch went unnoticed");
  } catch (const ddp::error& e) {
    const std::string text = e.what();
    CAPTURE(text);
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(text.find("rank " + std::to_string(r) + ": all_reduce #") != std::string::npos); // its own rank
    CHECK(text.find("this rank (" + std::to_string(r) + ")") != std::string::npos);
    if (r != odd) {
      CHECK(e.rank() == odd);
      CHECK(text.find("rank " + std::to_string(odd) + " called") != std::string::npos);
    }
  }
}

TEST_CASE("new_group on one rank against split on the others: mismatch on every rank, no group") {
  auto& pg = group();
  if (pg.size() < 2) return;
  std::vector<int> all(static_cast<std::size_t>(pg.size()));
  std::iota(all.begin(), all.end(), 0);
  try {
    auto g = pg.rank() == 0 ? pg.new_group(all) : pg.split(0);
    FAIL("different calls made a group");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find("make groups from one thread, in the same order") != std::string::npos);
  }
  auto g = pg.split(0); // the ranks' counts of groups made stay in step
  std::vector<int> one{1};
  g.all_reduce(one);
  CHECK(one[0] == pg.size());
}

TEST_CASE("a subgroup's topology() describes the subgroup") {
  auto& pg = group();
  if (pg.size() < 2) return;
  std::vector<int> rest(static_cast<std::size_t>(pg.size() - 1));
  std::iota(rest.begin(), rest.end(), 1);
  auto g = pg.new_group(rest); // rank 0 left out
  const auto& t = g.topology();
  if (pg.rank() == 0) {
    CHECK(t.rank == -1);
    CHECK(t.world_size == pg.size() - 1);
    return;
  }
  // One node (ddprun here): every member is local, one node.
  CHECK(t.rank == pg.rank() - 1);
  CHECK(t.world_size == pg.size() - 1);
  CHECK(t.local_rank == t.rank);
  CHECK(t.local_world_size == t.world_size); // before, the job's: larger than the group
  CHECK(t.node_rank == 0);
  CHECK(t.nnodes == 1);
  std::vector<int> one{1};
  g.all_reduce(one);
  CHECK(one[0] == g.size());
}

TEST_CASE("groups dropped as soon as they are made: no member's connect is cut short") {
  auto& pg = group();
  // A member that returned from the group's connect and destroyed it at once
  // closed its pairs while a slower member was still connecting to them.
  for (int round = 0; round < 12; ++round) {
    auto halves = pg.split(pg.rank() % 2, pg.rank());
    auto all = pg.split(0, pg.rank());
  }
  std::vector<int> one{1};
  pg.all_reduce(one);
  CHECK(one[0] == pg.size());
}
