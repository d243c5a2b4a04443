// The cost of ddp::elastic::state's commit with an optimizer held (state.hold(adam)) against a
// commit of the model alone, for a model of 4 M floats (16 tensors of 2^18) under
// sharded_data_parallel: the median time of commit(), and the memory each
// rank's commits hold (resident set growth) and peak at (the high-water mark, reset before
// each case), in units of the parameters' bytes P. Both cases run in the same processes on the
// same group, model-only first. Buffers of 128 KiB and more are mapped and unmapped one by one
// (a fixed mmap threshold), so the resident set is what is held, not what malloc kept. One
// JSON line (rank 0).
//   build/tools/ddprun --nproc-per-node 2 --no-prefix build/bench/bench_elastic_commit [REPS]
#include "common.hpp"

#include <ddp/ddp.hpp>
#include <ddp/elastic.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <cstdio>
#include <fstream>
#include <malloc.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct model {
  std::vector<std::vector<float>> value, grad;
  explicit model(std::size_t tensors, std::size_t each) {
    for (std::size_t i = 0; i < tensors; ++i) {
      value.emplace_back(each, 0.01f);
      grad.emplace_back(each, 0.001f);
    }
  }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t i = 0; i < value.size(); ++i)
      f("p" + std::to_string(i), value[i], grad[i]);
  }
};

double resident_bytes() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

/// The resident set's high-water mark since the last reset_peak().
double peak_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kb = 0;
  while (in >> key)
    if (key == "VmHWM:") {
      in >> kb;
      break;
    }
  return kb * 1024;
}

void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

struct measured {
  double commit_s, held_bytes, peak_bytes;
};

template <class State> measured measure(State& st, ddp::process_group<ddp::gloo>& pg, int reps) {
  pg.barrier();
  reset_peak();
  const double before = resident_bytes();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    pg.barrier();
    t.push_back(bench::time_once([&] { st.commit({static_cast<std::uint64_t>(r + 1), 0, 0}); }));
  }
  return {bench::median(t), resident_bytes() - before, peak_bytes() - before};
}

} // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::stoi(argv[1]) : 7;
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  auto pg = ddp::init_process_group<ddp::gloo>();
  model net(16, std::size_t{1} << 18);
  ddp::sharded_data_parallel sdp(net, pg);
  ddp::optim::adam opt(sdp, {.lr = 1e-3});
  ddp::elastic::state<model> model_only(net), with_adam(net);
  with_adam.hold(opt);
  sdp.synchronize();
  opt.step();
  const double p = 16.0 * (1 << 18) * sizeof(float);
  const measured a = measure(model_only, pg, reps);
  const measured b = measure(with_adam, pg, reps);
  if (pg.rank() == 0)
    std::printf("{\"case\":\"commit_4M_floats\",\"ranks\":%d,\"parameter_bytes\":%.0f,\"reps\":%d,"
                "\"model_commit_ms\":%.2f,\"adam_commit_ms\":%.2f,\"adam_over_model_commit\":%.2f,"
                "\"model_held_over_p\":%.2f,\"adam_held_over_p\":%.2f,\"model_peak_over_p\":%.2f,"
                "\"adam_peak_over_p\":%.2f}\n",
                pg.size(), p, reps, 1e3 * a.commit_s, 1e3 * b.commit_s, b.commit_s / a.commit_s,
                a.held_bytes / p, b.held_bytes / p, a.peak_bytes / p, b.peak_bytes / p);
  std::fflush(stdout);
  return 0;
}
