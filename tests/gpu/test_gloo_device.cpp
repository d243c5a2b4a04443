// process_group<ddp::gloo>'s own collectives on device tensors (issue 10, item 3):
// staged through pinned host memory, blocking. Run at worlds 2 and 3, the ranks
// sharing the GPU. The oracle is the same collective on host vectors holding the
// same values, in the same process: both run the same Gloo code on the same
// bytes, so the device results must equal it bit for bit.
// Without a CUDA device every rank exits 77 (ctest: skipped) saying why.
#include <ddp/ddp.hpp>

#include "held_stream.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int failures = 0;
const char* current_case = "";
#define EXPECT(cond)                                                                                         \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      std::printf("FAILED: %s (%s line %d)\n", #cond, current_case, __LINE__);                               \
      ++failures;                                                                                            \
    }                                                                                                        \
  } while (0)

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("FAILED: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// A device copy of `host`, freed with the object.
template <class T> struct device_vector {
  ddp::device_span<T> span{};
  explicit device_vector(const std::vector<T>& host) {
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, std::max<std::size_t>(host.size(), 1) * sizeof(T)), "cudaMalloc");
    span = {static_cast<T*>(p), host.size()};
    if (!host.empty())
      cuda_ok(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  device_vector(const device_vector&) = delete;
  device_vector& operator=(const device_vector&) = delete;
  ~device_vector() { cudaFree(span.ptr); }
  std::vector<T> download() const {
    std::vector<T> h(span.count);
    if (!h.empty())
      cuda_ok(cudaMemcpy(h.data(), span.ptr, h.size() * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Rank-dependent values that make sums order-sensitive in float.
template <class T> std::vector<T> values(std::size_t n, int rank, int salt) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(std::sin(0.1 * static_cast<double>(i) + 1.7 * rank + salt) * 1000.0);
  return v;
}

template <class T>
void all_reduce_case(ddp::process_group<ddp::gloo>& pg, std::size_t n, ddp::op o, int salt) {
  auto host = values<T>(n, pg.rank(), salt);
  device_vector<T> dev(host);
  pg.all_reduce(host, o);
  pg.all_reduce(dev.span, o);
  EXPECT(same_bits(dev.download(), host));
}

void run(ddp::process_group<ddp::gloo>& pg) {
  const int R = pg.size(), me = pg.rank();
  const auto W = static_cast<std::size_t>(R);

  current_case = "all_reduce";
  // Over TCP (DDP_SHM=0: gpu.gloo_device.tcp_w2) 1 and 1023 elements travel with the
  // header, 3 x 65536 + 5 through Gloo's ring, 5 M floats (20 MB) around ddp's own ring;
  // with the node's shared memory (the default here) all of them go through its slots.
  for (std::size_t n : {std::size_t{1}, std::size_t{1023}, std::size_t{3 * 65536 + 5}, std::size_t{5u << 20}})
    all_reduce_case<float>(pg, n, ddp::op::sum, 1);
  all_reduce_case<float>(pg, 70001, ddp::op::avg, 2);
  all_reduce_case<double>(pg, 4097, ddp::op::max, 3);
  all_reduce_case<std::int32_t>(pg, 333, ddp::op::sum, 4);
  all_reduce_case<float>(pg, 0, ddp::op::sum, 5);

  current_case = "broadcast from every root";
  for (int root = 0; root < R; ++root) {
    auto host = values<double>(12345, me, 10 + root);
    device_vector<double> dev(host);
    pg.broadcast(host, root);
    pg.broadcast(dev.span, root);
    EXPECT(same_bits(dev.download(), host));
    EXPECT(same_bits(host, values<double>(12345, root, 10 + root)));
  }

  current_case = "all_gather (device in and out; host in, device out)";
  {
    auto in = values<float>(1001, me, 20);
    std::vector<float> expect(1001 * W);
    pg.all_gather(in, expect);
    device_vector<float> din(in), dout(std::vector<float>(1001 * W, -1.0f));
    pg.all_gather(din.span, dout.span);
    EXPECT(same_bits(dout.download(), expect));
    device_vector<float> dout2(std::vector<float>(1001 * W, -1.0f));
    pg.all_gather(in, dout2.span);
    EXPECT(same_bits(dout2.download(), expect));
    std::vector<float> hout(1001 * W, -1.0f); // device in, host out
    pg.all_gather(din.span, hout);
    EXPECT(same_bits(hout, expect));
  }

  current_case = "reduce_scatter";
  {
    auto in = values<float>(777 * W, me, 30);
    std::vector<float> expect(777);
    pg.reduce_scatter(in, expect);
    device_vector<float> din(in), dout(std::vector<float>(777, 0.0f));
    pg.reduce_scatter(din.span, dout.span);
    EXPECT(same_bits(dout.download(), expect));
  }

  current_case = "a refused collective leaves the device tensor as it was";
  {
    auto host = values<std::int32_t>(64, me, 40);
    device_vector<std::int32_t> dev(host);
    bool refused = false;
    try {
      pg.all_reduce(dev.span, ddp::op::avg); // avg needs floating point: a config error on every rank
    } catch (const ddp::error& e) { refused = e.kind() == ddp::error_kind::config; }
    EXPECT(refused);
    EXPECT(same_bits(dev.download(), host));
    all_reduce_case<float>(pg, 100, ddp::op::sum, 41); // the group lives on
  }

  current_case = "the staging copy follows the legacy default stream";
  {
    // The legacy stream sleeps 300 ms (a host function), then fills the tensor:
    // a staging copy that did not wait for that stream reads the zeros before.
    const std::size_t n = 1024;
    device_vector<float> dev(std::vector<float>(n, 0.0f));
    gpu_test::hold_back(cudaStreamLegacy, 300);
    gpu_test::fill(cudaStreamLegacy, dev.span.ptr, n * sizeof(float));
    pg.all_reduce(dev.span);
    EXPECT(
        same_bits(dev.download(), std::vector<float>(n, gpu_test::filled_value() * static_cast<float>(R))));
  }
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    std::puts("SKIP: no CUDA device (process_group<gloo> collectives on device tensors need one)");
    return 77;
  }
  try {
    // The group inside the try: an exception unwinds through its destructor, which then tells
    // the other ranks at once instead of holding them in a collective until their timeout.
    auto pg = ddp::init_process_group<ddp::gloo>();
    cuda_ok(cudaSetDevice(pg.topology().local_rank % devices), "cudaSetDevice");
    run(pg);
    std::printf("rank %d/%d gloo device collectives: %s\n", pg.rank(), pg.size(), failures ? "FAILED" : "ok");
  } catch (const std::exception& e) {
    std::printf("FAILED: %s: %s\n", current_case, e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
