// distributed_sampler<shuffled>::indices() for n = 10^7 and 8 replicas against
// std::iota + std::shuffle of the same n (the cost of any permutation), in the
// same run, alternating. One JSON line.
//   build/bench/bench_sampler
// With arguments, one indices() call at any n, for time and memory at large n
// (bench/sampler_large.sh runs it under /usr/bin/time -v). One JSON line.
//   build/bench/bench_sampler N REPLICAS since_2_6|before_2_6
#include "common.hpp"

#include <ddp/sampler.hpp>

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

namespace {

int one_large_call(std::size_t n, int replicas, ddp::torch_randperm version) {
  ddp::distributed_sampler<ddp::sampling::shuffled> s(n, replicas, 0, {.seed = 7, .randperm = version});
  s.set_epoch(1);
  std::span<const std::int64_t> idx;
  const double t = bench::time_once([&] { idx = s.indices(); });
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  // The permutation (4 bytes an entry below 2^32, else 8) lives while the rank's share (8 bytes an entry) is
  // filled.
  const std::size_t entry = n <= 0xffffffffu ? 4 : 8;
  const std::size_t model = n * entry + s.size() * 8;
  std::printf(
      "{\"case\":\"shuffled_indices_once\",\"n\":%zu,\"replicas\":%d,\"randperm\":\"%s\",\"seconds\":%.3f,"
      "\"ns_per_sample\":%.2f,\"peak_rss_bytes\":%lld,\"model_peak_bytes\":%zu,\"idx0\":%lld,\"idx_last\":%"
      "lld}\n",
      n, replicas, version == ddp::torch_randperm::since_2_6 ? "since_2_6" : "before_2_6", t,
      t * 1e9 / static_cast<double>(n), static_cast<long long>(ru.ru_maxrss) * 1024, model,
      static_cast<long long>(idx.front()), static_cast<long long>(idx.back()));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 4) {
    const bool since = std::strcmp(argv[3], "since_2_6") == 0;
    if (!since && std::strcmp(argv[3], "before_2_6") != 0) {
      std::fprintf(stderr, "usage: %s N REPLICAS since_2_6|before_2_6\n", argv[0]);
      return 2;
    }
    return one_large_call(std::strtoull(argv[1], nullptr, 10), std::atoi(argv[2]),
                          since ? ddp::torch_randperm::since_2_6 : ddp::torch_randperm::before_2_6);
  }
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
