// all_reduce through ddp::process_group against raw gloo::allreduce of the same
// size on its own context, interleaved round by round so both see the same noise.
//   ddprun --nproc-per-node 2 --no-prefix build/bench/bench_collectives
#include "common.hpp"

#include <ddp/ddp.hpp>

#include <gloo/math.h>

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  // The baseline: a second, plain Gloo context over the same store.
  ddp::detail::rendezvous rv;
  rv.topo = pg.topology();
  auto device = ddp::detail::make_gloo_device(rv);
  auto raw = std::make_shared<::gloo::rendezvous::Context>(pg.rank(), pg.size());
  raw->setTimeout(std::chrono::seconds(120));
  ddp::detail::gloo_store_adapter adapter(*pg.store(), "bench/raw/");
  raw->connectFullMesh(adapter, device);
  std::uint32_t tag = 1000;

  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{100} << 20}) {
    std::vector<float> a(bytes / sizeof(float), 1.0f), b(a.size(), 1.0f);
    auto run_ddp = [&] { pg.all_reduce(a); };
    auto run_raw = [&] {
      ::gloo::AllreduceOptions opts(raw);
      opts.setOutput(b.data(), b.size());
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
      opts.setTag(tag++);
      ::gloo::allreduce(opts);
    };
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
      std::printf("{\"case\":\"all_reduce\",\"bytes\":%zu,\"ranks\":%d,\"reps\":%d,\"ddp_s\":%.6g,\"raw_s\":%.6g,"
                  "\"ratio\":%.4f}\n",
                  bytes, pg.size(), reps[0], d, r, d / r);
    std::fflush(stdout);
  }
  pg.barrier();
}
