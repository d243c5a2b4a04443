// The real Gloo full mesh, as ddp builds it: every rank is a process that
// calls init_process_group<ddp::gloo>() (ddp's rendezvous on the store, then
// ddp's mesh of Gloo pairs, detail/gloo/mesh.hpp: each rank stores the
// address of its pair for each peer under a key of its own and reads the N-1
// keys meant for it, so the store holds and serves ~N² bytes; Gloo's own
// connectFullMesh, before, served ~N³). Rank 0 prints one JSON line: the time from the first
// rank's start to the last rank's mesh (spawn included), the slowest
// init_process_group, and the bytes the store holds and served for the mesh
// (read back from the store). Its baseline is bench_store_fanin at the same
// N: ddp's rendezvous alone, without the mesh.
//
// A second line compares, in the same run, what leaving costs: rounds that
// alternate a mesh of ddp's (gloo_mesh_context, whose pairs close while the
// event loop is kept ticking: detail/gloo/loop_ticker.hpp) with a plain Gloo
// context (connectFullMesh), each on a device of its own. In each round rank
// 0 first fails every connection of its context, as process_group::abort
// does (timed on rank 0), then every rank destroys its context and device
// (timed; the slowest rank counts). Medians over the rounds, and ddp / Gloo.
//   ddprun --nproc-per-node 64 --no-prefix build/bench/bench_gloo_mesh [rounds]
#include "common.hpp"

#include <ddp/ddp.hpp>
// The two meshes compared: ddp's and a plain Gloo context, on ddp's device.
#include <ddp/detail/gloo/device.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/detail/gloo/store_adapter.hpp>

#include <gloo/rendezvous/context.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <time.h>

namespace {

double wall_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts); // one host: every rank reads the same clock
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// One round's times: rank 0's failing of its connections, and the slowest
/// rank's teardown of its context and device.
struct leave_times {
  double fail_s, close_s;
};

/// `fail` fails every connection of the context (on rank 0 only), `make`
/// builds the context; both run on every rank.
template <class Make, class Fail>
leave_times time_leaving(ddp::process_group<ddp::gloo>& pg, Make make, Fail fail) {
  auto ctx = make();
  pg.barrier();
  std::vector<double> failed{0.0};
  if (pg.rank() == 0) failed[0] = bench::time_once([&] { fail(*ctx); });
  pg.barrier();
  std::vector<double> closed{bench::time_once([&] { ctx.reset(); })};
  pg.all_reduce(failed, ddp::op::max);
  pg.all_reduce(closed, ddp::op::max);
  return {failed[0], closed[0]};
}

void compare_leaving(ddp::process_group<ddp::gloo>& pg, int rounds) {
  const auto& t = pg.topology();
  const ddp::detail::gloo_endpoint at{t.rank, t.local_rank, t.master_addr, t.master_port};
  auto fail_ddp = [](ddp::detail::gloo_mesh_context& c) { c.fail_connections(); };
  auto fail_gloo = [](::gloo::Context& c) { // what ddp did before: Gloo fails the pairs one tick each
    char nothing = 0;
    try {
      c.createUnboundBuffer(&nothing, 1)->waitRecv(std::chrono::milliseconds(1));
    } catch (const std::exception&) {}
  };
  std::vector<double> ddp_fail, ddp_close, gloo_fail, gloo_close;
  for (int round = 0; round < rounds; ++round) {
    const std::string tag = std::to_string(round);
    auto d = time_leaving(
        pg,
        [&] {
          auto c = std::make_unique<ddp::detail::gloo_mesh_context>(pg.rank(), pg.size(), pg.timeout());
          ddp::detail::gloo_store_adapter adapter(*pg.store(), "bench/leave-ddp/" + tag + "/");
          c->connect(adapter, ddp::detail::make_gloo_device(at));
          return c;
        },
        fail_ddp);
    auto g = time_leaving(
        pg,
        [&] {
          auto c = std::make_unique<::gloo::rendezvous::Context>(pg.rank(), pg.size());
          c->setTimeout(pg.timeout());
          ddp::detail::gloo_store_adapter adapter(*pg.store(), "bench/leave-gloo/" + tag + "/");
          auto device = ddp::detail::make_gloo_device(at);
          c->connectFullMesh(adapter, device);
          return c;
        },
        fail_gloo);
    ddp_fail.push_back(d.fail_s);
    ddp_close.push_back(d.close_s);
    gloo_fail.push_back(g.fail_s);
    gloo_close.push_back(g.close_s);
  }
  if (pg.rank() != 0) return;
  const double df = bench::median(ddp_fail), dc = bench::median(ddp_close);
  const double gf = bench::median(gloo_fail), gc = bench::median(gloo_close);
  std::cout << "{\"bench\":\"gloo_mesh_leaving\",\"ranks\":" << pg.size() << ",\"rounds\":" << rounds
            << ",\"rank0_fail_connections_s\":{\"ddp\":" << df << ",\"gloo\":" << gf
            << "},\"slowest_teardown_s\":{\"ddp\":" << dc << ",\"gloo\":" << gc
            << "},\"ddp_over_gloo\":{\"fail\":" << df / gf << ",\"teardown\":" << dc / gc << "}}"
            << std::endl;
}

} // namespace

int main(int argc, char** argv) {
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
    compare_leaving(pg, argc > 1 ? std::atoi(argv[1]) : 5);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
