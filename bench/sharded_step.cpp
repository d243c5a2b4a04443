// A training step's synchronization and optimizer, sharded (ZeRO-1) against
// DDP: for the gradient shapes of ResNet-50 and of 2000 small tensors, with
// Adam, the time of synchronize() + step() (+ the all-gather, inside step()
// for sharded) and each rank's optimizer memory. Both run in the same process
// on the same group, alternating, so the ratio is of the same run. One JSON
// line per case (rank 0).
//   build/tools/ddprun --nproc-per-node 2 --no-prefix build/bench/bench_sharded_step
#include "common.hpp"
#include "shapes.hpp"

#include <ddp/ddp.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct model {
  std::vector<std::vector<float>> value, grad;
  explicit model(const std::vector<std::size_t>& sizes) {
    for (auto n : sizes) {
      value.emplace_back(n, 0.01f);
      grad.emplace_back(n, 0.001f);
    }
  }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t i = 0; i < value.size(); ++i)
      f("p" + std::to_string(i), value[i], grad[i]);
  }
};

/// DDP's partner: Adam on whole parameters, torch.optim.Adam's arithmetic.
struct whole_adam {
  std::vector<std::vector<float>> m, v;
  std::uint64_t t = 0;
  explicit whole_adam(const model& net) {
    for (auto& p : net.value) {
      m.emplace_back(p.size(), 0.f);
      v.emplace_back(p.size(), 0.f);
    }
  }
  void step(model& net) {
    ++t;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const auto bc2 = static_cast<float>(std::sqrt(1 - std::pow(0.999, static_cast<double>(t))));
    const auto step_size = static_cast<float>(1e-3 / (1 - std::pow(0.9, static_cast<double>(t))));
    for (std::size_t k = 0; k < net.value.size(); ++k)
      for (std::size_t i = 0; i < net.value[k].size(); ++i) {
        const float g = net.grad[k][i];
        m[k][i] = m[k][i] * b1 + (1 - b1) * g;
        v[k][i] = v[k][i] * b2 + (1 - b2) * g * g;
        net.value[k][i] -= step_size * (m[k][i] / (std::sqrt(v[k][i]) / bc2 + eps));
      }
  }
  std::size_t bytes() const {
    std::size_t n = 0;
    for (auto& x : m)
      n += 2 * x.size() * sizeof(float);
    return n;
  }
};

void run_case(ddp::process_group<ddp::gloo>& pg, const char* name, const std::vector<std::size_t>& sizes,
              int reps) {
  model a(sizes), b(sizes);
  ddp::distributed_data_parallel dp(a, pg);
  whole_adam whole(a);
  ddp::sharded_data_parallel sdp(b, pg);
  ddp::optim::adam opt(sdp, {});
  std::vector<double> t_ddp, t_sharded;
  for (int r = 0; r < reps + 1; ++r) { // the first round warms up
    pg.barrier();
    const double d = bench::time_once([&] {
      dp.synchronize();
      whole.step(a);
    });
    pg.barrier();
    const double s = bench::time_once([&] {
      sdp.synchronize();
      opt.step();
    });
    if (r > 0) {
      t_ddp.push_back(d);
      t_sharded.push_back(s);
    }
  }
  std::size_t floats = 0;
  for (auto n : sizes)
    floats += n;
  const double md = bench::median(t_ddp), ms = bench::median(t_sharded);
  if (pg.rank() == 0)
    std::printf(
        "{\"case\":\"%s\",\"ranks\":%d,\"tensors\":%zu,\"floats\":%zu,\"reps\":%d,\"ddp_adam_ms\":%.3f,"
        "\"sharded_adam_ms\":%.3f,\"sharded_over_ddp\":%.3f,\"ddp_optimizer_bytes\":%zu,"
        "\"sharded_optimizer_bytes\":%zu}\n",
        name, pg.size(), sizes.size(), floats, reps, 1e3 * md, 1e3 * ms, ms / md, whole.bytes(),
        opt.state_bytes());
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::stoi(argv[1]) : 9;
  auto pg = ddp::init_process_group<ddp::gloo>();
  run_case(pg, "resnet50_adam", bench::resnet50_sizes(), reps);
  run_case(pg, "many_small_adam", std::vector<std::size_t>(2000, 256), reps);
  return 0;
}
