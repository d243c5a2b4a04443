// Deterministic stream-ordering checks for the GPU tests. A stream is held
// back by a host function that sleeps, then something is queued behind it
// (a fill): code under test that does not follow the stream reads the data
// from before (a race it loses every time, not a race it may win), and code
// that should not block its caller can be seen returning before the sleep
// ended (`woke` still false). A big kernel or memset instead would be a race.
#ifndef DDP_TESTS_GPU_HELD_STREAM_HPP
#define DDP_TESTS_GPU_HELD_STREAM_HPP

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace gpu_test {

/// Queues on `s` (cudaStreamLegacy: the legacy default stream), without
/// waiting: a host function that sleeps `ms`, then sets `*woke` if given.
inline void hold_back(cudaStream_t s, int ms, std::atomic<bool>* woke = nullptr) {
  struct sleep {
    int ms;
    std::atomic<bool>* woke;
  };
  auto* arg = new sleep{ms, woke};
  cudaError_t e = cudaLaunchHostFunc(
      s,
      [](void* p) {
        auto* a = static_cast<sleep*>(p);
        std::this_thread::sleep_for(std::chrono::milliseconds(a->ms));
        if (a->woke) a->woke->store(true);
        delete a;
      },
      arg);
  if (e != cudaSuccess) {
    delete arg;
    std::printf("FAILED: cudaLaunchHostFunc: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

/// Queues on `s`: every byte of [p, p + bytes) set to 0x3f.
inline void fill(cudaStream_t s, void* p, std::size_t bytes) {
  if (cudaError_t e = cudaMemsetAsync(p, 0x3f, bytes, s); e != cudaSuccess) {
    std::printf("FAILED: cudaMemsetAsync: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

/// The float whose every byte is 0x3f (about 0.747).
inline float filled_value() {
  const std::uint32_t pattern = 0x3f3f3f3f;
  float v = 0;
  std::memcpy(&v, &pattern, sizeof v);
  return v;
}

} // namespace gpu_test

#endif // DDP_TESTS_GPU_HELD_STREAM_HPP
