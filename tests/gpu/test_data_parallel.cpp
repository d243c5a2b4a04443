// distributed_data_parallel with gradients in CUDA device memory (issue 10):
// R ranks equal one process on the whole batch, for every bucketing policy and
// reduction, mark_unused, no_sync, join, buffers, moved storage, a compute
// stream and ddp::device_arena. `gpu_data_parallel gloo` runs at any world size
// (ranks share the GPU: pinned staging); `gpu_data_parallel nccl` at world 1
// (NCCL refuses two ranks on one GPU). A plain .cpp compiled by g++: the
// kernels come from ddp's embedded fatbin.
//
// The "model": parameter k of n_k elements; rank r's gradient at step t is the
// mean over its shard of per-example gradients g(example, k, i), computed here
// and uploaded to the device (the engine, not this file, is under test). The
// oracle is the same mean over the whole global batch, computed in this process.
// Without a CUDA device every rank exits 77 (ctest: skipped) saying why.
#include <ddp/backend/nccl.hpp>
#include <ddp/ddp.hpp>
#include <ddp/detail/cuda/kernels.hpp>
#include <ddp/device_arena.hpp>

#include "held_stream.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

int failures = 0;
#define EXPECT(cond)                                                                                         \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      std::printf("FAILED: %s (%s line %d)\n", #cond, current_case, __LINE__);                               \
      ++failures;                                                                                            \
    }                                                                                                        \
  } while (0)
const char* current_case = "";

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("FAILED: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

const std::vector<std::size_t> sizes{7, 300, 1, 4096, 33, 70000};
constexpr int per_rank_batch = 3;

/// Per-example gradient: deterministic, different per example, parameter, element and step.
double example_grad(int example, std::size_t k, std::size_t i, int step) {
  return std::sin(0.37 * example + 1.3 * static_cast<double>(k) + 0.011 * static_cast<double>(i) +
                  0.7 * step);
}

/// The mean over examples [first, first + count).
template <class S> std::vector<S> shard_grad(std::size_t k, int first, int count, int step) {
  std::vector<S> g(sizes[k]);
  for (std::size_t i = 0; i < g.size(); ++i) {
    double s = 0;
    for (int e = first; e < first + count; ++e)
      s += example_grad(e, k, i, step);
    g[i] = static_cast<S>(s / count);
  }
  return g;
}

/// Parameters, gradients and one buffer, all in device memory; gradients in a
/// device_arena (contiguous, reverse registration order) or one cudaMalloc each.
template <class S> struct gpu_model {
  std::vector<ddp::device_span<S>> w, dw;
  ddp::device_span<S> running{};
  std::vector<S*> owned;
  std::unique_ptr<ddp::device_arena<S>> arena;

  gpu_model(bool use_arena, S init) {
    if (use_arena) arena = std::make_unique<ddp::device_arena<S>>(sizes);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      w.push_back(alloc(sizes[k], init + static_cast<S>(k)));
      dw.push_back(use_arena ? arena->slot(k) : alloc(sizes[k], 0));
    }
    running = alloc(5, init);
  }
  gpu_model(const gpu_model&) = delete;
  ~gpu_model() {
    for (auto* p : owned)
      cudaFree(p);
  }
  ddp::device_span<S> alloc(std::size_t n, S value) {
    S* p = nullptr;
    cuda_ok(cudaMalloc(&p, n * sizeof(S)), "cudaMalloc");
    owned.push_back(p);
    std::vector<S> h(n, value);
    cuda_ok(cudaMemcpy(p, h.data(), n * sizeof(S), cudaMemcpyHostToDevice), "cudaMemcpy");
    return {p, n};
  }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t k = 0; k < w.size(); ++k) {
      // Not "p" + std::to_string(k): g++ 12 at -O3 (scripts/dev/gpu-pack's Release build) reports a
      // false -Wrestrict inside that operator+ (GCC bug 105329).
      std::string name = "p";
      name += std::to_string(k);
      f(name, w[k], dw[k]);
    }
  }
  template <class F> void for_each_buffer(F&& f) { f("running", running); }
};

template <class S> std::vector<S> download(ddp::device_span<S> d) {
  std::vector<S> h(d.count);
  cuda_ok(cudaMemcpy(h.data(), d.ptr, d.count * sizeof(S), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  return h;
}
template <class S> void upload(ddp::device_span<S> d, const std::vector<S>& h, cudaStream_t s = nullptr) {
  cuda_ok(cudaMemcpyAsync(d.ptr, h.data(), h.size() * sizeof(S), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync");
  cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize"); // h is pageable and short-lived
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

/// A user-written policy: two parameters per bucket, reverse order.
struct pairs {
  static std::vector<std::vector<std::size_t>> assign(std::span<const ddp::parameter_desc> p) {
    std::vector<std::vector<std::size_t>> out;
    for (std::size_t k = p.size(); k-- > 0;) {
      if (out.empty() || out.back().size() == 2) out.emplace_back();
      out.back().push_back(k);
    }
    return out;
  }
};
/// Several buckets, one of several parameters: float gives [5] [4 3 2 1 0], double [5] [4] [3]
/// [2 1 0] (checked on the CPU with size_capped::assign). Separately allocated gradients take the
/// packed path for the multi-parameter bucket, an arena reduces every bucket in place.
/// (<1024, 512> gave one parameter per bucket: every case was in place, nothing was packed.)
using small_buckets = ddp::bucketing::size_capped<32768, 4096>;

struct run_options {
  bool use_arena = false;
  bool mark = true;          ///< mark every gradient ready (else only synchronize())
  int micro_batches = 1;     ///< > 1: accumulate through no_sync
  bool use_stream = false;   ///< a compute stream, stream-ordered synchronize()
  bool move_storage = false; ///< a gradient moves to new device memory after step 1
  std::vector<ddp::bucket_info>* layout = nullptr;
};

/// Trains `steps` SGD steps on R ranks and in this process on the whole batch;
/// returns the relative difference of the parameters (every rank's own).
template <class Backend, class S, class Bucketing, class Reduction = ddp::reduction::mean>
double train_and_compare(ddp::process_group<Backend>& pg, run_options o) {
  const int R = pg.size(), rank = pg.rank(), steps = 3;
  cudaStream_t stream = nullptr;
  if (o.use_stream) cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  // Ranks start from different weights: construction must broadcast rank 0's.
  gpu_model<S> m(o.use_arena, static_cast<S>(rank == 0 ? 1 : 50 + rank));
  ddp::ddp_options opts;
  opts.compute_stream = stream;
  ddp::distributed_data_parallel<gpu_model<S>, Backend, Bucketing, Reduction> dp(m, pg, opts);
  if (o.layout) *o.layout = dp.buckets();
  const double lr = 0.1, mult = Reduction::average ? 1.0 : R;
  std::vector<std::vector<double>> ref(sizes.size());
  for (std::size_t k = 0; k < sizes.size(); ++k)
    ref[k].assign(sizes[k], 1.0 + static_cast<double>(k));
  std::vector<std::vector<S>> mine(sizes.size());
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    auto h = download(m.w[k]);
    mine[k].assign(h.begin(), h.end());
  }
  const int shard = per_rank_batch * o.micro_batches;
  for (int step = 0; step < steps; ++step) {
    if (o.move_storage && step == 1) m.dw[3] = m.alloc(sizes[3], 0); // dp must follow it
    // The oracle: the whole global batch in one process.
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      auto g = shard_grad<double>(k, 0, R * shard, step);
      for (std::size_t i = 0; i < g.size(); ++i)
        ref[k][i] -= lr * mult * g[i];
    }
    // This rank: its shard, in micro-batches; gradients accumulate on the device.
    std::vector<std::vector<S>> acc(sizes.size());
    auto backward = [&](int mb) {
      for (std::size_t k = sizes.size(); k-- > 0;) { // backward: last layer first
        auto g = shard_grad<S>(k, rank * shard + mb * per_rank_batch, per_rank_batch, step);
        if (acc[k].empty()) acc[k].assign(g.size(), S(0));
        for (std::size_t i = 0; i < g.size(); ++i)
          acc[k][i] += g[i] / static_cast<S>(o.micro_batches);
        upload(m.dw[k], acc[k], stream);
        if (o.mark && mb + 1 == o.micro_batches) dp.mark_grad_ready(m.dw[k]);
      }
    };
    for (int mb = 0; mb + 1 < o.micro_batches; ++mb) {
      auto guard = dp.no_sync();
      backward(mb);
      dp.synchronize(); // inside no_sync: ends the step, communicates nothing
      if (o.use_stream) cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (compute stream)");
      // Still this rank's own accumulation (ranks' shards differ): a reduction here would show.
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        auto g = download(m.dw[k]);
        EXPECT(g.front() == acc[k].front() && g.back() == acc[k].back());
      }
    }
    backward(o.micro_batches - 1);
    dp.synchronize();
    if (o.use_stream) cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (compute stream)");
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      auto g = download(m.dw[k]);
      for (std::size_t i = 0; i < g.size(); ++i)
        mine[k][i] = static_cast<S>(mine[k][i] - static_cast<S>(lr) * g[i]);
      upload(m.w[k], mine[k]);
    }
  }
  std::vector<double> a, b;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    auto w = download(m.w[k]);
    a.insert(a.end(), w.begin(), w.end());
    b.insert(b.end(), ref[k].begin(), ref[k].end());
  }
  if (stream) cudaStreamDestroy(stream);
  return rel_diff(a, b);
}

/// ddp's copy kernel on one packed bucket of one 1 M-element tensor among 2000
/// small ones (empty ones too): packing with a conversion and a scale, then
/// unpacking back, equal bit for bit to the same arithmetic on the host.
void copy_kernel_mixed_sizes() {
  current_case = "copy kernel: one large tensor among many small ones in one packed bucket";
  namespace dc = ddp::detail::cuda;
  std::vector<std::size_t> counts;
  for (std::size_t k = 0; k < 2001; ++k)
    counts.push_back(k == 700 ? (std::size_t{1} << 20) : k % 97 == 0 ? 0 : 1 + (k * 37) % 300);
  std::size_t total = 0;
  for (auto n : counts)
    total += n;
  std::vector<float> src(total);
  for (std::size_t i = 0; i < total; ++i)
    src[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) * 1000.0);
  float* tensors = nullptr; // the tensors end to end, each in its own place
  float* back = nullptr;
  double* packed = nullptr;
  cuda_ok(cudaMalloc(&tensors, total * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(&back, total * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(&packed, total * sizeof(double)), "cudaMalloc");
  cuda_ok(cudaMemcpy(tensors, src.data(), total * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  // The bucket holds the tensors in reverse order (as buckets do), so entries are not one run.
  std::vector<dc::copy_entry> pack, unpack;
  std::vector<std::size_t> at(counts.size());
  for (std::size_t k = 0, o = 0; k < counts.size(); o += counts[k], ++k)
    at[k] = o;
  std::size_t slot = 0;
  std::vector<std::size_t> slot_of(counts.size());
  for (std::size_t k = counts.size(); k-- > 0;) {
    slot_of[k] = slot;
    pack.push_back({tensors + at[k], packed + slot, counts[k]});
    unpack.push_back({packed + slot, back + at[k], counts[k]});
    slot += counts[k];
  }
  const auto p = dc::make_copy_table(std::move(pack)), u = dc::make_copy_table(std::move(unpack));
  EXPECT(p.total == total && u.total == total);
  // In place, float to float: float arithmetic, as neither side is double.
  std::vector<dc::copy_entry> in_place;
  for (std::size_t k = 0; k < counts.size(); ++k)
    in_place.push_back({back + at[k], back + at[k], counts[k]});
  const auto s = dc::make_copy_table(std::move(in_place));
  const double scale = 1.0 / 3.0;
  {
    // Uploaded and run on the legacy stream, in order.
    const dc::device_copy_table pt(p, nullptr, 0), ut(u, nullptr, 0), st(s, nullptr, 0);
    dc::launch_convert_copy(pt, ddp::dtype::f32, ddp::dtype::f64, scale, nullptr, 0);
    dc::launch_convert_copy(ut, ddp::dtype::f64, ddp::dtype::f32, 3.0, nullptr, 0);
    dc::launch_convert_copy(st, ddp::dtype::f32, ddp::dtype::f32, 0.1, nullptr, 0);
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (copy kernel)");
  }
  std::vector<double> got_packed(total);
  std::vector<float> got_back(total);
  cuda_ok(cudaMemcpy(got_packed.data(), packed, total * sizeof(double), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  cuda_ok(cudaMemcpy(got_back.data(), back, total * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::size_t wrong_packed = 0, wrong_back = 0;
  for (std::size_t k = 0; k < counts.size(); ++k)
    for (std::size_t i = 0; i < counts[k]; ++i) {
      const double want = static_cast<double>(src[at[k] + i]) * scale; // a side is double: double arithmetic
      wrong_packed += std::memcmp(&got_packed[slot_of[k] + i], &want, sizeof want) != 0;
      const float unpacked = static_cast<float>(want * 3.0);
      const float want_back = unpacked * static_cast<float>(0.1);
      wrong_back += std::memcmp(&got_back[at[k] + i], &want_back, sizeof want_back) != 0;
    }
  EXPECT(wrong_packed == 0);
  EXPECT(wrong_back == 0);
  if (wrong_packed || wrong_back)
    std::printf("  %zu packed and %zu unpacked elements of %zu differ\n", wrong_packed, wrong_back, total);
  cudaFree(packed);
  cudaFree(back);
  cudaFree(tensors);
}

/// One gradient on the host, one on the device: refused.
struct mixed {
  std::vector<float> hw{1}, hdw{0};
  ddp::device_span<float> w{}, dw{};
  template <class F> void for_each_parameter(F&& f) {
    f("host", hw, hdw);
    f("device", w, dw);
  }
};

template <class Backend> void suite(ddp::process_group<Backend>& pg) {
  const int R = pg.size(), rank = pg.rank();
  copy_kernel_mixed_sizes();
  current_case = "every bucketing policy, float";
  EXPECT((train_and_compare<Backend, float, ddp::bucketing::size_capped<>>(pg, {}) < 1e-5));
  EXPECT((train_and_compare<Backend, float, small_buckets>(pg, {}) < 1e-5));
  EXPECT((train_and_compare<Backend, float, ddp::bucketing::per_tensor>(pg, {}) < 1e-5));
  EXPECT((train_and_compare<Backend, float, ddp::bucketing::single_buffer>(pg, {}) < 1e-5));
  EXPECT((train_and_compare<Backend, float, pairs>(pg, {.mark = false}) < 1e-5));
  current_case = "double";
  EXPECT((train_and_compare<Backend, double, small_buckets>(pg, {}) < 1e-12));
  current_case = "sum";
  EXPECT((train_and_compare<Backend, double, small_buckets, ddp::reduction::sum>(pg, {}) < 1e-12));
  current_case = "fp16 and bf16 compressed means";
  EXPECT((train_and_compare<Backend, float, small_buckets, ddp::reduction::fp16_compressed_mean>(pg, {}) <
          2e-3));
  EXPECT((train_and_compare<Backend, float, small_buckets, ddp::reduction::bf16_compressed_mean>(pg, {}) <
          2e-2));
  current_case = "device_arena: buckets in place";
  std::vector<ddp::bucket_info> layout;
  EXPECT(
      (train_and_compare<Backend, float, small_buckets>(pg, {.use_arena = true, .layout = &layout}) < 1e-5));
  EXPECT(layout.size() > 1);
  for (auto& b : layout)
    EXPECT(b.path == ddp::bucket_path::in_place);
  EXPECT((train_and_compare<Backend, float, small_buckets>(pg, {.layout = &layout}) < 1e-5));
  for (auto& b : layout)
    EXPECT((b.path == ddp::bucket_path::in_place) == (b.parameters.size() == 1));
  EXPECT(std::any_of(layout.begin(), layout.end(), [](auto& b) { return b.parameters.size() > 1; }));
  current_case = "no_sync accumulation";
  EXPECT((train_and_compare<Backend, float, small_buckets>(pg, {.micro_batches = 3}) < 1e-5));
  current_case = "compute stream, stream-ordered synchronize()";
  EXPECT((train_and_compare<Backend, float, small_buckets>(pg, {.use_stream = true}) < 1e-5));
  EXPECT((train_and_compare<Backend, float, ddp::bucketing::single_buffer>(
              pg, {.use_arena = true, .use_stream = true}) < 1e-5));
  current_case = "compute stream: synchronize() follows it on the device (NCCL: without blocking the host)";
  {
    // The compute stream sleeps 1 s in a host function, then writes the gradients and the
    // buffer (from pinned memory: truly queued). synchronize() launches every bucket behind that;
    // over NCCL it returns before the sleep ends, over Gloo (host collectives) after it. The
    // gradients go as fp16 (compressed mean) and are written as 1 + rank + 2^-12, which fp16
    // cannot hold: once the compute stream drained, a gradient that went through the reduction
    // is near the mean and not what this rank wrote; one whose unpacking ran before the write
    // (a reduction that did not follow the stream) is exactly what it wrote, even at world 1,
    // where the mean of one rank changes nothing else.
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    gpu_model<float> m(false, 1.0f);
    ddp::ddp_options opts;
    opts.compute_stream = stream;
    ddp::distributed_data_parallel<gpu_model<float>, Backend, small_buckets,
                                   ddp::reduction::fp16_compressed_mean>
        dp(m, pg, opts);
    const float written = static_cast<float>(rank + 1) + 1.0f / 4096.0f;
    std::size_t total = 5;
    for (auto n : sizes)
      total += n;
    float* pinned = nullptr; // the gradients' values, then the buffer's
    cuda_ok(cudaMallocHost(&pinned, total * sizeof(float)), "cudaMallocHost");
    for (std::size_t i = 0; i < total; ++i)
      pinned[i] = i + 5 < total ? written : static_cast<float>(10 + rank);
    std::atomic<bool> slept{false};
    gpu_test::hold_back(stream, 1000, &slept);
    std::size_t at = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      cuda_ok(
          cudaMemcpyAsync(m.dw[k].ptr, pinned + at, sizes[k] * sizeof(float), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (gradient)");
      at += sizes[k];
    }
    cuda_ok(cudaMemcpyAsync(m.running.ptr, pinned + at, 5 * sizeof(float), cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (buffer)");
    dp.synchronize();
    if constexpr (std::is_same_v<Backend, ddp::nccl>) EXPECT(!slept.load());
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (compute stream)");
    EXPECT(slept.load());
    const float mean = static_cast<float>(R + 1) / 2.0f;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      auto g = download(m.dw[k]);
      for (float v : {g.front(), g.back()})
        EXPECT(std::abs(v - mean) < 2e-3f && v != written);
    }
    EXPECT(download(m.running)[4] == 10.0f); // rank 0's, written after the sleep
    cudaFreeHost(pinned);
    cudaStreamDestroy(stream);
  }

  current_case = "moved gradient storage is followed";
  EXPECT((train_and_compare<Backend, float, small_buckets>(pg, {.move_storage = true}) < 1e-5));

  current_case = "buffers: rank 0's after construction and after synchronize()";
  {
    gpu_model<float> m(false, static_cast<float>(rank + 1));
    ddp::distributed_data_parallel<gpu_model<float>, Backend> dp(m, pg);
    EXPECT(download(m.running)[4] == 1.0f);
    upload(m.running, std::vector<float>(5, static_cast<float>(10 + rank)));
    dp.synchronize();
    EXPECT(download(m.running)[0] == 10.0f);
  }

  current_case = "mark_unused: zeros contributed, the average still received";
  {
    gpu_model<double> m(false, 0.0);
    ddp::distributed_data_parallel<gpu_model<double>, Backend, small_buckets> dp(m, pg);
    for (std::size_t k = 0; k < sizes.size(); ++k)
      upload(m.dw[k], std::vector<double>(sizes[k], rank + 1.0));
    // Odd ranks, and the only rank at world 1 (NCCL): the zeroing must run on every backend.
    auto unused_on = [&](int r) { return r % 2 == 1 || R == 1; };
    if (unused_on(rank)) dp.mark_unused(m.dw[1]); // this rank's garbage must not count
    dp.synchronize();
    double used = 0;
    for (int r = 0; r < R; ++r)
      used += unused_on(r) ? 0.0 : r + 1.0;
    EXPECT(std::abs(download(m.dw[1])[299] - used / R) < 1e-12);
    EXPECT(std::abs(download(m.dw[0])[0] - (R + 1) / 2.0) < 1e-12);
  }

  // In place (device_arena), a joined rank's zeros go where its gradients are (NCCL: nothing is
  // allocated inside join's step).
  for (bool arena : {false, true}) {
    current_case = arena ? "join: uneven inputs, buckets in place" : "join: uneven inputs";
    auto my_steps = [](int r) { return 1 + r; };
    gpu_model<double> m(arena, 0.0);
    ddp::distributed_data_parallel<gpu_model<double>, Backend, small_buckets> dp(m, pg,
                                                                                 {.uneven_inputs = true});
    std::vector<double> got;
    for (int step = 0; step < my_steps(rank); ++step) {
      for (std::size_t k = 0; k < sizes.size(); ++k)
        upload(m.dw[k], std::vector<double>(sizes[k], rank + 1.0));
      dp.synchronize();
      got.push_back(download(m.dw[5])[69999]);
    }
    dp.join();
    for (int step = 0; step < my_steps(rank); ++step) {
      double s = 0; // ranks still training at this step contribute rank+1, joined ones zeros
      for (int r = 0; r < R; ++r)
        if (step < my_steps(r)) s += r + 1.0;
      EXPECT(std::abs(got[static_cast<std::size_t>(step)] - s / R) < 1e-12);
    }
  }

  current_case = "mixed host and device gradients are refused, naming the parameter";
  {
    mixed m;
    float* p = nullptr;
    cuda_ok(cudaMalloc(&p, 2 * sizeof(float)), "cudaMalloc");
    m.w = {p, 1};
    m.dw = {p + 1, 1};
    bool refused = false;
    try {
      ddp::distributed_data_parallel<mixed, Backend> dp(m, pg);
    } catch (const ddp::error& e) { refused = std::string(e.what()).find("'device'") != std::string::npos; }
    EXPECT(refused);
    cudaFree(p);
  }
}

/// `gpu_data_parallel gloo_own_failure` at world 2 with DDP_TIMEOUT=2s: rank 1's
/// own part of a step fails before its collective. Its compute stream is held
/// 3 s, so copying bucket 0 to pinned memory times out at 2 s; rank 0 entered
/// the collective 1 s in. DDP fails the group at once (process_group::abort):
/// rank 0 must fail about 1 s after entering, naming rank 1 and why, not at
/// its own deadline (2 s after entering).
void own_failure(ddp::process_group<ddp::gloo>& pg) {
  current_case = "a staging copy that fails before its collective fails the group at once";
  using clk = std::chrono::steady_clock;
  const int rank = pg.rank();
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    gpu_model<float> m(false, 1.0f);
    ddp::ddp_options opts;
    opts.compute_stream = stream;
    ddp::distributed_data_parallel<gpu_model<float>, ddp::gloo> dp(m, pg, opts);
    if (rank == 1) gpu_test::hold_back(stream, 3000);
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const auto t0 = clk::now();
    bool failed = false;
    try {
      dp.synchronize();
    } catch (const ddp::error& e) {
      failed = true;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0).count();
      const std::string what = e.what();
      std::printf("rank %d: after %lld ms: %s\n", rank, static_cast<long long>(ms), e.what());
      EXPECT(e.rank() == 1);
      EXPECT(what.find("pinned memory") != std::string::npos); // what failed, on both ranks
      if (rank == 0) {
        EXPECT(what.find("launching bucket") != std::string::npos); // rank 1's reason, from the store
        EXPECT(ms < 1800);                                          // its own deadline would be 2000 ms
      } else {
        EXPECT(e.kind() == ddp::error_kind::timeout);
      }
    }
    EXPECT(failed);
    bool refused = false; // the group has failed on both ranks: the next collective is refused at once
    std::vector<float> one(1, 1.0f);
    try {
      pg.all_reduce(one);
    } catch (const ddp::error&) { refused = true; }
    EXPECT(refused);
  }
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (the held stream)");
  cudaStreamDestroy(stream);
}

} // namespace

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "gloo";
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (cudaGetDeviceCount: %s): device-gradient DDP needs a GPU\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  if (backend == "nccl") {
    auto pg = ddp::init_process_group<ddp::nccl>();
    suite(pg);
    std::printf("rank %d/%d nccl: %s\n", pg.rank(), pg.size(), failures ? "FAILED" : "ok");
  } else if (backend == "gloo_own_failure") {
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    auto pg = ddp::init_process_group<ddp::gloo>();
    own_failure(pg);
    std::printf("rank %d/%d gloo_own_failure: %s\n", pg.rank(), pg.size(), failures ? "FAILED" : "ok");
  } else {
    cuda_ok(cudaSetDevice(0), "cudaSetDevice"); // every rank shares GPU 0
    auto pg = ddp::init_process_group<ddp::gloo>();
    suite(pg);
    std::printf("rank %d/%d gloo: %s\n", pg.rank(), pg.size(), failures ? "FAILED" : "ok");
  }
  return failures ? 1 : 0;
}
