// Fashion-MNIST on the GPU: the CPU example's MLP with parameters, activations,
// gradients and momentum in device memory (cuBLAS GEMMs, kernels.cu for the rest),
// trained data-parallel with ddp. Plain C++: only kernels.cu goes through nvcc.
//
//   ddprun --nproc-per-node 1 build/examples/fashion_mnist_cuda/fashion_mnist_cuda --backend nccl
//   ddprun --nproc-per-node 2 build/examples/fashion_mnist_cuda/fashion_mnist_cuda --backend gloo
//
// Same options, JSON lines and checkpoints as the CPU example (a checkpoint of one
// resumes in the other), plus --backend, --bucketing and --grad-sync.
// Without a CUDA device it says so and exits 77 (ctest: skipped).
#include "../fashion_mnist/checkpoint.hpp"
#include "../fashion_mnist/cli.hpp"
#include "../fashion_mnist/json_number.hpp"
#include "../fashion_mnist/progress.hpp"
#include "mlp.hpp"

#include <ddp/backend/nccl.hpp>
#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <optional>

namespace {

using example::gpu::check;

struct gpu_options {
  std::string backend = "nccl";
  std::string bucketing = "size_capped";
  std::string grad_sync = "ddp";
};

/// The evaluation's batch: test samples scored per forward.
constexpr int eval_chunk = 1000;

/// A data set in device memory: images (count x 784, row-major) and labels.
struct device_set {
  example::gpu::buffer<float> images;
  example::gpu::buffer<std::uint8_t> labels;
  std::size_t count = 0, dim = 0;
  device_set(const ddp::data::labeled_images& d, cudaStream_t s)
      : images(static_cast<std::size_t>(d.images.size())), labels(d.labels.size()), count(d.size()),
        dim(static_cast<std::size_t>(d.images.cols())) {
    check(cudaMemcpyAsync(images.data(), d.images.data(), images.size() * sizeof(float),
                          cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync (images to device)");
    check(cudaMemcpyAsync(labels.data(), d.labels.data(), labels.size(), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync (labels to device)");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize (data upload)");
  }
};

/// Pinned host memory for the batch's sample indices, and their device copy.
struct index_staging {
  std::int64_t* host = nullptr;
  example::gpu::buffer<std::int64_t> device;
  explicit index_staging(std::size_t n) : device(n) {
    void* p = nullptr;
    check(cudaMallocHost(&p, n * sizeof(std::int64_t)), "cudaMallocHost (batch indices)");
    host = static_cast<std::int64_t*>(p);
  }
  index_staging(const index_staging&) = delete;
  index_staging& operator=(const index_staging&) = delete;
  ~index_staging() { cudaFreeHost(host); }
  /// Enqueues the copy of idx to the device; the caller's stream must finish it
  /// before the next call reuses the host buffer (every step ends with a sync).
  const std::int64_t* put(std::span<const std::int64_t> idx, cudaStream_t s) {
    std::copy(idx.begin(), idx.end(), host);
    check(cudaMemcpyAsync(device.data(), host, idx.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync (batch indices)");
    return device.data();
  }
};

void load_batch(example::gpu_mlp& m, const device_set& d, index_staging& staging,
                std::span<const std::int64_t> idx, cudaStream_t s) {
  const auto* dev_idx = staging.put(idx, s);
  check(example::kernels::gather_batch(d.images.data(), d.labels.data(), dev_idx,
                                       static_cast<int>(idx.size()), static_cast<int>(d.dim), m.input(),
                                       m.labels(), s),
        "gather_batch");
}

/// Test accuracy: each rank scores every size()-th test sample, then one all-reduce.
template <class PG>
double evaluate(PG& pg, example::gpu_mlp& m, const device_set& test, index_staging& staging,
                const example::gpu::context& ctx) {
  std::vector<std::int64_t> idx;
  for (auto i = static_cast<std::size_t>(pg.rank()); i < test.count; i += static_cast<std::size_t>(pg.size()))
    idx.push_back(static_cast<std::int64_t>(i));
  example::gpu::buffer<unsigned long long> correct(1);
  check(cudaMemsetAsync(correct.data(), 0, sizeof(unsigned long long), ctx.stream()), "cudaMemsetAsync");
  for (std::size_t start = 0; start < idx.size(); start += eval_chunk) {
    std::span<const std::int64_t> part(idx.data() + start,
                                       std::min<std::size_t>(eval_chunk, idx.size() - start));
    load_batch(m, test, staging, part, ctx.stream());
    const float* logits = m.forward(static_cast<int>(part.size()));
    check(example::kernels::count_correct(logits, m.labels(), example::gpu_mlp::classes,
                                          static_cast<int>(part.size()), correct.data(), ctx.stream()),
          "count_correct");
    ctx.sync(); // the staging buffer is reused by the next chunk
  }
  unsigned long long hits = 0;
  check(cudaMemcpy(&hits, correct.data(), sizeof hits, cudaMemcpyDeviceToHost),
        "cudaMemcpy (accuracy count)");
  std::vector<double> counts{static_cast<double>(hits), static_cast<double>(idx.size())};
  pg.all_reduce(counts);
  return counts[0] / counts[1];
}

/// The checkpoint's tensors, in the CPU example's names and order, over host mirrors.
std::vector<example::named_tensor> state_of(const example::gpu_mlp& m, std::vector<float>& params,
                                            std::vector<float>& velocity) {
  std::vector<example::named_tensor> t;
  for (std::size_t k = 0; k < 2 * example::gpu_mlp::layers; ++k)
    t.push_back({example::gpu_mlp::name(k), {params.data() + m.offset(k), m.count(k)}});
  for (std::size_t k = 0; k < 2 * example::gpu_mlp::layers; ++k)
    t.push_back({example::gpu_mlp::name(k) + ".momentum", {velocity.data() + m.offset(k), m.count(k)}});
  return t;
}

template <class Backend, class Bucketing> int train(const example::options& o, const gpu_options& g) {
  // Data first: a missing file fails on every rank before anyone waits for a peer.
  auto train_set =
      ddp::data::read_idx(o.data + "/train-images-idx3-ubyte.gz", o.data + "/train-labels-idx1-ubyte.gz",
                          example::gpu_mlp::classes, example::data_hint);
  auto test_set =
      ddp::data::read_idx(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz",
                          example::gpu_mlp::classes, example::data_hint);
  const std::size_t n = o.limit ? static_cast<std::size_t>(std::min<std::uint64_t>(o.limit, train_set.size()))
                                : train_set.size();

  auto pg = ddp::init_process_group<Backend>();
  const bool lead = pg.rank() == 0;
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if constexpr (ddp::accepts_device_tensors_v<Backend>) // NCCL chose this rank's GPU (LOCAL_RANK)
    check(cudaSetDevice(pg.communicator().device()), "cudaSetDevice");
  else // Gloo: ranks share the visible GPUs round robin (several ranks on one GPU is fine)
    check(cudaSetDevice(pg.topology().local_rank % devices), "cudaSetDevice");

  std::ofstream csv, steps;
  example::on_rank0(pg, "cannot write its output files", [&] {
    if (!o.checkpoint.empty()) example::check_writable(o.checkpoint);
    if (!o.metrics_csv.empty()) {
      example::open_or_throw(csv, o.metrics_csv, o.resume ? std::ios::app : std::ios::trunc, "--metrics-csv");
      if (!o.resume) csv << "epoch,train_loss,test_acc,epoch_s\n";
    }
    if (!o.step_log.empty()) example::open_or_throw(steps, o.step_log, std::ios::trunc, "--step-log");
  });

  example::gpu::context ctx;
  device_set train_dev(train_set, ctx.stream()), test_dev(test_set, ctx.stream());
  const int max_batch = std::max(o.batch_size, eval_chunk);
  example::gpu_mlp model(ctx, o.seed, max_batch);
  index_staging staging(static_cast<std::size_t>(max_batch));

  // --grad-sync ddp: distributed_data_parallel over the device gradients (it also copies
  // rank 0's parameters everywhere), ordered on the compute stream: marking a layer
  // records an event there, DDP's stream waits for it on the device, and synchronize()
  // makes the compute stream wait for the reduced gradients (the host never waits for
  // backward). --grad-sync all_reduce: one process_group all-reduce per gradient as
  // backward produces it (every rank starts from the same seed, so from the same
  // weights): asynchronous on NCCL (the compute stream waits for each on the device:
  // work::stream_wait), blocking and staged through pinned memory on Gloo.
  using dp_type = ddp::distributed_data_parallel<example::gpu_mlp, Backend, Bucketing>;
  std::optional<dp_type> dp;
  if (g.grad_sync == "ddp") dp.emplace(model, pg, ddp::ddp_options{.compute_stream = ctx.stream()});

  std::vector<float> host_params, host_velocity;
  std::uint64_t first_epoch = 0;
  if (example::resumes(pg, o)) {
    model.download(host_params, host_velocity);
    auto state = state_of(model, host_params, host_velocity);
    std::vector<std::int64_t> epoch{0};
    example::on_rank0(pg, "could not load the checkpoint", [&] {
      const auto at = example::load_checkpoint(o.checkpoint, state, static_cast<std::uint64_t>(o.epochs));
      if (at.batch != 0)
        throw ddp::error(ddp::error_kind::config,
                         "checkpoint " + o.checkpoint +
                             " was saved mid-epoch (by the CPU example's "
                             "--checkpoint-every); the CUDA example resumes at an epoch's end only");
      epoch[0] = static_cast<std::int64_t>(at.epoch);
    });
    pg.broadcast(epoch, 0);
    pg.broadcast(host_params, 0);
    pg.broadcast(host_velocity, 0);
    model.upload(host_params, &host_velocity);
    first_epoch = static_cast<std::uint64_t>(epoch[0]);
    if (lead && !o.quiet)
      std::printf("resumed from %s at epoch %llu\n", o.checkpoint.c_str(),
                  static_cast<unsigned long long>(first_epoch));
  }

  ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = o.seed});
  std::vector<ddp::work> pending;
  for (auto epoch = static_cast<int>(first_epoch); epoch < o.epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    auto batches = ddp::batches(sampler, static_cast<std::size_t>(o.batch_size));
    example::progress bar(epoch + 1, o.epochs, batches.size(), lead && !o.quiet && !o.json);
    example::gpu::buffer<float> losses(std::max<std::size_t>(batches.size(), 1)); // one per step
    check(cudaMemsetAsync(losses.data(), 0, losses.size() * sizeof(float), ctx.stream()),
          "cudaMemsetAsync (losses)");
    std::size_t step = 0, seen = 0;
    for (auto batch : batches) {
      load_batch(model, train_dev, staging, batch, ctx.stream());
      const int b = static_cast<int>(batch.size());
      model.forward(b);
      // Backward, last layer first; each layer's gradients start their reduction at once.
      model.backward(b, losses.data() + step, [&](int l) {
        // process_group's collectives do not follow the compute stream: the host waits
        // for the layer first. DDP follows it (compute_stream above).
        if (!dp) ctx.sync();
        const auto k = 2 * static_cast<std::size_t>(l);
        for (auto kk : {k, k + 1}) {
          auto grad = model.grad(kk);
          if (dp)
            dp->mark_grad_ready(grad);
          else if constexpr (ddp::accepts_device_tensors_v<Backend>)
            pending.push_back(pg.all_reduce_async(grad, ddp::op::avg));
          else
            pg.all_reduce(grad, ddp::op::avg); // Gloo: staged, blocking
        }
      });
      if (dp) {
        dp->synchronize();
      } else {
        for (auto& w : pending)
          w.stream_wait(ctx.stream()); // the compute stream waits for it on the device, not the host
      }
      const float lr = example::learning_rate(
          o, (epoch + static_cast<double>(step) / static_cast<double>(batches.size())) / o.epochs);
      model.sgd_step(lr, o.momentum);
      ctx.sync(); // the index staging buffer is reused by the next step
      for (auto& w : pending)
        w.wait(); // done by now (the stream drained after them): reports a failure
      pending.clear();
      seen += batch.size() * static_cast<std::size_t>(pg.size());
      ++step;
      if (!o.step_log.empty()) { // global loss of this step (costs one small all-reduce)
        float l = 0;
        check(cudaMemcpy(&l, losses.data() + step - 1, sizeof l, cudaMemcpyDeviceToHost),
              "cudaMemcpy (loss)");
        std::vector<double> lv{l};
        pg.all_reduce(lv, ddp::op::avg);
        if (lead) steps << lv[0] << "\n";
      }
      bar.update(step, seen, 0.0);
    }
    bar.finish();
    std::vector<float> step_losses(losses.size());
    check(
        cudaMemcpy(step_losses.data(), losses.data(), losses.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy (losses)");
    double loss_sum = 0;
    for (std::size_t s = 0; s < step; ++s)
      loss_sum += step_losses[s];
    std::vector<double> totals{loss_sum, static_cast<double>(step)};
    pg.all_reduce(totals);
    const double train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
    const double acc = evaluate(pg, model, test_dev, staging, ctx);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (lead) {
      if (o.json)
        std::printf("{\"epoch\":%d,\"train_loss\":%s,\"test_acc\":%s,\"epoch_s\":%.4f,\"device\":\"cuda\","
                    "\"backend\":\"%s\",\"bucketing\":\"%s\",\"grad_sync\":\"%s\",\"world\":%d}\n",
                    epoch + 1, json_number(train_loss).c_str(), json_number(acc).c_str(), secs,
                    g.backend.c_str(), g.bucketing.c_str(), g.grad_sync.c_str(), pg.size());
      else if (!o.quiet)
        std::printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.2f s\n", epoch + 1, o.epochs,
                    train_loss, 100 * acc, secs);
      std::fflush(stdout);
      if (csv.is_open()) csv << epoch + 1 << "," << train_loss << "," << acc << "," << secs << std::endl;
      if (!o.checkpoint.empty()) {
        model.download(host_params, host_velocity);
        example::position at;
        at.epoch = static_cast<std::uint64_t>(epoch + 1); // an epoch's end: batch 0, no running loss
        at.batch_size = static_cast<std::uint32_t>(o.batch_size);
        example::save_checkpoint(o.checkpoint, at, state_of(model, host_params, host_velocity));
      }
    }
  }
  return 0;
}

template <class Backend> int train_with(const example::options& o, const gpu_options& g) {
  if (g.bucketing == "per_tensor") return train<Backend, ddp::bucketing::per_tensor>(o, g);
  if (g.bucketing == "single_buffer") return train<Backend, ddp::bucketing::single_buffer>(o, g);
  return train<Backend, ddp::bucketing::size_capped<>>(o, g);
}

} // namespace

int main(int argc, char** argv) {
  try {
    ddp::consume_local_rank_arg(argc, argv);
  } catch (const ddp::error& e) {
    std::fprintf(stderr, "fashion_mnist_cuda: %s\n", e.what());
    return 2;
  }
  CLI::App app{"Fashion-MNIST MLP (784-256-128-10) on the GPU, trained with ddp"};
  app.footer(
      "Also accepted: --local_rank N, --local_rank=N, --local-rank=N (from torch.distributed.launch),\n"
      "checked against LOCAL_RANK. Without a CUDA device: exits 77 and says why.\n");
  example::options o;
  example::add_common_options(app, o);
  gpu_options g;
  app.add_option("--backend", g.backend, "nccl (one GPU per rank) or gloo (ranks may share a GPU)")
      ->check(CLI::IsMember({"nccl", "gloo"}))
      ->capture_default_str();
  app.add_option("--bucketing", g.bucketing,
                 "DDP's bucketing policy: size_capped, per_tensor or single_buffer")
      ->check(CLI::IsMember({"size_capped", "per_tensor", "single_buffer"}))
      ->capture_default_str();
  app.add_option("--grad-sync", g.grad_sync,
                 "ddp (distributed_data_parallel) or all_reduce (one process_group all-reduce per gradient)")
      ->check(CLI::IsMember({"ddp", "all_reduce"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.checkpoint_every != 0) {
    std::fprintf(stderr, "--checkpoint-every: the CUDA example saves at the end of each epoch only (the CPU "
                         "example also saves mid-epoch); drop the option\n");
    return 2;
  }

  // Options are checked above without touching CUDA; from here on a GPU is needed.
  int devices = 0;
  if (const auto e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("SKIP: fashion_mnist_cuda needs a CUDA device (cudaGetDeviceCount: %s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  try {
    return g.backend == "gloo" ? train_with<ddp::gloo>(o, g) : train_with<ddp::nccl>(o, g);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist_cuda: %s\n", e.what());
    return 1;
  }
}
