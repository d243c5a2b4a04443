// One rank of a scenario, started by test_faults and test_launch. The init
// method comes from DDP_TEST_INIT_METHOD (default env://). Prints one line
// "RESULT kind=<kind> rank=<named rank> ms=<elapsed>" when it catches the
// expected ddp::error, and exits 0; anything else exits non-zero.
#include <ddp/ddp.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unistd.h>

using clk = std::chrono::steady_clock;

static int report(const ddp::error& e, clk::time_point t0) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
  std::printf("RESULT kind=%s rank=%d ms=%lld\nMESSAGE %s\n", std::string(ddp::to_string(e.kind())).c_str(),
              e.rank(), static_cast<long long>(ms), e.what());
  std::fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  auto t0 = clk::now();
  try {
    // torch.distributed.launch without --use_env passes --local_rank=N first.
    if (auto lr = ddp::consume_local_rank_arg(argc, argv)) std::printf("LOCAL_RANK_ARG %d\n", *lr);
    std::string scenario = argc > 1 ? argv[1] : "";
    ddp::init_options opts;
    if (const char* m = std::getenv("DDP_TEST_INIT_METHOD")) opts.init_method = m;
    auto pg = ddp::init_process_group<ddp::gloo>(opts);
    const int victim = pg.size() - 1;
    std::vector<float> warm(1024, 1.0f);
    pg.all_reduce(warm);
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
      t0 = clk::now();
      pg.barrier();
      std::puts("NO ERROR");
      return 1;
    }
    if (scenario == "ok") {
      std::vector<std::int64_t> ranks{pg.rank()};
      pg.all_reduce(ranks);
      pg.barrier();
      if (ranks[0] != std::int64_t{pg.size()} * (pg.size() - 1) / 2) return 1;
      std::printf("RESULT ok rank=%d size=%d\n", pg.rank(), pg.size());
      return 0;
    }
    std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
    return 2;
  } catch (const ddp::error& e) { return report(e, t0); }
}
