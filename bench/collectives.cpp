// all_reduce through ddp::process_group, through the node's shared memory (the
// default) and over TCP (use_shm(false), today's path before shm), against raw
// gloo::allreduce of the same size on its own context, interleaved round by
// round so all three see the same noise. Ratios: tcp_s / shm_s, shm_s / raw_s.
// Each sample times a burst of back-to-back calls of one kind (as a step's
// buckets run) and divides: timing single calls between calls of the other
// kinds charged Gloo's exit skew between the ranks (tens of us) to whichever
// collective came next (4 KiB over shm: 39-54 us that way, 11 us back to back,
// 2026-12-01, quiet machine).
//   ddprun --nproc-per-node 2 --no-prefix build/bench/bench_collectives
#include "common.hpp"
#include "raw_gloo.hpp"

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  bench::raw_gloo raw(pg, "bench/raw/"); // the baseline: a plain Gloo context of its own

  auto& comm = pg.communicator();
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{100} << 20}) {
    std::vector<float> a(bytes / sizeof(float), 1.0f), b(a.size(), 1.0f), c(a.size(), 1.0f);
    auto run_shm = [&] {
      comm.use_shm(true);
      pg.all_reduce(a);
    };
    auto run_tcp = [&] {
      comm.use_shm(false);
      pg.all_reduce(c);
    };
    auto run_raw = [&] { raw.all_reduce(b); };
    // Warm up, and agree on a repetition count (rank 0's estimate) so every rank runs the same number.
    run_shm();
    run_tcp();
    run_raw();
    const double one = bench::time_once(run_tcp);
    // Bursts of about 2 ms (at most 64 calls), enough samples for about 3 s.
    const int burst = std::clamp(static_cast<int>(2e-3 / std::max(one, 1e-7)), 1, 64);
    std::vector<std::int32_t> reps{bench::reps_for(one * burst, 3.0, 5, 300), burst};
    pg.broadcast(reps, 0);
    auto timed = [n = reps[1]](auto& f) {
      return bench::time_once([&] {
               for (int j = 0; j < n; ++j)
                 f();
             }) /
             n;
    };
    std::vector<double> t_shm, t_tcp, t_raw;
    for (int i = 0; i < reps[0]; ++i) { // rotate which goes first: none always runs on a warm cache
      for (int k = 0; k < 3; ++k)
        switch ((i + k) % 3) {
        case 0: t_shm.push_back(timed(run_shm)); break;
        case 1: t_tcp.push_back(timed(run_tcp)); break;
        default: t_raw.push_back(timed(run_raw));
        }
    }
    comm.use_shm(true);
    double s = bench::median(t_shm), t = bench::median(t_tcp), r = bench::median(t_raw);
    if (pg.rank() == 0)
      std::printf(
          "{\"case\":\"all_reduce\",\"bytes\":%zu,\"ranks\":%d,\"reps\":%d,\"burst\":%d,\"shm_active\":%s,"
          "\"shm_s\":%.6g,\"tcp_s\":%.6g,\"raw_s\":%.6g,\"tcp_over_shm\":%.3f,\"shm_over_raw\":%.4f}\n",
          bytes, pg.size(), reps[0], reps[1], comm.shm_active() ? "true" : "false", s, t, r, t / s, s / r);
    std::fflush(stdout);
  }
  pg.barrier();
}
