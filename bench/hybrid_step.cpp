// Hybrid sharding against flat sharding across nodes: a training step's
// synchronize() + Adam step (with its all-gather) under sharded_data_parallel
// over the whole world, and over make_hybrid_groups(pg) (the state cut within
// each node, the shards' gradients averaged across the nodes). Both in the
// same process on the same job, alternating, so the ratios are of one run.
// Besides the time, the bytes that leave each node during the step: the
// interface GLOO_SOCKET_IFNAME's tx_bytes counter, read by each node's local
// rank 0 (traffic between a node's own ranks does not cross it), summed over
// the nodes. A third arm runs hybrid with the shard group's collectives over
// TCP (use_shm(false)), as every subgroup did before subgroups took the node's
// shared memory. One JSON line (rank 0). Run on two nodes by bench/hybrid_netns.sh;
//   ddprun ... bench_hybrid_step [REPS [FLOATS [TENSORS]]]   (default 9, 4194304, 64)
#include "common.hpp"

#include <ddp/ddp.hpp>
#include <ddp/hybrid_groups.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct model {
  std::vector<std::vector<float>> value, grad;
  model(std::size_t floats, std::size_t tensors) {
    for (std::size_t i = 0; i < tensors; ++i) {
      value.emplace_back(floats / tensors, 0.01f);
      grad.emplace_back(floats / tensors, 0.001f);
    }
  }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t i = 0; i < value.size(); ++i)
      f("p" + std::to_string(i), value[i], grad[i]);
  }
};

/// Bytes this node has sent on the inter-node interface; 0 without one (one node).
double node_tx_bytes(const ddp::topology& t) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (!ifname || t.local_rank != 0) return 0;
  std::ifstream in(std::string("/sys/class/net/") + ifname + "/statistics/tx_bytes");
  double v = 0;
  in >> v;
  return v;
}

} // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::stoi(argv[1]) : 9;
  const std::size_t floats = argc > 2 ? std::stoul(argv[2]) : std::size_t{1} << 22;
  const std::size_t tensors = argc > 3 ? std::stoul(argv[3]) : 64;
  auto pg = ddp::init_process_group<ddp::gloo>();
  auto groups = ddp::make_hybrid_groups(pg);
  model a(floats, tensors), b(floats, tensors);
  ddp::sharded_data_parallel flat(a, pg);
  ddp::sharded_data_parallel hybrid(b, pg, groups);
  ddp::optim::adam opt_flat(flat, {}), opt_hybrid(hybrid, {});
  std::vector<double> t_flat, t_hybrid, t_hybrid_tcp, bytes_flat, bytes_hybrid, bytes_hybrid_tcp;
  auto& shard_comm = groups.shard.communicator();
  const bool shard_shm = shard_comm.shm_active();
  // Times one step and the bytes that left every node meanwhile (one barrier's included, alike for both).
  auto measure = [&](auto& sdp, auto& opt, std::vector<double>& times, std::vector<double>& bytes,
                     bool keep) {
    pg.barrier();
    const double before = node_tx_bytes(pg.topology());
    const double s = bench::time_once([&] {
      sdp.synchronize();
      opt.step();
    });
    pg.barrier();
    std::vector<double> sent{node_tx_bytes(pg.topology()) - before};
    pg.all_reduce(sent);
    if (keep) {
      times.push_back(s);
      bytes.push_back(sent[0]);
    }
  };
  for (int r = 0; r < reps + 1; ++r) { // the first round warms up
    measure(flat, opt_flat, t_flat, bytes_flat, r > 0);
    measure(hybrid, opt_hybrid, t_hybrid, bytes_hybrid, r > 0);
    shard_comm.use_shm(false); // every rank between the same two barriers
    measure(hybrid, opt_hybrid, t_hybrid_tcp, bytes_hybrid_tcp, r > 0);
    shard_comm.use_shm(true);
  }
  const double mf = bench::median(t_flat), mh = bench::median(t_hybrid);
  const double bf = bench::median(bytes_flat), bh = bench::median(bytes_hybrid);
  const double mt = bench::median(t_hybrid_tcp);
  if (pg.rank() == 0)
    std::printf("{\"case\":\"hybrid_vs_flat_adam\",\"ranks\":%d,\"nodes\":%d,\"shard\":%d,\"replicas\":%d,"
                "\"floats\":%zu,\"tensors\":%zu,\"reps\":%d,\"flat_ms\":%.3f,\"hybrid_ms\":%.3f,"
                "\"hybrid_over_flat\":%.3f,\"flat_cross_node_bytes\":%.0f,\"hybrid_cross_node_bytes\":%.0f,"
                "\"bytes_hybrid_over_flat\":%.3f,\"flat_optimizer_bytes\":%zu,\"hybrid_optimizer_bytes\":%zu,"
                "\"shard_group_shm\":%s,\"hybrid_tcp_ms\":%.3f,\"hybrid_tcp_over_flat\":%.3f,"
                "\"hybrid_over_hybrid_tcp\":%.3f}\n",
                pg.size(), pg.topology().nnodes, groups.shard.size(), groups.replicate.size(), floats,
                tensors, reps, 1e3 * mf, 1e3 * mh, mh / mf, bf, bh, bf > 0 ? bh / bf : 0.0,
                opt_flat.state_bytes(), opt_hybrid.state_bytes(), shard_shm ? "true" : "false", 1e3 * mt,
                mt / mf, mh / mt);
  std::fflush(stdout);
  return 0;
}
