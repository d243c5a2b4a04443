// all_reduce through ddp::process_group against raw gloo::allreduce of the same
// size on its own context, interleaved round by round so both see the same noise.
//   ddprun --nproc-per-node 2 --no-prefix build/bench/bench_collectives
#include "common.hpp"
#include "raw_gloo.hpp"

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  bench::raw_gloo raw(pg, "bench/raw/"); // the baseline: a plain Gloo context of its own

  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{100} << 20}) {
    std::vector<float> a(bytes / sizeof(float), 1.0f), b(a.size(), 1.0f);
    auto run_ddp = [&] { pg.all_reduce(a); };
    auto run_raw = [&] { raw.all_reduce(b); };
    // Warm up, and agree on a repetition count (rank 0's estimate) so every rank runs the same number.
    run_ddp();
    run_raw();
    std::vector<std::int32_t> reps{bench::reps_for(bench::time_once(run_ddp), 3.0, 5, 500)};
    pg.broadcast(reps, 0);
    std::vector<double> t_ddp, t_raw;
    for (int i = 0; i < reps[0]; ++i) { // alternate which goes first: neither always runs on a warm cache
      if (i % 2) t_raw.push_back(bench::time_once(run_raw));
      t_ddp.push_back(bench::time_once(run_ddp));
      if (i % 2 == 0) t_raw.push_back(bench::time_once(run_raw));
    }
    double d = bench::median(t_ddp), r = bench::median(t_raw);
    if (pg.rank() == 0)
      std::printf(
          "{\"case\":\"all_reduce\",\"bytes\":%zu,\"ranks\":%d,\"reps\":%d,\"ddp_s\":%.6g,\"raw_s\":%.6g,"
          "\"ratio\":%.4f}\n",
          bytes, pg.size(), reps[0], d, r, d / r);
    std::fflush(stdout);
  }
  pg.barrier();
}
