// synchronize() cost for ResNet-50's parameter shapes and for 2000 small
// tensors, per bucketing policy, through the node's shared memory (sync_s, the
// default) and over TCP (tcp_s: today's path before shm), against one raw
// Gloo allreduce of a flat buffer of the same total size; plus how much communication a (sleeping)
// backward hides, what ddp_options::check_finite adds, and what buckets rebuilt in
// backward's order gain over the registration order. One JSON line per case from rank 0.
//   ddprun --nproc-per-node 2 --no-prefix build/bench/bench_grad_sync [overlap | order]
// With `overlap`, only that case (bench/grad_sync_netns.sh runs it over a slow link); with
// `order`, only the bucket-order case.
#include "common.hpp"
#include "raw_gloo.hpp"
#include "shapes.hpp"

#include <algorithm>
#include <thread>

namespace {

/// Where a model's gradients live: separate allocations (the common case), a
/// ddp::arena (buckets reduce in place), or an arena in the node's shared
/// memory (buckets reduce in place there: no copy through the segment).
enum class grads_in { vectors, arena, shared_arena };
constexpr const char* suffix(grads_in g) {
  return g == grads_in::vectors ? "" : g == grads_in::arena ? "+arena" : "+shared_arena";
}

/// A model made of float tensors of given sizes.
struct shape_model {
  std::vector<std::vector<float>> values, grads;
  std::unique_ptr<ddp::arena<float>> arena;
  std::vector<std::span<float>> grad_views;
  shape_model(const std::vector<std::size_t>& sizes, grads_in where, ddp::process_group<ddp::gloo>& pg) {
    const bool use_arena = where != grads_in::vectors;
    if (where == grads_in::arena) arena = std::make_unique<ddp::arena<float>>(sizes);
    if (where == grads_in::shared_arena) arena = std::make_unique<ddp::arena<float>>(sizes, pg);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      values.emplace_back(sizes[k], 0.01f);
      if (use_arena) {
        grad_views.push_back(arena->slot(k));
      } else {
        grads.emplace_back(sizes[k], 1.0f);
        grad_views.emplace_back(grads.back());
      }
    }
  }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t k = 0; k < values.size(); ++k)
      f(std::string(1, 'p') + std::to_string(k), values[k],
        grad_views[k]); // not "p" + ...: g++ 12 -Wrestrict
  }
};

template <class Policy>
double time_sync(ddp::process_group<ddp::gloo>& pg, const std::vector<std::size_t>& sizes, grads_in where,
                 int reps, bool shm = true, bool check_finite = false) {
  shape_model m(sizes, where, pg);
  pg.communicator().use_shm(shm);
  ddp::distributed_data_parallel<shape_model, ddp::gloo, Policy> dp(
      m, pg, {.broadcast_buffers = false, .check_finite = check_finite});
  dp.synchronize(); // warm up: buffers allocated, connections hot
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    pg.barrier();
    t.push_back(bench::time_once([&] { dp.synchronize(); }));
  }
  pg.communicator().use_shm(true);
  return bench::median(t);
}

double time_flat(ddp::process_group<ddp::gloo>& pg, bench::raw_gloo& raw, std::size_t total, int reps) {
  std::vector<float> flat(total, 1.0f);
  raw.all_reduce(flat);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    pg.barrier();
    t.push_back(bench::time_once([&] { raw.all_reduce(flat); }));
  }
  return bench::median(t);
}

template <class Policy>
void report(ddp::process_group<ddp::gloo>& pg, bench::raw_gloo& raw, const char* name, const char* policy,
            const std::vector<std::size_t>& sizes, grads_in where, int reps) {
  std::size_t total = 0;
  for (auto s : sizes)
    total += s;
  // Interleave the two measurements in rounds so both see the same machine.
  std::vector<double> sync, tcp, flat;
  for (int round = 0; round < 3; ++round) {
    sync.push_back(time_sync<Policy>(pg, sizes, where, reps));
    tcp.push_back(time_sync<Policy>(pg, sizes, where, reps, false));
    flat.push_back(time_flat(pg, raw, total, reps));
  }
  double s = bench::median(sync), t = bench::median(tcp), f = bench::median(flat);
  if (pg.rank() == 0)
    std::printf("{\"case\":\"%s\",\"policy\":\"%s%s\",\"tensors\":%zu,\"floats\":%zu,\"shm_active\":%s,"
                "\"sync_s\":%.6g,"
                "\"tcp_s\":%.6g,\"flat_s\":%.6g,\"tcp_over_shm\":%.3f,\"ratio\":%.4f}\n",
                name, policy, suffix(where), sizes.size(), total,
                pg.communicator().shm_active() ? "true" : "false", s, t, f, t / s, s / f);
  std::fflush(stdout);
}

/// What ddp_options::check_finite costs: synchronize() with and without it,
/// interleaved in rounds.
void report_check_finite(ddp::process_group<ddp::gloo>& pg, const char* name,
                         const std::vector<std::size_t>& sizes, int reps) {
  std::vector<double> plain, checked;
  for (int round = 0; round < 3; ++round) {
    plain.push_back(time_sync<ddp::bucketing::size_capped<>>(pg, sizes, grads_in::vectors, reps));
    checked.push_back(
        time_sync<ddp::bucketing::size_capped<>>(pg, sizes, grads_in::vectors, reps, true, true));
  }
  const double p = bench::median(plain), c = bench::median(checked);
  if (pg.rank() == 0)
    std::printf("{\"case\":\"%s\",\"check\":\"check_finite\",\"plain_s\":%.6g,\"checked_s\":%.6g,"
                "\"ratio\":%.4f}\n",
                name, p, c, c / p);
  std::fflush(stdout);
}

/// A backward that takes `per_layer` per group of parameters (sleeping: the two
/// cores stay free for communication) and marks each group's gradients as it
/// finishes them, last layer first.
void overlap(ddp::process_group<ddp::gloo>& pg, const std::vector<std::size_t>& sizes, int reps) {
  shape_model m(sizes, grads_in::vectors, pg);
  ddp::distributed_data_parallel dp(m, pg, {.broadcast_buffers = false});
  dp.synchronize();
  std::vector<double> comm;
  for (int i = 0; i < reps; ++i) {
    pg.barrier();
    comm.push_back(bench::time_once([&] { dp.synchronize(); }));
  }
  const double c = bench::median(comm);
  const int layers = 16;
  const auto per_layer =
      std::chrono::duration<double>(1.2 * c / layers); // backward a bit longer than communication
  std::vector<double> step, backward;
  for (int i = 0; i < reps; ++i) {
    pg.barrier();
    double b = 0;
    step.push_back(bench::time_once([&] {
      const std::size_t n = sizes.size();
      for (int l = layers; l-- > 0;) {
        b += bench::time_once([&] { std::this_thread::sleep_for(per_layer); });
        for (std::size_t k = n * static_cast<std::size_t>(l) / layers;
             k < n * static_cast<std::size_t>(l + 1) / layers; ++k)
          dp.mark_grad_ready(k); // layer l owns parameters [n*l/L, n*(l+1)/L)
      }
      dp.synchronize();
    }));
    backward.push_back(b);
  }
  const double t = bench::median(step), b = bench::median(backward);
  const double hidden = std::clamp((b + c - t) / c, 0.0, 1.0);
  if (pg.rank() == 0)
    std::printf(
        "{\"case\":\"overlap_resnet50\",\"policy\":\"size_capped\",\"backward_s\":%.6g,\"comm_s\":%.6g,"
        "\"step_s\":%.6g,\"hidden_fraction\":%.3f}\n",
        b, c, t, hidden);
  std::fflush(stdout);
}

/// A model registered in the order backward makes its gradients (ResNet-50's
/// shapes, listed output layer first), so that the registration-order buckets
/// are exactly backwards. Its (sleeping) backward marks layer by layer as in
/// overlap(). Two DDPs on two copies, one with pin_bucket_order, the other
/// rebuilt after its first step; their steps alternate. step_s: the whole
/// step; tail_s: from the last mark until synchronize() returns.
void bucket_order(ddp::process_group<ddp::gloo>& pg, std::vector<std::size_t> sizes, int reps) {
  std::reverse(sizes.begin(), sizes.end());
  shape_model pinned_model(sizes, grads_in::vectors, pg), rebuilt_model(sizes, grads_in::vectors, pg);
  ddp::distributed_data_parallel pinned(pinned_model, pg,
                                        {.broadcast_buffers = false, .pin_bucket_order = true});
  ddp::distributed_data_parallel rebuilt(rebuilt_model, pg, {.broadcast_buffers = false});
  std::vector<double> comm;
  pinned.synchronize();
  for (int i = 0; i < reps; ++i) {
    pg.barrier();
    comm.push_back(bench::time_once([&] { pinned.synchronize(); }));
  }
  const double c = bench::median(comm);
  const int layers = 16;
  const auto per_layer = std::chrono::duration<double>(1.2 * c / layers);
  const std::size_t n = sizes.size();
  auto step = [&](auto& dp, double& tail) {
    for (int l = 0; l < layers; ++l) { // parameter k first: registered as backward makes them
      std::this_thread::sleep_for(per_layer);
      for (std::size_t k = n * static_cast<std::size_t>(l) / layers;
           k < n * static_cast<std::size_t>(l + 1) / layers; ++k)
        dp.mark_grad_ready(k);
    }
    tail = bench::time_once([&] { dp.synchronize(); });
  };
  double ignored = 0;
  step(pinned, ignored);
  step(rebuilt, ignored); // its first step: the buckets are rebuilt after it
  step(rebuilt, ignored);
  std::vector<double> pinned_step, rebuilt_step, pinned_tail, rebuilt_tail;
  for (int i = 0; i < reps; ++i) {
    double tail = 0;
    pg.barrier();
    pinned_step.push_back(bench::time_once([&] { step(pinned, tail); }));
    pinned_tail.push_back(tail);
    pg.barrier();
    rebuilt_step.push_back(bench::time_once([&] { step(rebuilt, tail); }));
    rebuilt_tail.push_back(tail);
  }
  const double ps = bench::median(pinned_step), rs = bench::median(rebuilt_step),
               pt = bench::median(pinned_tail), rt = bench::median(rebuilt_tail);
  if (pg.rank() == 0)
    std::printf("{\"case\":\"bucket_order_resnet50\",\"policy\":\"size_capped\",\"buckets\":%zu,"
                "\"backward_s\":%.6g,\"comm_s\":%.6g,\"pinned_step_s\":%.6g,\"rebuilt_step_s\":%.6g,"
                "\"step_ratio\":%.3f,\"pinned_tail_s\":%.6g,\"rebuilt_tail_s\":%.6g,\"tail_ratio\":%.3f}\n",
                rebuilt.buckets().size(), per_layer.count() * layers, c, ps, rs, ps / rs, pt, rt, pt / rt);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  auto pg = ddp::init_process_group<ddp::gloo>();
  const auto resnet = bench::resnet50_sizes();
  if (argc > 1 && std::string(argv[1]) == "overlap") {
    overlap(pg, resnet, 7);
    pg.barrier();
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "order") {
    bucket_order(pg, resnet, 9);
    pg.barrier();
    return 0;
  }
  bench::raw_gloo raw(pg, "bench/grad_sync/raw/");
  const std::vector<std::size_t> small(2000, 256);
  using namespace ddp::bucketing;
  using enum grads_in;
  report<size_capped<>>(pg, raw, "resnet50", "size_capped", resnet, vectors, 5);
  report<size_capped<>>(pg, raw, "resnet50", "size_capped", resnet, arena, 5);
  report<size_capped<>>(pg, raw, "resnet50", "size_capped", resnet, shared_arena, 5);
  report<per_tensor>(pg, raw, "resnet50", "per_tensor", resnet, vectors, 5);
  report<single_buffer>(pg, raw, "resnet50", "single_buffer", resnet, vectors, 5);
  report<size_capped<>>(pg, raw, "many_small", "size_capped", small, vectors, 31);
  report<size_capped<>>(pg, raw, "many_small", "size_capped", small, arena, 31);
  report<size_capped<>>(pg, raw, "many_small", "size_capped", small, shared_arena, 31);
  report<per_tensor>(pg, raw, "many_small", "per_tensor", small, vectors, 11);
  report<single_buffer>(pg, raw, "many_small", "single_buffer", small, vectors, 31);
  report_check_finite(pg, "resnet50", resnet, 5);
  report_check_finite(pg, "many_small", small, 31);
  overlap(pg, resnet, 7);
  bucket_order(pg, resnet, 9);
  pg.barrier();
}
