// Fashion-MNIST with an Eigen MLP, trained data-parallel with ddp.
//
//   ddprun --nproc-per-node 2 build/examples/fashion_mnist/fashion_mnist --epochs 10
//
// The training code is a template on the backend: this file builds a Gloo binary
// (fashion_mnist) and, where NCCL is found, an NCCL one (fashion_mnist_nccl).
#include "checkpoint.hpp"
#include "cli.hpp"
#include "mlp.hpp"
#include "progress.hpp"

#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>
#ifdef DDP_EXAMPLE_NCCL
#include <ddp/backend/nccl.hpp>
#endif

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>

namespace {

using example::data_hint;
using example::learning_rate;
using example::on_rank0;
using example::open_or_throw;
using example::options;

/// Columns of x for the given sample indices (images are stored one sample per row).
void gather(const ddp::data::labeled_images& d, std::span<const std::int64_t> idx, example::matrix& x,
            std::vector<int>& y) {
  x.resize(d.images.cols(), static_cast<Eigen::Index>(idx.size()));
  y.resize(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    x.col(static_cast<Eigen::Index>(j)) = d.images.row(idx[j]).transpose();
    y[j] = d.labels[static_cast<std::size_t>(idx[j])];
  }
}

std::vector<example::named_tensor> state_of(example::mlp& m, example::sgd_momentum& opt) {
  std::vector<example::named_tensor> t;
  for (int l = 0; l < example::mlp::layers; ++l) {
    auto name = "fc" + std::to_string(l + 1);
    t.push_back({name + ".weight", {m.w[l].data(), static_cast<std::size_t>(m.w[l].size())}});
    t.push_back({name + ".bias", {m.b[l].data(), static_cast<std::size_t>(m.b[l].size())}});
  }
  for (std::size_t k = 0; k < opt.velocity.size(); ++k)
    t.push_back({t[k].name + ".momentum",
                 {opt.velocity[k].data(), static_cast<std::size_t>(opt.velocity[k].size())}});
  return t;
}

/// Rank 0 loads and verifies; every rank learns whether that worked, then receives the state.
template <class PG>
std::uint64_t resume(PG& pg, const std::string& path, std::vector<example::named_tensor> state,
                     std::uint64_t max_epoch) {
  std::vector<std::int64_t> epoch{0};
  on_rank0(pg, "could not load the checkpoint",
           [&] { epoch[0] = static_cast<std::int64_t>(example::load_checkpoint(path, state, max_epoch)); });
  pg.broadcast(epoch, 0);
  for (auto& t : state)
    pg.broadcast(t.data, 0);
  return static_cast<std::uint64_t>(epoch[0]);
}

/// Test accuracy: each rank scores every size()-th test sample, then one all-reduce.
template <class PG> double evaluate(PG& pg, example::mlp& m, const ddp::data::labeled_images& test) {
  std::vector<std::int64_t> idx;
  for (auto i = static_cast<std::size_t>(pg.rank()); i < test.size();
       i += static_cast<std::size_t>(pg.size()))
    idx.push_back(static_cast<std::int64_t>(i));
  std::vector<double> counts{0, static_cast<double>(idx.size())};
  example::matrix x;
  std::vector<int> y;
  for (std::size_t start = 0; start < idx.size(); start += 1000) {
    std::span<const std::int64_t> part(idx.data() + start, std::min<std::size_t>(1000, idx.size() - start));
    gather(test, part, x, y);
    const auto& logits = m.forward(x);
    for (Eigen::Index c = 0; c < logits.cols(); ++c) {
      Eigen::Index best;
      logits.col(c).maxCoeff(&best);
      counts[0] += best == y[static_cast<std::size_t>(c)];
    }
  }
  pg.all_reduce(counts);
  return counts[0] / counts[1];
}

template <class Backend> int train(const options& o) {
  // Data first: a missing file fails on every rank before anyone waits for a peer.
  // Every label must index one of the model's outputs: the reader refuses others, naming the byte.
  auto train_set =
      ddp::data::read_idx(o.data + "/train-images-idx3-ubyte.gz", o.data + "/train-labels-idx1-ubyte.gz",
                          example::mlp::classes, data_hint);
  auto test_set =
      ddp::data::read_idx(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz",
                          example::mlp::classes, data_hint);
  const std::size_t n = o.limit ? static_cast<std::size_t>(std::min<std::uint64_t>(o.limit, train_set.size()))
                                : train_set.size();

  auto pg = ddp::init_process_group<Backend>();
  const bool lead = pg.rank() == 0;
  // Rank 0 writes the checkpoint and the logs: prove it can before anyone trains. A read-only
  // checkpoint directory once failed only after a whole epoch, and then after the others' timeout.
  std::ofstream csv, steps;
  on_rank0(pg, "cannot write its output files", [&] {
    if (!o.checkpoint.empty()) example::check_writable(o.checkpoint);
    if (!o.metrics_csv.empty()) {
      open_or_throw(csv, o.metrics_csv, o.resume ? std::ios::app : std::ios::trunc, "--metrics-csv");
      if (!o.resume) csv << "epoch,train_loss,test_acc,epoch_s\n";
    }
    if (!o.step_log.empty()) open_or_throw(steps, o.step_log, std::ios::trunc, "--step-log");
  });
  example::mlp model(o.seed);
  ddp::distributed_data_parallel dp(model, pg); // checks the model on every rank, copies rank 0's weights
  example::sgd_momentum opt{o.lr, o.momentum, {}};
  std::uint64_t first_epoch = 0;
  if (o.resume) {
    opt.step(model); // allocates the momentum buffers (gradients are zero: no change)
    first_epoch = resume(pg, o.checkpoint, state_of(model, opt), static_cast<std::uint64_t>(o.epochs));
    if (lead && !o.quiet)
      std::printf("resumed from %s at epoch %llu\n", o.checkpoint.c_str(),
                  static_cast<unsigned long long>(first_epoch));
  }

  ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = o.seed});

  example::matrix x;
  std::vector<int> y;
  for (auto epoch = static_cast<int>(first_epoch); epoch < o.epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    auto batches = ddp::batches(sampler, static_cast<std::size_t>(o.batch_size));
    example::progress bar(epoch + 1, o.epochs, batches.size(), lead && !o.quiet && !o.json);
    double loss_sum = 0;
    std::size_t step = 0, seen = 0;
    for (auto batch : batches) {
      gather(train_set, batch, x, y);
      model.forward(x);
      // Backward, last layer first; each layer's gradients start their all-reduce at once.
      float loss = model.backward(y, [&](int l) {
        dp.mark_grad_ready(model.dw[l]);
        dp.mark_grad_ready(model.db[l]);
      });
      dp.synchronize();
      opt.lr = learning_rate(o, (epoch + static_cast<double>(step) / static_cast<double>(batches.size())) /
                                    o.epochs);
      opt.step(model);
      loss_sum += loss;
      seen += batch.size() * static_cast<std::size_t>(pg.size());
      ++step;
      if (!o.step_log.empty()) { // global loss of this step (costs one small all-reduce)
        std::vector<double> l{loss};
        pg.all_reduce(l, ddp::op::avg);
        if (lead) steps << l[0] << "\n";
      }
      bar.update(step, seen, loss_sum / static_cast<double>(step));
    }
    bar.finish();
    std::vector<double> totals{loss_sum, static_cast<double>(step)};
    pg.all_reduce(totals);
    const double train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
    const double acc = evaluate(pg, model, test_set);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (lead) {
      if (o.json)
        std::printf("{\"epoch\":%d,\"train_loss\":%.6f,\"test_acc\":%.6f,\"epoch_s\":%.4f}\n", epoch + 1,
                    train_loss, acc, secs);
      else if (!o.quiet)
        std::printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.2f s\n", epoch + 1, o.epochs,
                    train_loss, 100 * acc, secs);
      std::fflush(stdout);
      if (csv.is_open()) csv << epoch + 1 << "," << train_loss << "," << acc << "," << secs << std::endl;
      if (!o.checkpoint.empty())
        example::save_checkpoint(o.checkpoint, static_cast<std::uint64_t>(epoch + 1), state_of(model, opt));
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // torch.distributed.launch without --use_env adds --local_rank=N: check it against LOCAL_RANK, drop it.
  try {
    ddp::consume_local_rank_arg(argc, argv);
  } catch (const ddp::error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 2;
  }
  CLI::App app{"Fashion-MNIST MLP (784-256-128-10) trained with ddp"};
  app.footer(
      "Also accepted: --local_rank N, --local_rank=N, --local-rank=N (from torch.distributed.launch),\n"
      "checked against LOCAL_RANK.\n");
  options o;
  add_common_options(app, o);
  CLI11_PARSE(app, argc, argv);
  try {
#ifdef DDP_EXAMPLE_NCCL
    return train<ddp::nccl>(o);
#else
    return train<ddp::gloo>(o);
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
