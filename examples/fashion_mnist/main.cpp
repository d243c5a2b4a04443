// Fashion-MNIST with an Eigen MLP, trained data-parallel with ddp.
//
//   ddprun --nproc-per-node 2 build/examples/fashion_mnist/fashion_mnist --epochs 10
//
// The training code is a template on the backend: this file builds a Gloo binary
// (fashion_mnist) and, where NCCL is found, an NCCL one (fashion_mnist_nccl).
#include "checkpoint.hpp"
#include "cli.hpp"
#include "json_number.hpp"
#include "mlp.hpp"
#include "progress.hpp"

#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>
#include <ddp/global_batches.hpp>
#include <ddp/sharded_data_parallel.hpp>
#ifdef DDP_EXAMPLE_NCCL
#include <ddp/backend/nccl.hpp>
#endif

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <csignal>
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

std::vector<example::named_tensor> state_of_weights(example::mlp& m) {
  std::vector<example::named_tensor> t;
  for (int l = 0; l < example::mlp::layers; ++l) {
    auto name = "fc" + std::to_string(l + 1);
    t.push_back({name + ".weight", {m.w[l].data(), static_cast<std::size_t>(m.w[l].size())}});
    t.push_back({name + ".bias", {m.b[l].data(), static_cast<std::size_t>(m.b[l].size())}});
  }
  return t;
}

/// A mid-epoch position counts batches of this batch size over this many ranks; says so
/// (rank 0 says where it resumed).
template <class PG> void check_mid_epoch(PG& pg, const options& o, const example::position& start) {
  if (start.batch > 0 && (start.loss_sums.size() != static_cast<std::size_t>(pg.size()) ||
                          start.batch_size != static_cast<std::uint32_t>(o.batch_size)))
    throw ddp::error(ddp::error_kind::config,
                     "checkpoint " + o.checkpoint + " was saved mid-epoch by " +
                         std::to_string(start.loss_sums.size()) + " ranks with --batch-size " +
                         std::to_string(start.batch_size) + "; this run has " + std::to_string(pg.size()) +
                         " ranks and --batch-size " + std::to_string(o.batch_size) +
                         ": resume with those, or from a checkpoint saved at the end of an epoch");
  if (pg.rank() == 0 && !o.quiet)
    std::printf("resumed from %s at epoch %llu, batch %llu\n", o.checkpoint.c_str(),
                static_cast<unsigned long long>(start.epoch), static_cast<unsigned long long>(start.batch));
}

/// --global-batch-size: a mid-epoch position counts global batches of one size, at any world size.
template <class PG> void check_mid_epoch_global(PG& pg, const options& o, const example::position& start) {
  if (start.batch > 0 && start.batch_size != o.global_batch_size)
    throw ddp::error(ddp::error_kind::config,
                     "checkpoint " + o.checkpoint + " was saved mid-epoch with a global batch of " +
                         std::to_string(start.batch_size) + " samples; this run has --global-batch-size " +
                         std::to_string(o.global_batch_size) +
                         ": resume with that, or from a checkpoint saved at the end of an epoch");
  if (pg.rank() == 0 && !o.quiet)
    std::printf("resumed from %s at epoch %llu, global step %llu of it, on %d ranks\n", o.checkpoint.c_str(),
                static_cast<unsigned long long>(start.epoch), static_cast<unsigned long long>(start.batch),
                pg.size());
}

/// --dump-params: every parameter's values as raw float32, in for_each_parameter order.
void dump_params(const std::string& path, example::mlp& m) {
  std::ofstream f;
  open_or_throw(f, path, std::ios::binary | std::ios::trunc, "--dump-params");
  m.for_each_parameter([&](const std::string&, auto& value, auto&) {
    f.write(reinterpret_cast<const char*>(value.data()),
            static_cast<std::streamsize>(static_cast<std::size_t>(value.size()) * sizeof(float)));
  });
  f.close();
  if (!f)
    throw ddp::error(ddp::error_kind::config,
                     "--dump-params " + path + ": writing failed (" + std::strerror(errno) + ")");
}

/// Rank 0 loads and verifies; every rank learns whether that worked, then receives the state.
template <class PG>
example::position resume(PG& pg, const std::string& path, std::vector<example::named_tensor> state,
                         std::uint64_t max_epoch) {
  example::position pos;
  on_rank0(pg, "could not load the checkpoint",
           [&] { pos = example::load_checkpoint(path, state, max_epoch); });
  std::vector<std::int64_t> head{static_cast<std::int64_t>(pos.epoch), static_cast<std::int64_t>(pos.batch),
                                 pos.batch_size, static_cast<std::int64_t>(pos.loss_sums.size())};
  pg.broadcast(head, 0);
  pos.epoch = static_cast<std::uint64_t>(head[0]);
  pos.batch = static_cast<std::uint64_t>(head[1]);
  pos.batch_size = static_cast<std::uint32_t>(head[2]);
  pos.loss_sums.resize(static_cast<std::size_t>(head[3]));
  if (!pos.loss_sums.empty()) pg.broadcast(pos.loss_sums, 0);
  for (auto& t : state)
    pg.broadcast(t.data, 0);
  return pos;
}

/// For tests only: FASHION_MNIST_TEST_KILL="<rank>:<step>" makes that rank kill itself with
/// SIGKILL (what kill -9 does) right after global step <step> (counted from the first epoch,
/// 1-based) in the job's first round (DDP_RESTART_ROUND unset or 0): a deterministic moment
/// for the restart tests, which need a rank to die mid-epoch.
void maybe_die_for_test(int rank, int round, std::uint64_t global_step) {
  static const auto spec = [] {
    std::pair<int, std::uint64_t> s{-1, 0};
    if (const char* v = std::getenv("FASHION_MNIST_TEST_KILL"))
      if (std::sscanf(v, "%d:%llu", &s.first, reinterpret_cast<unsigned long long*>(&s.second)) != 2)
        s.first = -1;
    return s;
  }();
  if (round == 0 && rank == spec.first && global_step == spec.second) {
    std::fprintf(stderr, "fashion_mnist: FASHION_MNIST_TEST_KILL: rank %d kills itself after step %llu\n",
                 rank, static_cast<unsigned long long>(global_step));
    std::fflush(stderr);
    ::raise(SIGKILL);
  }
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
  const int round = pg.topology().restart_round.value_or(0); // > 0: restarted by ddprun
  const bool resuming = example::resumes(pg, o);
  // Rank 0 writes the checkpoint and the logs: prove it can before anyone trains. A read-only
  // checkpoint directory once failed only after a whole epoch, and then after the others' timeout.
  std::ofstream csv, steps;
  on_rank0(pg, "cannot write its output files", [&] {
    if (!o.checkpoint.empty()) example::check_writable(o.checkpoint);
    if (!o.metrics_csv.empty()) {
      open_or_throw(csv, o.metrics_csv, resuming ? std::ios::app : std::ios::trunc, "--metrics-csv");
      if (!resuming) csv << "epoch,train_loss,test_acc,epoch_s\n";
    }
    // A resumed run's lines go on after those of the steps it resumes from.
    if (!o.step_log.empty())
      open_or_throw(steps, o.step_log, resuming ? std::ios::app : std::ios::trunc, "--step-log");
  });
  auto stopped = [&](std::uint64_t step) {
    if (lead && !o.quiet)
      std::printf("stopped after global step %llu (--stop-after-steps), checkpoint %s\n",
                  static_cast<unsigned long long>(step), o.checkpoint.c_str());
    return 0;
  };
  // With Gloo the gradients go in memory the node's ranks share: DDP then
  // reduces each bucket in place there (bench/grad_sync: ResNet-50 shapes
  // ~2x faster than through the segment's copies).
  example::mlp model = [&] {
    if constexpr (std::is_same_v<Backend, ddp::gloo>)
      return example::mlp(o.seed, ddp::arena<float>(example::mlp::sizes(), pg));
    else
      return example::mlp(o.seed);
  }();
  // The epochs, for either data-parallel kind: `optimizer_step(lr)` updates the model, `state()`
  // lists what rank 0's checkpoint holds, `save_optimizer()` writes what each rank keeps itself.
  auto run = [&](auto& dp, auto&& optimizer_step, auto&& state, auto&& save_optimizer,
                 example::position start) -> int {
    ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = o.seed});

    example::matrix x;
    std::vector<int> y;
    // Rank 0 saves; every rank's running loss goes with it, so a resumed epoch reports what an
    // uninterrupted one would.
    auto save = [&](std::uint64_t epoch, std::uint64_t batch, double loss_sum) {
      std::vector<double> sums(static_cast<std::size_t>(pg.size()), 0.0);
      if (batch > 0) pg.all_gather(std::vector<double>{loss_sum}, sums);
      if (lead)
        example::save_checkpoint(
            o.checkpoint, {epoch, batch, static_cast<std::uint32_t>(o.batch_size), std::move(sums)}, state());
      save_optimizer(); // sharded: each rank's shard of the optimizer's state
    };
    for (auto epoch = static_cast<int>(start.epoch); epoch < o.epochs; ++epoch) {
      auto t0 = std::chrono::steady_clock::now();
      sampler.set_epoch(static_cast<std::uint64_t>(epoch));
      auto batches = ddp::batches(sampler, static_cast<std::size_t>(o.batch_size));
      const bool mid = static_cast<std::uint64_t>(epoch) == start.epoch && start.batch > 0;
      const std::size_t first = mid ? static_cast<std::size_t>(start.batch) : 0;
      example::progress bar(epoch + 1, o.epochs, batches.size(), lead && !o.quiet && !o.json);
      double loss_sum = mid ? start.loss_sums[static_cast<std::size_t>(pg.rank())] : 0.0;
      std::size_t step = first, seen = first * static_cast<std::size_t>(o.batch_size * pg.size());
      for (auto batch : batches.from(first)) {
        gather(train_set, batch, x, y);
        model.forward(x);
        // Backward, last layer first; each layer's gradients start their all-reduce at once.
        float loss = model.backward(y, [&](int l) {
          dp.mark_grad_ready(model.dw[l]);
          dp.mark_grad_ready(model.db[l]);
        });
        dp.synchronize();
        optimizer_step(learning_rate(
            o, (epoch + static_cast<double>(step) / static_cast<double>(batches.size())) / o.epochs));
        loss_sum += loss;
        seen += batch.size() * static_cast<std::size_t>(pg.size());
        ++step;
        const auto global_step = static_cast<std::uint64_t>(epoch) * batches.size() + step;
        if (!o.step_log.empty()) { // global loss of this step (costs one small all-reduce)
          std::vector<double> l{loss};
          pg.all_reduce(l, ddp::op::avg);
          if (lead) steps << global_step << " " << l[0] << "\n";
        }
        bar.update(step, seen, loss_sum / static_cast<double>(step));
        if (o.checkpoint_every && global_step % o.checkpoint_every == 0 && step < batches.size())
          save(static_cast<std::uint64_t>(epoch), step, loss_sum); // mid-epoch (the epoch's end saves below)
        maybe_die_for_test(pg.rank(), round, global_step);
        if (global_step == o.stop_after_steps) { // as a preemption would: save, then leave
          bar.finish();
          if (step < batches.size())
            save(static_cast<std::uint64_t>(epoch), step, loss_sum);
          else
            save(static_cast<std::uint64_t>(epoch + 1), 0, 0.0);
          return stopped(global_step);
        }
      }
      bar.finish();
      std::vector<double> totals{loss_sum, static_cast<double>(step)};
      pg.all_reduce(totals);
      const double train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
      const double acc = evaluate(pg, model, test_set);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (lead) {
        if (o.json)
          std::printf("{\"epoch\":%d,\"train_loss\":%s,\"test_acc\":%s,\"epoch_s\":%.4f}\n", epoch + 1,
                      json_number(train_loss).c_str(), json_number(acc).c_str(), secs);
        else if (!o.quiet)
          std::printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.2f s\n", epoch + 1, o.epochs,
                      train_loss, 100 * acc, secs);
        std::fflush(stdout);
        if (csv.is_open()) csv << epoch + 1 << "," << train_loss << "," << acc << "," << secs << std::endl;
      }
      if (!o.checkpoint.empty()) save(static_cast<std::uint64_t>(epoch + 1), 0, 0.0);
    }
    return 0;
  };

  // --global-batch-size: G samples per global step whatever the world size, each rank a share
  // of G / W (uneven shares allowed), reduced to the sample-weighted mean (set_samples). The
  // steps, their samples and the learning rate depend on G only, so a checkpoint resumes on
  // any world size, mid-epoch too, along the same trajectory.
  auto run_global = [&](auto& dp, auto&& optimizer_step, auto&& state, example::position start) -> int {
    ddp::distributed_sampler<ddp::sampling::shuffled> sampler(n, pg, {.seed = o.seed});
    const auto g = static_cast<std::size_t>(o.global_batch_size);
    ddp::global_batches view(sampler, g);
    const std::uint64_t per_epoch = view.steps_per_epoch();
    const std::uint64_t total = static_cast<std::uint64_t>(o.epochs) * per_epoch;
    std::uint64_t s = start.epoch * per_epoch + start.batch;
    if (start.batch > 0) { // only the rest of the epoch, split among this job's ranks
      sampler.set_epoch(start.epoch);
      sampler.set_position(view.position_of(s));
    }
    // This rank's sum of loss x samples over the epoch so far; rank 0 carries the saved job's.
    double loss_sum = lead && start.batch > 0 && !start.loss_sums.empty() ? start.loss_sums[0] : 0.0;
    std::size_t seen = 0;
    auto save = [&](std::uint64_t done) {
      std::vector<double> sum{loss_sum};
      pg.all_reduce(sum);
      if (lead)
        example::save_checkpoint(
            o.checkpoint, {done / per_epoch, done % per_epoch, static_cast<std::uint32_t>(g), {sum[0]}},
            state());
    };
    example::matrix x;
    std::vector<int> y;
    std::optional<example::progress> bar;
    auto t0 = std::chrono::steady_clock::now();
    while (s < total) {
      const std::uint64_t epoch = view.epoch_of(s), j = s % per_epoch;
      if (!bar) {
        t0 = std::chrono::steady_clock::now();
        bar.emplace(static_cast<int>(epoch) + 1, o.epochs, per_epoch, lead && !o.quiet && !o.json);
      }
      const auto b = view.at(s);
      dp.set_samples(b.local_samples(), b.global_samples());
      float loss = 0;
      if (b.local_samples() > 0) {
        gather(train_set, b.indices, x, y);
        model.forward(x);
        loss = model.backward(y, [&](int l) {
          dp.mark_grad_ready(model.dw[l]);
          dp.mark_grad_ready(model.db[l]);
        });
      } else { // no sample of this step here: this rank contributes nothing
        for (int l = 0; l < example::mlp::layers; ++l) {
          model.dw[l].setZero();
          model.db[l].setZero();
        }
      }
      dp.synchronize();
      optimizer_step(learning_rate(
          o,
          (static_cast<double>(epoch) + static_cast<double>(j) / static_cast<double>(per_epoch)) / o.epochs));
      const double weighted = static_cast<double>(loss) * static_cast<double>(b.local_samples());
      loss_sum += weighted;
      seen += b.global_samples();
      ++s;
      if (!o.step_log.empty()) { // the global batch's sample-weighted mean loss (one small all-reduce)
        std::vector<double> l{weighted};
        pg.all_reduce(l);
        if (lead) steps << s << " " << l[0] / static_cast<double>(b.global_samples()) << "\n";
      }
      bar->update(static_cast<std::size_t>(j + 1), seen, loss);
      maybe_die_for_test(pg.rank(), round, s);
      const bool epoch_end = s % per_epoch == 0;
      if (!o.checkpoint.empty() && o.checkpoint_every && s % o.checkpoint_every == 0 && !epoch_end) save(s);
      if (epoch_end) {
        bar->finish();
        bar.reset();
        std::vector<double> totals{loss_sum};
        pg.all_reduce(totals);
        const double train_loss = totals[0] / static_cast<double>(n);
        const double acc = evaluate(pg, model, test_set);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (lead) {
          if (o.json)
            std::printf("{\"epoch\":%llu,\"train_loss\":%s,\"test_acc\":%s,\"epoch_s\":%.4f}\n",
                        static_cast<unsigned long long>(epoch + 1), json_number(train_loss).c_str(),
                        json_number(acc).c_str(), secs);
          else if (!o.quiet)
            std::printf("epoch %llu/%d: train loss %.4f, test accuracy %.2f%%, %.2f s\n",
                        static_cast<unsigned long long>(epoch + 1), o.epochs, train_loss, 100 * acc, secs);
          std::fflush(stdout);
          if (csv.is_open()) csv << epoch + 1 << "," << train_loss << "," << acc << "," << secs << std::endl;
        }
        loss_sum = 0;
        seen = 0;
      }
      if (epoch_end && !o.checkpoint.empty()) save(s);
      if (s == o.stop_after_steps) { // as a preemption would: save, then leave
        if (bar) bar->finish();
        if (!epoch_end) save(s);
        return stopped(s);
      }
    }
    return 0;
  };

  if constexpr (!std::is_same_v<Backend, ddp::gloo>) {
    if (o.sharded)
      throw ddp::error(ddp::error_kind::config,
                       "--sharded runs over Gloo (host memory): use the fashion_mnist binary");
  } else if (o.sharded) {
    // ZeRO-1: each rank keeps the momentum of its 1/W of the weights; the
    // checkpoint holds the weights, and each rank's momentum goes beside it.
    ddp::sharded_data_parallel dp(model, pg);
    ddp::optim::sgd opt(dp, {.lr = o.lr, .momentum = o.momentum});
    auto weights = [&] { return state_of_weights(model); };
    example::position start;
    if (resuming) {
      start = resume(pg, o.checkpoint, weights(), static_cast<std::uint64_t>(o.epochs));
      opt.load(o.checkpoint + ".optim");
      check_mid_epoch(pg, o, start);
    }
    return run(
        dp,
        [&](float lr) {
          opt.options().lr = lr;
          opt.step();
        },
        weights, [&] { opt.save(o.checkpoint + ".optim"); }, start);
  }
  ddp::distributed_data_parallel dp(model, pg); // checks the model on every rank, copies rank 0's weights
  example::sgd_momentum opt{o.lr, o.momentum, {}};
  example::position start;
  if (resuming) {
    opt.step(model); // allocates the momentum buffers (gradients are zero: no change)
    start = resume(pg, o.checkpoint, state_of(model, opt), static_cast<std::uint64_t>(o.epochs));
    if (o.global_batch_size)
      check_mid_epoch_global(pg, o, start);
    else
      check_mid_epoch(pg, o, start);
  }
  auto step = [&](float lr) {
    opt.lr = lr;
    opt.step(model);
  };
  auto state = [&] { return state_of(model, opt); };
  const int rc = o.global_batch_size ? run_global(dp, step, state, start)
                                     : run(
                                           dp, step, state, [] {}, start);
  if (!o.dump_params.empty())
    on_rank0(pg, "could not write --dump-params", [&] { dump_params(o.dump_params, model); });
  return rc;
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
  auto* global =
      app.add_option("--global-batch-size", o.global_batch_size,
                     "samples per global step, whatever the world size: each rank takes a share "
                     "of G / W (shares may differ by one), gradients are the sample-weighted mean; "
                     "its checkpoints resume on any world size, mid-epoch too")
          ->transform(example::whole_number(1, 1 << 20))
          ->excludes("--batch-size")
          ->excludes("--sharded");
  (void)global;
  app.add_option("--stop-after-steps", o.stop_after_steps,
                 "save the checkpoint and exit after this many global steps, as a preemption would")
      ->transform(example::whole_number(1, std::numeric_limits<std::uint64_t>::max()))
      ->needs("--checkpoint");
  app.add_option(
      "--dump-params", o.dump_params,
      "at the end, rank 0 writes every parameter here as raw float32, in for_each_parameter order");
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
