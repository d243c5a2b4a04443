// One rank of a scenario, started by test_faults, test_launch and
// tests/faults/matrix.py. The init method comes from DDP_TEST_INIT_METHOD
// (default env://). Prints one line
// "RESULT kind=<kind> rank=<named rank> ms=<elapsed> wall_ms=<unix ms>" when it
// catches the expected ddp::error (before the group is torn down, so `ms` is
// the time to detect, not to leave), and exits 0 (1 in the `loop` and
// `subgroup_loop` scenarios, like a training program); anything else exits non-zero.
#include <ddp/ddp.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using clk = std::chrono::steady_clock;

static int report(const ddp::error& e, clk::time_point t0) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
  auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  std::printf("RESULT kind=%s rank=%d ms=%lld wall_ms=%lld\nMESSAGE %s\n",
              std::string(ddp::to_string(e.kind())).c_str(), e.rank(), static_cast<long long>(ms),
              static_cast<long long>(wall), e.what());
  std::fflush(stdout);
  return 0;
}

static int env_int_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

/// The victim's process_group::abort in the abort_* scenarios, with the
/// test's own reason; prints "ABORT wall_ms=<unix ms> ms=<how long it took>".
static void abort_and_report(ddp::process_group<ddp::gloo>& pg) {
  auto a0 = clk::now();
  pg.abort("batch 7 could not be read (the test's own reason)");
  auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  std::printf(
      "ABORT wall_ms=%lld ms=%lld\n", static_cast<long long>(wall),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - a0).count()));
  std::fflush(stdout);
}

/// "POISONED 1" when the group has failed already, so that a later call is refused before it
/// reaches the network: what the tests check for "at once", a time bound alone being load-bound.
static void report_poisoned(ddp::process_group<ddp::gloo>& pg) {
  std::printf("POISONED %d\n", pg.communicator().poisoned() ? 1 : 0);
  std::fflush(stdout);
}

/// On the victim only (DDP_TEST_VICTIM, default 0): abort_and_report from a
/// thread of its own 500 ms from now, while the main thread is in a collective.
class abort_from_thread_later {
public:
  explicit abort_from_thread_later(ddp::process_group<ddp::gloo>& pg) {
    if (pg.rank() == env_int_or("DDP_TEST_VICTIM", 0))
      t_ = std::thread([&pg] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        abort_and_report(pg);
      });
  }
  abort_from_thread_later(const abort_from_thread_later&) = delete;
  abort_from_thread_later& operator=(const abort_from_thread_later&) = delete;
  ~abort_from_thread_later() {
    if (t_.joinable()) t_.join();
  }

private:
  std::thread t_;
};

/// The scenarios that need a process group; a ddp::error is reported here,
/// while the group is still alive.
static int run(ddp::process_group<ddp::gloo>& pg, const std::string& scenario, clk::time_point& t0);

int main(int argc, char** argv) {
  auto t0 = clk::now();
  std::string scenario;
  if (argc > 1 && std::string(argv[1]) == "uncaught") {
    // The victim (DDP_TEST_VICTIM, default 1) lets a ddp::error escape main; the others
    // then fail in their all_reduce, and let theirs escape too.
    auto pg = ddp::init_process_group<ddp::gloo>();
    std::vector<float> warm(1024, 1.0f);
    pg.all_reduce(warm);
    std::puts("READY");
    std::fflush(stdout);
    if (pg.rank() == env_int_or("DDP_TEST_VICTIM", 1))
      throw ddp::error(ddp::error_kind::data,
                       "rank " + std::to_string(pg.rank()) + ": batch 7 is corrupt (the test's own error)");
    pg.all_reduce(warm);
    std::puts("NO ERROR");
    return 1;
  }
  try {
    // torch.distributed.launch without --use_env passes --local_rank=N first.
    if (auto lr = ddp::consume_local_rank_arg(argc, argv)) std::printf("LOCAL_RANK_ARG %d\n", *lr);
    scenario = argc > 1 ? argv[1] : "";
    ddp::init_options opts;
    if (const char* m = std::getenv("DDP_TEST_INIT_METHOD")) opts.init_method = m;
    if (scenario == "lost_in_rendezvous" &&
        ddp::topology::from_env().rank == env_int_or("DDP_TEST_VICTIM", 1)) {
      // Connects to the store, registers like a rank, then dies without a goodbye.
      auto topo = ddp::topology::from_env();
      ddp::tcp_store_options so;
      so.host = topo.master_addr;
      so.port = topo.master_port;
      so.token = ddp::detail::getenv_str("DDP_TOKEN").value_or("");
      so.rank = topo.rank;
      so.timeout = std::chrono::seconds(20);
      ddp::tcp_store store(so);
      store.add("ddp/rank/" + std::to_string(topo.rank), 1);
      store.set("ddp/world/" + std::to_string(topo.rank), std::to_string(topo.world_size));
      std::_Exit(3);
    }
    auto pg = ddp::init_process_group<ddp::gloo>(opts);
    try {
      return run(pg, scenario, t0);
    } catch (const ddp::error& e) {
      report(e, t0);
      return scenario == "loop" ? 1 : 0;
    }
  } catch (const ddp::error& e) {
    report(e, t0);
    return scenario == "loop" ? 1 : 0;
  } catch (const std::exception& e) {
    // What a training program does with its own errors: say it, exit 1.
    std::printf("FAILED %s\n", e.what());
    std::fflush(stdout);
    return 1;
  }
}

static int run(ddp::process_group<ddp::gloo>& pg, const std::string& scenario, clk::time_point& t0) {
  {
    const int victim = pg.size() - 1;
    std::vector<float> warm(1024, 1.0f);
    if (scenario == "lost_in_rendezvous") {
      std::puts("NO ERROR");
      return 1;
    }
    pg.all_reduce(warm);
    if (scenario == "orphan") {
      // The victim (DDP_TEST_VICTIM, default 1) sleeps in user code; the others wait for it in
      // an all_reduce. The test kills the launcher meanwhile: every rank must end within seconds.
      std::printf("READY rank=%d pid=%d\n", pg.rank(), static_cast<int>(::getpid()));
      std::fflush(stdout);
      if (pg.rank() == env_int_or("DDP_TEST_VICTIM", 1)) {
        std::this_thread::sleep_for(std::chrono::seconds(env_int_or("DDP_TEST_SLEEP_SECONDS", 120)));
        std::puts("NO ERROR");
        return 1;
      }
      t0 = clk::now();
      pg.all_reduce(warm);
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "loop") {
      // The fault matrix: all_reduce 1 MiB and "compute" 2 ms, until a rank is
      // killed or stopped from outside (or DDP_TEST_LOOP_SECONDS pass).
      std::printf("READY rank=%d pid=%d shm=%s\n", pg.rank(), static_cast<int>(::getpid()),
                  pg.communicator().shm_segment_name().c_str());
      std::fflush(stdout);
      std::vector<float> grad(256u << 10, 1.0f);
      auto end = clk::now() + std::chrono::seconds(env_int_or("DDP_TEST_LOOP_SECONDS", 30));
      while (clk::now() < end) {
        pg.all_reduce(grad);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      std::puts("NO ERROR");
      return 0;
    }
    if (scenario == "subgroup_loop") {
      // The loop in pairs of neighbours (pg.split(rank / 2)), each pair's own
      // subgroup, through its own segment when the pair shares a node.
      auto g = pg.split(pg.rank() / 2, pg.rank());
      std::printf("READY rank=%d pid=%d shm=%s\n", pg.rank(), static_cast<int>(::getpid()),
                  g.communicator().shm_segment_name().c_str());
      std::fflush(stdout);
      std::vector<float> grad(256u << 10, 1.0f);
      auto end = clk::now() + std::chrono::seconds(env_int_or("DDP_TEST_LOOP_SECONDS", 30));
      try {
        while (clk::now() < end) {
          g.all_reduce(grad);
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      } catch (const ddp::error& e) {
        report(e, t0); // before the groups' teardown
        return 1;
      }
      std::puts("NO ERROR");
      return 0;
    }
    if (scenario == "subgroup_stall") {
      // Pairs of neighbours (pg.split(rank / 2)); the job's last rank stalls, so its pair's
      // other member times out in the pair's all_reduce and its desync report names it.
      auto g = pg.split(pg.rank() / 2, pg.rank());
      if (pg.rank() == victim) {
        std::this_thread::sleep_for(std::chrono::seconds(8)); // far past DDP_TIMEOUT
        return 0;
      }
      t0 = clk::now();
      try {
        g.all_reduce(warm);
      } catch (const ddp::error& e) {
        return report(e, t0); // before the groups' teardown
      }
      std::puts(g.size() == 2 && g.global_ranks()[1] == victim ? "NO ERROR" : "PAIR OK");
      return 0;
    }
    if (scenario == "throw_mid") {
      // The victim (DDP_TEST_VICTIM, default 0) throws in its own code between
      // collectives while the others are inside an all_reduce.
      if (pg.rank() == env_int_or("DDP_TEST_VICTIM", 0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        throw std::runtime_error("user code failed on purpose");
      }
      t0 = clk::now();
      pg.all_reduce(warm);
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "abort_mid") {
      // The victim (DDP_TEST_VICTIM, default 0) gives up between collectives
      // with process_group::abort while the others are inside an all_reduce,
      // then tries one more collective (refused at once: RESULT from the victim
      // too) and leaves normally.
      if (pg.rank() == env_int_or("DDP_TEST_VICTIM", 0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        pg.abort("batch 7 could not be read (the test's own reason)");
        pg.abort("a second call changes nothing");
        report_poisoned(pg);
        t0 = clk::now();
      }
      if (pg.rank() != env_int_or("DDP_TEST_VICTIM", 0)) t0 = clk::now();
      pg.all_reduce(warm);
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "abort_running") {
      // The victim (DDP_TEST_VICTIM, default 0) gives up with process_group::abort
      // while its own all_reduce runs, waiting for the last rank, which comes
      // 2 s late. Prints abort_and_report's line; the running
      // collective fails with the victim's reason. The others fail naming it.
      const int slow = pg.size() - 1;
      if (pg.rank() == env_int_or("DDP_TEST_VICTIM", 0)) {
        auto running = pg.all_reduce_async(warm);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        abort_and_report(pg);
        report_poisoned(pg);
        t0 = clk::now();
        running.wait();
        std::puts("NO ERROR");
        return 1;
      }
      if (pg.rank() == slow) std::this_thread::sleep_for(std::chrono::seconds(2));
      t0 = clk::now();
      pg.all_reduce(warm);
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "abort_from_thread") {
      // Every rank runs one collective (DDP_TEST_COLLECTIVE: all_reduce, the
      // default, broadcast, all_gather or reduce_scatter) of 32 MiB blocks in a
      // loop (DDP_TEST_MIB sets the size), so transfers are under way most of
      // the time; 500 ms in, a thread of the victim's (DDP_TEST_VICTIM, default
      // 0) gives up with process_group::abort (abort_and_report).
      const char* which = std::getenv("DDP_TEST_COLLECTIVE");
      const std::string collective = which && *which ? which : "all_reduce";
      const std::size_t n = static_cast<std::size_t>(env_int_or("DDP_TEST_MIB", 32)) << 18; // floats
      std::vector<float> block(n, 1.0f), blocks(n * static_cast<std::size_t>(pg.size()), 1.0f);
      abort_from_thread_later giver(pg);
      t0 = clk::now();
      for (int i = 0; i < 100000; ++i) { // until the failure
        if (collective == "all_reduce")
          pg.all_reduce(block);
        else if (collective == "broadcast")
          pg.broadcast(block, i % pg.size());
        else if (collective == "all_gather")
          pg.all_gather(block, blocks);
        else if (collective == "reduce_scatter")
          pg.reduce_scatter(blocks, block);
        else
          throw std::invalid_argument("DDP_TEST_COLLECTIVE=" + collective + ": no such collective");
      }
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "abort_in_store_wait") {
      // The last rank comes 3 s late to make_shm_array, whose setup waits in the
      // store; 500 ms in, a thread of the victim's (DDP_TEST_VICTIM, default 0)
      // gives up, while the victim's own main thread holds its store connection
      // in that wait (abort_and_report).
      abort_from_thread_later giver(pg);
      if (pg.rank() == pg.size() - 1) std::this_thread::sleep_for(std::chrono::seconds(3));
      t0 = clk::now();
      auto shared = pg.make_shm_array<float>(1024);
      pg.all_reduce(shared);
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "exit_mid") {
      // The victim dies while the others are inside a large all_reduce.
      if (pg.rank() == victim) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::_Exit(3);
      }
      std::vector<float> big(64u << 20, 1.0f);
      t0 = clk::now();
      for (int i = 0; i < 1000; ++i)
        pg.all_reduce(big); // until the failure
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "stall") {
      if (pg.rank() == victim) {
        std::this_thread::sleep_for(std::chrono::seconds(8)); // far past DDP_TIMEOUT
        return 0;
      }
      t0 = clk::now();
      pg.all_reduce(warm);
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "after_failure") {
      // After the group is poisoned, every later call throws at once.
      if (pg.rank() == victim) std::_Exit(3);
      try {
        for (int i = 0; i < 1000; ++i)
          pg.all_reduce(warm);
      } catch (const ddp::error&) {}
      report_poisoned(pg);
      t0 = clk::now();
      pg.barrier();
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "shm_off") {
      // The shm path could not be set up (a full /dev/shm): the group must
      // still work, over TCP, on every rank.
      if (pg.communicator().shm_active()) {
        std::puts("FAILED shm is active, expected the TCP fallback");
        return 1;
      }
      std::vector<std::int64_t> ranks{pg.rank()};
      pg.all_reduce(ranks);
      std::vector<float> big(300000, static_cast<float>(pg.rank() + 1)); // over the inline cap: Gloo's ring
      pg.all_reduce(big);
      std::vector<std::int64_t> b{pg.rank() == 0 ? 42 : 0};
      pg.broadcast(b, 0);
      const float want = static_cast<float>(pg.size() * (pg.size() + 1) / 2);
      if (ranks[0] != std::int64_t{pg.size()} * (pg.size() - 1) / 2 || big.front() != want ||
          big.back() != want || b[0] != 42) {
        std::puts("FAILED wrong results over TCP");
        return 1;
      }
      std::printf("RESULT ok rank=%d size=%d shm=0\n", pg.rank(), pg.size());
      return 0;
    }
    if (scenario == "mismatch_kinds") {
      // Rank 0 all-reduces (through shm) while the others broadcast (over TCP):
      // both sides must fail fast with mismatch, then the group stays poisoned.
      t0 = clk::now();
      try {
        if (pg.rank() == 0) {
          pg.all_reduce(warm);
        } else {
          std::vector<std::int64_t> b{1};
          pg.broadcast(b, 0);
        }
        std::puts("NO ERROR");
        return 1;
      } catch (const ddp::error& e) { report(e, t0); }
      auto t1 = clk::now();
      try {
        pg.all_reduce(warm);
        std::puts("NO ERROR after the mismatch");
        return 1;
      } catch (const ddp::error& e) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t1).count();
        std::printf("POISONED kind=%s ms=%lld\n", std::string(ddp::to_string(e.kind())).c_str(),
                    static_cast<long long>(ms));
        std::fflush(stdout);
      }
      return 0;
    }
    if (scenario == "ok") {
      std::vector<std::int64_t> ranks{pg.rank()};
      pg.all_reduce(ranks);
      pg.barrier();
      if (ranks[0] != std::int64_t{pg.size()} * (pg.size() - 1) / 2) return 1;
      std::printf("RESULT ok rank=%d size=%d shm=%d\n", pg.rank(), pg.size(),
                  pg.communicator().shm_active() ? 1 : 0);
      return 0;
    }
    std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }
}
