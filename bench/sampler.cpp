// distributed_sampler<shuffled>::indices() for n = 10^7 and 8 replicas against
// std::iota + std::shuffle of the same n (the cost of any permutation), in the
// same run, alternating. One JSON line.
//   build/bench/bench_sampler
#include "common.hpp"

#include <ddp/sampler.hpp>

#include <numeric>
#include <random>

int main() {
  const std::size_t n = 10'000'000;
  const int replicas = 8;
  std::vector<double> t_ddp, t_base;
  std::uint64_t sink = 0;
  for (int rep = 0; rep < 7; ++rep) {
    t_ddp.push_back(bench::time_once([&] {
      ddp::distributed_sampler<ddp::sampling::shuffled> s(n, replicas, rep % replicas, {.seed = 42});
      s.set_epoch(static_cast<std::uint64_t>(rep));
      sink += static_cast<std::uint64_t>(s.indices()[0]);
    }));
    t_base.push_back(bench::time_once([&] {
      std::vector<std::int64_t> v(n);
      std::iota(v.begin(), v.end(), 0);
      std::mt19937 g(static_cast<std::uint32_t>(42 + rep));
      std::shuffle(v.begin(), v.end(), g);
      sink += static_cast<std::uint64_t>(v[0]);
    }));
  }
  double d = bench::median(t_ddp), b = bench::median(t_base);
  // Memory: one 4-byte permutation of n (freed after) plus this rank's n/replicas 8-byte indices.
  std::printf("{\"case\":\"shuffled_indices\",\"n\":%zu,\"replicas\":%d,\"ddp_s\":%.6g,\"baseline_s\":%.6g,"
              "\"ratio\":%.4f,\"peak_extra_bytes\":%zu,\"sink\":%llu}\n",
              n, replicas, d, b, d / b, n * 4 + n / replicas * 8, static_cast<unsigned long long>(sink % 10));
}
