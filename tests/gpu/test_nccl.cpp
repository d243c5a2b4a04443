// The NCCL backend on a real GPU (one rank per GPU; with one GPU, world size 1).
// Without a GPU it checks that init fails cleanly with a ddp::error, and exits
// 77 (ctest: skipped).
#include <ddp/backend/nccl.hpp>
#include <ddp/ddp.hpp>

#include "held_stream.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

static int failures = 0;
#define EXPECT(cond)                                                                                         \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      std::printf("FAILED: %s (line %d)\n", #cond, __LINE__);                                                \
      ++failures;                                                                                            \
    }                                                                                                        \
  } while (0)

struct tiny_model {
  std::vector<float> w{1, 2, 3}, dw{0, 0, 0};
  template <class F> void for_each_parameter(F&& f) { f("w", w, dw); }
};

/// `timeout` (DDP_TIMEOUT=1s): an all_reduce held 3 s behind the legacy default stream outlives
/// its deadline. Its work fails with a timeout naming it, within seconds (before the abort, which
/// may block); a host all_reduce queued behind it (its job waits on NCCL's stream) fails with the
/// same error, and the group is poisoned, so a host all_reduce after it is refused with it too.
int timeout_case(ddp::process_group<ddp::nccl>& pg) {
  const std::size_t n = 1024;
  float* d = nullptr;
  EXPECT(cudaMalloc(&d, n * sizeof(float)) == cudaSuccess);
  gpu_test::hold_back(cudaStreamLegacy, 3000);
  ddp::device_span<float> ds{d, n};
  const auto t0 = std::chrono::steady_clock::now();
  auto w = pg.all_reduce_async(ds);
  // A host collective queued behind it, 0.5 s later (its own deadline comes after the held one's):
  // its job waits for NCCL's stream; when the held collective's deadline fails the group, it must
  // fail with the group's error, not wait on or copy back what an aborted communicator's stream left.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<float> behind(16, 1.0f);
  auto w_behind = pg.all_reduce_async(behind);
  std::string first;
  try {
    w.wait();
    std::puts("FAILED: a collective held 3 s past a 1 s deadline succeeded");
    ++failures;
  } catch (const ddp::error& e) {
    first = e.what();
    std::printf("the held all_reduce failed after %.1f s: %s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), e.what());
    EXPECT(e.kind() == ddp::error_kind::timeout);
    EXPECT(first.find("all_reduce #") != std::string::npos &&
           first.find("1024 x float32") != std::string::npos && first.find("timed out") != std::string::npos);
    // The works fail before the abort (which may block in cudaFree until the 3 s hold ends).
    EXPECT(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500));
  }
  try {
    w_behind.wait();
    std::puts("FAILED: a host all_reduce queued behind the failed collective succeeded");
    ++failures;
  } catch (const ddp::error& e) {
    std::printf("the host all_reduce behind it failed: %s\n", e.what());
    EXPECT(std::string(e.what()) == first);
  }
  std::vector<float> h(16, 1.0f);
  try {
    pg.all_reduce(h);
    std::puts("FAILED: a host all_reduce after the failure succeeded");
    ++failures;
  } catch (const ddp::error& e) { EXPECT(std::string(e.what()) == first); }
  std::printf("rank %d timeout case: %s\n", pg.rank(), failures ? "FAILED" : "ok");
  return failures ? 1 : 0; // d is left to the process's end: the aborted stream may still hold it
}

int run(bool timeout_mode);

int main(int argc, char** argv) {
  const bool timeout_mode = argc > 1 && std::string(argv[1]) == "timeout";
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    try {
      auto pg = ddp::init_process_group<ddp::nccl>();
      std::puts("FAILED: NCCL initialised without a GPU");
      return 1;
    } catch (const ddp::error& e) {
      bool clean = e.kind() == ddp::error_kind::backend &&
                   std::string(e.what()).find("no usable CUDA device") != std::string::npos;
      std::printf("SKIP: no CUDA device (init failed cleanly: %s)\n", clean ? "yes" : e.what());
      return clean ? 77 : 1;
    }
  }
  try {
    return run(timeout_mode);
  } catch (const std::exception& e) { // init included: a clear failure, not std::terminate
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}

int run(bool timeout_mode) {
  auto pg = ddp::init_process_group<ddp::nccl>();
  if (timeout_mode) return timeout_case(pg);
  const int R = pg.size();
  // Host tensors (staged).
  std::vector<float> h(1000, static_cast<float>(pg.rank() + 1));
  pg.all_reduce(h);
  EXPECT(h[999] == static_cast<float>(R * (R + 1) / 2));
  std::vector<double> a(5, pg.rank() + 1.0);
  pg.all_reduce(a, ddp::op::avg);
  EXPECT(a[0] == (R + 1) / 2.0);
  std::vector<std::int32_t> m{pg.rank()};
  pg.all_reduce(m, ddp::op::max);
  EXPECT(m[0] == R - 1);
  std::vector<std::int64_t> b(3, pg.rank() == 0 ? 42 : 0);
  pg.broadcast(b, 0);
  EXPECT(b[2] == 42);
  std::vector<float> in(4, static_cast<float>(pg.rank())), out(4 * static_cast<std::size_t>(R));
  pg.all_gather(in, out);
  EXPECT(out[4 * static_cast<std::size_t>(R) - 1] == static_cast<float>(R - 1));
  std::vector<float> rs_in(2 * static_cast<std::size_t>(R), 1.0f), rs_out(2);
  pg.reduce_scatter(rs_in, rs_out);
  EXPECT(rs_out[1] == static_cast<float>(R));
  pg.barrier();
  // Device tensors (no staging), async, in order.
  const std::size_t n = (1u << 20) + 3;
  float* d = nullptr;
  cudaMalloc(&d, n * sizeof(float));
  std::vector<float> ones(n, 1.0f);
  cudaMemcpy(d, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  ddp::device_span<float> ds{d, n};
  auto w1 = pg.all_reduce_async(ds);
  auto w2 = pg.all_reduce_async(ds, ddp::op::avg);
  w2.wait();
  w1.wait();
  cudaMemcpy(ones.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT(ones[n - 1] == static_cast<float>(R));
  cudaFree(d);
  // A device collective follows the legacy default stream: that stream sleeps 300 ms (a host
  // function), then fills `src`; an all_gather that did not wait for it copies the zeros before.
  // Out of place on purpose: at one rank NCCL's in-place collectives touch nothing.
  {
    const std::size_t tail = 1024;
    float *src = nullptr, *dst = nullptr;
    EXPECT(cudaMalloc(&src, tail * sizeof(float)) == cudaSuccess);
    EXPECT(cudaMalloc(&dst, tail * sizeof(float) * static_cast<std::size_t>(R)) == cudaSuccess);
    EXPECT(cudaMemset(src, 0, tail * sizeof(float)) == cudaSuccess);
    gpu_test::hold_back(cudaStreamLegacy, 300);
    gpu_test::fill(cudaStreamLegacy, src, tail * sizeof(float));
    ddp::device_span<float> din{src, tail}, dout{dst, tail * static_cast<std::size_t>(R)};
    pg.all_gather(din, dout);
    std::vector<float> got(dout.count);
    cudaMemcpy(got.data(), dst, got.size() * sizeof(float), cudaMemcpyDeviceToHost);
    const float v = gpu_test::filled_value();
    EXPECT(got.front() == v && got.back() == v);
    cudaFree(src);
    cudaFree(dst);
  }
  // work::stream_wait: a user stream waits for a device collective on the device; the host does not
  // wait for it to finish. Two collectives are held back 1 s behind the legacy default stream (a
  // sleeping host function, then the fill); the second's stream_wait returns long before, with
  // neither done (the communicator queues them back to back, it does not wait for the first on
  // the host), and a copy queued on the user stream after the first still sees the gathered fill.
  {
    const std::size_t tail = 4096;
    float *src = nullptr, *dst = nullptr;
    cudaStream_t user = nullptr;
    EXPECT(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaMalloc(&src, tail * sizeof(float)) == cudaSuccess);
    EXPECT(cudaMalloc(&dst, tail * sizeof(float) * static_cast<std::size_t>(R)) == cudaSuccess);
    EXPECT(cudaMemset(src, 0, tail * sizeof(float)) == cudaSuccess);
    EXPECT(cudaMemset(dst, 0, tail * sizeof(float) * static_cast<std::size_t>(R)) == cudaSuccess);
    std::atomic<bool> woke{false};
    gpu_test::hold_back(cudaStreamLegacy, 1000, &woke);
    gpu_test::fill(cudaStreamLegacy, src, tail * sizeof(float));
    ddp::device_span<float> din{src, tail}, dout{dst, tail * static_cast<std::size_t>(R)};
    auto gather = pg.all_gather_async(din, dout);
    auto reduce = pg.all_reduce_async(din);
    reduce.stream_wait(user);
    gather.stream_wait(user);
    EXPECT(!woke.load() && !gather.done() && !reduce.done()); // still behind the 1 s sleep
    std::vector<float> got(dout.count);
    EXPECT(cudaMemcpyAsync(got.data(), dst, got.size() * sizeof(float), cudaMemcpyDeviceToHost, user) ==
           cudaSuccess);
    EXPECT(cudaStreamSynchronize(user) == cudaSuccess);
    const float v = gpu_test::filled_value();
    EXPECT(got.front() == v && got.back() == v);
    gather.wait(); // the host view agrees
    reduce.wait();
    EXPECT(gather.done() && reduce.done());
    cudaFree(src);
    cudaFree(dst);
    cudaStreamDestroy(user);
  }
  // Events are pooled: one collective at a time reuses the same few (one per collective, created and
  // destroyed, before); a burst of 2000 x 256 floats, each followed by a user stream, reports its host
  // time. A stream_wait after the end orders nothing (its event may serve another collective by then).
  {
    const std::size_t count = 2000, len = 256;
    float* grads = nullptr;
    cudaStream_t user = nullptr;
    EXPECT(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaMalloc(&grads, count * len * sizeof(float)) == cudaSuccess);
    std::vector<float> all(count * len, 1.0f);
    EXPECT(cudaMemcpy(grads, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    const std::size_t before = pg.communicator().events_created();
    ddp::device_span<float> first{grads, len};
    for (std::size_t k = 0; k < 200; ++k) {
      auto w = pg.all_reduce_async(first, ddp::op::avg);
      w.stream_wait(user);
      w.wait();
    }
    const std::size_t one_at_a_time = pg.communicator().events_created() - before;
    EXPECT(one_at_a_time <= 16);
    std::vector<ddp::device_span<float>> spans;
    for (std::size_t k = 0; k < count; ++k)
      spans.push_back({grads + k * len, len});
    std::vector<ddp::work> ws;
    ws.reserve(count);
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& span : spans)
      ws.push_back(pg.all_reduce_async(span));
    for (auto& w : ws)
      w.stream_wait(user);
    const double host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (auto& w : ws)
      w.wait();
    ws.front().stream_wait(user);
    EXPECT(cudaMemcpyAsync(all.data(), grads, all.size() * sizeof(float), cudaMemcpyDeviceToHost, user) ==
           cudaSuccess);
    EXPECT(cudaStreamSynchronize(user) == cudaSuccess);
    EXPECT(all.front() == static_cast<float>(R) && all[len] == static_cast<float>(R) &&
           all.back() == static_cast<float>(R));
    std::printf("rank %d: %zu device all_reduces of %zu floats queued and stream-ordered in %.2f ms of host "
                "time; events created: %zu one at a time (200), %zu in all\n",
                pg.rank(), count, len, host_ms, one_at_a_time, pg.communicator().events_created() - before);
    cudaFree(grads);
    cudaStreamDestroy(user);
  }
  // Host tensors past the staging buffer made at construction: it grows (the outgrown one is kept).
  for (std::size_t len : {std::size_t{300000}, std::size_t{400000}}) {
    std::vector<float> big(len, static_cast<float>(pg.rank() + 1));
    pg.all_reduce(big);
    EXPECT(big.front() == static_cast<float>(R * (R + 1) / 2) && big.back() == big.front());
  }
  // One DDP step over NCCL with host gradients.
  tiny_model model;
  ddp::distributed_data_parallel dp(model, pg);
  for (auto& g : model.dw)
    g = static_cast<float>(pg.rank() + 1);
  dp.synchronize();
  EXPECT(model.dw[0] == static_cast<float>(R + 1) / 2.0f);
  std::printf("rank %d/%d on GPU %d: %s\n", pg.rank(), R, pg.communicator().device(),
              failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
