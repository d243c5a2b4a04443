// What a DDP_TRACE probe costs, off and on, in nanoseconds: the instant
// (mark_grad_ready) and span (wait) probes distributed_data_parallel calls, in
// a loop, medians of 7 rounds of CPU time. One process, no communication; one JSON line.
// bench/trace_overhead.sh multiplies these by the probes per step of the example.
//   build/bench/bench_trace
#include <ddp/detail/data_parallel/timeline.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

/// This thread's CPU time: the machine is shared, and wall time would count
/// the time others held the core.
double cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

template <class F> double ns_per_call(F&& f, int n) {
  std::vector<double> t;
  for (int round = 0; round < 7; ++round) {
    const double t0 = cpu_ns();
    for (int i = 0; i < n; ++i)
      f(i);
    t.push_back((cpu_ns() - t0) / n);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct result {
  double instant_ns, span_ns;
};

result measure(ddp::detail::step_timeline& tl, int n) {
  return {ns_per_call([&](int i) { tl.marked(static_cast<std::size_t>(i & 7), false); }, n),
          ns_per_call(
              [&](int) {
                auto s = tl.waiting(0);
                asm volatile("" ::: "memory"); // keep the (empty) span from being folded away
              },
              n)};
}

} // namespace

int main() {
  ddp::detail::bucket_plan plan;
  plan.buckets.resize(1);
  plan.buckets[0].elements = 1024;
  ddp::detail::step_timeline tl(plan);
  constexpr int n = 2'000'000;
  const result off = measure(tl, n);

  auto dir = std::filesystem::temp_directory_path() / ("ddp-bench-trace-" + std::to_string(::getpid()));
  ::setenv("DDP_TRACE", dir.c_str(), 1);
  result on{};
  {
    ddp::detail::trace::session s(0); // tracing on, as while a process group lives
    on = measure(tl, n);
  } // writes the trace (outside the timing)
  std::filesystem::remove_all(dir);
  std::printf("{\"case\":\"trace_probe\",\"off_instant_ns\":%.2f,\"off_span_ns\":%.2f,\"on_instant_ns\":%.2f,"
              "\"on_span_ns\":%.2f}\n",
              off.instant_ns, off.span_ns, on.instant_ns, on.span_ns);
}
