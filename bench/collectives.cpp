// all_reduce through ddp::process_group, through the node's shared memory (the
// default) and over TCP (use_shm(false), today's path before shm), against raw
// gloo::allreduce of the same size on its own context, interleaved round by
// round so all three see the same noise. Ratios: tcp_s / shm_s, shm_s / raw_s.
// The calls of one kind run in blocks back to back (as a step's buckets do),
// each timed on its own: timing single calls between calls of the other kinds
// charged the exit skew between the ranks (tens of us after a Gloo call) to
// whichever collective came next (4 KiB over shm: 39-54 us that way, 3-11 us
// back to back, 2026-12-01, quiet machine).
// in_place_s: the same all_reduce of a ddp::shm_array (pg.make_shm_array),
// reduced in place in the node's shared memory, no copies through the segment.
// Last, "all_reduce_loop": 3000 back-to-back 4 KiB all-reduces, nothing between.
// Before all of these, data_movement (below): each of ddp's collectives over
// TCP against Gloo's own; then extended: send/recv, all_to_all, gather,
// scatter and reduce against Gloo's own.
//   ddprun --nproc-per-node 2 --no-prefix build/bench/bench_collectives [data_movement|extended|all_reduce]
#include "common.hpp"
#include "raw_gloo.hpp"

/// ddp's collectives over TCP against Gloo's own on a context of its own, each
/// call timed, the two alternating call by call: all_reduce with shm off (ddp's
/// ring against Gloo's ring), broadcast (ddp's chain against Gloo's),
/// all_gather and reduce_scatter (ddp's block exchange against Gloo's
/// all-gather, and its all-to-all and a sum in rank order). All of ddp's run on
/// buffers an abort can interrupt (detail/gloo/waits.hpp). `bytes` is the block: what
/// one rank all-reduces, broadcasts, contributes to the all-gather, or keeps of
/// the reduce-scatter.
static void data_movement(ddp::process_group<ddp::gloo>& pg, bench::raw_gloo& raw) {
  auto& comm = pg.communicator();
  const auto w = static_cast<std::size_t>(pg.size());
  for (std::string kind : {"all_reduce_tcp", "broadcast", "all_gather", "reduce_scatter"}) {
    for (std::size_t bytes :
         {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{32} << 20}) {
      const std::size_t n = bytes / sizeof(float);
      std::vector<float> one(n, 1.0f), many(n * w, 1.0f), one_raw(n, 1.0f), many_raw(n * w, 1.0f);
      auto run_ddp = [&] {
        if (kind == "all_reduce_tcp") {
          pg.all_reduce(one);
        } else if (kind == "broadcast") {
          pg.broadcast(one, 0);
        } else if (kind == "all_gather") {
          pg.all_gather(one, many);
        } else {
          pg.reduce_scatter(many, one);
        }
      };
      auto run_raw = [&] {
        if (kind == "all_reduce_tcp") {
          raw.all_reduce(one_raw.data(), n);
        } else if (kind == "broadcast") {
          raw.broadcast(one_raw.data(), n, 0);
        } else if (kind == "all_gather") {
          raw.all_gather(one_raw.data(), many_raw.data(), n);
        } else {
          raw.reduce_scatter(many_raw.data(), one_raw.data(), n);
        }
      };
      comm.use_shm(false);
      run_ddp();
      run_raw();
      std::vector<std::int32_t> reps{bench::reps_for(bench::time_once(run_ddp), 2.0, 5, 200)};
      pg.broadcast(reps, 0);
      std::vector<double> t_ddp, t_raw;
      for (int i = 0; i < reps[0]; ++i) { // alternating which goes first
        if (i % 2) t_raw.push_back(bench::time_once(run_raw));
        t_ddp.push_back(bench::time_once(run_ddp));
        if (i % 2 == 0) t_raw.push_back(bench::time_once(run_raw));
      }
      comm.use_shm(true);
      const double d = bench::median(t_ddp), r = bench::median(t_raw);
      if (pg.rank() == 0)
        std::printf("{\"case\":\"%s\",\"bytes\":%zu,\"ranks\":%d,\"reps\":%d,\"ddp_s\":%.6g,"
                    "\"raw_s\":%.6g,\"ddp_over_raw\":%.3f}\n",
                    kind.c_str(), bytes, pg.size(), reps[0], d, r, d / r);
      std::fflush(stdout);
    }
  }
}

/// send/recv, all_to_all (equal and with counts per peer), gather, scatter
/// and reduce through ddp::process_group against Gloo's own on a context of
/// its own, alternating call by call. `bytes` is the block: what one rank
/// sends each peer (all_to_all), contributes (gather, reduce) or gets
/// (scatter). send_recv is a round trip between ranks 0 and 1 (the others
/// idle), timed on rank 0.
static void extended(ddp::process_group<ddp::gloo>& pg, bench::raw_gloo& raw) {
  const auto w = static_cast<std::size_t>(pg.size());
  for (std::string kind : {"send_recv", "all_to_all", "all_to_all_v", "gather", "scatter", "reduce"}) {
    for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{256} << 10, std::size_t{4} << 20}) {
      const std::size_t n = bytes / sizeof(float);
      std::vector<float> one(n, 1.0f), many(n * w, 1.0f), one_raw(n, 1.0f), many_raw(n * w, 1.0f), out(n * w),
          out_raw(n * w);
      std::vector<std::size_t> counts(w, n);
      std::vector<std::int64_t> counts_raw(w, static_cast<std::int64_t>(n));
      const int r = pg.rank();
      auto run_ddp = [&] {
        if (kind == "send_recv") {
          if (r == 0) {
            pg.send(one, 1);
            pg.recv(one, 1);
          } else if (r == 1) {
            pg.recv(one, 0);
            pg.send(one, 0);
          }
        } else if (kind == "all_to_all") {
          pg.all_to_all(many, out);
        } else if (kind == "all_to_all_v") {
          pg.all_to_all(many, out, counts, counts);
        } else if (kind == "gather") {
          pg.gather(one, out, 0);
        } else if (kind == "scatter") {
          pg.scatter(many, one, 0);
        } else {
          pg.reduce(one, 0);
        }
      };
      auto run_raw = [&] {
        if (kind == "send_recv") {
          if (r == 0) {
            raw.send(one_raw.data(), n, 1);
            raw.recv(one_raw.data(), n, 1);
          } else if (r == 1) {
            raw.recv(one_raw.data(), n, 0);
            raw.send(one_raw.data(), n, 0);
          }
        } else if (kind == "all_to_all") {
          raw.all_to_all(many_raw.data(), out_raw.data(), n);
        } else if (kind == "all_to_all_v") {
          raw.all_to_all_v(many_raw.data(), out_raw.data(), counts_raw, counts_raw);
        } else if (kind == "gather") {
          raw.gather(one_raw.data(), out_raw.data(), n, 0);
        } else if (kind == "scatter") {
          raw.scatter(many_raw.data(), one_raw.data(), n, 0);
        } else {
          raw.reduce(one_raw.data(), n, 0);
        }
      };
      run_ddp();
      run_raw();
      std::vector<std::int32_t> reps{bench::reps_for(bench::time_once(run_ddp), 2.0, 5, 200)};
      pg.broadcast(reps, 0);
      std::vector<double> t_ddp, t_raw;
      for (int i = 0; i < reps[0]; ++i) { // alternating which goes first
        if (i % 2) t_raw.push_back(bench::time_once(run_raw));
        t_ddp.push_back(bench::time_once(run_ddp));
        if (i % 2 == 0) t_raw.push_back(bench::time_once(run_raw));
        if (kind == "send_recv") pg.barrier(); // the idle ranks keep step
      }
      const double d = bench::median(t_ddp), rr = bench::median(t_raw);
      if (pg.rank() == 0)
        std::printf("{\"case\":\"%s\",\"bytes\":%zu,\"ranks\":%d,\"reps\":%d,\"ddp_s\":%.6g,"
                    "\"raw_s\":%.6g,\"ddp_over_raw\":%.3f}\n",
                    kind.c_str(), bytes, pg.size(), reps[0], d, rr, d / rr);
      std::fflush(stdout);
    }
  }
}

int main(int argc, char** argv) {
  auto pg = ddp::init_process_group<ddp::gloo>();
  bench::raw_gloo raw(pg, "bench/raw/"); // the baseline: a plain Gloo context of its own
  // No argument: everything; "data_movement", "extended" or "all_reduce": that part alone.
  const std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "data_movement") data_movement(pg, raw);
  if (only == "data_movement") return 0;
  if (only.empty() || only == "extended") extended(pg, raw);
  if (only == "extended") return 0;

  auto& comm = pg.communicator();
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{100} << 20}) {
    std::vector<float> a(bytes / sizeof(float), 1.0f), b(a.size(), 1.0f), c(a.size(), 1.0f);
    auto d = pg.make_shm_array<float>(a.size());
    std::fill(d.begin(), d.end(), 1.0f);
    auto run_in_place = [&] {
      comm.use_shm(true);
      pg.all_reduce(d);
    };
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
    run_in_place();
    const double one = bench::time_once(run_tcp);
    // Bursts by size (an estimate from the first calls was unreliable: right after the
    // raw Gloo warm-up a 4 KiB TCP call took ~3.9 ms, later ~0.13 ms; 2026-12-01).
    const int burst = bytes <= (std::size_t{64} << 10) ? 32 : bytes <= (std::size_t{4} << 20) ? 4 : 1;
    std::vector<std::int32_t> reps{bench::reps_for(one * burst, 3.0, 5, 300), burst};
    pg.broadcast(reps, 0);
    // Each call timed on its own, in blocks of back-to-back calls of one kind: the
    // median drops the block's first call, which absorbs the previous kind's exit skew.
    auto timed = [n = reps[1]](auto& f, std::vector<double>& out) {
      for (int j = 0; j < n; ++j)
        out.push_back(bench::time_once(f));
    };
    std::vector<double> t_shm, t_tcp, t_raw, t_in_place;
    // The order of the kinds within a round follows a Williams Latin square:
    // over 4 rounds each kind goes first once and follows each other kind
    // once. A block right after ddp's TCP path ran 3-6x slower at 4 KiB (21
    // against 3.5-7 us, 2026-12-01), which a fixed cyclic order charged to
    // one kind alone; none always runs on a warm cache either.
    static constexpr int order[4][4] = {{0, 1, 3, 2}, {1, 2, 0, 3}, {2, 3, 1, 0}, {3, 0, 2, 1}};
    for (int i = 0; i < reps[0]; ++i) {
      for (int k = 0; k < 4; ++k)
        switch (order[i % 4][k]) {
        case 0: timed(run_shm, t_shm); break;
        case 1: timed(run_tcp, t_tcp); break;
        case 2: timed(run_in_place, t_in_place); break;
        default: timed(run_raw, t_raw);
        }
    }
    comm.use_shm(true);
    double s = bench::median(t_shm), t = bench::median(t_tcp), r = bench::median(t_raw),
           ip = bench::median(t_in_place);
    if (pg.rank() == 0)
      std::printf(
          "{\"case\":\"all_reduce\",\"bytes\":%zu,\"ranks\":%d,\"reps\":%d,\"burst\":%d,\"shm_active\":%s,"
          "\"in_segment\":%s,\"shm_s\":%.6g,\"in_place_s\":%.6g,\"tcp_s\":%.6g,\"raw_s\":%.6g,"
          "\"tcp_over_shm\":%.3f,\"shm_over_raw\":%.4f,\"raw_over_in_place\":%.3f}\n",
          bytes, pg.size(), reps[0], reps[1], comm.shm_active() ? "true" : "false",
          d.in_shared_memory() ? "true" : "false", s, ip, t, r, t / s, s / r, r / ip);
    std::fflush(stdout);
  }
  // The latency floor: 3000 back-to-back 4 KiB all-reduces of the default path,
  // each timed (p10, median, p90), nothing interleaved.
  // The same of a ddp::shm_array (in place), memory "shm_array".
  std::vector<float> a(1024, 1.0f);
  auto d = pg.make_shm_array<float>(1024);
  auto loop = [&](const char* memory, auto& x) {
    std::vector<double> t;
    for (int i = 0; i < 3000; ++i)
      t.push_back(bench::time_once([&] { pg.all_reduce(x); }));
    std::sort(t.begin(), t.end());
    if (pg.rank() == 0)
      std::printf(
          "{\"case\":\"all_reduce_loop\",\"memory\":\"%s\",\"bytes\":4096,\"ranks\":%d,\"calls\":3000,"
          "\"shm_active\":%s,\"p10_s\":%.6g,\"median_s\":%.6g,\"p90_s\":%.6g}\n",
          memory, pg.size(), comm.shm_active() ? "true" : "false", t[300], t[1500], t[2700]);
  };
  loop("vector", a);
  loop("shm_array", d);
  pg.barrier();
}
