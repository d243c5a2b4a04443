// Shared by the benchmarks: timing, medians, JSON lines.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class F> double time_once(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return seconds_since(t0);
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Repetitions so that a case takes about `budget` seconds, within [lo, hi].
inline int reps_for(double one_s, double budget, int lo, int hi) {
  int r = one_s > 0 ? static_cast<int>(budget / one_s) : hi;
  return std::clamp(r, lo, hi);
}

} // namespace bench
