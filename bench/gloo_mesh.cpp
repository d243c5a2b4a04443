// The real Gloo full mesh, as ddp builds it: every rank is a process that
// calls init_process_group<ddp::gloo>() (ddp's rendezvous on the store, then
// ddp's mesh of Gloo pairs, detail/backend/gloo_mesh.hpp: each rank stores the
// address of its pair for each peer under a key of its own and reads the N-1
// keys meant for it, so the store holds and serves ~N² bytes; Gloo's own
// connectFullMesh, before, served ~N³). Rank 0 prints one JSON line: the time from the first
// rank's start to the last rank's mesh (spawn included), the slowest
// init_process_group, and the bytes the store holds and served for the mesh
// (read back from the store). Its baseline is bench_store_fanin at the same
// N: ddp's rendezvous alone, without the mesh.
//   ddprun --nproc-per-node 64 --no-prefix build/bench/bench_gloo_mesh
#include "common.hpp"

#include <ddp/ddp.hpp>

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
      std::size_t read_per_rank = 0, stored = 0;
      for (int r = 0; r < n; ++r)
        for (int p = 0; p < n; ++p) {
          if (p == r) continue;
          auto v = s.try_get("ddp/gloo/" + ddp::detail::gloo_mesh_key(r, p));
          if (!v) throw std::runtime_error("a mesh key is missing from the store");
          stored += v->size();
          if (p == 0) read_per_rank += v->size(); // the keys rank 0 reads
        }
      // Every key is read once, by the rank it is meant for.
      const double served = static_cast<double>(stored);
      std::cout << "{\"bench\":\"gloo_mesh\",\"ranks\":" << n << ",\"start_to_mesh_s\":" << last[0] - first[0]
                << ",\"slowest_init_process_group_s\":" << init[0]
                << ",\"address_bytes_read_per_rank\":" << read_per_rank << ",\"store_bytes_held\":" << stored
                << ",\"store_bytes_served_for_mesh\":" << served << ",\"all_reduce_4KiB_s\":" << ar << "}"
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
