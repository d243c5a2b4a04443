// The real Gloo full mesh, as ddp builds it: every rank is a process that
// calls init_process_group<ddp::gloo>() (ddp's rendezvous on the store, then
// Gloo's connectFullMesh: each rank stores the addresses of its N-1 pairs
// under one key and reads every other rank's key, so the store holds ~N² and
// serves ~N³ bytes). Rank 0 prints one JSON line: the time from the first
// rank's start to the last rank's mesh (spawn included), the slowest
// init_process_group, and the bytes the store holds and served for the mesh
// (read back from the store). Its baseline is bench_store_fanin at the same
// N: ddp's rendezvous alone, without the mesh.
//   ddprun --nproc-per-node 64 --no-prefix build/bench/bench_gloo_mesh
#include "common.hpp"

#include <ddp/ddp.hpp>

#include <sys/resource.h>

#include <iostream>
#include <time.h>

namespace {

double wall_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts); // one host: every rank reads the same clock
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

} // namespace

int main() {
  const double started = wall_now();
  // Each rank holds 2 descriptors per peer while the mesh forms (Gloo 0.5's
  // pairs listen on a port each, then connect).
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  try {
    const double t0 = wall_now();
    auto pg = ddp::init_process_group<ddp::gloo>();
    const double meshed = wall_now();
    const int n = pg.size();
    // [0] first start (min), [1] last mesh (max), [2] slowest init (max)
    std::vector<double> first{started}, last{meshed}, init{meshed - t0};
    pg.all_reduce(first, ddp::op::min);
    pg.all_reduce(last, ddp::op::max);
    pg.all_reduce(init, ddp::op::max);
    // One all_reduce over the mesh, timed: the mesh works.
    std::vector<float> x(1024, 1.0f);
    double ar = bench::time_once([&] { pg.all_reduce(x); });
    if (x[0] != static_cast<float>(n)) throw std::runtime_error("all_reduce gave a wrong sum");
    if (pg.rank() == 0) {
      auto& s = *pg.store();
      std::size_t mesh_value = 0, stored = 0;
      for (int r = 0; r < n; ++r) {
        auto v = s.try_get("ddp/gloo/" + std::to_string(r));
        auto h = s.try_get("ddp/gloo/rank_" + std::to_string(r));
        if (!v || !h) throw std::runtime_error("a Gloo key is missing from the store");
        mesh_value = std::max(mesh_value, v->size());
        stored += v->size() + h->size();
      }
      // Every rank reads every other rank's address list once (wait + get).
      const double served = static_cast<double>(n) * (n - 1) * static_cast<double>(mesh_value);
      std::cout << "{\"bench\":\"gloo_mesh\",\"ranks\":" << n << ",\"start_to_mesh_s\":" << last[0] - first[0]
                << ",\"slowest_init_process_group_s\":" << init[0]
                << ",\"address_list_bytes_per_rank\":" << mesh_value << ",\"store_bytes_held\":" << stored
                << ",\"store_bytes_served_for_mesh\":" << served << ",\"all_reduce_4KiB_s\":" << ar << "}"
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
